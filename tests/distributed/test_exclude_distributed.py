"""``exclude=`` on 2 gloo processes (the shared harness; the suite: exclude_scenarios.py): the
adapters' ``RankingMetrics`` and ``EmbeddingMetrics`` with uneven shares, a padding repeat of a
user with its exclusions, and a rank without data, and ``evaluate_split``, give on every rank
the one-process result, which is ``evaluate_scores`` with ``mask=`` False at the excluded items
(scores) and ``evaluate_embeddings(exclude=)`` (embeddings), under every tie mode."""
from __future__ import annotations

import functools

import pytest
import torch

pytest.importorskip("ignite")
pytest.importorskip("torchmetrics")

import retrieval_core as rc  # noqa: E402
from tests.distributed import harness  # noqa: E402
from tests.distributed.exclude_scenarios import (  # noqa: E402
    ITEM_ID, KEYS, MODES, N_USERS, SCENARIOS, data, layout_pairs, user_batches,
)

SUITE = "tests.distributed.exclude_scenarios"


@functools.lru_cache(maxsize=None)
def _ranks():
    return harness.run_group(2, [SUITE])


def _dense(pairs, shape):
    out = torch.zeros(shape, dtype=torch.bool)
    out[pairs[0], pairs[1]] = True
    return out


def test_the_shares_are_uneven_and_repeat_a_user():
    rows = [[u for start, stop in user_batches(rank, 2, "padded") for u in range(start, stop)] for rank in range(2)]
    assert len(rows[0]) != len(rows[1]) and rows[1][0] in rows[0]
    assert sorted(set(rows[0] + rows[1])) == list(range(N_USERS))
    assert user_batches(0, 2, "empty_rank") == []


def test_the_one_process_reference_is_the_core():
    preds, target, users, items, user_labels, item_labels, seen = data()
    reference = harness.run_local(SCENARIOS)
    for mode in MODES:
        keys = KEYS[mode]
        for name, outcome in reference.items():
            if name.startswith("error_"):
                continue
            mine = layout_pairs(seen, "pairs_on_rank_1" if name.endswith("pairs_on_rank_1") else "")
            if "ranking" in name:
                want = rc.evaluate_scores(preds, target, keys, mask=~_dense(mine, preds.shape), ties=mode,
                                          reduce="none")
            else:
                want = rc.evaluate_embeddings(users, user_labels, keys, gallery=items, gallery_labels=item_labels,
                                              distance="dot", exclude=mine, ties=mode, reduce="none")
            got = harness.value(outcome, name)[mode]["per_query"]
            assert sorted(got) == list(range(N_USERS)), name
            for user in range(N_USERS):
                for key, value in zip(keys, got[user]):
                    w = want[key][user].item()
                    assert value == pytest.approx(w, abs=1e-12, rel=0) or (value == "nan" and w != w), \
                        (name, mode, user, key)
    assert ITEM_ID > N_USERS  # item ids never meet user ids (an item is never matched with one of its id)


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_two_processes_equal_one():
    reference = harness.run_local(SCENARIOS)
    for rank, suites in enumerate(_ranks()):
        for name in SCENARIOS:
            if name.startswith("error_"):
                continue
            got = harness.value(suites[SUITE][name], f"rank {rank}, {name}")
            want = harness.value(reference[name], name)
            for mode in MODES:
                assert got[mode]["per_query"] == want[mode]["per_query"], (rank, name, mode)
                for key in KEYS[mode]:
                    a, b = got[mode]["summary"][key], want[mode]["summary"][key]
                    assert a == b or a == pytest.approx(b, abs=1e-12, rel=0), (rank, name, mode, key)


def test_evaluate_split_with_exclude_on_one_rank_only_is_an_error_on_every_rank():
    for rank, suites in enumerate(_ranks()):
        kind, message = harness.error(suites[SUITE]["error_split_exclude_on_one_rank"], f"rank {rank}")
        assert kind == "ValueError" and "exclude" in message, (rank, message)
