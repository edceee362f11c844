"""``"exclude"`` in the ignite adapters' outputs (issue 30), in one process: ``RankingMetrics``
(rows of the batch, item columns) equals ``evaluate_scores`` with ``mask=`` False at the same
items, ``EmbeddingMetrics`` (rows of the batch, item ids) equals ``evaluate_embeddings(exclude=)``;
any batch may give it or not; bad pairs are the core's errors with the metric's name.
(2 processes: tests/distributed/test_exclude_distributed.py.)"""
from __future__ import annotations

import pytest
import torch
from ignite.engine import Engine

import retrieval_core as rc
from ignite_retrieval import EmbeddingMetrics, RankingMetrics
from tests.unit.evaluation.test_exclude import MODES, dense_of, keys_for, random_pairs


def run(metric, batches):
    evaluator = Engine(lambda engine, batch: batch)
    metric.attach(evaluator, "m")
    evaluator.run(batches)
    return metric.last_results


def rows_of(seen, start, stop):
    inside = (seen[0] >= start) & (seen[0] < stop)
    return torch.stack([seen[0][inside] - start, seen[1][inside]])


def assert_same(got, want, keys):
    for key in keys:
        torch.testing.assert_close(got.per_query[key], want[key], rtol=0, atol=1e-12, equal_nan=True, msg=key)


@pytest.mark.parametrize("mode", MODES)
def test_ranking_metrics_exclude_equals_the_mask(generator, mode):
    preds = torch.randint(0, 4, (20, 8), generator=generator).double()
    target = torch.randint(0, 3, (20, 8), generator=generator)
    seen = torch.cat([random_pairs(generator, 20, 8, 50), torch.stack([torch.zeros(8, dtype=torch.int64),
                                                                       torch.arange(8)])], 1)
    keys = keys_for(3, mode)
    want = rc.evaluate_scores(preds, target, keys, mask=~dense_of(seen, 20, 8), ties=mode, reduce="none")
    batches = []
    for start, stop in ((0, 6), (6, 7), (7, 15), (15, 20)):
        batch = {"y_pred": preds[start:stop], "y": target[start:stop], "ids": torch.arange(start, stop)}
        mine = rows_of(seen, start, stop)
        if start == 7:
            batch["exclude"] = dense_of(mine, stop - start, 8).to_sparse_csr()
        elif start != 6 or mine.numel():  # a batch without "exclude" when nothing of its is excluded
            batch["exclude"] = mine
        batches.append(batch)
    assert_same(run(RankingMetrics(keys, ties=mode), batches), want, keys)


def test_ranking_metrics_exclude_errors_name_the_metric():
    metric = RankingMetrics(["mrr"])
    p, t = torch.rand(2, 3), torch.ones(2, 3)
    cases = [({"exclude": torch.tensor([[2], [0]])}, ValueError,
              r"RankingMetrics: exclude holds user ids outside \[0, 2\) \(the users, rows\); got 2"),
             ({"exclude": torch.tensor([[0], [5]])}, ValueError, r"RankingMetrics: exclude holds item ids outside"),
             ({"exclude": torch.tensor([[0], [-1]])}, ValueError, "item ids outside"),
             ({"exclude": torch.tensor([[0.0], [1.0]])}, TypeError, "RankingMetrics: exclude must hold integer"),
             ({"exclude": torch.tensor([[0], [0]]), "n_relevant": torch.tensor([3, 3])}, ValueError,
              "RankingMetrics: exclude= takes dense")]
    for extra, error, message in cases:
        with pytest.raises(error, match=message):
            metric.update({"y_pred": p, "y": t, **extra})


def test_ranking_metrics_drop_in_does_not_take_exclude():
    """ignite's own rec-sys drop-ins keep their anchor's inputs (no "exclude")."""
    from ignite_retrieval import MRR, NDCG, HitRate
    for cls in (MRR, NDCG, HitRate):
        assert "exclude" not in cls._per_batch + cls._optional, cls


