"""Old flat path of the metric registry (:mod:`retrieval_core.metrics.registry`), kept as re-exports."""
from .metrics.registry import (  # noqa: F401
    ALIASES, AT_K, AT_R, AT_X, CONFIDENCE_KINDS, REGISTRY, WHOLE, MetricKey, MetricSpec, depth_needed, did_you_mean,
    known_metrics, metric_key, parse_metrics, split_scopes,
)

__all__ = [
    "MetricSpec", "MetricKey", "REGISTRY", "ALIASES", "parse_metrics", "metric_key", "known_metrics", "did_you_mean",
]
