"""RankingMetrics and EmbeddingMetrics in one process: equal to the core, torchmetrics'
Metric contract (forward, reset, state_dict, MetricCollection, pickling)."""
from __future__ import annotations

import math
import pickle

import pytest
import torch
from torchmetrics import MetricCollection

import retrieval_core
from lightning_retrieval import EmbeddingMetrics, RankingMetrics
from tests.adapters.lightning.data import clustered_embeddings, dense_batches

KEYS = ["ndcg@5", "map@r", "mrr", "precision@3", "recall@5", "fall_out@2", "auroc"]


def close(a, b):
    assert set(a) == set(b), (sorted(a), sorted(b))
    for k in a:
        torch.testing.assert_close(torch.as_tensor(a[k], dtype=torch.float64), torch.as_tensor(b[k], dtype=torch.float64),
                                   equal_nan=True, rtol=1e-12, atol=1e-12, msg=lambda m: f"{k}: {m}")


def all_rows(batches):
    return [torch.cat([b[i] for b in batches]) for i in range(4)]


# --------------------------------------------------------------------------- RankingMetrics


@pytest.mark.parametrize("reduce", ["mean", "median", "min", "max"])
@pytest.mark.parametrize("empty", ["skip", "zero", "one"])
def test_ranking_equals_core(reduce, empty):
    batches = dense_batches(1, [5, 1, 7])
    m = RankingMetrics(KEYS, reduce=reduce, empty=empty)
    for p, t, _, _ in batches:
        m.update(p, t)
    preds, target, _, _ = all_rows(batches)
    expected = retrieval_core.evaluate_scores(preds, target, KEYS, reduce=reduce, empty=empty)
    got = m.compute()
    close(got, expected)
    assert int(got.n_queries) == 13 and {k: int(v) for k, v in got.n_empty.items()} == \
        {k: int(v) for k, v in expected.n_empty.items()}


def test_ranking_compact_equals_full():
    batches = dense_batches(2, [4, 6, 3])
    for empty in ("skip", "zero", "one"):
        full, compact = RankingMetrics(KEYS, empty=empty), RankingMetrics(KEYS, empty=empty, compact=True)
        for p, t, _, _ in batches:
            full.update(p, t)
            compact.update(p, t)
        a, b = full.compute(), compact.compute()
        for k in KEYS:
            torch.testing.assert_close(a[k], b[k], rtol=1e-12, atol=1e-12)
        assert int(b.n_queries) == 13 and int(b.n_empty["ndcg@5"]) == int(a.n_empty["ndcg@5"]) > 0


def test_ranking_ids_drop_repeats_and_categories():
    batches = dense_batches(3, [4, 5])
    preds, target, ids, cats = all_rows(batches)
    m = RankingMetrics(KEYS, reduce="none")
    for p, t, i, c in batches:
        m.update(p, t, ids=i, categories=c)
    m.update(preds[:2], target[:2], ids=ids[:2], categories=cats[:2])  # repeated queries (sampler padding)
    expected = retrieval_core.evaluate_scores(preds, target, KEYS, reduce="none", categories=cats)
    close(m.compute(), expected)


def test_ranking_mask_and_bool_target():
    g = torch.Generator().manual_seed(4)
    preds, target = torch.rand(6, 9, generator=g), torch.rand(6, 9, generator=g) < 0.3
    mask = torch.rand(6, 9, generator=g) < 0.8
    mask[:, 0] = True
    m = RankingMetrics(["ndcg@3", "hit_rate@2"])
    m.update(preds, target, mask=mask)
    close(m.compute(), retrieval_core.evaluate_scores(preds, target, ["ndcg@3", "hit_rate@2"], mask=mask))


def test_ranking_forward_is_the_batch_alone_and_accumulates():
    batches = dense_batches(5, [3, 4])
    m = RankingMetrics(["ndcg@5", "mrr"])
    for p, t, _, _ in batches:
        close(m(p, t), retrieval_core.evaluate_scores(p, t, ["ndcg@5", "mrr"]))
    preds, target, _, _ = all_rows(batches)
    close(m.compute(), retrieval_core.evaluate_scores(preds, target, ["ndcg@5", "mrr"]))


