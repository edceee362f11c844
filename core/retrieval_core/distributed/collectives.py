"""Collectives that tolerate unequal ranks: world size, rank, gather (any dtype, any row count), sum."""
from __future__ import annotations

import math
from typing import List

import torch
import torch.distributed as dist
from torch import Tensor

__all__ = ["world_size", "rank_of", "gather_per_rank", "gather_cat", "all_reduce_sum"]

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


def rank_of(group=None) -> int:
    """This process's rank in ``group`` (0 without a process group)."""
    return dist.get_rank(group) if world_size(group) > 1 else 0


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
