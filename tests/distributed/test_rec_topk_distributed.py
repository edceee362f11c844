"""TopKMetrics of both adapters on 2 gloo processes (the shared harness): uneven shares of
the users with DistributedSampler's padding, and a rank without users, give on every rank
the one-process result (every key, the set-level ones included), which is evaluate_topk's
on all the users; without user ids the padding repeat counts twice; ranks given other
options raise the same ValueError."""
from __future__ import annotations

import functools

import pytest
import torch

pytest.importorskip("ignite")
pytest.importorskip("torchmetrics")

import retrieval_core as rc  # noqa: E402
from tests.distributed import harness  # noqa: E402
from tests.distributed.rec_topk_scenarios import KEYS, PADDED, SCENARIOS, _data  # noqa: E402

SUITE = "tests.distributed.rec_topk_scenarios"
VALUED = [name for name in SCENARIOS if name != "options_differ"]


@functools.lru_cache(maxsize=None)
def _ranks():
    return harness.run_group(2, [SUITE])


def test_the_one_process_reference_is_evaluate_topk():
    topk, truth, history, items = _data()
    want = rc.evaluate_topk(topk, truth.to_sparse(), KEYS, history=history.nonzero().T, **items)
    local = harness.run_local({k: SCENARIOS[k] for k in VALUED})
    for name in VALUED:
        got = harness.value(local[name], name)
        for key in KEYS:
            assert got[key] == pytest.approx(float(want[key]), rel=1e-12, abs=0), (name, key)


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_two_processes_equal_one():
    reference = harness.run_local({k: SCENARIOS[k] for k in VALUED})
    for rank, suites in enumerate(_ranks()):
        for name in VALUED:
            got = harness.value(suites[SUITE][name], f"rank {rank}, {name}")
            want = harness.value(reference[name], name)
            if name in PADDED:  # the repeated user counted twice: the user ids do matter
                assert any(abs(got[k] - want[k]) > 1e-9 for k in KEYS), (rank, name)
                continue
            for key in KEYS:
                assert got[key] == pytest.approx(want[key], rel=1e-12, abs=0), (rank, name, key)


def test_ranks_given_other_options_raise_the_same_error():
    messages = [harness.value(suites[SUITE]["options_differ"], f"rank {rank}")
                for rank, suites in enumerate(_ranks())]
    assert all(m["error"] == "ValueError" and "tail_ratio" in m["message"] for m in messages), messages
    assert messages[0]["message"] == messages[1]["message"]
