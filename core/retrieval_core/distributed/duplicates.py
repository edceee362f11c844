"""Dropping the rows a DistributedSampler repeated to pad its ranks (by id, rows compared within a tolerance)."""
from __future__ import annotations

from typing import Optional, Sequence, Tuple

import torch
from torch import Tensor

__all__ = ["ROW_TOL", "ROW_TOL_16", "row_rtol", "drop_duplicates"]

# Floating rows of one id are the same row when every pair of entries is within a
# few units of the dtype's precision of each other, entry by entry: a padding
# sample recomputed in another batch (GPU kernels chosen by the batch shape) differs
# at rounding level only, and a tolerance relative to each entry (not to the row's
# largest entry) never lets a dominant feature, an offset or a scale hide the
# difference between two items. 16-bit floats: one unit (their rounding flip).
_SHOWN_IDS = 5


# Tolerance of drop_duplicates, relative to a row's largest magnitude: a repeat recomputed
# in another batch (other kernels, other summation order) differs by rounding, far below it.
ROW_TOL = 2.0**-16
ROW_TOL_16 = {torch.float16: 2.0**-8, torch.bfloat16: 2.0**-5}  # a few units of their last place


def row_rtol(dtype: torch.dtype) -> float:
    """The tolerance of :func:`drop_duplicates` for rows of ``dtype``, relative to the
    row's largest finite magnitude: ``ROW_TOL`` (2^-16) for 32- and 64-bit floats, a
    few units of the last place for 16-bit ones.

    Example:
        >>> row_rtol(torch.float32) == 2.0**-16, row_rtol(torch.bfloat16)
        (True, 0.03125)
    """
    return ROW_TOL_16.get(dtype, ROW_TOL)


_CHUNK_ELEMENTS = 1 << 24  # rows compared per step: bounded temporaries (64 MiB of float32)


