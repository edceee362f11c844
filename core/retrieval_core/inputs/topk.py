"""Top-k recommendation lists: ``[U, k]`` item ids in rank order with the truth as
``[2, E]`` (user, item) pairs or a sparse ``[U, I]`` tensor of gains, checked once into a
:class:`TopkInputs`, and turned, a block of users at a time, into the :class:`Ranking`
every accuracy kernel reads (:func:`topk_ranking`).

No dense ``[U, I]`` is built (I may be 10^6): the truth is checked, as the history, into
a per-user CSR (:func:`~retrieval_core.inputs.pairs.user_items`, the conversion of
``exclude=`` and relevance pairs), held as its sorted int64 keys ``user * n_items + item``
with their gains, and each listed item's gain is found by ``searchsorted``; R (each
user's relevant items, listed or not) is the CSR's count per user, and the ideal gains
of graded truth are each user's largest gains, to the depth the keys need. A top-k
list has no tied scores: its order is the ranking.

No host read per block of users: a block finds its truth pairs from the CSR's offsets on
the host, its users' pair counts are R, and the largest R (the depth of an ideal, the
bound of a binary ideal's discount sums) is known on the host once per call.

Example:
    >>> import torch
    >>> inputs = topk_inputs(torch.tensor([[2, 0], [1, -1]]), torch.tensor([[0, 0, 1], [0, 3, 2]]),
    ...                      ["recall@2"], n_items=4)
    >>> inputs.n_relevant.tolist()
    [2, 1]
    >>> topk_ranking(inputs, slice(0, 2), 1).relevance.tolist()
    [[0.0, 1.0], [0.0, 0.0]]
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, Optional, Tuple

import torch
from torch import Tensor

from ..metrics.items import ItemLists
from ..metrics.keys import MetricKey, depth_needed, parse_metrics
from ..ranking.ranking import Ranking
from ..validate import as_categories, as_tensors, check_categories, check_score_options, check_stats_options
from ..validate.options import positive_int
from ..validate.stats import N_RESAMPLES
from ..validate.topk import check_item_data, check_topk, check_topk_keys
from .pairs import user_items

__all__ = ["TopkInputs", "topk_inputs", "topk_ranking", "ideal_width"]


@dataclass(frozen=True)
class TopkInputs:
    """Checked inputs of :func:`~retrieval_core.evaluate_topk`: parsed ``keys``, the lists and
    item data (``lists``), the truth's gains > 0 as sorted keys ``user * scale + item``
    (``truth_keys``, ``truth_gains`` float64), ``n_relevant`` (R per user), ``binary`` (every
    gain 1: the ideal is R ones), ``categories`` and ``options`` (``empty``, ``reduce`` and the
    checked interval options); ``truth_offsets``: each user's first key, on the host (a
    block of users finds its keys without a read), and ``most_relevant``, the largest R."""

    keys: Tuple[MetricKey, ...]
    lists: ItemLists
    truth_keys: Tensor
    truth_gains: Tensor
    scale: int
    n_relevant: Tensor
    binary: bool
    categories: Any
    options: Dict[str, Any]
    truth_offsets: Tensor
    most_relevant: int


def _n_items(n_items, truth, *items) -> Optional[int]:
    """The catalogue size: ``n_items``, else a sparse truth's columns, else the length of
    the item data given (None: unknown)."""
    if n_items is not None:
        return positive_int("n_items", n_items)
    if isinstance(truth, Tensor) and truth.layout != torch.strided and truth.ndim == 2:
        return int(truth.shape[1])
    given = [x for x in items if isinstance(x, Tensor)]
    return int(given[0].shape[0]) if given and given[0].ndim >= 1 else None


def topk_inputs(topk, truth, metrics, *, n_items: Optional[int] = None, item_popularity=None, item_categories=None,
                item_embeddings=None, tail_ratio: float = 0.1, history=None, empty: str = "skip",
                reduce: str = "mean", categories=None,
                ci: Optional[float] = None, ci_method: str = "bootstrap", n_resamples: int = N_RESAMPLES,
                seed: int = 0, keep_per_query: bool = False) -> TopkInputs:
    """Check every input of :func:`~retrieval_core.evaluate_topk` once (arguments as there)."""
    check_score_options(ties="stable", empty=empty, reduce=reduce)
    keys = tuple(parse_metrics(metrics))
    stats = check_stats_options(keys, reduce=reduce, ci=ci, ci_method=ci_method, n_resamples=n_resamples, seed=seed,
                                keep_per_query=keep_per_query)
    topk, truth, item_popularity, item_categories, item_embeddings, history = as_tensors(
        topk=topk, truth=truth, item_popularity=item_popularity, item_categories=item_categories,
        item_embeddings=item_embeddings, history=history)
    n_items = _n_items(n_items, truth, item_popularity, item_categories, item_embeddings)
    ids = check_topk(topk, n_items)
    truth = user_items("truth", truth, ids.shape[0], n_items, graded=True)
    seen = None if history is None else user_items("history", history, ids.shape[0], n_items, repeats=True)
    scale = truth.n_items
    popularity, item_categories, item_embeddings = check_item_data(
        n_items if n_items is not None else scale, item_popularity, item_categories, item_embeddings, tail_ratio)
    check_topk_keys(keys, ids, n_items_given=n_items is not None, popularity=popularity,
                    similarity=item_categories is not None or item_embeddings is not None, history=seen is not None)
    categories = as_categories(categories, ids.device)
    if categories is not None:
        check_categories(categories, ids.shape[0], "user (row of topk)")
    gains = torch.ones(truth.items.shape, dtype=torch.float64, device=truth.items.device) if truth.binary \
        else truth.gains.to(torch.float64)
    lists = ItemLists(ids, n_items, popularity, item_categories, item_embeddings, float(tail_ratio),
                      None if seen is None else seen.keys(), 1 if seen is None else seen.n_items)
    return TopkInputs(keys, lists, truth.keys(), gains, scale, truth.counts().to(ids.device), truth.binary,
                      categories, dict(stats, empty=empty, reduce=reduce), truth.host_offsets, truth.most_items)


def ideal_width(inputs: TopkInputs, keys) -> int:
    """How many of each user's largest gains the keys' ideal DCG reads: the largest cutoff,
    every R for ``@r`` and whole-list keys (0: none needs the ideal, or the truth is binary
    and the ideal is R ones, a count)."""
    keys = [m for m in keys if m.spec.needs_ideal]
    if not keys or inputs.binary:
        return 0
    depth = depth_needed(keys)
    width = max(depth.k, 1)
    if depth.at_r or depth.whole:
        width = max(width, inputs.most_relevant)
    return width


def _listed_gains(inputs: TopkInputs, ids: Tensor, users: Tensor) -> Tensor:
    """``[B, d]`` float64: the truth's gain of each listed (user, item), 0 where none."""
    keys, scale = inputs.truth_keys, inputs.scale
    if keys.numel() == 0:
        return torch.zeros(ids.shape, dtype=torch.float64, device=ids.device)
    # an item id past the truth's scale is in no pair (its key would read another user's)
    listed = (ids >= 0) & (ids < scale)
    key = users.unsqueeze(1) * scale + ids.clamp(min=0, max=scale - 1)
    at = torch.searchsorted(keys, key).clamp(max=keys.numel() - 1)
    return torch.where(listed & (keys[at] == key), inputs.truth_gains[at], 0.0)


