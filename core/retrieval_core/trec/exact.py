"""trec_eval's arithmetic: its per-query values, bit for bit, and its summary.

trec_eval (m_*.c) computes each query's value in a loop over the ranks, adding one term
at a time (``sum += rel_so_far / rank`` for map, ``sum += gain / log2(rank + 1)`` for
DCG, bpref's ``1 - min(n, R) / min(N, R)``), then divides; the summary adds the queries'
values one query at a time, in its query order, and divides by the number of queries
(meas_acc.c, meas_avg.c). Floating-point addition is not associative: a pairwise sum
(torch's ``.sum()``) can differ in the last bit, and a mean that lies on a .5 at the
fifth decimal then prints another fourth decimal. Here every such sum is a running sum
along the entries in trec_eval's order (``torch.cumsum`` adds one element after the other
along a row on the CPU), every term the same IEEE division as trec_eval's, and the
logarithms those of the C library (Python's ``math.log2``, ``math.log``, ``math.exp``;
torch's vectorised ``log2`` differs in the last bit for some integers).

The entries are flat (a run aligned by :func:`~retrieval_core.trec.align`, query by query
in rank order, ``offsets[i]:offsets[i + 1]`` for query i): rows are grouped by length
(powers of two) for the running sums, so that memory stays linear in the entries, and a
cutoff beyond a list's length costs nothing.

Example:
    >>> import torch
    >>> values = torch.tensor([0.1, 0.2, 0.3, 1.0, 2.0], dtype=torch.float64)
    >>> offsets = torch.tensor([0, 3, 3, 5])
    >>> running_sums(values, offsets).tolist()    # query 0: 0.1, 0.1 + 0.2, ...; query 2: 1, 3
    [0.1, 0.30000000000000004, 0.6000000000000001, 1.0, 3.0]
    >>> after(running_sums(values, offsets), offsets, torch.tensor([2, 5, 9])).tolist()
    [0.30000000000000004, 0.0, 3.0]
    >>> sequential_mean(torch.tensor([[0.1], [0.2], [0.3]], dtype=torch.float64)).tolist()
    [0.20000000000000004]
"""
from __future__ import annotations

import math
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import torch
from torch import Tensor


__all__ = ["EXACT", "GM_FLOOR", "after", "along_rows", "is_exact", "layout", "length_groups", "running_sums",
           "sequential_gm", "sequential_mean", "trec_values"]

GM_FLOOR = 1e-5  # trec_eval's MIN_GEO_MEAN
# our keys whose values are computed here (trec_eval's measures); "@k" takes a positive int cutoff
EXACT = ("map", "map@", "precision@", "recall@", "r_precision", "mrr", "hit_rate@", "ndcg", "ndcg@", "dcg", "dcg@",
         "bpref", "num_q", "num_ret", "num_rel", "num_rel_ret", "num_nonrel_judged_ret")


def is_exact(key: str) -> bool:
    """Whether ``key`` is computed here (a trec_eval measure, or dcg)."""
    base, sep, arg = key.partition("@")
    return (key in EXACT and not sep) or (bool(sep) and base + "@" in EXACT and arg.isdigit())


def running_sums(values: Tensor, offsets: Tensor, blocks: Optional[list] = None) -> Tensor:
    """Within each segment ``offsets[i]:offsets[i + 1]`` of ``values``, the running sums,
    each entry added to the sum before it (left to right, as a C loop does). Integers are
    summed at once (exact in any order). ``blocks``: ``layout(offsets)``, when reused."""
    if values.numel() == 0:
        return torch.empty_like(values)
    if not values.is_floating_point():
        total = torch.cumsum(values, 0)
        n = offsets[1:] - offsets[:-1]
        before = torch.cat([total.new_zeros(1), total])[offsets[:-1]]
        return total - torch.repeat_interleave(before, n)
    return along_rows(values, offsets, lambda dense: torch.cumsum(dense, 1), blocks)


