"""Confidence curves of per-query values: the error-versus-reject curve and the metric
above each confidence threshold.
"""
from __future__ import annotations

from typing import Optional, Tuple

import torch
from torch import Tensor

__all__ = ["KINDS", "GRID_POINTS", "split_key", "erc_curve", "thresholds", "confidence_curve"]

KINDS = ("erc", "conf", "spearman", "kendall")
GRID_POINTS = 101  # thresholds 0, 0.01, ..., 1 of conf:<key>
_ORDERS = ("stable", "expected", "optimistic", "pessimistic")


def split_key(key: str) -> Optional[Tuple[str, str]]:
    """``(kind, inner key)`` of a confidence key, None for any other name.

    Example:
        >>> split_key("erc:cmc@1"), split_key("cmc@1")
        (('erc', 'cmc@1'), None)
    """
    kind, sep, inner = key.partition(":")
    return (kind, inner) if sep and kind in KINDS else None


# -- error-versus-reject ------------------------------------------------------------------


def _descending(confidence: Tensor, errors: Tensor, ties: str) -> Tensor:
    """Positions of the queries, most confident first; among equal confidences the
    earlier query first ("stable", "expected": the order there is averaged later),
    the smaller error first ("optimistic") or the larger first ("pessimistic")."""
    if ties in ("optimistic", "pessimistic"):
        by_error = torch.sort(errors, descending=ties == "pessimistic", stable=True).indices
        return by_error[torch.sort(confidence[by_error], descending=True, stable=True).indices]
    return torch.sort(confidence, descending=True, stable=True).indices


def erc_curve(errors: Tensor, confidence: Tensor, *, ties: str = "stable") -> Tuple[Tensor, Tensor]:
    """The error-versus-reject curve: ``(kept_fraction [n], erc [n])``.

    Queries are ordered most confident first; ``erc[j-1]`` is the mean error of
    the ``j`` first ones and ``kept_fraction[j-1] = j / n``. Among equal
    confidences: ``"stable"``, the earlier query first; ``"optimistic"`` /
    ``"pessimistic"``, the smaller / larger error first; ``"expected"``, the
    average over every order of the tied queries (inside a tied group each
    position carries the group's mean error). ``errors`` and ``confidence`` are
    ``[n]`` tensors, assumed checked (finite, same length and device).

    Example:
        >>> e = torch.tensor([1.0, 0.0, 0.0], dtype=torch.float64)
        >>> c = torch.tensor([0.5, 0.5, 0.2])
        >>> erc_curve(e, c)[1].tolist(), erc_curve(e, c, ties="expected")[1].tolist()
        ([1.0, 0.5, 0.3333333333333333], [0.5, 0.5, 0.3333333333333333])
    """
    if ties not in _ORDERS:
        raise ValueError(f"ties must be one of {', '.join(map(repr, _ORDERS))}; got {ties!r}")
    errors = errors.to(torch.float64)
    n = errors.numel()
    kept = torch.arange(1, n + 1, dtype=torch.float64, device=errors.device)
    order = _descending(confidence, errors, ties)
    total = torch.cumsum(errors[order], 0)
    if ties == "expected" and n:
        c = confidence[order]
        new = torch.ones(n, dtype=torch.bool, device=errors.device)
        new[1:] = c[1:] != c[:-1]
        group = torch.cumsum(new, 0) - 1
        counts = torch.bincount(group)
        ends = torch.cumsum(counts, 0)  # errors up to each group's end, taken from the cumulative sum
        sums_to_end = total[ends - 1]
        before = torch.cat([sums_to_end.new_zeros(1), sums_to_end[:-1]])
        starts = ends - counts
        mean = (sums_to_end - before) / counts
        total = before[group] + (kept - starts[group]) * mean[group]
    return kept / max(n, 1), total / kept


# -- metric over confident queries ---------------------------------------------------------


def thresholds(device=None) -> Tensor:
    """The grid ``i/100``, ``i = 0..100`` (float64), of ``conf:<key>``."""
    return torch.arange(GRID_POINTS, dtype=torch.float64, device=device) / (GRID_POINTS - 1)


def confidence_curve(values: Tensor, confidence: Tensor, *, reduce: str = "mean") -> Tuple[Tensor, Tensor]:
    """``(thresholds [101], curve [101])``: ``curve[i]`` reduces (``"mean"``,
    ``"median"``, ``"min"``, ``"max"``) the values of the queries whose confidence
    is at least ``thresholds[i] = i / 100``; NaN where no query is kept. The
    comparison is made in the confidences' floating dtype (the threshold rounded
    to it: a float32 confidence 0.9 is kept at 0.9). Inputs assumed checked
    (finite values, confidences in [0, 1]).

    Example:
        >>> v = torch.tensor([1.0, 0.0, 1.0], dtype=torch.float64)
        >>> t, curve = confidence_curve(v, torch.tensor([0.9, 0.2, 0.5]))
        >>> [round(x, 4) for x in curve[[0, 30, 60, 95]].tolist()]
        [0.6667, 1.0, 1.0, nan]
    """
    values = values.to(torch.float64)
    grid = thresholds(values.device)
    n = values.numel()
    if not confidence.is_floating_point():
        confidence = confidence.to(torch.float64)
    conf, order = torch.sort(confidence, descending=True, stable=True)
    v = values[order]
    # queries kept at each threshold: the first `count` of the descending order
    count = n - torch.searchsorted(conf.flip(0).contiguous(), grid.to(conf.dtype), right=False)
    if n == 0:
        return grid, torch.full_like(grid, float("nan"))
    last = (count - 1).clamp(min=0)
    if reduce == "mean":
        curve = torch.cumsum(v, 0)[last] / count.clamp(min=1)
    elif reduce == "min":
        curve = torch.cummin(v, 0).values[last]
    elif reduce == "max":
        curve = torch.cummax(v, 0).values[last]
    elif reduce == "median":
        sizes = count.tolist()
        curve = torch.stack([_median(v[:c]) if c else grid.new_tensor(float("nan")) for c in sizes])
    else:
        raise ValueError(f"conf: keys reduce with 'mean', 'median', 'min' or 'max'; got reduce={reduce!r}")
    return grid, torch.where(count > 0, curve, float("nan"))


def _median(v: Tensor) -> Tensor:
    s = v.sort().values
    n = s.numel()
    return (s[(n - 1) // 2] + s[n // 2]) / 2
