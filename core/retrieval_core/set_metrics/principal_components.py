"""Principal components fraction (PCF) of a set of embeddings: how many principal
axes explain a given fraction of the variance, over the dimension (OML's ``pcf``).
"""
from __future__ import annotations

from typing import Sequence, Union

import torch
from torch import Tensor

from ._common import _check_finite, _check_fractions, _check_real_dtype, _check_tensor, _chunk_rows

__all__ = ["pcf"]


def _centred_gram(embeddings: Tensor) -> Tensor:
    """float64 ``Xc.T @ Xc`` (``[D, D]``, summed over row chunks) or, when ``N < D``,
    ``Xc @ Xc.T`` (``[N, N]``), of the embeddings ``Xc`` centred by their mean: both
    have the same non-zero eigenvalues, ``(N - 1)`` times the principal variances."""
    f64 = torch.float64
    n, dim = embeddings.shape
    mean = embeddings.sum(0, dtype=f64) / n
    if n < dim:
        xc = embeddings.to(f64) - mean
        return xc @ xc.T
    gram = torch.zeros(dim, dim, dtype=f64, device=embeddings.device)
    step = _chunk_rows(dim)
    for s in range(0, n, step):
        xc = embeddings[s : s + step].to(f64) - mean
        gram.addmm_(xc.T, xc)
    return gram


def pcf(embeddings: Tensor, fraction: Union[float, Sequence[float]]) -> Tensor:
    """Principal components fraction: the share of the ``D`` principal axes needed to explain a variance fraction.

    With the ``[N, D]`` embeddings centred by their mean, let ``λ_1 >= ... >= λ_m``
    (``m = min(N, D)``) be the variances along the principal axes and
    ``c_k = (λ_1 + ... + λ_k) / (λ_1 + ... + λ_m)`` the cumulative explained variance
    ratio. For each fraction ``r``::

        n(r) = 1 + #{k in 1..m : c_k <= r}
        pcf(r) = n(r) / D

    i.e. the largest ``n`` with ``c_{n-1} <= r``. This is OML's definition (its
    ``calc_pcf``), edge cases included: ``r = 1`` counts one axis past the last
    (``(m + 1) / D``, which exceeds 1 when ``N > D``), ``r = 0`` gives ``1 / D``, and a
    rank-deficient set counts its zero-variance axes once their cumulative ratio is
    reached. Computed in float64 from the eigenvalues of the centred Gram matrix
    (``D x D``, accumulated in row chunks, or ``N x N`` when ``N < D``), normalised so
    that ``c_m`` is exactly 1 (OML's float32 cumulative sum can land on either side of
    1, so its ``r = 1`` value wobbles between ``m/D`` and ``(m+1)/D``). A set with zero
    total variance gives NaN. A float ``fraction`` gives a 0-d result, a sequence a
    1-D one (float64).

    Example:
        >>> pcf(torch.eye(4, 10), [0.5, 1.0])
        tensor([0.2000, 0.5000], dtype=torch.float64)
    """
    _check_tensor("embeddings", embeddings)
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
    f64 = torch.float64
    eig = torch.linalg.eigvalsh(_centred_gram(embeddings)).flip(0).clamp_min(0.0)  # m = min(N, D) values, descending
    cs = torch.cumsum(eig, 0)
    ratio = cs / cs[-1]
    r = torch.tensor(fracs, dtype=f64, device=embeddings.device)
    count = torch.searchsorted(ratio, r, right=True) + 1
    out = count.to(f64) / dim
    out = torch.where(cs[-1] > 0, out, torch.full_like(out, float("nan")))
    return out[0] if scalar else out
