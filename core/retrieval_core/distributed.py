"""Gathering evaluation state across processes (torch.distributed), for every adapter.

Ranks may hold different numbers of rows, or none at all (a rank that saw no
batch): sizes are exchanged first, rows padded to the largest count, gathered and
trimmed, so the collective never sees unequal shapes and never hangs. Rows travel
as their raw bytes (``uint8``), which every backend can move, whatever the dtype
(gloo cannot move ``int16`` or ``uint16/32/64`` itself); dtype and values come
back exactly. Without an initialised process group everything is the identity.
"""
from __future__ import annotations

import math
from typing import List, Optional, Sequence, Tuple

import torch
import torch.distributed as dist
from torch import Tensor

__all__ = ["world_size", "gather_per_rank", "gather_cat", "all_reduce_sum", "drop_duplicates", "ROW_RTOL"]

_MAX_DIMS = 8
# every dtype a state may hold; the index is what ranks exchange (uint16/32/64: torch >= 2.3)
_DTYPES = tuple(d for d in (
    torch.bool, torch.uint8, getattr(torch, "uint16", None), getattr(torch, "uint32", None),
    getattr(torch, "uint64", None), torch.int8, torch.int16, torch.int32, torch.int64,
    torch.float16, torch.bfloat16, torch.float32, torch.float64, torch.complex64, torch.complex128,
) if d is not None)


def world_size(group=None) -> int:
    if not (dist.is_available() and dist.is_initialized()):
        return 1
    return dist.get_world_size(group)


def _shape_code(t: Tensor) -> Tensor:
    if t.ndim > _MAX_DIMS - 2:
        raise ValueError(f"gather_cat takes tensors of at most {_MAX_DIMS - 2} dimensions; got {t.ndim}")
    if t.dtype not in _DTYPES:
        raise TypeError(f"gather_cat cannot move tensors of dtype {t.dtype}; expected one of {list(_DTYPES)}")
    code = [t.numel(), _DTYPES.index(t.dtype), t.ndim, *t.shape]
    return torch.tensor(code + [0] * (_MAX_DIMS + 1 - len(code)), dtype=torch.int64, device=t.device)


def gather_per_rank(tensor: Tensor, group=None) -> List[Tensor]:
    """Rows of ``tensor`` on each rank: one tensor per rank, in rank order.

    Sizes may differ between ranks, and a rank may hold no rows (any empty tensor,
    e.g. a 1-D float placeholder); such a rank's entry has zero rows with the dtype
    and trailing dimensions of the ranks that hold data. Any dtype (bool, unsigned,
    16-bit) comes back exact. This is also the contract of torchmetrics'
    ``dist_sync_fn`` (called as ``fn(tensor, group=...)``).

    Example:
        >>> [t.tolist() for t in gather_per_rank(torch.arange(3))]  # one process
        [[0, 1, 2]]
    """
    n = world_size(group)
    if n == 1:
        return [tensor]
    if tensor.ndim == 0:  # one value per rank (e.g. a summed count)
        return [t.reshape(()) for t in gather_per_rank(tensor.reshape(1), group)]
    codes = [torch.empty(_MAX_DIMS + 1, dtype=torch.int64, device=tensor.device) for _ in range(n)]
    dist.all_gather(codes, _shape_code(tensor), group=group)
    codes = torch.stack(codes).tolist()
    filled = [c for c in codes if c[0] > 0]
    if not filled:
        return [tensor for _ in range(n)]
    _, dtype_i, ndim, *dims = filled[0]
    dtype, trailing = _DTYPES[dtype_i], dims[1:ndim]
    for c in filled:
        if c[1:3] != [dtype_i, ndim] or c[4:3 + ndim] != trailing:
            raise ValueError(
                "ranks hold states of different dtypes or trailing shapes; got "
                f"{[(_DTYPES[k[1]], tuple(k[3:3 + k[2]])) for k in filled]}"
            )
    rows = [c[3] if c[0] > 0 else 0 for c in codes]
    local = tensor.reshape(-1, *trailing) if tensor.numel() else tensor.new_zeros((0, *trailing), dtype=dtype)
    row_bytes = math.prod(trailing) * local.element_size()
    as_bytes = local.contiguous().reshape(-1).view(torch.uint8).reshape(-1, row_bytes)
    padded = torch.zeros((max(rows), row_bytes), dtype=torch.uint8, device=tensor.device)
    padded[: as_bytes.shape[0]] = as_bytes
    out = [torch.empty_like(padded) for _ in range(n)]
    dist.all_gather(out, padded, group=group)
    return [o[:r].reshape(-1).view(dtype).reshape(r, *trailing) for o, r in zip(out, rows)]


