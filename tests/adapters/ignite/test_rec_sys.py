"""Drop-ins ``ignite_retrieval.HitRate``, ``NDCG``, ``MRR`` against ignite's own
``ignite.metrics.rec_sys`` (pytorch-ignite 0.5.5: HitRate, NDCG). ignite has no
released MRR: ours is checked against the definition (``mrr_by_definition``, written
here), the documented example of the proposed API, and its signature."""
from __future__ import annotations

import inspect

import pytest
import torch
from ignite.engine import Engine
from ignite.exceptions import NotComputableError
import ignite.metrics.rec_sys as ignite_rec_sys

import ignite_retrieval
from ignite_retrieval import MRR, NDCG, HitRate

from tests.references import distinct_scores

ATOL = 1e-5  # ignite accumulates in float32


def run(metric, batches, name="m"):
    evaluator = Engine(lambda engine, batch: batch)
    metric.attach(evaluator, name)
    return evaluator.run(batches).metrics[name]


def data(seed, n_batches=3, b=40, n=30, ties=True, graded="int"):
    g = torch.Generator().manual_seed(seed)
    out = []
    for _ in range(n_batches):
        if ties:
            preds = torch.randint(0, 4, (b, n), generator=g).float()
        else:
            preds = distinct_scores((b, n), g)
        if graded == "int":
            level = torch.randint(1, 5, (b, n), generator=g).float()
        else:
            level = torch.rand(b, n, generator=g) * 3
        y = torch.where(torch.rand(b, n, generator=g) < 0.1, level, torch.zeros_like(level))
        y[::7] = 0  # users with no relevant item
        out.append((preds, y))
    return out


def position_tie_broken(preds):
    """Scores with the same order as ours (score desc, then lower column), no ties."""
    order = torch.argsort(preds, dim=1, descending=True, stable=True)
    ranks = torch.empty_like(order)
    ranks.scatter_(1, order, torch.arange(preds.shape[1]).expand_as(order))
    return -ranks.float()


def mrr_by_definition(batches, top_k, ignore_zero_hits=True):
    """Mean reciprocal rank at each k, from its definition, in plain Python: for each
    user, order the items by score, highest first (equal scores: lower column first,
    our documented tie order); the user's value at k is 1 / position of the first item
    with ``y > 0`` when that position is at most k, else 0. Users without any relevant
    item are left out (``ignore_zero_hits``) or count 0; the result is the mean over
    users, one value per k in increasing k."""
    ks = sorted([top_k] if isinstance(top_k, int) else top_k)
    totals, users = [0.0] * len(ks), 0
    for y_pred, y in batches:
        for scores, gains in zip(y_pred.tolist(), y.tolist()):
            if ignore_zero_hits and not any(g > 0 for g in gains):
                continue
            users += 1
            order = sorted(range(len(scores)), key=lambda j: (-scores[j], j))
            first = next((pos for pos, j in enumerate(order, start=1) if gains[j] > 0), None)
            for i, k in enumerate(ks):
                if first is not None and first <= k:
                    totals[i] += 1.0 / first
    return [t / users for t in totals]


# -- signatures and documented examples ------------------------------------------------


def _params(cls):
    return [(p.name, p.kind, p.default if p.name != "output_transform" else "f")
            for p in inspect.signature(cls.__init__).parameters.values()]


@pytest.mark.parametrize("name", ["HitRate", "NDCG"])
def test_same_signature_as_ignite(name):
    assert _params(getattr(ignite_retrieval, name)) == _params(getattr(ignite_rec_sys, name))


def test_mrr_signature_as_proposed_for_ignite():
    """HitRate's arguments (pytorch/ignite #3572, #3573 without relevance_threshold); top_k=10 is ours."""
    params = inspect.signature(MRR.__init__).parameters
    assert list(params) == ["self", "top_k", "ignore_zero_hits", "output_transform", "device", "skip_unrolling"]
    assert params["top_k"].default == 10 and params["ignore_zero_hits"].default is True
    assert params["skip_unrolling"].default is False and params["device"].default == torch.device("cpu")


