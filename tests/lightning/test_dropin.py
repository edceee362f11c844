"""The torchmetrics.retrieval drop-ins: equal to torchmetrics 1.9 on continuous positive
scores (every empty_target_action and aggregation), and the differences on purpose
(docs/lightning.md) asserted."""
from __future__ import annotations

import pytest
import torch
import torchmetrics.retrieval as tmr
from torchmetrics import MetricCollection

import lightning_retrieval as lr
import retrieval_core
from tests.lightning.data import flat_queries

ATOL = 1e-5  # torchmetrics computes in float32

# (class name, kwargs, graded target for torchmetrics too)
CASES = [
    ("RetrievalMAP", {}, False),
    ("RetrievalMAP", {"top_k": 3}, False),
    ("RetrievalMRR", {}, False),
    ("RetrievalMRR", {"top_k": 2}, False),
    ("RetrievalNormalizedDCG", {}, True),
    ("RetrievalNormalizedDCG", {"top_k": 4}, True),
    ("RetrievalPrecision", {}, False),
    ("RetrievalPrecision", {"top_k": 3}, False),
    ("RetrievalPrecision", {"top_k": 12, "adaptive_k": True}, False),
    ("RetrievalRecall", {}, False),
    ("RetrievalRecall", {"top_k": 3}, False),
    ("RetrievalHitRate", {}, False),
    ("RetrievalHitRate", {"top_k": 1}, False),
    ("RetrievalFallOut", {}, False),
    ("RetrievalFallOut", {"top_k": 3}, False),
    ("RetrievalRPrecision", {}, False),
    ("RetrievalPrecisionRecallCurve", {}, False),
    ("RetrievalPrecisionRecallCurve", {"max_k": 5}, False),
    ("RetrievalPrecisionRecallCurve", {"max_k": 25, "adaptive_k": True}, False),
    ("RetrievalRecallAtFixedPrecision", {"min_precision": 0.4, "max_k": 6}, False),
]
# AUROC: a query without a non-relevant entry is 0 in torchmetrics whatever the action,
# undefined here (empty_target_action applies); equal under the default "neg".
AUROC_CASES = [
    ("RetrievalAUROC", {}, False),
    ("RetrievalAUROC", {"top_k": 4}, False),
    ("RetrievalAUROC", {"max_fpr": 0.4}, False),
    ("RetrievalAUROC", {"top_k": 6, "max_fpr": 0.5}, False),
]
AGGREGATIONS = ["mean", "median", "min", "max"]


def case_id(case):
    name, kwargs, _ = case
    return name.replace("Retrieval", "") + "".join(f"-{k}={v}" for k, v in kwargs.items())


DATA = flat_queries(21, 50, 20)


def per_query(values, dim=None):
    return values


def run(metric, indexes, preds, target, n_updates=3):
    for rows in torch.arange(preds.numel()).chunk(n_updates):
        metric.update(preds[rows], target[rows], indexes=indexes[rows])
    return metric.compute()


def flatten(out):
    if isinstance(out, tuple):
        return torch.cat([o.to(torch.float64).reshape(-1) for o in out])
    return out.to(torch.float64).reshape(-1)


def both(case, **extra):
    name, kwargs, graded = case
    indexes, preds, target = DATA
    theirs_target = target if graded else (target > 0).long()
    theirs = run(getattr(tmr, name)(**kwargs, **extra), indexes, preds, theirs_target)
    ours = run(getattr(lr, name)(**kwargs, **extra), indexes, preds, target)  # graded gains accepted
    return ours, theirs


@pytest.mark.parametrize("action", ["neg", "pos", "skip"])
@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_equal_to_torchmetrics(case, action):
    for aggregation in AGGREGATIONS:
        ours, theirs = both(case, empty_target_action=action, aggregation=aggregation)
        if isinstance(theirs, tuple):
            assert isinstance(ours, tuple) and len(ours) == len(theirs)
            assert ours[-1].dtype == theirs[-1].dtype
        else:
            assert ours.dtype == theirs.dtype == torch.float32 and ours.ndim == 0
        torch.testing.assert_close(flatten(ours), flatten(theirs), atol=ATOL, rtol=0,
                                   msg=lambda m: f"{case_id(case)} {action} {aggregation}: {m}")


@pytest.mark.parametrize("case", [c for c in CASES if "Curve" not in c[0] and "Fixed" not in c[0]], ids=case_id)
def test_per_query_values_callable_aggregation(case):
    """A callable sees one value per query, in increasing id order, as in torchmetrics."""
    ours, theirs = both(case, empty_target_action="skip", aggregation=per_query)
    assert ours.dtype == torch.float32 and ours.shape == theirs.shape and ours.numel() > 10
    torch.testing.assert_close(ours, theirs, atol=ATOL, rtol=0)


