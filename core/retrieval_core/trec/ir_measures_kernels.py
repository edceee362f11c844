"""ir_measures' measures that trec_eval lacks, on a run aligned to qrels (:func:`~retrieval_core.trec.align`).

* ``judged@k`` (ir_measures' ``Judged@k``): the share of the first ``min(k, num_ret)`` entries
  that the qrels hold, whatever their rel (a negative rel included: ir_measures' judged provider
  asks ``doc in qrels``); 0 for an empty list. ``judged``: the whole list.
* ``gdeval_err@k`` (ir_measures' ``ERR@k``, which its gdeval provider computes with gdeval.pl
  1.2a): ``sum_{i<=k} R_i / i prod_{j<i} (1 - R_j)``, ``R_i = (2^g_i - 1) / 2^4``, g the judged
  positive rel (else 0) and 4 gdeval's largest grade (it refuses qrels with a larger one, as
  this does). This library's ``err@k`` divides by ``2^g_max`` of each query instead.
* ``compat@p`` / ``compat_unnormalized@p`` (ir_measures' ``Compat(p=)``, Clarke, Vtyurina and
  Smucker 2021): the rank-biased overlap of the list with the ideal ranking (the documents with
  rel > 0, by rel descending, then by the run's score descending, a document not retrieved
  counting 0.0, then in the list's order), to depth ``D = max(list, ideal)``:
  ``sum_{d<=D} p^(d-1) |list_d ∩ ideal_d| / d`` over ``sum_{d<=D} p^(d-1)``, divided by the same
  for the ideal with itself when normalised (when that is > 0). A document lies in both
  prefixes from depth ``max(its rank, its ideal position)`` on, so the overlap sum is, per such
  document, ``S(D) - S(depth - 1)`` with ``S(d) = sum_{j<=d} p^(j-1) / j``.

Example:
    >>> from retrieval_core.trec import align, qrels_from_dict, run_from_dict
    >>> qrels = qrels_from_dict({"q": {"a": 2, "b": 0, "c": 1, "z": -1}})
    >>> al = align(run_from_dict({"q": {"a": 0.9, "d": 0.8, "z": 0.7, "c": 0.6}}), qrels)
    >>> judged_share(al, 2).item(), judged_share(al, None).item()   # a, z, c in the qrels
    (0.5, 0.75)
    >>> round(gdeval_err(al, None).item(), 6)   # 3/16 + (13/16)(1/16)/4
    0.200195
    >>> round(compat(al, 0.5, normalize=False).item(), 6)  # ideal a, c: (1 + .5/2 + .25/3 + .125 2/4) / 1.875
    0.744444
"""
from __future__ import annotations

from typing import Optional

import torch
from torch import Tensor

from ._parse import numpy
from .exact import after, along_rows, running_sums

__all__ = ["GDEVAL_MAX_GRADE", "KEYS", "compat", "gdeval_err", "ir_measures_value", "is_ir_measures_key",
           "judged_share"]

GDEVAL_MAX_GRADE = 4  # gdeval.pl's $MAX_JUDGMENT
KEYS = ("judged", "gdeval_err", "compat", "compat_unnormalized")  # with "@k" (judged, gdeval_err) or "@p" (compat)


def is_ir_measures_key(key: str) -> bool:
    """Whether ``key`` is one of this module's (``judged@10``, ``gdeval_err``, ``compat@0.95``)."""
    return key.partition("@")[0] in KEYS


def ir_measures_value(al, key: str) -> Tensor:
    """``[Q]`` float64: the value of one of this module's keys on an aligned run."""
    base, _, arg = key.partition("@")
    if base.startswith("compat"):
        return compat(al, float(arg), normalize=base == "compat")[:, 0]
    k = int(arg) if arg else None
    return (judged_share(al, k) if base == "judged" else gdeval_err(al, k))[:, 0]


def _cut(al, k: Optional[int]) -> Tensor:
    """``[Q, 1]``: ``min(k, num_ret)`` (the whole list with None)."""
    n = al.num_ret
    return (n if k is None else torch.clamp(n, max=k)).unsqueeze(1)


def judged_share(al, k: Optional[int]) -> Tensor:
    """``[Q, 1]``: the pooled share of the first ``min(k, num_ret)`` entries (0 for none)."""
    c = _cut(al, k)
    pooled = after(running_sums(al.pooled.to(torch.int64), al.offsets), al.offsets, c).to(torch.float64)
    return torch.where(c > 0, pooled / c.clamp_min(1).to(torch.float64), torch.zeros_like(pooled))