@pytest.mark.parametrize("mode", MODES)
def test_embedding_metrics_exclude_equals_the_core(generator, mode):
    """Users (queries, ids 0..11) and items (gallery, ids 100..108) in separate batches; each
    user's seen items by item id."""
    users = torch.randint(-2, 3, (12, 3), generator=generator).float()
    items = torch.randint(-2, 3, (9, 3), generator=generator).float()
    user_labels, item_labels = torch.randint(0, 3, (12,), generator=generator), torch.randint(0, 3, (9,),
                                                                                             generator=generator)
    seen = random_pairs(generator, 12, 9, 30)
    keys = keys_for(3, mode)
    want = rc.evaluate_embeddings(users, user_labels, keys, gallery=items, gallery_labels=item_labels,
                                  distance="dot", exclude=seen, ties=mode, reduce="none")
    flags = dict(is_query=torch.zeros(9, dtype=torch.bool), is_gallery=torch.ones(9, dtype=torch.bool))
    batches = [{"embeddings": items, "labels": item_labels, "ids": torch.arange(100, 109), **flags}]
    for start, stop in ((0, 5), (5, 12)):
        mine = rows_of(seen, start, stop)
        n = stop - start
        batches.append({"embeddings": users[start:stop], "labels": user_labels[start:stop],
                        "ids": torch.arange(start, stop), "is_query": torch.ones(n, dtype=torch.bool),
                        "is_gallery": torch.zeros(n, dtype=torch.bool),
                        "exclude": torch.stack([mine[0], mine[1] + 100])})
    assert_same(run(EmbeddingMetrics(keys, distance="dot", ties=mode), batches), want, keys)


def test_embedding_metrics_exclude_errors_name_the_metric(generator):
    x, labels = torch.randn(4, 3, generator=generator), torch.tensor([0, 1, 0, 1])
    metric = EmbeddingMetrics(["cmc@1"])
    with pytest.raises(ValueError, match="EmbeddingMetrics: exclude names gallery items by their ids: pass ids"):
        metric.update({"embeddings": x, "labels": labels, "exclude": torch.tensor([[0], [1]])})
    with pytest.raises(ValueError, match=r"EmbeddingMetrics: exclude holds user ids outside \[0, 4\)"):
        metric.update({"embeddings": x, "labels": labels, "ids": torch.arange(4), "exclude": torch.tensor([[4], [1]])})
    metric.update({"embeddings": x, "labels": labels, "ids": torch.arange(4), "exclude": torch.tensor([[0], [7]])})
    with pytest.raises(ValueError, match="exclude names id 7, which is no gallery item's id"):
        metric.compute()


def test_a_checkpoint_without_the_exclusion_states_loads(generator):
    """A state saved before EmbeddingMetrics kept exclusions (no such entries) resumes, with none."""
    x, labels = torch.randn(6, 3, generator=generator), torch.tensor([0, 1, 0, 1, 0, 1])
    first = EmbeddingMetrics(["cmc@1", "map@r"])
    first.update({"embeddings": x[:3], "labels": labels[:3], "ids": torch.arange(3)})
    saved = first.state_dict()
    for per_rank in saved["__metric_state_per_rank"]:  # ignite's per-rank format
        del per_rank["_state"]["exclude_queries"], per_rank["_state"]["exclude_items"]
    resumed = EmbeddingMetrics(["cmc@1", "map@r"])
    resumed.load_state_dict(saved)
    resumed.update({"embeddings": x[3:], "labels": labels[3:], "ids": torch.arange(3, 6),
                    "exclude": torch.tensor([[0], [1]])})
    want = rc.evaluate_embeddings(x, labels, ["cmc@1", "map@r"], exclude=torch.tensor([[3], [1]]))
    assert resumed.compute() == pytest.approx({k: v.item() for k, v in want.items()}, abs=1e-12, rel=0)
