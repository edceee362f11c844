"""Old flat path of the paired comparisons (:mod:`retrieval_core.stats.comparison`), kept as re-exports."""
from .stats.comparison import (  # noqa: F401
    TESTS, CORRECTIONS, Comparison, compare, adjust_p_values, compare_many,
)