def test_mrr_documented_example():
    y_pred = torch.tensor([[4.0, 2.0, 3.0, 1.0], [1.0, 2.0, 3.0, 4.0]])
    y_true = torch.tensor([[0.0, 0.0, 1.0, 1.0], [0.0, 0.0, 0.0, 1.0]])
    assert run(MRR(top_k=[1, 2, 3, 4]), [(y_pred, y_true)]) == [0.5, 0.75, 0.75, 0.75]
    assert mrr_by_definition([(y_pred, y_true)], [1, 2, 3, 4]) == [0.5, 0.75, 0.75, 0.75]


DOC_PRED = torch.tensor([[4.0, 2.0, 3.0, 1.0], [1.0, 2.0, 3.0, 4.0]])
DOC_TRUE = torch.tensor([[0.0, 0.0, 1.0, 1.0], [0.0, 0.0, 0.0, 0.0]])


@pytest.mark.parametrize(
    "name, kwargs, batch",
    [
        ("HitRate", dict(top_k=[1, 2, 3, 4]), (DOC_PRED, DOC_TRUE)),
        ("HitRate", dict(top_k=[1, 2, 3, 4], ignore_zero_hits=False), (DOC_PRED, DOC_TRUE)),
        ("HitRate", dict(top_k=2), (DOC_PRED[:1], torch.tensor([[0.0, 0.0, 1.0, 0.0]]))),
        ("NDCG", dict(top_k=[1, 2, 3, 4]), (DOC_PRED, DOC_TRUE)),
        ("NDCG", dict(top_k=[1, 2, 3, 4], ignore_zero_hits=False), (DOC_PRED, DOC_TRUE)),
    ],
)
def test_ignite_documented_examples(name, kwargs, batch):
    ours = run(getattr(ignite_retrieval, name)(**kwargs), [batch])
    theirs = run(getattr(ignite_rec_sys, name)(**kwargs), [batch])
    assert isinstance(ours, list) and all(isinstance(v, float) for v in ours)
    assert ours == pytest.approx(theirs, abs=ATOL)


# -- equal values on random data -----------------------------------------------------------

NDCG_OPTIONS = [
    dict(top_k=[1, 3, 10]),
    dict(top_k=[10, 1, 5, 5]),  # unsorted, repeated: output follows sorted(top_k)
    dict(top_k=[2, 50]),  # k beyond the 30 items: ignite cuts at the list's end
    dict(top_k=[3, 10], ignore_zero_hits=False),
    dict(top_k=[3, 10], gain_function="linear_rank"),
    dict(top_k=[3, 10], relevance_threshold=2.0),
    dict(top_k=[3, 10], relevance_threshold=2.5, gain_function="linear_rank", ignore_zero_hits=False),
    dict(top_k=[3, 10], relevance_threshold=0.0),
    dict(top_k=[3, 10], relevance_threshold=0.5, ignore_zero_hits=False),
]


@pytest.mark.parametrize("graded", ["int", "float"])
@pytest.mark.parametrize("ties", [True, False])
@pytest.mark.parametrize("kwargs", NDCG_OPTIONS)
def test_ndcg_equals_ignite(kwargs, ties, graded):
    batches = data(seed=hash((str(kwargs), ties, graded)) % 1000, ties=ties, graded=graded)
    ours = run(NDCG(**kwargs), batches)
    theirs = run(ignite_rec_sys.NDCG(**kwargs), batches)
    assert len(ours) == len(kwargs["top_k"])
    assert ours == pytest.approx(theirs, abs=ATOL)


HIT_OPTIONS = [dict(top_k=[1, 3, 10]), dict(top_k=5), dict(top_k=[30, 2, 2]), dict(top_k=[1, 4], ignore_zero_hits=False)]


@pytest.mark.parametrize("kwargs", HIT_OPTIONS)
@pytest.mark.parametrize("graded", ["int", "float"])
def test_hit_rate_equals_ignite_without_ties(kwargs, graded):
    batches = data(seed=len(str(kwargs)), ties=False, graded=graded)
    assert run(HitRate(**kwargs), batches) == pytest.approx(run(ignite_rec_sys.HitRate(**kwargs), batches), abs=ATOL)


