"""Drop-in replacements for other libraries' evaluation APIs, computed by the core.

* :mod:`retrieval_core.compat.pml`: pytorch-metric-learning's ``AccuracyCalculator``.

Example:
    >>> from retrieval_core.compat.pml import AccuracyCalculator
    >>> AccuracyCalculator(include=("precision_at_1",), device="cpu").get_curr_metrics()
    ['precision_at_1']
"""
