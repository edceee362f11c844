"""tools/python_env.py, which the Makefile runs before any rule: a Python that torch
2.13.0 does not support is refused in one line, and a virtualenv made by another
Python (or broken) is removed so that make builds it again."""
from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "tools" / "python_env.py"


@pytest.fixture()
def python_env():
    spec = importlib.util.spec_from_file_location("python_env", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def fake_venv(folder: Path, prints: str = None) -> Path:
    """A virtualenv whose bin/python prints ``prints`` as its version, or the real one's."""
    (folder / "bin").mkdir(parents=True)
    python = folder / "bin" / "python"
    if prints is None:
        os.symlink(sys.executable, python)
    else:
        python.write_text(f"#!/bin/sh\necho {prints}\n")
        python.chmod(0o755)
    return folder


def test_a_venv_of_another_python_is_removed(python_env, tmp_path, capsys):
    old = fake_venv(tmp_path / "old", prints="3 9")
    assert python_env.main([str(old)]) == 0
    assert not old.exists()
    assert capsys.readouterr().out.strip() == (f"note: removed {old} (it was made by Python 3.9, and make now runs "
                                               f"Python {sys.version_info[0]}.{sys.version_info[1]}); it is made again")


def test_a_broken_venv_is_removed_and_a_good_one_kept(python_env, tmp_path, capsys):
    broken = tmp_path / "broken"
    broken.mkdir()
    good = fake_venv(tmp_path / "good")
    assert python_env.main([str(broken), str(good), str(tmp_path / "absent")]) == 0
    assert not broken.exists() and good.exists()
    assert "removed" in capsys.readouterr().out and "half-made or broken" in str(python_env.venv_problem(broken))
    assert python_env.main([str(good)]) == 0 and capsys.readouterr().out == "ok\n"


@pytest.mark.parametrize("version", [(3, 9, 18), (3, 15, 0), (2, 7, 18)])
def test_a_python_torch_does_not_support_is_refused_in_one_line(python_env, monkeypatch, capsys, version):
    monkeypatch.setattr(python_env.sys, "version_info", version)
    assert python_env.main([]) == 1
    out = capsys.readouterr().out
    assert len(out.splitlines()) == 1 and out.startswith("error: ") and "needs Python 3.10 to 3.14" in out
    assert f"is Python {version[0]}.{version[1]}" in out


def test_make_rebuilds_a_venv_made_by_another_python(tmp_path):
    old = fake_venv(tmp_path / "venv", prints="3 9")
    proc = subprocess.run(["make", "-n", "test-dev", f"PYTHON={sys.executable}", f"VENV={old}",
                           f"WHEEL_VENV={tmp_path / 'wheel-venv'}"], cwd=ROOT, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert f"note: removed {old}" in proc.stdout and not old.exists()
    assert f"-m venv {old}" in proc.stdout  # ...and make is about to create it again
