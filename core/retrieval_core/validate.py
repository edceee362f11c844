"""Input checks with messages that say what was expected and what came.

Shape, dtype, device and argument checks are cheap and run wherever input
arrives; :func:`check_values` (NaN, inf, negative gains) reads the data and runs
once per evaluation, never per batch.
"""
from __future__ import annotations

from typing import Optional, Sequence

import torch
from torch import Tensor

TIES = ("stable",)
TIES_LATER = ("expected", "optimistic", "pessimistic")
EMPTY = ("skip", "zero", "one", "error")
REDUCE = ("mean", "median", "min", "max", "none")


def _shape(t: Tensor) -> tuple:
    return tuple(t.shape)


def check_tensor(name: str, value) -> Tensor:
    if not isinstance(value, Tensor):
        raise TypeError(f"{name} must be a torch.Tensor; got {type(value).__name__}")
    return value


def check_preds_dtype(preds: Tensor) -> None:
    if preds.dtype == torch.bool or preds.is_complex():
        raise TypeError(f"preds must be a floating-point or integer tensor; got {preds.dtype}")


def check_target_dtype(target: Tensor) -> None:
    if target.is_complex():
        raise TypeError(f"target must be a bool, integer or floating-point tensor; got {target.dtype}")


def check_same_device(**tensors: Optional[Tensor]) -> None:
    present = {k: v for k, v in tensors.items() if v is not None}
    devices = {v.device for v in present.values()}
    if len(devices) > 1:
        names = " and ".join(present)
        got = " and ".join(str(v.device) for v in present.values())
        raise ValueError(f"{names} must be on the same device; got {got}")


def check_scores(
    preds,
    target,
    *,
    indexes=None,
    mask=None,
) -> None:
    """Check the structure of score-mode input (dense ``[Q, N]`` or flat with ``indexes``)."""
    check_tensor("preds", preds)
    check_tensor("target", target)
    check_preds_dtype(preds)
    check_target_dtype(target)
    if preds.shape != target.shape:
        raise ValueError(f"preds and target must have the same shape; got {_shape(preds)} and {_shape(target)}")
    if indexes is None:
        if preds.ndim != 2:
            raise ValueError(
                f"preds and target must be 2-D [queries, candidates], or 1-D with indexes=; got shape {_shape(preds)}"
            )
        if preds.numel() == 0:
            raise ValueError(f"preds and target are empty; got shape {_shape(preds)}")
    else:
        check_tensor("indexes", indexes)
        if indexes.dtype == torch.bool or indexes.is_floating_point() or indexes.is_complex():
            raise TypeError(f"indexes must be an integer tensor; got {indexes.dtype}")
        if preds.ndim != 1 or indexes.ndim != 1:
            raise ValueError(
                f"with indexes, preds, target and indexes must be 1-D; got {_shape(preds)} and {_shape(indexes)}"
            )
        if indexes.shape != preds.shape:
            raise ValueError(
                f"indexes must have one entry per prediction; got {indexes.numel()} indexes for {preds.numel()} predictions"
            )
        if preds.numel() == 0:
            raise ValueError("preds, target and indexes are empty")
    if mask is not None:
        check_tensor("mask", mask)
        if indexes is not None:
            raise ValueError("mask is for dense [queries, candidates] input; the flat form needs none")
        if mask.dtype != torch.bool:
            raise TypeError(f"mask must be a bool tensor; got {mask.dtype}")
        if mask.shape != preds.shape:
            raise ValueError(f"mask must have the shape of preds; got {_shape(mask)} and {_shape(preds)}")
    check_same_device(preds=preds, target=target, indexes=indexes, mask=mask)


def check_values(preds: Tensor, target: Tensor) -> None:
    """NaN/inf scores, NaN/inf or negative gains. One sync for the whole input."""
    # A sum is finite iff every term is, unless finite terms overflow: then look closer.
    if preds.is_floating_point() and not bool(torch.isfinite(preds.sum())):
        if not bool(torch.isfinite(preds).all()):
            raise ValueError("preds contain NaN or inf; scores must be finite")
    if target.is_floating_point() and not bool(torch.isfinite(target.sum())):
        if not bool(torch.isfinite(target).all()):
            raise ValueError("target contains NaN or inf; gains must be finite and >= 0")
    if target.dtype != torch.bool and target.numel():
        low = target.min()
        if bool(low < 0):
            raise ValueError(f"target gains must be >= 0; got a minimum of {low.item()}")


def check_choice(name: str, value, choices: Sequence[str]) -> None:
    if value not in choices:
        raise ValueError(f"{name} must be one of {', '.join(repr(c) for c in choices)}; got {value!r}")


def check_ties(ties) -> None:
    if ties in TIES_LATER:
        raise NotImplementedError(f"ties={ties!r} is not implemented yet; use ties='stable'")
    check_choice("ties", ties, TIES)


def check_categories(categories, n: int, what: str) -> None:
    length = categories.shape[0] if isinstance(categories, Tensor) else len(categories)
    if isinstance(categories, Tensor) and categories.ndim != 1:
        raise ValueError(f"categories must be 1-D; got shape {_shape(categories)}")
    if isinstance(categories, Tensor) and (categories.is_floating_point() or categories.is_complex()):
        raise TypeError(f"categories must be an integer tensor or a sequence of labels; got {categories.dtype}")
    if length != n:
        raise ValueError(f"categories must have one entry per {what}; got {length} for {n}")
