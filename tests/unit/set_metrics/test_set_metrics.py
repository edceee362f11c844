"""Embedding-set metrics: k-means, NMI/AMI (against sklearn), PCF and FNMR@FMR
(against OML's documented definitions, written out below in numpy).
"""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sklearn.metrics import adjusted_mutual_info_score, normalized_mutual_info_score

from retrieval_core.set_metrics import _common, clustering, fnmr, mutual_info
from retrieval_core.set_metrics import (
    ami,
    clustering_scores,
    fnmr_at_fmr,
    fnmr_at_fmr_streaming,
    kmeans,
    mutual_info_scores,
    nmi,
    pcf,
)

HYP = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


# ----------------------------------------------------------------------------- OML definitions (numpy)


def fnmr_definition(pos: np.ndarray, neg: np.ndarray, fmr) -> np.ndarray:
    """FNMR at each FMR ``f`` as OML defines it: the threshold is the ``f``-quantile of
    the negative distances (numpy's default, linear), and FNMR the share of positive
    distances at or above it."""
    return np.array([np.mean(pos >= threshold) for threshold in np.quantile(neg, fmr)])


def explained_ratio(x: np.ndarray) -> np.ndarray:
    """Cumulative explained variance ratio ``c_1..c_m`` (``m = min(N, D)``) of the centred data."""
    variances = np.linalg.svd(x - x.mean(axis=0), compute_uv=False) ** 2  # up to the common 1 / (N - 1)
    return np.cumsum(variances) / variances.sum()


def pcf_definition(x: np.ndarray, fractions) -> np.ndarray:
    """PCF as OML defines it: ``(1 + #{k : c_k <= r}) / D`` for each fraction ``r``."""
    c = explained_ratio(x)
    return np.array([(1 + np.count_nonzero(c <= r)) / x.shape[1] for r in fractions])


def test_definitions_by_hand():
    # negatives 1..5: the 0.5-quantile is 3, the 0.1-quantile 1.4; positives >= it
    pos, neg = np.array([0.0, 2.0, 3.0, 6.0]), np.array([5.0, 1.0, 4.0, 2.0, 3.0])
    np.testing.assert_allclose(fnmr_definition(pos, neg, [0.5, 0.1, 1.0]), [0.5, 0.75, 0.25])
    # squared spreads 8 and 2 along two axes, the third axis constant: c = (0.8, 1, 1)
    x = np.array([[2.0, 0.0, 7.0], [-2.0, 0.0, 7.0], [0.0, 1.0, 7.0], [0.0, -1.0, 7.0]])
    np.testing.assert_allclose(explained_ratio(x), [0.8, 1.0, 1.0])
    np.testing.assert_array_equal(pcf_definition(x, [0.0, 0.5, 0.85, 0.99]), [1 / 3, 1 / 3, 2 / 3, 2 / 3])


# ----------------------------------------------------------------------------- NMI / AMI


def _check_against_sklearn(a: np.ndarray, b: np.ndarray, tol: float = 1e-10) -> None:
    n_, a_ = mutual_info_scores(torch.as_tensor(a), torch.as_tensor(b))
    assert n_.dtype == torch.float64 and n_.ndim == 0 and a_.dtype == torch.float64 and a_.ndim == 0
    ref_n = normalized_mutual_info_score(a, b)
    ref_a = adjusted_mutual_info_score(a, b)
    assert abs(float(n_) - ref_n) <= tol, (float(n_), ref_n)
    assert abs(float(a_) - ref_a) <= tol, (float(a_), ref_a)


@pytest.mark.parametrize(
    "n, r, c",
    [(1, 1, 1), (2, 2, 2), (5, 1, 3), (5, 3, 1), (10, 10, 10), (30, 2, 2), (50, 5, 12), (100, 40, 3),
     (300, 30, 30), (400, 400, 7), (1000, 10, 10), (2000, 64, 50)],
)
def test_mi_matches_sklearn_random(n, r, c):
    rng = np.random.default_rng(n * 1000 + r * 10 + c)
    for _ in range(4):
        a = rng.integers(0, r, n) * 3 - 7  # ids need not be 0..K-1
        b = rng.integers(0, c, n) + 10**12
        _check_against_sklearn(a, b)


