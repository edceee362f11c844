"""k-means clustering (Lloyd's algorithm, greedy k-means++ seeding, as scikit-learn)
and the NMI/AMI of its clusters against class labels, as pytorch-metric-learning
scores a set of embeddings.

Distances are computed in row chunks: memory is O(N·k + N·D), never O(N²).
"""
from __future__ import annotations

import math
from numbers import Real
from typing import Optional, Tuple

import torch
from torch import Tensor

from ..validate.options import check_seed
from ._common import _check_finite, _check_int, _check_real_dtype, _check_tensor, _chunk_rows
from .mutual_info import _check_labels, mutual_info_scores

__all__ = ["kmeans", "clustering_scores"]


def _assign(x: Tensor, x_sq: Tensor, centers: Tensor) -> Tuple[Tensor, Tensor]:
    """Nearest center of each row (first on ties) and the squared distance to it, chunk-wise."""
    c_sq = (centers * centers).sum(1)
    labels = torch.empty(x.shape[0], dtype=torch.long, device=x.device)
    mind = torch.empty(x.shape[0], dtype=x.dtype, device=x.device)
    step = _chunk_rows(centers.shape[0])
    for s in range(0, x.shape[0], step):
        # argmin over ||c||^2 - 2 x.c, the row's ||x||^2 added to the minimum only
        d = torch.addmm(c_sq.unsqueeze(0), x[s : s + step], centers.T, beta=1.0, alpha=-2.0)
        m, i = d.min(dim=1)
        labels[s : s + step] = i
        mind[s : s + step] = (m + x_sq[s : s + step]).clamp_min_(0.0)
    return labels, mind


def _cluster_sums(x: Tensor, labels: Tensor, k: int, one_hot: Optional[bool] = None) -> Tensor:
    """Per-cluster float64 sums of rows; deterministic on every device.

    CPU: ``index_add_`` (serial per index); elsewhere a one-hot matmul, since float
    atomics would make the sums depend on thread timing.
    """
    sums = torch.zeros(k, x.shape[1], dtype=torch.float64, device=x.device)
    if one_hot is None:
        one_hot = x.device.type != "cpu"
    if not one_hot:
        if x.dtype == torch.float64:
            return sums.index_add_(0, labels, x)
        step = 1024  # float32 partial sums over short runs, accumulated in float64
        part = torch.zeros(k, x.shape[1], dtype=x.dtype)
        for s in range(0, x.shape[0], step):
            part.zero_().index_add_(0, labels[s : s + step], x[s : s + step])
            sums += part
        return sums
    step = _chunk_rows(max(k, x.shape[1]))
    for s in range(0, x.shape[0], step):
        oh = torch.nn.functional.one_hot(labels[s : s + step], k).to(torch.float64)
        sums.addmm_(oh.T, x[s : s + step].double())
    return sums


def _kmeanspp(x: Tensor, x_sq: Tensor, k: int, gen: torch.Generator) -> Tensor:
    """Greedy k-means++ seeding (Arthur & Vassilvitskii 2007, as sklearn ``_kmeans_plusplus``).

    The candidates' distances are one ``[trials, N]`` block per step, ``c @ x.T`` over a
    contiguous copy of ``x.T`` (read row by row: the fastest layout for a few centres),
    turned into float64 once and capped at the current closest distance there.
    """
    n = x.shape[0]
    dev = x.device
    n_trials = 2 + int(math.log(k))
    xt = x.T.contiguous()
    zero = torch.zeros((), dtype=torch.float64, device=dev)

    def dists(cand: Tensor) -> Tensor:  # float64 [len(cand), N], clamped at 0 below
        d = torch.addmm(x_sq[cand].unsqueeze(1), x[cand], xt, beta=1.0, alpha=-2.0)
        d += x_sq.unsqueeze(0)
        return d.double()

    idx = torch.empty(k, dtype=torch.long, device=dev)
    first = torch.randint(n, (1,), generator=gen).to(dev)
    idx[:1] = first
    closest = dists(first)[0].clamp_min_(0.0)
    pot = closest.sum()
    for c in range(1, k):
        r = torch.rand(n_trials, generator=gen, dtype=torch.float64).to(dev) * pot
        cand = torch.searchsorted(torch.cumsum(closest, 0), r).clamp_(max=n - 1)
        d = torch.clamp(dists(cand), min=zero, max=closest.unsqueeze(0))  # [trials, N]
        pots = d.sum(1)
        best = torch.argmin(pots)
        pot = pots[best]
        closest = d[best]
        idx[c : c + 1] = cand[best].unsqueeze(0)
    return idx


