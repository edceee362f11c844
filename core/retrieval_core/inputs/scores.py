"""Score inputs, dense ``[Q, N]`` rows or the flat form (``indexes``): every argument of a
score evaluation checked once, as one object.

:func:`score_inputs` is the one check sequence of ``evaluate_scores`` (with or without R
given: ``n_relevant``/``ideal``) and :func:`score_value_inputs` that of ``score_values``
(structure only); for the accumulator under the adapters' ``RankingMetrics``,
:func:`accumulated_score_options` checks the options once when it is built and
:func:`score_batch_inputs` each batch's structure once per ``update`` (its values are read
at compute). NumPy arrays become tensors, the keys are parsed, the options, the
structure and (but where the ranking loop reads them, ``fused``) the values are checked;
the evaluation takes the :class:`ScoreInputs` without checking again.

Example:
    >>> import torch
    >>> inputs = score_inputs(torch.tensor([[0.9, 0.2]]), torch.tensor([[1, 0]]), ["mrr@3"])
    >>> [m.key for m in inputs.keys], inputs.options["ties"], inputs.ranked
    (['mrr@3'], 'stable', False)
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, NamedTuple, Optional, Tuple

import torch
from torch import Tensor

from .. import sizing
from ..metrics.keys import MetricKey, parse_metrics
from ..validate import (
    as_categories, as_tensors, check_compact_inputs, check_confidence, check_per_query_keys, check_rows,
    check_score_batch, check_score_options, check_scores, check_stats_options, check_tie_keys, check_ties,
    check_values, tensor_device, widen_unsigned,
)
from ..validate.stats import N_RESAMPLES
from .pairs import UserItems, user_items
from .ranked import check_indexes, ranked_options

__all__ = ["ScoreInputs", "score_inputs", "score_value_inputs", "ScoreBatch", "score_batch_inputs",
           "accumulated_score_options"]


@dataclass(frozen=True)
class ScoreInputs:
    """Checked inputs of a score evaluation: parsed ``keys``, the tensors (``target`` and
    ``indexes`` widened from unsigned types but with R given), ``categories`` as given
    (per query, or per entry of the flat form), and ``options``: ``ties``, ``empty``,
    ``reduce`` and the checked interval options.

    ``ranked``: R or the ideal gains given (the whole list ranked, then ranked lists'
    evaluation). ``fused``: the values are left to the ranking loop, checked block by
    block (dense rows under the CPU policy); otherwise they were checked here.
    ``exclude``: each query's excluded columns (``exclude=``), or None."""

    keys: Tuple[MetricKey, ...]
    preds: Tensor
    target: Tensor
    indexes: Optional[Tensor]
    mask: Optional[Tensor]
    categories: Any
    confidence: Optional[Tensor]
    n_relevant: Optional[Tensor]
    ideal: Optional[Tensor]
    ranked: bool
    fused: bool
    options: Dict[str, Any]
    exclude: Optional[UserItems] = None


def fused_checks(preds: Tensor, indexes: Optional[Tensor]) -> bool:
    """Whether the values are checked block by block, inside the ranking loop (dense rows,
    CPU policy: one pass less over each input than a check before the loop; measured in
    BENCHMARKS.md), rather than once before it."""
    return indexes is None and not sizing.sync_free(preds.device)


def score_inputs(preds, target, metrics, *, indexes=None, mask=None, ties: str = "stable", empty: str = "skip",
                 reduce: str = "mean", categories=None, ci: Optional[float] = None, ci_method: str = "bootstrap",
                 n_resamples: int = N_RESAMPLES, seed: int = 0, keep_per_query: bool = False, confidence=None,
                 n_relevant=None, ideal=None, exclude=None) -> ScoreInputs:
    """Check every input of :func:`~retrieval_core.evaluate_scores` once (arguments as there)."""
    check_score_options(ties=ties, empty=empty, reduce=reduce)
    preds, target, indexes, mask, confidence, n_relevant, ideal, exclude = as_tensors(
        preds=preds, target=target, indexes=indexes, mask=mask, confidence=confidence, n_relevant=n_relevant,
        ideal=ideal, exclude=exclude)
    categories = as_categories(categories, tensor_device(preds, target))
    stats = dict(ci=ci, ci_method=ci_method, n_resamples=n_resamples, seed=seed, keep_per_query=keep_per_query)
    if exclude is not None and (indexes is not None or n_relevant is not None or ideal is not None):
        raise ValueError("exclude= takes dense [queries, items] scores whose columns are the items (not the flat "
                         "form, nor n_relevant/ideal); mask= removes candidates there")
    if n_relevant is not None or ideal is not None:  # R given: the whole list ranked, then ranked lists' values
        if confidence is not None:
            raise ValueError("confidence keys are not available with n_relevant or ideal")
        check_scores(preds, target, indexes=indexes, mask=mask)
        check_values(preds, target)
        if indexes is not None and categories is not None:
            raise ValueError("categories with the flat form and n_relevant: rank the lists and give one category per "
                             "query to evaluate_ranked")
        keys, options = ranked_options(metrics, empty=empty, reduce=reduce, **stats)
        if indexes is not None:
            check_indexes(preds, indexes, "preds")
        return ScoreInputs(keys, preds, target, indexes, mask, categories, None, n_relevant, ideal, True, False,
                           dict(options, ties=ties))
    keys = tuple(parse_metrics(metrics))
    stats = check_stats_options(keys, reduce=reduce, **stats)
    check_scores(preds, target, indexes=indexes, mask=mask)
    target, indexes = widen_unsigned("target", target), widen_unsigned("indexes", indexes)
    fused = fused_checks(preds, indexes)
    if not fused:
        check_values(preds, target)
    try:
        if confidence is not None:  # structure before the work (the number of entries); its values after
            check_confidence(confidence, preds.shape[0] if indexes is None else indexes.numel(),
                             "query (row)" if indexes is None else "prediction (the flat form takes one per entry)",
                             values=False)
        check_per_query_keys(keys, "evaluate_embeddings computes them")
        check_tie_keys(keys, ties)
        if exclude is not None:
            exclude = user_items("exclude", exclude, preds.shape[0], preds.shape[1], repeats=True,
                                 device=preds.device)
    except Exception:
        if fused:  # the values' errors come first, as from the up-front check
            check_values(preds, target)
        raise
    return ScoreInputs(keys, preds, target, indexes, mask, categories, confidence, None, None, False, fused,
                       dict(stats, ties=ties, empty=empty, reduce=reduce), exclude)


