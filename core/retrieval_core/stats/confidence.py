"""Confidence metrics (erc, conf, spearman, kendall keys) of per-query values and confidences, and their intervals:
reductions over queries that also read a confidence per query (curves in ``curves``, correlations in ``correlation``).

A key ``"<kind>:<key>"`` (``kind`` in :data:`~retrieval_core.stats.curves.KINDS`, ``key`` a per-query key such
as ``cmc@1`` or ``map@r``) is computed from the per-query values of ``key`` and
the per-query confidences (higher = more confident); see docs/metrics.md,
"Confidence metrics". Everything runs on the values' device; the functions here
are pure.

* ``erc``: the error-versus-reject curve of the per-query error ``1 - value``
  (:func:`~retrieval_core.stats.curves.erc_curve`); the reduced value is its mean (the area under it).
* ``conf``: the metric over the queries whose confidence is at least ``t``, for
  ``t`` on the grid ``i/100`` (:func:`~retrieval_core.stats.curves.confidence_curve`); the reduced value is the
  mean of the curve where at least one query is kept.
* ``spearman``, ``kendall``: the rank correlation between confidence and value
  (:func:`~retrieval_core.stats.correlation.rank_correlation`; Kendall's tau-b).

Example:
    >>> from retrieval_core.stats.correlation import rank_correlation
    >>> from retrieval_core.stats.curves import erc_curve
    >>> values = torch.tensor([1.0, 0.0, 1.0, 0.0], dtype=torch.float64)
    >>> confidence = torch.tensor([0.9, 0.1, 0.8, 0.3])
    >>> kept, error = erc_curve(1 - values, confidence)
    >>> kept.tolist(), error.tolist()
    ([0.25, 0.5, 0.75, 1.0], [0.0, 0.0, 0.3333333333333333, 0.5])
    >>> rank_correlation(confidence, values).item()  # spearman
    0.8944271909999159
"""
from __future__ import annotations

from typing import Dict, Optional, Sequence, Tuple

import torch
from torch import Tensor

from .confidence_batched import _batched, _one_key, _resampled
from .curves import split_key
from .intervals import percentile_bootstrap
from ..validate.stats import N_RESAMPLES, check_confidence, check_confidence_range

__all__ = ["confidence_results", "confidence_intervals"]


def confidence_results(
    values: Tensor,
    keys: Sequence[str],
    confidence: Optional[Tensor],
    *,
    reduce: str = "mean",
    ties: str = "stable",
    curves: bool = True,
    checked: bool = False,
) -> Tuple[Dict[str, Tensor], Dict[str, Tuple[Tensor, Tensor]]]:
    """``({key: value}, {key: curve})`` of the confidence keys among ``keys`` (the
    columns of ``values[Q, M]``, each holding its inner key's per-query values,
    NaN = skipped query: left out before anything else). ``confidence``: ``[Q]``,
    checked here (finite; within [0, 1] for ``conf:`` keys; ``checked=True``: the caller
    checked it finite, one per query, on the values' device); None is an error
    when a confidence key is asked. ``reduce`` is the reduction of ``conf:`` keys.

    Example:
        >>> v = torch.tensor([[1.0], [0.0], [1.0]], dtype=torch.float64)
        >>> out, curves = confidence_results(v, ["erc:cmc@1"], torch.tensor([3.0, 1.0, 2.0]))
        >>> round(out["erc:cmc@1"].item(), 4), curves["erc:cmc@1"][1].tolist()
        (0.1111, [0.0, 0.0, 0.3333333333333333])
    """

    wanted = [(j, key, split_key(key)) for j, key in enumerate(keys)]
    wanted = [(j, key, parts[0]) for j, key, parts in wanted if parts is not None]
    if not wanted:
        return {}, {}
    if confidence is None:
        names = ", ".join(key for _, key, _ in wanted)
        raise ValueError(f"{names}: confidence keys need per-query confidences: pass confidence=[queries] floats")
    if not checked:
        confidence = check_confidence(confidence, values.shape[0]).to(values.device)
    if any(kind == "conf" for _, _, kind in wanted):
        check_confidence_range(confidence, [key for _, key, kind in wanted if kind == "conf"])
    out, shapes = {}, {}
    for j, key, kind in wanted:
        value, curve = _one_key(kind, values[:, j], confidence, reduce, ties)
        out[key] = value
        if curve is not None and curves:
            shapes[key] = curve
    return out, shapes


def confidence_intervals(
    values: Tensor,
    keys: Sequence[str],
    confidence: Optional[Tensor],
    level: float,
    *,
    reduce: str = "mean",
    ties: str = "stable",
    n_resamples: int = N_RESAMPLES,
    seed: int = 0,
    groups: Optional[Sequence[Tuple[str, Tensor]]] = None,
) -> Dict[str, Tuple[Tensor, Tensor]]:
    """Percentile bootstrap intervals ``{key: (low, high)}`` of the confidence keys
    among ``keys`` (and ``"{key}/{label}"`` for each ``(label, rows)`` of ``groups``):
    queries are resampled with their confidences (the resamples of
    :func:`retrieval_core.stats.intervals.intervals`, same ``seed``) and each resample's
    key value is computed as :func:`confidence_results` does. Resamples where a key
    is undefined (NaN) are left out of its percentiles.

    Example:
        >>> v = torch.tensor([[1.0], [0.0], [1.0], [1.0], [0.0]], dtype=torch.float64)
        >>> c = torch.tensor([0.9, 0.1, 0.8, 0.7, 0.6])
        >>> low, high = confidence_intervals(v, ["erc:cmc@1"], c, 0.9)["erc:cmc@1"]
        >>> 0 <= low.item() <= confidence_results(v, ["erc:cmc@1"], c)[0]["erc:cmc@1"].item() <= high.item()
        True
    """

    wanted = [(j, key) for j, key in enumerate(keys) if split_key(key) is not None]
    if not wanted:
        return {}
    if confidence is None:  # the same error as for the values themselves
        confidence_results(values, keys, confidence)
    names = [key for _, key in wanted]
    parts = {"": (values[:, [j for j, _ in wanted]], confidence)}
    parts.update({f"/{label}": (parts[""][0][rows], confidence[rows]) for label, rows in (groups or [])})

    def statistic(suffix, counts):
        v, c = _resampled(*parts[suffix], counts)
        return torch.stack([_batched(split_key(k)[0], v[..., i], c, reduce, ties) for i, k in enumerate(names)], 1)

    return percentile_bootstrap(statistic, values.shape[0], names, level, n_resamples=n_resamples, seed=seed,
                                device=values.device, groups=groups)
