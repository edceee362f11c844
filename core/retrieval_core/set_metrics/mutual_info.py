"""Normalized and adjusted mutual information of two labelings, equal to
scikit-learn's ``normalized_mutual_info_score`` and ``adjusted_mutual_info_score``
(``average_method="arithmetic"``), in torch on the labels' device.
"""
from __future__ import annotations

import math
from typing import Tuple

import torch
from torch import Tensor

from ._common import _check_tensor

__all__ = ["mutual_info_scores", "nmi", "ami"]

_EPS64 = 2.220446049250313e-16  # numpy.finfo(float64).eps, as sklearn uses it
_EMI_BLOCK = 1 << 16  # summands per block of the expected-MI sum (cache-sized)


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
