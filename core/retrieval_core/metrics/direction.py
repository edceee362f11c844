"""Which metrics are better when lower: the one list, read by the metric specifications
(:attr:`~retrieval_core.metrics.spec.MetricSpec.lower_is_better`) and by
:meth:`~retrieval_core.MetricResults.worst`, which must not import the registry (it sits
low in the import chain).

Example:
    >>> lower_is_better("fall_out@5"), lower_is_better("ndcg@10"), lower_is_better("P_10")
    (True, False, False)
"""
from __future__ import annotations

import re

__all__ = ["LOWER_IS_BETTER", "lower_is_better"]

LOWER_IS_BETTER = frozenset({"fall_out", "fnmr", "popularity", "gini"})


def lower_is_better(key: str) -> bool:
    """Whether a lower value of ``key`` (a metric key, or any other name: False) is better."""
    name = re.match(r"[A-Za-z_]\w*", key)
    return name is not None and name.group(0) in LOWER_IS_BETTER
