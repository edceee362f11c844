"""backend="faiss" finds the same neighbours as the torch backend on continuous data."""
import pytest
import torch

import retrieval_core as rc

KEYS = ["cmc@1", "cmc@5", "precision_capped@5", "map_hits@10", "map@r", "r_precision", "ndcg@10", "map@10"]


def data(n=400, d=16, classes=20, seed=0):
    g = torch.Generator().manual_seed(seed)
    labels = torch.randint(0, classes, (n,), generator=g)
    x = torch.randn(classes, d, generator=g)[labels] + torch.randn(n, d, generator=g)
    return x, labels


@pytest.mark.parametrize("distance", ["cosine", "dot", "euclidean"])
def test_faiss_equals_torch_self_gallery(distance):
    x, labels = data()
    a = rc.evaluate_embeddings(x, labels, KEYS, distance=distance, reduce="none")
    b = rc.evaluate_embeddings(x, labels, KEYS, distance=distance, reduce="none", backend="faiss")
    for k in KEYS:
        torch.testing.assert_close(a[k], b[k], equal_nan=True, msg=k)


def test_faiss_equals_torch_with_gallery_and_sequence_ids():
    x, labels = data(seed=1)
    kw = dict(gallery=x[100:], gallery_labels=labels[100:], query_ids=torch.arange(100) // 3,
              gallery_ids=torch.arange(300) // 3, reduce="none")
    a = rc.evaluate_embeddings(x[:100], labels[:100], KEYS, **kw)
    b = rc.evaluate_embeddings(x[:100], labels[:100], KEYS, backend="faiss", **kw)
    for k in KEYS:
        torch.testing.assert_close(a[k], b[k], equal_nan=True, msg=k)


def test_faiss_backend_limits():
    x, labels = data(n=50)
    with pytest.raises(ValueError, match=r"backend must be 'torch' or 'faiss'; got 'annoy'"):
        rc.evaluate_embeddings(x, labels, ["cmc@1"], backend="annoy")
    with pytest.raises(ValueError, match=r"takes no whole-list keys"):
        rc.evaluate_embeddings(x, labels, ["map"], backend="faiss")
    with pytest.raises(ValueError, match=r"needs cosine, dot or euclidean distances and 1-D class labels"):
        rc.evaluate_embeddings(x, labels, ["cmc@1"], backend="faiss", distance="hamming")
