"""trec_eval's interpolated precision, on padded ``[Q, D]`` tensors in rank order (no loop
over queries; everything on the tensors' device). bpref and gm_map, whose sums must be
trec_eval's, are in :mod:`retrieval_core.trec.exact`.

* ``iprec_at_recall`` (m_iprec_at_recall.c): at recall level ``x`` the number of relevant
  documents needed is ``c = lround(x * R)`` (trec_eval 10; ``rule="v9"``: trec_eval 9 and
  pytrec_eval, ``c = floor(x * R + 0.9)``); the value is the highest precision at or after
  the rank of the c-th relevant retrieved document (any rank for ``c = 0``), 0 when fewer
  than ``c`` relevant documents are retrieved.

Example:
    >>> import torch
    >>> rel = torch.tensor([[False, True, False, True]])
    >>> iprec_at_recall(rel, torch.tensor([2]), [0.0, 0.5, 1.0]).tolist()
    [[0.5, 0.5, 0.5]]
    >>> top = torch.tensor([[True, False, False, True]])   # R = 3, x R = 1.2: c = 1 (lround), 2 (v9: floor(2.1))
    >>> iprec_at_recall(top, torch.tensor([3]), [0.4]).tolist(), iprec_at_recall(top, torch.tensor([3]), [0.4], "v9")
    ([[1.0]], tensor([[0.5000]], dtype=torch.float64))
"""
from __future__ import annotations

from typing import Sequence

import torch
from torch import Tensor

__all__ = ["GM_FLOOR", "IPREC_RULES", "iprec_at_recall"]

GM_FLOOR = 1e-5  # trec_eval's MIN_GEO_MEAN
IPREC_RULES = ("lround", "v9")


def iprec_at_recall(relevant: Tensor, n_relevant: Tensor, levels: Sequence[float], rule: str = "lround") -> Tensor:
    """``[Q, len(levels)]`` interpolated precision at the recall ``levels`` (module doc);
    ``rule``: ``"lround"`` (trec_eval 10) or ``"v9"`` (trec_eval 9, pytrec_eval)."""
    if rule not in IPREC_RULES:
        raise ValueError(f"rule must be one of {list(IPREC_RULES)} (trec_eval 10, trec_eval 9); got {rule!r}")
    q, d = relevant.shape
    device = relevant.device
    out = torch.zeros(q, len(levels), dtype=torch.float64, device=device)
    if d == 0 or q == 0:
        return out
    cum = torch.cumsum(relevant.to(torch.int64), 1)
    rank = torch.arange(1, d + 1, device=device, dtype=torch.float64)
    prec = torch.where(relevant, cum / rank, torch.zeros((), dtype=torch.float64, device=device))
    best_after = torch.flip(torch.cummax(torch.flip(prec, [1]), 1).values, [1])  # max over ranks >= i
    x = torch.tensor(list(levels), dtype=torch.float64, device=device)
    share = x.unsqueeze(0) * n_relevant.to(torch.float64).unsqueeze(1)
    whole = torch.floor(share)
    # lround: half away from zero (share - whole is exact here); v9: + 0.9, truncated
    need = (whole + (share - whole >= 0.5) if rule == "lround" else torch.floor(share + 0.9)).to(torch.int64)
    # the rank of the c-th relevant document: the first position where the count reaches c
    pos = torch.searchsorted(cum.contiguous(), need.clamp_min(1).contiguous())
    pos = torch.where(need == 0, torch.zeros_like(pos), pos)
    found = (need <= cum[:, -1:]) & (pos < d)
    got = best_after.gather(1, pos.clamp_max(d - 1))
    return torch.where(found, got, out)