def _check_kmeans_input(x, n_clusters, seed, max_iter, tol) -> Tuple[int, int, int, float]:
    """The checked ``(n_clusters, seed, max_iter, tol)``."""
    _check_tensor("x", x)
    _check_real_dtype("x", x)
    if x.ndim != 2:
        raise ValueError(f"x must be 2-D [N, D]; got shape {tuple(x.shape)}")
    n, dim = x.shape
    if n == 0 or dim == 0:
        raise ValueError(f"x is empty; expected at least one point and one feature, got shape {tuple(x.shape)}")
    k = _check_int("n_clusters", n_clusters)
    if not 1 <= k <= n:
        raise ValueError(f"n_clusters must be between 1 and the number of points ({n}); got {k}")
    seed = check_seed(_check_int("seed", seed))
    max_iter = _check_int("max_iter", max_iter, minimum=1)
    if isinstance(tol, bool) or not isinstance(tol, Real) or not (float(tol) >= 0.0) or math.isinf(tol):
        raise ValueError(f"tol must be a finite number >= 0; got {tol!r}")
    _check_finite("x", x)
    return k, seed, max_iter, tol


def _new_centers(x: Tensor, labels: Tensor, mind: Tensor, centers: Tensor) -> Tensor:
    """One Lloyd update: each center moves to the float64 mean of its points.

    A cluster left empty takes the point farthest from its own center (the
    farthest first, one point per empty cluster), which leaves the cluster it came
    from; a cluster that still has no point keeps its center.
    """
    k = centers.shape[0]
    sums = _cluster_sums(x, labels, k)
    counts = torch.bincount(labels, minlength=k)
    empty = counts == 0
    if bool(empty.any()):
        empty_ids = torch.nonzero(empty).flatten()
        far = torch.sort(mind, descending=True, stable=True).indices[: empty_ids.numel()]
        old = labels[far]
        xf = x[far].double()
        sums -= torch.nn.functional.one_hot(old, k).to(torch.float64).T @ xf
        counts = counts - torch.bincount(old, minlength=k)
        sums[empty_ids] = xf
        counts[empty_ids] = 1
    return torch.where((counts > 0).unsqueeze(1), sums / counts.clamp_min(1).unsqueeze(1).to(torch.float64), centers)


class _StopTol:
    """sklearn's stopping threshold ``tol * mean(per-feature variance)``, computed only when needed.

    The variance pass costs about as much as two Lloyd steps, and a shift far above
    the threshold needs no exact value: ``mean_j var_j <= mean_j E[x_j^2] = sum_i ||x_i||^2 / (N D)``
    (the variance is the second moment less the squared mean). The bound is taken from
    the float32 row norms ``x_sq``: a sum of m non-negative terms in precision u is
    within a relative (m - 1) u of its exact value (Higham, Accuracy and Stability of
    Numerical Algorithms, 2nd ed., section 4.2; pairwise and blocked sums only lower
    it), so with D <= 2^21 the float32 norms err by at most 1/8, their float64 sum by
    far less, and the float64 variance of float32 data (N < 2^50) by at most another
    1/8 of the second moment. Underflow adds at most 2^-150 (float32; 2^-1075 in
    float64) per square and none per addition, which the ``2^-140`` term covers:
    ``2 * tol * (sum(x_sq) / (N D) + 2^-140)`` bounds the computed threshold. A shift above it compares as the exact threshold would (not reached);
    otherwise the threshold is computed as before, so every stop is unchanged.
    """

    def __init__(self, x: Tensor, x_sq: Tensor, tol: float):
        self._x, self._tol, self._exact = x, tol, None
        n, dim = x.shape
        second_moment = float(x_sq.sum(dtype=torch.float64)) / (n * dim) + 2.0**-140
        self._bound = 2.0 * tol * second_moment if dim <= 1 << 21 else math.inf

    def reached(self, shift: Tensor) -> bool:
        """Whether ``shift <= tol * mean(var)`` (the float64 value as always computed)."""
        if float(shift) > self._bound:
            return False
        if self._exact is None:
            self._exact = self._x.double().var(0, unbiased=False).mean() * self._tol
        return bool(shift <= self._exact)