@pytest.mark.filterwarnings("ignore:The ``compute`` method")
def test_ranking_reset_state_dict_clone_pickle():
    (p, t, i, _), (p2, t2, i2, _) = dense_batches(6, [4, 3])
    m = RankingMetrics(["ndcg@5"])
    m.persistent(True)
    m.update(p, t, ids=i)
    state = m.state_dict()
    assert {"values", "ids", "categories", "invalid"} <= set(state)
    other = RankingMetrics(["ndcg@5"])
    other.persistent(True)
    other.load_state_dict(state)
    close(other.compute(), m.compute())
    clone = pickle.loads(pickle.dumps(m))
    close(clone.compute(), m.compute())
    assert int(m.clone().compute().n_queries) == 4
    m.reset()
    m.update(p2, t2, ids=i2)
    close(m.compute(), retrieval_core.evaluate_scores(p2, t2, ["ndcg@5"]))


def test_ranking_in_metric_collection():
    batches = dense_batches(7, [5, 3])
    coll = MetricCollection({"full": RankingMetrics(["ndcg@5", "mrr"]), "compact": RankingMetrics(["map@3"], compact=True)},
                            prefix="val/")
    for p, t, i, c in batches:
        out = coll(p, t)
        assert set(out) == {"val/ndcg@5", "val/mrr", "val/map@3"}
    preds, target, _, _ = all_rows(batches)
    expected = retrieval_core.evaluate_scores(preds, target, ["ndcg@5", "mrr", "map@3"])
    close(coll.compute(), {f"val/{k}": v for k, v in expected.items()})
    with pytest.raises(ValueError, match="compact=True"):  # kwargs reach every metric whose update takes them
        coll.update(p, t, ids=i)


def test_manual_sync_default_and_custom_dist_sync_fn():
    """sync()/unsync() as torchmetrics users do (one process posing as distributed):
    the default path goes through the core's gather, a custom dist_sync_fn is used as given."""
    batches = dense_batches(17, [3, 4])
    calls = []

    def custom(tensor, group=None):
        calls.append(tuple(tensor.shape))
        return [tensor]

    expected = retrieval_core.evaluate_scores(*all_rows(batches)[:2], ["mrr"])
    for fn in (None, custom):
        m = RankingMetrics(["mrr"], dist_sync_fn=fn, sync_on_compute=False)
        for p, t, i, _ in batches:
            m.update(p, t, ids=i)
        m.sync(dist_sync_fn=fn, distributed_available=lambda: True)
        assert isinstance(m.values, torch.Tensor) and m.values.shape == (7, 1)
        close(m.compute(), expected)  # compute unsyncs a manually synced metric (torchmetrics' sync_context)
        assert isinstance(m.values, list) and len(m.values) == 2
    assert (7, 1) in calls and (7,) in calls and (3,) in calls  # values, ids, invalid-value flags


def test_ranking_no_update_gives_nan():
    m = RankingMetrics(["ndcg@5"])
    with pytest.warns(UserWarning, match="before the ``update``"):
        out = m.compute()
    assert math.isnan(out["ndcg@5"].item())


def test_ranking_values_checked_at_compute():
    p, t, _, _ = dense_batches(8, [3])[0]
    m = RankingMetrics(["ndcg@5"])
    m.update(p.masked_fill(torch.eye(3, 12, dtype=torch.bool), float("nan")), t)  # no error per batch
    with pytest.raises(ValueError, match="NaN or inf"):
        m.compute()
    m = RankingMetrics(["ndcg@5"])
    m.update(p, t - 1)
    with pytest.raises(ValueError, match="negative gains"):
        m.compute()


def test_ranking_errors():
    with pytest.raises(ValueError, match="unknown metric"):
        RankingMetrics(["nope@3"])
    with pytest.raises(ValueError, match="embedding-set"):
        RankingMetrics(["nmi"])
    with pytest.raises(ValueError, match="reduce must be 'mean'"):
        RankingMetrics(["mrr"], compact=True, reduce="median")
    with pytest.raises(ValueError, match="empty must be one of"):
        RankingMetrics(["mrr"], empty="neg")
    p, t, i, c = dense_batches(9, [3])[0]
    with pytest.raises(ValueError, match="compact=True"):
        RankingMetrics(["mrr"], compact=True).update(p, t, ids=i)
    with pytest.raises(ValueError, match="same shape"):
        RankingMetrics(["mrr"]).update(p, t[:, :5])
    with pytest.raises(ValueError, match="one entry per row"):
        RankingMetrics(["mrr"]).update(p, t, ids=i[:2])
    with pytest.raises(TypeError, match="integer tensor"):
        RankingMetrics(["mrr"]).update(p, t, categories=["a", "b", "c"])
    m = RankingMetrics(["mrr"])
    m.update(p, t, ids=i)
    m.update(p, t)
    with pytest.raises(ValueError, match="every update"):
        m.compute()
    m = RankingMetrics(["mrr@1"], empty="error")
    m.update(p, t)
    with pytest.raises(ValueError, match="empty='error'"):
        m.compute()