def test_mi_degenerate_cases():
    n = 37
    x = np.arange(n)
    ones = np.zeros(n, dtype=np.int64)
    rng = np.random.default_rng(0)
    y = rng.integers(0, 4, n)
    cases = [
        (ones, ones),  # one cluster on both sides -> 1, 1
        (ones, x),  # one cluster on one side -> 0, 0
        (x, ones),
        (ones, y),
        (x, x),  # identical all-singletons: sklearn's clamped 0/0 gives 1
        (x, x[::-1].copy()),
        (y, y),  # identical partitions
        (y, (y + 1) % 4),  # renamed
        (x, y),  # one side all singletons: MI == EMI
        (y, x),
        (np.array([0, 1]), np.array([0, 0])),
        (np.array([0, 1]), np.array([1, 0])),
        (np.array([3]), np.array([9])),
    ]
    for a, b in cases:
        _check_against_sklearn(a, b)
    for a, b in cases[:3]:
        assert float(mutual_info_scores(torch.as_tensor(a), torch.as_tensor(b))[0]) in (0.0, 1.0)


def test_mi_independent_product_gives_exact_zero_nmi():
    # a 2x2 contingency table with equal cells: MI == 0 exactly in sklearn and here
    a = torch.tensor([0, 0, 1, 1] * 5)
    b = torch.tensor([0, 1, 0, 1] * 5)
    _check_against_sklearn(a.numpy(), b.numpy())
    assert float(nmi(a, b)) == 0.0


def test_mi_label_dtypes_and_wrappers():
    a = torch.tensor([0, 0, 1, 1, 2, 2, 2])
    b = torch.tensor([1, 1, 1, 0, 0, 2, 2])
    ref = mutual_info_scores(a, b)
    for dt in (torch.int8, torch.uint8, torch.int16, torch.int32):
        got = mutual_info_scores(a.to(dt), b.to(dt))
        assert torch.equal(got[0], ref[0]) and torch.equal(got[1], ref[1])
    assert torch.equal(nmi(a, b), ref[0]) and torch.equal(ami(a, b), ref[1])
    ab, bb = a == 2, b == 0
    _check_against_sklearn(ab.numpy(), bb.numpy())


