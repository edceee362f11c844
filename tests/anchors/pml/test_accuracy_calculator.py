"""Embedding mode against pytorch-metric-learning (PML)'s ``AccuracyCalculator``
(OML's definitions: tests/anchors/oml/test_documented_definitions.py).

* PML's default knn is faiss (``FaissKNN``: ``IndexFlatL2`` on the raw embeddings),
  which is not installed here, so it gets PML's own ``CustomKNN`` with
  ``LpDistance(normalize_embeddings=True)`` (L2 on unit vectors: the cosine order,
  our ``distance="cosine"``), ``LpDistance(normalize_embeddings=False)`` (the faiss
  default order, our ``"euclidean"``) and ``CosineSimilarity()``.
* PML computes on float32; so do we here. Its knn returns the top ``k``: ``k=None``
  is the whole list (our bare ``map``, ``mrr``), ``k="max_bin_count"`` is the largest
  class count (minus one with ``reference=None``) and an int is itself (our
  ``map@k``, ``mrr@k``: PML's MRR only looks within its k neighbours).
* PML skips "lone" queries (no relevant item): our ``empty="skip"``.
* ``avg_of_avgs=True`` is our ``per_class="macro"``, ``return_per_class=True`` our
  ``per_class="all"`` (PML lists the non-lone labels in sorted order).
* PML's own numerics (``torch.cdist`` in float32) can swap two candidates whose
  similarities differ by ~1e-7; the data are nudged until no relevant/non-relevant
  pair of a query is closer than 1e-5 in cosine or euclidean terms, so both sides
  rank the same way and any difference is one of definition.
"""
from __future__ import annotations

import math
from typing import Dict, List, Tuple

import pytest
import torch
from torch import Tensor

from tests.references import clusters

import retrieval_core as rc

import pytorch_metric_learning.utils.accuracy_calculator as pml_calc
from pytorch_metric_learning.distances import CosineSimilarity, LpDistance  # noqa: E402
from pytorch_metric_learning.utils.inference import CustomKNN  # noqa: E402

ATOL = 1e-6
PML_METRICS = ("precision_at_1", "r_precision", "mean_average_precision_at_r", "mean_average_precision", "mean_reciprocal_rank")


# ---------------------------------------------------------------- data without near-ties


def _similarities(query: Tensor, reference: Tensor) -> Tuple[Tensor, Tensor]:
    q, r = query.to(torch.float64), reference.to(torch.float64)
    cos = torch.nn.functional.normalize(q, dim=1) @ torch.nn.functional.normalize(r, dim=1).T
    euc = -torch.cdist(q, r)
    return cos, euc


def _close_pairs(query, query_labels, reference, reference_labels, self_mode: bool, eps: float, relevance=None) -> List[int]:
    """Reference rows that are, for some query, within ``eps`` of a candidate of the
    other relevance (adjacent in that query's order, cosine or euclidean)."""
    bad = set()
    if relevance is None:
        relevant = query_labels.unsqueeze(1) == reference_labels.unsqueeze(0)
    else:
        relevant = relevance(query_labels, reference_labels)
    for sim in _similarities(query, reference):
        if self_mode:
            sim = sim.clone().fill_diagonal_(float("-inf"))
        values, order = torch.sort(sim, dim=1, descending=True)
        rel = torch.gather(relevant, 1, order)
        close = ((values[:, :-1] - values[:, 1:]) < eps) & (rel[:, :-1] != rel[:, 1:]) & torch.isfinite(values[:, 1:])
        rows, cols = close.nonzero(as_tuple=True)
        bad.update(order[rows, cols + 1].tolist())
    return sorted(bad)


def well_separated(query, query_labels, reference=None, reference_labels=None, *, seed: int, eps: float = 1e-5,
                   relevance=None):
    """float32 data nudged until no query has a relevant and a non-relevant candidate
    within ``eps`` of each other (no order flip from float32 rounding); ``relevance``:
    a ``[Q, G]`` rule for other labels than equal classes."""
    g = torch.Generator().manual_seed(seed)
    self_mode = reference is None
    query = query.float().clone()
    reference = query if self_mode else reference.float().clone()
    reference_labels = query_labels if self_mode else reference_labels
    for _ in range(200):
        bad = _close_pairs(query, query_labels, reference, reference_labels, self_mode, eps, relevance)
        if not bad:
            return (query, reference) if not self_mode else (query, None)
        reference[bad] += 1e-2 * torch.randn(len(bad), reference.shape[1], generator=g)
    raise AssertionError("could not separate the data")


@pytest.fixture(scope="module")
def self_set():
    x, labels = clusters(300, 16, 12, seed=1, lone_labels=1)
    x, _ = well_separated(x, labels, seed=2)
    return x, labels


