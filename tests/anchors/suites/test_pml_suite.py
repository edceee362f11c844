"""pytorch-metric-learning's own accuracy tests against our AccuracyCalculator (see
run_pml.py). Skipped unless ``ANCHOR_TESTS_DIR/pytorch-metric-learning`` holds PML's
extracted ``tests`` folder (docs/compat.md): those tests come from PML's repository,
not ours. Every failure must be a documented difference (``run_pml.KNOWN``)."""
from __future__ import annotations

import os

import pytest

from tests.anchors.suites.run_pml import KNOWN, pml_root, reason, run_suite


def test_pml_accuracy_suite():
    if not os.environ.get("ANCHOR_TESTS_DIR"):
        pytest.skip("ANCHOR_TESTS_DIR is not set: PML's own tests are fetched separately (docs/compat.md)")
    if pml_root() is None:
        pytest.skip(f"no PML tests under ANCHOR_TESTS_DIR={os.environ['ANCHOR_TESTS_DIR']}/pytorch-metric-learning")
    result = run_suite()
    assert result["counts"]["passed"] > 0, result["output"]
    unexpected = {t: m for t, m in result["failures"].items() if reason(t) is None}
    assert not unexpected, f"failures not documented as differences: {unexpected}"
    assert len(result["failures"]) >= len(KNOWN) or not KNOWN, "a documented difference no longer fails"
