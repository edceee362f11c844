"""Microsoft Recommenders' and RecBole's code against ours, in the runner's own process
(see run_recommenders.py), as one test. Skipped unless ``REC_ANCHORS_SITE`` names the
folder their packages were installed into (``run_recommenders.py --install``,
docs/metrics.md, "Microsoft Recommenders and RecBole"): they are not dependencies."""
from __future__ import annotations

import pytest

from tests.anchors.recommenders.rec_env import SITE_VARIABLE, site_dir
from tests.anchors.suites import run_recommenders as run


def test_recommenders_and_recbole_suite():
    site = site_dir()
    if site is None:
        pytest.skip(f"{SITE_VARIABLE} does not name a folder holding recommenders and recbole "
                    "(python tests/anchors/suites/run_recommenders.py --install)")
    result = run.run_suite(site)
    assert set(result["counts"]) == {"test_python_evaluation", "test_recbole_metrics"}, result["output"]
    for module, counts in result["counts"].items():
        assert counts["passed"] > 0 and counts["skipped"] == 0, (module, counts, result["output"])
    assert not result["failures"], result["failures"]
