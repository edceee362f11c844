"""Structure checks of inputs (types, shapes, dtypes, devices): cheap, run wherever input arrives."""
from __future__ import annotations

from typing import Optional, Tuple

import torch
from torch import Tensor
from .counting import check

__all__ = [
    "check_tensor", "check_device_available", "widen_unsigned", "check_same_device", "check_rows", "check_score_batch", "check_scores",
    "check_categories", "check_compact_inputs",
]

_KINDS = {"int": ("integer", "an integer", "integers"), "flag": ("bool", "a bool", "bools")}


def _shape(t: Tensor) -> tuple:
    return tuple(t.shape)


def _contains(name: str) -> str:
    """``preds contain``, ``y contains``: the verb agrees with the input's name."""
    return f"{name} contain" if name.endswith("s") else f"{name} contains"


# -- generic ----------------------------------------------------------------------


@check
def check_tensor(name: str, value) -> Tensor:
    """``value`` itself if it is a tensor.

    Example:
        >>> check_tensor("preds", [0.5])
        Traceback (most recent call last):
        ...
        TypeError: preds must be a torch.Tensor; got list
    """
    if not isinstance(value, Tensor):
        raise TypeError(f"{name} must be a torch.Tensor; got {type(value).__name__}")
    check_device_available(name, value.device)
    return value


@check
def check_device_available(name: str, device: torch.device) -> None:
    """A CUDA device needs a torch built with CUDA (else torch's bare ``AssertionError`` later)."""
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"{name}: {device} is not available: this torch has no CUDA (torch.cuda.is_available() "
                         "is False); use the CPU")


_WIDE_UNSIGNED = (torch.uint16, torch.uint32, torch.uint64)


def widen_unsigned(name: str, value):
    """``value`` as int64 when it is uint16/uint32/uint64 (query ids, gains), for which torch
    lacks the operations the kernels use; exact, since uint64 values past int64's range
    are refused (one read of the data, for uint64 only). Anything else passes unchanged.

    Example:
        >>> widen_unsigned("indexes", torch.tensor([3, 1], dtype=torch.uint32))
        tensor([3, 1])
        >>> widen_unsigned("indexes", torch.tensor([2**63], dtype=torch.uint64))
        Traceback (most recent call last):
        ...
        ValueError: indexes holds uint64 values above 2**63 - 1, which int64 cannot hold; map them to smaller ids
    """
    if not isinstance(value, Tensor) or value.dtype not in _WIDE_UNSIGNED:
        return value
    if value.dtype == torch.uint64:
        signed = value.view(torch.int64)  # the same bits: values past 2**63 - 1 read as negative
        if signed.numel() and bool((signed < 0).any()):
            hint = "; map them to smaller ids" if name in ("indexes", "ids", "query_ids") else ""
            raise ValueError(f"{name} holds uint64 values above 2**63 - 1, which int64 cannot hold{hint}")
        return signed.clone()
    return value.to(torch.int64)


@check
def check_same_device(**tensors: Optional[Tensor]) -> None:
    """The given (not None) tensors share one device.

    Example:
        >>> check_same_device(preds=torch.zeros(1), target=torch.zeros(1, device="meta"))
        Traceback (most recent call last):
        ...
        ValueError: preds and target must be on the same device; got cpu and meta
    """
    present = {k: v for k, v in tensors.items() if v is not None}
    devices = {v.device for v in present.values()}
    if len(devices) > 1:
        names = " and ".join(present)
        got = " and ".join(str(v.device) for v in present.values())
        raise ValueError(f"{names} must be on the same device; got {got}")


@check
def check_rows(name: str, value, n: int, *, kind: str = "int", unit: str = "row", lists: bool = False) -> Tensor:
    """A 1-D tensor with one entry per ``unit`` (``n`` of them): ids and categories
    (``kind="int"``, returned as int64) or query/gallery flags (``kind="flag"``:
    bool, or integers where nonzero is True; returned as bool). ``lists=True`` also
    takes a list or tuple (the adapters' batches).

    Example:
        >>> check_rows("ids", torch.tensor([3, 1]), 2).dtype
        torch.int64
        >>> check_rows("is_query", [1, 0], 2, kind="flag", lists=True).tolist()
        [True, False]
        >>> check_rows("ids", torch.arange(2), 3)
        Traceback (most recent call last):
        ...
        ValueError: ids must be 1-D with one entry per row; got shape (2,) for 3 rows
    """
    word, article, plural = _KINDS[kind]
    more = f" or a list of {plural}" if lists else ""
    if lists and isinstance(value, (list, tuple)):
        try:
            value = torch.as_tensor(value)
        except (TypeError, ValueError, RuntimeError):
            raise TypeError(f"{name} must be a 1-D {word} tensor{more}; got {value!r:.80}") from None
    if not lists:
        check_tensor(name, value)
    elif not isinstance(value, Tensor):
        raise TypeError(f"{name} must be a 1-D {word} tensor{more}; got {type(value).__name__}")
    if value.ndim != 1 or value.shape[0] != n:
        raise ValueError(f"{name} must be 1-D with one entry per {unit}; got shape {_shape(value)} for {n} {unit}s")
    if value.is_complex() or value.is_floating_point() or (kind == "int" and value.dtype == torch.bool):
        also = " (0/1 integers are taken too)" if kind == "flag" else ""
        raise TypeError(f"{name} must be {article} tensor; got {value.dtype}{also}")
    if kind == "flag":
        return value if value.dtype == torch.bool else value != 0
    return value.to(torch.int64)


