"""Ranks given different options (issue 18, item 4) on 2 and 3 gloo processes: every
rank raises the same ValueError naming each option that differs and its value on
each rank, at once (no rank left waiting in a collective); ranks that agree
(callables capturing each rank's own values included) get their results."""
from __future__ import annotations

import re

import pytest

from tests.distributed import harness
from tests.distributed.agreement_scenarios import CASES, CONTROLS, ERRORS

SUITE = "tests.distributed.agreement_scenarios"
HEAD = "the processes were given different options (each must be the same on every process): "
QUICK_S = 20.0  # far below the harness's 60 s collective timeout: nobody waited for a peer


def test_suite_is_registered():
    assert SUITE in harness.SUITES


@pytest.mark.parametrize("world", [2, 3])
def test_every_rank_names_the_options_that_differ(world):
    ranks = harness.shared_results(world)
    for name, (_, named) in CASES.items():
        messages = set()
        for rank, suites in enumerate(ranks):
            got = harness.value(suites[SUITE][name], f"rank {rank}/{world}, {name}")
            where = f"rank {rank}/{world}, {name}: {got}"
            assert got["error"] == "ValueError" and HEAD in got["message"], where
            assert got["seconds"] < QUICK_S, where
            parts = got["message"].split(HEAD, 1)[1].split("; ")
            assert sorted(part.split(": ")[0] for part in parts) == sorted(named), where
            # the last rank differs: its value is shown against the others'
            others = "rank 0" if world == 2 else "ranks 0 and 1"
            for part in parts:
                assert re.fullmatch(rf"\w+: .+ on {others} vs .+ on rank {world - 1}", part), (part, where)
            messages.add(got["message"])
        assert len(messages) == 1, (name, messages)  # the same words on every rank


@pytest.mark.parametrize("world", [2, 3])
def test_ranks_that_agree_get_results(world):
    for rank, suites in enumerate(harness.shared_results(world)):
        for name in CONTROLS:
            got = harness.value(suites[SUITE][name], f"rank {rank}/{world}, {name}")
            assert got["error"] is None and got["value"] is True, (rank, name, got)


@pytest.mark.parametrize("world", [2, 3])
def test_a_rank_whose_input_fails_fails_every_rank(world):
    for rank, suites in enumerate(harness.shared_results(world)):
        for name, (_, kind, part) in ERRORS.items():
            got = harness.value(suites[SUITE][name], f"rank {rank}/{world}, {name}")
            assert got["error"] == kind and part in got["message"] and got["seconds"] < QUICK_S, (rank, name, got)
