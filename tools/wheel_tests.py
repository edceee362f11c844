"""Runs the test suite against the installed wheel (``make test``), never the source tree.

    .venv-wheel/bin/python tools/wheel_tests.py [PYTEST ARGS...]

Copies what the tests read (tests/, docs/, examples/, benchmarks/, tools/, README.md, the Makefile,
pyproject.toml for pytest's settings) into ``build/wheel-tests`` -- the package
folders stay behind, so ``import retrieval_core`` (and the adapters) can only find
the copy installed in this interpreter's site-packages -- and runs pytest there.
``tests/test_packaging.py`` reads the variables set here to prove which copy ran.

Before pytest starts it says how long the run takes (``EXPECTED``); pytest runs with
``-q``: one character per test and the share done at the end of each line, and (from
pyproject.toml's ``-rfE``) a summary of failures and errors only.
"""
from __future__ import annotations

import glob
import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
COPIED = ("tests", "docs", "examples", "benchmarks", "tools", "README.md", "pyproject.toml", "Makefile",
          "constraints.txt")
PACKAGE_DIRS = ("core", "ignite_retrieval", "lightning_retrieval")
# the last measured runs (update them when the suite grows): CI, and one under load on the
# project's 2-core machine (pytest --durations=60, 2026-11-26, load average about 7)
EXPECTED = ("about 5,850 tests: 11 minutes on a quiet 2-core machine (`bash .ci/run` on 2026-11-27: 5539 passed "
            "in 631 s; with session 36's 300 more, 5839 passed in 788 s while another suite shared the cores), "
            "several times longer when other work shares the cores (27 minutes at a load average of 7)")
PYTEST_OPTIONS = ("-q",)  # compact progress: a dot per test, the percentage done at each line's end


def pytest_command(pytest_args: list) -> list:
    """The pytest command line: the compact options first, so that the caller's can override them."""
    return [sys.executable, "-m", "pytest", *PYTEST_OPTIONS, *pytest_args]


def main(pytest_args: list) -> int:
    wheels = glob.glob(str(ROOT / "dist" / "*.whl"))
    if len(wheels) != 1:
        print(f"wheel_tests: expected one wheel in {ROOT / 'dist'}, found {len(wheels)}: run `make test`",
              file=sys.stderr)
        return 2
    work = ROOT / "build" / "wheel-tests"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    for name in COPIED:
        src = ROOT / name
        if src.is_dir():
            shutil.copytree(src, work / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            shutil.copy2(src, work / name)
    assert not any((work / d).exists() for d in PACKAGE_DIRS)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # nothing may point back at the sources
    env.update(RETRIEVAL_METRICS_TEST_WHEEL=wheels[0], RETRIEVAL_METRICS_SOURCE=str(ROOT),
               RETRIEVAL_METRICS_DIST=str(ROOT / "dist"))
    print(f"wheel_tests: the suite against {Path(wheels[0]).name}, {EXPECTED}", flush=True)
    return subprocess.call(pytest_command(pytest_args), cwd=work, env=env)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
