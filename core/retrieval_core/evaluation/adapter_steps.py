"""What the ignite and torchmetrics adapters share: constructor option checks and update-side batch steps.

Each adapter keeps its state and framework glue (ignite's output mapping and error
prefix, torchmetrics' states); the checks and values of a batch are these, written
once. Compute-side steps are in :mod:`retrieval_core.evaluation.steps`.

Example:
    >>> import torch
    >>> keys, stats = ranking_options(["mrr@3"], ties="stable", empty="skip", reduce="mean", compact=False)
    >>> [m.key for m in keys], stats["keep_per_query"]
    (['mrr@3'], True)
    >>> rows = check_score_rows(torch.tensor([[0.9, 0.2]]), torch.tensor([[1, 0]]), ids=torch.tensor([7]))
    >>> rows.n, rows.ids.tolist()
    (1, [7])
    >>> values, flags = score_batch_values(torch.tensor([[0.9, 0.2]]), torch.tensor([[1, 0]]), keys)
    >>> values.tolist(), flags.tolist()
    ([[1.0]], [0, 0, 0])
"""
from __future__ import annotations

from typing import Any, Dict, NamedTuple, Optional, Sequence, Tuple

import torch
from torch import Tensor

from .scores import score_values
from ..metrics.kernels import partial_auroc
from ..metrics.keys import MetricKey, parse_metrics
from ..ranking.flat import rank_flat
from .ranked import scores_ranked_values

from ..validate import (
    check_batch_like_earlier,
    check_compact_inputs,
    check_confidence,
    check_embedding_options,
    check_embeddings,
    check_labels,
    check_per_query_keys,
    check_rows,
    check_score_batch,
    check_score_options,
    check_stats_options,
    value_flags,
)

__all__ = ["ranking_options", "embedding_options", "agreed_embedding_options", "EMBEDDING_ROWS", "ScoreRows",
           "check_score_rows", "score_batch_values", "check_embedding_batch", "auroc_values"]

# the optional per-item rows of an embedding batch, with the kind of their values
EMBEDDING_ROWS: Tuple[Tuple[str, str], ...] = (("ids", "int"), ("is_query", "flag"), ("is_gallery", "flag"),
                                               ("categories", "int"))


# -- constructors ---------------------------------------------------------------------

def ranking_options(metrics, *, ties: str, empty: str, reduce: str, compact: bool, ci: Optional[float] = None,
                    ci_method: str = "bootstrap", n_resamples: int = 1000, seed: int = 0,
                    keep_per_query: bool = True) -> Tuple[Tuple[MetricKey, ...], Dict[str, Any]]:
    """The parsed keys and checked statistics options of a score-mode adapter (``RankingMetrics``)."""
    keys = parse_metrics(metrics)
    check_per_query_keys(keys, "use EmbeddingMetrics")
    check_score_options(ties=ties, empty=empty, reduce=reduce, compact=compact, keys=keys)
    stats = check_stats_options(keys, ci=ci, ci_method=ci_method, n_resamples=n_resamples, seed=seed,
                                keep_per_query=keep_per_query, reduce=reduce, compact=compact)
    return keys, stats


def embedding_options(metrics, *, distance="cosine", relevance=None, ties: str = "stable", empty: str = "skip",
                      reduce: str = "mean", per_class: Optional[str] = None, memory_budget: Optional[int] = None,
                      progress: bool = False, ci: Optional[float] = None, ci_method: str = "bootstrap",
                      n_resamples: int = 1000, seed: int = 0,
                      keep_per_query: bool = True) -> Tuple[Tuple[MetricKey, ...], Dict[str, Any]]:
    """The parsed keys and the checked options (``evaluate_embeddings``' keywords) of an
    embedding-mode adapter (``EmbeddingMetrics``)."""
    keys = parse_metrics(metrics)
    check_embedding_options(distance=distance, relevance=relevance, ties=ties, empty=empty, reduce=reduce,
                            per_class=per_class, memory_budget=memory_budget, keys=keys)
    stats = check_stats_options(keys, ci=ci, ci_method=ci_method, n_resamples=n_resamples, seed=seed,
                                keep_per_query=keep_per_query, reduce=reduce, per_class=per_class)
    options = dict(distance=distance, relevance=relevance, ties=ties, empty=empty, reduce=reduce,
                   per_class=per_class, memory_budget=memory_budget, progress=progress, **stats)
    return keys, options


def agreed_embedding_options(options: Dict[str, Any]) -> Dict[str, Any]:
    """The options every rank must pass alike: all but ``progress`` (which only decides who prints)."""
    return {k: v for k, v in options.items() if k != "progress"}


# -- update: score mode ---------------------------------------------------------------

class ScoreRows(NamedTuple):
    """The checked optional rows of a score batch of ``n`` queries."""

    n: int
    ids: Optional[Tensor]
    categories: Optional[Tensor]
    confidence: Optional[Tensor]


def check_score_rows(preds: Tensor, target: Tensor, *, ids: Optional[Tensor] = None,
                     categories: Optional[Tensor] = None, confidence: Optional[Tensor] = None,
                     compact: bool = False, mask: Optional[Tensor] = None, names: Optional[Tuple[str, str]] = None,
                     dims: Optional[str] = None) -> ScoreRows:
    """Structure of one score batch and its optional rows (values are read at compute)."""
    kwargs: Dict[str, Any] = {"mask": mask}
    if names is not None:
        kwargs["names"] = names
    if dims is not None:
        kwargs["dims"] = dims
    check_score_batch(preds, target, **kwargs)
    n = preds.shape[0]
    if ids is not None:
        ids = check_rows("ids", ids, n, lists=True)
    if categories is not None:
        categories = check_rows("categories", categories, n, lists=True)
    if confidence is not None:  # values (finite) are read once, at compute
        confidence = check_confidence(confidence, n, values=False, lists=True)
    check_compact_inputs(compact, ids=ids, categories=categories, confidence=confidence)
    return ScoreRows(n, ids, categories, confidence)


