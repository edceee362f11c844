"""The ignite adapters under ``ignite.distributed`` (gloo on CPU, 2 and 3 processes):
every rank must return what one process returns on the whole data.

All cases of ``scenarios.py`` run in one spawn per world size (start-up dominates);
the spawn runs in a subprocess with a timeout, and the process group has a 60 s
timeout, so a hang fails the test instead of blocking.
"""
from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests.distributed.scenarios import CASES, run_cases, same

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT_S = 150
EXPECTED_DIFFERENT = {"ranking_mixed_ids"}  # fine on one process, an error on every rank of several
# negative control: without ids, DistributedSampler's padding repeats queries and
# changes the result (so the "_ids" cases do test the de-duplication)
PADDED = {"ranking_sampler_without_ids"}


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def reference():
    return run_cases(0, 1)


def _spawn(world: int, out_dir: Path):
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    env.pop("MASTER_ADDR", None)
    env.pop("MASTER_PORT", None)
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "tests.distributed.worker", str(world), str(_free_port()), str(out_dir)],
            cwd=ROOT, env=env, capture_output=True, text=True, timeout=TIMEOUT_S,
        )
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"{world} processes did not finish in {TIMEOUT_S} s (hang?); stderr:\n{e.stderr}")
    assert proc.returncode == 0, proc.stderr[-4000:]
    return [json.loads((out_dir / f"rank{r}.json").read_text()) for r in range(world)]


def test_reference_cases_compute(reference):
    # the one-process reference itself: every case gives values, except the "nobody" cases
    for name, result in reference.items():
        if name.endswith("nobody"):
            assert result["error"] == "NotComputableError", result
        else:
            assert "error" not in result, (name, result)


@pytest.mark.parametrize("world", [2, 3])
def test_every_rank_matches_one_process(world, reference, tmp_path):
    ranks = _spawn(world, tmp_path)
    assert [r["_world"] for r in ranks] == [world] * world
    for rank, results in enumerate(ranks):
        assert set(results) - {"_world"} == set(CASES)
        for name in CASES:
            got = results[name]
            if isinstance(got, dict):
                assert "traceback" not in got, got["traceback"]
            if name in PADDED:
                assert not same(got, reference[name]), (rank, name, got)
                continue
            if name in EXPECTED_DIFFERENT:
                assert got["error"] == "ValueError", (rank, name, got)
                assert "'ids' was given on 1 of the 2 processes that saw data" in got["message"]
                continue
            assert same(got, reference[name]), f"rank {rank}/{world}, {name}:\n got {got}\n one process {reference[name]}"