def test_mi_expected_term_in_small_blocks(monkeypatch):
    # force many blocks in the flattened EMI sum, including blocks of one pair
    rng = np.random.default_rng(3)
    a = np.repeat(np.arange(12), rng.integers(1, 40, 12))
    b = rng.permutation(np.repeat(np.arange(9), len(a) // 9 + 1)[: len(a)])
    full = mutual_info_scores(torch.as_tensor(a), torch.as_tensor(b))
    monkeypatch.setattr(mutual_info, "_EMI_BLOCK", 7)
    small = mutual_info_scores(torch.as_tensor(a), torch.as_tensor(b))
    assert abs(float(full[1]) - float(small[1])) < 1e-12
    _check_against_sklearn(a, b)


labelings = st.integers(1, 60).flatmap(
    lambda n: st.tuples(
        st.lists(st.integers(-3, 6), min_size=n, max_size=n),
        st.lists(st.integers(0, 9), min_size=n, max_size=n),
    )
)


@HYP
@given(labelings)
def test_mi_hypothesis_matches_sklearn(ab):
    a, b = (np.array(v) for v in ab)
    _check_against_sklearn(a, b)


@HYP
@given(labelings, st.randoms(use_true_random=False))
def test_mi_hypothesis_properties(ab, rnd):
    a, b = (torch.tensor(v) for v in ab)
    n_ab, a_ab = mutual_info_scores(a, b)
    n_ba, a_ba = mutual_info_scores(b, a)
    assert abs(float(n_ab) - float(n_ba)) < 1e-12 and abs(float(a_ab) - float(a_ba)) < 1e-12
    assert -1e-12 <= float(n_ab) <= 1 + 1e-12
    assert float(a_ab) <= 1 + 1e-12
    # renaming the clusters changes nothing
    ids = torch.unique(a)
    perm = list(range(len(ids)))
    rnd.shuffle(perm)
    renamed = torch.tensor(perm)[torch.searchsorted(ids, a)] * 5 + 11
    n_r, a_r = mutual_info_scores(renamed, b)
    assert abs(float(n_r) - float(n_ab)) < 1e-12 and abs(float(a_r) - float(a_ab)) < 1e-12
    # a labeling against itself is perfect
    assert float(nmi(a, a)) == 1.0 and float(ami(a, a)) == 1.0


@pytest.mark.parametrize(
    "a, b, exc, match",
    [
        (torch.tensor([0.0, 1.0]), torch.tensor([0, 1]), TypeError, "labels_true must be an integer or bool tensor"),
        (torch.tensor([0, 1]), torch.tensor([0.5, 1.0]), TypeError, "labels_pred must be an integer or bool tensor"),
        ([0, 1], torch.tensor([0, 1]), TypeError, "labels_true must be a torch.Tensor; got list"),
        (torch.tensor([[0, 1]]), torch.tensor([[0, 1]]), ValueError, r"labels_true must be 1-D \[N\]; got shape \(1, 2\)"),
        (torch.tensor([0, 1, 2]), torch.tensor([0, 1]), ValueError, "must have the same length; got 3 and 2"),
        (torch.tensor([], dtype=torch.long), torch.tensor([], dtype=torch.long), ValueError, "are empty"),
    ],
)
def test_mi_errors(a, b, exc, match):
    with pytest.raises(exc, match=match):
        mutual_info_scores(a, b)


# ----------------------------------------------------------------------------- k-means


def _blobs(n_per: int, centers: np.ndarray, scale: float, seed: int):
    rng = np.random.default_rng(seed)
    x = np.concatenate([c + scale * rng.standard_normal((n_per, centers.shape[1])) for c in centers])
    y = np.repeat(np.arange(len(centers)), n_per)
    return torch.tensor(x, dtype=torch.float32), torch.tensor(y)


def test_kmeans_digits_close_to_sklearn():
    from sklearn.cluster import KMeans
    from sklearn.datasets import load_digits

    x, y = load_digits(return_X_y=True)
    ref = normalized_mutual_info_score(y, KMeans(n_clusters=10, n_init=1, random_state=0).fit_predict(x))
    for dtype in (torch.float64, torch.float32):
        labels = kmeans(torch.tensor(x, dtype=dtype), 10, seed=0)
        assert labels.dtype == torch.int64 and labels.shape == (len(x),)
        assert int(labels.min()) >= 0 and int(labels.max()) <= 9
        got = normalized_mutual_info_score(y, labels.numpy())
        assert abs(got - ref) <= 0.05, (got, ref)


@pytest.mark.parametrize("k, dim", [(2, 2), (5, 8), (12, 32)])
def test_kmeans_recovers_separated_blobs(k, dim):
    rng = np.random.default_rng(k)
    centers = rng.standard_normal((k, dim)) * 100.0
    x, y = _blobs(40, centers, 0.5, seed=k)
    labels = kmeans(x, k, seed=1)
    assert float(nmi(y, labels)) == 1.0
    assert normalized_mutual_info_score(y.numpy(), labels.numpy()) == 1.0
    assert [float(v) for v in clustering_scores(x, y * 7 + 3)] == [1.0, 1.0]


def test_kmeans_deterministic_and_chunk_independent(monkeypatch):
    x, _ = _blobs(50, np.random.default_rng(0).standard_normal((6, 4)) * 3, 1.0, seed=2)
    first = kmeans(x, 6, seed=5)
    assert torch.equal(first, kmeans(x, 6, seed=5))
    monkeypatch.setattr(_common, "_CHUNK_ELEMENTS", 64)  # ten rows per chunk
    assert torch.equal(first, kmeans(x, 6, seed=5))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_kmeans_cluster_sums_paths_agree(dtype, generator):
    # the one-hot matmul path (used off CPU, no float atomics) against CPU index_add_
    g = generator
    x = torch.randn(3000, 5, generator=g).to(dtype)
    labels = torch.randint(0, 7, (3000,), generator=g)
    ref = torch.zeros(7, 5, dtype=torch.float64).index_add_(0, labels, x.double())
    for one_hot in (False, True):
        got = clustering._cluster_sums(x, labels, 7, one_hot=one_hot)
        assert got.dtype == torch.float64
        # float32 rows are summed in float32 runs of 1024, then in float64
        tol = dict(rtol=1e-5, atol=1e-4) if dtype == torch.float32 else dict(rtol=1e-12, atol=1e-9)
        torch.testing.assert_close(got, ref, **tol)


def test_kmeans_edge_cases(generator):
    x = torch.randn(9, 3, generator=generator)
    assert torch.equal(kmeans(x, 1), torch.zeros(9, dtype=torch.long))
    own = kmeans(x, 9)  # as many clusters as (distinct) points
    assert sorted(own.tolist()) == list(range(9))
    same = torch.ones(6, 2)  # all points identical: duplicate seeds, empty clusters re-seeded
    lab = kmeans(same, 3)
    assert lab.shape == (6,) and int(lab.min()) >= 0 and int(lab.max()) < 3
    ints = torch.tensor([[0, 0], [0, 1], [50, 50], [51, 50]])
    li = kmeans(ints, 2)
    assert li[0] == li[1] and li[2] == li[3] and li[0] != li[2]
    assert kmeans(x, 3, max_iter=1).shape == (9,)
    assert torch.equal(kmeans(x.half(), 3), kmeans(x.half().float(), 3))  # half is clustered in float32


def test_kmeans_relocates_empty_clusters(monkeypatch):
    x, y = _blobs(30, np.array([[0.0, 0.0], [40.0, 0.0], [0.0, 40.0]]), 0.5, seed=4)
    # every seed on the same point: clusters 1 and 2 start empty and must be re-seeded
    monkeypatch.setattr(clustering, "_kmeanspp", lambda x_, x_sq, k, gen: torch.zeros(k, dtype=torch.long))
    labels = kmeans(x, 3)
    assert torch.bincount(labels, minlength=3).min() > 0
    assert float(nmi(y, labels)) == 1.0


@pytest.mark.parametrize(
    "args, kwargs, exc, match",
    [
        ((torch.ones(4, 2), 0), {}, ValueError, r"n_clusters must be between 1 and the number of points \(4\); got 0"),
        ((torch.ones(4, 2), 5), {}, ValueError, r"between 1 and the number of points \(4\); got 5"),
        ((torch.ones(4, 2), 2.0), {}, TypeError, "n_clusters must be an int; got float"),
        ((torch.ones(4, 2), True), {}, TypeError, "n_clusters must be an int; got bool"),
        ((torch.ones(4), 2), {}, ValueError, r"x must be 2-D \[N, D\]; got shape \(4,\)"),
        ((torch.ones(0, 3), 1), {}, ValueError, r"x is empty.*\(0, 3\)"),
        ((torch.ones(4, 0), 1), {}, ValueError, r"x is empty.*\(4, 0\)"),
        ((torch.ones(4, 2, dtype=torch.bool), 2), {}, TypeError, "x must be a floating-point or integer tensor; got torch.bool"),
        ((torch.tensor([[0.0, float("nan")], [1.0, 1.0]]), 1), {}, ValueError, "x must not contain NaN or infinite"),
        ((torch.tensor([[0.0, float("inf")], [1.0, 1.0]]), 1), {}, ValueError, "x must not contain NaN or infinite"),
        ((np.ones((4, 2)), 2), {}, TypeError, "x must be a torch.Tensor; got ndarray"),
        ((torch.ones(4, 2), 2), {"max_iter": 0}, ValueError, "max_iter must be >= 1; got 0"),
        ((torch.ones(4, 2), 2), {"tol": -1.0}, ValueError, "tol must be a finite number >= 0; got -1.0"),
        ((torch.ones(4, 2), 2), {"seed": 1.5}, TypeError, "seed must be an int; got float"),
    ],
)
def test_kmeans_errors(args, kwargs, exc, match):
    with pytest.raises(exc, match=match):
        kmeans(*args, **kwargs)


def test_clustering_scores_errors():
    with pytest.raises(ValueError, match=r"one label each; got shape \(3, 2\) and 2 labels"):
        clustering_scores(torch.ones(3, 2), torch.tensor([0, 1]))
    with pytest.raises(TypeError, match="labels must be an integer or bool tensor"):
        clustering_scores(torch.ones(3, 2), torch.tensor([0.0, 1.0, 1.0]))


# ----------------------------------------------------------------------------- PCF


def _random_embeddings(rng, n, d, rank=None):
    if rank is None:
        return rng.standard_normal((n, d)) * rng.uniform(0.1, 5.0, d)
    return rng.standard_normal((n, rank)) @ rng.standard_normal((rank, d)) + rng.standard_normal(d)


@pytest.mark.parametrize("n, d, rank", [(50, 8, None), (200, 16, None), (8, 20, None), (12, 12, None), (60, 10, 3), (5, 5, None), (2, 6, None)])
def test_pcf_matches_oml_definition(n, d, rank):
    rng = np.random.default_rng(n * 31 + d)
    for _ in range(3):
        x = _random_embeddings(rng, n, d, rank)
        fractions = tuple(rng.uniform(0.0, 1.0, 12).tolist()) + (0.0, 0.3, 0.9, 0.99)
        cs = explained_ratio(x)
        # keep away from the cumulative ratios, where a rounding difference could flip a count
        fractions = tuple(f for f in fractions if np.min(np.abs(cs - f)) > 1e-9)
        ref = pcf_definition(x, fractions)
        for dtype in (torch.float64, torch.float32):
            xt = torch.tensor(x, dtype=dtype)
            if dtype == torch.float32:
                x32 = xt.numpy().astype(np.float64)
                cs32 = explained_ratio(x32)
                keep = [f for f in fractions if np.min(np.abs(cs32 - f)) > 1e-6]
                got, want = pcf(xt, keep), pcf_definition(x32, keep)
            else:
                got, want = pcf(xt, fractions), ref
            assert got.dtype == torch.float64
            np.testing.assert_array_equal(got.numpy(), want)


def test_pcf_oml_doc_example_and_edges():
    # OML's doctest: calc_pcf(torch.eye(4, 10), pcf_variance=(0.5, 1)) -> tensor([0.2000, 0.5000])
    assert pcf(torch.eye(4, 10), (0.5, 1)).tolist() == [0.2, 0.5]
    x = torch.tensor(_random_embeddings(np.random.default_rng(1), 30, 6))
    # r = 1 counts one past the last axis: (min(N, D) + 1) / D, as OML's definition
    assert float(pcf(x, 1.0)) == 7 / 6
    assert float(pcf(torch.tensor(_random_embeddings(np.random.default_rng(2), 4, 9)), 1.0)) == 5 / 9
    assert float(pcf(x, 0.0)) == 1 / 6  # no ratio is <= 0: one component
    # scalar in, 0-d out; sequences (incl. a tensor) in, 1-D out
    assert pcf(x, 0.5).ndim == 0
    assert pcf(x, [0.5]).shape == (1,)
    assert torch.equal(pcf(x, torch.tensor([0.2, 0.7])), pcf(x, [0.2, 0.7]))
    # integer input; translation invariance (it centres)
    xi = torch.tensor([[0, 1, 5], [2, 2, 0], [7, 1, 1], [3, 3, 3]])
    assert torch.equal(pcf(xi, [0.3, 0.8]), pcf(xi.double() + 100.0, [0.3, 0.8]))
    # zero total variance: NaN
    assert torch.isnan(pcf(torch.ones(5, 3), [0.5, 1.0])).all()


def test_pcf_and_fnmr_of_labelled_embeddings_match_the_definitions(embeddings_labels):
    x, labels = embeddings_labels
    c = explained_ratio(x.numpy())
    fractions = [f for f in (0.1, 0.25, 0.5, 0.75, 0.9, 0.95) if np.min(np.abs(c - f)) > 1e-9]
    assert len(fractions) >= 4
    np.testing.assert_array_equal(pcf(x, fractions).numpy(), pcf_definition(x.numpy(), fractions))
    d = torch.cdist(x, x)
    same = labels.unsqueeze(1) == labels.unsqueeze(0)
    off_diagonal = ~torch.eye(len(x), dtype=torch.bool)
    pos, neg = d[same & off_diagonal], d[~same]
    fmr = [0.001, 0.01, 0.1, 0.2]
    want = fnmr_definition(pos.numpy(), neg.numpy(), fmr)
    assert 0 < want[-1] < want[0] < 1  # the data are neither trivial nor hopeless
    np.testing.assert_array_equal(fnmr_at_fmr(pos, neg, fmr).numpy(), want)
    np.testing.assert_array_equal(fnmr_at_fmr_streaming(_chunked(pos, neg, 50, 300), fmr, collect_limit=10).numpy(), want)


def test_pcf_chunked_gram_is_the_same(monkeypatch):
    x = torch.tensor(_random_embeddings(np.random.default_rng(5), 300, 12))
    fr = [0.1, 0.45, 0.8, 0.97]
    full = pcf(x, fr)
    monkeypatch.setattr(_common, "_CHUNK_ELEMENTS", 40)  # 3 rows per chunk
    assert torch.equal(full, pcf(x, fr))


@pytest.mark.parametrize(
    "emb, fraction, exc, match",
    [
        (torch.ones(5), 0.5, ValueError, r"embeddings must be 2-D \[N, D\]; got shape \(5,\)"),
        (torch.ones(1, 4), 0.5, ValueError, r"at least 2 embeddings.*\(1, 4\)"),
        (torch.ones(0, 4), 0.5, ValueError, r"at least 2 embeddings.*\(0, 4\)"),
        (torch.ones(5, 0), 0.5, ValueError, r"no features; got shape \(5, 0\)"),
        (torch.ones(5, 2, dtype=torch.bool), 0.5, TypeError, "floating-point or integer tensor; got torch.bool"),
        (torch.ones(5, 2, dtype=torch.complex64), 0.5, TypeError, "floating-point or integer tensor; got torch.complex64"),
        (torch.randn(5, 2), 1.5, ValueError, r"fraction must be in \[0, 1\] \(a fraction, not a percent\); got 1.5"),
        (torch.randn(5, 2), [0.5, -0.1], ValueError, r"fraction must be in \[0, 1\].*got -0.1"),
        (torch.randn(5, 2), float("nan"), ValueError, r"fraction must be in \[0, 1\]"),
        (torch.randn(5, 2), [], ValueError, "fraction must not be empty"),
        (torch.randn(5, 2), "0.5", TypeError, "fraction must be a float in \\[0, 1\\] or a sequence of them; got str"),
        (torch.randn(5, 2), True, TypeError, "got bool"),
        (torch.randn(5, 2), [0.5, None], TypeError, "fraction must contain real numbers; got NoneType"),
        (torch.tensor([[0.0, 1.0], [float("nan"), 1.0]]), 0.5, ValueError, "embeddings must not contain NaN or infinite"),
    ],
)
def test_pcf_errors(emb, fraction, exc, match):
    with pytest.raises(exc, match=match):
        pcf(emb, fraction)


# ----------------------------------------------------------------------------- FNMR@FMR


def _chunked(pos: torch.Tensor, neg: torch.Tensor, pos_size: int, neg_size: int, counter=None):
    def make():
        if counter is not None:
            counter.append(1)
        n_steps = max(math.ceil(pos.numel() / pos_size), math.ceil(neg.numel() / neg_size), 1)
        for i in range(n_steps):
            yield pos[i * pos_size : (i + 1) * pos_size], neg[i * neg_size : (i + 1) * neg_size]

    return make


def test_fnmr_oml_doc_example():
    # OML's doctest: calc_fnmr_at_fmr(pos, neg, fmr_vals=(0.1, 0.5)) -> tensor([0.4000, 0.2000])
    pos = torch.tensor([0, 0, 1, 1, 2, 2, 5, 5, 9, 9])
    neg = torch.tensor([3, 3, 4, 4, 6, 6, 7, 7, 8, 8])
    assert fnmr_at_fmr(pos, neg, (0.1, 0.5)).tolist() == [0.4, 0.2]
    assert fnmr_at_fmr(pos.float(), neg.float(), 0.1).ndim == 0
    assert fnmr_at_fmr_streaming(_chunked(pos, neg, 3, 4), (0.1, 0.5)).tolist() == [0.4, 0.2]


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.float16, torch.int64, torch.int32])
def test_fnmr_matches_oml_definition_and_numpy_quantile(dtype):
    rng = np.random.default_rng(7)
    for trial in range(6):
        n_neg, n_pos = int(rng.integers(1, 2000)), int(rng.integers(1, 300))
        if trial % 2:  # heavy ties
            neg = torch.tensor(rng.integers(0, 8, n_neg)).to(dtype)
            pos = torch.tensor(rng.integers(0, 8, n_pos)).to(dtype)
        else:
            neg = torch.tensor(rng.gamma(2.0, 3.0, n_neg) * 10).to(dtype)
            pos = torch.tensor(rng.gamma(1.0, 2.0, n_pos) * 10).to(dtype)
        fmr = tuple(rng.uniform(0, 1, 6).tolist()) + (0.0, 0.001, 0.01, 0.1, 0.5, 1.0)
        want_thr = np.quantile(neg.numpy(), fmr)
        got_thr = fnmr._fmr_thresholds(neg, list(fmr))
        np.testing.assert_array_equal(got_thr.numpy(), want_thr)  # bit for bit
        got = fnmr_at_fmr(pos, neg, fmr)
        assert got.dtype == torch.float64
        np.testing.assert_array_equal(got.numpy(), fnmr_definition(pos.numpy(), neg.numpy(), fmr))
        stream = fnmr_at_fmr_streaming(_chunked(pos, neg, 37, 101), fmr)
        assert torch.equal(stream, got)


