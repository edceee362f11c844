"""Embedding-set metrics: computed once per evaluation over a whole set, not per query.

* :func:`kmeans` -- Lloyd's algorithm with greedy k-means++ seeding (as scikit-learn).
* :func:`mutual_info_scores` (:func:`nmi`, :func:`ami`) -- NMI and AMI equal to
  scikit-learn's ``normalized_mutual_info_score`` / ``adjusted_mutual_info_score``
  (``average_method="arithmetic"``); :func:`clustering_scores` runs k-means with as
  many clusters as distinct labels first, as pytorch-metric-learning's
  ``AccuracyCalculator`` does for its ``NMI`` / ``AMI``.
* :func:`pcf` -- principal components fraction, OML ``calc_pcf``.
* :func:`fnmr_at_fmr` and :func:`fnmr_at_fmr_streaming` -- FNMR at FMR, OML
  ``calc_fnmr_at_fmr``; the streaming form finds the exact quantiles of a negative
  pair set too large to hold, by radix selection over several passes.

Everything runs on the input's device with torch alone; no Python loop touches
individual samples (loops run over clusters, passes or chunks).
"""
from __future__ import annotations

import math
from numbers import Integral, Real
from typing import Callable, Iterable, List, Optional, Sequence, Tuple, Union

import torch
from torch import Tensor

__all__ = [
    "kmeans",
    "mutual_info_scores",
    "nmi",
    "ami",
    "clustering_scores",
    "pcf",
    "fnmr_at_fmr",
    "fnmr_at_fmr_streaming",
]

_EPS64 = 2.220446049250313e-16  # numpy.finfo(float64).eps, as sklearn uses it
_CHUNK_ELEMENTS = 1 << 20  # scratch elements per chunk of a [rows, k] block
_EMI_BLOCK = 1 << 16  # summands per block of the expected-MI sum (cache-sized)
_DIGIT_BITS = 16
_DIGIT_SIZE = 1 << _DIGIT_BITS
_FLOAT_BITS_DTYPE = {torch.float16: torch.int16, torch.bfloat16: torch.int16, torch.float32: torch.int32, torch.float64: torch.int64}
_INT_DTYPES = (torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64)


# ----------------------------------------------------------------------------- checks


def _check_tensor(name: str, value) -> Tensor:
    if not isinstance(value, Tensor):
        raise TypeError(f"{name} must be a torch.Tensor; got {type(value).__name__}")
    return value


def _check_int(name: str, value, minimum: Optional[int] = None) -> int:
    if isinstance(value, bool) or not isinstance(value, Integral):
        raise TypeError(f"{name} must be an int; got {type(value).__name__}")
    value = int(value)
    if minimum is not None and value < minimum:
        raise ValueError(f"{name} must be >= {minimum}; got {value}")
    return value


def _check_real_dtype(name: str, t: Tensor) -> None:
    if t.is_floating_point():
        return
    if t.dtype not in _INT_DTYPES:
        raise TypeError(f"{name} must be a floating-point or integer tensor; got {t.dtype}")


def _check_fractions(name: str, values) -> Tuple[List[float], bool]:
    """A float, or a non-empty sequence of floats, each in [0, 1]. Returns (list, was_scalar)."""
    expected = f"{name} must be a float in [0, 1] or a sequence of them"
    if isinstance(values, Tensor):
        if values.dtype == torch.bool or values.is_complex() or values.ndim > 1:
            raise TypeError(f"{expected}; got a {values.dtype} tensor of shape {tuple(values.shape)}")
        scalar = values.ndim == 0
        seq = values.reshape(-1).tolist()
    elif isinstance(values, Real) and not isinstance(values, bool):
        scalar, seq = True, [values]
    elif isinstance(values, (str, bytes, bool)) or not hasattr(values, "__iter__"):
        raise TypeError(f"{expected}; got {type(values).__name__}")
    else:
        scalar, seq = False, list(values)
    out: List[float] = []
    for v in seq:
        if isinstance(v, bool) or not isinstance(v, Real):
            raise TypeError(f"{name} must contain real numbers; got {type(v).__name__} in {values!r}")
        f = float(v)
        if not (0.0 <= f <= 1.0):  # also rejects NaN
            raise ValueError(f"{name} must be in [0, 1] (a fraction, not a percent); got {v!r} in {values!r}")
        out.append(f)
    if not out:
        raise ValueError(f"{name} must not be empty; got {values!r}")
    return out, scalar


def _check_finite(name: str, t: Tensor) -> None:
    if t.is_floating_point() and not bool(torch.isfinite(t).all()):
        raise ValueError(f"{name} must not contain NaN or infinite values")