@pytest.fixture(scope="module")
def query_reference():
    x, labels = clusters(360, 16, 12, seed=3)
    q, ql, r, rl = x[:120], labels[:120].clone(), x[120:], labels[120:]
    ql[:3] = 50  # a label absent from the reference: lone queries
    q, r = well_separated(q, ql, r, rl, seed=5)
    return q, ql, r, rl


def test_data_are_interesting(self_set, query_reference):
    x, labels = self_set
    r = rc.evaluate_embeddings(x, labels, ["cmc@1", "map@r"], distance="cosine")
    assert 0.3 < r["cmc@1"].item() < 0.98 and 0.1 < r["map@r"].item() < 0.9
    assert int(r.n_empty["map@r"]) == 1
    q, ql, ref, rl = query_reference
    r = rc.evaluate_embeddings(q, ql, ["cmc@1"], gallery=ref, gallery_labels=rl)
    assert int(r.n_empty["cmc@1"]) == 3


# ---------------------------------------------------------------- PML


KNNS = {
    "lp_normalized": ("cosine", lambda: CustomKNN(LpDistance(normalize_embeddings=True))),
    "lp_raw": ("euclidean", lambda: CustomKNN(LpDistance(normalize_embeddings=False))),
    "cosine_similarity": ("cosine", lambda: CustomKNN(CosineSimilarity())),
}


def pml_accuracy(query, query_labels, reference, reference_labels, *, knn, k, **options) -> Dict:
    calc = pml_calc.AccuracyCalculator(include=PML_METRICS, k=k, knn_func=knn(), device=torch.device("cpu"), **options)
    if reference is None:
        return calc.get_accuracy(query, query_labels)
    return calc.get_accuracy(query, query_labels, reference, reference_labels, ref_includes_query=False)


def pml_k(k, query_labels, reference_labels) -> int:
    """The number of neighbours PML's AccuracyCalculator.determine_k takes."""
    self_mode = reference_labels is None
    counts_in = query_labels if self_mode else reference_labels
    counts = [int((counts_in == c).sum()) for c in query_labels.unique()]
    n_reference = len(counts_in)
    if k == "max_bin_count":
        return max(counts) - int(self_mode)
    if k is None:
        return n_reference - int(self_mode)
    return k


def our_keys(k, n_neighbours: int) -> Dict[str, str]:
    """PML metric name -> our key, for PML's k (None = the whole list)."""
    whole = k is None
    return {
        "precision_at_1": "cmc@1",
        "r_precision": "r_precision",
        "mean_average_precision_at_r": "map@r",
        "mean_average_precision": "map" if whole else f"map@{n_neighbours}",
        "mean_reciprocal_rank": "mrr" if whole else f"mrr@{n_neighbours}",
    }


def ours(query, query_labels, reference, reference_labels, keys, distance, **options):
    kw = {} if reference is None else dict(gallery=reference, gallery_labels=reference_labels)
    return rc.evaluate_embeddings(query, query_labels, list(keys), distance=distance, empty="skip", **kw, **options)


def comparable(k, names):
    """r_precision and map@r need PML's k >= R; a small int k only checks the rest."""
    if isinstance(k, int):
        return [n for n in names if n not in ("r_precision", "mean_average_precision_at_r")]
    return list(names)


def _setup(which, self_set, query_reference):
    if which == "self":
        x, labels = self_set
        return x, labels, None, None
    return query_reference


@pytest.mark.parametrize("k", [None, "max_bin_count", 10])
@pytest.mark.parametrize("which", ["self", "reference"])
@pytest.mark.parametrize("knn", list(KNNS))
def test_pml_accuracy_calculator(knn, which, k, self_set, query_reference):
    distance, make_knn = KNNS[knn]
    q, ql, ref, rl = _setup(which, self_set, query_reference)
    n_neighbours = pml_k(k, ql, rl)
    names = our_keys(k, n_neighbours)
    theirs = pml_accuracy(q, ql, ref, rl, knn=make_knn, k=k)
    got = ours(q, ql, ref, rl, names.values(), distance)
    for name in comparable(k, PML_METRICS):
        assert math.isclose(got[names[name]].item(), theirs[name], abs_tol=ATOL), (name, names[name], got[names[name]].item(), theirs[name])
    # cmc@1 is hit_rate@1
    assert got["cmc@1"].item() == ours(q, ql, ref, rl, ["hit_rate@1"], distance)["hit_rate@1"].item()


