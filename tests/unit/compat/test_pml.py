"""retrieval_core.compat.pml.AccuracyCalculator: the same numbers as the installed
pytorch-metric-learning's, hand-derived toys, PML's extension protocol, errors."""
from __future__ import annotations

import logging
import math

import numpy as np
import pytest
import torch

pml_calc = pytest.importorskip("pytorch_metric_learning.utils.accuracy_calculator")

from retrieval_core.compat.pml import AccuracyCalculator, ExactKNN  # noqa: E402

CPU = torch.device("cpu")
KNN_NAMES = ("precision_at_1", "r_precision", "mean_average_precision_at_r", "mean_average_precision",
             "mean_reciprocal_rank")


def float64_knn(query, k, reference, ref_includes_query):
    """An exact knn_func for PML itself: float64 distances, the query's own item removed
    by position (gaussian data: no ties, so the order is the one true order)."""
    d = torch.cdist(query.double(), reference.double())
    if ref_includes_query:
        n = len(query)
        d[torch.arange(n), torch.arange(n)] = float("inf")
    dist, idx = d.topk(k, dim=1, largest=False)
    return dist, idx


def pml(include=KNN_NAMES, **options):
    return pml_calc.AccuracyCalculator(include=include, device=CPU, knn_func=float64_knn, **options)


def ours(include=KNN_NAMES, **options):
    return AccuracyCalculator(include=include, device=CPU, **options)


def close(a, b, rel=1e-9):
    if isinstance(a, list):
        return len(a) == len(b) and all(close(x, y, rel) for x, y in zip(a, b))
    return math.isclose(a, b, rel_tol=rel, abs_tol=1e-12) or (math.isnan(a) and math.isnan(b))


def same(a, b):
    """Our values equal PML's: to float64 rounding, except mean_reciprocal_rank, which
    PML computes in float32 (1.0 / a float32 rank): to float32 rounding."""
    return all(close(a[n], b[n], 1e-6 if n == "mean_reciprocal_rank" else 1e-9) for n in b)


def data(n, n_labels, dim=6, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, dim, generator=g), torch.randint(0, n_labels, (n,), generator=g)


@pytest.mark.parametrize("k", [None, 1, 4, 30, "max_bin_count"])
@pytest.mark.parametrize("options", [{}, {"avg_of_avgs": True}, {"return_per_class": True}])
def test_same_numbers_as_pml_self_reference(k, options):
    x, labels = data(150, 9)
    labels[0] = 99  # a lone label: PML leaves its query out
    a = ours(k=k, **options).get_accuracy(x, labels)
    b = pml(k=k, **options).get_accuracy(x, labels)
    assert set(a) == set(KNN_NAMES)
    assert same(a, b), (a, b)
    assert all(type(a[n]) is type(b[n]) for n in KNN_NAMES)


@pytest.mark.parametrize("k", [None, 3, "max_bin_count"])
@pytest.mark.parametrize("ref_includes_query", [False, True])
def test_same_numbers_as_pml_separate_reference(k, ref_includes_query):
    q, ql = data(60, 5, seed=1)
    extra, el = data(90, 7, seed=2)  # labels 5, 6 never asked; the queries' label 4 only in the reference
    reference = torch.cat([q, extra]) if ref_includes_query else extra
    reference_labels = torch.cat([ql, el]) if ref_includes_query else el
    for options in ({}, {"avg_of_avgs": True}):
        a = ours(k=k, **options).get_accuracy(q, ql, reference, reference_labels, ref_includes_query)
        b = pml(k=k, **options).get_accuracy(q, ql, reference, reference_labels, ref_includes_query)
        assert same(a, b), (a, b)


