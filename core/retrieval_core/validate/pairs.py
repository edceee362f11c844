"""The one check of (user, item) interactions, ``[2, E]`` pairs or a sparse ``[U, I]`` tensor:
the truth and the history of ``evaluate_topk`` (``truth``, ``history``), the relevance
judgements of a two-tower evaluation (``relevance``) and the seen items that ``exclude=``
removes from the ranking (``exclude``).

:func:`check_user_items` returns the pairs sorted by user, then item, with their gains:
the one form that :func:`retrieval_core.inputs.pairs.user_items` lays out per user (a CSR,
whose keys ``user * n_items + item`` are sorted as they stand). One rule for every input:

- ``[2, E]`` integer pairs: gain 1 each. A sparse COO or CSR ``[U, I]`` tensor: its values,
  real, finite and >= 0 (zeros dropped: no pair); a COO tensor's repeated entries are
  summed first (torch's meaning of them). Judgements (``graded``: the truth, relevance)
  keep the values as gains, at most :data:`~retrieval_core.ranking.gains.GAIN_LIMIT`
  (sums of them fit float64); seen items (the history, exclude) keep only that the pair
  is there.
- A pair given twice: an error naming the pair for judgements (which gain would count?);
  counted once for seen items (``repeats``: a user may have seen an item twice).
- User ids in ``[0, U)``, item ids in ``[0, n_items)``; without ``n_items`` (top-k lists of
  an unknown catalogue) a sparse tensor's columns, else the largest item id + 1.

Example:
    >>> check_user_items("exclude", torch.tensor([[0, 1], [5, 1]]), 2, 4)
    Traceback (most recent call last):
    ...
    ValueError: exclude holds item ids outside [0, 4) (the items, columns); got 5
"""
from __future__ import annotations

from typing import Optional, Tuple

import torch
from torch import Tensor

from ..ranking.gains import GAIN_LIMIT
from .counting import check
from .tensors import check_device_available, widen_unsigned

__all__ = ["check_user_items", "check_truth_mode", "PAIRS_FORM", "KEY_LIMIT"]

PAIRS_FORM = "[2, E] (user, item) pairs or a sparse [users, items] torch tensor (COO or CSR)"
KEY_LIMIT = 2**63 - 1  # user * n_items + item must fit an int64 (a pair's sort key)


def _ids(name: str, pairs: Tensor) -> Tensor:
    if pairs.is_floating_point() or pairs.is_complex() or pairs.dtype == torch.bool:
        raise TypeError(f"{name} must hold integer (user, item) ids; got {pairs.dtype}")
    if pairs.ndim != 2 or pairs.shape[0] != 2:
        raise ValueError(f"{name} must be {PAIRS_FORM}; got shape {tuple(pairs.shape)}")
    return widen_unsigned(name, pairs).to(torch.int64)


def _sparse_parts(name: str, value: Tensor, n_users: int, n_items: Optional[int]) -> Tuple[Tensor, Tensor, Tensor]:
    """(users, items, values) of a sparse COO (coalesced: repeated entries summed, torch's
    meaning) or CSR tensor of ``n_users`` rows and ``n_items`` columns (None: any)."""
    if value.ndim != 2 or value.shape[0] != n_users or (n_items is not None and value.shape[1] != n_items):
        columns = "items" if n_items is None else n_items
        raise ValueError(f"{name} must be a sparse [users, items] = [{n_users}, {columns}] tensor; got shape "
                         f"{tuple(value.shape)}")
    if value.layout == torch.sparse_coo:
        value = value.coalesce()
        users, items = value.indices()
        return users, items, value.values()
    if value.layout == torch.sparse_csr:
        crow = value.crow_indices()
        users = torch.repeat_interleave(torch.arange(value.shape[0], device=crow.device), crow.diff())
        return users, value.col_indices(), value.values()
    raise TypeError(f"{name} must be {PAIRS_FORM}; got layout {value.layout}")


def _gains(name: str, values: Tensor, graded: bool) -> Tensor:
    """A sparse tensor's values as gains (``graded``) or as a 0/1 membership (bool)."""
    if values.is_complex():
        raise TypeError(f"{name} values must be real numbers; got {values.dtype}")
    values = widen_unsigned(name, values)
    if values.dtype == torch.bool:
        return values
    if values.numel():
        bad = torch.isnan(values) | (values < 0)
        if values.is_floating_point():
            bad |= ~torch.isfinite(values)
        if bool(bad.any()):
            raise ValueError(f"{name} values must be finite and >= 0; got {values[bad][0].item()}")
        if graded and values.is_floating_point() and bool((values > GAIN_LIMIT).any()):
            raise ValueError(f"{name} gains must be at most 2^960 (about 1e289) so that sums of them fit float64")
    return values if graded else values != 0


