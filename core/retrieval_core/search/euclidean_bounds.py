"""The float64 exact squared distances of the Euclidean order, and the error bounds of its float32 scores."""
from __future__ import annotations

from typing import Optional

import torch
from torch import Tensor

__all__: "list[str]" = []  # used by search.euclidean only


def _exact_sq_distances(q: Tensor, g: Tensor, rows: Tensor, cols: Tensor, exponent: Optional[Tensor] = None) -> Tensor:
    """``|q[rows] - g[cols]|^2 * 2**(-2 exponent)`` in float64: the differences of the
    embeddings in float64, scaled by ``2**-exponent`` (exact: no square overflows or
    underflows), squared and summed in a fixed pairwise order (the same value for a
    pair in any chunk, on any device; equal for identical embeddings)."""
    out = torch.empty(rows.shape[0], dtype=torch.float64, device=q.device)
    dim = q.shape[1]
    width = 1 << max(0, (dim - 1).bit_length())
    # rows at a time: on the CPU few enough that the temporaries stay in cache (2,048 rows of
    # 128: 4x faster than 32,768), on a GPU many, for few launches; the values are the same
    step = max(1, (1 << (18 if q.device.type == "cpu" else 22)) // width)
    one = torch.ones((), dtype=torch.float64, device=q.device)
    # float64 embeddings are scaled before squaring (their squares could overflow); the
    # squares of narrower ones cannot, so their sums are scaled after: the same values, as
    # a power of two commutes with every rounding here
    wide = q.dtype == torch.float64 or g.dtype == torch.float64
    before = None if exponent is None or not wide else torch.ldexp(one, -exponent)
    after = None if exponent is None or wide else torch.ldexp(one, -2 * exponent)
    for start in range(0, rows.shape[0], step):
        part = slice(start, start + step)
        # index_select and in-place steps (the same roundings): 0.4x the time of indexing
        # and fresh tensors (500,000 pairs of 128)
        diff = torch.index_select(q, 0, rows[part]).to(torch.float64)
        diff -= torch.index_select(g, 0, cols[part])  # a narrower g widens exactly first
        if before is not None:
            diff.mul_(before)
        sq = diff.mul_(diff)
        if width > dim:  # zeros up to a power of two, for the pairwise sum
            sq = torch.nn.functional.pad(sq, (0, width - dim))
        while sq.shape[1] > 1:
            half = sq.shape[1] // 2
            sq = sq[:, :half].add_(sq[:, half:])
        if after is None:
            out[part] = sq[:, 0]
        else:
            torch.mul(sq[:, 0], after, out=out[part])
    return out


def _error_terms(dim: int, u_products: float, u_final: float, u_prepared: float,
                 fused: bool = False) -> "tuple[float, ...]":
    """``(k1, kg, k2, c)``: a score ``2 q.g - |g|^2`` of prepared ``q``, ``g`` (norms at most
    ``|q|``, ``|g|``) is within ``2 k1 |q| |g| + kg |g|^2 + k2 (|q| + |g|)^2 + c`` of ``|q|^2
    - D`` (``D``: :func:`_exact_sq_distances` of the embeddings). ``u_*``: unit roundoffs
    of the products, of the score's last roundings, of the prepared dtype. ``fused``: the
    score may also come from one product (below; ``search.frames.similarity``).

    Proof. With ``gamma = dim u_products / (1 - dim u_products)``, ``|g|^2`` (a sum of
    ``dim`` rounded squares) errs by at most ``gamma |g|^2``. Apart: ``q.g`` (any order,
    fused or not) errs by at most ``gamma |q| |g|`` (Cauchy-Schwarz on the sum of ``|q_i
    g_i|``), then ``u_final |q.g|`` if rounded narrower, and the subtraction by ``u_final``
    of its result: in all at most ``k1 (2 |q| |g| + |g|^2)``. (``2 q.g`` as the product of
    ``2 q``, exact, and ``g``: every product and partial sum is twice that of ``q.g``, and
    so is each rounding, barring underflow: in ``c``.) In one product (``fused``: ``-|g|^2``
    the accumulator's start, added before, between or after the products, in any order):
    a sum of ``dim + 1`` terms with at most ``dim + 1`` roundings on any path, within
    ``gamma' (2 |q| |g| + (1 + gamma) |g|^2)``, ``gamma' = (dim + 1) u_products / (1 - (dim +
    1) u_products)``; with that of ``|g|^2``: ``kg``; ``k1``, ``kg``: the larger of the two
    ways' coefficients. Each prepared entry is the exact moved and scaled value up to one
    float64 rounding and one to its dtype: ``|(q - g) - (a - b)| <= eta (|q| + |g|)``, so
    ``| |q - g|^2 - |a - b|^2 | <= (2 eta + eta^2)(|q| + |g|)^2``; ``D`` (differences,
    squares, a sum of ``dim`` terms) errs by at most ``gamma64(dim + 3) |a - b|^2``: ``k2``.
    ``c``: underflow and flushed subnormals (at most the smallest normal float32 per
    product, square and entry, with room). Infinities when the roundoff is too coarse."""
    u64 = 2.0**-53
    if (dim + 1) * u_products >= 1 or (dim + 3) * u64 >= 1:
        return float("inf"), float("inf"), float("inf"), float("inf")
    gamma = dim * u_products / (1 - dim * u_products)
    gamma1 = (dim + 1) * u_products / (1 - (dim + 1) * u_products)
    k1 = kg = (gamma + 2 * u_final) * (1 + gamma) * (1 + u_final)
    if fused:
        k1, kg = max(k1, gamma1 * (1 + u_final)), max(kg, (gamma1 * (1 + gamma) + gamma) * (1 + u_final))
    eta = 1.001 * (u_prepared + u64)
    k2 = 2.001 * eta + 1.001 * (dim + 3) * u64 / (1 - (dim + 3) * u64)
    return k1, kg, k2, 16.0 * (dim + 1) * torch.finfo(torch.float32).tiny


def _norm_bound(x: Tensor) -> Tensor:
    """``[n]`` float64 bounds of the rows' norms, and of the rows prepared in float64 (each
    entry within 2**-24 relative or a smallest normal float32): the float64 norm (``dim +
    2`` roundings of 2**-53) grown by 2**-20, plus ``dim`` smallest normals; in blocks."""
    if x.shape[0] == 0:
        return x.new_zeros(0, dtype=torch.float64)
    step = max(1, (1 << 20) // max(x.shape[1], 1))
    sq = torch.cat([x[i:i + step].to(torch.float64).square().sum(1) for i in range(0, x.shape[0], step)])
    return sq.sqrt_().mul_(1.0 + 2.0**-20).add_(x.shape[1] * torch.finfo(torch.float32).tiny)
