"""The checks of top-k recommendation lists (``evaluate_topk``): the lists, the item data
and the keys. The truth and the history, (user, item) pairs or a sparse ``[U, I]``
tensor, are checked as every such input is (:func:`~retrieval_core.validate.pairs.check_user_items`).

Each returns its input in the canonical form the evaluation takes (the lists as int64).

Example:
    >>> check_topk(torch.tensor([[3, -1, 2]]), None)
    Traceback (most recent call last):
    ...
    ValueError: topk pads a short list with -1 after its items; row 0 has an item after a -1
"""
from __future__ import annotations

import math
from typing import Optional

import torch
from torch import Tensor

from .counting import check
from .tensors import check_device_available, widen_unsigned

__all__ = ["check_topk", "check_item_data", "check_topk_keys"]


def _integers(name: str, value) -> Tensor:
    if not isinstance(value, Tensor):
        raise TypeError(f"{name} must be a torch.Tensor; got {type(value).__name__}")
    check_device_available(name, value.device)
    if value.is_floating_point() or value.is_complex() or value.dtype == torch.bool:
        raise TypeError(f"{name} must hold integer ids; got {value.dtype}")
    return widen_unsigned(name, value).to(torch.int64)


@check
def check_topk(topk, n_items: Optional[int]) -> Tensor:
    """``[U, k]`` item ids in rank order, ``-1`` after the items of a short list, no item
    twice in a list, ids below ``n_items`` when it is known; returned as int64."""
    ids = _integers("topk", topk)
    if ids.ndim != 2:
        raise ValueError(f"topk must be [users, k] item ids; got shape {tuple(ids.shape)}")
    if ids.shape[1] == 0:
        raise ValueError("topk must hold at least one column (k >= 1)")
    if ids.numel() == 0:
        return ids
    if bool((ids < -1).any()):
        raise ValueError("topk holds ids below -1 (item ids are >= 0; -1 pads a short list)")
    if n_items is not None and bool((ids >= n_items).any()):
        raise ValueError(f"topk holds item ids >= n_items = {n_items}")
    pad = ids == -1
    late = ~pad[:, 1:] & pad[:, :-1]
    if bool(late.any()):
        raise ValueError(f"topk pads a short list with -1 after its items; row {int(late.any(1).nonzero()[0])} has "
                         "an item after a -1")
    s = ids.sort(dim=1).values
    twice = (s[:, 1:] == s[:, :-1]) & (s[:, 1:] >= 0)
    if bool(twice.any()):
        row = int(twice.any(1).nonzero()[0])
        item = int(s[row, 1:][twice[row]][0])
        raise ValueError(f"topk lists item {item} twice for user {row}: a top-k list holds each item once")
    return ids


@check
def check_item_data(n_items: int, item_popularity=None, item_categories=None, item_embeddings=None,
                    tail_ratio: float = 0.1):
    """``(popularity float64 [I] or None, categories int64 [I] or None, embeddings [I, D] or None)``:
    one entry per item, popularity finite and >= 0, categories integers, embeddings
    floating point and finite; ``tail_ratio`` a finite number > 0."""
    if isinstance(tail_ratio, bool) or not isinstance(tail_ratio, (int, float)) or not 0 < tail_ratio < math.inf:
        raise ValueError(f"tail_ratio must be a number > 0 (a share of the items seen in training, or a count of "
                         f"interactions above 1); got {tail_ratio!r}")
    if item_popularity is not None:
        if not isinstance(item_popularity, Tensor) or item_popularity.shape != (n_items,) \
                or item_popularity.is_complex():
            raise ValueError(f"item_popularity must be a real tensor of one value per item [{n_items}]")
        item_popularity = item_popularity.to(torch.float64)
        if not bool(((item_popularity >= 0) & torch.isfinite(item_popularity)).all()):
            raise ValueError("item_popularity must be finite and >= 0")
    if item_categories is not None:
        item_categories = _integers("item_categories", item_categories)
        if item_categories.shape != (n_items,):
            raise ValueError(f"item_categories must hold one category per item [{n_items}]; got shape "
                             f"{tuple(item_categories.shape)}")
    if item_embeddings is not None:
        if not isinstance(item_embeddings, Tensor) or not item_embeddings.is_floating_point() \
                or item_embeddings.ndim != 2 or item_embeddings.shape[0] != n_items:
            raise ValueError(f"item_embeddings must be a floating point tensor [{n_items}, dims]")
        if not bool(torch.isfinite(item_embeddings).all()):
            raise ValueError("item_embeddings must be finite")
    return item_popularity, item_categories, item_embeddings


@check
def check_topk_keys(keys, ids: Tensor, *, n_items_given: bool, popularity: Optional[Tensor], similarity: bool,
                    history: bool = False) -> None:
    """Keys that the top-k lists ``ids`` answer: no cutoff past the lists, no metric that
    needs every candidate of the collection, no confidence key, and the item data each
    beyond-accuracy key needs (its spec's ``item_data``; ``"item_popularity > 0"``: a
    popularity above 0 for every listed item, whose self-information -log2 p is finite)."""
    width = ids.shape[1]
    for m in keys:
        if m.confidence is not None:
            raise ValueError(f"{m.key}: confidence keys need per-query confidences, which top-k lists do not hold")
        if m.spec.needs_all_candidates:
            raise ValueError(f"{m.key} needs every candidate of the collection, which a top-k list does not hold")
        if m.spec.kernel is None and not m.spec.items:
            raise ValueError(f"{m.key}: embedding-set metrics need embeddings; use evaluate_embeddings")
        if m.form == "k" and m.cutoff > width:  # an @k key (spec.AT_K)
            raise ValueError(f"{m.key} cuts at {m.cutoff} but topk holds {width} items per user: the lists must "
                             "reach the cutoff (pad a short list with -1)")
        given = {"n_items": n_items_given, "item_popularity": popularity is not None,
                 "item_popularity > 0": popularity is not None,
                 "item_categories or item_embeddings": similarity, "history": history}
        missing = [name for name in m.spec.item_data if not given[name]]
        if missing:
            raise ValueError(f"{m.key} needs {missing[0].split(' > ')[0]}=")
        if "item_popularity > 0" in m.spec.item_data:
            listed = ids[:, :m.cutoff]
            unseen = (listed >= 0) & (popularity[listed.clamp(min=0)] == 0)
            if bool(unseen.any()):
                raise ValueError(f"{m.key}: item {int(listed[unseen][0])} has popularity 0, whose self-information "
                                 "-log2(share) is infinite; novelty needs every listed item's popularity > 0")
