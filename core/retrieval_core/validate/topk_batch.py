"""The checks of the top-k accumulator (the adapters' ``TopKMetrics``): its options once,
at construction (:func:`check_topk_accumulator_options`), and the structure of each
batch once, at update (:func:`check_topk_batch`: types and shapes, no host sync). What
reads values (ids below -1 or after a -1, item ids within the catalogue, a pair given
twice, gain values, the keys against the lists' width) is checked once, at compute, by
:func:`~retrieval_core.evaluate_topk`; a pair naming a row outside its batch is counted
at update (on the device) and raised at compute (:func:`raise_row_flags`).

Example:
    >>> batch = check_topk_batch(torch.tensor([[3, 1, -1]]), torch.tensor([[0, 0], [1, 2]]))
    >>> batch["widths"].tolist(), batch["items"].tolist(), batch["truth_items"].tolist()
    ([3], [3, 1, -1], [1, 2])
    >>> raise_row_flags(check_topk_batch(torch.tensor([[3]]), torch.tensor([[0, 4], [1, 2]]))["invalid"])
    Traceback (most recent call last):
    ...
    ValueError: truth holds 1 (row, item) pair whose row is outside its batch (the rows of that batch's topk)
"""
from __future__ import annotations

from typing import Dict, Optional, Tuple

import torch
from torch import Tensor

from .arrays import as_tensors
from .counting import check
from .options import check_score_options, positive_int
from .stats import check_stats_options
from .tensors import check_rows, widen_unsigned

__all__ = ["check_topk_accumulator_options", "check_topk_batch", "raise_row_flags", "ROW_FLAGS"]

ROW_FLAGS = ("truth", "history")  # the inputs whose pairs name rows of their batch

_FORM = "[2, E] (user row, item) pairs or a sparse [B, n_items] tensor"


@check
def check_topk_accumulator_options(keys, *, n_items: Optional[int], empty: str, reduce: str, **stats) -> dict:
    """The checked interval options: the options of :func:`~retrieval_core.evaluate_topk`
    that an accumulator takes once, with its parsed ``keys`` (``stats``: ``ci``,
    ``ci_method``, ``n_resamples``, ``seed``, ``keep_per_query``)."""
    check_score_options(ties="stable", empty=empty, reduce=reduce)
    if n_items is not None:
        positive_int("n_items", n_items)
    return check_stats_options(keys, reduce=reduce, **stats)


def _integers(name: str, value) -> Tensor:
    if not isinstance(value, Tensor):
        raise TypeError(f"{name} must be a torch tensor (or a NumPy array); got {type(value).__name__}")
    if value.is_floating_point() or value.is_complex() or value.dtype == torch.bool:
        raise TypeError(f"{name} must hold integer ids; got {value.dtype}")
    return widen_unsigned(name, value).to(torch.int64)


def _sparse_rows(name: str, value: Tensor, n_rows: int, n_items: Optional[int]) -> Tuple[Tensor, Tensor, Tensor]:
    """``(rows, items, values)`` of a sparse ``[B, n_items]`` COO (coalesced) or CSR tensor."""
    if n_items is None:
        raise ValueError(f"a sparse {name} needs the metric's n_items (the catalogue size: its columns)")
    if value.ndim != 2 or tuple(value.shape) != (n_rows, n_items):
        raise ValueError(f"a sparse {name} must be [B, n_items] = [{n_rows}, {n_items}] (one row per list of "
                         f"topk); got shape {tuple(value.shape)}")
    if value.layout == torch.sparse_coo:
        value = value.coalesce()
        rows, items = value.indices()
        values = value.values()
    elif value.layout == torch.sparse_csr:
        crow = value.crow_indices()
        rows = torch.repeat_interleave(torch.arange(n_rows, device=crow.device), crow.diff())
        items, values = value.col_indices(), value.values()
    else:
        raise TypeError(f"{name} must be {_FORM}; got layout {value.layout}")
    if values.is_complex():
        raise TypeError(f"{name} gains must be real numbers; got {values.dtype}")
    return rows.to(torch.int64), items.to(torch.int64), widen_unsigned(name, values).to(torch.float64)