# -- score mode: structure ----------------------------------------------------------


def _check_score_tensors(preds, target, names: Tuple[str, str]) -> None:
    p, t = names
    check_tensor(p, preds)
    check_tensor(t, target)
    if preds.dtype == torch.bool or preds.is_complex():
        raise TypeError(f"{p} must be a floating-point or integer tensor; got {preds.dtype}")
    if target.is_complex():
        raise TypeError(f"{t} must be a bool, integer or floating-point tensor; got {target.dtype}")


def _check_dense(preds, target, mask, names: Tuple[str, str], dims: str, hint: str) -> None:
    p, t = names
    _check_score_tensors(preds, target, names)
    if preds.ndim != 2 or preds.shape != target.shape:
        raise ValueError(f"{p} and {t} must be 2-D {dims} of the same shape{hint}; got {_shape(preds)} and {_shape(target)}")
    if mask is not None:
        check_tensor("mask", mask)
        if mask.dtype != torch.bool:
            raise TypeError(f"mask must be a bool tensor; got {mask.dtype}")
        if mask.shape != preds.shape:
            raise ValueError(f"mask must have the shape of {p}; got {_shape(mask)} and {_shape(preds)}")
    check_same_device(**{p: preds, t: target, "mask": mask})


@check
def check_score_batch(
    preds, target, *, mask=None, names: Tuple[str, str] = ("preds", "target"), dims: str = "[queries, candidates]"
) -> None:
    """One adapter batch of dense scores ``[B, N]`` and gains (``B`` may be 0);
    ``names`` and ``dims`` as the adapter calls them.

    Example:
        >>> check_score_batch(torch.rand(3, 4), torch.ones(3, 3), names=("y_pred", "y"), dims="[batch, items]")
        Traceback (most recent call last):
        ...
        ValueError: y_pred and y must be 2-D [batch, items] of the same shape; got (3, 4) and (3, 3)
    """
    _check_dense(preds, target, mask, names, dims, "")


@check
def check_scores(preds, target, *, indexes=None, mask=None) -> None:
    """The structure of score-mode input: dense ``[Q, N]`` (optional ``mask``) or
    flat ``[n]`` with ``indexes``; not empty.

    Example:
        >>> check_scores(torch.rand(6), torch.ones(6), indexes=torch.zeros(5, dtype=torch.long))
        Traceback (most recent call last):
        ...
        ValueError: indexes must have one entry per prediction; got 5 indexes for 6 predictions
    """
    if indexes is None:
        _check_dense(preds, target, mask, ("preds", "target"), "[queries, candidates]", ", or 1-D with indexes=")
        if preds.numel() == 0:
            raise ValueError(f"preds and target are empty; got shape {_shape(preds)}")
        return
    _check_score_tensors(preds, target, ("preds", "target"))
    if preds.shape != target.shape:
        raise ValueError(f"preds and target must have the same shape; got {_shape(preds)} and {_shape(target)}")
    check_tensor("indexes", indexes)
    if indexes.dtype == torch.bool or indexes.is_floating_point() or indexes.is_complex():
        raise TypeError(f"indexes must be an integer tensor; got {indexes.dtype}")
    if preds.ndim != 1 or indexes.ndim != 1:
        raise ValueError(f"with indexes, preds, target and indexes must be 1-D; got {_shape(preds)} and {_shape(indexes)}")
    if indexes.shape != preds.shape:
        raise ValueError(
            f"indexes must have one entry per prediction; got {indexes.numel()} indexes for {preds.numel()} predictions"
        )
    if preds.numel() == 0:
        raise ValueError("preds, target and indexes are empty")
    if mask is not None:
        raise ValueError("mask is for dense [queries, candidates] input; the flat form needs none")
    check_same_device(preds=preds, target=target, indexes=indexes)


@check
def check_categories(categories, n: int, what: str) -> None:
    """Core categories: a 1-D integer tensor or a sequence of labels, one per ``what``.

    Example:
        >>> check_categories(["a", "b", "c"], 2, "query (row)")
        Traceback (most recent call last):
        ...
        ValueError: categories must have one entry per query (row); got 3 for 2
    """
    length = categories.shape[0] if isinstance(categories, Tensor) else len(categories)
    if isinstance(categories, Tensor) and categories.ndim != 1:
        raise ValueError(f"categories must be 1-D; got shape {_shape(categories)}")
    if isinstance(categories, Tensor) and (categories.is_floating_point() or categories.is_complex()):
        raise TypeError(f"categories must be an integer tensor or a sequence of labels; got {categories.dtype}")
    if length != n:
        raise ValueError(f"categories must have one entry per {what}; got {length} for {n}")


@check
def check_compact_inputs(compact: bool, **given) -> None:
    """``compact=True`` keeps sums and counts only: no per-query ``ids``/``categories``.

    Example:
        >>> check_compact_inputs(True, ids=torch.arange(3), categories=None)
        Traceback (most recent call last):
        ...
        ValueError: compact=True keeps only sums and counts; it cannot take 'ids' (de-duplication and per-category results need per-query values): use compact=False
    """
    present = [k for k, v in given.items() if v is not None]
    if compact and present:
        raise ValueError(
            f"compact=True keeps only sums and counts; it cannot take {', '.join(map(repr, present))} "
            "(de-duplication and per-category results need per-query values): use compact=False"
        )
