"""Every input is checked once per call on 2 gloo processes (issue 28): the distributed
entry points (gathered, sharded and separate galleries, evaluate_split) and the ignite and
torchmetrics adapters' synced compute, on every rank (tests/distributed/check_count_scenarios.py)."""
from __future__ import annotations

from tests.distributed import harness
from tests.distributed.check_count_scenarios import SCENARIOS

SUITE = "tests.distributed.check_count_scenarios"


def test_suite_is_registered():
    assert SUITE in harness.SUITES


def test_every_check_runs_once_per_call_on_every_rank():
    for rank, suites in enumerate(harness.shared_results(2)):
        for name in SCENARIOS:
            counts = harness.value(suites[SUITE][name], f"rank {rank}, {name}")
            assert counts, (rank, name)
            assert all(n == 1 for n in counts.values()), (rank, name, {k: n for k, n in counts.items() if n != 1})
        # the embedding checks ran, once, inside each embedding path (not skipped)
        for name in ("across_gathered", "across_sharded", "split", "ignite_embeddings", "lightning_embeddings"):
            assert suites[SUITE][name]["value"].get("check_embedding_values") == 1, (rank, name)
