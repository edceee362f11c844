"""The ignite adapters under torch.distributed (gloo on CPU, 2 and 3 processes):
every rank must return what one process returns on the whole data.

The cases of ``scenarios.py`` run through the shared harness (``harness.py``):
one group per world size for every suite, with timeouts, so a hang or a crash
fails the test with each rank's stderr instead of blocking.
"""
from __future__ import annotations

import pytest

from tests.distributed import harness
from tests.distributed.scenarios import CASES, same

SUITE = "tests.distributed.scenarios"
# fine on one process, an error on every rank of several
EXPECTED_DIFFERENT = {"ranking_mixed_ids"}
# an error everywhere, one process included
EXPECTED_ERRORS = {"embeddings_ids_from_zero", "ranking_ids_from_zero"}
# negative control: without ids, DistributedSampler's padding repeats queries and
# changes the result (so the "_ids" cases do test the de-duplication)
PADDED = {"ranking_sampler_without_ids"}


@pytest.fixture(scope="module")
def reference():
    return harness.run_local(CASES)


def test_reference_cases_compute(reference):
    # the one-process reference itself: every case gives values, except the "nobody" and error cases
    for name, outcome in reference.items():
        if name.endswith("nobody"):
            assert harness.error(outcome, name)[0] == "NotComputableError"
        elif name in EXPECTED_ERRORS:
            kind, message = harness.error(outcome, name)
            assert kind == "ValueError" and "repeat with different rows" in message, message
        else:
            harness.value(outcome, name)


def test_every_dtype_is_evaluated(reference):
    # the dtype case covers every label and embedding dtype one process accepts
    got = harness.value(reference["embeddings_every_dtype"])
    names = {n.split(" ")[1] for n in got}
    assert {"torch.uint16", "torch.uint32", "torch.uint64", "torch.int16", "torch.bfloat16", "torch.bool"} <= names


@pytest.mark.parametrize("world", [2, 3])
def test_every_rank_matches_one_process(world, reference):
    ranks = harness.shared_results(world)
    assert len(ranks) == world
    for rank, suites in enumerate(ranks):
        results = suites[SUITE]
        assert set(results) == set(CASES)
        for name in CASES:
            where = f"rank {rank}/{world}, {name}"
            if name in EXPECTED_DIFFERENT:
                kind, message = harness.error(results[name], where)
                assert kind == "ValueError", (where, kind, message)
                assert "'ids' was given on 1 of the 2 processes that saw data" in message
                continue
            if name in EXPECTED_ERRORS or name.endswith("nobody"):
                # the same error; which ids repeat (the counts of differing rows
                # depend on which copy comes first, so they are left out)
                got, expected = harness.error(results[name], where), harness.error(reference[name], name)
                assert (got[0], got[1].split(" (")[0]) == (expected[0], expected[1].split(" (")[0]), (where, got)
                continue
            got, expected = harness.value(results[name], where), harness.value(reference[name], name)
            if name == "id_warnings":  # see test_computing_without_ids_warns_once_on_rank_0
                continue
            if name in PADDED:
                assert not same(got, expected), (where, got)
                continue
            assert same(got, expected), f"{where}:\n got {got}\n one process {expected}"


@pytest.mark.parametrize("world", [2, 3])
def test_computing_without_ids_warns_once_on_rank_0(world, reference):
    # issue 18: DistributedSampler's padding cannot be seen without ids; rank 0 says so,
    # once per metric (a second compute is silent); with ids, or in one process, nothing
    assert all(w == [] for w in harness.value(reference["id_warnings"]).values())
    for rank, suites in enumerate(harness.shared_results(world)):
        got = harness.value(suites[SUITE]["id_warnings"], f"rank {rank}/{world}")
        for case, warned in got.items():
            expected = 1 if rank == 0 and "ids=False" in case else 0
            assert len(warned) == expected, (rank, case, warned)
            assert all(f"over {world} processes without ids" in w and '"ids"' in w for w in warned)
        assert "use compact=False" in "".join(got["compact ids=False"]) or rank > 0
