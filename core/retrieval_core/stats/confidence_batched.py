"""The confidence metrics of many bootstrap resamples at once, rows of one batched tensor (for their intervals)."""
from __future__ import annotations

from typing import Tuple

import torch
from torch import Tensor

from .correlation import _correlation
from .curves import confidence_curve, erc_curve, thresholds

__all__ = []

# -- the keys --------------------------------------------------------------------------


def _one_key(kind: str, values: Tensor, confidence: Tensor, reduce: str, ties: str):
    """(reduced value, curve or None) of one key from its ``[Q]`` values (NaN = skipped)."""
    kept = ~torch.isnan(values)
    v, c = values[kept], confidence[kept]
    nan = torch.tensor(float("nan"), dtype=torch.float64, device=values.device)
    if kind == "erc":
        curve = erc_curve(1.0 - v, c, ties=ties)
        return (curve[1].mean() if v.numel() else nan), curve
    if kind == "conf":
        curve = confidence_curve(v, c, reduce=reduce)
        defined = ~torch.isnan(curve[1])
        value = torch.where(defined, curve[1], 0.0).sum() / defined.sum()
        return (value if v.numel() else nan), curve
    return _correlation(c.to(torch.float64), v, kind), None


# -- the keys of many resamples at once (intervals) ---------------------------------------


def _resampled(values: Tensor, confidence: Tensor, counts: Tensor) -> Tuple[Tensor, Tensor]:
    """``(values [B, L, M], confidence [B, L])`` of ``B`` resamples given as ``counts[B, n]``
    (draws of each query): each resample's queries in their order, repeated as drawn,
    padded to the longest resample with NaN values (left out as skipped queries)."""
    b, n = counts.shape
    counts = counts.to(torch.int64)
    sizes = counts.sum(1)
    length = max(int(sizes.max()), 1) if b else 1
    flat = torch.repeat_interleave(torch.arange(n, device=values.device).repeat(b), counts.reshape(-1))
    row = torch.repeat_interleave(torch.arange(b, device=values.device), sizes)
    col = torch.arange(flat.numel(), device=values.device) - (torch.cumsum(sizes, 0) - sizes)[row]
    v = values.new_full((b, length, values.shape[1]), float("nan"))
    c = confidence.new_zeros((b, length))
    v[row, col] = values[flat]
    c[row, col] = confidence[flat]
    return v, c


def _row_groups(sorted_rows: Tensor) -> Tuple[Tensor, Tensor, Tensor]:
    """Runs of equal entries in each row of ``sorted_rows[B, L]``: ``(group [B, L]``
    (a flat group id per entry), ``counts [G]``, ``start column [G])``."""
    b, length = sorted_rows.shape
    new = torch.ones_like(sorted_rows, dtype=torch.bool)
    new[:, 1:] = sorted_rows[:, 1:] != sorted_rows[:, :-1]
    group = torch.cumsum(new.reshape(-1), 0) - 1
    counts = torch.bincount(group)
    starts = (torch.cumsum(counts, 0) - counts) % max(length, 1)
    return group.view(b, length), counts, starts


def _batched(kind: str, values: Tensor, confidence: Tensor, reduce: str, ties: str) -> Tensor:
    """``[B]``: the key of each row of ``values[B, L]`` (NaN = left out) with
    ``confidence[B, L]``, as :func:`_one_key` of that row's defined entries."""
    valid = ~torch.isnan(values)
    m = valid.sum(1)
    if kind == "erc":
        return _batched_erc(values, confidence, valid, m, ties)
    if kind == "conf":
        if reduce == "median":  # no running form: row by row
            return torch.stack([_one_key(kind, v, c, reduce, ties)[0] for v, c in zip(values, confidence)])
        return _batched_conf(values, confidence, valid, m, reduce)
    x = torch.where(valid, confidence.to(torch.float64), float("inf"))  # left-out entries last, tied together
    y = torch.where(valid, values, float("inf"))
    if kind == "spearman":
        out = _batched_pearson(_batched_ranks(x), _batched_ranks(y), valid, m)
    else:
        out = _batched_kendall(x, y, valid, m)
    return torch.where(m >= 2, out, float("nan"))