# --------------------------------------------------------------------------- EmbeddingMetrics

EMB_KEYS = ["cmc@1", "map@r", "ndcg@5", "precision@3"]


def test_embedding_equals_core_with_repeats_removed():
    x, y = clustered_embeddings(10, 40)
    ids = torch.arange(40)
    m = EmbeddingMetrics(EMB_KEYS + ["nmi"], distance="euclidean")
    for rows in torch.arange(40).split(15):
        m.update(x[rows], y[rows], ids=ids[rows])
    m.update(x[:3], y[:3], ids=ids[:3])  # DistributedSampler-style repeats
    expected = retrieval_core.evaluate_embeddings(x, y, EMB_KEYS + ["nmi"], distance="euclidean")
    got = m.compute()
    close(got, expected)
    assert int(got.n_queries) == 40


def test_embedding_query_gallery_flags_and_categories():
    x, y = clustered_embeddings(11, 50)
    is_query = torch.arange(50) < 20
    cats = torch.arange(50) % 2
    m = EmbeddingMetrics(EMB_KEYS)
    for rows in torch.arange(50).split(16):
        m.update(x[rows], y[rows], ids=rows, is_query=is_query[rows], is_gallery=~is_query[rows], categories=cats[rows])
    expected = retrieval_core.evaluate_embeddings(
        x[:20], y[:20], EMB_KEYS, gallery=x[20:], gallery_labels=y[20:],
        query_ids=torch.arange(20), gallery_ids=torch.arange(20, 50), categories=cats[:20])
    close(m.compute(), expected)


def test_embedding_options_pass_through():
    x, y = clustered_embeddings(12, 30)
    m = EmbeddingMetrics(["map@r", "cmc@2"], distance="dot", per_class="all", reduce="median", memory_budget=4096)
    m.update(x, y)
    close(m.compute(), retrieval_core.evaluate_embeddings(x, y, ["map@r", "cmc@2"], distance="dot", per_class="all",
                                                          reduce="median", memory_budget=4096))


def test_embedding_forward_accumulates_and_returns_empty_dict():
    x, y = clustered_embeddings(13, 20)
    m = EmbeddingMetrics(["cmc@5"])
    coll = MetricCollection({"emb": EmbeddingMetrics(["map@r"]), "rank": RankingMetrics(["mrr"])})
    assert m(x[:3], y[:3]) == {}  # cutoff 5 > batch: nothing computed on the batch
    m(x[3:], y[3:])
    close(m.compute(), retrieval_core.evaluate_embeddings(x, y, ["cmc@5"]))
    assert coll.emb(x, y) == {}


def test_embedding_detaches_and_no_data():
    x, y = clustered_embeddings(14, 10)
    x.requires_grad_(True)
    m = EmbeddingMetrics(["cmc@1"])
    m.update(x * 2, y)
    assert not m.embeddings[0].requires_grad
    empty = EmbeddingMetrics(["cmc@1", "map@r"])
    with pytest.warns(UserWarning):
        out = empty.compute()
    assert set(out) == {"cmc@1", "map@r"} and all(math.isnan(v.item()) for v in out.values())


def test_embedding_errors():
    x, y = clustered_embeddings(15, 10)
    with pytest.raises(ValueError, match="distance must be"):
        EmbeddingMetrics(["cmc@1"], distance="manhattan")
    with pytest.raises(ValueError, match="per_class"):
        EmbeddingMetrics(["cmc@1"], per_class="micro")
    with pytest.raises(ValueError, match="2-D"):
        EmbeddingMetrics(["cmc@1"]).update(x[0], y)
    with pytest.raises(ValueError, match="one entry per embedding"):
        EmbeddingMetrics(["cmc@1"]).update(x, y[:3])
    with pytest.raises(TypeError, match="bool"):
        EmbeddingMetrics(["cmc@1"]).update(x, y, is_query=torch.ones(10))
