"""The tied groups of a Ranking (runs of equal scores), per rank: what ties="expected" averages over."""
from __future__ import annotations

from functools import cached_property
from typing import Optional

import torch
from torch import Tensor


__all__ = ["TieGroups", "safe_div"]


def safe_div(num: Tensor, den: Tensor) -> Tensor:
    """num / den, 0 where den == 0."""
    return torch.where(den != 0, num / torch.where(den != 0, den, torch.ones_like(den)), torch.zeros_like(num))


class TieGroups:
    """Per-rank view of a Ranking's tied groups (all ``[Q, d]`` float64 unless said).

    ``start``/``end``: int64 first and last in-Ranking position (0-based) of the
    group of each rank; ``offset``: rank minus the group's first rank; ``size``:
    the group's candidates (past the cut included); ``hits``, ``gain``,
    ``exp_gain``: the group's relevant count and summed gains; ``hits_before``
    and ``gain_before``: those of every rank ahead of the group.

    Example:
        >>> import torch
        >>> from retrieval_core.ranking import Ranking
        >>> r = Ranking.from_relevance(torch.tensor([[1.0, 0.0, 0.0]]))
        >>> r.scores = torch.tensor([[3.0, 3.0, 1.0]])
        >>> TieGroups(r).p_hit.tolist()
        [[0.5, 0.5, 0.0]]
    """

    def __init__(self, r: Ranking):
        if r.scores is None:
            raise ValueError("ties='expected' needs the scores in the Ranking")
        if not r.complete and r.tie_count is None:
            raise ValueError("ties='expected' needs the tie counts at the cut of a partial Ranking "
                             "(build it with ties='expected')")
        self.r = r
        s, v = r.scores, r.valid
        q, d = s.shape
        device = s.device
        new = torch.ones_like(v)
        new[:, 1:] = (s[:, 1:] != s[:, :-1]) | (v[:, 1:] != v[:, :-1])
        last = torch.ones_like(v)
        last[:, :-1] = new[:, 1:]
        pos = torch.arange(d, device=device)
        self.start = torch.where(new, pos, 0).cummax(1).values
        self.end = torch.where(last, pos, d - 1).flip(1).cummin(1).values.flip(1)
        self.offset = (pos - self.start).to(torch.float64)
        # the group of the last real candidate extends past the cut by tie_count (0 where the
        # row's list ends inside the Ranking; Rankings joined by Ranking.cat keep each part's
        # count at that part's own depth, followed by padding)
        self._past = None
        if not r.complete and r.tie_count is not None:
            self._past = self.end == (v.sum(1) - 1).unsqueeze(1)
        self.size = (self.end - self.start + 1).to(torch.float64) + self._extra(r.tie_count)
        self.hits, self.hits_before = self._sums(r.hit.to(torch.float64), r.tie_hits)
        self.gain, self.gain_before = self._sums(r.relevance, r.tie_gain)

    def _extra(self, past: Optional[Tensor]) -> Tensor:
        if self._past is None or past is None:
            return torch.zeros((), dtype=torch.float64, device=self.r.relevance.device)
        return torch.where(self._past, past.to(torch.float64).unsqueeze(1), 0.0)

    def _sums(self, x: Tensor, past: Optional[Tensor]):
        """(group total of x, total of x ahead of the group) per rank."""
        if self._past is not None and past is None:
            raise ValueError("ties='expected' needs the tie sums at the cut of a partial Ranking")
        c = torch.nn.functional.pad(x.cumsum(1), (1, 0))
        before = c.gather(1, self.start)
        return c.gather(1, self.end + 1) - before + self._extra(past), before

    @cached_property
    def exp_gain(self) -> Tensor:
        if self._past is not None and self.r.tie_exp_gain is None:
            raise ValueError("ties='expected' needs the exponential gain at the cut for dcg_exp/ndcg_exp")
        r = self.r
        past = r.tie_exp_gain
        if past is not None:  # scaled by 2^-tie_exp_shift; exp_shift is at least that
            past = past * torch.exp2((0.0 if r.tie_exp_shift is None else r.tie_exp_shift) - r.exp_shift)
        return self._sums(r.exp_relevance, past)[0]

    @cached_property
    def p_hit(self) -> Tensor:
        """Probability that the candidate at each rank is relevant: h / m."""
        return self.hits / self.size

    @cached_property
    def cum_hits(self) -> Tensor:
        """Expected hits@i."""
        return self.p_hit.cumsum(1)

    @cached_property
    def pair_hits(self) -> Tensor:
        """(h - 1) / (m - 1): P(another given member of the group is relevant | this one is)."""
        return safe_div(self.hits - 1.0, self.size - 1.0)

    @cached_property
    def none_yet(self) -> Tensor:
        """P(no relevant candidate among the group's ranks up to and including this one),
        C(m-h, o+1) / C(m, o+1), as a running product of (m-h-j)/(m-j) over the row: right
        wherever no group ahead holds a relevant candidate (every factor there is 1)."""
        factor = ((self.size - self.hits - self.offset) / (self.size - self.offset)).clamp(min=0.0)
        return factor.cumprod(1)

    @cached_property
    def none_before(self) -> Tensor:
        """As :attr:`none_yet`, excluding this rank: C(m-h, o) / C(m, o)."""
        return torch.nn.functional.pad(self.none_yet[:, :-1], (1, 0), value=1.0)

    def at_cut(self, t: Tensor, c) -> Tensor:
        """Row values of ``t[Q, d]`` at 0-based position ``c - 1`` (c an int or [Q] tensor >= 1)."""
        if isinstance(c, Tensor):
            return t.gather(1, (c - 1).clamp(min=0).unsqueeze(1)).squeeze(1)
        return t[:, c - 1]