def test_fnmr_uses_greater_or_equal_and_signed_zero():
    neg = torch.tensor([1.0, 2.0, 3.0])
    pos = torch.tensor([2.0, 2.0, 1.0, 5.0])
    # the median of neg is 2.0; positives equal to it count as non-matches (>=)
    assert fnmr_at_fmr(pos, neg, [0.5]).tolist() == [0.75]
    negz = torch.tensor([-0.0, 0.0, -0.0, 1.0])
    posz = torch.tensor([0.0, -0.0, 0.5])
    mem = fnmr_at_fmr(posz, negz, [0.0, 0.3, 0.6])
    assert torch.equal(mem, fnmr_at_fmr_streaming(_chunked(posz, negz, 1, 1), [0.0, 0.3, 0.6], collect_limit=0))
    np.testing.assert_array_equal(mem.numpy(), fnmr_definition(posz.numpy(), negz.numpy(), (0.0, 0.3, 0.6)))


@pytest.mark.parametrize("dtype, max_calls", [(torch.float32, 3), (torch.float64, 5), (torch.float16, 3)])
@pytest.mark.parametrize("collect_limit", [0, 1, 1 << 16])
def test_fnmr_streaming_pass_count(dtype, max_calls, collect_limit, generator):
    g = generator
    neg = (torch.rand(20000, generator=g) * 4).to(dtype)
    pos = (torch.rand(3000, generator=g) * 2).to(dtype)
    calls = []
    fmr = [0.0, 1e-4, 0.01, 0.2, 0.999, 1.0]
    got = fnmr_at_fmr_streaming(_chunked(pos, neg, 999, 4096, calls), fmr, collect_limit=collect_limit)
    assert torch.equal(got, fnmr_at_fmr(pos, neg, fmr))
    assert len(calls) <= max_calls


