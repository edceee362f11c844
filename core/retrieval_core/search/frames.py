"""Similarities of prepared embeddings (closer = larger), the power-of-two frames that keep
them exact, and distances.
"""
from __future__ import annotations

from typing import Callable, Optional, Union

import torch
from torch import Tensor

__all__ = [
    "DISTANCES", "Distance", "Relevance", "prepare", "pow2_factor", "dot_scale", "dot_factors", "dot_apply", "Frame",
    "similarity", "MIN_ROWS", "distances", "DISTANCE_ERROR", "FUSED_MAX_DEPTH",
]

DISTANCES = ("cosine", "dot", "euclidean", "squared_euclidean", "hamming")
Distance = Union[str, Callable[[Tensor, Tensor], Tensor]]
Relevance = Callable[[Tensor, Tensor], Tensor]


def prepare(x: Tensor, distance: Distance) -> Tensor:
    """Embeddings in the form the similarity of ``distance`` multiplies.

    cosine: rows scaled to unit norm (each first scaled by a power of two, which is
    exact, so that tiny or huge rows neither underflow nor overflow); hamming: binary
    codes as +-1 floats; others: float32 (or float64 when given). Dot products are
    scaled by :func:`dot_scale`, euclidean embeddings moved by a :class:`Frame`.

    Example:
        >>> prepare(torch.tensor([[0, 1, 1]]), "hamming").tolist()
        [[-1.0, 1.0, 1.0]]
    """
    if callable(distance):
        return x
    dtype = torch.float64 if x.dtype == torch.float64 else torch.float32
    x = x.to(dtype)
    if distance == "cosine":
        x = x * pow2_factor(torch.linalg.vector_norm(x, float("inf"), dim=1, keepdim=True), dtype)
        return x.div_(torch.linalg.vector_norm(x, dim=1, keepdim=True).clamp_min(1e-12))  # F.normalize, in place
    if distance == "hamming":
        return torch.where(x > 0, 1.0, -1.0).to(x.dtype)
    return x


def pow2_factor(m: Tensor, dtype: torch.dtype = torch.float64) -> Tensor:
    """``2**-e`` in ``dtype`` where ``m = f * 2**e``, ``0.5 <= f < 1`` (1 where ``m`` is 0):
    multiplying by it is exact and brings ``m`` into [0.5, 1) (float32: ``e`` clamped to
    [-126, 127], ``m`` below float32's normal range lands below 0.5).

    Example:
        >>> m = torch.tensor([3.0e38, 0.0, 1e-30], dtype=torch.float64)
        >>> (pow2_factor(m) * m).tolist()
        [0.8816207631167157, 0.0, 0.6338253001141148]
    """
    e = _exponent(m)
    if dtype == torch.float32:
        e = e.clamp(-126, 127)
    return torch.ldexp(torch.ones_like(m, dtype=torch.float64), -e).to(dtype)


def _exponent(m: Tensor) -> Tensor:
    """int64 ``e`` with ``m = f * 2**e``, ``0.5 <= f < 1`` (0 where ``m`` is 0), clamped
    so that ``2**-e`` is a normal float64."""
    return torch.frexp(m.to(torch.float64)).exponent.to(torch.int64).clamp(-1000, 1000)


def dot_scale(x: Tensor, largest: Optional[Tensor] = None) -> "tuple[Tensor, Tensor]":
    """Prepared dot-product embeddings scaled by powers of two (exact) so that their
    products neither overflow nor underflow: ``(scaled, factors)``. Queries
    (``largest=None``) are scaled row by row (each query's order is unchanged); a
    gallery as a whole, by its largest entry ``largest`` (a 0-d tensor). The dot product
    is the scaled one divided by both factors. (:func:`dot_factors` then :func:`dot_apply`.)"""
    f = dot_factors(x, largest)
    return dot_apply(x, f), f


