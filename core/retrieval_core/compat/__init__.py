"""Drop-in replacements for other libraries' evaluation APIs, computed by the core.

* :mod:`retrieval_core.compat.pml`: pytorch-metric-learning's ``AccuracyCalculator``.
* :mod:`retrieval_core.compat.oml`: open-metric-learning's functional metrics
  (``calc_retrieval_metrics``, ``calc_cmc``, ``calc_precision``, ``calc_map``, ...).

Example:
    >>> from retrieval_core.compat.pml import AccuracyCalculator
    >>> AccuracyCalculator(include=("precision_at_1",), device="cpu").get_curr_metrics()
    ['precision_at_1']
"""
