"""The core suite of the multi-process harness: ``retrieval_core.distributed`` itself.

Every dtype a state may hold, with uneven row counts, 1-D and 2-D states and (with
3 processes) a rank that holds only torchmetrics' empty-rank placeholder (a 1-D
float tensor); and ``drop_duplicates`` on gathered rows.
"""
from __future__ import annotations

import math
from typing import Any, Dict, List

import torch

from retrieval_core.distributed import drop_duplicates, gather_cat, gather_per_rank

WORLDS = (2, 3)
DTYPES = [d for d in (
    torch.bool, torch.uint8, getattr(torch, "uint16", None), getattr(torch, "uint32", None),
    getattr(torch, "uint64", None), torch.int8, torch.int16, torch.int32, torch.int64,
    torch.float16, torch.bfloat16, torch.float32, torch.float64,
) if d is not None]
_ROWS = (3, 1)  # rows of rank 0 and rank 1; a third rank holds none


def rank_rows(dtype: torch.dtype, rank: int, trailing: tuple = ()) -> torch.Tensor:
    """The rows rank ``rank`` holds (extreme values of the dtype included); rank 2:
    the empty 1-D float placeholder."""
    if rank >= len(_ROWS):
        return torch.tensor([])
    n = _ROWS[rank] * math.prod(trailing)
    if dtype == torch.bool:
        flat = torch.arange(n) % 2 == rank
    elif dtype.is_floating_point:
        info = torch.finfo(dtype)
        specials = torch.tensor([info.max, -0.0, float("nan"), float("-inf"), info.tiny, 1 / 3], dtype=torch.float64)
        flat = specials[(torch.arange(n) + 2 * rank) % len(specials)].to(dtype)
    else:
        info = torch.iinfo(dtype)
        top = torch.tensor([-1]).to(dtype) if info.max > 2 ** 63 else torch.tensor([info.max]).to(dtype)  # uint64
        extremes = torch.cat([torch.tensor([info.min]).to(dtype), top])
        flat = torch.cat([extremes, (torch.arange(n) * 7 + rank).to(dtype)])[rank:rank + n]
    return flat.reshape(_ROWS[rank], *trailing)


def _gather_every_dtype(rank: int, world: int) -> Dict[str, List[torch.Tensor]]:
    out = {}
    for dtype in DTYPES:
        for trailing in ((), (2,)):
            t = rank_rows(dtype, rank, trailing)
            out[f"{dtype} {trailing}"] = [gather_cat(t), *gather_per_rank(t)]
    return out


def _drop_duplicates_gathered(rank: int, world: int) -> Any:
    """Rank 0 holds items 0-3, the last rank repeats item 0 (padding) and adds item 4."""
    ids = torch.tensor([0, 1, 2, 3]) if rank == 0 else torch.tensor([4, 0]) if rank == world - 1 else torch.tensor([], dtype=torch.int64)
    emb = torch.stack([torch.full((3,), float(i)) for i in ids.tolist()]) if ids.numel() else torch.empty(0, 3)
    labels = ids % 2
    kept = drop_duplicates(gather_cat(ids), gather_cat(emb), gather_cat(labels))
    # the same, with item 0's label changed on the last rank: an error on every rank
    bad_labels = labels if rank != world - 1 else torch.tensor([0, 1])
    try:
        drop_duplicates(gather_cat(ids), gather_cat(emb), gather_cat(bad_labels), names=["embeddings", "labels"])
        error = None
    except ValueError as exc:
        error = str(exc)
    return {"kept": [k.tolist() for k in kept], "error": error}


def _gather_scalar(rank: int, world: int) -> List[torch.Tensor]:
    """A 0-d state (one value per rank): 0-d values back, one per rank."""
    return gather_per_rank(torch.tensor(rank + 0.5, dtype=torch.float64))


SCENARIOS = {
    "gather_every_dtype": _gather_every_dtype,
    "gather_scalar": _gather_scalar,
    "drop_duplicates_gathered": _drop_duplicates_gathered,
}