def test_same_numbers_as_pml_default_faiss_on_exact_distances():
    """PML's own default (faiss IndexFlatL2): 1-D points of a Sidon set (every pairwise
    distance distinct) with integer coordinates small enough that float32 computes the
    squared distances exactly, so faiss' order is the true order."""
    p = 37
    points = torch.tensor([2 * p * i + (i * i) % p for i in range(p)], dtype=torch.float32).unsqueeze(1)
    labels = torch.arange(p) % 4
    for k in (None, 5):
        a = AccuracyCalculator(include=KNN_NAMES, k=k, device=CPU).get_accuracy(points, labels)
        b = pml_calc.AccuracyCalculator(include=KNN_NAMES, k=k, device=CPU).get_accuracy(points, labels)
        assert same(a, b), (a, b)


def test_toy_values_by_hand():
    # points on a line; query 0 (label 0) sees 1 (0), 2 (1), 3 (1), 4 (0) in that order
    x = torch.tensor([[0.0], [1.0], [3.0], [6.0], [10.0]])
    labels = torch.tensor([0, 0, 1, 1, 0])
    acc = ours().get_accuracy(x[:1], labels[:1], x[1:], labels[1:])
    # R = 2 relevant (items 1 and 4), hits at ranks 1 and 4
    assert acc["precision_at_1"] == 1.0
    assert acc["r_precision"] == 0.5  # 1 hit in the first R = 2
    assert acc["mean_average_precision_at_r"] == 0.5  # (1/1) / 2
    assert acc["mean_average_precision"] == (1 / 1 + 2 / 4) / 2
    assert acc["mean_reciprocal_rank"] == 1.0
    # k = 1 < R: PML cuts R at k for r_precision (hits@1 / 1) and map@R (sum to rank 1, over R)
    acc = ours(k=1).get_accuracy(x[:1], labels[:1], x[1:], labels[1:])
    assert acc["r_precision"] == 1.0 and acc["mean_average_precision_at_r"] == 0.5
    assert acc["mean_average_precision"] == 0.5 and acc["mean_reciprocal_rank"] == 1.0


def test_self_match_removed_by_position_among_ties():
    # duplicates with different labels: the query's own row goes, its twin stays
    emb = torch.tensor([[10.0], [10.0], [20.0], [20.0]])
    labels = torch.tensor([1, 0, 1, 0])
    assert ours(include=("precision_at_1",)).get_accuracy(emb, labels) == {"precision_at_1": 0.0}


def test_lone_queries_left_out_and_all_lone_gives_nan(caplog):
    x = torch.tensor([[0.0], [1.0], [5.0]])
    acc = ours().get_accuracy(x, torch.tensor([0, 0, 1]))  # label 1 is lone: 2 queries count
    assert acc["precision_at_1"] == 1.0
    with caplog.at_level(logging.WARNING):
        acc = ours(return_per_class=True).get_accuracy(x, torch.tensor([0, 1, 2]))
    assert all(len(v) == 3 and all(math.isnan(e) for e in v) for v in acc.values())
    assert "None of the query labels are in the reference set" in caplog.text


def test_numpy_inputs_and_default_order_of_keys():
    x, labels = data(40, 3, seed=3)
    a = ours(include=()).get_accuracy(x.numpy(), labels.numpy())
    b = ours(include=()).get_accuracy(x, labels)
    assert list(a) == ["AMI", "NMI", "mean_average_precision", "mean_average_precision_at_r",
                       "mean_reciprocal_rank", "precision_at_1", "r_precision"]
    assert a == b and all(type(v) is float for v in a.values())


def test_mrr_alone_gets_its_neighbours():
    # PML lists mean_reciprocal_rank in no requires_knn, so alone it gets no knn_labels
    x, labels = data(30, 3, seed=4)
    acc = ours(include=("mean_reciprocal_rank",)).get_accuracy(x, labels)
    full = ours().get_accuracy(x, labels)
    assert acc["mean_reciprocal_rank"] == full["mean_reciprocal_rank"]
    with pytest.raises(TypeError):
        pml(include=("mean_reciprocal_rank",)).get_accuracy(x, labels)


def test_truncation_warning(caplog):
    x, labels = data(50, 2, seed=5)
    with caplog.at_level(logging.WARNING, logger="retrieval_core.compat.pml"):
        ours(k=3).get_accuracy(x, labels)
    assert "less than the max bin count" in caplog.text


