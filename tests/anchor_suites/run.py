"""Run the anchors' own tests against our drop-ins (not part of the default test run).

Usage (from the repository root; ``ANCHOR_TESTS_DIR`` holds the anchors' extracted
test trees, see docs/lightning.md, "Anchor test suites")::

    ANCHOR_TESTS_DIR=/tmp/anchor_tests python tests/anchor_suites/run.py [torchmetrics] [ignite]

Each anchor runs in its own pytest process, rooted at
``$ANCHOR_TESTS_DIR/<anchor>``, with the plugin ``anchor_swap`` (classes replaced
by ours before the test modules import them). Printed: passed / failed / skipped
counts per anchor and every failing test id. Exit status 0 when every failure is
listed in ``known.py`` (a difference on purpose, documented), 1 otherwise.
"""
from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Dict, List, Optional

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent

# per anchor: the test folder inside its tree, and the tests that do not test the drop-ins
SUITES = {
    "torchmetrics": {
        "paths": ["tests/unittests/retrieval"],
        # the functional API (torchmetrics.functional.retrieval) has no drop-in here
        "deselect": "not functional",
    },
    "ignite": {
        "paths": ["tests/ignite/metrics/rec_sys"],
        "deselect": None,
    },
}


def anchor_root(anchor: str, tests_dir: Optional[str] = None) -> Optional[Path]:
    base = tests_dir or os.environ.get("ANCHOR_TESTS_DIR")
    if not base:
        return None
    root = Path(base) / anchor
    return root if all((root / p).is_dir() for p in SUITES[anchor]["paths"]) else None


def run_suite(anchor: str, tests_dir: Optional[str] = None, extra: Optional[List[str]] = None,
              timeout: float = 3600) -> Dict:
    """Run one anchor's suite; returns counts and the failing test ids."""
    root = anchor_root(anchor, tests_dir)
    if root is None:
        raise FileNotFoundError(f"no {anchor} tests under ANCHOR_TESTS_DIR ({tests_dir or os.environ.get('ANCHOR_TESTS_DIR')!r})")
    suite = SUITES[anchor]
    env = dict(os.environ)
    env["ANCHOR_SUITE"] = anchor
    env["PYTHONPATH"] = os.pathsep.join([str(root), str(HERE), str(REPO / "core"), str(REPO)])
    with tempfile.TemporaryDirectory() as tmp:
        junit = Path(tmp) / "junit.xml"
        cmd = [sys.executable, "-m", "pytest", "-p", "anchor_swap", "-p", "no:cacheprovider", "-q",
               "--rootdir", str(root), f"--junitxml={junit}", "-o", "junit_family=xunit1"]
        if suite["deselect"]:
            cmd += ["-k", suite["deselect"]]
        cmd += [str(root / p) for p in suite["paths"]] + list(extra or [])
        proc = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True, timeout=timeout)
        if not junit.exists():
            raise RuntimeError(f"{anchor}: pytest produced no report (exit {proc.returncode}):\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}")
        tree = ET.parse(junit)
    counts = {"passed": 0, "failed": 0, "skipped": 0}
    failures: Dict[str, str] = {}
    for case in tree.iter("testcase"):
        test_id = f"{case.get('classname')}::{case.get('name')}"
        bad = case.find("failure")
        if bad is None:
            bad = case.find("error")
        if bad is not None:
            counts["failed"] += 1
            failures[test_id] = (bad.get("message") or "").splitlines()[0][:300] if bad.get("message") else ""
        elif case.find("skipped") is not None:
            counts["skipped"] += 1
        else:
            counts["passed"] += 1
    return {"anchor": anchor, "counts": counts, "failures": failures, "output": proc.stdout[-2000:]}


def main(argv: List[str]) -> int:
    from known import KNOWN  # this folder is on sys.path when run as a script

    anchors = argv or list(SUITES)
    status = 0
    for anchor in anchors:
        result = run_suite(anchor)
        c = result["counts"]
        print(f"{anchor}: {c['passed']} passed, {c['failed']} failed, {c['skipped']} skipped")
        for test_id, message in sorted(result["failures"].items()):
            reason = KNOWN.get(anchor, {}).get(test_id)
            print(f"  {'known' if reason else 'NEW  '} {test_id}: {message}")
            if reason is None:
                status = 1
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
