"""`make test` says how long it takes, shows a compact progress and prints few lines
(issue 26, item 12): tools/wheel_tests.py announces the expected duration and runs pytest
with -q; pytest's short summary lists failures and errors only; the wheel's build log
goes to a file."""
from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _wheel_tests():
    spec = importlib.util.spec_from_file_location("wheel_tests", ROOT / "tools" / "wheel_tests.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_wheel_tests_announce_the_duration_and_run_a_compact_pytest(tmp_path, monkeypatch, capsys):
    wt = _wheel_tests()
    assert re.search(r"\d+ minutes on a quiet 2-core machine", wt.EXPECTED)
    assert wt.pytest_command(["-k", "x"]) == [sys.executable, "-m", "pytest", "-q", "-k", "x"]
    (tmp_path / "dist").mkdir()
    (tmp_path / "dist" / "retrieval_metrics-0.1.0-py3-none-any.whl").write_bytes(b"")
    for name in wt.COPIED:
        src = ROOT / name
        (tmp_path / name).mkdir() if src.is_dir() else (tmp_path / name).write_text("")
    calls = []
    monkeypatch.setattr(wt, "ROOT", tmp_path)
    monkeypatch.setattr(wt.subprocess, "call", lambda cmd, **kw: calls.append(cmd) or 0)
    assert wt.main(["-x"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("wheel_tests: the suite against retrieval_metrics-0.1.0-py3-none-any.whl, about ")
    assert calls == [[sys.executable, "-m", "pytest", "-q", "-x"]]


def test_pytest_summary_lists_failures_and_errors_only():
    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    addopts = re.search(r'^addopts = "(.*)"$', text, flags=re.M).group(1).split()
    assert "-ra" not in addopts and "-rfE" in addopts  # -ra printed a line per group of skips


def test_make_test_keeps_the_build_log_and_pip_quiet():
    rules = (ROOT / "Makefile").read_text(encoding="utf-8")
    build = next(line for line in rules.splitlines() if "-m build" in line)
    assert "> build/build.log 2>&1" in build
    install = next(line for line in rules.splitlines() if '[test]"' in line and "dist/" in line)
    assert " -q " in install