@pytest.mark.parametrize("k", [None, "max_bin_count"])
@pytest.mark.parametrize("which", ["self", "reference"])
def test_pml_avg_of_avgs_is_per_class_macro(which, k, self_set, query_reference):
    q, ql, ref, rl = _setup(which, self_set, query_reference)
    names = our_keys(k, pml_k(k, ql, rl))
    theirs = pml_accuracy(q, ql, ref, rl, knn=KNNS["lp_normalized"][1], k=k, avg_of_avgs=True)
    got = ours(q, ql, ref, rl, names.values(), "cosine", per_class="macro")
    plain = ours(q, ql, ref, rl, names.values(), "cosine")
    for name in PML_METRICS:
        assert math.isclose(got[names[name]].item(), theirs[name], abs_tol=ATOL), name
    assert any(abs(got[v].item() - plain[v].item()) > 1e-3 for v in names.values())  # the macro mean is not the plain mean


@pytest.mark.parametrize("which", ["self", "reference"])
def test_pml_return_per_class_is_per_class_all(which, self_set, query_reference):
    q, ql, ref, rl = _setup(which, self_set, query_reference)
    k = "max_bin_count"
    names = our_keys(k, pml_k(k, ql, rl))
    theirs = pml_accuracy(q, ql, ref, rl, knn=KNNS["lp_normalized"][1], k=k, return_per_class=True)
    got = ours(q, ql, ref, rl, names.values(), "cosine", per_class="all")
    reference_labels = ql if ref is None else rl
    labels = sorted(int(c) for c in ql.unique())
    not_lone = [c for c in labels if int((reference_labels == c).sum()) > int(ref is None)]
    assert len(not_lone) < len(labels)  # some lone labels, which PML leaves out
    for name in PML_METRICS:
        key = names[name]
        assert len(theirs[name]) == len(not_lone)
        for c, value in zip(not_lone, theirs[name]):
            assert math.isclose(got[f"{key}/class={c}"].item(), value, abs_tol=ATOL), (name, c)
        for c in set(labels) - set(not_lone):
            assert math.isnan(got[f"{key}/class={c}"].item())  # ours: listed, undefined


# ---------------------------------------------------------------- PML avg_of_avgs with a label_comparison_fn
#
# Facts from PML's accuracy_calculator.py: with a label_comparison_fn, R is the number
# of reference labels the comparison accepts (minus one with reference=None), a query
# is lone when that is 0, and avg_of_avgs groups the non-lone queries by
# torch.unique(query_labels, dim=0): by equal label (row, for [N, C] labels), not by
# what the comparison accepts. Ours: relevance= is the comparison, per_class groups
# by equal label (row).

# name: (ours: [c, G] from query_labels[c] and gallery_labels; PML's comparison, broadcasting)
RULES = {
    "share_a_label": (lambda a, b: (a.unsqueeze(1) * b.unsqueeze(0)).sum(-1) > 0, lambda x, y: (x * y).sum(-1) > 0),
    "first_column": (lambda a, b: a[:, 0].unsqueeze(1) == b[:, 0].unsqueeze(0), lambda x, y: x[..., 0] == y[..., 0]),
    "within_one": (lambda a, b: (a.unsqueeze(1) - b.unsqueeze(0)).abs() <= 1, lambda x, y: (x - y).abs() <= 1),
}


def rule_labels(rule: str, n: int, g: torch.Generator) -> Tuple[Tensor, Tensor]:
    """(labels, a lone label no other label matches) for ``rule``: multi-hot ``[n, 6]``
    drawn from 8 patterns of the first 5 columns, ``[n, 2]`` (class 0..5, kind 0..2),
    or 1-D 0..11."""
    if rule == "share_a_label":
        patterns = (torch.rand(8, 6, generator=g) < 0.3).long()
        patterns[:, 5] = 0
        patterns[torch.arange(8), torch.randint(0, 5, (8,), generator=g)] = 1  # no empty row
        return patterns[torch.randint(0, 8, (n,), generator=g)], torch.tensor([0, 0, 0, 0, 0, 1])
    if rule == "first_column":
        return torch.stack([torch.randint(0, 6, (n,), generator=g), torch.randint(0, 3, (n,), generator=g)], 1), torch.tensor([9, 0])
    return torch.randint(0, 12, (n,), generator=g), torch.tensor(50)


def rule_set(rule: str, which: str):
    """Clustered float32 data for ``rule``: a centre per label value (column), a
    lone query (self) or three (reference), nudged apart from near ties under the rule."""
    g = torch.Generator().manual_seed(31 + len(rule))
    n = 240 if which == "self" else 360
    labels, lone = rule_labels(rule, n, g)
    labels[: 1 if which == "self" else 3] = lone
    one_hot = torch.nn.functional.one_hot
    if rule == "share_a_label":
        parts = labels.float()
    elif rule == "first_column":
        parts = torch.cat([one_hot(labels[:, 0], 10), 0.5 * one_hot(labels[:, 1], 3)], 1).float()
    else:
        parts = one_hot(labels, 51).float()
    x = parts @ torch.randn(parts.shape[1], 16, generator=g) + 1.5 * torch.randn(n, 16, generator=g)
    ours_rule = RULES[rule][0]
    if which == "self":
        x, _ = well_separated(x, labels, seed=32, relevance=ours_rule)
        return x, labels, None, None
    q, r = well_separated(x[:120], labels[:120], x[120:], labels[120:], seed=33, relevance=ours_rule)
    return q, labels[:120], r, labels[120:]


