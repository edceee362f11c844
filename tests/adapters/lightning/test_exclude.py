"""``exclude=`` in the Lightning (torchmetrics) adapters' ``update`` (issue 30), in one process:
``RankingMetrics`` (rows of the batch, item columns) equals ``evaluate_scores`` with ``mask=``
False at the same items (``forward``'s batch value too), ``EmbeddingMetrics`` (rows of the
batch, item ids) equals ``evaluate_embeddings(exclude=)``; bad pairs are the core's errors.
(2 processes: tests/distributed/test_exclude_distributed.py.)"""
from __future__ import annotations

import pytest
import torch

import retrieval_core as rc
from lightning_retrieval import EmbeddingMetrics, RankingMetrics
from tests.unit.evaluation.test_exclude import MODES, dense_of, keys_for, random_pairs


def rows_of(seen, start, stop):
    inside = (seen[0] >= start) & (seen[0] < stop)
    return torch.stack([seen[0][inside] - start, seen[1][inside]])


def assert_same(got, want, keys):
    for key in keys:
        torch.testing.assert_close(got[key], want[key], rtol=0, atol=1e-12, equal_nan=True, msg=key)


@pytest.mark.parametrize("mode", MODES)
def test_ranking_metrics_exclude_equals_the_mask(generator, mode):
    preds = torch.randint(0, 4, (20, 8), generator=generator).double()
    target = torch.randint(0, 3, (20, 8), generator=generator)
    seen = torch.cat([random_pairs(generator, 20, 8, 50), torch.stack([torch.full((8,), 3), torch.arange(8)])], 1)
    keys = keys_for(3, mode)
    mask = ~dense_of(seen, 20, 8)
    want = rc.evaluate_scores(preds, target, keys, mask=mask, ties=mode, reduce="none")
    metric = RankingMetrics(keys, ties=mode, reduce="none")
    for start, stop in ((0, 6), (6, 15), (15, 20)):
        mine = rows_of(seen, start, stop)
        exclude = mine if start else dense_of(mine, stop - start, 8).to_sparse()
        batch = metric(preds[start:stop], target[start:stop], ids=torch.arange(start, stop), exclude=exclude)
        assert_same(batch, rc.evaluate_scores(preds[start:stop], target[start:stop], keys, mask=mask[start:stop],
                                              ties=mode, reduce="none"), keys)
    assert_same(metric.compute(), want, keys)


def test_ranking_metrics_exclude_errors():
    metric = RankingMetrics(["mrr"])
    p, t = torch.rand(2, 3), torch.ones(2, 3)
    with pytest.raises(ValueError, match=r"exclude holds user ids outside \[0, 2\) \(the users, rows\); got 2"):
        metric.update(p, t, exclude=torch.tensor([[2], [0]]))
    with pytest.raises(TypeError, match="exclude must hold integer"):
        metric.update(p, t, exclude=torch.tensor([[0.0], [1.0]]))
    with pytest.raises(ValueError, match="exclude= takes dense"):
        metric.update(p, t, exclude=torch.tensor([[0], [0]]), ideal=torch.ones(2, 3))


@pytest.mark.parametrize("mode", MODES)
def test_embedding_metrics_exclude_equals_the_core(generator, mode):
    """PML's layout (every item a query and a gallery item), ids unlike positions, a batch without exclude."""
    x = torch.randint(-2, 3, (18, 3), generator=generator).float()
    labels = torch.randint(0, 3, (18,), generator=generator)
    ids = torch.arange(18) * 3 + 50  # increasing: the state's order (by id) is the positions'
    seen = random_pairs(generator, 18, 18, 40)
    seen = seen[:, (seen[0] < 6) | (seen[0] >= 10)]  # nothing excluded for the batch of rows 6..9
    keys = keys_for(3, mode)
    want = rc.evaluate_embeddings(x, labels, keys, distance="dot", exclude=seen, ties=mode, reduce="none")
    metric = EmbeddingMetrics(keys, distance="dot", ties=mode, reduce="none")
    for start, stop in ((0, 6), (6, 10), (10, 18)):
        mine = rows_of(seen, start, stop)
        exclude = None if start == 6 else torch.stack([mine[0], ids[mine[1]]])
        assert metric(x[start:stop], labels[start:stop], ids=ids[start:stop], exclude=exclude) == {}
    assert_same(metric.compute(), want, keys)


def test_embedding_metrics_exclude_errors(generator):
    x, labels = torch.randn(4, 3, generator=generator), torch.tensor([0, 1, 0, 1])
    metric = EmbeddingMetrics(["cmc@1"])
    with pytest.raises(ValueError, match="exclude names gallery items by their ids: pass ids"):
        metric.update(x, labels, exclude=torch.tensor([[0], [1]]))
    with pytest.raises(ValueError, match=r"exclude holds item ids outside \[0, n_items\)"):
        metric.update(x, labels, ids=torch.arange(4), exclude=torch.tensor([[0], [-1]]))
    metric.update(x, labels, ids=torch.arange(4), exclude=torch.tensor([[0], [9]]))
    with pytest.raises(ValueError, match="exclude names id 9, which is no gallery item's id"):
        metric.compute()
