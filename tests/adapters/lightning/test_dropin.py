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
from tests.adapters.lightning.data import flat_queries

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
    ours = run(getattr(lr, name)(**kwargs, **extra), indexes, preds, theirs_target)
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
    for action in ("neg", "pos", "skip"):
        for aggregation in AGGREGATIONS + [per_query]:
            ours, theirs = both(case, empty_target_action=action, aggregation=aggregation)
            torch.testing.assert_close(ours, theirs, atol=ATOL, rtol=0)
    # as torchmetrics: a query with relevant entries whose top k lack a class scores 0,
    # also under "skip" (only queries without a relevant entry are skipped)
    ours, _ = both(case, empty_target_action="skip", aggregation=per_query)
    one_class = one_class_queries(*DATA, case[1].get("top_k"))[R_POSITIVE]
    assert one_class.any() and ours.numel() == int(R_POSITIVE.sum())
    assert (ours[one_class] == 0).all()


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
    """The core's auroc where it is defined; 0 (torchmetrics' value) for a query with
    relevant entries only, where the core's AUROC is undefined."""
    indexes, preds, target = DATA
    target = (target > 0).long()
    target[indexes == indexes[0]] = 1  # one query with relevant entries only
    ours = run(lr.RetrievalAUROC(empty_target_action="skip", aggregation=per_query), indexes, preds, target)
    core = retrieval_core.evaluate_scores(preds, target, ["auroc", "mrr"], indexes=indexes, reduce="none")
    relevant = ~torch.isnan(core["mrr"])
    want = torch.nan_to_num(core["auroc"], nan=0.0)[relevant]
    assert torch.isnan(core["auroc"][relevant]).any()
    torch.testing.assert_close(ours.double(), want, atol=1e-7, rtol=0)


def test_curve_max_k_beyond_queries_and_recall_at_fixed_precision():
    ours, theirs = both(("RetrievalRecallAtFixedPrecision", {"min_precision": 0.9}, False))  # often unreachable
    torch.testing.assert_close(flatten(ours), flatten(theirs), atol=ATOL, rtol=0)


def error_of(fn):
    """``(type name, message)`` of what ``fn()`` raises, None when it returns."""
    try:
        fn()
    except Exception as error:  # noqa: BLE001 - compared, not hidden
        return type(error).__name__, str(error)
    return None


@pytest.mark.parametrize("name", ["RetrievalMAP", "RetrievalFallOut", "RetrievalAUROC", "RetrievalPrecisionRecallCurve"])
def test_empty_target_action_error_like_torchmetrics(name):
    indexes, preds, target = DATA
    binary = (target > 0).long()
    theirs = error_of(lambda: run(getattr(tmr, name)(empty_target_action="error"), indexes, preds, binary))
    ours = error_of(lambda: run(getattr(lr, name)(empty_target_action="error"), indexes, preds, binary))
    assert theirs is not None and ours == theirs


def test_ignore_index():
    indexes, preds, target = DATA
    target = target.clone()
    target[::7] = -100
    theirs = run(tmr.RetrievalNormalizedDCG(ignore_index=-100, top_k=5), indexes, preds, target)
    ours = run(lr.RetrievalNormalizedDCG(ignore_index=-100, top_k=5), indexes, preds, target)
    torch.testing.assert_close(ours, theirs, atol=ATOL, rtol=0)
    binary = (target > 0).long().masked_fill(target == -100, -100)
    for name in ("RetrievalMAP", "RetrievalHitRate", "RetrievalPrecisionRecallCurve"):
        theirs = run(getattr(tmr, name)(ignore_index=-100), indexes, preds, binary)
        ours = run(getattr(lr, name)(ignore_index=-100), indexes, preds, binary)
        torch.testing.assert_close(flatten(ours), flatten(theirs), atol=ATOL, rtol=0)
    # everything ignored: torchmetrics' error, with its message
    everything = [preds[:3], torch.full((3,), -100), indexes[:3]]
    theirs = error_of(lambda: tmr.RetrievalMAP(ignore_index=-100).update(*everything))
    assert theirs is not None and error_of(lambda: lr.RetrievalMAP(ignore_index=-100).update(*everything)) == theirs