def score_batch_values(preds: Tensor, target: Tensor, keys: Sequence[MetricKey], *, ties: str = "stable",
                       mask: Optional[Tensor] = None, n_relevant: Optional[Tensor] = None,
                       ideal: Optional[Tensor] = None) -> Tuple[Tensor, Tensor]:
    """``([B, M] per-query values, [3] value flags)`` of a checked batch; the flags are summed
    over batches and raised at compute (``raise_value_flags``).

    ``n_relevant[B]`` (R of each query's whole collection) and ``ideal[B, m]`` (its ideal
    gains) as :func:`~retrieval_core.evaluate_scores` takes them: each row is ranked once by
    its scores (``ties`` "stable", "optimistic" or "pessimistic"), then evaluated as
    :func:`~retrieval_core.evaluate_ranked` does (a top-k list judged against qrels).
    """
    if n_relevant is None and ideal is None:
        values = score_values(preds, target, keys, mask=mask, ties=ties).values
        return values, value_flags(preds, target)
    if ties == "expected":
        raise ValueError('n_relevant / ideal rank each list once: ties must be "stable", "optimistic" or '
                         '"pessimistic", not "expected"')
    if any(m.confidence is not None for m in keys):
        raise ValueError("confidence keys are not available with n_relevant or ideal")
    for name, t, ndim in (("n_relevant", n_relevant, 1), ("ideal", ideal, 2)):
        if t is not None and (not isinstance(t, Tensor) or t.ndim != ndim or t.shape[0] != preds.shape[0]):
            got = tuple(t.shape) if isinstance(t, Tensor) else type(t).__name__
            raise ValueError(f"{name} must be a tensor of shape {'[B]' if ndim == 1 else '[B, m]'} with B = "
                             f"{preds.shape[0]} (the rows of the scores); got {got}")
    if n_relevant is not None and (n_relevant.is_floating_point() or n_relevant.dtype == torch.bool):
        raise TypeError(f"n_relevant must be integer counts (R per query); got {n_relevant.dtype}")
    values = scores_ranked_values(preds, target, keys, n_relevant=n_relevant, ideal=ideal, mask=mask, ties=ties)
    return values, value_flags(preds, target)


# -- update: embedding mode -----------------------------------------------------------

def check_embedding_batch(embeddings: Tensor, labels: Tensor, rows: Dict[str, Optional[Tensor]], *, distance,
                          relevance, dim: Optional[int], label_shape: Optional[tuple]
                          ) -> Tuple[Tensor, Tensor, Dict[str, Tensor]]:
    """``(embeddings, labels, {name: row})`` of one checked embedding batch: ``rows`` holds
    the optional :data:`EMBEDDING_ROWS` and ``confidence`` (None: not given); ``dim`` and
    ``label_shape`` are those of the earlier batches (None before any)."""
    embeddings = check_embeddings("embeddings", embeddings, distance, batch=True)
    n = embeddings.shape[0]
    labels = check_labels("labels", labels, n, custom=relevance is not None)
    check_batch_like_earlier(embeddings, labels, dim, label_shape)
    checked = {name: check_rows(name, rows[name], n, kind=kind, lists=True)
               for name, kind in EMBEDDING_ROWS if rows.get(name) is not None}
    if rows.get("confidence") is not None:  # values (finite) are read once, at compute
        checked["confidence"] = check_confidence(rows["confidence"], n, values=False, lists=True)
    return embeddings, labels, checked


# -- compute: per-query values of the torchmetrics drop-ins --------------------------

def auroc_values(indexes: Tensor, preds: Tensor, target: Tensor, *, key: str, ties: str,
                 top_k: Optional[int] = None, max_fpr: Optional[float] = None) -> Tensor:
    """``[Q, 1]`` float64 per-query ROC AUC of the flat form, in increasing query id, as
    ``torchmetrics.retrieval.RetrievalAUROC`` scores it: ``key`` (``auroc`` or
    ``auroc@k``) or, with ``max_fpr`` below 1, the kernel ``partial_auroc`` (top ``top_k``);
    NaN for a query without a relevant entry, 0 for one whose list lacks a relevant or
    a non-relevant entry (where the AUROC is undefined).

    Example:
        >>> import torch
        >>> auroc_values(torch.tensor([0, 0, 0, 1]), torch.tensor([0.9, 0.5, 0.1, 0.3]),
        ...              torch.tensor([1, 0, 1, 1]), key="auroc", ties="expected").tolist()
        [[0.5], [0.0]]
    """
    if max_fpr is None or max_fpr == 1.0:
        # "mrr" is undefined exactly for the queries without a relevant entry
        values = score_values(preds, target, [key, "mrr"], indexes=indexes, ties=ties).values
        auroc, relevant = values[:, :1], ~torch.isnan(values[:, 1:])
    else:
        depth = preds.numel() if top_k is None else top_k
        _, ranking = rank_flat(indexes, preds, target, depth)
        auroc, relevant = partial_auroc(ranking, top_k, max_fpr).unsqueeze(1), ranking.n_relevant > 0
        relevant = relevant.unsqueeze(1)
    return torch.where(torch.isnan(auroc) & relevant, 0.0, auroc)