def gather_cat(tensor: Tensor, group=None) -> Tensor:
    """Rows of ``tensor`` from every rank, concatenated in rank order
    (see :func:`gather_per_rank`: uneven sizes, ranks without rows, any dtype).

    Example:
        >>> gather_cat(torch.arange(3)).tolist()  # one process: the identity
        [0, 1, 2]
    """
    if world_size(group) == 1:
        return tensor
    return torch.cat(gather_per_rank(tensor, group))


def all_reduce_sum(tensor: Tensor, group=None) -> Tensor:
    """The sum over ranks (a copy; the identity without a process group)."""
    if world_size(group) == 1:
        return tensor
    out = tensor.clone()
    dist.all_reduce(out, op=dist.ReduceOp.SUM, group=group)
    return out


# Floating rows of one id count as the same row when they differ by at most this
# fraction of their largest magnitude: a padding sample recomputed in another batch
# may differ in the last bits (GPU kernels depend on the batch shape; bf16 rounds),
# while two different items differ by far more.
ROW_RTOL = 0.05
_SHOWN_IDS = 5


_CHUNK_ELEMENTS = 1 << 24  # rows compared per step: bounded temporaries (64 MiB of float32)


def _rows_differ(a: Tensor, other: Tensor) -> Tensor:
    """``[n]`` bool: row ``i`` of ``a`` differs from row ``other[i]``. Integers and
    bools: any entry. Floats: NaN equals NaN, infinities must match, and the largest
    gap may be ``ROW_RTOL`` of the two rows' largest finite magnitude."""
    n = a.shape[0]
    flat = a.reshape(n, -1)
    if flat.shape[1] == 0:
        return torch.zeros(n, dtype=torch.bool, device=a.device)
    step = max(1, _CHUNK_ELEMENTS // flat.shape[1])
    return torch.cat([_chunk_differs(flat[i:i + step], flat[other[i:i + step]]) for i in range(0, n, step)])


def _chunk_differs(x: Tensor, y: Tensor) -> Tensor:
    if not (x.is_floating_point() or x.is_complex()):
        return (x != y).any(1)
    if x.is_floating_point() and x.element_size() < 4:
        x, y = x.float(), y.float()
    equal = (x == y) | (torch.isnan(x) & torch.isnan(y))
    gap = torch.nan_to_num((x - y).abs(), nan=float("inf")).masked_fill_(equal, 0.0)  # NaN or inf against a number: inf
    scale = torch.nan_to_num(torch.maximum(x.abs(), y.abs()), nan=0.0, posinf=0.0).amax(1, keepdim=True)
    return (gap > ROW_RTOL * scale).any(1)


def drop_duplicates(ids: Tensor, *arrays: Tensor, names: Optional[Sequence[str]] = None) -> Tuple[Tensor, ...]:
    """Keep one row per id: DistributedSampler pads by repeating samples, and a
    repeated sample repeats its row, which is dropped.

    Returns ``ids`` and ``arrays`` restricted to the first row of each id, in
    increasing id order. Rows of one id must be the same in every array (integers
    and bools exactly; floats with NaN equal to NaN, up to ``ROW_RTOL`` of the
    row's scale); otherwise the ids do not identify items (e.g. counted from 0 in
    every batch) and a ``ValueError`` names some of them (``names``: what each
    array is, for that message). Vectorised; one host sync (plus none when ``ids``
    is empty).

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
    differs = [_rows_differ(a, first_of_row) for a in arrays]
    any_differs = torch.stack(differs).any(0) if differs else torch.zeros(n, dtype=torch.bool, device=device)
    bad_group = torch.zeros(n, dtype=torch.int64, device=device).scatter_reduce(
        0, group_of_row, any_differs.to(torch.int64), "amax")
    group_ids = torch.zeros_like(sorted_ids).scatter_(0, group, sorted_ids)
    sentinel = torch.iinfo(torch.int64).max
    shown = torch.topk(torch.where(bad_group > 0, group_ids.to(torch.int64), sentinel),
                       min(_SHOWN_IDS, n), largest=False).values
    counts = torch.stack([d.sum() for d in differs]) if differs else torch.zeros(0, dtype=torch.int64, device=device)
    summary = torch.cat([starts.sum().view(1), bad_group.sum().view(1), counts, shown]).tolist()
    n_keep, n_bad = summary[0], summary[1]
    if n_bad:
        counts, shown = summary[2:2 + len(arrays)], summary[2 + len(arrays):][: min(n_bad, _SHOWN_IDS)]
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
