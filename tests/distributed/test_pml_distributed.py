"""``compat.pml.AccuracyCalculator(gather=True)`` on 2 and 3 gloo processes (the shared
harness): every rank returns what one process returns on the concatenation of
every rank's rows, bit for bit (uneven shards, a rank without rows, a separate
reference set cut differently, ``ref_includes_query``, ``avg_of_avgs``,
``return_per_class``, lone labels, a custom label comparison, a user's
``knn_func`` and a subclass's metric); the built-in metrics divide the search
between ranks (no embeddings gathered whole); a disagreement between ranks, or
a bad input on one rank, is an error on every rank.
"""
from __future__ import annotations

import functools

import pytest

from retrieval_core.compat.pml import AccuracyCalculator
from tests.distributed import harness
from tests.distributed.pml_scenarios import CASES, DIVIDED, ERRORS, N, bounds
from tests.distributed.test_distributed_eval import exactly

SUITE = "tests.distributed.pml_scenarios"


@functools.lru_cache(maxsize=None)
def _results(world: int):
    return harness.run_group(world, [SUITE])


def test_one_process_gather_is_the_plain_call():
    local = harness.run_local(CASES)
    for name in CASES:
        got = harness.value(local[name], name)
        assert exactly(got["dist"], got["one"]), name
        assert got["searched"] in ([], [N]) and not got["gathered"], name  # no process group: nothing to share


def test_gather_option_is_checked():
    with pytest.raises(TypeError, match="gather must be None, True or False; got 'yes'"):
        AccuracyCalculator(gather="yes")


@pytest.mark.parametrize("world", [2, 3])
def test_every_rank_equals_one_process(world):
    ranks = _results(world)
    for name in CASES:
        for rank, suites in enumerate(ranks):
            where = f"rank {rank}/{world}, {name}"
            got = harness.value(suites[SUITE][name], where)
            assert got["dist"] and exactly(got["dist"], got["one"]), \
                f"{where}:\n got {got['dist']}\n one process {got['one']}"
            if name in DIVIDED:  # each rank searched its own queries only
                layout = "first_empty" if "first_empty" in name else "uneven"
                b = bounds(world, N, layout)
                assert got["searched"] == [b[rank + 1] - b[rank]] and not got["gathered"], (where, got["searched"])
            else:  # a user's knn_func, a subclass's metric, ref_includes_query with a reference: gathered whole
                assert got["gathered"] and got["searched"] == [], where


@pytest.mark.parametrize("world", [2, 3])
def test_cases_see_lone_labels_and_classes(world):
    got = harness.value(_results(world)[0][SUITE]["per_class_k"], "per_class_k")
    assert all(isinstance(v, list) and len(v) == 5 for v in got["dist"].values())  # labels 0-4; 9 is lone
    lone = harness.value(_results(world)[0][SUITE]["self_all"], "self_all")["dist"]
    assert set(lone) == {"precision_at_1", "mean_average_precision", "mean_average_precision_at_r",
                         "mean_reciprocal_rank", "r_precision", "NMI", "AMI"}


@pytest.mark.parametrize("world", [2, 3])
def test_errors_are_raised_on_every_rank(world):
    for name, (kind, part) in ERRORS.items():
        for rank, suites in enumerate(_results(world)):
            got_kind, message = harness.error(suites[SUITE][name], f"rank {rank}/{world}, {name}")
            assert got_kind == kind and part in message, (rank, name, got_kind, message)
    message = harness.error(_results(world)[0][SUITE]["error_input"])[1]
    assert f"(raised on rank {world - 1} of {world})" in message


@pytest.mark.parametrize("world", [2, 3])
def test_gather_false_gives_each_rank_its_own_values(world):
    for rank, suites in enumerate(_results(world)):
        got = harness.value(suites[SUITE]["per_rank"], f"rank {rank}")
        assert exactly(got["mine"], got["alone"]), (rank, got)