@pytest.mark.parametrize("kwargs", HIT_OPTIONS)
def test_hit_rate_with_ties_equals_ignite_given_our_tie_order(kwargs):
    """ignite's HitRate takes torch.topk, whose order among equal scores is unspecified
    (on CPU not by column); ours is by column. Fed scores that spell out the column
    order, ignite agrees with ours on the tied data."""
    batches = data(seed=7, ties=True)
    broken = [(position_tie_broken(p), y) for p, y in batches]
    ours = run(HitRate(**kwargs), batches)
    assert ours == pytest.approx(run(ignite_rec_sys.HitRate(**kwargs), broken), abs=ATOL)
    assert ours == pytest.approx(run(HitRate(**kwargs), broken), abs=1e-12)


MRR_OPTIONS = [dict(), dict(top_k=[1, 3, 10]), dict(top_k=4, ignore_zero_hits=False), dict(top_k=[30, 1, 1])]


@pytest.mark.parametrize("kwargs", MRR_OPTIONS)
@pytest.mark.parametrize("ties", [True, False])
def test_mrr_equals_definition(kwargs, ties):
    batches = data(seed=11 + len(str(kwargs)), ties=ties)
    top_k = kwargs.get("top_k", 10)
    expected = mrr_by_definition(batches, top_k, ignore_zero_hits=kwargs.get("ignore_zero_hits", True))
    assert run(MRR(**kwargs), batches) == pytest.approx(expected, abs=1e-12)


def test_mrr_ties_by_column():
    """Equal scores rank by lower column (the documented tie order of every drop-in here)."""
    y_pred = torch.tensor([[0.5, 0.5, 0.5, 0.1], [0.5, 0.5, 0.5, 0.9]])
    y = torch.tensor([[0, 0, 1, 0], [1, 0, 0, 0]])  # positions 3 and 2
    assert run(MRR(top_k=[1, 2, 3]), [(y_pred, y)]) == pytest.approx([0.0, 0.25, (1 / 3 + 1 / 2) / 2])


@pytest.mark.parametrize("cls", [HitRate, NDCG, MRR])
def test_dict_output_with_ids_drops_repeats(cls):
    batches = data(seed=21, ties=False)
    ids = torch.arange(120).split(40)
    as_dicts = [{"y_pred": p, "y": y, "ids": i} for (p, y), i in zip(batches, ids)]
    as_dicts.append({"y_pred": batches[0][0][:5], "y": batches[0][1][:5], "ids": ids[0][:5]})  # padding repeats
    kwargs = dict(top_k=[1, 5])
    assert run(cls(**kwargs), as_dicts) == pytest.approx(run(cls(**kwargs), batches), abs=1e-12)


def test_dict_output_without_ids_like_ignite():
    batches = data(seed=22, ties=False)
    as_dicts = [{"y_pred": p, "y": y, "extra": 1} for p, y in batches]
    assert run(NDCG(top_k=[5]), as_dicts) == pytest.approx(run(ignite_rec_sys.NDCG(top_k=[5]), as_dicts), abs=ATOL)


def test_bool_and_integer_targets():
    batches = data(seed=23, ties=False)
    for cast in (lambda y: y > 0, lambda y: y.long()):
        cast_batches = [(p, cast(y)) for p, y in batches]
        for name in ("HitRate", "NDCG"):
            ours = run(getattr(ignite_retrieval, name)(top_k=[1, 5]), cast_batches)
            theirs = run(getattr(ignite_rec_sys, name)(top_k=[1, 5]), cast_batches)
            assert ours == pytest.approx(theirs, abs=ATOL)


def test_reset_between_epochs():
    batches = data(seed=24, ties=False)
    evaluator = Engine(lambda engine, batch: batch)
    NDCG(top_k=[3]).attach(evaluator, "ours")
    ignite_rec_sys.NDCG(top_k=[3]).attach(evaluator, "theirs")
    state = evaluator.run(batches, max_epochs=3)
    assert state.metrics["ours"] == pytest.approx(state.metrics["theirs"], abs=ATOL)
    assert state.metrics["ours"] == pytest.approx(run(NDCG(top_k=[3]), batches), abs=1e-12)


