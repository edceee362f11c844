"""The README's Python snippets run as written and print what their comments show.

A ``print(...)`` line whose comment starts with the expected output (``...`` matches
anything, as in doctest; an explanation may follow after " — ") is checked against
the line the snippet printed. Each snippet runs in a fresh interpreter.
"""
from __future__ import annotations

import doctest
import re
import subprocess
import sys
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"
BLOCKS = re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), flags=re.S)


def _expected_prints(code: str) -> list:
    out = []
    for line in code.splitlines():
        if line.lstrip().startswith("print(") and "  # " in line:
            out.append(line.split("  # ", 1)[1].strip().split(" — ")[0])
    return out


def test_readme_has_snippets():
    assert len(BLOCKS) >= 4


@pytest.mark.parametrize("code", BLOCKS, ids=[f"snippet{i}" for i in range(len(BLOCKS))])
def test_readme_snippet(code, tmp_path):
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    printed = [line for line in proc.stdout.splitlines() if line.strip()]
    expected = _expected_prints(code)
    assert len(printed) == len(expected), (printed, expected)
    checker = doctest.OutputChecker()
    for want, got in zip(expected, printed):
        assert checker.check_output(want + "\n", got + "\n", doctest.ELLIPSIS), f"printed {got!r}, README shows {want!r}"


def test_examples_demo_runs():
    """examples/demo.py, whose run hint the README's layout points to, runs and prints its table."""
    demo = README.parent / "examples" / "demo.py"
    proc = subprocess.run([sys.executable, str(demo)], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "ndcg@10" in proc.stdout and "users with no relevant item are skipped" in proc.stdout