def along_rows(values: Tensor, offsets: Tensor, scan: Callable[[Tensor], Tensor],
               blocks: Optional[list] = None) -> Tensor:
    """``scan`` (a function of padded ``[rows, width]`` blocks, along each row, that keeps
    a row's first entries unchanged by its padding) applied to each segment of ``values``."""
    out = torch.empty_like(values)
    for idx, pos, shape in blocks if blocks is not None else layout(offsets):
        if pos is None:  # segments of one length, one after the other: a view
            out[idx] = scan(values[idx].view(shape)).reshape(-1)
            continue
        dense = values.new_zeros(shape[0] * shape[1])
        dense[pos] = values[idx]
        out[idx] = scan(dense.view(shape)).reshape(-1)[pos]
    return out


def length_groups(n: Tensor) -> List[Tensor]:
    """Row indices grouped so that padding each group's rows to its longest (lengths ``n``)
    costs at most the entries again: every row at once when that is cheap, else rows by
    length in (2^(b-1), 2^b] (the rows of length 0 together)."""
    total = int(n.sum())
    if n.numel() == 0 or n.numel() * int(n.max()) <= 2 * total + 65536:
        return [torch.arange(len(n))]
    size = torch.where(n > 0, torch.ceil(torch.log2(n.clamp_min(1).to(torch.float64))).to(torch.int64), -1)
    return [torch.nonzero(size == b).squeeze(1) for b in torch.unique(size).tolist()]


def layout(offsets: Tensor) -> List[Tuple[Tensor, Optional[Tensor], Tuple[int, int]]]:
    """The segments as padded ``[rows, width]`` blocks: per block, the entries' flat indices,
    their positions in the flattened block (None: no padding) and its shape. One block
    when padding costs little; else segments grouped by length (in (2^(b-1), 2^b]), so that
    the padding is at most the entries again."""
    n = offsets[1:] - offsets[:-1]
    if int(n.sum()) == 0:
        return []
    out = []
    for rows in length_groups(n):
        if int(n[rows].max()) == 0:
            continue
        lens = n[rows]
        width = int(lens.max())
        col = torch.arange(width)
        inside = col.unsqueeze(0) < lens.unsqueeze(1)
        idx = (offsets[rows].unsqueeze(1) + col.unsqueeze(0))[inside]
        if bool(inside.all()):
            out.append((idx, None, (len(rows), width)))
        else:
            out.append((idx, torch.nonzero(inside.reshape(-1)).squeeze(1), (len(rows), width)))
    return out


def after(running: Tensor, offsets: Tensor, k: Tensor) -> Tensor:
    """Per segment, the running sum after its first ``k`` entries (``k`` ``[Q]`` or ``[Q, C]``,
    clamped to the segment's length; 0 when that is 0)."""
    n, start = offsets[1:] - offsets[:-1], offsets[:-1]
    if k.dim() == 2:
        n, start = n.unsqueeze(1), start.unsqueeze(1)
    k = torch.minimum(k.to(torch.int64), n)
    zero = torch.zeros(k.shape, dtype=running.dtype)
    if running.numel() == 0:
        return zero
    return torch.where(k > 0, running[(start + k - 1).clamp(0, running.numel() - 1)], zero)


def sequential_mean(values: Tensor) -> Tensor:
    """``[M]``: each column of ``values [Q, M]`` added one query after the other, divided by Q
    (trec_eval's te_acc_meas_s then te_calc_avg_meas_s)."""
    if values.shape[0] == 0:
        return torch.zeros(values.shape[1], dtype=values.dtype)
    return torch.cumsum(values, 0)[-1] / values.shape[0]


def sequential_gm(ap: Tensor) -> float:
    """trec_eval's gm_map from the per-query APs: ``log(max(AP, 1e-5))`` per query, added
    one query after the other, ``exp(sum / Q)``."""
    total = 0.0
    for v in ap.tolist():
        total += math.log(max(v, GM_FLOOR))
    return math.exp(total / len(ap)) if len(ap) else 0.0


