"""``ignite_retrieval.RankingMetrics`` in one process: attached to an ``Engine``,
its values equal ``retrieval_core.evaluate_scores`` on the concatenated batches."""
from __future__ import annotations

import math

import pytest
import torch
from ignite.engine import Engine, Events
from ignite.exceptions import NotComputableError

import retrieval_core as rc
from ignite_retrieval import RankingMetrics

KEYS = ["ndcg@5", "ndcg_exp@3", "map@r", "map", "mrr", "hit_rate@1", "precision@3", "recall@10", "r_precision", "auroc"]


def make_data(n_queries=29, n_items=17, seed=0, ties=True):
    g = torch.Generator().manual_seed(seed)
    if ties:
        preds = torch.randint(0, 5, (n_queries, n_items), generator=g).float()
    else:
        preds = torch.rand(n_queries, n_items, generator=g)
    level = torch.randint(1, 4, (n_queries, n_items), generator=g)
    target = torch.where(torch.rand(n_queries, n_items, generator=g) < 0.25, level, torch.zeros_like(level))
    target[::5] = 0  # queries without a relevant item
    return preds, target


def batches_of(preds, target, sizes=(6, 1, 9, 13), as_dict=False, **extra):
    out, start = [], 0
    for s in sizes:
        rows = slice(start, start + s)
        if as_dict:
            b = {"y_pred": preds[rows], "y": target[rows], "x": "ignored"}
            b.update({k: v[rows] for k, v in extra.items()})
        else:
            b = (preds[rows], target[rows])
        out.append(b)
        start += s
    assert start == preds.shape[0]
    return out


def run(metric, batches, name="ranking", epochs=1):
    evaluator = Engine(lambda engine, batch: batch)
    metric.attach(evaluator, name)
    return evaluator.run(batches, max_epochs=epochs).metrics


def expected(preds, target, keys=KEYS, **kwargs):
    r = rc.evaluate_scores(preds, target, keys, **kwargs)
    return {k: (v.item() if v.ndim == 0 else v.tolist()) for k, v in r.items()}


def assert_same(got, want, tol=1e-12):
    assert set(got) == set(want)
    for k in want:
        a, b = got[k], want[k]
        if isinstance(b, list):
            assert len(a) == len(b) and all((math.isnan(x) and math.isnan(y)) or abs(x - y) <= tol for x, y in zip(a, b)), k
        else:
            assert (math.isnan(a) and math.isnan(b)) or abs(a - b) <= tol, (k, a, b)


@pytest.mark.parametrize("as_dict", [False, True])
@pytest.mark.parametrize("empty", ["skip", "zero", "one"])
def test_engine_equals_core(as_dict, empty):
    preds, target = make_data()
    metrics = run(RankingMetrics(KEYS, empty=empty), batches_of(preds, target, as_dict=as_dict))
    want = expected(preds, target, empty=empty)
    assert_same({k: metrics[k] for k in KEYS}, want)
    # ignite flattens the dict into engine.state.metrics and keeps it under the name too
    assert_same(metrics["ranking"], want)
    assert all(isinstance(metrics[k], float) for k in KEYS)


@pytest.mark.parametrize("reduce", ["median", "min", "max", "none"])
def test_reductions(reduce):
    preds, target = make_data(seed=1)
    metrics = run(RankingMetrics(KEYS, reduce=reduce), batches_of(preds, target))
    assert_same(metrics["ranking"], expected(preds, target, reduce=reduce))


def test_categories_give_per_category_keys():
    preds, target = make_data(seed=2)
    cats = torch.arange(preds.shape[0]) % 4
    metrics = run(RankingMetrics(["ndcg@5", "mrr"]), batches_of(preds, target, as_dict=True, categories=cats))
    want = expected(preds, target, ["ndcg@5", "mrr"], categories=cats)
    assert "ndcg@5/3" in want
    assert_same(metrics["ranking"], want)
    assert metrics["mrr/2"] == pytest.approx(want["mrr/2"])


def test_ids_drop_repeated_queries():
    preds, target = make_data(seed=3)
    ids = torch.arange(preds.shape[0])
    # the same queries seen again (as DistributedSampler pads), in another order
    rep = torch.tensor([4, 0, 11, 4])
    batches = batches_of(preds, target, as_dict=True, ids=ids)
    batches.append({"y_pred": preds[rep], "y": target[rep], "ids": rep})
    metrics = run(RankingMetrics(KEYS, reduce="none", empty="zero"), batches)
    assert_same(metrics["ranking"], expected(preds, target, reduce="none", empty="zero"))
    # without ids the repeats count again
    plain = run(RankingMetrics(KEYS, empty="zero"), [(b["y_pred"], b["y"]) for b in batches])
    assert plain["mrr"] != pytest.approx(expected(preds, target, empty="zero")["mrr"])


