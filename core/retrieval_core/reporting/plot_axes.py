"""Shared helpers of the plots: key names made readable, axes, value fitting."""
from __future__ import annotations

import re
from typing import List

from torch import Tensor

from .. import optional

__all__ = []

_AT_INT = re.compile(r"^([A-Za-z_]+)@([0-9]+)$")
_PRETTY = {"cmc": "CMC", "hit_rate": "hit rate"}


def _pretty(name: str) -> str:
    return _PRETTY.get(name, f"{name}@k")


def _float_list(t) -> List[float]:
    if isinstance(t, Tensor):
        return t.detach().cpu().double().reshape(-1).tolist()
    return [float(v) for v in t]


def _new_axes(ax, feature: str, figsize=(6.4, 4.4)):
    """(figure, axes): the given axes and its figure, or a new figure on an Agg canvas."""
    if ax is not None:
        return ax.figure, ax
    fig = optional.figure(feature, figsize=figsize, layout="constrained")
    return fig, fig.add_subplot()


def _plain_text(fig):
    """``fig`` with every text drawn as written: names, categories and titles come from
    the data, and a ``$`` in one must not start matplotlib's math mode (which fails on
    ``a$$b`` or ``$\\foo{$``)."""
    text_class = optional.require("matplotlib.text", feature="plots", package="matplotlib").Text
    for text in fig.findobj(text_class):
        text.set_parse_math(False)
    return fig


def _fit_values(ax) -> None:
    """Fit the value axis to everything drawn (lines and bands), within [0, 1] plus a margin."""
    ys = [float(y) for line in ax.get_lines() for y in line.get_ydata()]
    ys += [float(y) for c in ax.collections for p in c.get_paths() for y in p.vertices[:, 1]]
    ys = [y for y in ys if y == y]
    if not ys:
        return
    low, high = min(ys), max(ys)
    pad = max(0.05 * (high - low), 0.002)
    ax.set_ylim(max(low - pad, -0.01), min(high + pad, 1.01) if high <= 1 else high + pad)