def rule_k(k, rule: str, query_labels, reference_labels) -> int:
    """PML's number of neighbours (determine_k) under a comparison."""
    self_mode = reference_labels is None
    counts = RULES[rule][0](query_labels, query_labels if self_mode else reference_labels).sum(1)
    if k == "max_bin_count":
        return int(counts.max()) - int(self_mode)
    return len(query_labels if self_mode else reference_labels) - int(self_mode)


def row_names(labels: Tensor) -> List[str]:
    """Our class names of the distinct labels (rows), sorted as torch.unique sorts them."""
    return [str(v) for v in torch.unique(labels, dim=0).tolist()]


@pytest.mark.parametrize("k", [None, "max_bin_count"])
@pytest.mark.parametrize("which", ["self", "reference"])
@pytest.mark.parametrize("rule", list(RULES))
def test_pml_avg_of_avgs_with_label_comparison_fn(rule, which, k):
    q, ql, ref, rl = rule_set(rule, which)
    ours_rule, pml_rule = RULES[rule]
    names = our_keys(k, rule_k(k, rule, ql, rl))
    knn = KNNS["lp_normalized"][1]
    theirs = pml_accuracy(q, ql, ref, rl, knn=knn, k=k, avg_of_avgs=True, label_comparison_fn=pml_rule)
    theirs_plain = pml_accuracy(q, ql, ref, rl, knn=knn, k=k, label_comparison_fn=pml_rule)
    got = ours(q, ql, ref, rl, names.values(), "cosine", relevance=ours_rule, per_class="macro")
    plain = ours(q, ql, ref, rl, names.values(), "cosine", relevance=ours_rule)
    assert int(plain.n_empty["cmc@1"]) == (1 if which == "self" else 3)  # the lone queries
    assert 0.1 < plain["map@r"].item() < 0.95 and 0.2 < plain["cmc@1"].item() < 0.99
    for name in PML_METRICS:
        assert math.isclose(plain[names[name]].item(), theirs_plain[name], abs_tol=ATOL), (name, "plain")
        assert math.isclose(got[names[name]].item(), theirs[name], abs_tol=ATOL), (name, got[names[name]].item(), theirs[name])
    assert any(abs(got[v].item() - plain[v].item()) > 1e-3 for v in names.values())  # not the plain mean
    if rule == "first_column":  # the groups are the label rows, not the comparison's classes (first column)
        per_query = ours(q, ql, ref, rl, names.values(), "cosine", relevance=ours_rule, reduce="none")
        by_column = {v: torch.stack([per_query[v][ql[:, 0] == c].nanmean() for c in ql[:, 0].unique()]).nanmean()
                     for v in names.values()}
        assert any(abs(got[v].item() - by_column[v].item()) > 1e-3 for v in names.values())


@pytest.mark.parametrize("which", ["self", "reference"])
@pytest.mark.parametrize("rule", list(RULES))
def test_pml_return_per_class_with_label_comparison_fn(rule, which):
    q, ql, ref, rl = rule_set(rule, which)
    ours_rule, pml_rule = RULES[rule]
    k = "max_bin_count"
    names = our_keys(k, rule_k(k, rule, ql, rl))
    theirs = pml_accuracy(q, ql, ref, rl, knn=KNNS["lp_normalized"][1], k=k, return_per_class=True,
                          label_comparison_fn=pml_rule)
    got = ours(q, ql, ref, rl, names.values(), "cosine", relevance=ours_rule, per_class="all")
    rows = torch.unique(ql, dim=0)
    matches = ours_rule(rows, ql if ref is None else rl).sum(1) - int(ref is None)
    lone = [n for n, m in zip(row_names(ql), matches.tolist()) if m <= 0]
    assert len(lone) == 1
    for name in PML_METRICS:
        key = names[name]
        listed = [n for n in row_names(ql) if n not in lone]
        assert len(theirs[name]) == len(listed)
        for n, value in zip(listed, theirs[name]):
            assert math.isclose(got[f"{key}/class={n}"].item(), value, abs_tol=ATOL), (name, n)
        assert math.isnan(got[f"{key}/class={lone[0]}"].item())
