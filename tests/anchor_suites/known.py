"""Anchor tests that fail on purpose with our drop-ins, each with its reason (the
differences are listed in docs/lightning.md and docs/ignite.md, "Differences on
purpose"). Keys: ``classname::name`` as pytest's junit report gives them."""

_IGNITE_PRIVATE = (
    "reads ignite's private accumulator (_hits_per_k / _sum_ndcg_per_k); ours keeps "
    "per-query values (_values) instead, so repeated ids can be dropped. "
    "tests/ignite/test_rec_sys.py::test_state_detached_and_on_the_metric_device checks "
    "the same properties (detached, on the metric's device) on our state"
)

KNOWN = {
    "ignite": {
        "tests.ignite.metrics.rec_sys.test_hitrate_metric::test_accumulator_detached[cpu]": _IGNITE_PRIVATE,
        "tests.ignite.metrics.rec_sys.test_ndcg::test_accumulator_detached[cpu]": _IGNITE_PRIVATE,
        "tests.ignite.metrics.rec_sys.test_hitrate_metric.TestDistributed::test_accumulator_device[gloo_cpu]":
            _IGNITE_PRIVATE,
        "tests.ignite.metrics.rec_sys.test_ndcg.TestDistributed::test_accumulator_device[gloo_cpu]": _IGNITE_PRIVATE,
    },
    "torchmetrics": {},
}
