"""Run pytorch-metric-learning's accuracy tests against our ``AccuracyCalculator``.

Usage (from the repository root; ``ANCHOR_TESTS_DIR/pytorch-metric-learning`` holds
PML's extracted ``tests`` folder, e.g. ``git --git-dir=<PML git dir> archive HEAD
tests | tar -x -C $ANCHOR_TESTS_DIR/pytorch-metric-learning``)::

    ANCHOR_TESTS_DIR=/tmp/anchor_tests python tests/anchors/suites/run_pml.py

One pytest process per test file (``tests/utils/test_calculate_accuracies*.py``),
with the plugin ``pml_swap`` and ``TEST_DEVICE=cpu`` unless set. Printed: passed /
failed / skipped counts and each failing test id, marked ``known`` when
:data:`KNOWN` documents it (a difference on purpose, docs/compat.md). A pass counts
only if the test built our ``AccuracyCalculator`` (``pml_swap`` records it), as in the
anchor suites' runner; passes that never built one (tests of PML's module functions,
tests that do nothing on CPU) are counted apart as ``not_ours``. Failures always count.
Exit status 0 when every failure is known, 1 otherwise.
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Dict, List, Optional, Tuple

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[2]
ANCHOR = "pytorch-metric-learning"
PATTERN = "tests/utils/test_calculate_accuracies*.py"
OURS = "retrieval_core.compat.pml.AccuracyCalculator"

# failing test id (classname::name, a regular expression) -> why it fails on purpose
KNOWN: Dict[str, str] = {}


def pml_root(tests_dir: Optional[str] = None) -> Optional[Path]:
    base = tests_dir or os.environ.get("ANCHOR_TESTS_DIR")
    if not base:
        return None
    root = Path(base) / ANCHOR
    return root if list(root.glob(PATTERN)) else None


def reason(test_id: str) -> Optional[str]:
    for pattern, why in KNOWN.items():
        if re.fullmatch(pattern, test_id):
            return why
    return None


def built_ours(case: ET.Element) -> bool:
    """Whether a test case's junit report says it built our AccuracyCalculator."""
    props = {p.get("name"): p.get("value") for p in case.iter("property")}
    return int(props.get("pml_ours") or 0) > 0


def tally(cases) -> Tuple[Dict[str, int], Dict[str, str], List[str]]:
    """Counts of junit test cases (a pass only if it built ours), the failures' messages
    and the ids of the passes that never built ours."""
    counts = {"passed": 0, "failed": 0, "skipped": 0, "not_ours": 0}
    failures: Dict[str, str] = {}
    not_ours: List[str] = []
    for case in cases:
        test_id = f"{case.get('classname')}::{case.get('name')}"
        bad = case.find("failure") if case.find("failure") is not None else case.find("error")
        if bad is not None:
            counts["failed"] += 1
            failures[test_id] = (bad.get("message") or "").splitlines()[0][:300] if bad.get("message") else ""
        elif case.find("skipped") is not None:
            counts["skipped"] += 1
        else:
            ours = built_ours(case)
            counts["passed" if ours else "not_ours"] += 1
            if not ours:
                not_ours.append(test_id)
    return counts, failures, not_ours


def run_suite(tests_dir: Optional[str] = None, timeout: float = 3600, progress: bool = False) -> Dict:
    """Run PML's accuracy test files; returns counts and the failing test ids."""
    root = pml_root(tests_dir)
    if root is None:
        raise FileNotFoundError(f"no {PATTERN} under ANCHOR_TESTS_DIR/{ANCHOR}")
    env = dict(os.environ)
    env.setdefault("TEST_DEVICE", "cpu")
    env["PYTHONPATH"] = os.pathsep.join([str(root), str(HERE), str(REPO / "core"), str(REPO)])
    cases, outputs = [], []
    with tempfile.TemporaryDirectory() as tmp:
        for i, path in enumerate(sorted(root.glob(PATTERN))):
            junit = Path(tmp) / f"junit{i}.xml"
            env["PML_SWAP_REPORT"] = str(Path(tmp) / f"swapped{i}.txt")
            cmd = [sys.executable, "-m", "pytest", "-p", "pml_swap", "-p", "no:cacheprovider", "-q",
                   "--rootdir", str(root), f"--junitxml={junit}", "-o", "junit_family=xunit1", str(path)]
            proc = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True, timeout=timeout)
            outputs.append(proc.stdout[-2000:])
            if not junit.exists():
                raise RuntimeError(f"pytest produced no report for {path.name} (exit {proc.returncode}):\n"
                                   f"{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}")
            swapped = Path(env["PML_SWAP_REPORT"])
            if not swapped.exists() or swapped.read_text() != OURS:
                raise RuntimeError(f"{path.name} did not run against {OURS}: "
                                   f"{swapped.read_text() if swapped.exists() else 'no swap report'}")
            cases.extend(ET.parse(junit).iter("testcase"))
            if progress:
                print(f"  {path.name}: {proc.stdout.strip().splitlines()[-1] if proc.stdout.strip() else ''}",
                      flush=True)
    counts, failures, not_ours = tally(cases)
    return {"counts": counts, "failures": failures, "not_ours": not_ours, "output": "\n".join(outputs)}


def main(argv: List[str]) -> int:
    result = run_suite(progress=True)
    c = result["counts"]
    print(f"{ANCHOR}: {c['passed']} passed, {c['failed']} failed, {c['skipped']} skipped "
          f"({c['not_ours']} more passed without building our AccuracyCalculator: not counted)")
    for test_id in result["not_ours"]:
        print(f"  not counted: {test_id}")
    status = 0
    for test_id, message in sorted(result["failures"].items()):
        why = reason(test_id)
        print(f"  {'known' if why else 'NEW  '} {test_id}: {message}")
        status |= why is None
    return int(status)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