values_f = st.floats(-1e6, 1e6, allow_nan=False, allow_infinity=False, width=32)
tied = st.sampled_from([0.0, -0.0, 1.0, 2.5, 2.5, 3.0, -7.0, 1e-30])


@HYP
@given(
    neg=st.lists(st.one_of(values_f, tied), min_size=1, max_size=300),
    pos=st.lists(st.one_of(values_f, tied), min_size=1, max_size=120),
    fmr=st.lists(st.floats(0.0, 1.0), min_size=1, max_size=6),
    neg_size=st.integers(1, 64),
    pos_size=st.integers(1, 64),
    collect_limit=st.sampled_from([0, 1, 3, 1 << 16]),
    double=st.booleans(),
)
def test_fnmr_streaming_equals_in_memory_hypothesis(neg, pos, fmr, neg_size, pos_size, collect_limit, double):
    dt = torch.float64 if double else torch.float32
    neg_t, pos_t = torch.tensor(neg, dtype=dt), torch.tensor(pos, dtype=dt)
    mem = fnmr_at_fmr(pos_t, neg_t, fmr)
    np.testing.assert_array_equal(mem.numpy(), fnmr_definition(pos_t.numpy(), neg_t.numpy(), fmr))
    got = fnmr_at_fmr_streaming(_chunked(pos_t, neg_t, pos_size, neg_size), fmr, collect_limit=collect_limit)
    assert torch.equal(got, mem)