def _batch_pairs(name: str, value, n_rows: int, n_items: Optional[int]) -> Tuple[Tensor, Tensor, Tensor, Tensor]:
    """``(counts [B], items [E], gains [E] float64, outside)``: the (row, item) entries of
    ``value``, ordered by row (a row's entries are ``counts[row]`` consecutive ones), and
    how many pairs name a row outside ``[0, B)`` (a 0-D tensor: counted, not read)."""
    if isinstance(value, Tensor) and value.layout != torch.strided:
        rows, items, gains = _sparse_rows(name, value, n_rows, n_items)
    else:
        pairs = _integers(name, value)
        if pairs.ndim != 2 or pairs.shape[0] != 2:
            raise ValueError(f"{name} must be {_FORM}; got shape {tuple(pairs.shape)}")
        rows, items = pairs
        gains = torch.ones(rows.shape, dtype=torch.float64, device=rows.device)
    outside = ((rows < 0) | (rows >= n_rows)).sum()
    if n_rows == 0:
        return torch.zeros(0, dtype=torch.int64, device=rows.device), items[:0], gains[:0], outside
    rows = rows.clamp(0, max(n_rows - 1, 0))  # an outside pair is raised at compute (raise_row_flags)
    order = torch.sort(rows, stable=True).indices
    counts = torch.zeros(n_rows, dtype=torch.int64, device=rows.device).scatter_add_(0, rows, torch.ones_like(rows))
    return counts, items[order], gains[order], outside


def raise_row_flags(invalid: Tensor) -> None:
    """Raise for the pairs outside their batch counted in ``invalid`` (one per
    :data:`ROW_FLAGS`, summed over batches and ranks; one host read)."""
    for name, n in zip(ROW_FLAGS, invalid.tolist()):
        if n:
            raise ValueError(f"{name} holds {n} (row, item) pair{'s' if n > 1 else ''} whose row is outside its "
                             "batch (the rows of that batch's topk)")


@check
def check_topk_batch(topk, truth, *, history=None, user_ids=None, categories=None, n_items: Optional[int] = None,
                     numpy: bool = True, device=None) -> Dict[str, Tensor]:
    """The rows of one batch of top-k lists, checked: ``topk [B, k]`` integer item ids
    (``-1`` pads a short list, after its items), ``truth`` and ``history`` as ``[2, E]``
    (row in the batch, item) pairs or a sparse ``[B, n_items]`` tensor (``n_items``: the
    metric's), ``user_ids [B]`` and ``categories [B]`` integers. Returns the state's
    entries: ``widths`` (``k`` per row), ``items`` (the lists, row by row, ``-1`` included),
    ``truth_counts``/``truth_items``/``truth_gains`` (each row's entries), the same for
    ``history`` when given, ``user_ids`` and ``categories`` when given, and ``invalid``
    (``[2]`` the truth's and the history's pairs outside the batch, for :func:`raise_row_flags`)."""
    if numpy:
        topk, truth, history, user_ids, categories = as_tensors(
            device=device, topk=topk, truth=truth, history=history, user_ids=user_ids, categories=categories)
    topk = _integers("topk", topk)
    if topk.ndim != 2:
        raise ValueError(f"topk must be [B, k] item ids in rank order; got shape {tuple(topk.shape)}")
    n = topk.shape[0]
    rows: Dict[str, Tensor] = {"widths": torch.full((n,), topk.shape[1], dtype=torch.int64, device=topk.device),
                               "items": topk.reshape(-1)}
    invalid = []
    rows["truth_counts"], rows["truth_items"], rows["truth_gains"], outside = _batch_pairs("truth", truth, n, n_items)
    invalid.append(outside)
    if history is not None:
        rows["history_counts"], rows["history_items"], rows["history_gains"], outside = _batch_pairs(
            "history", history, n, n_items)
        invalid.append(outside)
    else:
        invalid.append(torch.zeros((), dtype=torch.int64, device=topk.device))
    rows["invalid"] = torch.stack([t.to(topk.device) for t in invalid])
    if user_ids is not None:
        rows["user_ids"] = check_rows("user_ids", user_ids, n, kind="int", unit="list of topk", lists=True)
    if categories is not None:
        rows["categories"] = check_rows("categories", categories, n, kind="int", unit="list of topk", lists=True)
    return rows