def _chunk_rows(n_cols: int) -> int:
    return max(1, _CHUNK_ELEMENTS // max(1, n_cols))


# ----------------------------------------------------------------------------- k-means


def _sq_dists(x: Tensor, x_sq: Tensor, c: Tensor, c_sq: Tensor) -> Tensor:
    """Squared Euclidean distances ``[len(x), len(c)]`` (many rows, few centers), clamped at 0."""
    d = torch.addmm(c_sq.unsqueeze(0), x, c.T, beta=1.0, alpha=-2.0)
    d += x_sq.unsqueeze(1)
    return d.clamp_min_(0.0)


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
    """Greedy k-means++ seeding (Arthur & Vassilvitskii 2007, as sklearn ``_kmeans_plusplus``)."""
    n = x.shape[0]
    dev = x.device
    n_trials = 2 + int(math.log(k))
    idx = torch.empty(k, dtype=torch.long, device=dev)
    first = torch.randint(n, (1,), generator=gen).to(dev)
    idx[:1] = first
    closest = _sq_dists(x, x_sq, x[first], x_sq[first])[:, 0]
    pot = closest.sum(dtype=torch.float64)
    for c in range(1, k):
        r = torch.rand(n_trials, generator=gen, dtype=torch.float64).to(dev) * pot
        cum = torch.cumsum(closest, 0, dtype=torch.float64)
        cand = torch.searchsorted(cum, r).clamp_(max=n - 1)
        d = _sq_dists(x, x_sq, x[cand], x_sq[cand])  # [N, trials]
        torch.minimum(d, closest.unsqueeze(1), out=d)
        pots = d.sum(0, dtype=torch.float64)
        best = torch.argmin(pots)
        pot = pots[best]
        closest = d.index_select(1, best.unsqueeze(0)).squeeze(1)
        idx[c : c + 1] = cand[best].unsqueeze(0)
    return idx


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
    _check_tensor("x", x)
    if x.dtype == torch.bool or x.is_complex() or not (x.is_floating_point() or x.dtype in _INT_DTYPES):
        raise TypeError(f"x must be a floating-point or integer tensor; got {x.dtype}")
    if x.ndim != 2:
        raise ValueError(f"x must be 2-D [N, D]; got shape {tuple(x.shape)}")
    n, dim = x.shape
    if n == 0 or dim == 0:
        raise ValueError(f"x is empty; expected at least one point and one feature, got shape {tuple(x.shape)}")
    k = _check_int("n_clusters", n_clusters)
    if not 1 <= k <= n:
        raise ValueError(f"n_clusters must be between 1 and the number of points ({n}); got {k}")
    seed = _check_int("seed", seed)
    max_iter = _check_int("max_iter", max_iter, minimum=1)
    if isinstance(tol, bool) or not isinstance(tol, Real) or not (float(tol) >= 0.0) or math.isinf(tol):
        raise ValueError(f"tol must be a finite number >= 0; got {tol!r}")
    _check_finite("x", x)
    work = x if x.dtype in (torch.float32, torch.float64) else x.to(torch.float32)
    if k == 1:
        return torch.zeros(n, dtype=torch.long, device=x.device)

    gen = torch.Generator(device="cpu")
    gen.manual_seed(seed)
    x_sq = (work * work).sum(1)
    centers = work[_kmeanspp(work, x_sq, k, gen)].double()
    tol_abs = work.double().var(0, unbiased=False).mean() * float(tol)

    labels_old: Optional[Tensor] = None
    for _ in range(max_iter):
        labels, mind = _assign(work, x_sq, centers.to(work.dtype))
        if labels_old is not None and torch.equal(labels, labels_old):
            return labels  # strict convergence: labels already belong to `centers`
        sums = _cluster_sums(work, labels, k)
        counts = torch.bincount(labels, minlength=k)
        empty = counts == 0
        if bool(empty.any()):
            empty_ids = torch.nonzero(empty).flatten()
            far = torch.sort(mind, descending=True, stable=True).indices[: empty_ids.numel()]
            old = labels[far]
            xf = work[far].double()
            sums -= torch.nn.functional.one_hot(old, k).to(torch.float64).T @ xf
            counts = counts - torch.bincount(old, minlength=k)
            sums[empty_ids] = xf
            counts[empty_ids] = 1
        new_centers = torch.where(
            (counts > 0).unsqueeze(1), sums / counts.clamp_min(1).unsqueeze(1).to(torch.float64), centers
        )
        shift = ((new_centers - centers) ** 2).sum()
        centers = new_centers
        labels_old = labels
        if bool(shift <= tol_abs):
            break
    return _assign(work, x_sq, centers.to(work.dtype))[0]


# ----------------------------------------------------------------------------- NMI / AMI


def _check_labels(name: str, t) -> Tensor:
    _check_tensor(name, t)
    if t.is_floating_point() or t.is_complex():
        raise TypeError(f"{name} must be an integer or bool tensor of cluster ids; got {t.dtype}")
    if t.ndim != 1:
        raise ValueError(f"{name} must be 1-D [N]; got shape {tuple(t.shape)}")
    return t


def _entropy(counts: Tensor, n: int) -> Tensor:
    """sklearn ``_entropy`` from the (all positive) cluster sizes."""
    if counts.numel() == 1:
        return torch.zeros((), dtype=torch.float64, device=counts.device)
    pi = counts.to(torch.float64)
    return -torch.sum((pi / n) * (torch.log(pi) - math.log(n)))


def _mutual_info(nij: Tensor, a_i: Tensor, b_j: Tensor, n: int) -> Tensor:
    """sklearn ``mutual_info_score`` over the non-zero contingency cells."""
    nz = nij.to(torch.float64)
    c_nm = nz / n
    outer = (a_i * b_j).to(torch.float64)
    log_outer = -torch.log(outer) + math.log(n) + math.log(n)
    mi = c_nm * (torch.log(nz) - math.log(n)) + c_nm * log_outer
    mi = torch.where(mi.abs() < _EPS64, torch.zeros_like(mi), mi)
    return mi.sum().clamp_min(0.0)


def _expected_mutual_info(a: Tensor, b: Tensor, n: int) -> Tensor:
    """sklearn ``expected_mutual_information``, vectorised.

    The summand depends on a row size ``a_i`` and a column size ``b_j`` only, so rows
    (columns) of equal size are grouped and each distinct pair weighted by how many
    times it occurs; the inner sum over ``n_ij`` is flattened with ``repeat_interleave``
    and evaluated in blocks, with ``lgamma(j + 1)`` looked up in a table for
    ``j = 0..N`` (computed once by ``torch.lgamma``).
    """
    dev = a.device
    f64 = torch.float64
    ua, ca = torch.unique(a, return_counts=True)
    ub, cb = torch.unique(b, return_counts=True)
    A = ua.unsqueeze(1).expand(-1, ub.numel()).reshape(-1)
    B = ub.unsqueeze(0).expand(ua.numel(), -1).reshape(-1)
    w = (ca.unsqueeze(1) * cb.unsqueeze(0)).reshape(-1).to(f64)
    start = torch.clamp(A - n + B, min=1)
    end = torch.minimum(A, B) + 1
    length = (end - start).clamp_min(0)
    lgf = torch.lgamma(torch.arange(1, n + 2, dtype=f64, device=dev))  # lgf[j] = lgamma(j + 1)
    # per pair: gln_a + gln_b + gln_Na + gln_Nb (sklearn's order), log a, log b
    g_pair = lgf[A] + lgf[B] + lgf[n - A] + lgf[n - B]
    log_ab = torch.log(A.to(f64)), torch.log(B.to(f64))
    log_n = math.log(n)
    gln_n1 = math.lgamma(n + 1)
    emi = torch.zeros((), dtype=f64, device=dev)
    # blocks of pairs holding at most _EMI_BLOCK summands (a single huge pair alone)
    csum = torch.cumsum(length.cpu(), 0)
    p0 = 0
    n_pairs = A.numel()
    while p0 < n_pairs:
        base = int(csum[p0 - 1]) if p0 > 0 else 0
        p1 = max(int(torch.searchsorted(csum, base + _EMI_BLOCK, right=True)), p0 + 1)
        total = int(csum[p1 - 1]) - base
        if total > 0:
            L = length[p0:p1]
            pair = torch.repeat_interleave(torch.arange(p1 - p0, device=dev), L, output_size=total)
            offs = torch.arange(total, device=dev) - (torch.cumsum(L, 0) - L)[pair]
            q = pair + p0
            Ai, Bj = A[q], B[q]
            nij = start[q] + offs
            nf = nij.to(f64)
            term1 = nf / n
            term2 = (log_n + torch.log(nf)) - log_ab[0][q] - log_ab[1][q]
            gln = (
                g_pair[q]
                - (lgf[nij] + gln_n1)
                - lgf[Ai - nij]
                - lgf[Bj - nij]
                - lgf[n - Ai - Bj + nij]
            )
            emi = emi + torch.sum(w[q] * (term1 * term2 * torch.exp(gln)))
        p0 = p1
    return emi


def mutual_info_scores(labels_true: Tensor, labels_pred: Tensor) -> Tuple[Tensor, Tensor]:
    """Normalized and adjusted mutual information of two labelings: ``(nmi, ami)``.

    Both are float64 0-d tensors on the labels' device and equal scikit-learn's
    ``normalized_mutual_info_score`` and ``adjusted_mutual_info_score`` with the
    default ``average_method="arithmetic"`` (to 1e-10 and better; what remains for
    large N is ``lgamma`` rounding in E[MI], where sklearn mixes scipy ``gammaln`` and
    C ``lgamma`` and this uses ``torch.lgamma``): with ``U``, ``V`` the two
    partitions of the ``N`` samples, ``MI`` their mutual information, ``H`` entropy
    (natural log) and ``E[MI]`` the expected MI under the permutation model
    (hypergeometric, Vinh et al. 2010),

    ``NMI = MI / ((H(U) + H(V)) / 2)``,  ``AMI = (MI - E[MI]) / ((H(U) + H(V)) / 2 - E[MI])``,

    with sklearn's special cases: one cluster on both sides gives 1 and 1; one cluster
    on one side only gives NMI 0 and AMI 0; ``MI == 0`` gives NMI 0; AMI's numerator
    and denominator are kept at least machine epsilon away from 0, sign preserved.
    One addition: two identical partitions (up to renaming) give exactly 1 and 1,
    where sklearn's AMI is 0/0 rounding noise for all-singleton labelings.
    Labels are any integer (or bool) ids, not necessarily ``0..K-1``. Empty labelings
    raise ``ValueError`` (sklearn returns 1.0).

    Example:
        >>> t = torch.tensor([0, 0, 1, 1, 2, 2])
        >>> p = torch.tensor([5, 5, 7, 7, 7, 9])
        >>> nmi_, ami_ = mutual_info_scores(t, p)
        >>> round(float(nmi_), 6), round(float(ami_), 6)
        (0.739667, 0.502361)
    """
    t = _check_labels("labels_true", labels_true)
    p = _check_labels("labels_pred", labels_pred)
    if t.shape != p.shape:
        raise ValueError(
            f"labels_true and labels_pred must have the same length; got {t.numel()} and {p.numel()}"
        )
    if t.device != p.device:
        raise ValueError(f"labels_true and labels_pred must be on the same device; got {t.device} and {p.device}")
    n = t.numel()
    if n == 0:
        raise ValueError("labels_true and labels_pred are empty; expected at least one sample")
    dev = t.device
    one = torch.ones((), dtype=torch.float64, device=dev)
    zero = torch.zeros((), dtype=torch.float64, device=dev)
    _, ti = torch.unique(t.to(torch.int64), return_inverse=True)
    _, pj = torch.unique(p.to(torch.int64), return_inverse=True)
    a = torch.bincount(ti)
    b = torch.bincount(pj)
    r, c = a.numel(), b.numel()
    if r == 1 and c == 1:
        return one, one.clone()
    if r == 1 or c == 1:
        return zero, zero.clone()
    codes = ti * c + pj
    if r * c <= max(4 * n, 1 << 20):  # dense table, then its non-zero cells
        table = torch.bincount(codes, minlength=r * c)
        cells = torch.nonzero(table).flatten()
        nij = table[cells]
    else:
        cells, nij = torch.unique(codes, return_counts=True)
    rows, cols = cells // c, cells % c
    if nij.numel() == r == c:  # a bijection between clusters: identical partitions
        return one, one.clone()
    mi = _mutual_info(nij, a[rows], b[cols], n)
    normalizer = (_entropy(a, n) + _entropy(b, n)) / 2
    nmi_ = torch.where(mi == 0, zero, mi / normalizer)
    emi = _expected_mutual_info(a, b, n)
    den = normalizer - emi
    den = torch.where(den < 0, torch.clamp_max(den, -_EPS64), torch.clamp_min(den, _EPS64))
    num = mi - emi
    num = torch.where(num < 0, torch.clamp_max(num, -_EPS64), torch.clamp_min(num, _EPS64))
    return nmi_, num / den


def nmi(labels_true: Tensor, labels_pred: Tensor) -> Tensor:
    """Normalized mutual information (sklearn ``normalized_mutual_info_score``, arithmetic mean).

    Example:
        >>> float(nmi(torch.tensor([0, 0, 1, 1]), torch.tensor([1, 1, 0, 0])))
        1.0
    """
    return mutual_info_scores(labels_true, labels_pred)[0]


def ami(labels_true: Tensor, labels_pred: Tensor) -> Tensor:
    """Adjusted mutual information (sklearn ``adjusted_mutual_info_score``, arithmetic mean).

    Example:
        >>> float(ami(torch.tensor([0, 0, 0, 0]), torch.tensor([0, 1, 2, 3])))
        0.0
    """
    return mutual_info_scores(labels_true, labels_pred)[1]


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


# ----------------------------------------------------------------------------- PCF


def pcf(embeddings: Tensor, fraction: Union[float, Sequence[float]]) -> Tensor:
    """Principal components fraction (OML ``calc_pcf``): components needed to explain a variance fraction, over D.

    Definition (OML ``oml/functional/metrics.py::calc_pcf`` with
    ``oml/utils/misc_torch.py::PCA``): centre the ``[N, D]`` embeddings by their mean,
    take the ``m = min(N, D)`` singular values ``s`` of the centred matrix (the
    eigenvalues ``s²/(N-1)`` of the covariance, descending), their cumulative explained
    variance ratio ``c_k = (s_1² + ... + s_k²) / (s_1² + ... + s_m²)``, and for each
    fraction ``r``::

        n(r) = #{k in 1..m : c_k <= r} + 1      # torch.searchsorted(c, r, side="right") + 1
        pcf(r) = n(r) / D

    i.e. the largest ``n`` with ``c_{n-1} <= r``. As in OML, ``r = 1`` counts one axis
    past the last (``(m + 1) / D``, which exceeds 1 when ``N > D``), and a rank-deficient
    set counts its zero-variance axes once their cumulative ratio is reached. Computed
    in float64 from the eigenvalues of the centred Gram matrix (``D x D``, accumulated
    in row chunks, or ``N x N`` when ``N < D``), normalised so that ``c_m`` is exactly 1
    (OML's float32 cumsum can land on either side of 1, so its ``r = 1`` value
    wobbles between ``m/D`` and ``(m+1)/D``). A set with zero total variance gives NaN.
    A float ``fraction`` gives a 0-d result, a sequence a 1-D one (float64).

    Example:
        >>> pcf(torch.eye(4, 10), [0.5, 1.0])
        tensor([0.2000, 0.5000], dtype=torch.float64)
    """
    _check_tensor("embeddings", embeddings)
    if embeddings.dtype == torch.bool or embeddings.is_complex():
        raise TypeError(f"embeddings must be a floating-point or integer tensor; got {embeddings.dtype}")
    _check_real_dtype("embeddings", embeddings)
    if embeddings.ndim != 2:
        raise ValueError(f"embeddings must be 2-D [N, D]; got shape {tuple(embeddings.shape)}")
    n, dim = embeddings.shape
    if dim == 0:
        raise ValueError(f"embeddings have no features; got shape {tuple(embeddings.shape)}")
    if n < 2:
        raise ValueError(f"pcf needs at least 2 embeddings to estimate a covariance; got shape {tuple(embeddings.shape)}")
    fracs, scalar = _check_fractions("fraction", fraction)
    _check_finite("embeddings", embeddings)
    dev = embeddings.device
    f64 = torch.float64
    mean = embeddings.sum(0, dtype=f64) / n
    if n >= dim:
        gram = torch.zeros(dim, dim, dtype=f64, device=dev)
        step = _chunk_rows(dim)
        for s in range(0, n, step):
            xc = embeddings[s : s + step].to(f64) - mean
            gram.addmm_(xc.T, xc)
    else:
        xc = embeddings.to(f64) - mean
        gram = xc @ xc.T
    eig = torch.linalg.eigvalsh(gram).flip(0).clamp_min(0.0)  # m = min(N, D) values, descending
    cs = torch.cumsum(eig, 0)
    ratio = cs / cs[-1]
    r = torch.tensor(fracs, dtype=f64, device=dev)
    count = torch.searchsorted(ratio, r, right=True) + 1
    out = count.to(f64) / dim
    out = torch.where(cs[-1] > 0, out, torch.full_like(out, float("nan")))
    return out[0] if scalar else out


# ----------------------------------------------------------------------------- FNMR@FMR


def _check_dists(name: str, t) -> Tensor:
    _check_tensor(name, t)
    if t.dtype == torch.bool or t.is_complex():
        raise TypeError(f"{name} must be a floating-point or integer tensor; got {t.dtype}")
    _check_real_dtype(name, t)
    if t.ndim != 1:
        raise ValueError(f"{name} must be 1-D; got shape {tuple(t.shape)}")
    return t


def _quantile_plan(n: int, fmr: List[float]) -> Tuple[List[int], List[int], List[float]]:
    """numpy ``quantile(method="linear")`` with a sequence ``q``: lower/upper order-statistic ranks and weights.

    ``virtual = (n - 1) * q`` in float64; ``lo = floor(virtual)``, ``hi = lo + 1``;
    at or past the last index both are ``n - 1`` (numpy's index -1, weight
    ``virtual + 1``); ``gamma = virtual - lo``.
    """
    lo_r, hi_r, gam = [], [], []
    for q in fmr:
        v = (n - 1) * q
        if v >= n - 1:
            lo, hi, g = n - 1, n - 1, v - (-1.0)
        else:
            lo = math.floor(v)
            hi, g = lo + 1, v - lo
        lo_r.append(lo)
        hi_r.append(hi)
        gam.append(g)
    return lo_r, hi_r, gam


def _lerp_numpy(v_lo: Tensor, v_hi: Tensor, gamma: List[float]) -> Tensor:
    """numpy ``_lerp``: difference in the input dtype, interpolation in float64."""
    g = torch.tensor(gamma, dtype=torch.float64, device=v_lo.device)
    diff = (v_hi - v_lo).to(torch.float64)
    below = v_lo.to(torch.float64) + diff * g
    above = v_hi.to(torch.float64) - diff * (1 - g)
    return torch.where(g >= 0.5, above, below)


def _count_at_least(pos: Tensor, thresholds: Tensor) -> Tensor:
    """``(pos >= t).sum()`` for each threshold (float64 comparison), chunk-wise; int64 ``[F]``."""
    counts = torch.zeros(thresholds.numel(), dtype=torch.int64, device=thresholds.device)
    step = _chunk_rows(thresholds.numel())
    for s in range(0, pos.numel(), step):
        chunk = pos[s : s + step].to(device=thresholds.device, dtype=torch.float64)
        counts += (chunk.unsqueeze(0) >= thresholds.unsqueeze(1)).sum(1)
    return counts


def _fmr_thresholds(neg: Tensor, fracs: List[float]) -> Tensor:
    """float64 ``np.quantile(neg, fracs)`` (linear), bit for bit, from a full sort."""
    lo, hi, gamma = _quantile_plan(neg.numel(), fracs)
    ranks = torch.tensor(lo + hi, dtype=torch.long, device=neg.device)
    # the order statistics; "+ 0" turns -0.0 into 0.0, as the streaming keys do
    stats = torch.sort(neg + 0).values[ranks]
    f = len(fracs)
    return _lerp_numpy(stats[:f], stats[f:], gamma)


def fnmr_at_fmr(pos_dist: Tensor, neg_dist: Tensor, fmr: Union[float, Sequence[float]]) -> Tensor:
    """False non-match rate at given false match rates (OML ``calc_fnmr_at_fmr``).

    Definition (OML ``oml/functional/metrics.py::calc_fnmr_at_fmr``, OML >= 2.0)::

        thresholds = np.quantile(neg_dist, fmr_vals)      # fmr_vals are fractions in [0, 1]
        fnmr = (pos_dist[None, :] >= thresholds[:, None]).sum(axis=1) / len(pos_dist)

    so each threshold is numpy's default ("linear") quantile of the negative-pair
    distances at ``q = fmr``, and FNMR is the fraction of positive-pair distances at
    or above it (``>=``). The threshold is reproduced bit for bit: ranks
    ``floor((n-1)q)`` and the next, their difference in the input dtype, the
    interpolation in float64 (numpy's ``_lerp``). Values are fractions, not percents
    (OML 1.x took percents and ``np.percentile``). OML returns float32; this returns
    float64 on the input's device, a 0-d tensor for a float ``fmr``, 1-D for a
    sequence. Empty inputs and NaN/inf distances raise ``ValueError``.

    Example:
        >>> pos = torch.tensor([0., 0, 1, 1, 2, 2, 5, 5, 9, 9])
        >>> neg = torch.tensor([3., 3, 4, 4, 6, 6, 7, 7, 8, 8])
        >>> fnmr_at_fmr(pos, neg, [0.1, 0.5])
        tensor([0.4000, 0.2000], dtype=torch.float64)
    """
    pos = _check_dists("pos_dist", pos_dist)
    neg = _check_dists("neg_dist", neg_dist)
    fracs, scalar = _check_fractions("fmr", fmr)
    if pos.device != neg.device:
        raise ValueError(f"pos_dist and neg_dist must be on the same device; got {pos.device} and {neg.device}")
    if pos.numel() == 0:
        raise ValueError("pos_dist is empty; FNMR needs at least one positive pair")
    if neg.numel() == 0:
        raise ValueError("neg_dist is empty; the FMR thresholds need at least one negative pair")
    _check_finite("pos_dist", pos)
    _check_finite("neg_dist", neg)
    thr = _fmr_thresholds(neg, fracs)
    out = _count_at_least(pos, thr).to(torch.float64) / pos.numel()
    return out[0] if scalar else out


def _order_keys(v: Tensor) -> Tensor:
    """int64 keys whose order is the values' order (floats: IEEE bits, negatives flipped)."""
    if not v.is_floating_point():
        return v.to(torch.int64)
    v = v + 0  # -0.0 -> +0.0, so equal values get one key
    width = v.element_size() * 8
    bits = v.view(_FLOAT_BITS_DTYPE[v.dtype]).to(torch.int64)  # sign-extended
    return torch.where(bits < 0, bits ^ ((1 << (width - 1)) - 1), bits)


def _keys_to_values(keys: Tensor, dtype: torch.dtype) -> Tensor:
    if not dtype.is_floating_point:
        return keys.to(dtype)
    width = torch.empty((), dtype=dtype).element_size() * 8
    bits = torch.where(keys < 0, keys ^ ((1 << (width - 1)) - 1), keys)
    return bits.to(_FLOAT_BITS_DTYPE[dtype]).view(dtype)


def _key_width(dtype: torch.dtype) -> int:
    size = torch.empty((), dtype=dtype).element_size() * 8
    return max(_DIGIT_BITS, -(-size // _DIGIT_BITS) * _DIGIT_BITS)


class _RankState:
    """Radix-select state of one wanted rank: ``key >> shift == prefix`` holds it, ``below`` keys are smaller."""

    __slots__ = ("rank", "shift", "prefix", "below", "count", "value")

    def __init__(self, rank: int, width: int) -> None:
        self.rank = rank
        self.shift = width  # bits still unknown
        self.prefix = 0
        self.below = 0
        self.count = -1  # keys in the bucket (unknown before the first pass)
        self.value: Optional[int] = None  # the key, once known


def fnmr_at_fmr_streaming(
    make_chunks: Callable[[], Iterable[Tuple[Tensor, Tensor]]],
    fmr: Union[float, Sequence[float]],
    *,
    collect_limit: int = 1 << 16,
) -> Tensor:
    """:func:`fnmr_at_fmr` over pair distances that arrive in chunks, exactly, in bounded memory.

    ``make_chunks()`` must return a fresh iterable of ``(pos_dist_chunk, neg_dist_chunk)``
    1-D tensors (either may be empty) and yield the same data on every call; it is
    called a few times. The quantile order statistics of the negatives are found by
    radix selection on order-preserving integer keys of the values (IEEE bits with
    negatives flipped; ``-0.0`` counts as ``0.0``), 16 bits per pass:

    1. pass 1 histograms the top 16 bits of every negative key (and counts everything);
       from the counts each wanted rank knows its bucket and how many keys lie below;
    2. each later pass histograms the next 16 bits inside each wanted rank's bucket,
       or, once a bucket holds ``<= collect_limit`` keys, collects them and selects
       the rank exactly by sorting;
    3. a last pass counts the positives at or above the thresholds.

    That is 2 passes for 16-bit distances, 3 for 32-bit ones and at most 5 for 64-bit
    ones (float64 data usually needs 4: its buckets are small after 32 bits),
    with memory O(chunk + 65536 x ranks + collect_limit x ranks). Ties need nothing
    special: a bucket of equal keys is resolved when its bits run out. The result is
    bitwise equal to :func:`fnmr_at_fmr` on the concatenated distances. All negative
    chunks must share one dtype.

    Example:
        >>> pos = torch.tensor([0., 0, 1, 1, 2, 2, 5, 5, 9, 9])
        >>> neg = torch.tensor([3., 3, 4, 4, 6, 6, 7, 7, 8, 8])
        >>> chunks = lambda: ((pos[i : i + 3], neg[i : i + 3]) for i in range(0, 10, 3))
        >>> fnmr_at_fmr_streaming(chunks, [0.1, 0.5])
        tensor([0.4000, 0.2000], dtype=torch.float64)
    """
    if not callable(make_chunks):
        raise TypeError(f"make_chunks must be a callable returning an iterable of (pos, neg) pairs; got {type(make_chunks).__name__}")
    fracs, scalar = _check_fractions("fmr", fmr)
    collect_limit = _check_int("collect_limit", collect_limit, minimum=0)

    def passes():
        number = 0
        while True:
            number += 1
            chunks = make_chunks()
            if isinstance(chunks, Tensor) or not hasattr(chunks, "__iter__"):
                raise TypeError(f"make_chunks() must return an iterable of (pos, neg) pairs; got {type(chunks).__name__}")
            yield number, chunks

    def pairs(chunks, number):
        for item in chunks:
            if not (isinstance(item, (tuple, list)) and len(item) == 2):
                raise TypeError(
                    f"make_chunks() must yield (pos_dist_chunk, neg_dist_chunk) pairs; got {type(item).__name__} on pass {number}"
                )
            yield _check_dists("pos_dist chunk", item[0]), _check_dists("neg_dist chunk", item[1])

    pass_iter = passes()

    # ---- pass 1: totals, checks, top-digit histogram
    number, chunks = next(pass_iter)
    dtype: Optional[torch.dtype] = None
    device: Optional[torch.device] = None
    hist: Optional[Tensor] = None
    n_neg = n_pos = 0
    bad = None
    width = 0
    for pos_c, neg_c in pairs(chunks, number):
        for name, c in (("pos_dist", pos_c), ("neg_dist", neg_c)):
            if device is None and c.numel() > 0:
                device = c.device
            if c.numel() > 0 and c.device != device:
                raise ValueError(f"all chunks must be on one device; got {device} and {c.device} ({name})")
            if c.is_floating_point() and c.numel() > 0:
                chunk_bad = ~torch.isfinite(c).all()
                bad = chunk_bad if bad is None else bad | chunk_bad.to(bad.device)
        n_pos += pos_c.numel()
        if neg_c.numel() == 0:
            continue
        if dtype is None:
            dtype = neg_c.dtype
            width = _key_width(dtype)
            hist = torch.zeros(_DIGIT_SIZE, dtype=torch.int64, device=device)
        elif neg_c.dtype != dtype:
            raise TypeError(f"all neg_dist chunks must share one dtype; got {dtype} and {neg_c.dtype}")
        n_neg += neg_c.numel()
        keys = _order_keys(neg_c)
        digit = (keys >> (width - _DIGIT_BITS)) + (_DIGIT_SIZE // 2)
        hist += torch.bincount(digit, minlength=_DIGIT_SIZE)
    if bad is not None and bool(bad):
        raise ValueError("pos_dist and neg_dist must not contain NaN or infinite values")
    if n_pos == 0:
        raise ValueError("pos_dist is empty; FNMR needs at least one positive pair")
    if n_neg == 0 or hist is None or dtype is None:
        raise ValueError("neg_dist is empty; the FMR thresholds need at least one negative pair")

    lo, hi, gamma = _quantile_plan(n_neg, fracs)
    states = {r: _RankState(r, width) for r in sorted(set(lo + hi))}

    def descend(group: List[_RankState], h: Tensor) -> None:
        """Pick each rank's digit from its bucket histogram ``h [65536]``."""
        cum = torch.cumsum(h, 0)
        targets = torch.tensor([s.rank - s.below for s in group], dtype=torch.int64, device=device)
        d = torch.searchsorted(cum, targets, right=True)
        before = torch.where(d > 0, cum[(d - 1).clamp_min(0)], torch.zeros_like(d))
        cnt = h[d]
        for s, di, bi, ci in zip(group, d.tolist(), before.tolist(), cnt.tolist()):
            s.shift -= _DIGIT_BITS
            s.prefix = (di - _DIGIT_SIZE // 2) if s.shift == width - _DIGIT_BITS else (s.prefix << _DIGIT_BITS) | di
            s.below += bi
            s.count = ci
            if s.shift == 0:
                s.value = s.prefix

    descend(list(states.values()), hist)
    del hist

    def expect_same(number: int, seen_neg: int, seen_pos: int) -> None:
        if seen_neg != n_neg or seen_pos != n_pos:
            raise ValueError(
                "make_chunks() must yield the same data on every call; pass 1 saw "
                f"{n_pos} positive and {n_neg} negative distances, pass {number} saw {seen_pos} and {seen_neg}"
            )

    # ---- refinement passes
    while any(s.value is None for s in states.values()):
        number, chunks = next(pass_iter)
        open_ = [s for s in states.values() if s.value is None]
        # group ranks sharing a bucket (same shift for all open ranks: one digit per pass)
        buckets: dict = {}
        for s in open_:
            buckets.setdefault((s.shift, s.prefix), []).append(s)
        keys_list = list(buckets)
        collect = [kp for kp in keys_list if buckets[kp][0].count <= collect_limit]
        radix = [kp for kp in keys_list if buckets[kp][0].count > collect_limit]
        r_shift = torch.tensor([kp[0] for kp in radix], dtype=torch.int64, device=device)
        r_pref = torch.tensor([kp[1] for kp in radix], dtype=torch.int64, device=device)
        c_shift = torch.tensor([kp[0] for kp in collect], dtype=torch.int64, device=device)
        c_pref = torch.tensor([kp[1] for kp in collect], dtype=torch.int64, device=device)
        hists = torch.zeros(len(radix) * _DIGIT_SIZE, dtype=torch.int64, device=device)
        gathered: List[List[Tensor]] = [[] for _ in collect]
        seen_neg = seen_pos = 0
        for pos_c, neg_c in pairs(chunks, number):
            seen_pos += pos_c.numel()
            seen_neg += neg_c.numel()
            if neg_c.numel() == 0:
                continue
            if neg_c.dtype != dtype:
                raise TypeError(f"all neg_dist chunks must share one dtype; got {dtype} and {neg_c.dtype}")
            keys = _order_keys(neg_c.to(device))
            if radix:
                match = (keys.unsqueeze(0) >> r_shift.unsqueeze(1)) == r_pref.unsqueeze(1)  # [G, c]
                g, j = torch.nonzero(match, as_tuple=True)
                kj = keys[j]
                digit = (kj >> (r_shift[g] - _DIGIT_BITS)) & (_DIGIT_SIZE - 1)
                hists += torch.bincount(g * _DIGIT_SIZE + digit, minlength=hists.numel())
            if collect:
                match = (keys.unsqueeze(0) >> c_shift.unsqueeze(1)) == c_pref.unsqueeze(1)
                for gi in range(len(collect)):
                    gathered[gi].append(keys[match[gi]])
        expect_same(number, seen_neg, seen_pos)
        for gi, kp in enumerate(radix):
            descend(buckets[kp], hists[gi * _DIGIT_SIZE : (gi + 1) * _DIGIT_SIZE])
        for gi, kp in enumerate(collect):
            found = torch.sort(torch.cat(gathered[gi])).values if gathered[gi] else torch.empty(0, dtype=torch.int64)
            group = buckets[kp]
            if found.numel() != group[0].count:
                raise ValueError(
                    f"make_chunks() must yield the same data on every call; pass {number} found "
                    f"{found.numel()} values in a bucket that held {group[0].count}"
                )
            idx = torch.tensor([s.rank - s.below for s in group], dtype=torch.int64, device=found.device)
            for s, v in zip(group, found[idx].tolist()):
                s.value = v

    key_tensor = lambda ranks: torch.tensor([states[r].value for r in ranks], dtype=torch.int64, device=device)
    v_lo = _keys_to_values(key_tensor(lo), dtype)
    v_hi = _keys_to_values(key_tensor(hi), dtype)
    thr = _lerp_numpy(v_lo, v_hi, gamma)

    # ---- last pass: positives at or above each threshold
    number, chunks = next(pass_iter)
    counts = torch.zeros(len(fracs), dtype=torch.int64, device=device)
    seen_neg = seen_pos = 0
    for pos_c, neg_c in pairs(chunks, number):
        seen_pos += pos_c.numel()
        seen_neg += neg_c.numel()
        if pos_c.numel():
            counts += _count_at_least(pos_c, thr)
    expect_same(number, seen_neg, seen_pos)
    out = counts.to(torch.float64) / n_pos
    return out[0] if scalar else out
