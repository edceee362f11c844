"""Two gloo processes against one process: uneven update counts, ranks without data,
DistributedSampler padding removed by ids, ids that repeat with different rows (an
error on every rank), states of every dtype, local computes, a process group, a
user's dist_sync_fn.

The processes run through the shared harness (``tests/distributed/harness.py``:
one group for every suite, with timeouts), so a hang or a crash fails the test
with each rank's stderr instead of blocking it.
"""
from __future__ import annotations

import pytest
import torch
from torchmetrics import MetricCollection

from tests.distributed import harness
from tests.adapters.lightning.ddp_cases import CASES, ERRORS, WORLD, apply, plain

SUITE = "tests.adapters.lightning.ddp_cases"
SCENARIOS = CASES


@pytest.fixture(scope="module")
def ddp_results():
    return [ranks[SUITE] for ranks in harness.shared_results(WORLD)]


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


# negative control: without ids the sampler's repeated query counts twice (so the
# "_ids" twin does test the de-duplication)
PADDED = {"dropins_sampler_without_ids"}
GLOBAL = [n for n, sc in SCENARIOS.items() if not sc.local and n not in ERRORS and n not in PADDED]


@pytest.mark.filterwarnings("ignore:The ``compute`` method")  # scenarios where a process saw no data
@pytest.mark.parametrize("name", GLOBAL)
def test_two_processes_equal_one(ddp_results, name):
    for rank in range(WORLD):
        res = harness.value(ddp_results[rank][name], f"rank {rank}, {name}")
        assert_same(res["compute"], reference(name), f"rank {rank}")


@pytest.mark.parametrize("name", sorted(ERRORS))
def test_repeated_ids_with_different_rows_fail_on_every_rank(ddp_results, name):
    with pytest.raises(ValueError, match=ERRORS[name]):
        reference(name)
    for rank in range(WORLD):
        kind, message = harness.error(ddp_results[rank][name], f"rank {rank}, {name}")
        assert kind == "ValueError" and ERRORS[name] in message, (rank, message)
        assert "ids must identify dataset items" in message


def test_custom_dist_sync_fn_is_used(ddp_results):
    for rank in range(WORLD):
        assert ddp_results[rank]["ranking_custom_sync_fn"]["value"]["custom_sync_calls"] > 0
        assert ddp_results[rank]["ranking_uneven"]["value"]["custom_sync_calls"] == 0


def test_local_compute_without_sync(ddp_results):
    sc = SCENARIOS["ranking_local"]
    for rank in range(WORLD):
        got = harness.value(ddp_results[rank]["ranking_local"])["compute"]
        assert_same(got, reference("ranking_local", sc.feeds[rank]))


def test_forward_values_are_local_batches(ddp_results):
    sc = SCENARIOS["ranking_forward"]
    for rank in range(WORLD):
        metric = sc.make()
        expected = [plain(out) for out in apply(metric, sc.feeds[rank])]
        assert_same(harness.value(ddp_results[rank]["ranking_forward"])["forward"], expected, f"rank {rank}")


@pytest.mark.filterwarnings("ignore:The ``compute`` method")
def test_scenarios_cover_the_issue():
    empty = [n for n, sc in SCENARIOS.items() if any(not sc.feeds[r] for r in range(WORLD))]
    uneven = [n for n, sc in SCENARIOS.items() if len({len(sc.feeds[r]) for r in range(WORLD)}) > 1]
    assert {"ranking_empty_rank", "ranking_compact_empty_rank", "embedding_empty_rank_flags",
            "dropins_empty_rank", "all_ranks_empty"} <= set(empty)
    assert {"ranking_uneven", "dropins_uneven", "embedding_no_ids_uneven"} <= set(uneven)
    assert {"embedding_labels_uint16", "embedding_labels_uint32", "embedding_labels_uint64",
            "embedding_labels_int16", "embedding_embeddings_bfloat16", "embedding_multi_hot_bool",
            "dropins_int16", "dropins_float16"} <= set(SCENARIOS)
    nan = reference("all_ranks_empty")
    assert torch.isnan(nan["mrr"]) and torch.isnan(nan["cmc@1"])


@pytest.mark.parametrize("name", sorted(PADDED))
def test_padding_without_ids_changes_the_value(ddp_results, name):
    for rank in range(WORLD):
        got = harness.value(ddp_results[rank][name], f"rank {rank}, {name}")["compute"]
        with pytest.raises(AssertionError):
            assert_same(got, reference(name))


def _metrics_of(name):
    made = SCENARIOS[name].make()
    return len(made) if isinstance(made, MetricCollection) else 1


@pytest.mark.parametrize("name", ["dropins_sampler_without_ids", "ranking_uneven", "ranking_compact_empty_rank",
                                  "embedding_no_ids_uneven"])
def test_computing_without_ids_warns_once_on_rank_0(ddp_results, name):
    # issue 18: padding cannot be seen without ids; rank 0 says so, once per metric
    warned = [harness.value(ddp_results[rank][name])["id_warnings"] for rank in range(WORLD)]
    assert len(warned[0]) == _metrics_of(name) and warned[1] == [], warned
    assert all(f"over {WORLD} processes without ids" in w and "ids=" in w for w in warned[0]), warned[0]
    if name == "ranking_compact_empty_rank":
        assert "use compact=False" in warned[0][0]


@pytest.mark.parametrize("name", ["dropins_sampler_ids", "ranking_sampler_ids", "embedding_sampler_padding",
                                  "ranking_local"])
def test_no_warning_with_ids_or_without_sync(ddp_results, name):
    for rank in range(WORLD):
        assert harness.value(ddp_results[rank][name])["id_warnings"] == [], (rank, name)
