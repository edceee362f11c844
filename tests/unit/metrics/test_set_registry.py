"""The registry owns the set-level metrics: each spec carries its set_metric, and
set_level computes whatever spec it is given, without looking at names."""
import torch

import retrieval_core as rc
from retrieval_core.metrics import set_level as metrics_set_level
from retrieval_core.metrics.set_level import set_level_values
from retrieval_core.metrics.keys import MetricKey
from retrieval_core.metrics.spec import REGISTRY, WHOLE, MetricSpec


def test_every_spec_is_per_query_or_set_level():
    """Per-query (a kernel on a Ranking), set-level (a set_metric), or a per-user metric of
    the recommended items (an item_kernel, evaluate_topk's)."""
    for name, spec in REGISTRY.items():
        assert [spec.per_query, spec.set_metric is not None, spec.item_kernel is not None].count(True) == 1, name
    assert {n for n, s in REGISTRY.items() if s.set_metric is not None and not s.items} == {"fnmr", "pcf", "nmi",
                                                                                           "ami"}
    assert {n for n, s in REGISTRY.items() if s.set_metric is not None and s.items} == {
        "coverage", "gini", "entropy", "personalization"}


def test_a_new_set_level_spec_needs_no_change_in_set_level(embeddings_labels):
    x, labels = embeddings_labels
    calls = []

    def count_rows(keys, data):
        calls.append([m.key for m in keys])
        return [torch.tensor(float(data.query.shape[0])) for _ in keys]

    spec = MetricSpec("rows", None, frozenset({WHOLE}), WHOLE, set_metric=count_rows)
    keys = [MetricKey("rows", spec, None), rc.parse_metrics(["pcf@0.5"])[0], MetricKey("rows_again", spec, None)]
    out = set_level_values(keys, x, labels, gallery=None, gallery_labels=None, distance="euclidean",
                           query_ids=None, gallery_ids=None, relevance=None, memory_budget=1 << 20)
    assert list(out) == ["rows", "pcf@0.5", "rows_again"]
    assert out["rows"].item() == out["rows_again"].item() == 60.0
    assert calls == [["rows", "rows_again"]]  # one call for all keys of one set_metric


def test_nmi_and_ami_share_one_clustering(monkeypatch, embeddings_labels):
    x, labels = embeddings_labels
    runs = []
    real = metrics_set_level.clustering_scores
    monkeypatch.setattr(metrics_set_level, "clustering_scores", lambda *a, **k: runs.append(1) or real(*a, **k))
    r = rc.evaluate_embeddings(x, labels, ["ami", "cmc@1", "nmi"])
    assert len(runs) == 1
    nmi, ami = real(x, labels)
    assert r["nmi"].item() == nmi.item() and r["ami"].item() == ami.item()
