"""Checks worded as torchmetrics.retrieval words them, for the Lightning drop-ins (their anchor's messages)."""
from __future__ import annotations

import torch
from torch import Tensor

__all__ = ['check_indexed_triplet', 'check_indexed_not_empty', 'check_binary_target']

def check_indexed_triplet(indexes, preds, target) -> None:
    """Structure of the torchmetrics-style ``update(preds, target, indexes)`` input,
    worded as ``torchmetrics.retrieval`` words it (the Lightning drop-ins keep their
    anchor's messages): the same shape, integer ``indexes`` (``torch.long`` in
    torchmetrics; any integer dtype here), floating ``preds``, bool/integer/float
    ``target``. Emptiness is checked after ``ignore_index``, by :func:`check_indexed_not_empty`;
    devices, and everything else, by the core's accumulator.

    Example:
        >>> check_indexed_triplet(torch.zeros(3, dtype=torch.long), torch.tensor([1, 2, 3]), torch.ones(3))
        Traceback (most recent call last):
        ...
        ValueError: `preds` must be a tensor of floats
    """
    for name, t in (("preds", preds), ("target", target), ("indexes", indexes)):
        if not isinstance(t, Tensor):
            raise TypeError(f"`{name}` must be a torch.Tensor; got {type(t).__name__}")
    if indexes.shape != preds.shape or preds.shape != target.shape:
        raise ValueError("`indexes`, `preds` and `target` must be of the same shape")
    if indexes.dtype == torch.bool or indexes.is_floating_point() or indexes.is_complex():
        raise ValueError("`indexes` must be a tensor of long integers")
    if target.is_complex():
        raise ValueError("`target` must be a tensor of booleans, integers or floats")
    if not preds.is_floating_point():
        raise ValueError("`preds` must be a tensor of floats")


def check_indexed_not_empty(indexes: Tensor) -> None:
    """At least one entry left (after ``ignore_index``), in torchmetrics' words.

    Example:
        >>> check_indexed_not_empty(torch.zeros(0, dtype=torch.long))
        Traceback (most recent call last):
        ...
        ValueError: `indexes`, `preds` and `target` must be non-empty and non-scalar tensors
    """
    if indexes.ndim == 0 or indexes.numel() == 0:
        raise ValueError("`indexes`, `preds` and `target` must be non-empty and non-scalar tensors")


def check_binary_target(target: Tensor) -> None:
    """Targets of 0 and 1 only (bool, or numbers), in torchmetrics' words; one host read.

    Example:
        >>> check_binary_target(torch.tensor([0, 2, 1]))
        Traceback (most recent call last):
        ...
        ValueError: `target` must contain `binary` values
    """
    if target.dtype == torch.bool or target.numel() == 0:
        return
    lo, hi = torch.aminmax(target)
    if bool((hi > 1) | (lo < 0)):
        raise ValueError("`target` must contain `binary` values")
