"""Rankings: the Ranking every metric reads, and its builders from scores (dense, binary, flat).

``ranking`` holds the :class:`Ranking` itself, ``tie_groups`` its tied groups,
``gains`` the scaled exponential gains, ``topk`` the stable top-k selection,
``dense``, ``groups`` and ``flat`` the builders.
"""
from .ranking import EXP_HEADROOM, GAIN_LIMIT, Ranking

__all__ = ["Ranking", "EXP_HEADROOM", "GAIN_LIMIT"]