def test_fnmr_streaming_uneven_and_empty_chunks(generator):
    g = generator
    neg = torch.randn(500, generator=g).double()
    pos = torch.randn(70, generator=g).double() - 1

    def make():
        yield pos[:0], neg[:100]
        yield pos[:70], neg[:0]
        yield pos[:0], neg[100:101]
        yield pos[70:], neg[101:]

    fmr = [0.05, 0.5]
    assert torch.equal(fnmr_at_fmr_streaming(make, fmr, collect_limit=0), fnmr_at_fmr(pos, neg, fmr))
    assert torch.equal(fnmr_at_fmr_streaming(lambda: [(pos, neg)], fmr), fnmr_at_fmr(pos, neg, fmr))


@pytest.mark.parametrize(
    "pos, neg, fmr, exc, match",
    [
        (torch.ones(3), torch.ones(3), [5], ValueError, r"fmr must be in \[0, 1\] \(a fraction, not a percent\); got 5"),
        (torch.ones(3), torch.ones(3), [], ValueError, "fmr must not be empty"),
        (torch.ones(3), torch.ones(3), [float("nan")], ValueError, r"fmr must be in \[0, 1\]"),
        (torch.ones(3), torch.ones(3), "0.1", TypeError, "fmr must be a float in"),
        (torch.ones(3, 1), torch.ones(3), [0.1], ValueError, r"pos_dist must be 1-D; got shape \(3, 1\)"),
        (torch.ones(3), torch.ones(1, 3), [0.1], ValueError, r"neg_dist must be 1-D; got shape \(1, 3\)"),
        (torch.ones(3, dtype=torch.bool), torch.ones(3), [0.1], TypeError, "pos_dist must be a floating-point or integer tensor; got torch.bool"),
        (torch.ones(3), [1.0, 2.0], [0.1], TypeError, "neg_dist must be a torch.Tensor; got list"),
        (torch.ones(0), torch.ones(3), [0.1], ValueError, "pos_dist is empty"),
        (torch.ones(3), torch.ones(0), [0.1], ValueError, "neg_dist is empty"),
        (torch.tensor([1.0, float("nan")]), torch.ones(3), [0.1], ValueError, "pos_dist must not contain NaN or infinite"),
        (torch.ones(3), torch.tensor([float("inf"), 1.0]), [0.1], ValueError, "neg_dist must not contain NaN or infinite"),
    ],
)
def test_fnmr_errors(pos, neg, fmr, exc, match):
    with pytest.raises(exc, match=match):
        fnmr_at_fmr(pos, neg, fmr)