class WithFancy(AccuracyCalculator):
    """The documented extension protocol: a calculate_ method and requires_knn."""

    seen = {}

    def calculate_fancy(self, knn_labels, knn_distances, query_labels, label_counts, not_lone_query_mask,
                        lone_query_labels, ref_includes_query, **kwargs):
        WithFancy.seen = dict(knn_labels=knn_labels, knn_distances=knn_distances, query_labels=query_labels,
                              label_counts=label_counts, mask=not_lone_query_mask, lone=lone_query_labels,
                              riq=ref_includes_query, reference_labels=kwargs["reference_labels"])
        return (knn_labels[:, :2] == query_labels.unsqueeze(1)).float().mean().item()

    def requires_knn(self):
        return super().requires_knn() + ["fancy"]


def test_extension_protocol_gets_pml_kwargs():
    x, labels = data(80, 4, seed=6)
    labels[5] = 7  # lone
    calc = WithFancy(k=6, device=CPU)
    assert "fancy" in calc.get_curr_metrics()
    acc = calc.get_accuracy(x, labels, include=("fancy", "precision_at_1"))
    seen = WithFancy.seen
    dist, idx = float64_knn(x, 6, x, True)
    assert torch.equal(seen["knn_labels"], labels.float()[idx])
    assert torch.allclose(seen["knn_distances"], (dist ** 2).float(), rtol=1e-5)
    assert seen["riq"] is True and seen["lone"].tolist() == [7.0]
    assert seen["mask"].tolist() == [i != 5 for i in range(80)]
    assert seen["label_counts"][0].tolist() == [0.0, 1.0, 2.0, 3.0, 7.0]
    assert seen["label_counts"][1].tolist() == [int((labels == v).sum()) for v in (0, 1, 2, 3, 7)]
    assert acc["fancy"] == (labels[idx[:, :2]] == labels.unsqueeze(1)).float().mean().item()
    assert acc["precision_at_1"] == pml(include=("precision_at_1",), k=6).get_accuracy(x, labels)["precision_at_1"]


def test_override_of_a_builtin_metric_is_called():
    class Doubled(AccuracyCalculator):
        def calculate_precision_at_1(self, knn_labels, query_labels, **kwargs):
            return 2 * (knn_labels[:, 0] == query_labels).double().mean().item()

    x, labels = data(40, 3, seed=7)
    got = Doubled(include=("precision_at_1",), device=CPU).get_accuracy(x, labels)["precision_at_1"]
    assert got == 2 * ours(include=("precision_at_1",)).get_accuracy(x, labels)["precision_at_1"]


def test_custom_knn_func_is_honoured():
    calls = []

    def farthest_first(query, k, reference, ref_includes_query):
        calls.append((query.shape, k, reference.shape, ref_includes_query))
        d, i = float64_knn(query, len(reference) - int(ref_includes_query), reference, ref_includes_query)
        return d.flip(1)[:, :k], i.flip(1)[:, :k]

    x, labels = data(50, 3, seed=8)
    x[:, 0] += 4.0 * labels  # classes apart: the farthest items are of another class
    a = ours(k=10, knn_func=farthest_first).get_accuracy(x, labels)
    b = pml_calc.AccuracyCalculator(include=KNN_NAMES, k=10, device=CPU, knn_func=farthest_first).get_accuracy(x, labels)
    assert calls[0] == (torch.Size([50, 6]), 10, torch.Size([50, 6]), True)
    assert same(a, b)
    assert a["precision_at_1"] < ours(k=10).get_accuracy(x, labels)["precision_at_1"]


def test_custom_label_comparison_matches_pml():
    x, _ = data(70, 2, seed=9)
    g = torch.Generator().manual_seed(10)
    labels = torch.randint(0, 3, (70, 2), generator=g)

    def first_equal_second_differs(a, b):
        return (a[..., 0] == b[..., 0]) & (a[..., 1] != b[..., 1])

    for options in ({}, {"avg_of_avgs": True}):
        a = ours(label_comparison_fn=first_equal_second_differs, **options).get_accuracy(x[:30], labels[:30], x[30:], labels[30:])
        b = pml(label_comparison_fn=first_equal_second_differs, **options).get_accuracy(
            x[:30], labels[:30], x[30:], labels[30:])
        assert same(a, b), (a, b)


