"""The Ranking: for each query, the first ``depth`` retrieved candidates in rank order.

Every input mode (dense scores, grouped flat scores, embeddings) is turned into
this one structure; the metric kernels read nothing else.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Optional

import torch
from torch import Tensor

from .gains import EXP_HEADROOM, exp_gain
from .tie_groups import TieGroups

__all__ = ["Ranking", "discounts"]


def discounts(start: int, stop: int, device=None) -> Tensor:
    """``[stop - start]`` DCG discounts 1 / log2(rank + 1) of the ranks ``start + 1 .. stop``
    (the same values, bit for bit, whichever slice of ranks is asked for)."""
    return 1.0 / torch.log2(torch.arange(start + 1, stop + 1, dtype=torch.float64, device=device) + 1.0)


def _lowest(t: Tensor):
    """Padding for scores: -inf, or the integer dtype's minimum (integer scores stay integers)."""
    return float("-inf") if t.is_floating_point() else torch.iinfo(t.dtype).min


def _cat_shifts(parts) -> Optional[Tensor]:
    """The parts' ``tie_exp_shift`` joined (a part without one: zeros); None if none has one."""
    if all(p.tie_exp_shift is None for p in parts):
        return None
    return torch.cat([p.tie_exp_shift if p.tie_exp_shift is not None
                      else p.n_relevant.new_zeros(p.n_queries, dtype=torch.float64) for p in parts])


def _one_mode(parts) -> str:
    modes = {p.ties for p in parts}
    if len(modes) > 1:
        raise ValueError(f"cannot join Rankings built for different tie modes: {sorted(modes)}")
    return modes.pop() if modes else "stable"


