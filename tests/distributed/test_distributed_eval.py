"""``retrieval_core.distributed.evaluate_embeddings_across_ranks`` and the adapters' divided
compute on 2 and 3 gloo processes (the shared harness): every rank returns what
one process returns on the concatenation of every rank's rows, bit for bit, for
every per-query key family (@k, @r, whole list), set-level keys, class and
multi-hot labels, custom relevance, ids, categories, uneven and empty ranks, with
the gallery gathered or sharded; errors are raised on every rank.
"""
from __future__ import annotations

import math

import pytest
import torch

from tests.distributed import harness
from tests.distributed.eval_scenarios import CASES, ERRORS, N

SUITE = "tests.distributed.eval_scenarios"
ADAPTERS = {"ignite_divided", "lightning_divided", "lightning_local_not_divided"}
VALUE_CASES = [n for n in CASES if n not in ERRORS and n not in ADAPTERS]


def exactly(a, b) -> bool:
    """Equal bit for bit (NaN equal to NaN), through dicts, lists and tensors."""
    if isinstance(a, dict) and isinstance(b, dict):
        return list(a) == list(b) and all(exactly(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(exactly(x, y) for x, y in zip(a, b))
    if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
        if a.dtype != b.dtype or a.shape != b.shape:
            return False
        if a.is_floating_point():
            return torch.equal(torch.isnan(a), torch.isnan(b)) and torch.equal(a.nan_to_num(0.0), b.nan_to_num(0.0))
        return torch.equal(a, b)
    if isinstance(a, float) and isinstance(b, float):
        return (math.isnan(a) and math.isnan(b)) or a == b
    return type(a) is type(b) and a == b


def test_exactly_can_fail():
    nan = float("nan")
    assert exactly({"a": torch.tensor([1.0, nan])}, {"a": torch.tensor([1.0, nan])})
    assert not exactly(torch.tensor([1.0]), torch.tensor([1.0 + 2**-20]))
    assert not exactly(torch.tensor([1.0]), torch.tensor([1.0], dtype=torch.float64))
    assert not exactly({"a": 1.0, "b": 2.0}, {"b": 2.0, "a": 1.0})  # key order matters
    assert not exactly([nan], [0.0])


@pytest.fixture(scope="module")
def reference():
    return harness.run_local(CASES)


def test_one_process_is_the_single_process_call(reference):
    for name in VALUE_CASES:
        got = harness.value(reference[name], name)
        assert exactly(got["dist"], got["one"]), name
    for name, (_, kind, part, one_process_too) in ERRORS.items():
        if one_process_too:
            got_kind, message = harness.error(reference[name], name)
            assert got_kind == kind and part in message, (name, got_kind, message)


def test_cases_cover_the_key_families(reference):
    keys = set(harness.value(reference["self_class"], "self_class")["dist"]["keys"])
    assert {"cmc@1", "map@r", "ndcg@r", "map", "mrr", "auroc", "nmi", "ami", "pcf@0.5", "fnmr@0.1"} <= keys
    sharded = [n for n in VALUE_CASES if n.endswith("_sharded")]
    assert len(sharded) >= 10


@pytest.mark.parametrize("world", [2, 3])
def test_every_rank_equals_one_process_bit_for_bit(world):
    ranks = harness.shared_results(world)
    assert len(ranks) == world
    for name in VALUE_CASES:
        first = None
        for rank, suites in enumerate(ranks):
            where = f"rank {rank}/{world}, {name}"
            got = harness.value(suites[SUITE][name], where)
            assert exactly(got["dist"], got["one"]), f"{where}:\n got {got['dist']}\n one process {got['one']}"
            assert got["dist"]["n_queries"].item() == N
            if first is None:
                first = got["dist"]
            assert exactly(got["dist"], first), where  # the same on every rank, set-level keys included
            if name.endswith("_sharded"):
                assert got["gathered_embeddings"] == [], (where, got["gathered_embeddings"])
            elif "gallery" not in name:
                assert got["gathered_embeddings"], where  # the unsharded self-gallery gathers the items


@pytest.mark.parametrize("world", [2, 3])
def test_errors_are_raised_on_every_rank(world):
    ranks = harness.shared_results(world)
    for name, (_, kind, part, _) in ERRORS.items():
        for rank, suites in enumerate(ranks):
            where = f"rank {rank}/{world}, {name}"
            got_kind, message = harness.error(suites[SUITE][name], where)
            assert got_kind == kind and part in message, (where, got_kind, message)


def _shares(n: int, world: int):
    return [n * (r + 1) // world - n * r // world for r in range(world)]


@pytest.mark.parametrize("world", [2, 3])
def test_ignite_ranks_divide_the_queries(world):
    ranks = harness.shared_results(world)
    for rank, suites in enumerate(ranks):
        got = harness.value(suites[SUITE]["ignite_divided"], f"rank {rank}/{world}")
        assert exactly(got["result"], got["one"]), (rank, got["result"], got["one"])
        assert got["evaluated"] == _shares(got["n_queries"], world)[rank]


@pytest.mark.parametrize("world", [2, 3])
def test_torchmetrics_ranks_divide_the_queries_when_synced(world):
    ranks = harness.shared_results(world)
    for rank, suites in enumerate(ranks):
        got = harness.value(suites[SUITE]["lightning_divided"], f"rank {rank}/{world}")
        assert exactly(got["result"]["values"], got["one"]["values"]), (rank, got)
        for field in ("ci", "per_query", "query_ids"):  # intervals and per-query values after the divided compute
            assert exactly(got["result"][field], got["one"][field]), (rank, field)
        assert got["result"]["ci"]
        assert got["result"]["n_queries"].item() == N
        assert got["evaluated"] == _shares(N, world)[rank]
        local = harness.value(suites[SUITE]["lightning_local_not_divided"], f"rank {rank}/{world}")
        assert local["evaluated"] == 0  # unsynced: this rank's own rows, evaluated whole
        if local["one"] is None:
            assert all(math.isnan(v.item()) for v in local["result"].values())
        else:
            assert exactly(local["result"]["values"], local["one"]["values"])


def test_adapters_in_one_process_do_not_split(reference):
    got = harness.value(reference["ignite_divided"], "ignite")
    assert got["evaluated"] == 0 and exactly(got["result"], got["one"])
    got = harness.value(reference["lightning_divided"], "lightning")
    assert got["evaluated"] == 0 and exactly(got["result"]["values"], got["one"]["values"])
