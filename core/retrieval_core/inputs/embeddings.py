"""Embedding-mode inputs: every argument of an embedding evaluation checked once, as one object.

:func:`embedding_inputs` is the one check sequence of ``evaluate_embeddings`` (one process),
of :func:`~retrieval_core.distributed.evaluate_embeddings_across_ranks` (each rank's rows,
``local=True``) and :func:`~retrieval_core.distributed.evaluate_split`: NumPy arrays become
tensors, the keys are parsed, the options, structure and values are checked, and the result
is an :class:`EmbeddingInputs` that the evaluation below takes without checking again.

Example:
    >>> import torch
    >>> x = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    >>> inputs = embedding_inputs(x, torch.tensor([0, 1]), ["cmc@1"])
    >>> inputs.self_gallery, inputs.gallery_ids.tolist(), [m.key for m in inputs.keys]
    (True, [0, 1], ['cmc@1'])
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Dict, Optional, Sequence, Tuple

import torch
from torch import Tensor

from ..metrics.keys import MetricKey, depth_needed, parse_metrics, split_scopes
from ..validate import (
    check_backend, check_categories, check_confidence, check_embedding_options, check_embedding_values,
    check_embeddings, check_labels, check_pairs, check_per_class, check_query_gallery,
    as_tensor, check_return_neighbours, check_rows, check_same_device, check_stats_options, embedding_arrays,
)
from ..validate.pairs import check_truth_mode
from ..validate.stats import N_RESAMPLES
from .pairs import UserItems, user_items

__all__ = ["EmbeddingInputs", "embedding_inputs", "embedding_options"]


@dataclass(frozen=True)
class EmbeddingInputs:
    """Checked inputs of an embedding evaluation.

    ``gallery``/``gallery_labels``/``gallery_ids`` are the query side's own when
    ``self_gallery`` (each query's row excluded; ``gallery_ids`` are ``query_ids``, or
    positions); ``given_ids`` the query ids the caller gave (None: none).
    ``options``: ``distance``, ``relevance``, ``ties``, ``empty``, ``reduce``,
    ``per_class``, ``memory_budget``, ``progress``, ``backend``, the interval options
    (``ci``, ``ci_method``, ``n_resamples``, ``seed``, ``keep_per_query``) and
    ``return_neighbours`` (an int, 0: none).
    ``truth``: relevance given as (query, item) pairs (``relevance=`` a tensor; ``options``
    then holds ``relevance=None``, and the labels are placeholders of zeros); ``exclude``:
    each query's excluded gallery items (``exclude=``); each None when not given.
    """

    keys: Tuple[MetricKey, ...]
    query: Tensor
    query_labels: Tensor
    gallery: Optional[Tensor]
    gallery_labels: Optional[Tensor]
    query_ids: Optional[Tensor]
    gallery_ids: Optional[Tensor]
    given_ids: Optional[Tensor]
    self_gallery: bool
    categories: Any
    confidence: Optional[Tensor]
    options: Dict[str, Any]
    truth: Optional[UserItems] = None
    exclude: Optional[UserItems] = None

    @property
    def custom(self) -> bool:
        """Whether a ``relevance`` callable reads the labels."""
        return self.options["relevance"] is not None

    def but(self, **changes) -> "EmbeddingInputs":
        """A copy with some fields changed (``options`` updated, not replaced): a part of
        checked inputs is checked inputs."""
        options = changes.pop("options", None)
        if options is not None:
            changes["options"] = dict(self.options, **options)
        return replace(self, **changes)


def embedding_options(*, distance="cosine", relevance=None, ties: str = "stable", empty: str = "skip",
                      reduce: str = "mean", per_class: Optional[str] = None, memory_budget: Optional[int] = None,
                      progress=None, backend: str = "torch", ci: Optional[float] = None,
                      ci_method: str = "bootstrap", n_resamples: int = N_RESAMPLES, seed: int = 0,
                      keep_per_query: bool = False, return_neighbours: Optional[int] = None) -> Dict[str, Any]:
    """The options of an embedding evaluation as one dict (not checked), in the order the checks read them."""
    from_stats = dict(ci=ci, ci_method=ci_method, n_resamples=n_resamples, seed=seed, keep_per_query=keep_per_query)
    return dict(distance=distance, relevance=relevance, ties=ties, empty=empty, reduce=reduce, per_class=per_class,
                memory_budget=memory_budget, progress=progress, backend=backend, **from_stats,
                return_neighbours=return_neighbours)


def _check_options(keys: Sequence[MetricKey], options: Dict[str, Any]) -> Dict[str, Any]:
    """The options checked (the keys they apply to parsed), as :class:`EmbeddingInputs` holds them."""
    budget = check_embedding_options(
        distance=options["distance"], relevance=options["relevance"], ties=options["ties"], empty=options["empty"],
        reduce=options["reduce"], per_class=options["per_class"], memory_budget=options["memory_budget"],
        backend=options["backend"], keys=keys, pairs=True)
    stats = check_stats_options(keys, ci=options["ci"], ci_method=options["ci_method"],
                                n_resamples=options["n_resamples"], seed=options["seed"],
                                keep_per_query=options["keep_per_query"], reduce=options["reduce"],
                                per_class=options["per_class"])
    return dict(options, **stats, memory_budget=budget,
                return_neighbours=check_return_neighbours(options["return_neighbours"]))


def _truth_labels(query_labels, gallery, gallery_labels, query_ids, gallery_ids, query, options, keys):
    """With relevance pairs (``relevance=`` a tensor): ``(query_labels, gallery_labels, truth,
    options)``, the labels placeholders of zeros (the pairs say what is relevant) and the
    pairs apart from the options (``relevance=None`` there). Otherwise the labels as given."""
    truth = options["relevance"]
    if not isinstance(truth, Tensor):
        return query_labels, gallery_labels, None, options
    check_truth_mode(query_labels, gallery, gallery_labels, query_ids, gallery_ids, per_class=options["per_class"],
                     backend=options["backend"], set_keys=split_scopes(keys)[1])
    query_labels = torch.zeros(query.shape[0], dtype=torch.int64, device=query.device)
    gallery_labels = torch.zeros(len(gallery), dtype=torch.int64, device=query.device)
    return query_labels, gallery_labels, truth, dict(options, relevance=None)


def _interactions(truth, exclude, n_query: int, n_gallery: int, backend: str, device):
    """The relevance pairs and the excluded items, each checked once into a per-query CSR."""
    if exclude is not None and backend != "torch":
        raise ValueError("relevance pairs and exclude= need backend='torch'")
    if truth is not None:
        truth = user_items("relevance", truth, n_query, n_gallery, graded=True, device=device)
    if exclude is not None:
        exclude = user_items("exclude", exclude, n_query, n_gallery, repeats=True, device=device)
    return truth, exclude


def embedding_inputs(query, query_labels, metrics, *, gallery=None, gallery_labels=None, query_ids=None,
                     gallery_ids=None, categories=None, confidence=None, local: bool = False, exclude=None,
                     n_items: Optional[int] = None, **options) -> EmbeddingInputs:
    """Check every input of an embedding evaluation once; ``options``: those of
    :func:`embedding_options` (defaults there).

    ``local``: one rank's rows of an evaluation across ranks: zero rows are allowed, a
    self-gallery (``gallery=None``) is left to the caller (its ids are global positions)
    and ``return_neighbours`` is not compared with the (local) gallery size.
    """
    if "relevance" in options:  # relevance pairs as a NumPy array, as every other input
        options["relevance"] = as_tensor("relevance", options["relevance"])
    exclude = as_tensor("exclude", exclude)
    options = embedding_options(**options)
    keys = tuple(parse_metrics(metrics))
    options = _check_options(keys, options)
    query, query_labels, gallery, gallery_labels, query_ids, gallery_ids, confidence, categories = embedding_arrays(
        query, query_labels, gallery, gallery_labels, query_ids, gallery_ids, confidence, categories)
    given_ids = query_ids
    distance, custom = options["distance"], options["relevance"] is not None
    query = check_embeddings("query", query, distance, batch=local)
    query_labels, gallery_labels, truth, options = _truth_labels(query_labels, gallery, gallery_labels, query_ids,
                                                                 gallery_ids, query, options, keys)
    custom = options["relevance"] is not None
    query_labels = check_labels("query_labels", query_labels, query.shape[0], custom)
    check_pairs(gallery, gallery_labels, query_ids, gallery_ids)
    self_gallery = gallery is None
    if not self_gallery:
        gallery = check_embeddings("gallery", gallery, distance, batch=local)
        gallery_labels = check_labels("gallery_labels", gallery_labels, gallery.shape[0], custom)
        check_query_gallery(query, query_labels, gallery, gallery_labels, custom)
    if query_ids is not None:
        query_ids = check_rows("query_ids", query_ids, query.shape[0], unit="embedding")
    if gallery_ids is not None:
        gallery_ids = check_rows("gallery_ids", gallery_ids, gallery.shape[0], unit="embedding")
    if self_gallery and not local:  # the queries are the gallery; without ids their positions serve
        gallery, gallery_labels = query, query_labels
        query_ids = torch.arange(query.shape[0], device=query.device) if query_ids is None else query_ids
        gallery_ids = query_ids
    check_same_device(query=query, query_labels=query_labels, gallery=gallery, gallery_labels=gallery_labels,
                      query_ids=query_ids, gallery_ids=gallery_ids)
    query_keys, _ = split_scopes(keys)
    check_backend(options["backend"], distance=distance, custom=custom, labels=query_labels, device=query.device,
                  whole=depth_needed(query_keys).whole)
    check_per_class(options["per_class"], query_labels, custom)
    if categories is not None:
        check_categories(categories, query.shape[0], "query")
    if confidence is not None:
        confidence = check_confidence(confidence, query.shape[0], "query").to(query.device)
    check_embedding_values(query, query_labels, None if self_gallery else gallery,
                           None if self_gallery else gallery_labels, distance=distance, custom=custom)
    if n_items is None:
        n_items = query.shape[0] if gallery is None else gallery.shape[0]
    truth, exclude = _interactions(truth, exclude, query.shape[0], n_items, options["backend"], query.device)
    inputs = EmbeddingInputs(keys, query, query_labels, gallery, gallery_labels, query_ids, gallery_ids, given_ids,
                             self_gallery, categories, confidence, options, truth, exclude)
    if not local:
        _check_neighbours(inputs, query_keys)
    return inputs


def _check_neighbours(inputs: EmbeddingInputs, query_keys) -> None:
    """``return_neighbours`` against what the evaluation gives: the gallery's size, a per-query key, torch."""
    k, n_gallery = inputs.options["return_neighbours"], inputs.gallery.shape[0]
    if k > n_gallery:  # its type was checked with the options (check_return_neighbours)
        raise ValueError(f"return_neighbours={k} exceeds the gallery size {n_gallery}")
    if k and not query_keys:
        raise ValueError("return_neighbours needs a per-query key (e.g. 'cmc@1'): the neighbours come from its ranking")
    if k and inputs.options["backend"] != "torch":
        raise ValueError(f"return_neighbours needs backend='torch'; got backend={inputs.options['backend']!r}")