# -- errors, as ignite raises them -------------------------------------------------


@pytest.mark.parametrize("name", ["HitRate", "NDCG", "MRR"])
def test_not_computable(name):
    cls = getattr(ignite_retrieval, name)
    with pytest.raises(NotComputableError) as ours:
        cls(top_k=[1]).compute()
    assert str(ours.value) == f"{name} must have at least one example."
    if name != "MRR":
        with pytest.raises(NotComputableError) as theirs:
            getattr(ignite_rec_sys, name)(top_k=[1]).compute()
        assert str(ours.value) == str(theirs.value)
    # every user without a relevant item, ignored: nothing to average (ignite raises too)
    metric = cls(top_k=[1])
    metric.update((torch.rand(3, 4), torch.zeros(3, 4)))
    with pytest.raises(NotComputableError, match=f"{name} must have at least one example"):
        metric.compute()
    if name != "MRR":
        reference = getattr(ignite_rec_sys, name)(top_k=[1])
        reference.update((torch.rand(3, 4), torch.zeros(3, 4)))
        with pytest.raises(NotComputableError):
            reference.compute()
    # counted as misses when not ignored
    metric = cls(top_k=[1], ignore_zero_hits=False)
    metric.update((torch.rand(3, 4), torch.zeros(3, 4)))
    assert metric.compute() == [0.0]


@pytest.mark.parametrize(
    "name, top_k",
    # (ignite's NDCG takes an empty top_k and fails at update with an IndexError; ours
    # raises at construction, see below)
    [("HitRate", [0, 1]), ("HitRate", [-3]), ("HitRate", []), ("NDCG", [0, 1]), ("NDCG", [-3]), ("NDCG", (2, 0))],
)
def test_top_k_errors_like_ignite(name, top_k):
    ours_cls, theirs_cls = getattr(ignite_retrieval, name), getattr(ignite_rec_sys, name)
    with pytest.raises(ValueError) as theirs:
        theirs_cls(top_k=top_k)
    with pytest.raises(ValueError) as ours:
        ours_cls(top_k=top_k)
    assert str(ours.value) == str(theirs.value)


def test_other_argument_errors_like_ignite():
    for cls in (HitRate, ignite_rec_sys.HitRate, MRR):
        with pytest.raises(ValueError, match=r"top_k must be either int or a list\[int\]"):
            cls(top_k=(1, 2))
    for cls in (NDCG, ignite_rec_sys.NDCG):
        with pytest.raises(ValueError, match="gain_function must be either 'exp_rank' or 'linear_rank', but given log"):
            cls(top_k=[1], gain_function="log")
    with pytest.raises(ValueError, match="top_k must have at least one positive value"):
        NDCG(top_k=[])


@pytest.mark.parametrize("cls", [HitRate, NDCG, MRR])
def test_update_errors(cls):
    p, y = torch.rand(2, 4), torch.zeros(2, 4)
    with pytest.raises(ValueError, match=r"output should be in format `\(y_pred,y\)` but got tuple of 3 tensors"):
        cls(top_k=[1]).update((p, y, y))
    with pytest.raises(ValueError) as ours:
        cls(top_k=[1]).update((p, y[:, :3]))
    assert str(ours.value) == "y_pred and y must be in the same shape, got torch.Size([2, 4]) != torch.Size([2, 3])."
    if cls is not MRR:  # ignite's own words
        with pytest.raises(ValueError) as theirs:
            getattr(ignite_rec_sys, cls.__name__)(top_k=[1]).update((p, y[:, :3]))
        assert str(ours.value) == str(theirs.value)
    with pytest.raises(ValueError, match=r"y_pred and y must be in the same shape, got torch.Size\(\[2, 4\]\)"):
        cls(top_k=[1]).update({"y_pred": p, "y": y[:, :3]})
    with pytest.raises(ValueError, match=r"lacks 'y'"):
        cls(top_k=[1]).update({"y_pred": p})


