"""pytest plugin: run pytorch-metric-learning's own accuracy tests with PML's
``AccuracyCalculator`` replaced by ours (``retrieval_core.compat.pml``).

Loaded by ``run_pml.py`` as ``-p pml_swap`` in a pytest process rooted at PML's
extracted repository. Before the test modules import it, the attribute
``AccuracyCalculator`` of ``pytorch_metric_learning.utils.accuracy_calculator`` is
set to our class, so ``accuracy_calculator.AccuracyCalculator(...)`` in PML's tests
builds ours. PML's module functions (``get_label_match_counts``...), its
``FaissKNN`` / ``CustomKNN`` / ``FaissKMeans`` stay PML's own: a test that passes
them as ``knn_func`` / ``kmeans_func`` checks that ours honours them.

Each test's junit report says how many of our calculators it built (the property
``pml_ours``): ``run_pml.py`` counts a pass only when it built one, as the anchor
suites' runner does (tests of PML's module functions alone never build one).
"""
from __future__ import annotations

import functools
import os

import pytest

_BUILT = [0]  # our AccuracyCalculator constructions during the current test


def swap() -> type:
    from pytorch_metric_learning.utils import accuracy_calculator

    from retrieval_core.compat.pml import AccuracyCalculator

    class Counted(AccuracyCalculator):
        """Ours, counting its constructions (subclasses in PML's tests count too)."""

        @functools.wraps(AccuracyCalculator.__init__)
        def __init__(self, *args, **kwargs):
            _BUILT[0] += 1
            super().__init__(*args, **kwargs)

    Counted.__name__, Counted.__qualname__, Counted.__module__ = (
        AccuracyCalculator.__name__, AccuracyCalculator.__qualname__, AccuracyCalculator.__module__)
    accuracy_calculator.AccuracyCalculator = Counted
    return Counted


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item):
    """Record in the junit report how many of our calculators the test built."""
    _BUILT[0] = 0
    yield
    item.user_properties.append(("pml_ours", str(_BUILT[0])))


def pytest_configure(config) -> None:
    config._pml_swapped = swap()  # noqa: SLF001 - read by the report header


def pytest_sessionfinish(session, exitstatus) -> None:
    """Write which class PML's module held at the end (``PML_SWAP_REPORT``: a file
    path), so that the runner can check that the tests ran against ours."""
    path = os.environ.get("PML_SWAP_REPORT")
    if path:
        from pytorch_metric_learning.utils import accuracy_calculator

        cls = accuracy_calculator.AccuracyCalculator
        with open(path, "w") as f:
            f.write(f"{cls.__module__}.{cls.__name__}")


def pytest_report_header(config):
    ours = getattr(config, "_pml_swapped", None)
    return [f"pml_swap: accuracy_calculator.AccuracyCalculator -> {ours.__module__}.{ours.__name__}"]
