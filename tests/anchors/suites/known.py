"""Anchor tests that fail on purpose with our drop-ins, each with its reason (the
differences are listed in docs/lightning.md and docs/ignite.md, "Differences on
purpose"). Per anchor: a regular expression matched (``re.fullmatch``) against the
failing test's ``classname::name`` as pytest's junit report gives it, and the reason.
"""
from __future__ import annotations

import re
from typing import Dict, Optional

_IGNITE_PRIVATE = (
    "reads ignite's private accumulator (_hits_per_k / _sum_ndcg_per_k); ours keeps "
    "per-query values (_values) instead, so repeated ids can be dropped; "
    "tests/adapters/ignite/test_rec_sys.py::test_state_detached_and_on_the_metric_device checks "
    "the same properties (detached, on the metric's device) on our state"
)
_TM_ZERO_SCORES = (
    "torchmetrics zeroes the target of entries scored <= 0 in MAP, MRR, Precision and "
    "Recall, so all-zero predictions give 0; ours rank the tied zeros by position "
    "(values depend on the ranking only; docs/lightning.md, 'Differences on purpose')"
)
KNOWN: Dict[str, Dict[str, str]] = {
    "ignite": {
        r"tests\.ignite\.metrics\.rec_sys\.test_(hitrate_metric|ndcg)::test_accumulator_detached\[cpu\]": _IGNITE_PRIVATE,
        r"tests\.ignite\.metrics\.rec_sys\.test_(hitrate_metric|ndcg)\.TestDistributed::test_accumulator_device\[gloo_cpu\]":
            _IGNITE_PRIVATE,
    },
    "torchmetrics": {
        r"tests\.unittests\.retrieval\.test_(map|mrr|precision|recall)\.Test\w+::test_\w+_all_zero_predictions_returns_zero":
            _TM_ZERO_SCORES,
    },
}


def reason(anchor: str, test_id: str) -> Optional[str]:
    """The documented reason for a failing anchor test, or None."""
    for pattern, why in KNOWN.get(anchor, {}).items():
        if re.fullmatch(pattern, test_id):
            return why
    return None