def _ideal_rows(inputs: TopkInputs, start: int, stop: int, width: int) -> Tensor:
    """``[B, width]`` float64: the largest ``width`` gains of users ``start..stop-1``, in
    decreasing order, 0-padded. No host read: the keys' range from the host offsets, each
    user's pair count is its R, and the gains past ``width`` go to a spare row, dropped."""
    keys, scale = inputs.truth_keys, inputs.scale
    lo, hi = int(inputs.truth_offsets[start]), int(inputs.truth_offsets[stop])
    users, gains = keys[lo:hi] // scale - start, inputs.truth_gains[lo:hi]
    order = torch.sort(gains, descending=True, stable=True).indices
    order = order[torch.sort(users[order], stable=True).indices]  # by user, each user's gains decreasing
    users, gains = users[order], gains[order]
    counts = inputs.n_relevant[start:stop].to(keys.device)  # each user's pairs
    place = torch.arange(users.numel(), device=keys.device) - (counts.cumsum(0) - counts)[users]
    out = torch.zeros((stop - start + 1, width), dtype=torch.float64, device=keys.device)
    kept = place < width
    out[torch.where(kept, users, stop - start), place.clamp(max=width - 1)] = gains
    return out[:stop - start]


def topk_ranking(inputs: TopkInputs, rows: slice, width: int) -> Ranking:
    """The :class:`Ranking` of the users ``rows`` (a slice): the listed items' gains in rank
    order, padding invalid, R from the truth, the ideal as R ones (binary truth) or each
    user's ``width`` largest gains (:func:`ideal_width`). Complete: the list is all that is
    retrieved (items past it are not), as for ranked lists with R given."""
    ids = inputs.lists.ids[rows]
    users = torch.arange(rows.start, rows.start + ids.shape[0], device=ids.device)
    valid = ids >= 0
    n_relevant = inputs.n_relevant[rows]
    ideal = _ideal_rows(inputs, rows.start, rows.start + ids.shape[0], width) if width else None
    ones = n_relevant if inputs.binary else None
    return Ranking(relevance=_listed_gains(inputs, ids, users), valid=valid, n_relevant=n_relevant,
                   n_candidates=valid.sum(1), ideal=ideal, ideal_ones=ones, complete=True,
                   ideal_ones_max=inputs.most_relevant if inputs.binary else None)