def _batched_erc(values, confidence, valid, m, ties) -> Tensor:
    length = values.shape[1]
    errors = torch.where(valid, 1.0 - values, 0.0)
    c = torch.where(valid, confidence.to(torch.float64), float("-inf"))  # left-out entries last
    if ties in ("optimistic", "pessimistic"):
        first = torch.sort(torch.where(valid, errors, float("inf")), dim=1, descending=ties == "pessimistic",
                           stable=True).indices
        order = first.gather(1, torch.sort(c.gather(1, first), dim=1, descending=True, stable=True).indices)
    else:
        order = torch.sort(c, dim=1, descending=True, stable=True).indices
    e = errors.gather(1, order)
    total = torch.cumsum(e, 1)
    kept = torch.arange(1, length + 1, dtype=torch.float64, device=values.device)
    if ties == "expected":
        group, counts, starts = _row_groups(c.gather(1, order))
        flat = total.reshape(-1)
        ends = torch.cumsum(counts, 0) - 1  # flat index of each group's last entry
        first = ends - counts + 1
        before = torch.where(starts > 0, flat[(first - 1).clamp(min=0)], 0.0)
        mean = (flat[ends] - before) / counts
        total = before[group] + (kept - starts[group]) * mean[group]
    erc = total / kept
    inside = kept <= m.unsqueeze(1)
    return torch.where(m > 0, torch.where(inside, erc, 0.0).sum(1) / m.clamp(min=1), float("nan"))


def _batched_conf(values, confidence, valid, m, reduce) -> Tensor:
    c = confidence if confidence.is_floating_point() else confidence.to(torch.float64)
    c = torch.where(valid, c, float("-inf"))  # never kept
    conf, order = torch.sort(c, dim=1, descending=True, stable=True)
    v = values.gather(1, order)
    grid = thresholds(values.device).to(c.dtype).expand(values.shape[0], -1).contiguous()
    count = values.shape[1] - torch.searchsorted(conf.flip(1).contiguous(), grid, right=False)
    last = (count - 1).clamp(min=0)
    if reduce == "mean":
        curve = torch.cumsum(torch.where(valid.gather(1, order), v, 0.0), 1).gather(1, last) / count.clamp(min=1)
    elif reduce == "min":
        curve = torch.cummin(torch.nan_to_num(v, nan=float("inf")), 1).values.gather(1, last)
    else:
        curve = torch.cummax(torch.nan_to_num(v, nan=float("-inf")), 1).values.gather(1, last)
    defined = count > 0
    value = torch.where(defined, curve, 0.0).sum(1) / defined.sum(1).clamp(min=1)
    return torch.where(m > 0, value, float("nan"))


def _batched_ranks(x: Tensor) -> Tensor:
    """Average 1-based ranks along each row of ``x[B, L]`` (float64)."""
    s, order = torch.sort(x, dim=1, stable=True)
    group, counts, starts = _row_groups(s)
    mean_rank = starts.to(torch.float64) + (counts.to(torch.float64) + 1) / 2
    return torch.empty_like(s, dtype=torch.float64).scatter_(1, order, mean_rank[group])


def _batched_pearson(a, b, valid, m) -> Tensor:
    n = m.clamp(min=1).to(torch.float64).unsqueeze(1)
    a = torch.where(valid, a - torch.where(valid, a, 0.0).sum(1, keepdim=True) / n, 0.0)
    b = torch.where(valid, b - torch.where(valid, b, 0.0).sum(1, keepdim=True) / n, 0.0)
    den = torch.sqrt((a * a).sum(1) * (b * b).sum(1))
    return torch.where(den > 0, ((a * b).sum(1) / den).clamp(-1.0, 1.0), float("nan"))