def dot_factors(x: Tensor, largest: Optional[Tensor] = None) -> Tensor:
    """The factors of :func:`dot_scale`: ``[N, 1]`` float64, one per row from the row's largest
    ``|entry|`` (``largest=None``; found in one pass, without an ``|x|`` copy), or ``[1, 1]`` from
    ``largest``. Row by row: the factors of a chunk of rows are those rows' factors in the whole.

    Example:
        >>> dot_factors(torch.tensor([[3.0, -6.0], [0.0, 0.0], [0.25, 0.0]])).flatten().tolist()
        [0.125, 1.0, 2.0]
    """
    if largest is not None:
        return pow2_factor(largest).reshape(1, 1)
    if not x.shape[0]:
        return x.new_ones(0, 1, dtype=torch.float64)
    low, high = torch.aminmax(x, dim=1, keepdim=True)
    return pow2_factor(torch.maximum(high, -low))  # max |x| of the row: exact, as x.abs().amax(1)


def dot_apply(x: Tensor, factors: Tensor) -> Tensor:
    """``x`` scaled by :func:`dot_factors` (in float64, exact, then back to ``x``'s dtype): entry
    by entry, so a chunk of rows scaled with its own factors equals those rows of the whole."""
    return (x.to(torch.float64) * factors).to(x.dtype)


class Frame:
    """Euclidean embeddings moved and scaled for the similarity products.

    ``apply(x) = (x * 2**-e1 - centre) * 2**-e2``: ``2**-e1`` brings the largest entry of
    queries and gallery into [0.5, 1), ``centre`` is the gallery's mean, ``2**-e2`` brings
    the largest entry left into [0.5, 1). A shift leaves distances unchanged and a power
    of two scales them exactly, so the products ``2 q.g - |g|^2`` lose nothing to an
    offset (norms large next to the distances) and never overflow or underflow; only
    the subtraction rounds (in float64, then to the product's dtype), which the bounds
    of :class:`EuclideanOrder` include. Exact distances are taken of the embeddings
    themselves, scaled by ``2**-(e1 + e2)`` (:attr:`exponent`): in the units of the products.

    ``reduce_max``/``reduce_sum``: how a 0-d maximum and a sum combine over processes
    (a gallery sharded across ranks); identity in one process.

    Example:
        >>> x = torch.tensor([[1e4], [1e4 + 4], [1e4 - 4]])
        >>> Frame.of(x, x).apply(x).flatten().tolist()
        [0.0, 0.5, -0.5]
    """

    def __init__(self, e1: Tensor, centre: Tensor, e2: Tensor):
        self.e1, self.centre, self.e2 = e1, centre, e2
        self.exponent = e1 + e2

    @classmethod
    def of(cls, query: Tensor, gallery: Tensor, reduce_max=None, reduce_sum=None) -> "Frame":
        reduce_max = reduce_max or (lambda t: t)
        reduce_sum = reduce_sum or (lambda t: t)
        # each column's range, exact in the embeddings' own dtype (one pass, no copy); the
        # largest |x - c| over rows is then max(high - c, c - low) per column, the same
        # rounded value as the entry-wise difference (subtraction rounds monotonically)
        parts = [x for x in ((query,) if query is gallery else (query, gallery)) if x.shape[0] and x.shape[1]]
        dim = query.shape[1]
        if parts:
            ranges = [torch.aminmax(x, dim=0) for x in parts]
            low = torch.stack([r.min.to(torch.float64) for r in ranges]).amin(0)
            high = torch.stack([r.max.to(torch.float64) for r in ranges]).amax(0)
        else:
            low = high = torch.zeros(dim, dtype=torch.float64, device=query.device)
        e1 = _exponent(reduce_max(torch.maximum(low.abs(), high.abs()).amax() if dim else low.new_zeros(())))
        scale = torch.ldexp(torch.ones((), dtype=torch.float64, device=low.device), -e1)
        if gallery.dtype == torch.float64:  # scaled first: a float64 sum of huge entries could overflow
            total = (gallery * scale).sum(0)
        else:  # float32 or narrower: the float64 sum cannot overflow, and scaling after it is exact
            total = gallery.sum(0, dtype=torch.float64) * scale
        sums = reduce_sum(torch.cat([total, gallery.new_full((1,), gallery.shape[0], dtype=torch.float64)]))
        mean = sums[:-1] / sums[-1].clamp(min=1)
        low, high = low * scale, high * scale

        def spread(centre: Tensor) -> Tensor:
            if not parts or not dim:
                return reduce_max(low.new_zeros(()))
            return reduce_max(torch.maximum(high - centre, centre - low).amax())

        # the centre on a grid 16 times finer than the spread: it still removes the offset,
        # and x - centre is then exact (x's own last bit is finer than the grid), so equal
        # distances (integer or quantised embeddings) stay equal
        grid = torch.ldexp(torch.ones((), dtype=torch.float64, device=mean.device), _exponent(spread(mean)) - 5)
        centre = torch.round(mean / grid) * grid
        return cls(e1, centre, _exponent(spread(centre)))

    def apply(self, x: Tensor, dtype: Optional[torch.dtype] = None) -> Tensor:
        """``x`` moved and scaled, in ``dtype`` (default: float64 for float64 ``x``, else float32)."""
        if dtype is None:
            dtype = torch.float64 if x.dtype == torch.float64 else torch.float32
        one = torch.ones((), dtype=torch.float64, device=x.device)
        out = x.to(torch.float64, copy=True).mul_(torch.ldexp(one, -self.e1)).sub_(self.centre)
        return out.mul_(torch.ldexp(one, -self.e2)).to(dtype)


