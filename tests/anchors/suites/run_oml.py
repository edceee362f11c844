"""Run OML's own functional-metric tests against :mod:`retrieval_core.compat.oml`.

Usage (from the repository root; ``OML_REPO_DIR`` holds OML's source tree with its
``oml/`` and ``tests/``, see docs/compat_oml.md, "OML's own tests")::

    OML_REPO_DIR=/tmp/oml_repo python tests/anchors/suites/run_oml.py

One pytest process rooted at ``$OML_REPO_DIR`` runs ``SUITE`` with the plugin
``oml_swap`` (OML's functions replaced by ours before the test modules import
them). Printed: passed / failed / skipped counts (a pass counts only if the test
called one of our functions) and every failing test id. Exit status 0 when every
failure is listed in ``KNOWN`` (a difference on purpose, documented), 1 otherwise.
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Dict, Optional, Tuple

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[2]
OML_ENV = REPO / "tests" / "anchors" / "oml"  # oml_env.py: loading OML (oml_swap imports it)
if str(REPO) not in sys.path:  # run as a script: the repository's tests package
    sys.path.insert(0, str(REPO))
from tests.anchors.suites.run import junit_outcome  # noqa: E402
SUITE = "tests/test_oml/test_functional/test_metrics"

# failing test id (re.fullmatch on "classname::name") -> why it fails on purpose
KNOWN: Dict[str, str] = {}


def reason(test_id: str) -> Optional[str]:
    for pattern, why in KNOWN.items():
        if re.fullmatch(pattern, test_id):
            return why
    return None


def _outcome(case) -> Tuple[str, str]:
    return junit_outcome(case, lambda props: int(props.get("oml_ours", "0")) > 0)


def run_suite(repo: Path, timeout: float = 1800) -> Dict:
    """Counts (``passed``: called ours; ``not_ours``: passed on OML's code alone),
    the failing test ids with their messages, and pytest's output tail."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(repo), str(HERE), str(OML_ENV), str(REPO / "core")])
    env.setdefault("OMP_NUM_THREADS", "1")
    with tempfile.TemporaryDirectory() as tmp:
        junit = Path(tmp) / "junit.xml"
        cmd = [sys.executable, "-m", "pytest", "-p", "oml_swap", "-p", "no:cacheprovider", "-p", "no:xdist", "-q",
               "--rootdir", str(repo), "-o", "junit_family=xunit1", f"--junitxml={junit}", SUITE]
        proc = subprocess.run(cmd, cwd=repo, env=env, text=True, capture_output=True, timeout=timeout)
        if not junit.exists():
            raise RuntimeError(f"pytest produced no report (exit {proc.returncode}):\n{proc.stdout[-4000:]}\n"
                               f"{proc.stderr[-4000:]}")
        counts = {"passed": 0, "failed": 0, "skipped": 0, "not_ours": 0}
        failures: Dict[str, str] = {}
        for case in ET.parse(junit).iter("testcase"):
            outcome, message = _outcome(case)
            counts[outcome] += 1
            if outcome == "failed":
                failures[f"{case.get('classname')}::{case.get('name')}"] = message
    return {"counts": counts, "failures": failures, "output": proc.stdout[-2000:]}


def main() -> int:
    sys.path.insert(0, str(OML_ENV))
    from oml_env import oml_repo_dir

    repo = oml_repo_dir()
    if repo is None:
        print("OML_REPO_DIR must point at OML's source tree (docs/compat_oml.md)")
        return 2
    result = run_suite(repo)
    c = result["counts"]
    print(f"OML: {c['passed']} passed, {c['failed']} failed, {c['skipped']} skipped "
          f"({c['not_ours']} more passed without calling one of our functions: not counted)")
    status = 0
    for test_id, message in sorted(result["failures"].items()):
        why = reason(test_id)
        print(f"  {'known' if why else 'NEW  '} {test_id}: {message}")
        status = status if why else 1
    return status


if __name__ == "__main__":
    sys.exit(main())
