"""Old flat path of the aggregation of per-query values (:mod:`retrieval_core.stats.aggregate`), kept as re-exports."""
from .stats.aggregate import (  # noqa: F401
    MetricResults, reduce_values, encode_labels, aggregate,
)