@dataclass(eq=False)
class Ranking:
    """Top-``depth`` candidates of ``Q`` queries, all tensors on one device.

    Attributes:
        relevance: ``[Q, d]`` float64 gain of the candidate at each rank
            (0 = not relevant, and 0 past the end of a short list).
        valid: ``[Q, d]`` bool, False past the end of a short candidate list.
        n_relevant: ``[Q]`` int64, R: candidates with gain > 0 in the whole list.
        n_candidates: ``[Q]`` int64, candidates in the whole list.
        ideal: ``[Q, m]`` float64, the query's ``m`` largest gains in decreasing
            order, 0-padded (for nDCG's ideal DCG; ``m`` is ``d`` from the builders and
            may exceed it for a list cut from a larger collection); None when no
            requested metric needs it or ``ideal_ones`` stands for it.
        ideal_ones: optional ``[Q]`` int64 (with 0/1 gains): the ideal gains are this many
            ones, a count instead of slots (R given from outside the list).
        ideal_ones_max: optional host int, at least every ``ideal_ones``: the kernels sum
            discounts to it without reading the largest count (None: they read it).
        complete: True when ``d`` reaches every candidate of every query, so
            whole-list metrics (map, mrr, auroc) are exact.
        scores: optional ``[Q, d]`` scores in rank order.
        tie_count: optional ``[Q]``: candidates past rank ``d`` whose score equals
            the score at rank ``d`` (ready for tie-aware modes).
        tie_gain: optional ``[Q]``: the summed gain of those candidates.
        tie_hits: optional ``[Q]``: how many of them are relevant (gain > 0).
        tie_exp_gain: optional ``[Q]``: their summed exponential gain 2^g - 1, times
            ``2^-tie_exp_shift`` (see :attr:`exp_shift`).
        tie_exp_shift: optional ``[Q]`` float64 integers >= 0 (None: 0), the power of two
            that ``tie_exp_gain`` is scaled down by.
        ties: the tie mode the Ranking was built for: ``"stable"``, ``"optimistic"`` and
            ``"pessimistic"`` are orders (the builder ordered tied candidates), with
            ``"expected"`` the kernels average over the orders of tied candidates
            (:mod:`retrieval_core.metrics.tie_kernels`; it needs ``scores`` and the tie fields).
        inexact: optional ``[Q]`` bool, from the builders' ``select="deferred"``: rows
            whose score at rank ``d`` ties with a candidate past it, so that the tied
            candidates kept may not be the lowest-indexed ones; the caller re-ranks
            them exactly (None: every row is exact).
        index: optional ``[Q, d]`` int64, the candidate (column) at each rank, as the
            builders found it (for ``return_neighbours``).

    Example:
        >>> import torch
        >>> r = Ranking.from_relevance(torch.tensor([[0.0, 2.0, 0.0]]))
        >>> r.cum_hits.tolist()
        [[0, 1, 1]]
    """

    relevance: Tensor
    valid: Tensor
    n_relevant: Tensor
    n_candidates: Tensor
    ideal: Optional[Tensor] = None
    complete: bool = False
    scores: Optional[Tensor] = None
    tie_count: Optional[Tensor] = None
    tie_gain: Optional[Tensor] = None
    inexact: Optional[Tensor] = None
    tie_hits: Optional[Tensor] = None
    tie_exp_gain: Optional[Tensor] = None
    ties: str = "stable"
    index: Optional[Tensor] = None
    tie_exp_shift: Optional[Tensor] = None
    ideal_ones: Optional[Tensor] = None
    ideal_ones_max: Optional[int] = None

    @classmethod
    def from_relevance(cls, relevance: Tensor, valid: Optional[Tensor] = None) -> "Ranking":
        """A complete Ranking from gains already in rank order (tests, toys)."""
        relevance = relevance.to(torch.float64)
        if valid is None:
            valid = torch.ones_like(relevance, dtype=torch.bool)
        relevance = relevance * valid
        return cls(
            relevance=relevance,
            valid=valid,
            n_relevant=(relevance > 0).sum(1),
            n_candidates=valid.sum(1),
            ideal=relevance.sort(dim=1, descending=True).values,
            complete=True,
        )

    @classmethod
    def cat(cls, parts: "list[Ranking]") -> "Ranking":
        """Stack the queries of several Rankings, padding shallower ones (valid=False)."""
        d = max(p.depth for p in parts)
        m = max([d] + [p.ideal.shape[1] for p in parts if p.ideal is not None])  # an ideal may be wider

        def pad(t: Optional[Tensor], value, width: int = d) -> Optional[Tensor]:
            return None if t is None else torch.nn.functional.pad(t, (0, width - t.shape[1]), value=value)

        def cat_opt(ts):
            return None if any(t is None for t in ts) else torch.cat(ts)

        return cls(
            relevance=torch.cat([pad(p.relevance, 0.0) for p in parts]),
            valid=torch.cat([pad(p.valid, False) for p in parts]),
            n_relevant=torch.cat([p.n_relevant for p in parts]),
            n_candidates=torch.cat([p.n_candidates for p in parts]),
            ideal=cat_opt([pad(p.ideal, 0.0, m) for p in parts]),
            complete=all(p.complete for p in parts),
            scores=cat_opt([pad(p.scores, _lowest(p.scores)) if p.scores is not None else None for p in parts]),
            tie_count=cat_opt([p.tie_count for p in parts]),
            tie_gain=cat_opt([p.tie_gain for p in parts]),
            inexact=cat_opt([p.inexact for p in parts]),
            tie_hits=cat_opt([p.tie_hits for p in parts]),
            tie_exp_gain=cat_opt([p.tie_exp_gain for p in parts]),
            ties=_one_mode(parts),
            tie_exp_shift=_cat_shifts(parts),
            ideal_ones=cat_opt([p.ideal_ones for p in parts]),
            ideal_ones_max=None if any(p.ideal_ones_max is None for p in parts)
            else max(p.ideal_ones_max for p in parts),
        )

    def select(self, rows: Tensor) -> "Ranking":
        """The Ranking of a subset (or a reordering) of the queries."""

        def take(t: Optional[Tensor]) -> Optional[Tensor]:
            return None if t is None else t[rows]

        return Ranking(
            relevance=self.relevance[rows],
            valid=self.valid[rows],
            n_relevant=self.n_relevant[rows],
            n_candidates=self.n_candidates[rows],
            ideal=take(self.ideal),
            complete=self.complete,
            scores=take(self.scores),
            tie_count=take(self.tie_count),
            tie_gain=take(self.tie_gain),
            inexact=take(self.inexact),
            tie_hits=take(self.tie_hits),
            tie_exp_gain=take(self.tie_exp_gain),
            ties=self.ties,
            tie_exp_shift=take(self.tie_exp_shift),
            ideal_ones=take(self.ideal_ones),
            ideal_ones_max=self.ideal_ones_max,
        )

    @property
    def depth(self) -> int:
        return self.relevance.shape[1]

    @property
    def n_queries(self) -> int:
        return self.relevance.shape[0]

    # Derived per-rank quantities, computed once and shared by every kernel. Counts
    # are exact integers (int32 up to 2**31 ranks); float64 only where a sum needs it.
    @cached_property
    def hit(self) -> Tensor:
        """``[Q, d]`` bool: the candidate at the rank is relevant (gain > 0)."""
        return self.relevance > 0

    @cached_property
    def count_dtype(self) -> torch.dtype:
        """int32, or int64 for rankings deeper than int32 counts."""
        return torch.int32 if self.depth < 2**31 else torch.int64

    @cached_property
    def positions(self) -> Tensor:
        """``[d]`` ranks 1..d as float64."""
        return torch.arange(1, self.depth + 1, dtype=torch.float64, device=self.relevance.device)

    @cached_property
    def discount(self) -> Tensor:
        """``[d]`` DCG discount 1 / log2(rank + 1)."""
        return discounts(0, self.depth, self.relevance.device)

    @cached_property
    def cum_hits(self) -> Tensor:
        """``[Q, d]`` hits@i for i = 1..d (``count_dtype``)."""
        return self.hit.cumsum(1, dtype=self.count_dtype)

    @cached_property
    def cum_valid(self) -> Tensor:
        """``[Q, d]`` real candidates among the first i (``count_dtype``)."""
        return self.valid.cumsum(1, dtype=self.count_dtype)

    @cached_property
    def cum_gain(self) -> Tensor:
        """``[Q, d]`` summed gain of the first i candidates."""
        return self.relevance.cumsum(1)

    @cached_property
    def cum_precision_hits(self) -> Tensor:
        """``[Q, d]`` float64 sum over j <= i of P@j * rel_j (average precision numerator)."""
        return (self.hit * self.cum_hits / self.positions).cumsum(1)

    @cached_property
    def exp_shift(self) -> Tensor:
        """``[Q]`` float64 integers >= 0: exponential gains (dcg_exp, ndcg_exp) are computed as
        ``(2^g - 1) * 2^-exp_shift``, exact in binary floating point, so that neither a gain
        (2^g overflows float64 from g = 1024 on) nor a sum of gains overflows. 0 unless a
        gain of the query (ranked, ideal, or tied past the cut) exceeds ``EXP_HEADROOM``."""
        top = self.relevance.amax(1) if self.depth else self.relevance.new_zeros(self.n_queries)
        if self.ideal is not None and self.ideal.shape[1]:
            top = torch.maximum(top, self.ideal[:, 0])
        shift = (torch.ceil(top) - EXP_HEADROOM).clamp(min=0.0)
        return shift if self.tie_exp_shift is None else torch.maximum(shift, self.tie_exp_shift)

    @cached_property
    def exp_relevance(self) -> Tensor:
        """``[Q, d]`` 2^g - 1 of the ranked gains, scaled by ``2^-exp_shift`` per query (the
        exponential gains of dcg_exp and ndcg_exp, their tied groups' included)."""
        return exp_gain(self.relevance, self.exp_shift)

    @cached_property
    def tie_groups(self):
        """The tied groups of the Ranking (:class:`~retrieval_core.ranking.tie_groups.TieGroups`),
        for ``ties="expected"``."""
        return TieGroups(self)

    @cached_property
    def first_hit(self) -> Tensor:
        """``[Q]`` int64 rank (1-based) of the first relevant candidate, 0 if none."""
        hit = self.hit.to(torch.uint8)  # argmax takes no bool; the first maximum is returned
        return torch.where(self.hit.any(1), hit.argmax(1) + 1, torch.zeros_like(self.n_relevant))