def _log2_ranks(m: int) -> Tensor:
    """``log2(i + 2)`` for i = 0 .. m - 1 (the DCG discount of rank i + 1), by the C library."""
    return torch.tensor([math.log2(i + 2) for i in range(m)], dtype=torch.float64)


def _dcg_terms(gain: Tensor, position: Tensor) -> Tensor:
    """``gain / log2(position + 2)`` where the gain is positive, else 0 (0-based positions)."""
    m = int(position.max()) + 1 if position.numel() else 0
    logs = _log2_ranks(m)
    return torch.where(gain > 0, gain / logs[position] if m else gain, torch.zeros_like(gain))


class _Sums:
    """An aligned run's running sums, each computed once, for the measures of :func:`trec_values`."""

    def __init__(self, al, n_nonrel: Optional[Tensor]):
        self.al, self.n_nonrel = al, n_nonrel
        self.q = len(al.query_ids)
        self.r = al.n_relevant.to(torch.int64).unsqueeze(1)     # [Q, 1], R
        self.rf = self.r.to(torch.float64)
        self.count = running_sums(al.relevant.to(torch.int64), al.offsets)  # relevant retrieved so far
        self._cache: Dict[str, Tensor] = {}
        self.blocks = layout(al.offsets)

    def rel_at(self, k: Tensor) -> Tensor:
        return after(self.count, self.al.offsets, k).to(torch.float64)

    def _ap(self) -> Tensor:  # m_map.c: sum += rel_so_far / rank at each relevant rank
        if "ap" not in self._cache:
            rank = self.al.rank.to(torch.float64)
            term = torch.where(self.al.relevant, self.count.to(torch.float64) / rank, torch.zeros_like(rank))
            self._cache["ap"] = running_sums(term, self.al.offsets, self.blocks)
        return self._cache["ap"]

    def _dcg(self) -> Tensor:  # m_ndcg.c, m_ndcg_cut.c: sum += gain / log2(rank + 1)
        if "dcg" not in self._cache:
            self._cache["dcg"] = running_sums(_dcg_terms(self.al.gain, self.al.rank - 1), self.al.offsets,
                                              self.blocks)
        return self._cache["dcg"]

    def _ideal(self) -> Tensor:  # the same over the query's positive rels, descending
        if "ideal" not in self._cache:
            io, ideal = self.al.ideal_offsets, self.al.ideal
            row = torch.repeat_interleave(torch.arange(self.q), io[1:] - io[:-1])
            position = torch.arange(ideal.numel()) - io[row]
            self._cache["ideal"] = running_sums(_dcg_terms(ideal, position), io)
        return self._cache["ideal"]

    def measure(self, base: str, k: Tensor, cut: Tensor) -> Tensor:
        """``[Q, C]``: measure ``base`` at the cutoffs ``k [Q, C]`` (``cut [C]``: them as doubles)."""
        al, r, rf, f64 = self.al, self.r, self.rf, torch.float64
        zero = torch.zeros(k.shape, dtype=f64)
        if base in ("num_q", "num_ret", "num_rel", "num_rel_ret", "num_nonrel_judged_ret"):
            counts = {"num_q": torch.ones(self.q, dtype=torch.int64), "num_ret": al.num_ret, "num_rel": r[:, 0],
                      "num_rel_ret": al.num_rel_ret, "num_nonrel_judged_ret": al.num_nonrel_judged_ret}
            return counts[base].to(f64).unsqueeze(1).expand(k.shape)
        if base == "precision":  # m_P.c: rel_so_far / cutoff
            return self.rel_at(k) / cut
        if base == "recall":  # m_recall.c: rel_so_far / R, 0 when R = 0
            return torch.where(r > 0, self.rel_at(k) / rf, zero)
        if base == "hit_rate":  # m_success.c
            return (self.rel_at(k) > 0).to(f64)
        if base == "r_precision":  # m_Rprec.c: the relevant in the first min(num_ret, R), / R
            return torch.where((al.num_ret.unsqueeze(1) > 0) & (r > 0), self.rel_at(r) / rf, zero)
        if base == "mrr":  # m_recip_rank.c: 1 / the first relevant rank
            rel = al.relevant
            first = torch.full((self.q,), torch.iinfo(torch.int64).max).scatter_reduce(
                0, al.query[rel], al.rank[rel], "amin").unsqueeze(1)
            return torch.where(al.num_rel_ret.unsqueeze(1) > 0, 1.0 / first.to(f64), zero)
        if base == "map":  # m_map.c / m_map_cut.c: the running sum / R, 0 when R = 0
            return torch.where(r > 0, after(self._ap(), al.offsets, k) / rf.clamp_min(1.0), zero)
        if base == "ndcg":  # m_ndcg.c / m_ndcg_cut.c: DCG / ideal DCG, 0 when the ideal is 0
            dcg, ideal = after(self._dcg(), al.offsets, k), after(self._ideal(), al.ideal_offsets, k)
            return torch.where(ideal > 0, dcg / torch.where(ideal > 0, ideal, torch.ones_like(ideal)), zero)
        if base == "dcg":  # trec_eval's dcg (m_ndcg.c): graded gains
            return after(self._dcg(), al.offsets, k)
        if base == "bpref":
            return _bpref(al, r[:, 0], self.n_nonrel, self.blocks).unsqueeze(1)
        raise ValueError(f"{base!r} is not one of trec_eval's measures computed here")


