"""The anchors' own test suites against our drop-ins (see run.py). Skipped unless
``ANCHOR_TESTS_DIR`` points at the extracted anchor tests (docs/lightning.md,
"Anchor test suites"): they come from the anchors' repositories, not from ours.

Every failure must match a documented difference on purpose (``known.py``), and
every documented pattern must still match a failure (a fixed difference is removed
from the list)."""
from __future__ import annotations

import os
import re

import pytest

from tests.anchors.suites.known import KNOWN, reason
from tests.anchors.suites.run import SUITES, anchor_root, run_suite


@pytest.mark.parametrize("anchor", sorted(SUITES))
def test_anchor_suite(anchor):
    if not os.environ.get("ANCHOR_TESTS_DIR"):
        pytest.skip("ANCHOR_TESTS_DIR is not set: the anchors' own tests are fetched separately "
                    "(docs/lightning.md, 'Anchor test suites')")
    if anchor_root(anchor) is None:
        pytest.skip(f"no {anchor} tests under ANCHOR_TESTS_DIR={os.environ['ANCHOR_TESTS_DIR']}")
    result = run_suite(anchor)
    assert result["counts"]["passed"] > 0, result["output"]
    unexpected = {t: m for t, m in result["failures"].items() if reason(anchor, t) is None}
    assert not unexpected, f"{anchor}: failures not documented as differences: {unexpected}"
    fixed = [p for p in KNOWN[anchor] if not any(re.fullmatch(p, t) for t in result["failures"])]
    assert not fixed, f"{anchor}: documented differences that no longer fail (remove them from known.py): {fixed}"