@pytest.mark.parametrize("case", AUROC_CASES, ids=case_id)
def test_auroc(case):
    for aggregation in AGGREGATIONS:
        ours, theirs = both(case, empty_target_action="neg", aggregation=aggregation)
        torch.testing.assert_close(ours, theirs, atol=ATOL, rtol=0)
    ours, theirs = both(case, empty_target_action="neg", aggregation=per_query)
    torch.testing.assert_close(ours, theirs, atol=ATOL, rtol=0)
    # "skip": torchmetrics keeps a query whose top k lack non-relevant (or relevant) entries, as 0
    ours, theirs = both(case, empty_target_action="skip", aggregation=per_query)
    one_class = one_class_queries(*DATA, case[1].get("top_k"))
    assert one_class.any() and ours.numel() == int((~one_class).sum())
    assert (theirs[one_class[R_POSITIVE]] == 0).all()
    torch.testing.assert_close(ours, theirs[~one_class[R_POSITIVE]], atol=ATOL, rtol=0)


def one_class_queries(indexes, preds, target, top_k):
    """Per query (increasing id): its first top_k entries (all if None) lack either class."""
    out = []
    for q in torch.unique(indexes):
        rows = indexes == q
        order = preds[rows].argsort(descending=True)[:top_k]
        rel = target[rows][order] > 0
        out.append(bool(rel.all() or not rel.any()))
    return torch.tensor(out)


R_POSITIVE = torch.stack([(DATA[2][DATA[0] == q] > 0).any() for q in torch.unique(DATA[0])])


def test_auroc_whole_list_is_core_auroc():
    indexes, preds, target = DATA
    ours = run(lr.RetrievalAUROC(empty_target_action="skip", aggregation=per_query), indexes, preds, target)
    core = retrieval_core.evaluate_scores(preds, target, ["auroc"], indexes=indexes, reduce="none")["auroc"]
    torch.testing.assert_close(ours.double(), core[~torch.isnan(core)], atol=1e-7, rtol=0)


def test_curve_max_k_beyond_queries_and_recall_at_fixed_precision():
    ours, theirs = both(("RetrievalRecallAtFixedPrecision", {"min_precision": 0.9}, False))  # often unreachable
    torch.testing.assert_close(flatten(ours), flatten(theirs), atol=ATOL, rtol=0)


def test_empty_target_action_error():
    for name in ("RetrievalMAP", "RetrievalFallOut", "RetrievalPrecisionRecallCurve"):
        with pytest.raises(ValueError):
            run(getattr(tmr, name)(empty_target_action="error"), *DATA[:2], (DATA[2] > 0).long())
        with pytest.raises(ValueError, match="empty='error'"):
            run(getattr(lr, name)(empty_target_action="error"), *DATA)


def test_ignore_index():
    indexes, preds, target = DATA
    target = target.clone()
    target[::7] = -100
    theirs = run(tmr.RetrievalNormalizedDCG(ignore_index=-100, top_k=5), indexes, preds, target)
    ours = run(lr.RetrievalNormalizedDCG(ignore_index=-100, top_k=5), indexes, preds, target)
    torch.testing.assert_close(ours, theirs, atol=ATOL, rtol=0)
    only = lr.RetrievalMAP(ignore_index=-100)
    only.update(preds[:3], torch.full((3,), -100), indexes[:3])  # everything ignored: nothing stored
    assert only.preds == []


def test_forward_gives_the_batch_value_like_torchmetrics():
    indexes, preds, target = DATA
    ours, theirs = lr.RetrievalMAP(top_k=4), tmr.RetrievalMAP(top_k=4)
    binary = (target > 0).long()
    for rows in torch.arange(preds.numel()).chunk(4):
        torch.testing.assert_close(ours(preds[rows], target[rows], indexes[rows]),
                                   theirs(preds[rows], binary[rows], indexes=indexes[rows]), atol=ATOL, rtol=0)
    torch.testing.assert_close(ours.compute(), theirs.compute(), atol=ATOL, rtol=0)


def test_metric_collection_like_torchmetrics():
    indexes, preds, target = DATA
    binary = (target > 0).long()

    def coll(mod):
        return MetricCollection({"map": mod.RetrievalMAP(top_k=5), "mrr": mod.RetrievalMRR(),
                                 "p": mod.RetrievalPrecision(top_k=2)}, compute_groups=True)

    ours, theirs = coll(lr), coll(tmr)
    for rows in torch.arange(preds.numel()).chunk(3):
        ours.update(preds[rows], binary[rows], indexes=indexes[rows])
        theirs.update(preds[rows], binary[rows], indexes=indexes[rows])
    a, b = ours.compute(), theirs.compute()
    assert set(a) == set(b) == {"map", "mrr", "p"}
    for k in a:
        torch.testing.assert_close(a[k], b[k], atol=ATOL, rtol=0)


def test_no_update_gives_zero():
    with pytest.warns(UserWarning):
        assert lr.RetrievalMAP().compute().item() == 0.0


