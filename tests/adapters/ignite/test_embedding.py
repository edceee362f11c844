"""``ignite_retrieval.EmbeddingMetrics`` in one process: attached to an ``Engine``,
its values equal ``retrieval_core.evaluate_embeddings`` on the whole set, in PML's
layout (one set, query = gallery) and OML's (query/gallery flags)."""
from __future__ import annotations

import math

import pytest
import torch
from ignite.engine import Engine
from ignite.exceptions import NotComputableError

import retrieval_core as rc
from ignite_retrieval import EmbeddingMetrics

KEYS = ["cmc@1", "cmc@5", "map@r", "precision_capped@5", "ndcg@10", "r_precision"]


def make_data(n=53, dim=8, classes=6, seed=0):
    g = torch.Generator().manual_seed(seed)
    labels = torch.randint(0, classes, (n,), generator=g)
    x = torch.randn(n, dim, generator=g) + 2 * torch.nn.functional.one_hot(labels, dim).float()
    x[7] = x[3]  # a tie between two items
    return x, labels


def batches_of(n, sizes=(10, 3, 17, 23), **tensors):
    out, start = [], 0
    for s in sizes:
        rows = slice(start, start + s)
        out.append({k: v[rows] for k, v in tensors.items()})
        start += s
    assert start == n
    return out


def run(metric, batches, name="retrieval", epochs=1, transform=lambda b: b):
    evaluator = Engine(lambda engine, batch: transform(batch))
    metric.attach(evaluator, name)
    return evaluator.run(batches, max_epochs=epochs).metrics


def as_floats(results):
    return {k: (v.item() if v.ndim == 0 else v.tolist()) for k, v in results.items()}


def assert_same(got, want, tol=1e-12):
    assert set(got) == set(want), (set(got), set(want))
    for k in want:
        a, b = got[k], want[k]
        if isinstance(b, list):
            assert all((math.isnan(x) and math.isnan(y)) or abs(x - y) <= tol for x, y in zip(a, b)), k
        else:
            assert (math.isnan(a) and math.isnan(b)) or abs(a - b) <= tol, (k, a, b)


@pytest.mark.parametrize("form", ["tuple", "dict"])
def test_one_set_equals_core(form):
    x, labels = make_data()
    batches = batches_of(53, embeddings=x, labels=labels)
    if form == "tuple":
        batches = [(b["embeddings"], b["labels"]) for b in batches]
    metrics = run(EmbeddingMetrics(KEYS + ["nmi"]), batches)
    want = as_floats(rc.evaluate_embeddings(x, labels, KEYS + ["nmi"]))
    assert_same(metrics["retrieval"], want)
    assert metrics["cmc@1"] == pytest.approx(want["cmc@1"])  # flattened into engine.state.metrics


@pytest.mark.parametrize("distance", ["euclidean", "dot"])
def test_query_gallery_flags_equal_core(distance):
    x, labels = make_data(seed=1)
    idx = torch.arange(53)
    is_query, is_gallery = idx % 3 != 0, idx % 2 == 0  # some items are both
    batches = batches_of(53, embeddings=x, labels=labels, is_query=is_query, is_gallery=is_gallery)
    metrics = run(EmbeddingMetrics(KEYS, distance=distance), batches)
    # items present on both sides are never matched with themselves: exclusion by item index
    want = rc.evaluate_embeddings(
        x[is_query], labels[is_query], KEYS, gallery=x[is_gallery], gallery_labels=labels[is_gallery],
        query_ids=idx[is_query], gallery_ids=idx[is_gallery], distance=distance,
    )
    assert_same(metrics["retrieval"], as_floats(want))
    # without that exclusion the values would differ (an item finds itself at rank 1)
    naive = rc.evaluate_embeddings(x[is_query], labels[is_query], ["cmc@1"], gallery=x[is_gallery],
                                   gallery_labels=labels[is_gallery], distance=distance)
    assert naive["cmc@1"].item() > metrics["cmc@1"]