def test_compact_equals_full_mean():
    preds, target = make_data(seed=4)
    for empty in ("skip", "zero", "one"):
        full = run(RankingMetrics(KEYS, empty=empty), batches_of(preds, target))
        compact_metric = RankingMetrics(KEYS, empty=empty, compact=True)
        compact = run(compact_metric, batches_of(preds, target))
        assert_same(compact["ranking"], full["ranking"], tol=1e-12)
        assert "values" not in compact_metric._state and compact_metric._state["sums"].shape == (3, len(KEYS))
        assert int(compact_metric.last_results.n_queries) == preds.shape[0]


def test_empty_error_and_counts():
    preds, target = make_data(seed=5)
    metric = RankingMetrics(["ndcg@5"])
    run(metric, batches_of(preds, target))
    assert int(metric.last_results.n_empty["ndcg@5"]) == 6  # rows 0, 5, ..., 25
    for compact in (False, True):
        with pytest.raises(ValueError, match="empty='error' forbids them"):
            run(RankingMetrics(["ndcg@5"], empty="error", compact=compact), batches_of(preds, target))


def test_reset_between_epochs():
    preds, target = make_data(seed=6)
    epochs = [batches_of(preds, target), batches_of(*make_data(seed=7))]
    seen = []
    evaluator = Engine(lambda engine, batch: batch)
    RankingMetrics(["ndcg@5", "mrr"]).attach(evaluator, "ranking")
    evaluator.add_event_handler(Events.EPOCH_COMPLETED, lambda e: seen.append(dict(e.state.metrics["ranking"])))
    # two runs of one evaluator on different data
    evaluator.run(epochs[0], max_epochs=1)
    evaluator.run(epochs[1], max_epochs=1)
    assert_same(seen[0], expected(preds, target, ["ndcg@5", "mrr"]))
    assert_same(seen[1], expected(*make_data(seed=7), ["ndcg@5", "mrr"]))
    # two epochs of one run: the second epoch equals the first (state was reset)
    seen.clear()
    evaluator2 = Engine(lambda engine, batch: batch)
    RankingMetrics(["ndcg@5", "mrr"]).attach(evaluator2, "ranking")
    evaluator2.add_event_handler(Events.EPOCH_COMPLETED, lambda e: seen.append(dict(e.state.metrics["ranking"])))
    evaluator2.run(epochs[0], max_epochs=2)
    assert_same(seen[0], seen[1])


def test_update_compute_without_engine_and_unrolled_lists():
    preds, target = make_data(seed=8, n_queries=5)
    metric = RankingMetrics(["ndcg@3", "mrr"])
    metric.update((preds, target))
    assert_same(metric.compute(), expected(preds, target, ["ndcg@3", "mrr"]))
    metric.reset()
    with pytest.raises(NotComputableError, match="at least one example"):
        metric.compute()
    # ignite's per-sample lists: ([y_pred_i], [y_i]) are unrolled into [1, N] batches
    metrics = run(RankingMetrics(["ndcg@3", "mrr"]), [(list(preds), list(target))])
    assert_same(metrics["ranking"], expected(preds, target, ["ndcg@3", "mrr"]))


def test_float16_scores_and_bool_target():
    preds, target = make_data(seed=9, ties=False)
    metrics = run(RankingMetrics(["ndcg@5", "mrr"]), batches_of(preds.half(), target > 0))
    assert_same(metrics["ranking"], expected(preds.half(), target > 0, ["ndcg@5", "mrr"]))


def test_zero_row_batch_is_skipped():
    preds, target = make_data(seed=10)
    batches = batches_of(preds, target)
    batches.insert(1, (preds[:0], target[:0]))
    assert_same(run(RankingMetrics(["mrr"]), batches)["ranking"], expected(preds, target, ["mrr"]))


# -- bad inputs -----------------------------------------------------------------

P, T = torch.rand(3, 4), torch.randint(0, 2, (3, 4))


