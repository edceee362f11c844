"""Two gloo processes against one process: uneven update counts, ranks without data,
DistributedSampler padding removed by ids, local computes, a process group.

The processes run in a subprocess with a timeout (and collectives with a timeout),
so a hang fails the test instead of blocking it.
"""
from __future__ import annotations

import os
import subprocess
import sys

import pytest
import torch

from tests.lightning.ddp_cases import WORLD, apply, plain, scenarios

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SUBPROCESS_TIMEOUT_S = 240
SCENARIOS = scenarios()


@pytest.fixture(scope="module")
def ddp_results(tmp_path_factory):
    out = tmp_path_factory.mktemp("ddp")
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""), OMP_NUM_THREADS="1")
    try:
        proc = subprocess.run([sys.executable, "-m", "tests.lightning.ddp_worker", str(out)], cwd=ROOT, env=env,
                              capture_output=True, text=True, timeout=SUBPROCESS_TIMEOUT_S)
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"the 2-process run hung (no result in {SUBPROCESS_TIMEOUT_S} s)\n{exc.stderr}")
    assert proc.returncode == 0, proc.stderr[-4000:]
    return [torch.load(out / f"rank{r}.pt") for r in range(WORLD)]


def reference(name: str, rows=None):
    sc = SCENARIOS[name]
    metric = sc.make()
    calls = rows if rows is not None else (sc.reference_rows or [c for r in range(WORLD) for c in sc.feeds[r]])
    apply(metric, [("update", args, kw) for _, args, kw in calls])
    return plain(metric.compute())


def assert_same(got, expected, path=""):
    if isinstance(expected, dict):
        assert set(got) == set(expected), (path, sorted(got), sorted(expected))
        for k in expected:
            assert_same(got[k], expected[k], f"{path}/{k}")
    elif isinstance(expected, list):
        assert len(got) == len(expected), path
        for i, (a, b) in enumerate(zip(got, expected)):
            assert_same(a, b, f"{path}[{i}]")
    else:
        torch.testing.assert_close(got, expected, rtol=0, atol=1e-12, equal_nan=True, msg=lambda m: f"{path}: {m}")


GLOBAL = [n for n, sc in SCENARIOS.items() if not sc.local]


@pytest.mark.filterwarnings("ignore:The ``compute`` method")  # scenarios where a process saw no data
@pytest.mark.parametrize("name", GLOBAL)
def test_two_processes_equal_one(ddp_results, name):
    for rank in range(WORLD):
        res = ddp_results[rank][name]
        assert "error" not in res, res.get("error")
        assert_same(res["compute"], reference(name), f"rank {rank}")


def test_local_compute_without_sync(ddp_results):
    sc = SCENARIOS["ranking_local"]
    for rank in range(WORLD):
        assert_same(ddp_results[rank]["ranking_local"]["compute"], reference("ranking_local", sc.feeds[rank]))


def test_forward_values_are_local_batches(ddp_results):
    sc = SCENARIOS["ranking_forward"]
    for rank in range(WORLD):
        metric = sc.make()
        expected = [plain(out) for out in apply(metric, sc.feeds[rank])]
        assert_same(ddp_results[rank]["ranking_forward"]["forward"], expected, f"rank {rank}")


@pytest.mark.filterwarnings("ignore:The ``compute`` method")
def test_scenarios_cover_the_issue():
    empty = [n for n, sc in SCENARIOS.items() if any(not sc.feeds[r] for r in range(WORLD))]
    uneven = [n for n, sc in SCENARIOS.items() if len({len(sc.feeds[r]) for r in range(WORLD)}) > 1]
    assert {"ranking_empty_rank", "ranking_compact_empty_rank", "embedding_empty_rank_flags",
            "dropins_empty_rank", "all_ranks_empty"} <= set(empty)
    assert {"ranking_uneven", "dropins_uneven", "embedding_no_ids_uneven"} <= set(uneven)
    nan = reference("all_ranks_empty")
    assert torch.isnan(nan["mrr"]) and torch.isnan(nan["cmc@1"])
