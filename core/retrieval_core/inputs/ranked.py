"""Ranked-list inputs: the gains of each query in rank order, with R and the ideal gains
from outside the list, checked once as one object.

:func:`ranked_inputs` is the check sequence of ``evaluate_ranked``: the options, the keys
(per-query, no confidence key), NumPy arrays as tensors; the gains' own checks (values,
shapes, R against the list) are read with the ranking, by ``ranked_values``.
:func:`ranked_keys` and :func:`check_indexes` are the parts that ``evaluate_scores`` with
``n_relevant=`` and the TREC keys without a trec_eval name share.

Example:
    >>> import torch
    >>> inputs = ranked_inputs(torch.tensor([[1, 0]]), ["mrr"], n_relevant=torch.tensor([2]))
    >>> [m.key for m in inputs.keys], inputs.options["reduce"]
    (['mrr'], 'mean')
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, Optional, Tuple

import torch
from torch import Tensor

from ..metrics.keys import MetricKey, parse_metrics
from ..validate import (
    as_categories, as_tensors, check_per_query_keys, check_score_options, check_stats_options, tensor_device,
)
from ..validate.stats import N_RESAMPLES

__all__ = ["RankedInputs", "ranked_inputs", "ranked_keys", "check_indexes"]


@dataclass(frozen=True)
class RankedInputs:
    """Checked inputs of :func:`~retrieval_core.evaluate_ranked`: parsed ``keys``, the
    tensors as given (NumPy arrays converted), ``categories`` and ``options``: ``empty``,
    ``reduce`` and the checked interval options (``ci``, ``ci_method``, ``n_resamples``,
    ``seed``, ``keep_per_query``)."""

    keys: Tuple[MetricKey, ...]
    gains: Tensor
    n_relevant: Optional[Tensor]
    ideal: Optional[Tensor]
    mask: Optional[Tensor]
    indexes: Optional[Tensor]
    categories: Any
    options: Dict[str, Any]


def ranked_keys(metrics) -> Tuple[MetricKey, ...]:
    """The parsed keys of ranked lists: per-query keys, no confidence key (no confidence
    comes with a ranked list)."""
    keys = tuple(parse_metrics(metrics))
    check_per_query_keys(keys, "evaluate_embeddings computes them")
    if any(m.confidence is not None for m in keys):
        raise ValueError("confidence keys (erc:, conf:, spearman:, kendall:) need per-query confidences: use "
                         "evaluate_scores(..., confidence=)")
    return keys


def ranked_options(metrics, *, empty: str, reduce: str, **stats) -> Tuple[Tuple[MetricKey, ...], Dict[str, Any]]:
    """The parsed keys and the checked options (``empty``, ``reduce`` and ``stats``, the
    interval options) of ranked lists; ``empty`` and ``reduce`` were checked by the caller
    (:func:`~retrieval_core.validate.check_score_options`)."""
    keys = ranked_keys(metrics)
    return keys, dict(empty=empty, reduce=reduce, **check_stats_options(keys, reduce=reduce, **stats))


def check_indexes(values: Tensor, indexes: Tensor, name: str) -> None:
    """``indexes`` of the flat form: an integer tensor, 1-D, of ``values``' length."""
    if not isinstance(indexes, Tensor) or indexes.is_floating_point() or indexes.is_complex() \
            or indexes.dtype == torch.bool:
        raise TypeError("indexes must be an integer tensor (the query of each entry)")
    if indexes.shape != values.shape or values.ndim != 1:
        raise ValueError(f"with indexes, {name} and indexes must be 1-D of one length; got {tuple(values.shape)} and "
                         f"{tuple(indexes.shape)}")


def ranked_inputs(gains, metrics, *, n_relevant=None, ideal=None, mask=None, indexes=None, empty: str = "skip",
                  reduce: str = "mean", categories=None, ci: Optional[float] = None, ci_method: str = "bootstrap",
                  n_resamples: int = N_RESAMPLES, seed: int = 0, keep_per_query: bool = False) -> RankedInputs:
    """Check the options and keys of :func:`~retrieval_core.evaluate_ranked` once and
    convert its NumPy arrays (arguments as there)."""
    check_score_options(ties="stable", empty=empty, reduce=reduce)
    keys, options = ranked_options(metrics, empty=empty, reduce=reduce, ci=ci, ci_method=ci_method,
                                   n_resamples=n_resamples, seed=seed, keep_per_query=keep_per_query)
    gains, n_relevant, ideal, mask, indexes = as_tensors(gains=gains, n_relevant=n_relevant, ideal=ideal, mask=mask,
                                                         indexes=indexes)
    categories = as_categories(categories, tensor_device(gains))
    return RankedInputs(keys, gains, n_relevant, ideal, mask, indexes, categories, options)