def test_oml_style_output_transform_with_ids_and_categories():
    """An OML-like batch dict, mapped by output_transform; dataset indices as ids."""
    x, labels = make_data(seed=2)
    idx = torch.arange(53)
    cats = idx % 2
    batches = batches_of(53, emb=x, y=labels, idx=idx, cat=cats, q=idx < 30, g=idx >= 10)
    transform = lambda o: {"embeddings": o["emb"], "labels": o["y"], "ids": o["idx"], "categories": o["cat"],
                           "is_query": o["q"], "is_gallery": o["g"]}
    metrics = run(EmbeddingMetrics(KEYS, output_transform=transform), batches)
    q, g = idx < 30, idx >= 10
    want = rc.evaluate_embeddings(x[q], labels[q], KEYS, gallery=x[g], gallery_labels=labels[g],
                                  query_ids=idx[q], gallery_ids=idx[g], categories=cats[q])
    assert "cmc@1/1" in want
    assert_same(metrics["retrieval"], as_floats(want))


def test_ids_drop_repeated_items():
    x, labels = make_data(seed=3)
    idx = torch.arange(53)
    batches = batches_of(53, embeddings=x, labels=labels, ids=idx)
    rep = torch.tensor([52, 0, 3])  # DistributedSampler-style repeats
    batches.append({"embeddings": x[rep], "labels": labels[rep], "ids": rep})
    metrics = run(EmbeddingMetrics(KEYS, reduce="none"), batches)
    assert_same(metrics["retrieval"], as_floats(rc.evaluate_embeddings(x, labels, KEYS, reduce="none")))


def test_multi_hot_labels_and_options():
    g = torch.Generator().manual_seed(4)
    x = torch.randn(40, 5, generator=g)
    labels = torch.rand(40, 4, generator=g) < 0.4
    kwargs = dict(distance="cosine", empty="zero", reduce="median")
    metrics = run(EmbeddingMetrics(KEYS, **kwargs), batches_of(40, sizes=(13, 27), embeddings=x, labels=labels))
    assert_same(metrics["retrieval"], as_floats(rc.evaluate_embeddings(x, labels, KEYS, **kwargs)))


def test_per_class_and_memory_budget():
    x, labels = make_data(seed=5)
    kwargs = dict(per_class="all", memory_budget=4096)
    metrics = run(EmbeddingMetrics(KEYS, **kwargs), batches_of(53, embeddings=x, labels=labels))
    want = as_floats(rc.evaluate_embeddings(x, labels, KEYS, **kwargs))
    assert any("/class=" in k for k in want)
    assert_same(metrics["retrieval"], want)


def test_custom_relevance():
    x, labels = make_data(seed=6)
    relevance = lambda q, g: (q[:, None] == g[None, :]).to(torch.float64) * 2
    metrics = run(EmbeddingMetrics(["ndcg@5", "map@r"], relevance=relevance),
                  batches_of(53, embeddings=x, labels=labels))
    assert_same(metrics["retrieval"], as_floats(rc.evaluate_embeddings(x, labels, ["ndcg@5", "map@r"], relevance=relevance)))


def test_reset_between_epochs_and_unrolled_lists():
    x, labels = make_data(seed=7)
    want = as_floats(rc.evaluate_embeddings(x, labels, KEYS))
    evaluator = Engine(lambda engine, batch: batch)
    metric = EmbeddingMetrics(KEYS)
    metric.attach(evaluator, "retrieval")
    evaluator.run([(b["embeddings"], b["labels"]) for b in batches_of(53, embeddings=x, labels=labels)], max_epochs=3)
    assert_same(evaluator.state.metrics["retrieval"], want)
    assert metric.accumulator.rows(metric._state) == 53
    # per-sample lists are unrolled as ignite does
    assert_same(run(EmbeddingMetrics(KEYS), [(list(x), list(labels))])["retrieval"], want)


def test_nothing_seen():
    with pytest.raises(NotComputableError, match="EmbeddingMetrics must have at least one example"):
        EmbeddingMetrics(KEYS).compute()


E, L = torch.randn(4, 3), torch.tensor([0, 1, 0, 1])