def trec_values(al, keys: Sequence[str], n_nonrel: Optional[Tensor] = None) -> Dict[str, Tensor]:
    """``{key: [Q] float64}`` for the keys :func:`is_exact` accepts, from an aligned run
    ``al`` (:class:`~retrieval_core.trec.Aligned`); ``n_nonrel``: the judged non-relevant
    documents of each query in the qrels (for bpref)."""
    sums = _Sums(al, n_nonrel)
    groups: Dict[str, List[str]] = {}  # keys by measure, a measure's cutoffs computed at once
    for key in keys:
        groups.setdefault(key.partition("@")[0], []).append(key)
    out: Dict[str, Tensor] = {}
    for base, group in groups.items():
        cut = [int(g.partition("@")[2] or _WHOLE) for g in group]
        k = torch.tensor([min(c, _LONGEST) for c in cut], dtype=torch.int64)  # a cutoff past every list: whole
        values = sums.measure(base, k.expand(sums.q, len(group)), torch.tensor(cut, dtype=torch.float64))
        out.update({g: values[:, j] for j, g in enumerate(group)})
    return out


_LONGEST = torch.iinfo(torch.int64).max
_WHOLE = str(_LONGEST)  # no cutoff: the whole list


def _bpref(al, r: Tensor, n_nonrel: Tensor, blocks: list) -> Tensor:
    """m_bpref.c: over the judged retrieved documents in rank order, each relevant one adds
    ``1 - min(n, R) / min(N, R)`` (1 when n = 0); the sum is divided by R when R > 0."""
    f64 = torch.float64
    nonrel = (al.judged & ~al.relevant).to(torch.int64)
    above = (running_sums(nonrel, al.offsets) - nonrel).to(f64)
    rq = r.to(f64)[al.query]
    denom = torch.minimum(n_nonrel.to(f64)[al.query], rq)
    frac = torch.minimum(above, rq) / torch.where(above > 0, denom, torch.ones_like(denom))
    term = torch.where(above > 0, 1.0 - frac, torch.ones_like(frac))
    term = torch.where(al.relevant, term, torch.zeros_like(term))
    total = after(running_sums(term, al.offsets, blocks), al.offsets, al.num_ret)
    return torch.where(r > 0, total / r.to(f64).clamp_min(1.0), total)
