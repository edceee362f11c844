"""Run the anchors' own tests against our drop-ins (not part of the default test run).

Usage (from the repository root; ``ANCHOR_TESTS_DIR`` holds the anchors' extracted
test trees, see docs/lightning.md, "Anchor test suites")::

    ANCHOR_TESTS_DIR=/tmp/anchor_tests python tests/anchors/suites/run.py [torchmetrics] [ignite]
    ANCHOR_TESTS_DIR=/tmp/anchor_tests python tests/anchors/suites/run.py torchmetrics:test_map.py  # one file

Each test file runs in its own pytest process (one per rank for ignite's
distributed tests, 2 ranks; torchmetrics' ddp=True variants in its pool of 2
workers), rooted at ``$ANCHOR_TESTS_DIR/<anchor>``, with the plugin ``anchor_swap``
(classes replaced by ours before the test modules import them). Printed: passed /
failed / skipped counts per anchor (a pass counts only if the test built one of
our classes) and every failing test id. Exit status 0 when every failure is
matched by ``known.py`` (a difference on purpose, documented), 1 otherwise.
"""
from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Dict, List, Optional, Tuple

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[2]

# per anchor: the test folders, the tests that do not test the drop-ins (deselected
# to save time), and the runs: a pytest marker expression, the number of processes
# (world > 1: one pytest process per rank, run together) and extra environment
SUITES = {
    "torchmetrics": {
        "paths": ["tests/unittests/retrieval"],
        # the functional API (torchmetrics.functional.retrieval) has no drop-in here
        "deselect": "not functional",
        # USE_PYTEST_POOL=1: each file's pytest process opens torchmetrics' pool of 2
        # spawned workers joined in a gloo group, where the ddp=True variants run
        # (without it they silently repeat their ddp=False twin)
        "runs": [{"markers": None, "world": 1, "env": {"USE_PYTEST_POOL": "1"}}],
    },
    "ignite": {
        "paths": ["tests/ignite/metrics/rec_sys"],
        "deselect": None,
        # ignite's distributed tests run as ignite's CI runs them (pytest-xdist
        # --dist=each): the same tests in WORLD_SIZE processes, rank from worker_id
        "runs": [{"markers": "not distributed", "world": 1, "env": {}},
                 {"markers": "distributed", "world": 2, "env": {}}],
    },
}
_ORDER = {"passed": 0, "not_ours": 0, "skipped": 1, "failed": 2}


def anchor_root(anchor: str, tests_dir: Optional[str] = None) -> Optional[Path]:
    base = tests_dir or os.environ.get("ANCHOR_TESTS_DIR")
    if not base:
        return None
    root = Path(base) / anchor
    return root if all((root / p).is_dir() for p in SUITES[anchor]["paths"]) else None


def junit_outcome(case, is_ours) -> Tuple[str, str]:
    """``(outcome, message)`` of a junit testcase: ``failed`` (with the first line of its
    message), ``skipped``, ``passed`` when ``is_ours(properties)`` says the test ran our
    code, else ``not_ours`` (it passed on the anchor's code alone: not counted)."""
    bad = case.find("failure")
    if bad is None:
        bad = case.find("error")
    if bad is not None:
        message = bad.get("message") or ""
        return "failed", message.splitlines()[0][:300] if message else ""
    if case.find("skipped") is not None:
        return "skipped", ""
    props = {p.get("name"): p.get("value") for p in case.iter("property")}
    return ("passed" if is_ours(props) else "not_ours"), ""


def _outcome(case) -> Tuple[str, str]:
    """A pass counts when the test built one of our classes, or is a DDP variant (whose
    classes are built in the pool's workers)."""
    return junit_outcome(case, lambda p: int(p.get("anchor_ours", "0")) > 0 or p.get("anchor_ddp") == "1")


