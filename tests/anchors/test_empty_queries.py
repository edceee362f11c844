"""What each installed anchor does with a query that has no relevant candidate
(docs/metrics.md, "Empty queries and the anchors"), on one example.

Two queries of two candidates, both ranking candidate 0 first: query 0's candidate
0 is relevant, query 1 has no relevant candidate. Per query P@1 is 1 and (for an
anchor that counts the empty query) 0, so by hand:

* an anchor that counts the empty query as 0 reports P@1 = (1 + 0) / 2 = 0.5,
  which is our ``empty="zero"``;
* an anchor that leaves it out reports 1 / 1 = 1.0, which is our default
  ``empty="skip"``.
"""
from __future__ import annotations

import warnings

import pytest
import torch

import retrieval_core as rc

SCORES = torch.tensor([[0.9, 0.1], [0.9, 0.1]])
GAINS = torch.tensor([[1, 0], [0, 0]])
COUNTED_AS_ZERO, SKIPPED = 0.5, 1.0


def ours(empty: str) -> float:
    return rc.evaluate_scores(SCORES, GAINS, ["precision@1"], empty=empty)["precision@1"].item()


def flat():
    """The example in torchmetrics' flat form: preds, target, indexes."""
    return SCORES.flatten(), GAINS.flatten(), torch.tensor([0, 0, 1, 1])


def trec_dicts(judge_empty: bool = True):
    qrels = {"q0": {"d0": 1, "d1": 0}, "q1": {"d0": 0, "d1": 0}}
    if not judge_empty:
        del qrels["q1"]
    run = {q: {"d0": 0.9, "d1": 0.1} for q in ("q0", "q1")}
    return qrels, run


def test_ours_default_skips_and_zero_counts():
    assert ours("skip") == SKIPPED
    assert rc.evaluate_scores(SCORES, GAINS, ["precision@1"])["precision@1"].item() == SKIPPED  # the default
    assert ours("zero") == COUNTED_AS_ZERO
    res = rc.evaluate_scores(SCORES, GAINS, ["precision@1"])
    assert int(res.n_empty["precision@1"]) == 1  # always reported


def test_trec_eval_counts_a_judged_empty_query_as_zero():
    import pytrec_eval

    qrels, run = trec_dicts()
    res = pytrec_eval.RelevanceEvaluator(qrels, {"P.1"}).evaluate(run)
    assert sorted(res) == ["q0", "q1"] and res["q1"]["P_1"] == 0.0
    mean = pytrec_eval.compute_aggregated_measure("P_1", [r["P_1"] for r in res.values()])
    assert mean == COUNTED_AS_ZERO == ours("zero") != ours("skip")


def test_trec_eval_leaves_out_a_query_missing_from_the_qrels():
    """Only a query with no qrels line at all is left out (trec_eval without -c)."""
    import pytrec_eval

    qrels, run = trec_dicts(judge_empty=False)
    res = pytrec_eval.RelevanceEvaluator(qrels, {"P.1"}).evaluate(run)
    assert sorted(res) == ["q0"] and res["q0"]["P_1"] == SKIPPED == ours("skip")


def test_ranx_counts_an_empty_query_as_zero_and_refuses_a_missing_one():
    import ranx

    qrels, run = trec_dicts()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # numba warnings
        mean = ranx.evaluate(ranx.Qrels(qrels), ranx.Run(run), "precision@1")
    assert mean == pytest.approx(COUNTED_AS_ZERO) and ours("zero") == COUNTED_AS_ZERO != ours("skip")
    qrels, run = trec_dicts(judge_empty=False)
    with pytest.raises(AssertionError, match="query ids do not match"):
        ranx.evaluate(ranx.Qrels(qrels), ranx.Run(run), "precision@1")


def test_torchmetrics_functional_counts_an_empty_query_as_zero():
    from torchmetrics.functional.retrieval import retrieval_precision

    per_query = [retrieval_precision(SCORES[i], GAINS[i], top_k=1).item() for i in range(2)]
    assert per_query == [1.0, 0.0]
    assert sum(per_query) / 2 == COUNTED_AS_ZERO == ours("zero")


