"""Run the cross-checks against Microsoft Recommenders' and RecBole's own code
(tests/anchors/recommenders/, tests/anchors/recbole/) with their packages loaded from a folder of their own.

Usage (from the repository root; see docs/metrics.md, "Microsoft Recommenders and RecBole")::

    python tests/anchors/suites/run_recommenders.py --install   # pip install --no-deps --target DIR first
    python tests/anchors/suites/run_recommenders.py              # DIR already filled

DIR is ``$REC_ANCHORS_SITE`` (default ``/tmp/rec_anchors_site``). ``--install`` puts
``rec_env.PACKAGES`` there with ``pip install --no-deps --target`` (never into the
environment; no torch among them). One pytest process runs the checks with DIR first on
its path (its pandas 2 before the environment's pandas 3, as Recommenders needs).
Printed: the versions loaded, then passed / failed / skipped counts per module and every
failing test id. Exit status 0 when everything ran and passed, 1 otherwise.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Dict

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[2]
if str(REPO) not in sys.path:  # run as a script: the repository's tests package
    sys.path.insert(0, str(REPO))
from tests.anchors.recommenders.rec_env import SITE_VARIABLE, install  # noqa: E402
from tests.anchors.suites.run import junit_outcome  # noqa: E402

SUITE = ["tests/anchors/recommenders", "tests/anchors/recbole"]
DEFAULT_SITE = "/tmp/rec_anchors_site"
_VERSIONS = ("import importlib.metadata as m, pandas, numpy, torch; "
             "print('recommenders', m.version('recommenders'), '| recbole', m.version('recbole'), "
             "'| pandas', pandas.__version__, '| numpy', numpy.__version__, '| torch', torch.__version__, "
             "'from', torch.__file__)")


def _env(site: Path) -> Dict[str, str]:
    env = dict(os.environ)
    # the repository before the site (Recommenders' wheel puts a `tests` folder there), the
    # site before the environment's packages (PYTHONPATH precedes site-packages)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO / "core"), str(REPO), str(site)])
    env[SITE_VARIABLE] = str(site)
    env.setdefault("OMP_NUM_THREADS", "1")
    return env


def run_suite(site: Path, timeout: float = 1800) -> Dict:
    """Counts per test module, the failing test ids with their messages, and pytest's
    output tail."""
    with tempfile.TemporaryDirectory() as tmp:
        junit = Path(tmp) / "junit.xml"
        cmd = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-rs", "-o", "junit_family=xunit1",
               f"--junitxml={junit}", *SUITE]
        proc = subprocess.run(cmd, cwd=REPO, env=_env(site), text=True, capture_output=True, timeout=timeout)
        if not junit.exists():
            raise RuntimeError(f"pytest produced no report (exit {proc.returncode}):\n{proc.stdout[-4000:]}")
        counts: Dict[str, Dict[str, int]] = {}
        failures: Dict[str, str] = {}
        for case in ET.parse(junit).iter("testcase"):
            outcome, message = junit_outcome(case, lambda props: True)
            module = case.get("classname", "").rsplit(".", 1)[-1]
            counts.setdefault(module, {"passed": 0, "failed": 0, "skipped": 0})[outcome] += 1
            if outcome == "failed":
                failures[f"{case.get('classname')}::{case.get('name')}"] = message
    return {"counts": counts, "failures": failures, "output": proc.stdout[-2000:]}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--install", action="store_true", help="pip install --no-deps --target the site first")
    parser.add_argument("--site", default=os.environ.get(SITE_VARIABLE, DEFAULT_SITE))
    args = parser.parse_args(argv)
    site = Path(args.site).resolve()
    if args.install:
        install(site)
    if not site.is_dir():
        print(f"{site} does not exist: run with --install (docs/metrics.md)")
        return 2
    print(subprocess.run([sys.executable, "-c", _VERSIONS], env=_env(site), text=True, capture_output=True,
                         cwd=REPO).stdout.strip())
    result = run_suite(site)
    status = 0
    for module, c in sorted(result["counts"].items()):
        print(f"{module}: {c['passed']} passed, {c['failed']} failed, {c['skipped']} skipped")
        status = status if c["failed"] == 0 and c["skipped"] == 0 else 1
    for test_id, message in sorted(result["failures"].items()):
        print(f"  FAILED {test_id}: {message}")
    if not result["counts"]:
        print(result["output"])
        status = 1
    return status


if __name__ == "__main__":
    sys.exit(main())
