"""Exponential gains 2^g - 1 of a Ranking, scaled by its per-row shift so they never overflow,
and the limits on gains that keep every sum of gains finite."""
from __future__ import annotations

import math
from typing import Optional

import torch
from torch import Tensor

__all__ = ["exp_gain", "EXP_HEADROOM", "GAIN_LIMIT"]

# Exponential gains 2^g - 1 of a query are scaled down by a power of two once its largest
# gain g exceeds this: scaled gains stay below 2^960, so that sums over up to 2^63 ranks fit
# float64 (whose largest value is just under 2^1024).
EXP_HEADROOM = 960.0
# The largest gain taken (validate.value_flags, relevance callables): sums of gains over up to
# 2^63 candidates (cumulative gains, DCG, tied groups' totals) then fit float64, so that no sum
# overflows into inf (or inf - inf, NaN, which would read as an empty query).
GAIN_LIMIT = 2.0**960


def exp_gain(g: Tensor, shift: Optional[Tensor] = None) -> Tensor:
    """2^g - 1, times 2^-shift (``shift``: ``[Q]`` per row of ``g[Q, d]``, or per entry of a
    1-D ``g``; see ``Ranking.exp_shift``). Rows with shift 0 take expm1 (accurate for small g);
    the others 2^(g - shift) - 2^-shift, exact scaling in binary floating point."""
    # ln 2 as a Python float: a tensor made from it on the GPU would be a synchronising copy
    plain = torch.expm1(g * math.log(2.0))
    if shift is None:
        return plain
    s = shift.unsqueeze(1) if g.ndim == 2 else shift
    return torch.where(s > 0, torch.exp2(g - s) - torch.exp2(-s), plain)
