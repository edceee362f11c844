"""Metrics: per-query kernels, tie-aware kernels, set-level metrics, the registry of keys, and their application.

Adding a metric: one kernel in ``kernels`` (and its ``ties="expected"`` form in
``tie_kernels`` when it has one) and one line in ``registry.REGISTRY``.
"""
