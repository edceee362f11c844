"""Metrics: one specification per metric, the keys parsed against them, per-query kernels,
tie-aware kernels, set-level metrics, and their application.

Adding a metric: one kernel in ``kernels`` (and its ``ties="expected"`` form in
``tie_kernels`` when it has one) and one line in ``spec.REGISTRY``.
"""