@pytest.mark.parametrize("action,empty,expected", [
    (None, "zero", COUNTED_AS_ZERO),  # torchmetrics' default is "neg"
    ("neg", "zero", COUNTED_AS_ZERO),
    ("skip", "skip", SKIPPED),
    ("pos", "one", 1.0),
])
def test_torchmetrics_class_empty_target_action(action, empty, expected):
    import torchmetrics.retrieval as tmr

    import lightning_retrieval as lr

    kwargs = {} if action is None else {"empty_target_action": action}
    theirs = tmr.RetrievalPrecision(top_k=1, **kwargs)(*flat()[:2], indexes=flat()[2]).item()
    drop_in = lr.RetrievalPrecision(top_k=1, **kwargs)(*flat()[:2], indexes=flat()[2]).item()
    assert theirs == drop_in == expected == ours(empty)


def test_torchmetrics_class_error_action_raises_like_ours():
    import torchmetrics.retrieval as tmr

    with pytest.raises(ValueError, match="no positive target"):
        tmr.RetrievalPrecision(top_k=1, empty_target_action="error")(*flat()[:2], indexes=flat()[2])
    with pytest.raises(ValueError, match="empty='error' forbids them"):
        ours("error")


@pytest.mark.parametrize("ignore_zero_hits,empty,expected", [
    (None, "skip", SKIPPED),  # ignite's default is True
    (True, "skip", SKIPPED),
    (False, "zero", COUNTED_AS_ZERO),
])
@pytest.mark.parametrize("name", ["HitRate", "NDCG"])
def test_ignite_rec_sys_ignore_zero_hits(name, ignore_zero_hits, empty, expected):
    """P@1 = hit_rate@1 = ndcg@1 on this example (one candidate, gain 1 or 0)."""
    import ignite.metrics.rec_sys as rec_sys

    import ignite_retrieval

    kwargs = {} if ignore_zero_hits is None else {"ignore_zero_hits": ignore_zero_hits}
    values = []
    for cls in (getattr(rec_sys, name), getattr(ignite_retrieval, name)):
        metric = cls(top_k=[1], **kwargs)
        metric.update((SCORES, GAINS.float()))
        values.append(metric.compute())
    assert values == [[expected], [expected]] and ours(empty) == expected


def test_sklearn_ndcg_counts_an_empty_query_as_zero():
    from sklearn.metrics import ndcg_score

    assert ndcg_score(GAINS.numpy(), SCORES.numpy(), k=1) == COUNTED_AS_ZERO
    assert rc.evaluate_scores(SCORES, GAINS, ["ndcg@1"], empty="zero")["ndcg@1"].item() == COUNTED_AS_ZERO


def test_pml_leaves_out_lone_query_labels():
    """PML drops a query whose label no other reference item has ("lone"): our
    default skip. Query 2 (label 1) is lone; queries 0 and 1 find each other."""
    import pytorch_metric_learning.utils.accuracy_calculator as pml_calc
    from pytorch_metric_learning.distances import CosineSimilarity
    from pytorch_metric_learning.utils.inference import CustomKNN

    x = torch.tensor([[1.0, 0.0], [0.9, 0.1], [0.0, 1.0]])
    labels = torch.tensor([0, 0, 1])
    calc = pml_calc.AccuracyCalculator(include=("precision_at_1",), k=1, knn_func=CustomKNN(CosineSimilarity()),
                                       device=torch.device("cpu"))
    theirs = calc.get_accuracy(x, labels)["precision_at_1"]
    mine = {e: rc.evaluate_embeddings(x, labels, ["precision@1"], empty=e)["precision@1"].item()
            for e in ("skip", "zero")}
    assert theirs == pytest.approx(1.0) and mine["skip"] == 1.0
    assert mine["zero"] == pytest.approx(2 / 3)  # (1 + 1 + 0) / 3: what PML does not report


def test_pml_all_lone_gives_nan_like_ours():
    import pytorch_metric_learning.utils.accuracy_calculator as pml_calc
    from pytorch_metric_learning.distances import CosineSimilarity
    from pytorch_metric_learning.utils.inference import CustomKNN

    x = torch.tensor([[1.0, 0.0], [0.9, 0.1], [0.0, 1.0]])
    labels = torch.tensor([0, 1, 2])  # every label alone
    calc = pml_calc.AccuracyCalculator(include=("precision_at_1",), k=1, knn_func=CustomKNN(CosineSimilarity()),
                                       device=torch.device("cpu"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        theirs = calc.get_accuracy(x, labels)["precision_at_1"]
    mine = rc.evaluate_embeddings(x, labels, ["precision@1"])
    assert theirs != theirs and torch.isnan(mine["precision@1"]) and int(mine.n_empty["precision@1"]) == 3
