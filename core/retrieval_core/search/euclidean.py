"""Exact Euclidean k-NN order: float32 products, with float64 rescoring of the candidates within the error window."""
from __future__ import annotations

from typing import Callable, Iterator, Optional, Sequence

import torch
from torch import Tensor

from ..ranking.topk import stable_top, stable_top_deferred
from .euclidean_bounds import _error_terms, _exact_sq_distances, _norm_bound
from .frames import Frame, _matmul, _matmul_roundoff

__all__ = ["EuclideanOrder"]


class EuclideanOrder:
    """Exact euclidean order on top of the ranking score ``2 q.g - |g|^2`` of embeddings
    prepared by a :class:`Frame` (float32 products).

    Each candidate's exact value ``|q|^2 - |q - g|^2`` (prepared ``q``; exact distance of
    the embeddings themselves, in the frame's units) lies within ``e`` of its score
    (:func:`_error_terms`, from the query's and that candidate's norms). In the score
    order, neighbours where every interval before lies above every interval after
    are in exact order; only the runs between such breaks (clusters) may be misordered,
    among themselves; a cluster of unequal gains that can reach the top is re-ranked by
    the exact float64 squared distance, then gallery index. A prefix whose first ``d``
    lie above every candidate past it holds the exact top ``d``: only it is looked at.
    Rows with many such candidates, and whole-list rankings, get a float64 product
    (clusters are then exact ties, such as identical embeddings). The values are the
    exact order's (float64 squared distances of the embeddings, ties by gallery index)
    for any chunk size: those distances are summed in a fixed order.

    Methods take each chunk's queries twice: ``q`` prepared (as ``g``), ``qx`` as given.

    Example:
        >>> from retrieval_core.search.frames import similarity
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

    def __init__(self, g: Tensor, g_exact: Tensor, frame: Frame, fused: bool = False):
        self.g, self.g_exact, self.frame = g, g_exact, frame
        dim = g.shape[1]
        self._g_sq: Optional[Tensor] = None
        # each prepared gallery norm and the largest, bounded from above
        self.g_norms = _norm_bound(g)
        self.g_norm = float(self.g_norms.max()) if g.shape[0] else 0.0
        u_prepared = torch.finfo(g.dtype).eps / 2
        # fused: the float32 scores may come from one product (search.similarity(fused=True))
        self.terms32 = _error_terms(dim, _matmul_roundoff(g.dtype), 2.0**-24, u_prepared, fused)
        self.terms64 = _error_terms(dim, 2.0**-53, 2.0**-53, 2.0**-53)
        # tie_scores subtracts |q|^2 (errs by gamma64(dim) |q|^2) and rounds once more (2**-53 (|q| + |g|)^2)
        k1, kg, k2, c = self.terms64
        self.terms_ties = (k1, kg, k2 + 2.0 * (dim + 1) * 2.0**-53 / (1 - (dim + 1) * 2.0**-53), c)

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

    @staticmethod
    def _errors(q_norm: Tensor, g_norm, terms) -> Tensor:
        """Score-error bounds (:func:`_error_terms`) of query and gallery norms (broadcast)."""
        k1, kg, k2, c = terms
        return 2.0 * k1 * q_norm * g_norm + kg * g_norm * g_norm + (q_norm + g_norm) ** 2 * k2 + c

    @staticmethod
    def _interval(vals: Tensor, err: Tensor) -> "tuple[Tensor, Tensor]":
        """Float64 ``(lower, upper)`` of each exact score: the score -+ its bound, grown by
        2**-40 of it and 2**-50 of the score (past the float64 roundings of the bound, a
        dozen of 2**-53, and of this sum, 2**-53 of ``|score| + e``); -inf stays -inf."""
        v = vals.to(torch.float64)
        e = torch.where(torch.isfinite(v), err * (1.0 + 2.0**-40) + v.abs() * 2.0**-50, 0.0)
        return v - e, v + e

    def top(self, q: Tensor, gain_at: Callable[[Tensor, Tensor], Tensor], base_top=None, select: str = "checked",
            qx: Optional[Tensor] = None, cuts: Optional[Sequence[int]] = None):
        """A ``top(scores, d) -> (vals, idx)`` for the ranking builders: the first ``d``
        candidates of the chunk's queries in exact order. ``gain_at(rows, idx)``
        gives the gains of candidates ``idx[h, k]`` of chunk rows ``rows[h]``;
        excluded candidates score -inf. ``cuts``: the values read only the gains of the
        first ``cut`` as a set, for each cut (hits@k; None: the order itself): the gains
        before each cut are exact (the checked path repairs only clusters that a cut or
        ``d`` runs through), their order within may not be.

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
            base_top = stable_top

        def top(scores: Tensor, d: int):
            return self._top(scores, d, q, qx, gain_at, base_top, cuts)

        return top

    def _top_deferred(self, scores, d, q, qx, gain_at):
        """The float32 top ``d`` and the rows it may misorder, without a host read: a
        fixed prefix of ``d + 16 + d // 4`` (as :meth:`prefix`'s first retry)."""
        c, n = scores.shape
        rows = torch.arange(c, device=scores.device)
        k = min(d + 16 + d // 4, n)
        if k == n:  # whole rows (dense in ties at float32 resolution): float64 scores, as _top64
            s64 = self._scores64(qx).masked_fill_(torch.isneginf(scores), float("-inf"))
            vals, idx = torch.sort(s64, dim=1, descending=True, stable=True)
            del s64
            err = self._errors(_norm_bound(q).unsqueeze(1), self.g_norms[idx], self.terms64)
            mixed = self._mixed(self._close(vals, err), gain_at(rows, idx), d).any(1)
            return vals[:, :d], idx[:, :d], mixed
        # (a tie at the prefix's end lies outside the window of covered rows: no flag needed)
        vals, idx, _ = stable_top_deferred(scores, k)
        q_norm = _norm_bound(q)
        err = self._errors(q_norm.unsqueeze(1), self.g_norms[idx], self.terms32)
        covered = self._covered(vals, err, d, self._errors(q_norm, self.g_norm, self.terms32))
        mixed = self._mixed(self._close(vals, err), gain_at(rows, idx), d).any(1)
        return vals[:, :d], idx[:, :d], ~covered | mixed

    @classmethod
    def _covered(cls, vals: Tensor, err: Tensor, d: int, rest: Tensor) -> Tensor:
        """``[c]``: rows whose first ``d`` are provably ahead of every candidate past the
        prefix (score at most the prefix's last, error at most ``rest``)."""
        if d == 0:
            return torch.ones(vals.shape[0], dtype=torch.bool, device=vals.device)
        lower, _ = cls._interval(vals[:, :d], err[:, :d])
        _, past = cls._interval(vals[:, -1], rest)
        return torch.isneginf(vals[:, d - 1]) | (lower.amin(1) > past)

    @classmethod
    def _close(cls, vals: Tensor, err: Tensor) -> Tensor:
        """``[c, k - 1]``: neighbours with no proven break between them (by the intervals,
        some candidate up to the first may be below one from the second on)."""
        lower, upper = cls._interval(vals, err)
        low = torch.cummin(lower, 1).values[:, :-1]
        high = torch.cummax(upper.flip(1), 1).values.flip(1)[:, 1:]
        return (low <= high) & torch.isfinite(vals[:, 1:])

    def _screen(self, vals: Tensor, idx: Tensor, q: Tensor) -> Tensor:
        """:meth:`_close` of float32 ``vals`` (sorted, -inf last) by one bound per row: ``E``,
        the largest error bound of its candidates (:func:`_error_terms`). Proof: where
        ``vals[i] - vals[i + 1] > 2 E``, every exact score up to ``i`` is at least ``vals[i]
        - E``, above ``vals[i + 1] + E``, at least every one after: a break. The float32
        gap is the exact one rounded (within 2**-24 of it: gaps past the threshold are
        normal), compared with ``2 E (1 + 2**-20)`` rounded up: room for both and for the
        float64 roundings of ``E`` (a dozen of 2**-53). Each break of :meth:`_close` (whose
        bounds are at most ``E``) is one here: its clusters are unions of these."""
        e = self._errors(_norm_bound(q), self.g_norms[idx].amax(1), self.terms32)
        limit = 2.0 * e * (1.0 + 2.0**-20)
        limit32 = limit.to(torch.float32)
        up = torch.nextafter(limit32, torch.full_like(limit32, float("inf")))
        limit32 = torch.where(limit32.to(torch.float64) < limit, up, limit32)
        # a -inf next: an infinite gap (finite before) or NaN (-inf before): no cluster
        return (vals[:, :-1] - vals[:, 1:]) <= limit32.unsqueeze(1)

    @staticmethod
    def _mixed(close: Tensor, gain: Tensor, d: int, cuts: Optional[Sequence[int]] = None) -> Tensor:
        """``[c, k - 1]``: the neighbours of ``close`` (:meth:`_close`, :meth:`_screen`) of
        unequal gains in a cluster that starts before position ``d`` (where the float32 order
        may be wrong in a way that changes the values; later clusters cannot reach the top).
        ``cuts`` (values that read the set of the first ``cut`` only): in a cluster that a
        cut or ``d`` runs through (holds positions ``cut - 1`` and ``cut``); a cluster wholly
        on one side of every cut holds the same gains before each, in any order."""
        if cuts is None:
            start = torch.ones_like(close) if d > 0 else torch.zeros_like(close)
            start[:, max(d, 1) - 1:] &= torch.cumprod(close[:, max(d, 1) - 1:].to(torch.uint8), 1).bool()
        else:
            start = torch.zeros_like(close)
            for cut in sorted({d, *(c for c in cuts if c < d)}):  # the values read no cut past d
                if 0 < cut <= close.shape[1]:  # pair cut - 1 joins positions cut - 1 and cut
                    start[:, :cut] |= torch.cumprod(close[:, :cut].flip(1).to(torch.uint8), 1).flip(1).bool()
                    start[:, cut - 1:] |= torch.cumprod(close[:, cut - 1:].to(torch.uint8), 1).bool()
        return close & start & (gain[:, :-1] != gain[:, 1:])

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

    def _top(self, scores, d, q, qx, gain_at, base_top, cuts=None):
        c, n = scores.shape
        rows = torch.arange(c, device=scores.device)
        if d >= n:  # whole lists are dense in ties at float32 resolution
            return self._top64(scores, rows, d, q, qx, gain_at, base_top)
        vals, idx, _ = self.prefix(scores, d, q, self.terms32, base_top, errors=False)
        if vals.shape[1] < 2:
            return vals[:, :d], idx[:, :d]
        gain, close = gain_at(rows, idx), self._screen(vals, idx, q)
        marked, cluster = self._marks(close, gain, d, cuts)
        heavy = None if marked is None else marked.sum(1) * self.HEAVY > n
        if heavy is not None and bool(heavy.any()):  # one far candidate widens a row's screen: its own bounds
            h = heavy.nonzero().squeeze(1)
            close[h] = self._close(vals[h], self._errors(_norm_bound(q[h]).unsqueeze(1), self.g_norms[idx[h]],
                                                         self.terms32))
            marked, cluster = self._marks(close, gain, d, cuts)
            heavy = None if marked is None else marked.sum(1) * self.HEAVY > n
        if marked is None:
            return vals[:, :d], idx[:, :d]
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
            vals, idx, err = self.prefix(s, d, q[part], self.terms64, base_top)
            del s
            marked, cluster = self._marks(self._close(vals, err), gain_at(rows[part], idx), d) \
                if vals.shape[1] > 1 else (None, None)
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
        vals, idx, err = self.prefix(s if mask is None else s.masked_fill(~mask, float("-inf")), d, q,
                                      self.terms_ties, stable_top)
        if vals.shape[1] < 2:
            return s
        close = self._close(vals, err)
        member = torch.zeros_like(vals, dtype=torch.bool)
        member[:, 1:] |= close
        member[:, :-1] |= close
        rows, pos = member.nonzero(as_tuple=True)
        cols = idx[rows, pos]
        s[rows, cols] = -self.exact(qx, rows, cols)
        return s

    def prefix(self, scores: Tensor, d: int, q: Tensor, terms, base_top, rows_alone: bool = True,
               errors: bool = True):
        """``(vals, idx, err)``: the stable top of each row, long enough that its first
        ``d`` candidates are provably ahead of every candidate past it
        (:meth:`_uncovered`), and the score-error bound of each of its candidates
        (``errors=False``: None).

        A short first prefix; the rows it does not cover are taken again, alone, longer,
        and the others padded with -inf candidates, which join no cluster and lie past
        the first ``d`` (``rows_alone=False``: every row is taken again, no padding)."""
        n = scores.shape[1]
        q_norm = _norm_bound(q)
        rest = self._errors(q_norm, self.g_norm, terms)
        k, extra = min(d + 8 + d // 64, n), 16 + d // 4
        vals, idx, err = self._take(scores, k, q_norm, terms, base_top, errors)
        todo = None if k == n else self._uncovered(vals, idx, err, d, q_norm, rest, terms)
        while todo is not None and bool(todo.any()):
            k, extra = min(max(d + extra, vals.shape[1] + 1), n), extra * 4
            if not rows_alone:
                vals, idx, err = self._take(scores, k, q_norm, terms, base_top, errors)
                todo = None if k == n else self._uncovered(vals, idx, err, d, q_norm, rest, terms)
                continue
            rows = todo.nonzero().squeeze(1)
            v, i, e = self._take(scores[rows], k, q_norm[rows], terms, base_top, errors)
            pad = (0, k - vals.shape[1])
            pad_f = torch.nn.functional.pad
            vals, idx = pad_f(vals, pad, value=float("-inf")), pad_f(idx, pad)
            vals[rows], idx[rows] = v, i
            if errors:
                err = pad_f(err, pad)
                err[rows] = e
            if k < n:
                todo = todo.index_put((rows,), self._uncovered(v, i, e, d, q_norm[rows], rest[rows], terms))
            else:
                todo = None
        return vals, idx, err

    def _take(self, scores: Tensor, k: int, q_norm: Tensor, terms, base_top, errors: bool = True):
        """``base_top(scores, k)`` and the score-error bounds of its candidates (or None)."""
        vals, idx = base_top(scores, k)
        return vals, idx, self._errors(q_norm.unsqueeze(1), self.g_norms[idx], terms) if errors else None

    def _uncovered(self, vals: Tensor, idx: Tensor, err: Optional[Tensor], d: int, q_norm: Tensor, rest: Tensor,
                   terms) -> Tensor:
        """``[c]``: ``~``:meth:`_covered`, screened by the rows' bound ``rest`` first: where the
        ``d``-th score less ``rest`` lies above the last's upper end, every one of the first
        ``d`` (score at least the ``d``-th's, error at most ``rest``) is covered; only the
        other rows get their candidates' bounds (``err``, or from ``idx`` when None)."""
        if d == 0:
            return torch.zeros(vals.shape[0], dtype=torch.bool, device=vals.device)
        low, _ = self._interval(vals[:, d - 1], rest)
        _, past = self._interval(vals[:, -1], rest)
        todo = ~(torch.isneginf(vals[:, d - 1]) | (low > past))
        rows = todo.nonzero().squeeze(1)
        if rows.numel():
            e = err[rows] if err is not None else self._errors(q_norm[rows].unsqueeze(1), self.g_norms[idx[rows]],
                                                                 terms)
            todo[rows] = ~self._covered(vals[rows], e, d, rest[rows])
        return todo

    @classmethod
    def _marks(cls, close: Tensor, gain: Tensor, d: int, cuts: Optional[Sequence[int]] = None):
        """``(marked[c, k], cluster[c, k])``: positions in a cluster (``close``: neighbours
        with no proven break) of unequal gains from before ``d``, and each position's
        cluster number (row-major); (None, None): none."""
        c, k = gain.shape
        mixed = cls._mixed(close, gain, d, cuts)
        if not bool(mixed.any()):
            return None, None
        cluster = torch.cat([torch.zeros(c, 1, dtype=torch.int64, device=gain.device), (~close).cumsum(1)], 1)
        cluster += torch.arange(c, device=gain.device).unsqueeze(1) * k
        is_mixed = torch.zeros(c * k, dtype=torch.bool, device=gain.device)
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