def _tied_in_rows(sorted_rows: Tensor, valid_sorted: Tensor) -> Tensor:
    """``[B]``: pairs of equal defined entries in each sorted row (int64)."""
    group, counts, _ = _row_groups(sorted_rows)
    first_valid = torch.zeros_like(counts, dtype=torch.bool).scatter_(0, group.reshape(-1), valid_sorted.reshape(-1))
    pairs = torch.where(first_valid, counts * (counts - 1) // 2, 0)
    row = torch.zeros_like(counts).scatter_(0, group.reshape(-1), torch.arange(
        sorted_rows.shape[0], device=sorted_rows.device).repeat_interleave(sorted_rows.shape[1]))
    return torch.zeros(sorted_rows.shape[0], dtype=torch.int64, device=sorted_rows.device).index_add_(0, row, pairs)


def _batched_kendall(x, y, valid, m) -> Tensor:
    b, length = x.shape
    by_y = torch.sort(y, dim=1, stable=True).indices
    order = by_y.gather(1, torch.sort(x.gather(1, by_y), dim=1, stable=True).indices)  # by x, then by y
    xs, ys, vs = x.gather(1, order), y.gather(1, order), valid.gather(1, order)
    tied_x = _tied_in_rows(xs, vs)
    y_sorted, y_order = torch.sort(y, dim=1, stable=True)
    tied_y = _tied_in_rows(y_sorted, valid.gather(1, y_order))
    joint = torch.stack([xs, ys], 2)
    new = torch.ones(b, length, dtype=torch.bool, device=x.device)
    new[:, 1:] = (joint[:, 1:] != joint[:, :-1]).any(2)
    group = (torch.cumsum(new.reshape(-1), 0) - 1)
    counts = torch.bincount(group)
    first_valid = torch.zeros_like(counts, dtype=torch.bool).scatter_(0, group, vs.reshape(-1))
    rows = torch.arange(b, device=x.device).repeat_interleave(length)
    row = torch.zeros_like(counts).scatter_(0, group, rows)
    tied_xy = torch.zeros(b, dtype=torch.int64, device=x.device).index_add_(
        0, row, torch.where(first_valid, counts * (counts - 1) // 2, 0))
    # dense codes of y within each row, read in the x order: inversions = discordant pairs
    code_group, _, _ = _row_groups(y_sorted)
    row_first = code_group[:, :1]
    codes_sorted = code_group - row_first
    codes = torch.empty_like(codes_sorted).scatter_(1, y_order, codes_sorted).gather(1, order)
    discordant = _row_inversions(codes)
    mm = m.to(torch.int64)
    pairs = mm * (mm - 1) // 2
    score = (pairs - tied_x - tied_y + tied_xy - 2 * discordant).to(torch.float64)
    den = torch.sqrt((pairs - tied_x).to(torch.float64) * (pairs - tied_y).to(torch.float64))
    return torch.where(den > 0, (score / den).clamp(-1.0, 1.0), float("nan"))


def _row_inversions(codes: Tensor) -> Tensor:
    """:func:`_inversions` of each row of ``codes[B, L]`` (int64) at once: ``[B]``."""
    b, length = codes.shape
    size = 1 << max(0, (length - 1).bit_length())
    a = torch.cat([codes, codes.new_full((b, size - length), int(torch.iinfo(torch.int64).max))], 1)
    total = codes.new_zeros(b)
    width = 1
    while width < size:
        blocks = a.view(b, -1, 2, width)
        left = blocks[:, :, 0].reshape(-1, width).contiguous()
        right = blocks[:, :, 1].reshape(-1, width).contiguous()
        at_most = torch.searchsorted(left, right, right=True)
        total = total + (width - at_most).view(b, -1).sum(1)
        width *= 2
        a = a.view(b, -1, width).sort(dim=2).values.view(b, size)
    return total