def test_forward_gives_the_batch_value_like_torchmetrics():
    indexes, preds, target = DATA
    ours, theirs = lr.RetrievalMAP(top_k=4), tmr.RetrievalMAP(top_k=4)
    binary = (target > 0).long()
    for rows in torch.arange(preds.numel()).chunk(4):
        torch.testing.assert_close(ours(preds[rows], binary[rows], indexes[rows]),
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


ALL = ["RetrievalMAP", "RetrievalMRR", "RetrievalNormalizedDCG", "RetrievalRecall", "RetrievalHitRate",
       "RetrievalFallOut", "RetrievalPrecision", "RetrievalRPrecision", "RetrievalAUROC",
       "RetrievalPrecisionRecallCurve", "RetrievalRecallAtFixedPrecision"]
_I, _P, _T = torch.tensor([0, 0, 1, 1]), torch.tensor([0.1, 0.9, 0.3, 0.2]), torch.tensor([0, 1, 1, 0])
# update inputs that torchmetrics refuses; ours must refuse them with its type and message
BAD_UPDATES = {
    "indexes None": (_P, _T, None),
    "shapes": (_P[:3], _T, _I),
    "bool indexes": (_P, _T, _I.bool()),
    "float indexes": (_P, _T, _I.float()),
    "empty": (_P[:0], _T[:0], _I[:0]),
    "scalar": (_P[0], _T[0], _I[0]),
    "bool preds": (_P.bool(), _T, _I),
    "int preds": (_P.mul(10).long(), _T, _I),
    "complex target": (_P, _T.to(torch.complex64), _I),
}
# constructor arguments that torchmetrics refuses
BAD_ARGS = [dict(empty_target_action="zero"), dict(ignore_index=0.5), dict(aggregation="sum"),
            dict(top_k=-1), dict(top_k=4.0), dict(top_k=0), dict(adaptive_k=1), dict(adaptive_k=None),
            dict(max_k=0), dict(max_k=2.0), dict(min_precision=2.0), dict(min_precision=1), dict(max_fpr=0.0)]


def accepts(cls, kwargs):
    import inspect
    params = set(inspect.signature(cls.__init__).parameters)
    return all(k in params for k in kwargs)


@pytest.mark.parametrize("bad", list(BAD_UPDATES), ids=list(BAD_UPDATES))
@pytest.mark.parametrize("name", ALL)
def test_update_errors_like_torchmetrics(name, bad):
    preds, target, indexes = BAD_UPDATES[bad]

    def go(mod):
        metric = getattr(mod, name)()
        metric.update(preds, target, indexes)
        return metric.compute()

    theirs = error_of(lambda: go(tmr))
    assert theirs is not None, bad
    assert error_of(lambda: go(lr)) == theirs


@pytest.mark.parametrize("name", ALL)
def test_constructor_errors_like_torchmetrics(name):
    """Where torchmetrics refuses an argument, ours refuses it with the same type and
    message. (Where torchmetrics accepts a bad one, ours refuses it: see below.)"""
    checked = 0
    for kwargs in BAD_ARGS:
        if not accepts(getattr(tmr, name), kwargs):
            continue
        theirs = error_of(lambda: getattr(tmr, name)(**kwargs))
        if theirs is None:
            continue
        checked += 1
        assert error_of(lambda: getattr(lr, name)(**kwargs)) == theirs, kwargs
    assert checked >= 3


# --------------------------------------------------------------------------- differences on purpose


@pytest.mark.parametrize("name", ["RetrievalMAP", "RetrievalMRR"])
def test_map_mrr_top_k_zero_or_negative_refused(name):
    """torchmetrics' MAP and MRR accept top_k=0 (the whole list), negative and float
    top_k; ours refuse them at construction, in MAP/MRR's own words."""
    for bad in (0, -1, 2.0, True):
        assert error_of(lambda: getattr(tmr, name)(top_k=bad)) is None
        assert error_of(lambda: getattr(lr, name)(top_k=bad)) == (
            "ValueError", f"Argument ``top_k`` has to be a positive integer or None, but got {bad}")


def test_auroc_max_fpr_out_of_range_refused():
    """torchmetrics' check of max_fpr lets 2.0 and -1.0 through; ours refuses them."""
    for bad in (2.0, -1.0, 0):
        assert error_of(lambda: tmr.RetrievalAUROC(max_fpr=bad)) is None
        assert error_of(lambda: lr.RetrievalAUROC(max_fpr=bad)) == (
            "ValueError", f"Arguments `max_fpr` should be a float in range (0, 1], but got: {bad}")


def test_other_integer_dtypes_accepted():
    """torchmetrics wants int64 indexes and bool/int32/int64/float targets; ours take
    every integer dtype for both (same values as int64)."""
    indexes, preds, target = DATA
    binary = (target > 0).long()
    expected = run(tmr.RetrievalMAP(), indexes, preds, binary)
    for idx_dtype, tgt_dtype in [(torch.int32, torch.uint8), (torch.int16, torch.int8), (torch.uint8, torch.int16)]:
        assert error_of(lambda: tmr.RetrievalMAP().update(preds, binary, indexes.to(idx_dtype))) == (
            "ValueError", "`indexes` must be a tensor of long integers")
        ours = run(lr.RetrievalMAP(), indexes.to(idx_dtype), preds, binary.to(tgt_dtype))
        torch.testing.assert_close(ours, expected, atol=ATOL, rtol=0)


def test_integer_preds_refused_like_torchmetrics_even_beyond_2_53():
    """torchmetrics refuses integer scores; so do we (same message), also int64 scores
    above 2**53, which a float cast would tie (the core ranks them exactly)."""
    preds = torch.tensor([1_700_000_000_000_000_000, 1_700_000_000_000_000_001])
    target, indexes = torch.tensor([0, 1]), torch.tensor([0, 0])
    expected = ("ValueError", "`preds` must be a tensor of floats")
    for name in ALL:
        assert error_of(lambda: getattr(tmr, name)().update(preds, target, indexes)) == expected
        assert error_of(lambda: getattr(lr, name)().update(preds, target, indexes)) == expected
    # the core (RankingMetrics, evaluate_scores) ranks them as integers
    assert retrieval_core.evaluate_scores(preds, target, ["mrr"], indexes=indexes)["mrr"].item() == 1.0
    ranking = lr.RankingMetrics(["mrr"])
    ranking.update(preds.view(1, 2), target.view(1, 2))
    assert ranking.compute()["mrr"].item() == 1.0
    assert retrieval_core.evaluate_scores(preds.double(), target, ["mrr"], indexes=indexes)["mrr"].item() == 0.5


def test_top_k_must_be_positive():
    for name in ("RetrievalPrecision", "RetrievalNormalizedDCG", "RetrievalAUROC", "RetrievalRecall"):
        for bad in (0, -1, 2.0, True):
            assert error_of(lambda: getattr(lr, name)(top_k=bad)) == (
                "ValueError", "`top_k` has to be a positive integer or None")


def test_graded_targets_refused_at_compute_and_value_checks_at_compute():
    """torchmetrics refuses non-binary targets (except nDCG) in update; ours in compute
    (no device sync per batch), with the same message."""
    indexes, preds, target = DATA
    message = ("ValueError", "`target` must contain `binary` values")
    assert error_of(lambda: tmr.RetrievalMAP().update(preds, target, indexes=indexes)) == message
    m = lr.RetrievalMAP()
    m.update(preds, target, indexes)
    assert error_of(m.compute) == message
    ndcg = run(lr.RetrievalNormalizedDCG(), indexes, preds, target)  # graded gains: nDCG only
    torch.testing.assert_close(ndcg, run(tmr.RetrievalNormalizedDCG(), indexes, preds, target), atol=ATOL, rtol=0)
    m = lr.RetrievalNormalizedDCG()
    m.update(preds, target - 5, indexes)  # no check (no device sync) per batch
    with pytest.raises(ValueError, match="target contains negative gains; gains must be >= 0"):
        m.compute()
    m = lr.RetrievalMAP()
    m.update(preds.masked_fill(indexes == indexes[0], float("nan")), (target > 0).long(), indexes)
    with pytest.raises(ValueError, match="preds contain NaN or inf; scores must be finite"):
        m.compute()


def test_non_tensor_input_is_a_type_error():
    """torchmetrics fails on a list with an AttributeError from inside; ours says what is wrong."""
    assert error_of(lambda: lr.RetrievalMAP().update([0.1, 0.2], _T[:2], _I[:2])) == (
        "TypeError", "`preds` must be a torch.Tensor; got list")


def test_which_anchors_average_ties():
    """With every score tied, torchmetrics' nDCG (tie-averaged DCG) and AUROC (tied
    pairs count one half) give the same value whatever the position of the relevant
    entries, and so do ours (``ties="expected"``). The other classes rank tied
    entries by position (stable): the value follows the position."""
    preds = torch.full((8,), 0.5)
    indexes = torch.zeros(8, dtype=torch.long)
    early = torch.tensor([1, 1, 0, 0, 0, 0, 0, 0])
    late = early.flip(0)
    for name in ("RetrievalNormalizedDCG", "RetrievalAUROC"):
        theirs = [run(getattr(tmr, name)(), indexes, preds, t, n_updates=1) for t in (early, late)]
        torch.testing.assert_close(theirs[0], theirs[1])
        ours = [run(getattr(lr, name)(), indexes, preds, t, n_updates=1) for t in (early, late)]
        torch.testing.assert_close(ours[0], theirs[0], atol=ATOL, rtol=0)
        torch.testing.assert_close(ours[1], theirs[1], atol=ATOL, rtol=0)
    # the averaged values: AUROC one half; nDCG the mean gain over the 8 positions
    assert run(lr.RetrievalAUROC(), indexes, preds, early, n_updates=1).item() == pytest.approx(0.5)
    discounts = 1 / torch.log2(torch.arange(2, 10, dtype=torch.float64))
    expected = (2 / 8) * discounts.sum() / discounts[:2].sum()
    assert run(lr.RetrievalNormalizedDCG(), indexes, preds, early, n_updates=1).item() == pytest.approx(expected.item())
    # a stable class: the first positions hold the relevant entries, a perfect ranking
    assert run(lr.RetrievalMRR(), indexes, preds, early, n_updates=1).item() == pytest.approx(1.0)
    assert run(lr.RetrievalMRR(), indexes, preds, late, n_updates=1).item() == pytest.approx(1 / 7)


def test_all_zero_predictions():
    """All-zero scores: torchmetrics zeroes the target of entries scored <= 0 in MAP,
    MRR, Precision and Recall (so 0 there); ours rank the tied zeros by position."""
    preds = torch.zeros(6)
    indexes = torch.tensor([0, 0, 0, 1, 1, 1])
    target = torch.tensor([0, 1, 0, 1, 0, 0])
    for name in ("RetrievalMAP", "RetrievalMRR"):
        assert run(getattr(tmr, name)(), indexes, preds, target, n_updates=1).item() == 0.0
        assert run(getattr(lr, name)(), indexes, preds, target, n_updates=1).item() == pytest.approx(0.75)
