"""Confidence metrics: reductions over queries that also read a confidence per query
(old flat path of :mod:`retrieval_core.stats.confidence`, ``curves``, ``correlation``: re-exports).

A key ``"<kind>:<key>"`` (``kind`` in :data:`KINDS`, ``key`` a per-query key such
as ``cmc@1`` or ``map@r``) is computed from the per-query values of ``key`` and
the per-query confidences (higher = more confident); see docs/metrics.md,
"Confidence metrics". Everything runs on the values' device; the functions here
are pure.

* ``erc``: the error-versus-reject curve of the per-query error ``1 - value``
  (:func:`erc_curve`); the reduced value is its mean (the area under it).
* ``conf``: the metric over the queries whose confidence is at least ``t``, for
  ``t`` on the grid ``i/100`` (:func:`confidence_curve`); the reduced value is the
  mean of the curve where at least one query is kept.
* ``spearman``, ``kendall``: the rank correlation between confidence and value
  (:func:`rank_correlation`; Kendall's tau-b).

Example:
    >>> import torch
    >>> values = torch.tensor([1.0, 0.0, 1.0, 0.0], dtype=torch.float64)
    >>> confidence = torch.tensor([0.9, 0.1, 0.8, 0.3])
    >>> kept, error = erc_curve(1 - values, confidence)
    >>> kept.tolist(), error.tolist()
    ([0.25, 0.5, 0.75, 1.0], [0.0, 0.0, 0.3333333333333333, 0.5])
    >>> rank_correlation(confidence, values).item()  # spearman
    0.8944271909999159
"""
from .stats.confidence import confidence_intervals, confidence_results  # noqa: F401
from .stats.correlation import rank_correlation  # noqa: F401
from .stats.curves import GRID_POINTS, KINDS, confidence_curve, erc_curve, split_key, thresholds  # noqa: F401
