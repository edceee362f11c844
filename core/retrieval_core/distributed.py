"""Gathering evaluation state across processes (torch.distributed), for every adapter.

Ranks may hold different numbers of rows, or none at all (a rank that saw no
batch): sizes are exchanged first, rows padded to the largest count, gathered and
trimmed, so the collective never sees unequal shapes and never hangs. Without an
initialised process group everything is the identity.
"""
from __future__ import annotations

from typing import Optional, Sequence, Tuple

import torch
import torch.distributed as dist
from torch import Tensor

__all__ = ["world_size", "gather_cat", "all_reduce_sum", "drop_duplicates"]

_MAX_DIMS = 8
_DTYPES = [torch.bool, torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64,
           torch.float16, torch.bfloat16, torch.float32, torch.float64]


def world_size(group=None) -> int:
    if not (dist.is_available() and dist.is_initialized()):
        return 1
    return dist.get_world_size(group)


def _shape_code(t: Tensor) -> Tensor:
    if t.ndim > _MAX_DIMS - 2:
        raise ValueError(f"gather_cat takes tensors of at most {_MAX_DIMS - 2} dimensions; got {t.ndim}")
    code = [t.numel(), _DTYPES.index(t.dtype), t.ndim, *t.shape]
    return torch.tensor(code + [0] * (_MAX_DIMS + 1 - len(code)), dtype=torch.int64, device=t.device)


def gather_cat(tensor: Tensor, group=None) -> Tensor:
    """Rows of ``tensor`` from every rank, concatenated in rank order.

    Sizes may differ between ranks, and a rank may hold no rows; such a rank's
    trailing dimensions and dtype are taken from the ranks that hold data.

    Example:
        >>> gather_cat(torch.arange(3)).tolist()  # one process: the identity
        [0, 1, 2]
    """
    n = world_size(group)
    if n == 1:
        return tensor
    codes = [torch.empty(_MAX_DIMS + 1, dtype=torch.int64, device=tensor.device) for _ in range(n)]
    dist.all_gather(codes, _shape_code(tensor), group=group)
    codes = [c.tolist() for c in codes]
    filled = [c for c in codes if c[0] > 0]
    if not filled:
        return tensor
    numel, dtype_i, ndim, *dims = filled[0]
    dtype, trailing = _DTYPES[dtype_i], dims[1:ndim]
    for c in filled:
        if c[1:3] != [dtype_i, ndim] or c[4:3 + ndim] != trailing:
            raise ValueError(
                "ranks hold states of different dtypes or trailing shapes; got "
                f"{[(_DTYPES[k[1]], tuple(k[3:3 + k[2]])) for k in filled]}"
            )
    rows = [c[3] if c[0] > 0 else 0 for c in codes]
    local = tensor.to(dtype).reshape(-1, *trailing) if tensor.numel() else tensor.new_zeros((0, *trailing), dtype=dtype)
    padded = torch.zeros((max(rows), *trailing), dtype=dtype, device=tensor.device)
    padded[: local.shape[0]] = local
    out = [torch.empty_like(padded) for _ in range(n)]
    dist.all_gather(out, padded, group=group)
    return torch.cat([o[:r] for o, r in zip(out, rows)])


def all_reduce_sum(tensor: Tensor, group=None) -> Tensor:
    """The sum over ranks (a copy; the identity without a process group)."""
    if world_size(group) == 1:
        return tensor
    out = tensor.clone()
    dist.all_reduce(out, op=dist.ReduceOp.SUM, group=group)
    return out


def drop_duplicates(ids: Tensor, *arrays: Tensor) -> Tuple[Tensor, ...]:
    """Keep the first row of each id (DistributedSampler pads by repeating samples).

    Returns ``ids`` and ``arrays`` restricted to those rows, in increasing id order.

    Example:
        >>> ids, v = drop_duplicates(torch.tensor([4, 1, 4]), torch.tensor([5, 1, 9]))
        >>> ids.tolist(), v.tolist()
        ([1, 4], [1, 5])
    """
    unique, inverse = torch.unique(ids, return_inverse=True)
    positions = torch.arange(ids.numel(), device=ids.device)
    first = torch.full((unique.numel(),), ids.numel(), device=ids.device).scatter_reduce(0, inverse, positions, "amin")
    return (unique, *(a[first] for a in arrays))
