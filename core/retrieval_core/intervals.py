"""Old flat path of the confidence intervals (:mod:`retrieval_core.stats.intervals`), kept as re-exports."""
from .stats.intervals import (  # noqa: F401
    bootstrap_statistics, check_binary, intervals, percentile_bootstrap, macro_intervals,
)