def _check_ids(name: str, users: Tensor, items: Tensor, n_users: int, n_items: Optional[int]) -> None:
    for what, ids, n, axis in (("user", users, n_users, "users, rows"), ("item", items, n_items, "items, columns")):
        outside = (ids < 0) if n is None else (ids < 0) | (ids >= n)
        if bool(outside.any()):
            bound = "n_items" if n is None else n
            raise ValueError(f"{name} holds {what} ids outside [0, {bound}) (the {axis}); got {ids[outside][0].item()}")


def _sorted_once(name: str, users: Tensor, items: Tensor, gains: Optional[Tensor], n_items: int,
                 repeats: bool) -> Tuple[Tensor, Tensor, Optional[Tensor]]:
    """The pairs sorted by ``user * n_items + item``, a pair given twice kept once
    (``repeats``) or refused. Pairs already in that order (sorted pairs, a coalesced COO
    tensor) are kept as given: no sort, no sorted copies."""
    key = (users * n_items).add_(items)  # n_users * n_items < 2^63: checked before
    if not bool((key[1:] >= key[:-1]).all()):  # the stable sort of sorted keys is the identity
        key, order = key.sort(stable=True)
        users, items = users[order], items[order]
        gains = None if gains is None else gains[order]
    twice = key[1:] == key[:-1]
    if bool(twice.any()):
        if not repeats:
            at = int(twice.nonzero()[0])
            raise ValueError(f"{name} holds the pair (user {users[at].item()}, item {items[at].item()}) twice; give "
                             "each pair once")
        once = torch.cat([torch.ones(1, dtype=torch.bool, device=key.device), ~twice])
        users, items = users[once], items[once]
        gains = None if gains is None else gains[once]
    return users, items, gains


@check
def check_user_items(name: str, value, n_users: int, n_items: Optional[int] = None, *, graded: bool = False,
                     repeats: bool = False) -> Tuple[Tensor, Tensor, Optional[Tensor], int]:
    """``(users, items, gains, n_items)``: the interactions ``value`` (named ``name``) of
    ``n_users`` users (rows) with ``n_items`` items (columns; None: a sparse tensor's
    columns, else the largest item id + 1), sorted by user then item, int64 ids;
    ``gains``: None when every pair counts 1 (pairs, a bool sparse tensor, values of 1),
    else the sparse values (``graded``; zeros dropped: not relevant). Without ``graded`` a
    sparse value only says whether the pair is there (non-zero). ``repeats``: a pair given
    twice counts once (seen items); else it is an error (a judgement given twice)."""
    if not isinstance(value, Tensor):
        raise TypeError(f"{name} must be {PAIRS_FORM}; got {type(value).__name__}")
    check_device_available(name, value.device)
    if value.layout == torch.strided:
        users, items = _ids(name, value)
        gains = None
    else:
        users, items, values = _sparse_parts(name, value, n_users, n_items)
        n_items = value.shape[1]
        gains = _gains(name, values, graded)
        keep = gains != 0
        users, items, gains = users.to(torch.int64)[keep], items.to(torch.int64)[keep], gains[keep]
        if gains.dtype == torch.bool or bool((gains == 1).all()):
            gains = None
    _check_ids(name, users, items, n_users, n_items)
    if n_items is None:
        n_items = int(items.max()) + 1 if items.numel() else 1
    if n_users * max(n_items, 1) > KEY_LIMIT:
        raise ValueError(f"{name}: users x items = {n_users} x {n_items} exceeds int64 (a pair's key, "
                         "user * n_items + item)")
    return (*_sorted_once(name, users, items, gains, n_items, repeats), n_items)


@check
def check_truth_mode(query_labels, gallery, gallery_labels, query_ids, gallery_ids, *, per_class, backend,
                     set_keys) -> None:
    """What an embedding evaluation with relevance pairs (``relevance=`` a tensor: a two-tower
    model's users against its items) leaves out: labels (the pairs say what is relevant),
    ids (rows are users, columns items, by position), a self-gallery, per-class views,
    set-level keys and faiss."""
    given = [name for name, v in (("query_labels", query_labels), ("gallery_labels", gallery_labels),
                                  ("query_ids", query_ids), ("gallery_ids", gallery_ids)) if v is not None]
    if given:
        raise ValueError(f"relevance pairs say which items are relevant to which query (by position): pass "
                         f"{' and '.join(given)} as None")
    if gallery is None:
        raise ValueError("relevance pairs need gallery= (the items, e.g. a two-tower model's item embeddings)")
    if per_class is not None:
        raise ValueError("per_class needs labels; relevance pairs have none")
    if set_keys:
        raise ValueError(f"set-level keys ({', '.join(m.key for m in set_keys)}) need labels; relevance pairs have "
                         "none")
    if backend != "torch":
        raise ValueError("relevance pairs and exclude= need backend='torch'")