def _run_ranks(cmd: List[str], root: Path, env: Dict[str, str], world: int, junit: Path,
               timeout: float) -> List[Tuple[Path, subprocess.CompletedProcess]]:
    """Run ``cmd`` in ``world`` processes at once (rank r: ``ANCHOR_WORKER_ID=gw<r>``)."""
    if world > 1:
        env = dict(env, WORLD_SIZE=str(world))
        Path("/tmp/free_port").unlink(missing_ok=True)  # ignite's rank 0 writes its port there
    procs = []
    for rank in range(world):
        out = junit.with_suffix(f".rank{rank}.xml")
        renv = dict(env, ANCHOR_WORKER_ID=f"gw{rank}") if world > 1 else env
        p = subprocess.Popen(cmd + [f"--junitxml={out}"], cwd=root, env=renv, text=True,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        procs.append((out, p))
    done = []
    try:
        for out, p in procs:
            stdout, stderr = p.communicate(timeout=timeout)
            done.append((out, subprocess.CompletedProcess(p.args, p.returncode, stdout, stderr)))
    finally:
        for _, p in procs:
            if p.poll() is None:
                p.kill()
    return done


def run_suite(anchor: str, tests_dir: Optional[str] = None, extra: Optional[List[str]] = None,
              timeout: float = 7200, progress: bool = False, only: Optional[List[str]] = None) -> Dict:
    """Run one anchor's suite; returns counts and the failing test ids.

    Counts: ``passed`` (tests that built one of our classes, or DDP variants),
    ``failed`` (on any rank: always counted, ours or not), ``skipped``, and
    ``not_ours`` (passed without building a drop-in: the anchor's own code only)."""
    root = anchor_root(anchor, tests_dir)
    if root is None:
        raise FileNotFoundError(f"no {anchor} tests under ANCHOR_TESTS_DIR ({tests_dir or os.environ.get('ANCHOR_TESTS_DIR')!r})")
    suite = SUITES[anchor]
    base_env = dict(os.environ)
    base_env["ANCHOR_SUITE"] = anchor
    base_env["PYTHONPATH"] = os.pathsep.join([str(root), str(HERE), str(REPO / "core"), str(REPO)])
    # one pytest process (per rank) per test file: progress is visible, a report per file
    files = sorted(f for p in suite["paths"] for f in (root / p).glob("test_*.py") if not only or f.name in only)
    outcomes: Dict[str, Tuple[str, str]] = {}
    outputs = []
    with tempfile.TemporaryDirectory() as tmp:
        for r, spec in enumerate(suite["runs"]):
            env = dict(base_env, **spec["env"])
            for i, path in enumerate(files):
                cmd = [sys.executable, "-m", "pytest", "-p", "anchor_swap", "-p", "no:cacheprovider",
                       "-p", "no:xdist", "-q", "--rootdir", str(root), "-o", "junit_family=xunit1"]
                if suite["deselect"]:
                    cmd += ["-k", suite["deselect"]]
                if spec["markers"]:
                    cmd += ["-m", spec["markers"]]
                cmd += [str(path)] + list(extra or [])
                ranks = _run_ranks(cmd, root, env, spec["world"], Path(tmp) / f"junit{r}_{i}", timeout)
                seen = []
                for out, proc in ranks:
                    outputs.append(proc.stdout[-300:])
                    if not out.exists():
                        raise RuntimeError(f"{anchor}: pytest produced no report for {path.name} (exit "
                                           f"{proc.returncode}):\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}")
                    ids = []
                    for case in ET.parse(out).iter("testcase"):
                        test_id = f"{case.get('classname')}::{case.get('name')}"
                        ids.append(test_id)
                        new = _outcome(case)
                        world = {p.get("name"): p.get("value") for p in case.iter("property")}.get("anchor_world")
                        if new[0] == "passed" and spec["world"] > 1 and world != str(spec["world"]):
                            raise RuntimeError(f"{anchor}: {test_id} ran in a group of {world} processes, "
                                               f"not {spec['world']}")
                        old = outcomes.get(test_id)
                        if old is None or _ORDER[new[0]] > _ORDER[old[0]]:
                            outcomes[test_id] = new  # the worst outcome over the ranks
                    seen.append(sorted(ids))
                if any(s != seen[0] for s in seen):
                    raise RuntimeError(f"{anchor}: the ranks ran different tests in {path.name}")
                if progress:
                    last = ranks[0][1].stdout.strip().splitlines()
                    print(f"  {anchor} {path.name} (world {spec['world']}): {last[-1] if last else ''}", flush=True)
    counts = {"passed": 0, "failed": 0, "skipped": 0, "not_ours": 0}
    failures: Dict[str, str] = {}
    for test_id, (outcome, message) in outcomes.items():
        counts[outcome] += 1
        if outcome == "failed":
            failures[test_id] = message
    return {"anchor": anchor, "counts": counts, "failures": failures, "output": "\n".join(outputs)}


def main(argv: List[str]) -> int:
    from known import reason  # this folder is on sys.path when run as a script

    chosen: Dict[str, List[str]] = {}  # anchor -> file names ([]: all)
    for arg in argv or list(SUITES):
        anchor, _, name = arg.partition(":")
        chosen.setdefault(anchor, []).extend([name] if name else [])
    status = 0
    for anchor, only in chosen.items():
        result = run_suite(anchor, progress=True, only=only)
        c = result["counts"]
        print(f"{anchor}: {c['passed']} passed, {c['failed']} failed, {c['skipped']} skipped "
              f"({c['not_ours']} more passed without building one of our classes: not counted)")
        for test_id, message in sorted(result["failures"].items()):
            why = reason(anchor, test_id)
            print(f"  {'known' if why else 'NEW  '} {test_id}: {message}")
            if why is None:
                status = 1
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