# --------------------------------------------------------------------------- differences on purpose


def test_scores_at_or_below_zero_do_not_zero_targets():
    """torchmetrics zeroes the target of an entry scored <= 0 (MAP, MRR, precision,
    recall); ours depends on the ranking only."""
    indexes, preds, target = DATA
    binary = (target > 0).long()
    shifted = preds - 0.5
    for name in ("RetrievalMAP", "RetrievalMRR", "RetrievalPrecision", "RetrievalRecall"):
        kwargs = {} if name in ("RetrievalMAP", "RetrievalMRR") else {"top_k": 3}
        ours = run(getattr(lr, name)(**kwargs), indexes, shifted, binary)
        torch.testing.assert_close(ours, run(getattr(lr, name)(**kwargs), indexes, preds, binary))
        theirs_pos = run(getattr(tmr, name)(**kwargs), indexes, preds, binary)
        theirs_shifted = run(getattr(tmr, name)(**kwargs), indexes, shifted, binary)
        torch.testing.assert_close(ours, theirs_pos, atol=ATOL, rtol=0)
        assert abs(theirs_shifted - theirs_pos) > 1e-3, name


def test_stable_tie_order():
    """Equal scores: earlier entry first (torchmetrics: implementation-defined order, tie-averaged nDCG)."""
    indexes = torch.tensor([0, 0, 0, 1, 1, 1])
    preds = torch.full((6,), 0.5)
    target = torch.tensor([0, 1, 0, 1, 0, 0])
    m = lr.RetrievalMRR(aggregation=per_query)
    m.update(preds, target, indexes)
    assert m.compute().tolist() == [0.5, 1.0]
    # nDCG averages ties (ties="expected"), as torchmetrics
    core = retrieval_core.evaluate_scores(preds, target, ["ndcg"], indexes=indexes, ties="expected")["ndcg"]
    m = lr.RetrievalNormalizedDCG()
    m.update(preds, target, indexes)
    torch.testing.assert_close(m.compute(), core.float())
    theirs = tmr.RetrievalNormalizedDCG()
    theirs.update(preds, target, indexes)
    torch.testing.assert_close(m.compute(), theirs.compute(), atol=ATOL, rtol=0)


@pytest.mark.parametrize("name", ["RetrievalMAP", "RetrievalMRR", "RetrievalPrecision", "RetrievalNormalizedDCG",
                                  "RetrievalAUROC"])
def test_top_k_must_be_positive(name):
    for bad in (0, -1, 2.0, True):
        with pytest.raises(ValueError, match="top_k"):
            getattr(lr, name)(top_k=bad)
    getattr(tmr, "RetrievalMAP")(top_k=0)  # torchmetrics' MAP accepts 0 (then: the whole list)


def test_graded_targets_for_binary_metrics_and_value_checks_at_compute():
    indexes, preds, target = DATA
    with pytest.raises(ValueError, match="binary"):
        tmr.RetrievalMAP().update(preds, target, indexes=indexes)
    ours = run(lr.RetrievalMAP(), indexes, preds, target)  # gain > 0 is relevant
    torch.testing.assert_close(ours, run(lr.RetrievalMAP(), indexes, preds, target > 0))
    m = lr.RetrievalMAP()
    m.update(preds, target - 5, indexes)  # no check (no device sync) per batch
    with pytest.raises(ValueError, match=">= 0"):
        m.compute()
    m = lr.RetrievalMAP()
    m.update(preds.masked_fill(indexes == indexes[0], float("nan")), target, indexes)
    with pytest.raises(ValueError, match="NaN"):
        m.compute()


def test_argument_errors_like_torchmetrics():
    with pytest.raises(ValueError, match="empty_target_action"):
        lr.RetrievalMAP(empty_target_action="zero")
    with pytest.raises(ValueError, match="ignore_index"):
        lr.RetrievalMAP(ignore_index=0.5)
    with pytest.raises(ValueError, match="aggregation"):
        lr.RetrievalMAP(aggregation="sum")
    with pytest.raises(ValueError, match="max_fpr"):
        lr.RetrievalAUROC(max_fpr=1.5)
    with pytest.raises(ValueError, match="min_precision"):
        lr.RetrievalRecallAtFixedPrecision(min_precision=2.0)
    with pytest.raises(ValueError, match="max_k"):
        lr.RetrievalPrecisionRecallCurve(max_k=0)
    m = lr.RetrievalMAP()
    with pytest.raises(ValueError, match="cannot be None"):
        m.update(torch.rand(3), torch.ones(3), None)
    with pytest.raises(ValueError, match="same shape"):
        m.update(torch.rand(3), torch.ones(3), torch.zeros(4, dtype=torch.long))
    with pytest.raises(ValueError, match="integers"):
        m.update(torch.rand(3), torch.ones(3), torch.zeros(3))