def test_kmeans_func_is_honoured():
    x, labels = data(40, 3, seed=11)
    perfect = lambda emb, n: labels.clone()  # noqa: E731 - clusters equal to the labels
    acc = AccuracyCalculator(include=("NMI", "AMI"), kmeans_func=perfect, device=CPU).get_accuracy(x, labels)
    assert acc == {"AMI": 1.0, "NMI": 1.0}


def test_default_clustering_separates_clear_clusters():
    g = torch.Generator().manual_seed(12)
    labels = torch.arange(60) % 3
    x = torch.randn(60, 4, generator=g) * 0.05 + labels.unsqueeze(1) * 10.0
    assert AccuracyCalculator(include=("NMI", "AMI"), device=CPU).get_accuracy(x, labels) == {"AMI": 1.0, "NMI": 1.0}


@pytest.mark.parametrize("kwargs, error, message", [
    ({"k": 0}, ValueError, "k must be an integer greater than 0"),
    ({"k": "max"}, ValueError, "k must be an integer greater than 0"),
    ({"k": 1.5}, ValueError, "k must be an integer greater than 0"),
    ({"avg_of_avgs": True, "return_per_class": True}, ValueError, "mutually exclusive"),
    ({"include": "NMI"}, TypeError, "must be of type tuple"),
    ({"exclude": ("nope",)}, ValueError, "Primary metrics must be one or more of"),
    ({"include": ("NMI",), "label_comparison_fn": torch.eq}, NotImplementedError, "clustering \\+ custom label"),
])
def test_constructor_errors(kwargs, error, message):
    with pytest.raises(error, match=message):
        AccuracyCalculator(**kwargs)


def test_get_accuracy_errors():
    x, labels = data(10, 2, seed=13)
    calc = ours()
    with pytest.raises(ValueError, match="same length"):
        calc.get_accuracy(x, labels[:9])
    with pytest.raises(ValueError, match="first len\\(query\\) elements of reference must be equal"):
        calc.get_accuracy(x[:3], labels[:3], x.flip(0), labels.flip(0), True)
    with pytest.raises(ValueError, match="reference_labels are needed"):
        calc.get_accuracy(x, labels, x)
    with pytest.raises(ValueError, match="2-D"):
        calc.get_accuracy(x[:, 0], labels)
    with pytest.raises(TypeError, match="torch.Tensor or a numpy array"):
        calc.get_accuracy("x", labels)
    with pytest.raises(ValueError, match="no item other than the query itself"):
        calc.get_accuracy(x[:1], labels[:1])
    with pytest.raises(ValueError, match="ExactKNN distance must be one of"):
        ExactKNN("manhattan")


def test_k_beyond_the_reference_is_clamped():
    x, labels = data(20, 2, seed=14)
    assert ours(k=500).get_accuracy(x, labels) == ours(k=None).get_accuracy(x, labels)


def test_exact_knn_protocol_matches_float64_search():
    x, _ = data(45, 2, seed=15)
    for riq in (False, True):
        d, i = ExactKNN()(x[:20], 7, x, riq)
        d64, i64 = float64_knn(x[:20], 7, x, riq)
        assert torch.equal(i, i64) and torch.allclose(d, (d64 ** 2).float(), rtol=1e-5)
        assert d.dtype == torch.float32


def test_exact_knn_serves_pml_own_calculator():
    x, labels = data(120, 5, seed=16)
    a = pml_calc.AccuracyCalculator(include=KNN_NAMES, device=CPU, knn_func=ExactKNN()).get_accuracy(x, labels)
    assert same(ours().get_accuracy(x, labels), a)
    assert same(pml().get_accuracy(x, labels), a)