def _rows_differ(a: Tensor, other: Tensor) -> Tuple[Tensor, Tensor]:
    """``([n], [n])`` bool: row ``i`` of ``a`` differs from row ``other[i]``, and row ``i``
    is not bit for bit the same (NaN equal to NaN), in one pass. Integers and bools:
    any entry, both. Floats: infinities must match, and every other pair ``x, y`` must
    satisfy ``|x - y| <= row_rtol(dtype) * m``, ``m`` the largest finite magnitude in
    the two rows."""
    n = a.shape[0]
    flat = a.reshape(n, -1)
    if flat.shape[1] == 0:
        none = torch.zeros(n, dtype=torch.bool, device=a.device)
        return none, none
    step = max(1, _CHUNK_ELEMENTS // flat.shape[1])
    parts = [_chunk_differs(flat[i:i + step], flat[other[i:i + step]]) for i in range(0, n, step)]
    return torch.cat([d for d, _ in parts]), torch.cat([c for _, c in parts])


def _chunk_differs(x: Tensor, y: Tensor) -> Tuple[Tensor, Tensor]:
    if not (x.is_floating_point() or x.is_complex()):
        changed = (x != y).any(1)
        return changed, changed
    rtol = row_rtol(x.dtype)  # of the dtype given, before a 16-bit one is widened
    if x.is_floating_point() and x.element_size() < 4:
        x, y = x.float(), y.float()  # exact: every 16-bit value is a float32
    equal = (x == y) | (torch.isnan(x) & torch.isnan(y))
    gap = torch.nan_to_num((x - y).abs(), nan=float("inf")).masked_fill_(equal, 0.0)  # NaN or inf against a number: inf
    # relative to the rows' largest finite magnitude (an infinity against a number differs)
    scale = torch.nan_to_num(torch.maximum(x.abs(), y.abs()), nan=0.0, posinf=0.0).amax(1, keepdim=True)
    return (gap > rtol * scale).any(1), ~equal.all(1)


def drop_duplicates(ids: Tensor, *arrays: Tensor, names: Optional[Sequence[str]] = None,
                    max_repeats: Optional[int] = None) -> Tuple[Tensor, ...]:
    """Keep one row per id: DistributedSampler pads by repeating samples, and a
    repeated sample repeats its row, which is dropped.

    Returns ``ids`` and ``arrays`` restricted to the first row of each id, in
    increasing id order. Rows of one id must be the same in every array (integers
    and bools exactly; floats entry by entry, NaN equal to NaN, within
    :func:`row_rtol` of the rows' largest magnitude: a repeat recomputed in another
    batch differs by rounding); otherwise the ids do not identify items (e.g.
    counted from 0 in every batch) and a ``ValueError`` names some of them
    (``names``: what each array is, for that message). A repeat with the same bits
    is always dropped. A repeat that is close but not the same (a copy recomputed in
    another batch) is one only padding makes: ``max_repeats`` bounds how many there
    may be (DistributedSampler pads ``world size - 1`` samples at most, each one row
    when a row is a sample), and more is a ``ValueError`` too, so that no tolerance
    can hide ids that do not identify items (a dominant feature, an offset).
    Vectorised; one host sync (plus none when ``ids`` is empty).

    Example:
        >>> ids, v = drop_duplicates(torch.tensor([4, 1, 4]), torch.tensor([5, 1, 5]))
        >>> ids.tolist(), v.tolist()
        ([1, 4], [1, 5])
        >>> drop_duplicates(torch.tensor([4, 1, 4]), torch.tensor([5, 1, 9]), names=["labels"])
        Traceback (most recent call last):
        ...
        ValueError: id 4 repeats with different rows (labels: 1 row); ids must identify dataset items (DistributedSampler padding repeats the same row, which is dropped)
    """
    n = ids.numel()
    if n == 0:
        return (ids, *arrays)
    device = ids.device
    sorted_ids, order = torch.sort(ids, stable=True)
    starts = torch.ones(n, dtype=torch.bool, device=device)
    starts[1:] = sorted_ids[1:] != sorted_ids[:-1]
    group = torch.cumsum(starts, 0) - 1  # group (distinct id) of each sorted row, in id order
    positions = torch.arange(n, device=device)
    first_sorted = torch.cummax(torch.where(starts, positions, 0), 0).values
    # for each original row: its group, and the original index of its group's first row
    group_of_row = torch.empty_like(group).scatter_(0, order, group)
    first_of_row = torch.empty_like(order).scatter_(0, order, order[first_sorted])
    compared = [_rows_differ(a, first_of_row) for a in arrays]
    differs = [d for d, _ in compared]
    any_differs = torch.stack(differs).any(0) if differs else torch.zeros(n, dtype=torch.bool, device=device)
    # repeats that are close but not the same bits: recomputed copies, which only padding makes
    inexact = torch.stack([c for _, c in compared]).any(0).sum() if arrays \
        else torch.zeros((), dtype=torch.int64, device=device)
    bad_group = torch.zeros(n, dtype=torch.int64, device=device).scatter_reduce(
        0, group_of_row, any_differs.to(torch.int64), "amax")
    group_ids = torch.zeros_like(sorted_ids).scatter_(0, group, sorted_ids)
    sentinel = torch.iinfo(torch.int64).max
    shown = torch.topk(torch.where(bad_group > 0, group_ids.to(torch.int64), sentinel),
                       min(_SHOWN_IDS, n), largest=False).values
    counts = torch.stack([d.sum() for d in differs]) if differs else torch.zeros(0, dtype=torch.int64, device=device)
    summary = torch.cat([starts.sum().view(1), bad_group.sum().view(1), inexact.view(1), counts, shown]).tolist()
    n_keep, n_bad, n_inexact = summary[:3]
    if max_repeats is not None and n_inexact > max_repeats and not n_bad:
        raise ValueError(
            f"{n_inexact} row{'s repeat' if n_inexact > 1 else ' repeats'} an id with values close to but not the same "
            f"as its first row's, more than the {max_repeats} recomputed copies that DistributedSampler's padding "
            f"can add over {max_repeats + 1} process{'es' if max_repeats else ''}: ids must identify dataset items "
            "(for example the dataset index of each sample, not a position counted from 0 in every batch)")
    if n_bad:
        counts, shown = summary[3:3 + len(arrays)], summary[3 + len(arrays):][: min(n_bad, _SHOWN_IDS)]
        labels = list(names) if names is not None else [f"array {i}" for i in range(len(arrays))]
        where = ", ".join(f"{lab}: {c} row{'s' if c > 1 else ''}" for lab, c in zip(labels, counts) if c)
        listed = ", ".join(map(str, shown)) + (f" and {n_bad - len(shown)} more" if n_bad > len(shown) else "")
        subject = f"ids {listed} repeat" if n_bad > 1 else f"id {listed} repeats"
        raise ValueError(
            f"{subject} with different rows ({where}); ids must identify dataset items "
            "(DistributedSampler padding repeats the same row, which is dropped)"
        )
    keep = torch.full((n_keep,), n, dtype=torch.int64, device=device).scatter_reduce(0, group, order, "amin")
    return (ids[keep], *(a[keep] for a in arrays))