def score_value_inputs(preds, target, metrics, *, indexes=None, mask=None, ties: str = "stable") -> ScoreInputs:
    """Check the structure (shapes, dtypes, devices, keys; not the values) of
    :func:`~retrieval_core.score_values`' inputs once."""
    check_ties(ties)
    keys = tuple(parse_metrics(metrics))
    check_per_query_keys(keys, "evaluate_embeddings computes them")
    check_tie_keys(keys, ties)
    preds, target, indexes, mask = as_tensors(preds=preds, target=target, indexes=indexes, mask=mask)
    check_scores(preds, target, indexes=indexes, mask=mask)
    target, indexes = widen_unsigned("target", target), widen_unsigned("indexes", indexes)
    return ScoreInputs(keys, preds, target, indexes, mask, None, None, None, None, False, False, dict(ties=ties))


def accumulated_score_options(metrics, *, ties: str, empty: str, reduce: str, compact: bool,
                              **stats) -> Tuple[Tuple[MetricKey, ...], Dict[str, Any]]:
    """The parsed keys and the checked interval options (``stats``) of an accumulator of
    dense scores (``compact``: sums and counts only), ``ties``/``empty``/``reduce`` checked."""
    keys = tuple(parse_metrics(metrics))
    check_per_query_keys(keys, "use EmbeddingMetrics")
    check_score_options(ties=ties, empty=empty, reduce=reduce, compact=compact, keys=keys)
    return keys, check_stats_options(keys, reduce=reduce, compact=compact, **stats)


class ScoreBatch(NamedTuple):
    """A checked batch of ``n`` dense score rows (NumPy arrays as tensors) and its optional rows."""

    n: int
    preds: Tensor
    target: Tensor
    mask: Optional[Tensor]
    ids: Optional[Tensor]
    categories: Optional[Tensor]
    confidence: Optional[Tensor]
    n_relevant: Optional[Tensor]
    ideal: Optional[Tensor]


def score_batch_inputs(preds, target, *, ids=None, categories=None, confidence=None, mask=None, n_relevant=None,
                       ideal=None, compact: bool = False, names: Tuple[str, str] = ("preds", "target"),
                       dims: Optional[str] = None, numpy: bool = True, device=None) -> ScoreBatch:
    """Structure of one score batch and its optional rows (values are read at compute);
    ``numpy``: NumPy arrays become tensors (on ``device`` when no argument is a tensor).

    Example:
        >>> score_batch_inputs(torch.tensor([[0.9, 0.2]]), torch.tensor([[1, 0]]), ids=torch.tensor([7])).ids
        tensor([7])
    """
    if numpy:
        preds, target, ids, categories, confidence, mask, n_relevant, ideal = as_tensors(
            device=device, preds=preds, target=target, ids=ids, categories=categories, confidence=confidence,
            mask=mask, n_relevant=n_relevant, ideal=ideal)
    check_score_batch(preds, target, mask=mask, names=names, **({} if dims is None else {"dims": dims}))
    n = preds.shape[0]
    if ids is not None:
        ids = check_rows("ids", ids, n, lists=True)
    if categories is not None:
        categories = check_rows("categories", categories, n, lists=True)
    if confidence is not None:  # values (finite) are read once, at compute
        confidence = check_confidence(confidence, n, values=False, lists=True)
    check_compact_inputs(compact, ids=ids, categories=categories, confidence=confidence)
    return ScoreBatch(n, preds, target, mask, ids, categories, confidence, n_relevant, ideal)
