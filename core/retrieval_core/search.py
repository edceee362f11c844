"""Exact k-NN building blocks for embedding mode: similarities, gains, exclusion.

Every function works on one query chunk against the whole gallery (``[c, G]``),
so the evaluator never holds a ``[Q, G]`` matrix. Distances become similarities
(closer = larger); ties are left to the stable Ranking builder.
"""
from __future__ import annotations

from typing import Callable, Iterator, Optional, Tuple, Union

import torch
from torch import Tensor

from . import optional
from .ranking.ranking import GAIN_LIMIT
from .ranking.topk import _stable_top, _stable_top_deferred

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
    is the scaled one divided by both factors."""
    if largest is None:
        f = pow2_factor(x.abs().amax(1, keepdim=True)) if x.shape[0] else x.new_ones(0, 1, dtype=torch.float64)
    else:
        f = pow2_factor(largest).reshape(1, 1)
    return (x.to(torch.float64) * f).to(x.dtype), f


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

        def largest(*xs):
            return reduce_max(torch.stack([x.abs().amax() if x.numel() else x.new_zeros(()) for x in xs]).amax()
                              .to(torch.float64))

        e1 = _exponent(largest(query, gallery))
        sums = torch.cat([torch.ldexp(gallery.to(torch.float64), -e1).sum(0),
                          gallery.new_full((1,), gallery.shape[0], dtype=torch.float64)])
        sums = reduce_sum(sums)
        mean = sums[:-1] / sums[-1].clamp(min=1)
        spread = largest(torch.ldexp(query.to(torch.float64), -e1) - mean,
                         torch.ldexp(gallery.to(torch.float64), -e1) - mean)
        # the centre on a grid 16 times finer than the spread: it still removes the offset,
        # and x - centre is then exact (x's own last bit is finer than the grid), so equal
        # distances (integer or quantised embeddings) stay equal
        grid = torch.ldexp(torch.ones((), dtype=torch.float64, device=mean.device), _exponent(spread) - 5)
        centre = torch.round(mean / grid) * grid
        spread = largest(torch.ldexp(query.to(torch.float64), -e1) - centre,
                         torch.ldexp(gallery.to(torch.float64), -e1) - centre)
        return cls(e1, centre, _exponent(spread))

    def apply(self, x: Tensor, dtype: Optional[torch.dtype] = None) -> Tensor:
        """``x`` moved and scaled, in ``dtype`` (default: float64 for float64 ``x``, else float32)."""
        if dtype is None:
            dtype = torch.float64 if x.dtype == torch.float64 else torch.float32
        return torch.ldexp(torch.ldexp(x.to(torch.float64), -self.e1) - self.centre, -self.e2).to(dtype)


def similarity(
    q: Tensor,
    g: Tensor,
    distance: Distance,
    g_sq_norm: Optional[Tensor] = None,
    out: Optional[Tensor] = None,
    checks: Optional["Checks"] = None,
) -> Tensor:
    """``[c, G]`` similarity of prepared queries and gallery (larger = closer).

    ``out``: a ``[c', G]`` buffer (``c' >= c``) that the product may be written to
    (named distances, float32): a chunk loop reuses it instead of allocating a fresh
    block per chunk (blocks past glibc's mmap threshold page-fault on every use).
    The values are those of a fresh product. ``checks``: a :class:`Checks` that keeps
    the test of a callable's distances for one host read after the chunk loop
    (None: tested here, a host read per chunk).

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
    s = _matmul(q, g, out)
    if distance in ("euclidean", "squared_euclidean"):
        g_sq = g_sq_norm if g_sq_norm is not None else (g * g).sum(1)
        if out is not None and s.dtype == torch.float32 and g_sq.dtype == torch.float32:
            return s.mul_(2.0).sub_(g_sq)  # the same two roundings, in place
        s = 2.0 * s - g_sq
    return s


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


def _exact_sq_distances(q: Tensor, g: Tensor, rows: Tensor, cols: Tensor, exponent: Optional[Tensor] = None) -> Tensor:
    """``|q[rows] - g[cols]|^2 * 2**(-2 exponent)`` in float64: the differences of the
    embeddings in float64, scaled by ``2**-exponent`` (exact: no square overflows or
    underflows), squared and summed in a fixed pairwise order (the same value for a
    pair in any chunk, on any device; equal for identical embeddings)."""
    out = torch.empty(rows.shape[0], dtype=torch.float64, device=q.device)
    dim = q.shape[1]
    width = 1 << max(0, (dim - 1).bit_length())
    step = max(1, (1 << 22) // width)
    for start in range(0, rows.shape[0], step):
        part = slice(start, start + step)
        diff = q[rows[part]].to(torch.float64) - g[cols[part]].to(torch.float64)
        if exponent is not None:
            diff = torch.ldexp(diff, -exponent)
        sq = torch.nn.functional.pad(diff * diff, (0, width - dim))
        while sq.shape[1] > 1:
            half = sq.shape[1] // 2
            sq = sq[:, :half] + sq[:, half:]
        out[part] = sq[:, 0]
    return out


def _relative_bound(dim: int, u_products: float, u_final: float, u_prepared: float = 0.0) -> float:
    """Largest error of a ranking score ``2 q.g - |g|^2`` (or ``-|q - g|^2``) against the
    exact float64 distance (:func:`_exact_sq_distances`), over ``(|q| + |g|)^2``, doubled
    for margin: products and sums over ``dim`` terms in any order err by at most
    ``gamma = dim u / (1 - dim u)`` (u: unit roundoff of the product arithmetic), plus
    three final roundings (to the score's dtype, of |g|^2, of the difference); the
    prepared embeddings' own rounding (``u_prepared`` + float64's, per entry: ``|q - g|^2``
    moves by at most 3 of each) and the exact distance's (a sum of ``dim`` squares)."""
    u64 = 2.0**-53
    if dim * u_products >= 1 or dim * u64 >= 1:
        return float("inf")
    exact = dim * u64 / (1 - dim * u64) + 3 * u64
    return 2.0 * (dim * u_products / (1 - dim * u_products) + 3 * u_final + 3 * (u_prepared + u64) + exact)


class EuclideanOrder:
    """Exact euclidean order on top of the ranking score ``2 q.g - |g|^2`` of embeddings
    prepared by a :class:`Frame` (float32 products).

    Each score is within a bound ``e`` (per query, from :func:`_relative_bound` and the
    largest prepared gallery norm) of the exact value ``|q|^2 - |q - g|^2`` (prepared
    ``q``; exact distance of the embeddings themselves, in the frame's units), so two
    candidates whose scores differ by more than ``2e`` are in exact order. In the
    score order only runs of candidates closer than that to their neighbour (clusters)
    may be misordered, and only among themselves; a cluster whose gains are not all
    equal is re-ranked by the exact float64 squared distance, then by gallery index.
    Candidates more than ``2e`` below the cut cannot enter the top, so only that window
    past it is looked at. Rows with many such candidates, and whole-list rankings, are
    re-scored with a float64 product instead (its bound is ~1e-15 relative: clusters
    are then exact ties, such as identical embeddings). The metric values are those of
    the exact order: float64 squared distances of the embeddings, ties by gallery
    index. They do not depend on the chunk size: the float64 distances are summed in a
    fixed order, and the result does not depend on how scores were rounded.

    Methods take each chunk's queries twice: ``q`` prepared (as ``g``), ``qx`` as given.

    Example:
        >>> g = torch.tensor([[1e4, 0.0], [1e4, 1e-3], [0.0, 0.0]])
        >>> q = torch.tensor([[1e4, 5.1e-4]])  # nearer to g[1] than to g[0]
        >>> frame = Frame.of(q, g)
        >>> gp, qp = frame.apply(g), frame.apply(q)
        >>> top = EuclideanOrder(gp, g, frame).top(qp, lambda rows, idx: idx == 1, qx=q)
        >>> top(similarity(qp, gp, "euclidean"), 1)[1].tolist()
        [[1]]
    """

    # a row with more than 1/HEAVY of its candidates to re-score gets a float64 product
    HEAVY = 32

    def __init__(self, g: Tensor, g_exact: Tensor, frame: Frame):
        self.g, self.g_exact, self.frame = g, g_exact, frame
        dim = g.shape[1]
        self._g_sq: Optional[Tensor] = None
        # the largest norm, rounded up past its own rounding error (inf on overflow)
        norm = float(torch.linalg.vector_norm(g, dim=1).max()) if g.shape[0] else 0.0
        self.g_norm = norm * (1.0 + 4.0 * (dim + 2) * torch.finfo(g.dtype).eps)
        u_prepared = torch.finfo(g.dtype).eps / 2
        self.rel32 = _relative_bound(dim, _matmul_roundoff(g.dtype), 2.0**-24, u_prepared)
        self.rel64 = _relative_bound(dim, 2.0**-53, 2.0**-53, 2.0**-53)

    def _prepared64(self, x: Tensor) -> Tensor:
        return self.frame.apply(x, torch.float64)

    @property
    def g_sq(self) -> Tensor:
        """``[G]`` float64 squared norms of the gallery prepared in float64."""
        if self._g_sq is None:
            if self.g.dtype == torch.float64:
                self._g_sq = (self.g * self.g).sum(1)
            else:
                self._g_sq = torch.cat([(g * g).sum(1) for g in self._gallery64_blocks()]) if self.g.shape[0] \
                    else self.g.new_zeros(0, dtype=torch.float64)
        return self._g_sq

    def _gallery64_blocks(self) -> Iterator[Tensor]:
        step = max(1, (1 << 22) // max(self.g.shape[1], 1))
        for start in range(0, self.g.shape[0], step):
            yield self._prepared64(self.g_exact[start:start + step])

    def exact(self, qx: Tensor, rows: Tensor, cols: Tensor) -> Tensor:
        """Exact squared distances of ``qx[rows]`` and gallery ``cols``, in the frame's units."""
        return _exact_sq_distances(qx, self.g_exact, rows, cols, self.frame.exponent)

    def _width(self, q: Tensor, rel: float) -> Tensor:
        """``[c]`` float64: twice the largest score error of each (prepared) query."""
        eps = torch.finfo(q.dtype).eps
        q_norm = (q.to(torch.float64) ** 2).sum(1).sqrt() * (1.0 + 4.0 * (q.shape[1] + 2) * eps)
        return 2.0 * rel * (q_norm + self.g_norm) ** 2

    def top(self, q: Tensor, gain_at: Callable[[Tensor, Tensor], Tensor], base_top=None, select: str = "checked",
            qx: Optional[Tensor] = None):
        """A ``top(scores, d) -> (vals, idx)`` for the ranking builders: the first ``d``
        candidates of the chunk's queries in exact order. ``gain_at(rows, idx)``
        gives the gains of candidates ``idx[h, k]`` of chunk rows ``rows[h]``;
        excluded candidates score -inf.

        ``select`` (as the builders'): ``"checked"`` repairs the float32 order in place
        (host reads per chunk); ``"deferred"`` reads nothing and returns ``(vals, idx,
        inexact)``, flagging the rows whose order it cannot prove (a cluster of unequal
        gains in the window, or a window longer than the prefix); ``"exact"`` ranks by
        the exact distance itself (:meth:`exact_top`, no host read), for those rows."""
        if select == "exact":
            return lambda scores, d: self.exact_top(scores, d, qx)
        if select == "deferred":
            return lambda scores, d: self._top_deferred(scores, d, q, qx, gain_at)
        if base_top is None:
            base_top = _stable_top

        def top(scores: Tensor, d: int):
            return self._top(scores, d, q, qx, gain_at, base_top)

        return top

    def _top_deferred(self, scores, d, q, qx, gain_at):
        """The float32 top ``d`` and the rows it may misorder, without a host read: a
        fixed prefix of ``d + 16 + d // 4`` (the first step of :meth:`_prefix`)."""
        c, n = scores.shape
        rows = torch.arange(c, device=scores.device)
        k = min(d + 16 + d // 4, n)
        if k == n:  # whole rows (dense in ties at float32 resolution): float64 scores, as _top64
            s64 = self._scores64(qx).masked_fill_(torch.isneginf(scores), float("-inf"))
            vals, idx = torch.sort(s64, dim=1, descending=True, stable=True)
            del s64
            mixed = self._mixed_rows(vals, self._width(q, self.rel64), gain_at(rows, idx))
            return vals[:, :d], idx[:, :d], mixed
        # (a tie at the prefix's end lies outside the window of covered rows: no flag needed)
        vals, idx, _ = _stable_top_deferred(scores, k)
        width = self._width(q, self.rel32)
        last = vals[:, d - 1].to(torch.float64)
        covered = torch.isneginf(last) | (vals[:, -1].to(torch.float64) < last - width)
        mixed = self._mixed_rows(vals, width, gain_at(rows, idx))
        return vals[:, :d], idx[:, :d], ~covered | mixed

    @staticmethod
    def _close(vals: Tensor, width: Tensor) -> Tensor:
        """``[c, k - 1]``: neighbours in the score order closer than ``width``."""
        v = vals.to(torch.float64)
        return ((v[:, :-1] - v[:, 1:]) <= width.unsqueeze(1)) & torch.isfinite(v[:, 1:])

    @classmethod
    def _mixed_rows(cls, vals: Tensor, width: Tensor, gain: Tensor) -> Tensor:
        """``[c]``: rows with two neighbours closer than ``width`` and of unequal gains
        (where the float32 order may be wrong in a way that changes the values)."""
        if vals.shape[1] < 2:
            return torch.zeros(vals.shape[0], dtype=torch.bool, device=vals.device)
        return (cls._close(vals, width) & (gain[:, :-1] != gain[:, 1:])).any(1)

    def exact_top(self, scores: Tensor, d: int, qx: Tensor):
        """The first ``d`` by the exact squared distance (:meth:`exact`, the order the
        checked path repairs to), then gallery index; excluded (-inf) candidates last.
        No host read: every pair of the rows is measured, so it is meant for the few
        rows that the deferred path flags. Returns the negated distances as scores
        (-inf for excluded candidates)."""
        c, n = scores.shape
        rows = torch.arange(c, device=scores.device).repeat_interleave(n, output_size=c * n)
        cols = torch.arange(n, device=scores.device).repeat(c)
        dist = self.exact(qx, rows, cols).view(c, n)
        dist.masked_fill_(torch.isneginf(scores), float("inf"))
        vals, idx = torch.sort(dist, dim=1, stable=True)
        return -vals[:, :d], idx[:, :d]

    def _top(self, scores, d, q, qx, gain_at, base_top):
        c, n = scores.shape
        rows = torch.arange(c, device=scores.device)
        if d >= n:  # whole lists are dense in ties at float32 resolution
            return self._top64(scores, rows, d, q, qx, gain_at, base_top)
        width = self._width(q, self.rel32)
        vals, idx = self._prefix(scores, d, width, base_top)
        marked, cluster = self._marks(vals, idx, width, gain_at(rows, idx))
        if marked is None:
            return vals[:, :d], idx[:, :d]
        heavy = marked.sum(1) * self.HEAVY > n
        vals, idx = self._reorder(vals, idx, marked & ~heavy.unsqueeze(1), cluster, qx)
        vals, idx = vals[:, :d], idx[:, :d]
        if bool(heavy.any()):
            h = heavy.nonzero().squeeze(1)
            v, i = self._top64(scores[h], h, d, q[h], qx[h], gain_at, base_top)
            vals, idx = vals.to(torch.float64), idx.clone()
            vals[h], idx[h] = v, i
        return vals, idx

    def _top64(self, scores, rows, d, q, qx, gain_at, base_top):
        """The top ``d`` of ``rows`` from float64 scores, computed in row blocks."""
        n = scores.shape[1]
        step = max(16, (1 << 23) // max(n, 1))
        out_v, out_i = [], []
        for start in range(0, rows.shape[0], step):
            part = slice(start, start + step)
            s = self._scores64(qx[part]).masked_fill_(torch.isneginf(scores[part]), float("-inf"))
            width = self._width(q[part], self.rel64)
            vals, idx = self._prefix(s, d, width, base_top)
            del s
            marked, cluster = self._marks(vals, idx, width, gain_at(rows[part], idx))
            if marked is not None:
                vals, idx = self._reorder(vals, idx, marked, cluster, qx[part])
            out_v.append(vals[:, :d])
            out_i.append(idx[:, :d])
        if len(out_v) == 1:
            return out_v[0], out_i[0]
        return torch.cat(out_v), torch.cat(out_i)

    def _scores64(self, qx: Tensor) -> Tensor:
        """``2 q.g - |g|^2`` in float64 of the embeddings prepared in float64 (in blocks)."""
        q = self._prepared64(qx)
        if self.g.dtype == torch.float64:
            s = q @ self.g.T
        else:
            s = torch.empty(q.shape[0], self.g.shape[0], dtype=torch.float64, device=q.device)
            start = 0
            for g in self._gallery64_blocks():
                s[:, start:start + g.shape[0]] = q @ g.T
                start += g.shape[0]
        return s.mul_(2.0).sub_(self.g_sq)

    def tie_scores(self, q: Tensor, qx: Tensor, d: int, mask: Optional[Tensor] = None) -> Tensor:
        """``[c, G]`` float64 scores for the tie modes, whose order and equality among the
        candidates that reach the first ``d`` (or tie with the ``d``-th) are those of
        the exact distance: ``-|q - g|^2`` from the float64 product of the float64
        prepared ``q`` and gallery, where every candidate of a cluster (closer than the
        error bound to a neighbour) in that window gets the exact value (:meth:`exact`).
        Candidates below the window stay below the ``d``-th exact value. ``mask``:
        False where a candidate is excluded (ranked as padding by the builder)."""
        c = q.shape[0]
        s = _matmul(q, self.g, keep_float64=True).mul_(2.0).sub_(self.g_sq).sub_((q * q).sum(1, keepdim=True))
        if s.shape[1] == 0 or c == 0:
            return s
        width = self._width(q, self.rel64)
        vals, idx = self._prefix(s if mask is None else s.masked_fill(~mask, float("-inf")), d, width, _stable_top)
        if vals.shape[1] < 2:
            return s
        close = self._close(vals, width)
        member = torch.zeros_like(vals, dtype=torch.bool)
        member[:, 1:] |= close
        member[:, :-1] |= close
        rows, pos = member.nonzero(as_tuple=True)
        cols = idx[rows, pos]
        s[rows, cols] = -self.exact(qx, rows, cols)
        return s

    @staticmethod
    def _prefix(scores: Tensor, d: int, width: Tensor, base_top):
        """The stable top of each row, long enough to hold every candidate within
        ``width`` of the ``d``-th score."""
        n = scores.shape[1]
        extra = 16 + d // 4
        while True:
            k = min(d + extra, n)
            vals, idx = base_top(scores, k)
            if k == n:
                return vals, idx
            last = vals[:, d - 1].to(torch.float64)
            if bool((torch.isneginf(last) | (vals[:, -1].to(torch.float64) < last - width)).all()):
                return vals, idx
            extra *= 4

    @classmethod
    def _marks(cls, vals: Tensor, idx: Tensor, width: Tensor, gain: Tensor):
        """``(marked[c, k], cluster[c, k])``: positions in a cluster of unequal gains, and
        the cluster number of each position (row-major); (None, None) when none is."""
        c, k = vals.shape
        if k < 2:
            return None, None
        close = cls._close(vals, width)
        mixed = close & (gain[:, :-1] != gain[:, 1:])
        if not bool(mixed.any()):
            return None, None
        cluster = torch.cat([torch.zeros(c, 1, dtype=torch.int64, device=vals.device), (~close).cumsum(1)], 1)
        cluster += torch.arange(c, device=vals.device).unsqueeze(1) * k
        is_mixed = torch.zeros(c * k, dtype=torch.bool, device=vals.device)
        is_mixed[cluster[:, :-1][mixed]] = True
        return is_mixed[cluster], cluster

    def _reorder(self, vals, idx, marked, cluster, qx):
        """Re-rank the marked clusters by (exact distance, gallery index) in place of
        their score order; each cluster keeps its positions."""
        k = vals.shape[1]
        pos = marked.reshape(-1).nonzero().squeeze(1)  # row-major: a cluster's positions in a run
        if pos.numel() == 0:
            return vals, idx
        rows, cols = torch.div(pos, k, rounding_mode="floor"), idx.reshape(-1)[pos]
        dist = self.exact(qx, rows, cols)
        order = torch.argsort(cols, stable=True)
        order = order[torch.argsort(dist[order], stable=True)]
        order = order[torch.argsort(cluster.reshape(-1)[pos][order], stable=True)]
        idx, vals = idx.clone(), vals.clone()
        idx.view(-1)[pos] = cols[order]
        vals.view(-1)[pos] = vals.reshape(-1)[pos][order]
        return vals, idx


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


class Checks:
    """Value tests of callables' outputs kept for one host read after a chunk loop
    (where host reads synchronise), instead of a read per chunk.

    Example:
        >>> c = Checks()
        >>> _ = gains(torch.tensor([1]), torch.tensor([1, 2]), lambda a, b: -torch.ones(1, 2), checks=c)
        >>> c.raise_any()
        Traceback (most recent call last):
        ...
        ValueError: relevance gains must be finite and >= 0; got a minimum of -1.0
    """

    def __init__(self):
        self.distances: list = []  # 0-d bool: all distances of a chunk finite
        self.gains: list = []  # [3] float64: (chunk minimum, chunk maximum, 1: NaN/inf/negative, 2: too large)
        self.integer = False  # integer gains (their minimum printed as an int)

    def raise_any(self) -> None:
        """Raise the error that the first failing chunk would have raised (one host read)."""
        if not self.distances and not self.gains:
            return
        device = (self.distances or self.gains)[0].device
        parts = [torch.zeros(1, dtype=torch.float64, device=device)]
        if self.distances:
            parts[0] = torch.stack(self.distances).all().logical_not().to(torch.float64).reshape(1)
        if self.gains:
            g = torch.stack(self.gains)  # [chunks, 3]
            first = (g[:, 2] > 0).to(torch.uint8).argmax()  # the first failing chunk (or chunk 0 when none fails)
            parts.append(g.index_select(0, first.reshape(1)).reshape(3))
        flags = torch.cat(parts).tolist()
        if flags[0]:
            raise ValueError(DISTANCE_ERROR)
        if len(flags) > 1:  # [distances bad, gains' minimum, maximum, gains bad]
            _raise_gains(flags[1], flags[2], flags[3], self.integer)


def _raise_gains(low: float, high: float, bad: float, integer: bool) -> None:
    """The error of a relevance callable's gains (``bad``: 1 NaN/inf/negative, 2 too large)."""
    if bad == 1:
        if integer and low == low:  # as the gains' own minimum prints
            low = int(low)
        raise ValueError(f"relevance gains must be finite and >= 0; got a minimum of {low}")
    if bad == 2:
        raise ValueError(f"relevance gains must be at most 2^960 (about 1e289) so that sums of them fit float64; "
                         f"got a maximum of {high:g}")


_UNSIGNED = (torch.uint16, torch.uint32, torch.uint64)


def gains(
    query_labels: Tensor, gallery_labels: Tensor, relevance: Optional[Relevance] = None,
    checks: Optional[Checks] = None,
) -> Tensor:
    """``[c, G]`` gains: equal label (1-D labels, bool), number of shared labels
    (multi-hot ``[N, C]``), or ``relevance(query_labels, gallery_labels)``.

    Example:
        >>> gains(torch.tensor([1, 2]), torch.tensor([2, 1, 1])).tolist()
        [[False, True, True], [True, False, False]]
    """
    if relevance is not None:
        out = relevance(query_labels, gallery_labels)
        shape = (query_labels.shape[0], gallery_labels.shape[0])
        if not isinstance(out, Tensor) or out.shape != shape:
            got = tuple(out.shape) if isinstance(out, Tensor) else type(out).__name__
            raise ValueError(f"a relevance callable must return gains [queries, gallery] = {shape}; got {got}")
        if out.is_complex() or out.dtype in _UNSIGNED:
            raise TypeError(f"a relevance callable must return real gains (bool, int8-64, uint8 or floating "
                            f"point); got {out.dtype}")
        if out.dtype != torch.bool and out.numel():
            low, high = torch.aminmax(out)
            bad = (torch.isnan(low) | (low < 0)).to(torch.float64)
            if out.is_floating_point():
                bad = torch.maximum(bad, (~torch.isfinite(out).all()).to(torch.float64))
                bad = torch.where(bad > 0, bad, 2.0 * (high > GAIN_LIMIT))
            if checks is not None:
                checks.gains.append(torch.stack([low.to(torch.float64), high.to(torch.float64), bad]))
                checks.integer = not out.is_floating_point()
            else:
                _raise_gains(*torch.stack([low.to(torch.float64), high.to(torch.float64), bad]).tolist(),
                             not out.is_floating_point())
        return out
    if query_labels.ndim == 1:
        return query_labels.unsqueeze(1) == gallery_labels.unsqueeze(0)
    return query_labels.to(torch.float32) @ gallery_labels.to(torch.float32).T


def eligible(query_ids: Optional[Tensor], gallery_ids: Optional[Tensor]) -> Optional[Tensor]:
    """``[c, G]`` True where the gallery item may be retrieved (its id differs from the query's)."""
    if query_ids is None:
        return None
    return query_ids.unsqueeze(1) != gallery_ids.unsqueeze(0)


def _codes(*columns: Tensor) -> Tensor:
    """One int64 code per row of equal-length key columns (equal rows, equal codes)."""
    code = torch.zeros_like(columns[0], dtype=torch.int64)
    for col in columns:
        values, inverse = torch.unique(col, return_inverse=True)
        code = code * values.numel() + inverse
    return code


def count_equal(query_keys: Tuple[Tensor, ...], gallery_keys: Tuple[Tensor, ...]) -> Tensor:
    """``[Q]`` how many gallery rows equal each query row, keys given as columns.

    Example:
        >>> count_equal((torch.tensor([1, 2, 9]),), (torch.tensor([2, 1, 1]),)).tolist()
        [2, 1, 0]
    """
    n_gallery = gallery_keys[0].shape[0]
    codes = _codes(*(torch.cat([g.to(torch.int64), q.to(torch.int64)]) for q, g in zip(query_keys, gallery_keys)))
    distinct, inverse = torch.unique(codes, return_inverse=True)
    counts = torch.bincount(inverse[:n_gallery], minlength=distinct.numel())
    return counts[inverse[n_gallery:]]


def label_counts(
    query_labels: Tensor, gallery_labels: Tensor, query_ids: Optional[Tensor], gallery_ids: Optional[Tensor]
) -> "tuple[Tensor, Tensor]":
    """(R, candidates) per query for 1-D labels, exactly, without a ``[Q, G]`` matrix:
    gallery items sharing the label (and eligible), and eligible gallery items."""
    n_relevant = count_equal((query_labels,), (gallery_labels,))
    n_candidates = torch.full_like(n_relevant, gallery_labels.shape[0])
    if query_ids is not None:
        n_relevant = n_relevant - count_equal((query_ids, query_labels), (gallery_ids, gallery_labels))
        n_candidates = n_candidates - count_equal((query_ids,), (gallery_ids,))
    return n_relevant, n_candidates


class Exclusion:
    """The (row, column) pairs of a query chunk whose gallery id equals the query's id.

    Example:
        >>> ex = Exclusion(torch.tensor([7, 8]), torch.tensor([8, 7, 8]))
        >>> [t.tolist() for t in ex.pairs(slice(0, 2))]
        [[0, 1, 1], [1, 0, 2]]
    """

    def __init__(self, query_ids: Tensor, gallery_ids: Tensor):
        self.query_ids = query_ids
        self.sorted_ids, self.order = torch.sort(gallery_ids, stable=True)

    def pairs(self, part: slice) -> "tuple[Tensor, Tensor]":
        q = self.query_ids[part]
        lo = torch.searchsorted(self.sorted_ids, q)
        counts = torch.searchsorted(self.sorted_ids, q, right=True) - lo
        rows = torch.repeat_interleave(torch.arange(q.shape[0], device=q.device), counts)
        first = torch.repeat_interleave(lo - (torch.cumsum(counts, 0) - counts), counts)
        cols = self.order[first + torch.arange(rows.shape[0], device=q.device)]
        return rows, cols


class FaissSearch:
    """Candidate lists from faiss' exact flat index (CPU, float32): the optional
    ``backend="faiss"`` of embedding mode.

    Each row's candidates come back ordered by gallery index, so the stable
    builder ranks equal scores by the lower index, as the torch backend does. A
    tie that straddles the last candidate faiss returns cannot be seen, and faiss
    rounds differently from torch: values equal the torch backend's except
    between candidates within float rounding of each other.
    """

    def __init__(self, gallery: Tensor, distance: str):
        faiss = optional.faiss()
        self.l2 = distance in ("euclidean", "squared_euclidean")
        g = gallery.to(torch.float32).contiguous().numpy()
        self.index = faiss.IndexFlatL2(g.shape[1]) if self.l2 else faiss.IndexFlatIP(g.shape[1])
        self.index.add(g)

    def top(self, q: Tensor, k: int) -> "tuple[Tensor, Tensor]":
        """``(scores [c, k], gallery indices [c, k])``, each row in increasing gallery index."""
        d, i = self.index.search(q.to(torch.float32).contiguous().numpy(), k)
        scores, idx = torch.from_numpy(d), torch.from_numpy(i)
        if self.l2:
            scores = -scores
        idx, order = idx.sort(dim=1)
        return scores.gather(1, order), idx