def similarity(
    q: Tensor,
    g: Tensor,
    distance: Distance,
    g_sq_norm: Optional[Tensor] = None,
    out: Optional[Tensor] = None,
    checks: Optional["Checks"] = None,
    fused: bool = False,
) -> Tensor:
    """``[c, G]`` similarity of prepared queries and gallery (larger = closer).

    ``out``: a ``[c', G]`` buffer (``c' >= c``) that the product may be written to
    (named distances, float32): a chunk loop reuses it instead of allocating a fresh
    block per chunk (blocks past glibc's mmap threshold page-fault on every use).
    The values are those of a fresh product. ``checks``: a :class:`Checks` that keeps
    the test of a callable's distances for one host read after the chunk loop
    (None: tested here, a host read per chunk). ``fused``: euclidean float32 scores into
    ``out`` from one product, ``-|g|^2`` its accumulator (no pass over the block for it;
    rounded in another order: for an :class:`EuclideanOrder` made with ``fused=True``).

    euclidean and squared_euclidean rank by ``2 q.g - |g|^2``, which orders the
    gallery as ``-|q - g|^2`` does for each query (``|q|^2`` is constant per row)
    up to float32 rounding, which :class:`EuclideanOrder` bounds and repairs;
    hamming gives ``D - 2 * hamming`` (integers, exact in float32).
    """
    if callable(distance):
        d = distance(q, g)
        if not isinstance(d, Tensor) or d.shape != (q.shape[0], g.shape[0]):
            got = tuple(d.shape) if isinstance(d, Tensor) else type(d).__name__
            raise ValueError(f"a distance callable must return [queries, gallery] = {(q.shape[0], g.shape[0])}; got {got}")
        if d.is_floating_point():
            finite = torch.isfinite(d).all()
            if checks is not None:
                checks.distances.append(finite)
            elif not bool(finite):
                raise ValueError(DISTANCE_ERROR)
        # integer distances become float64 (exact below 2**53) so exclusion can write -inf
        return -(d if d.is_floating_point() else d.to(torch.float64))
    if distance not in ("euclidean", "squared_euclidean"):
        return _matmul(q, g, out)
    g_sq = g_sq_norm if g_sq_norm is not None else (g * g).sum(1)
    # 2 q.g as the product of 2 q (exact) and g: each product and partial sum is twice
    # that of q.g, so the same roundings (a power of two commutes with them, barring
    # underflow of a product, which the bound's constant term covers): no pass for x2
    q2 = q * 2.0
    if fused and out is not None and all(t.dtype == torch.float32 for t in (q, g, g_sq, out)):
        # -|g|^2 as the product's accumulator: no pass for it either; BLAS adds it before,
        # between or after the products (a wider bound: EuclideanOrder(fused=True))
        n = q.shape[0]
        if n < MIN_ROWS:
            q2 = torch.cat([q2, q2.new_zeros(MIN_ROWS - n, q2.shape[1])])
        return torch.addmm(g_sq.neg(), q2, g.T, out=out[: q2.shape[0]])[:n]
    s = _matmul(q2, g, out)
    if out is not None and s.dtype == torch.float32 and g_sq.dtype == torch.float32:
        return s.sub_(g_sq)  # the same rounding, in place
    return s - g_sq


