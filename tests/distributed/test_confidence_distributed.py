"""Confidence keys on 2 and 3 gloo processes (the shared harness): every rank
returns what one process returns on every rank's rows (the core bit for bit, the
adapters to rounding), and bad confidences raise on every rank."""
from __future__ import annotations

import math

import pytest
import torch

from tests.distributed import harness
from tests.distributed.confidence_scenarios import ADAPTERS, CORE, ERRORS, SCENARIOS
from tests.distributed.test_distributed_eval import exactly

SUITE = "tests.distributed.confidence_scenarios"


def close(a, b) -> bool:
    if isinstance(a, dict):
        return list(a) == list(b) and all(close(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(close(x, y) for x, y in zip(a, b))
    return a.shape == b.shape and torch.allclose(a.double(), b.double(), rtol=0, atol=1e-12, equal_nan=True)


def test_one_process():
    local = harness.run_local(SCENARIOS)
    for name in CORE:
        got = harness.value(local[name], name)
        assert exactly(got["dist"], got["one"]), name
        assert set(got["dist"]["curves"]) == {"erc:cmc@1", "erc:map@r", "conf:precision@5"}
        assert not any(math.isnan(v.item()) for k, v in got["dist"]["values"].items() if "/" not in k), name
    intervals = harness.value(local["core_intervals"])["dist"]["ci"]
    assert {"erc:cmc@1", "kendall:ndcg@5", "erc:cmc@1/0"} <= set(intervals)
    for name in ADAPTERS:
        got = harness.value(local[name], name)
        assert close(got["dist"], got["one"]), name


@pytest.mark.parametrize("world", [2, 3])
def test_every_rank_equals_one_process(world):
    ranks = harness.shared_results(world)
    for rank, suites in enumerate(ranks):
        results = suites[SUITE]
        for name in CORE:
            got = harness.value(results[name], f"rank {rank}/{world}, {name}")
            assert exactly(got["dist"], got["one"]), (rank, name, got)
        for name in ADAPTERS:
            got = harness.value(results[name], f"rank {rank}/{world}, {name}")
            assert close(got["dist"], got["one"]), (rank, name, got)
        for name, (kind, part) in ERRORS.items():
            got_kind, message = harness.error(results[name], f"rank {rank}/{world}, {name}")
            assert got_kind == kind and part in message, (rank, name, got_kind, message)
