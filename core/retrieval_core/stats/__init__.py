"""Statistics over per-query values: aggregation (MetricResults), intervals, comparisons,
confidence metrics, special functions.
"""