def test_fnmr_streaming_errors():
    pos, neg = torch.rand(10), torch.rand(20)
    with pytest.raises(TypeError, match="make_chunks must be a callable"):
        fnmr_at_fmr_streaming([(pos, neg)], [0.1])
    with pytest.raises(TypeError, match="must return an iterable of \\(pos, neg\\) pairs; got Tensor"):
        fnmr_at_fmr_streaming(lambda: pos, [0.1])
    with pytest.raises(TypeError, match="must yield \\(pos_dist_chunk, neg_dist_chunk\\) pairs; got Tensor on pass 1"):
        fnmr_at_fmr_streaming(lambda: [pos], [0.1])
    with pytest.raises(ValueError, match=r"fmr must be in \[0, 1\] \(a fraction, not a percent\); got 10"):
        fnmr_at_fmr_streaming(lambda: [(pos, neg)], [10])
    with pytest.raises(ValueError, match="neg_dist is empty"):
        fnmr_at_fmr_streaming(lambda: [(pos, neg[:0])], [0.1])
    with pytest.raises(ValueError, match="pos_dist is empty"):
        fnmr_at_fmr_streaming(lambda: [(pos[:0], neg)], [0.1])
    with pytest.raises(ValueError, match="must not contain NaN or infinite"):
        fnmr_at_fmr_streaming(lambda: [(pos, torch.tensor([0.5, float("nan")]))], [0.1])
    with pytest.raises(TypeError, match="all neg_dist chunks must share one dtype; got torch.float32 and torch.float64"):
        fnmr_at_fmr_streaming(lambda: [(pos, neg), (pos, neg.double())], [0.1])
    with pytest.raises(ValueError, match="collect_limit must be >= 0; got -1"):
        fnmr_at_fmr_streaming(lambda: [(pos, neg)], [0.1], collect_limit=-1)

    calls = []

    def changing():  # yields more data on the second call
        calls.append(1)
        return [(pos, neg)] * len(calls)

    with pytest.raises(ValueError, match="must yield the same data on every call; pass 1 saw 10 positive and 20 negative"):
        fnmr_at_fmr_streaming(changing, [0.1])