# Depth up to which euclidean rankings take fused products (similarity(fused=True)): the
# wider window costs more re-scoring than the pass it saves past it (CPU, 1 thread,
# 20,000 x 128 clustered, per 1,200 queries: saves ~3 ms; costs 0.1 ms at depth 10,
# 0.5 at 100, 1.7 at 237, 8.5 at 1,000)
FUSED_MAX_DEPTH = 256

# Rows of one similarity product. BLAS gives a row the same values in any product
# of at least this many rows (matrix-vector kernels round differently), so chunks
# are padded to it: values do not depend on the chunk size.
MIN_ROWS = 16


def _matmul(q: Tensor, g: Tensor, out: Optional[Tensor] = None, keep_float64: bool = False) -> Tensor:
    """``q @ g.T`` whose values do not depend on the chunk: at least MIN_ROWS rows, and
    float64 products rounded to float32 (float64 BLAS gives identical columns values
    that differ in the last bit, which would break ties that are exact). ``out``: a
    float32 buffer of at least ``max(rows, MIN_ROWS)`` rows to write into. ``keep_float64``:
    float64 products stay float64 (callers that repair near-equal values exactly)."""
    n = q.shape[0]
    if n < MIN_ROWS:
        q = torch.cat([q, q.new_zeros(MIN_ROWS - n, q.shape[1])])
    if out is not None and q.dtype == torch.float32 and g.dtype == torch.float32 and out.dtype == torch.float32:
        return torch.mm(q, g.T, out=out[: q.shape[0]])[:n]
    s = q @ g.T
    if s.dtype == torch.float64 and not keep_float64:
        s = s.to(torch.float32)
    return s[:n]


def _matmul_roundoff(dtype: torch.dtype) -> float:
    """Unit roundoff of the products of :func:`_matmul` (float32 matmul precision as set
    by ``torch.set_float32_matmul_precision``: TF32 or bfloat16 round coarser)."""
    if dtype == torch.float64:
        return 2.0**-53
    return {"highest": 2.0**-24, "high": 2.0**-11, "medium": 2.0**-8}.get(torch.get_float32_matmul_precision(), 2.0**-8)


def distances(q: Tensor, g: Tensor, distance: Distance) -> Tensor:
    """``[c, G]`` distances of prepared embeddings, in the named distance's own units
    (cosine: 1 - cos, dot: -dot, euclidean: L2, hamming: differing bits)."""
    if callable(distance):
        return distance(q, g)
    if distance in ("euclidean", "squared_euclidean"):
        d2 = ((q * q).sum(1, keepdim=True) - 2.0 * (q @ g.T) + (g * g).sum(1)).clamp(min=0)
        return d2.sqrt() if distance == "euclidean" else d2
    s = q @ g.T
    if distance == "cosine":
        return 1.0 - s
    if distance == "hamming":
        return (q.shape[1] - s) / 2.0
    return -s


DISTANCE_ERROR = "a distance callable returned NaN or inf; distances must be finite"