def kmeans(x: Tensor, n_clusters: int, *, seed: int = 0, max_iter: int = 300, tol: float = 1e-4) -> Tensor:
    """Cluster the rows of ``x`` with Lloyd's algorithm; returns ``int64 [N]`` labels in ``0..n_clusters-1``.

    Seeding is greedy k-means++ (``2 + floor(ln k)`` candidates per step, the one that
    lowers the potential most wins), drawn from a CPU ``torch.Generator`` seeded with
    ``seed`` so it is the same on every device. Each Lloyd step assigns every point to
    its nearest center (ties: lower center index) and moves each center to the mean
    of its points (float64 sums). It stops when the assignment no longer changes, when
    the summed squared center shift is ``<= tol * mean(per-feature variance)``
    (sklearn's rule) or after ``max_iter`` steps; the labels returned always belong to
    the final centers. A cluster that empties is re-seeded at the point farthest from
    its center (as sklearn). Distances are computed in row chunks, so memory is
    O(N·k + N·D), never O(N²). Input in float64 is clustered in float64, anything else
    in float32. Deterministic for a given input, seed and device.

    pytorch-metric-learning's default clusterer (faiss ``Kmeans``, 20 iterations,
    random init) differs in seeding and stopping, so labels (and NMI/AMI) can differ.

    Example:
        >>> x = torch.tensor([[0.0, 0.0], [0.1, 0.0], [5.0, 5.0], [5.1, 5.0]])
        >>> labels = kmeans(x, 2)
        >>> bool(labels[0] == labels[1]) and bool(labels[2] == labels[3]) and bool(labels[0] != labels[2])
        True
    """
    k, seed, max_iter, tol = _check_kmeans_input(x, n_clusters, seed, max_iter, tol)
    work = x if x.dtype in (torch.float32, torch.float64) else x.to(torch.float32)
    if k == 1:
        return torch.zeros(x.shape[0], dtype=torch.long, device=x.device)

    gen = torch.Generator(device="cpu")
    gen.manual_seed(seed)
    x_sq = (work * work).sum(1)
    centers = work[_kmeanspp(work, x_sq, k, gen)].double()
    tol_abs = _StopTol(work, x_sq, float(tol))

    labels_old: Optional[Tensor] = None
    for _ in range(max_iter):
        labels, mind = _assign(work, x_sq, centers.to(work.dtype))
        if labels_old is not None and torch.equal(labels, labels_old):
            return labels  # strict convergence: labels already belong to `centers`
        new_centers = _new_centers(work, labels, mind, centers)
        shift = ((new_centers - centers) ** 2).sum()
        centers = new_centers
        labels_old = labels
        if tol_abs.reached(shift):
            break
    return _assign(work, x_sq, centers.to(work.dtype))[0]


def clustering_scores(
    embeddings: Tensor, labels: Tensor, *, seed: int = 0, max_iter: int = 300, tol: float = 1e-4
) -> Tuple[Tensor, Tensor]:
    """``(nmi, ami)`` of :func:`kmeans` clusters against ``labels``, as pytorch-metric-learning.

    Like PML's ``AccuracyCalculator`` it runs k-means with as many clusters as there
    are distinct labels, then scores the cluster ids against the labels.

    Example:
        >>> emb = torch.tensor([[0.0, 0.0], [0.1, 0.0], [5.0, 5.0], [5.1, 5.0]])
        >>> [float(v) for v in clustering_scores(emb, torch.tensor([3, 3, 8, 8]))]
        [1.0, 1.0]
    """
    _check_tensor("embeddings", embeddings)
    lab = _check_labels("labels", labels)
    if embeddings.ndim != 2 or lab.numel() != embeddings.shape[0]:
        raise ValueError(
            f"embeddings must be 2-D [N, D] with one label each; got shape {tuple(embeddings.shape)} "
            f"and {lab.numel()} labels"
        )
    if lab.numel() == 0:
        raise ValueError("embeddings and labels are empty; expected at least one sample")
    k = int(torch.unique(lab).numel())
    clusters = kmeans(embeddings, k, seed=seed, max_iter=max_iter, tol=tol)
    return mutual_info_scores(lab.to(clusters.device), clusters)
