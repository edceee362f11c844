"""Anchor tests against trec_eval through pytrec_eval, on the cases of
``tests.references.GRADED_CASES`` (shared with the ranx cross-checks).

Data: random continuous scores without ties (trec_eval orders ties differently
from us, see ``test_trec_tie_order_differs``), integer graded gains 0..3 with about
25% relevant, and queries with no relevant candidate (R = 0).

Differences from our definitions, each asserted below:

* R = 0: pytrec_eval reports 0 for such a query (when it is in the qrels); our
  metrics are undefined there. So it equals ours under ``empty="zero"``
  on every query, and ours under ``empty="skip"`` on the queries with R > 0 (NaN,
  i.e. skipped, on the others); its mean over R > 0 queries is our skip mean.
* Ties: trec_eval breaks equal scores by document id, descending; ours by lower
  column first.
* Custom cutoffs in pytrec_eval must be given as measure parameters
  (``"P.3"``, ``"ndcg_cut.1,3,10,50"``); they then come back as ``P_3`` etc.
"""
from __future__ import annotations

import pytest
import torch

from tests.references import GRADED_CASES, check_against_anchor, did, graded_case, ours_per_query, qid, to_trec

import retrieval_core
from retrieval_core.trec import evaluate_trec, qrels_from_dict, run_from_dict

import pytrec_eval

KS = (1, 3, 10, 50)
ATOL = 1e-6


CUTS = ",".join(str(k) for k in KS)
PYTREC_MEASURES = {"map", "Rprec", "recip_rank", "ndcg", f"map_cut.{CUTS}", f"P.{CUTS}", f"recall.{CUTS}", f"ndcg_cut.{CUTS}"}
# pytrec_eval result name -> our key
PYTREC_KEYS = {
    "map": "map",
    "Rprec": "r_precision",
    "recip_rank": "mrr",
    "ndcg": "ndcg",
    **{f"map_cut_{k}": f"map@{k}" for k in KS},
    **{f"P_{k}": f"precision@{k}" for k in KS},
    **{f"recall_{k}": f"recall@{k}" for k in KS},
    **{f"ndcg_cut_{k}": f"ndcg@{k}" for k in KS},
}

_PYTREC = {}


def pytrec_results(name):
    if name not in _PYTREC:
        preds, target, _ = graded_case(name)
        qrels, run = to_trec(preds, target)
        res = pytrec_eval.RelevanceEvaluator(qrels, PYTREC_MEASURES).evaluate(run)
        n = preds.shape[0]
        assert sorted(res) == [qid(i) for i in range(n)], "pytrec_eval must keep the R = 0 queries (they are judged)"
        _PYTREC[name] = {m: torch.tensor([res[qid(i)][m] for i in range(n)], dtype=torch.float64) for m in PYTREC_KEYS}
    return _PYTREC[name]


def test_pytrec_accepts_custom_cutoffs():
    qrels, run = to_trec(torch.tensor([[0.3, 0.9, 0.5]]), torch.tensor([[2, 0, 1]]))
    res = pytrec_eval.RelevanceEvaluator(qrels, {"P.3,50", "ndcg_cut.3"}).evaluate(run)[qid(0)]
    assert set(res) == {"P_3", "P_50", "ndcg_cut_3"}
    assert res["P_3"] == pytest.approx(2 / 3) and res["P_50"] == pytest.approx(2 / 50)


@pytest.mark.parametrize("name", list(GRADED_CASES))
@pytest.mark.parametrize("measure", list(PYTREC_KEYS))
def test_pytrec_eval_per_query(name, measure):
    preds, target, n_relevant = graded_case(name)
    anchor = pytrec_results(name)[measure]
    check_against_anchor(anchor, preds, target, PYTREC_KEYS[measure], n_relevant)


def test_trec_precision_divides_by_k_past_the_list_end():
    """P_k with k > N divides by k, as our precision@k; precision_adaptive@k differs there."""
    preds, target, n_relevant = graded_case("q7_n5")
    res = pytrec_results("q7_n5")
    hits = (target > 0).sum(1).to(torch.float64)  # k >= N: every relevant item is retrieved
    for k in (10, 50):
        torch.testing.assert_close(res[f"P_{k}"], hits / k, atol=ATOL, rtol=0)
        adaptive = ours_per_query(preds, target, [f"precision_adaptive@{k}"], empty="zero")[f"precision_adaptive@{k}"]
        has = n_relevant > 0
        torch.testing.assert_close(adaptive[has], hits[has] / 5, atol=ATOL, rtol=0)
        # Different definition: trec P_k != precision_adaptive@k wherever there is a hit.
        assert (adaptive[has] - res[f"P_{k}"][has]).abs().min() > 1e-3


def test_trec_tie_order_differs():
    """trec_eval breaks ties by docid descending; ours by lower column first.

    Two candidates with the same score, only the first column relevant: ours ranks
    it first (P@1 = 1), trec_eval ranks the later docid first (P_1 = 0). Reversing
    the columns (so that 'lower column' = 'higher docid') makes them agree.
    """
    preds = torch.tensor([[0.5, 0.5, 0.1]])
    target = torch.tensor([[1, 0, 0]])
    qrels, run = to_trec(preds, target)
    trec = pytrec_eval.RelevanceEvaluator(qrels, {"P.1", "recip_rank"}).evaluate(run)[qid(0)]
    ours = retrieval_core.evaluate_scores(preds, target, ["precision@1", "mrr"])
    assert ours["precision@1"].item() == 1.0 and trec["P_1"] == 0.0
    assert ours["mrr"].item() == 1.0 and trec["recip_rank"] == 0.5
    # Same data, columns in reversed docid order: docids d00002, d00001, d00000.
    run_rev = {qid(0): {did(2 - j): s for j, s in enumerate(preds[0].tolist())}}
    qrels_rev = {qid(0): {did(2 - j): int(g) for j, g in enumerate(target[0].tolist())}}
    trec_rev = pytrec_eval.RelevanceEvaluator(qrels_rev, {"P.1"}).evaluate(run_rev)[qid(0)]
    assert trec_rev["P_1"] == ours["precision@1"].item() == 1.0


def test_pytrec_eval_ranks_scores_as_32_bit_floats():
    # pytrec_eval bundles a trec_eval whose run scores are C floats: two scores that differ
    # only past float32's precision are tied there and ordered by document id (descending);
    # trec_eval 10 reads doubles, as evaluate_trec does. Found at 100k queries (bench_trec_scale.py).
    high, low = 0.7874791513757855, 0.787479135962232  # equal as float32, not as float64
    assert torch.tensor(high, dtype=torch.float32) == torch.tensor(low, dtype=torch.float32)
    qrels = {"q": {"a": 1, "b": 0}}
    run = {"q": {"a": high, "b": low}}  # "b" > "a": a tie goes to "b" first
    theirs = pytrec_eval.RelevanceEvaluator(qrels, {"recip_rank"}).evaluate(run)["q"]["recip_rank"]
    ours = evaluate_trec(qrels_from_dict(qrels), run_from_dict(run), ["recip_rank"]).summary()["recip_rank"]
    assert (theirs, ours) == (0.5, 1.0)
    f32 = {"q": {d: float(torch.tensor(s, dtype=torch.float32)) for d, s in run["q"].items()}}
    assert evaluate_trec(qrels_from_dict(qrels), run_from_dict(f32), ["recip_rank"]).summary()["recip_rank"] == 0.5