@pytest.mark.parametrize("cls", [HitRate, MRR])
def test_k_beyond_items_raises(cls):
    # ignite's torch.topk raises (RuntimeError); ours says why
    with pytest.raises(ValueError, match=f"{cls.__name__}: top_k 5 is larger than the number of items 4"):
        cls(top_k=[1, 5]).update((torch.rand(2, 4), torch.ones(2, 4)))
    with pytest.raises(RuntimeError):
        ignite_rec_sys.HitRate(top_k=[1, 5]).update((torch.rand(2, 4), torch.ones(2, 4)))


def test_negative_gains_left_by_threshold_raise():
    metric = NDCG(top_k=[2], relevance_threshold=-1.0)
    metric.update((torch.rand(2, 3), torch.tensor([[1.0, -0.5, 0.0], [0.0, 2.0, 0.0]])))
    with pytest.raises(ValueError, match="y contains negative gains"):
        metric.compute()


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.int64, torch.bool])
@pytest.mark.parametrize("threshold", [0.1, 1.0, 2.0, 1.5, 0.0, -0.5])
def test_ndcg_relevance_threshold_boundaries(dtype, threshold):
    """Gains exactly at, just below and just above the threshold (in the target's
    dtype) are kept or zeroed as ignite's ``y >= relevance_threshold`` does."""
    t = torch.tensor(threshold, dtype=torch.float64)
    around = torch.stack([t, torch.nextafter(t, t - 1), torch.nextafter(t, t + 1)])
    levels = torch.cat([around.to(torch.float32).double(), around, torch.tensor([0.0, 1.0, 2.0, 3.0, 0.1])])
    g = torch.Generator().manual_seed(5)
    y = levels[torch.randint(0, levels.numel(), (20, 12), generator=g)].clamp(min=0).to(dtype)
    y[::3] = 0
    preds = distinct_scores((20, 12), g)
    kwargs = dict(top_k=[3, 12], relevance_threshold=threshold, gain_function="linear_rank")
    try:
        theirs = run(ignite_rec_sys.NDCG(**kwargs), [(preds, y)])
    except NotComputableError:
        with pytest.raises(NotComputableError):
            run(NDCG(**kwargs), [(preds, y)])
        return
    assert run(NDCG(**kwargs), [(preds, y)]) == pytest.approx(theirs, abs=ATOL)


@pytest.mark.parametrize("cls", [HitRate, NDCG, MRR])
def test_state_detached_and_on_the_metric_device(cls):
    """What ignite's own tests check on its private accumulators (``_hits_per_k``,
    ``_sum_ndcg_per_k``), checked on ours: the per-query values kept after ``update``
    hold no autograd graph and live on the metric's device."""
    metric = cls(top_k=[1, 3], device="cpu")
    y_pred = torch.randn(4, 5, requires_grad=True)
    metric.update((y_pred, torch.randint(0, 2, (4, 5)).float()))
    values = metric._state["values"]
    assert values and all(not v.requires_grad and v.is_leaf for v in values)
    assert all(v.device == torch.device("cpu") for v in values)


@pytest.mark.parametrize("top_k", [[True], [1.5], [2.0], True])
@pytest.mark.parametrize("name", ["HitRate", "NDCG"])
def test_bool_or_float_top_k_refused_where_ignite_accepts(name, top_k):
    """Difference on purpose: ignite accepts bools and floats in top_k (they fail later
    or act as numbers); ours refuse them at construction, in ignite's own words."""
    if not (name == "NDCG" and top_k is True):  # ignite's NDCG: TypeError (not iterable)
        getattr(ignite_rec_sys, name)(top_k=top_k)
    with pytest.raises(ValueError) as ours:
        getattr(ignite_retrieval, name)(top_k=top_k)
    if top_k is True:
        assert str(ours.value) == "top_k must be either int or a list[int]"
    elif name == "NDCG":
        assert str(ours.value) == f"top_k must be list of positive integers only, but given {top_k}"
    else:
        assert str(ours.value) == "top_k must be list of positive integers only."
