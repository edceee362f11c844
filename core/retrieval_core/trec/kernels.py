"""trec_eval's interpolated precision, on the flat entries of an aligned run (query by query
in rank order, ``offsets``; no loop over queries, memory linear in the entries; on the CPU).
The measures whose sums must be trec_eval's are in :mod:`retrieval_core.trec.exact`.

* ``iprec_at_recall`` (m_iprec_at_recall.c): at recall level ``x`` the number of relevant
  documents needed is ``c = lround(x * R)`` (trec_eval 10; ``rule="v9"``: trec_eval 9 and
  pytrec_eval, ``c = floor(x * R + 0.9)``); the value is the highest precision at or after
  the rank of the c-th relevant retrieved document (any rank for ``c = 0``), 0 when fewer
  than ``c`` relevant documents are retrieved. An empty list (``-M 0``, or ``-J`` removing
  every document) has no precision: trec_eval divides 0 by 0 there, so ``c = 0`` gives NaN
  (printed ``-nan``; trec_eval 9 and 10 alike), a larger ``c`` 0.

Example (two queries, flat: their retrieved documents' relevance in rank order):
    >>> import torch
    >>> rel = torch.tensor([False, True, False, True,   True, False, False, True])
    >>> offsets, r = torch.tensor([0, 4, 8]), torch.tensor([2, 3])
    >>> iprec_at_recall(rel, offsets, r, [0.0, 0.5, 1.0]).tolist()   # query 2: R = 3, 2 retrieved
    [[0.5, 0.5, 0.5], [1.0, 0.5, 0.0]]
    >>> iprec_at_recall(rel, offsets, r, [0.4]).tolist(), iprec_at_recall(rel, offsets, r, [0.4], "v9").tolist()
    ([[0.5], [1.0]], [[0.5], [0.5]])
    >>> iprec_at_recall(rel[:0], torch.tensor([0, 0]), torch.tensor([3]), [0.1, 0.5]).tolist()  # empty list
    [[nan, 0.0]]
"""
from __future__ import annotations

from typing import Optional, Sequence

import torch
from torch import Tensor

from .exact import GM_FLOOR, along_rows, running_sums

__all__ = ["GM_FLOOR", "IPREC_RULES", "iprec_at_recall"]

IPREC_RULES = ("lround", "v9")
NAN = float("-nan")  # 0.0 / 0.0 on x86-64: trec_eval prints it -nan


def iprec_at_recall(relevant: Tensor, offsets: Tensor, n_relevant: Tensor, levels: Sequence[float],
                    rule: str = "lround", retrieved: Optional[Tensor] = None) -> Tensor:
    """``[Q, len(levels)]`` interpolated precision at the recall ``levels`` (module doc) of the
    queries' retrieved documents ``relevant[offsets[i]:offsets[i + 1]]`` (bool, rank order),
    R ``n_relevant``; ``rule``: ``"lround"`` (trec_eval 10) or ``"v9"`` (trec_eval 9, pytrec_eval);
    ``retrieved``: the documents trec_eval counts per query (default the list's length; under
    ``-c`` a query the run lacks counts trec_eval's one made-up document)."""
    if rule not in IPREC_RULES:
        raise ValueError(f"rule must be one of {list(IPREC_RULES)} (trec_eval 10, trec_eval 9); got {rule!r}")
    f64 = torch.float64
    n = offsets[1:] - offsets[:-1]
    count = running_sums(relevant.to(torch.int64), offsets)  # relevant so far, at each rank
    rank = torch.arange(len(relevant)) - torch.repeat_interleave(offsets[:-1], n) + 1
    prec = torch.where(relevant, count.to(f64) / rank.to(f64), torch.zeros(len(relevant), dtype=f64))
    # the highest precision at this rank or after, within the query (padding: 0, after the list)
    best = along_rows(prec, offsets, lambda d: torch.flip(torch.cummax(torch.flip(d, [1]), 1).values, [1]))
    share = torch.tensor(list(levels), dtype=f64).unsqueeze(0) * n_relevant.to(f64).unsqueeze(1)
    whole = torch.floor(share)
    # lround: half away from zero (share - whole is exact here); v9: + 0.9, truncated
    need = (whole + (share - whole >= 0.5) if rule == "lround" else torch.floor(share + 0.9)).to(torch.int64)
    rel_ret = torch.zeros(len(n), dtype=torch.int64).index_add_(
        0, torch.repeat_interleave(torch.arange(len(n)), n), relevant.to(torch.int64)).unsqueeze(1)
    at_rel = torch.nonzero(relevant).squeeze(1)  # the relevant retrieved, query by query in rank order
    first = (torch.cumsum(rel_ret[:, 0], 0) - rel_ret[:, 0]).unsqueeze(1)
    # the c-th relevant retrieved (the first for c = 0: the best precision of the whole list)
    pos = (first + need.clamp_min(1) - 1).clamp(0, max(len(at_rel) - 1, 0))
    got = best[at_rel[pos]] if len(at_rel) else torch.zeros(need.shape, dtype=f64)
    value = torch.where((need <= rel_ret) & (rel_ret > 0), got, torch.zeros_like(got))
    # nothing retrieved: trec_eval's num_rel_ret / num_ret is 0 / 0, kept for the levels needing 0 documents
    none = ((n if retrieved is None else retrieved) == 0).unsqueeze(1) & (need <= 0)
    return value.masked_fill(none, NAN)