@pytest.mark.parametrize(
    "output, error, match",
    [
        ((E, L, L), ValueError, r"expected output \(embeddings, labels\) or a mapping with keys 'embeddings', 'labels' \(optional: 'ids', 'is_query', 'is_gallery', 'categories', 'confidence', 'exclude'\); got a tuple of 3 items"),
        (E, TypeError, r"expected output \(embeddings, labels\).*got Tensor"),
        ({"embeddings": E, "y": L}, ValueError, r"the output mapping lacks 'labels'.*got keys \['embeddings', 'y'\]"),
        ({"y_pred": E, "y": L}, ValueError, r"lacks 'embeddings', 'labels'"),
        ((E[0], L), ValueError, r"embeddings must be 2-D \[batch, dim\]; got shape \(3,\)"),
        ((E, L[:3]), ValueError, r"labels must have one entry per embedding; got shape \(3,\) for 4 embeddings"),
        ((E, L.float() + 0.5), ValueError, r"labels must be integer class labels; got 0.5 at position 0"),
        ((E, L.tolist()), TypeError, r"labels must be a torch.Tensor; got list"),
        ({"embeddings": E, "labels": L, "is_query": torch.rand(4)}, TypeError, r"is_query must be a bool tensor; got torch.float32"),
        ({"embeddings": E, "labels": L, "is_gallery": torch.ones(5, dtype=torch.bool)}, ValueError, r"is_gallery must be 1-D with one entry per row; got shape \(5,\) for 4 rows"),
        ({"embeddings": E, "labels": L, "ids": torch.arange(4.0)}, TypeError, r"ids must be an integer tensor"),
    ],
)
def test_bad_outputs(output, error, match):
    with pytest.raises(error, match=match):
        EmbeddingMetrics(["cmc@1"]).update(output)
    with pytest.raises(error, match=match):
        run(EmbeddingMetrics(["cmc@1"]), [output])


def test_dimension_must_stay_the_same():
    metric = EmbeddingMetrics(["cmc@1"])
    metric.update((E, L))
    with pytest.raises(ValueError, match="embeddings of every batch must have the same dimension; got 5 after 3"):
        metric.update((torch.randn(2, 5), L[:2]))


def test_label_shape_must_stay_the_same():
    metric = EmbeddingMetrics(["cmc@1"])
    metric.update((E, L))
    with pytest.raises(ValueError, match=r"labels of every batch must have the same shape past the batch dimension; got \(2,\) after \(\)"):
        metric.update((E, torch.ones(4, 2, dtype=torch.bool)))


def test_values_checked_at_compute():
    metric = EmbeddingMetrics(["cmc@1"])
    metric.update((torch.tensor([[0.0, float("nan")], [1.0, 0.0]]), torch.tensor([0, 0])))
    with pytest.raises(ValueError, match="query embeddings contain NaN or inf"):
        metric.compute()


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        (dict(metrics=["cmc@x"]), ValueError, "k must be a positive integer"),
        (dict(metrics=["cmc@1"], distance="manhattan"), ValueError, "distance must be one of"),
        (dict(metrics=["cmc@1"], per_class="micro"), ValueError, "per_class must be None, 'macro' or 'all'"),
        (dict(metrics=["cmc@1"], relevance="labels"), TypeError, "relevance must be a callable"),
        (dict(metrics=["cmc@1"], empty="nan"), ValueError, "empty must be one of"),
    ],
)
def test_bad_arguments(kwargs, error, match):
    with pytest.raises(error, match=match):
        EmbeddingMetrics(**kwargs)


def test_state_dict_round_trip():
    x, labels = make_data(seed=8)
    batches = batches_of(53, embeddings=x, labels=labels, ids=torch.arange(53))
    first = EmbeddingMetrics(KEYS)
    for b in batches[:2]:
        first.update(b)
    saved = first.state_dict()
    first.update(batches[2])
    resumed = EmbeddingMetrics(KEYS)
    resumed.load_state_dict(saved)
    for b in batches[2:]:
        resumed.update(b)
    assert_same(resumed.compute(), as_floats(rc.evaluate_embeddings(x, labels, KEYS)))
