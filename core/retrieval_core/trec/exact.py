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
from typing import Dict, Optional, Sequence

import torch
from torch import Tensor

from .kernels import GM_FLOOR

__all__ = ["after", "running_sums", "sequential_mean", "sequential_gm", "trec_values", "EXACT"]

# our keys whose values are computed here (trec_eval's measures); "@k" takes a positive int cutoff
EXACT = ("map", "map@", "precision@", "recall@", "r_precision", "mrr", "hit_rate@", "ndcg", "ndcg@", "dcg", "dcg@",
         "bpref", "num_q", "num_ret", "num_rel", "num_rel_ret", "num_nonrel_judged_ret")


def is_exact(key: str) -> bool:
    """Whether ``key`` is computed here (a trec_eval measure, or dcg)."""
    base, sep, arg = key.partition("@")
    return (key in EXACT and not sep) or (bool(sep) and base + "@" in EXACT and arg.isdigit())


def running_sums(values: Tensor, offsets: Tensor) -> Tensor:
    """Within each segment ``offsets[i]:offsets[i + 1]`` of ``values``, the running sums,
    each entry added to the sum before it (left to right, as a C loop does)."""
    out = torch.empty_like(values)
    n = offsets[1:] - offsets[:-1]
    if values.numel() == 0:
        return out
    # rows of lengths in (2^(b-1), 2^b] padded together: at most twice the entries
    group = torch.ceil(torch.log2(n.clamp_min(1).to(torch.float64))).to(torch.int64)
    group = torch.where(n > 0, group, torch.full_like(group, -1))
    for b in torch.unique(group).tolist():
        if b < 0:
            continue
        rows = torch.nonzero(group == b).squeeze(1)
        lens = n[rows]
        col = torch.arange(int(lens.max()))
        inside = col.unsqueeze(0) < lens.unsqueeze(1)
        idx = offsets[rows].unsqueeze(1) + col.unsqueeze(0)
        dense = torch.zeros(inside.shape, dtype=values.dtype)
        dense[inside] = values[idx[inside]]
        out[idx[inside]] = torch.cumsum(dense, 1)[inside]
    return out


def after(running: Tensor, offsets: Tensor, k: Tensor) -> Tensor:
    """Per segment, the running sum after its first ``k`` entries (``[Q]``, clamped to the
    segment's length; 0 when that is 0)."""
    n = offsets[1:] - offsets[:-1]
    k = torch.minimum(k.to(torch.int64), n)
    zero = torch.zeros(len(n), dtype=running.dtype)
    if running.numel() == 0:
        return zero
    got = running[(offsets[:-1] + k - 1).clamp(0, running.numel() - 1)]
    return torch.where(k > 0, got, zero)


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


def trec_values(al, keys: Sequence[str], n_nonrel: Optional[Tensor] = None) -> Dict[str, Tensor]:
    """``{key: [Q] float64}`` for the keys :func:`is_exact` accepts, from an aligned run
    ``al`` (:class:`~retrieval_core.trec.Aligned`); ``n_nonrel``: the judged non-relevant
    documents of each query in the qrels (for bpref)."""
    offsets, q = al.offsets, len(al.query_ids)
    f64 = torch.float64
    r = al.n_relevant.to(torch.int64)
    rf = r.to(f64)
    rel = al.relevant
    count = running_sums(rel.to(torch.int64), offsets)   # relevant retrieved up to each rank
    ret = al.num_ret
    zero = torch.zeros(q, dtype=f64)
    out: Dict[str, Tensor] = {}
    cache: Dict[str, Tensor] = {}

    def rel_at(k: Tensor) -> Tensor:
        return after(count, offsets, k).to(f64)

    def ap_running() -> Tensor:  # m_map.c: sum += rel_so_far / rank at each relevant rank
        if "ap" not in cache:
            rank = al.rank.to(f64)
            cache["ap"] = running_sums(torch.where(rel, count.to(f64) / rank, torch.zeros_like(rank)), offsets)
        return cache["ap"]

    def dcg_running() -> Tensor:  # m_ndcg.c, m_ndcg_cut.c: sum += gain / log2(rank + 1)
        if "dcg" not in cache:
            cache["dcg"] = running_sums(_dcg_terms(al.gain, al.rank - 1), offsets)
        return cache["dcg"]

    def ideal_running() -> Tensor:  # the same over the query's positive rels, descending
        if "ideal" not in cache:
            io = al.ideal_offsets
            counts = io[1:] - io[:-1]
            row = torch.repeat_interleave(torch.arange(q), counts)
            position = torch.arange(al.ideal.numel()) - io[row] if al.ideal.numel() else al.ideal.to(torch.int64)
            cache["ideal"] = running_sums(_dcg_terms(al.ideal, position), io)
        return cache["ideal"]

    big = torch.full((q,), torch.iinfo(torch.int64).max)
    for key in keys:
        base, _, arg = key.partition("@")
        k = torch.full((q,), int(arg), dtype=torch.int64) if arg else big
        if key in ("num_q", "num_ret", "num_rel", "num_rel_ret", "num_nonrel_judged_ret"):
            counts = {"num_q": torch.ones(q, dtype=torch.int64), "num_ret": ret, "num_rel": r,
                      "num_rel_ret": al.num_rel_ret, "num_nonrel_judged_ret": al.num_nonrel_judged_ret}
            out[key] = counts[key].to(f64)
        elif base == "precision":  # m_P.c: rel_so_far / cutoff
            out[key] = rel_at(k) / float(arg)
        elif base == "recall":  # m_recall.c: rel_so_far / R, 0 when R = 0
            out[key] = torch.where(r > 0, rel_at(k) / rf, zero)
        elif base == "hit_rate":  # m_success.c
            out[key] = (rel_at(k) > 0).to(f64)
        elif key == "r_precision":  # m_Rprec.c: relevant in the first min(num_ret, R) / R
            out[key] = torch.where(torch.minimum(ret, r) > 0, rel_at(r) / rf, zero)
        elif key == "mrr":  # m_recip_rank.c: 1 / the first relevant rank
            first = torch.full((q,), torch.iinfo(torch.int64).max).scatter_reduce(
                0, al.query[rel], al.rank[rel], "amin")
            out[key] = torch.where(al.num_rel_ret > 0, 1.0 / first.to(f64), zero)
        elif base == "map":  # m_map.c / m_map_cut.c: the running sum / R
            total = after(ap_running(), offsets, k)
            out[key] = torch.where(r > 0, total / rf.clamp_min(1.0), zero)
        elif base == "ndcg":  # m_ndcg.c / m_ndcg_cut.c: DCG / ideal DCG, 0 when the ideal is 0
            dcg = after(dcg_running(), offsets, k)
            ideal = after(ideal_running(), al.ideal_offsets, k)
            out[key] = torch.where(ideal > 0, dcg / torch.where(ideal > 0, ideal, torch.ones_like(ideal)), zero)
        elif base == "dcg":  # trec_eval's dcg: graded gains (m_ndcg.c)
            out[key] = after(dcg_running(), offsets, k)
        elif key == "bpref":
            out[key] = _bpref(al, count, r, n_nonrel)
        else:
            raise ValueError(f"{key!r} is not one of trec_eval's measures computed here")
    return out


def _bpref(al, count: Tensor, r: Tensor, n_nonrel: Tensor) -> Tensor:
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
    total = after(running_sums(term, al.offsets), al.offsets, al.num_ret)
    return torch.where(r > 0, total / r.to(f64).clamp_min(1.0), total)
