"""The shared multi-process harness itself: per-rank values, errors with the
child's traceback, and a rank that dies or hangs stops the group with a report
(never a hang of the test run)."""
from __future__ import annotations

import time

import pytest

from tests.distributed import harness

SUITE = "tests.distributed.harness_selftest"


@pytest.mark.parametrize("world", [2, 3])
def test_values_and_errors_per_rank(world):
    ranks = harness.shared_results(world)
    assert len(ranks) == world
    for rank, suites in enumerate(ranks):
        got = harness.value(suites[SUITE]["identity"])
        assert got == {"rank": rank, "world": world, "dist": (rank, world), "sum": sum(range(world))}
        outcome = suites[SUITE]["raises_on_rank_1"]
        if rank == 1:
            assert harness.error(outcome) == ("KeyError", "'raised on purpose on rank 1'")
            with pytest.raises(AssertionError, match=r"(?s)raised KeyError.*Traceback.*raise KeyError"):
                harness.value(outcome, "rank 1")
        else:
            assert harness.value(outcome) == rank
            with pytest.raises(AssertionError, match="expected an error"):
                harness.error(outcome)


def test_a_dead_rank_stops_the_group_at_once():
    start = time.monotonic()
    with pytest.raises(harness.HarnessError) as info:
        harness.run_group(2, [f"{SUITE}:CRASH"], timeout_s=120)
    assert time.monotonic() - start < 100  # not the time limit: rank 0 was killed when rank 1 died
    message = str(info.value)
    assert "a rank failed" in message and "rank 1: exit status 3" in message
    assert "rank 1 exits on purpose" in message


def test_a_hanging_group_is_killed_at_its_time_limit():
    start = time.monotonic()
    with pytest.raises(harness.HarnessError, match=r"did not finish in 6 s \(hang\?\); killed") as info:
        harness.run_group(1, [f"{SUITE}:HANG"], timeout_s=6)
    assert time.monotonic() - start < 30
    assert "rank 0: exit status -9" in str(info.value)
