"""evaluate_trec evaluates the queries in blocks (trec.evaluate.BLOCK_ENTRIES): the lines and the
values are those of one block, whatever the blocks, with queries only in the run or only in the qrels."""
from __future__ import annotations

import random

import pytest
import torch

pytest.importorskip("numpy")

from retrieval_core.trec import evaluate as evaluate_module  # noqa: E402
from retrieval_core.trec import evaluate_trec, qrels_from_dict, run_from_dict  # noqa: E402

MEASURES = ["all_trec", "P(rel=2)@5", "AP(judged_only=True)", "Judged@10", "ndcg.1=3,2=9"]


def _case(seed: int):
    rng = random.Random(seed)
    qrels, run = {}, {}
    for q in range(40):
        qid = f"q{rng.randrange(10**6)}"
        docs = [f"d{i}" for i in range(30)]
        if q % 7 != 3:  # some queries only in the run
            qrels[qid] = {d: rng.choice([-1, 0, 0, 1, 2, 3]) for d in rng.sample(docs, rng.randint(1, 20))}
        if q % 5 != 1:  # some only in the qrels
            run[qid] = {d: round(rng.random(), 1) for d in rng.sample(docs, rng.randint(1, 25))}  # ties
    return qrels_from_dict(qrels), run_from_dict(run)


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("complete", [False, True])
def test_blocks_of_any_size_give_the_values_of_one_block(seed, complete, monkeypatch):
    qrels, run = _case(seed)
    whole = evaluate_trec(qrels, run, MEASURES, complete=complete)
    for entries in (1, 50, 300):  # blocks of 1 query, and of a few
        monkeypatch.setattr(evaluate_module, "BLOCK_ENTRIES", entries)
        blocked = evaluate_trec(qrels, run, MEASURES, complete=complete)
        assert blocked.query_ids == whole.query_ids
        assert torch.equal(blocked.values.nan_to_num(-7.0), whole.values.nan_to_num(-7.0))
        assert blocked.lines(per_query=True) == whole.lines(per_query=True)