@pytest.mark.parametrize(
    "output, error, match",
    [
        ([P, T, T], ValueError, r"expected output \(y_pred, y\) or a mapping with keys 'y_pred', 'y' \(optional: 'ids', 'categories', 'confidence', 'mask', 'n_relevant', 'ideal', 'exclude'\); got a list of 3 items"),
        ("text", TypeError, r"expected output \(y_pred, y\).*got str"),
        (P, TypeError, r"expected output \(y_pred, y\).*got Tensor"),
        ({"y_pred": P}, ValueError, r"the output mapping lacks 'y'; expected .*; got keys \['y_pred'\]"),
        ({"preds": P, "target": T}, ValueError, r"lacks 'y_pred', 'y'"),
        ((P, T[:, :3]), ValueError, r"y_pred and y must be 2-D \[batch, items\] of the same shape; got \(3, 4\) and \(3, 3\)"),
        ((P[0], T[0]), ValueError, r"must be 2-D .* got \(4,\) and \(4,\)"),
        ((P.tolist(), T), TypeError, r"y_pred must be a torch.Tensor; got list"),
        ({"y_pred": P, "y": T, "ids": torch.arange(2)}, ValueError, r"ids must be 1-D with one entry per row; got shape \(2,\) for 3 rows"),
        ({"y_pred": P, "y": T, "ids": torch.rand(3)}, TypeError, r"ids must be an integer tensor; got torch.float32"),
        ({"y_pred": P, "y": T, "categories": ["a", "b", "c"]}, TypeError, r"categories must be a 1-D integer tensor or a list of integers; got \['a', 'b', 'c'\]"),
        ((P > 0.5, T), TypeError, r"y_pred must be a floating-point or integer tensor; got torch.bool"),
    ],
)
def test_bad_outputs(output, error, match):
    metric = RankingMetrics(["ndcg@3"])
    with pytest.raises(error, match=match):
        metric.update(output)
    # and the same through an Engine
    with pytest.raises(error, match=match):
        run(RankingMetrics(["ndcg@3"]), [output])


def test_bad_values_raise_at_compute():
    for output, match in [
        ((torch.tensor([[0.1, float("nan")]]), torch.tensor([[1, 0]])), "y_pred contains NaN or inf"),
        ((torch.tensor([[0.1, 0.2]]), torch.tensor([[1.0, float("inf")]])), "y contains NaN or inf"),
        ((torch.tensor([[0.1, 0.2]]), torch.tensor([[1, -1]])), "y contains negative gains"),
    ]:
        metric = RankingMetrics(["ndcg@2"])
        metric.update(output)  # no host sync per batch: checked once, at compute
        with pytest.raises(ValueError, match=match):
            metric.compute()


def test_optional_keys_in_every_batch_or_none():
    metric = RankingMetrics(["mrr"])
    metric.update({"y_pred": P, "y": T, "ids": torch.arange(3)})
    with pytest.raises(ValueError, match=r"'ids' was given in earlier batches and is missing in this one"):
        metric.update((P, T))


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        (dict(metrics=["ndcg@0"]), ValueError, "k must be a positive integer"),
        (dict(metrics=["foo@3"]), ValueError, "unknown metric 'foo'.*known keys"),
        (dict(metrics=["nmi"]), ValueError, "embedding-set metrics need embeddings; use EmbeddingMetrics"),
        (dict(metrics=["mrr"], empty="drop"), ValueError, "empty must be one of"),
        (dict(metrics=["mrr"], reduce="sum"), ValueError, "reduce must be one of"),
        (dict(metrics=["mrr"], ties="random"), ValueError, "ties must be one of"),
        (dict(metrics=["mrr"], compact=True, reduce="median"), ValueError, "compact=True keeps sums and counts"),
    ],
)
def test_bad_arguments(kwargs, error, match):
    with pytest.raises(error, match=match):
        RankingMetrics(**kwargs)


def test_compact_rejects_ids():
    metric = RankingMetrics(["mrr"], compact=True)
    with pytest.raises(ValueError, match="compact=True keeps only sums and counts; it cannot take 'ids'"):
        metric.update({"y_pred": P, "y": T, "ids": torch.arange(3)})


def test_name_conflicting_with_a_key():
    with pytest.raises(ValueError, match="conflicting with mapping keys"):
        run(RankingMetrics(["mrr"]), [(P, T)], name="mrr")


@pytest.mark.parametrize("compact", [False, True])
def test_state_dict_round_trip(compact):
    preds, target = make_data(seed=11)
    batches = batches_of(preds, target, as_dict=True, **({} if compact else {"ids": torch.arange(preds.shape[0])}))
    first = RankingMetrics(KEYS, compact=compact)
    for b in batches[:2]:
        first.update(b)
    saved = first.state_dict()
    first.update(batches[2])  # later updates do not change what was saved
    resumed = RankingMetrics(KEYS, compact=compact)
    resumed.load_state_dict(saved)
    for b in batches[2:]:
        resumed.update(b)
    assert_same(resumed.compute(), expected(preds, target))