def gdeval_err(al, k: Optional[int]) -> Tensor:
    """``[Q, 1]``: gdeval's ERR of the first ``k`` entries (module doc)."""
    if al.ideal.numel() and float(al.ideal.max()) > GDEVAL_MAX_GRADE:
        raise ValueError(f"ERR (ir_measures' gdeval provider) takes relevance grades up to {GDEVAL_MAX_GRADE}; "
                         f"the qrels hold {int(al.ideal.max())} (gdeval.pl refuses them too)")
    stop = (torch.pow(2.0, al.gain) - 1.0) / 2.0 ** GDEVAL_MAX_GRADE

    def before(rows: Tensor) -> Tensor:  # prod_{j<i} (1 - R_j) along each row
        return torch.nn.functional.pad(torch.cumprod(rows, 1)[:, :-1], (1, 0), value=1.0)

    survive = along_rows(1.0 - stop, al.offsets, before) if stop.numel() else stop
    term = stop * survive / al.rank.to(torch.float64)
    return after(running_sums(term, al.offsets), al.offsets, _cut(al, k))


def _ideal_positions(al, score) -> tuple:
    """``(entries, position)``: the retrieved entries with rel > 0 and their 1-based places in
    the ideal ranking (module doc)."""
    np = numpy()
    gain, query, io = al.gain.numpy(), al.query.numpy(), al.ideal_offsets.numpy()
    ideal = al.ideal.numpy()
    pos = np.flatnonzero(gain > 0)
    g, q, s, r = gain[pos], query[pos], score[pos], al.rank.numpy()[pos]
    levels = np.unique(np.concatenate([ideal, g]))
    width = len(levels)
    iq = np.repeat(np.arange(len(io) - 1), np.diff(io))
    ideal_key = iq * width + (width - 1 - np.searchsorted(levels, ideal))  # ascending: rel descending per query
    key = q * width + (width - 1 - np.searchsorted(levels, g))
    greater = np.searchsorted(ideal_key, key, "left") - io[q]
    same = np.searchsorted(ideal_key, key, "right") - np.searchsorted(ideal_key, key, "left")
    order = np.lexsort((r, -s, key))  # by query and rel descending, then score descending, then rank
    first = np.zeros(len(order), np.int64)
    if len(order):
        new = np.r_[True, key[order][1:] != key[order][:-1]]
        first[order] = np.maximum.accumulate(np.where(new, np.arange(len(order)), 0))
    within = np.empty(len(order), np.int64)
    within[order] = np.arange(len(order))
    within -= first
    _, group = np.unique(key, return_inverse=True)
    unretrieved = same - np.bincount(group)[group]  # the ideal's documents of this rel not in the list
    return pos, 1 + greater + within + np.where(s < 0.0, unretrieved, 0)


def compat(al, p: float, normalize: bool = True) -> Tensor:
    """``[Q, 1]``: ir_measures' Compat (module doc)."""
    f64 = torch.float64
    entries, position = _ideal_positions(al, al.score.numpy())
    n_ideal = al.ideal_offsets[1:] - al.ideal_offsets[:-1]
    depth = torch.maximum(al.num_ret, n_ideal)
    longest = int(depth.max()) if len(depth) else 0
    weight = torch.pow(torch.tensor(p, dtype=f64), torch.arange(longest, dtype=f64))  # p^(d-1), d = 1..
    w_sum = torch.cat([torch.zeros(1, dtype=f64), torch.cumsum(weight, 0)])         # sum_{j<=d} p^(j-1)
    s = torch.cat([torch.zeros(1, dtype=f64), torch.cumsum(weight / torch.arange(1, longest + 1, dtype=f64), 0)])
    both = torch.maximum(al.rank[torch.from_numpy(entries)], torch.from_numpy(position))
    q = al.query[torch.from_numpy(entries)]
    overlap = torch.zeros(len(depth), dtype=f64).index_add_(0, q, s[depth[q]] - s[both - 1])
    # the ideal with itself: its document at place j counts from depth j on
    j = torch.arange(int(al.ideal_offsets[-1])) - torch.repeat_interleave(al.ideal_offsets[:-1], n_ideal)
    iq = torch.repeat_interleave(torch.arange(len(depth)), n_ideal)
    best = torch.zeros(len(depth), dtype=f64).index_add_(0, iq, s[depth[iq]] - s[j])
    if normalize:
        value = torch.where(best > 0, overlap / torch.where(best > 0, best, torch.ones_like(best)), overlap)
    else:
        value = overlap / torch.where(depth > 0, w_sum[depth], torch.ones_like(overlap))
    return torch.where(depth > 0, value, torch.zeros_like(value)).unsqueeze(1)
