"""evaluate_embeddings on CPU and CUDA (``device`` fixture): CUDA results equal CPU's,
exactly on exact data (small integer coordinates: float32 similarities without rounding),
to float rounding on continuous data."""
from __future__ import annotations

import pytest
import torch

import retrieval_core as rc
from tests.devices import on_device

CUTOFF_KEYS = ["cmc@1", "cmc@5", "precision@5", "precision_capped@5", "recall@5", "map_hits@10", "ndcg@10"]
DEEP_KEYS = ["map@r", "r_precision", "map", "mrr", "ndcg"]


def integer_data(n: int, dim: int, classes: int, seed: int):
    g = torch.Generator().manual_seed(seed)
    labels = torch.randint(0, classes, (n,), generator=g)
    centres = torch.randint(-8, 9, (classes, dim), generator=g)
    x = centres[labels] + torch.randint(-3, 4, (n, dim), generator=g)  # heavy ties in the distances
    return x.float(), labels


@pytest.mark.parametrize("distance", ["dot", "squared_euclidean"])
def test_exact_data_gives_the_same_values(device, distance):
    x, labels = integer_data(300, 8, 6, seed=1)
    for keys in (CUTOFF_KEYS, DEEP_KEYS):
        r = on_device(device, rc.evaluate_embeddings, x, labels, keys, distance=distance, reduce="none")
        assert set(r) == set(keys)
    # a separate gallery; a budget small enough for many chunks gives the same values
    g, gl = integer_data(500, 8, 6, seed=2)
    kw = dict(gallery=g, gallery_labels=gl, distance=distance, reduce="none")
    whole = on_device(device, rc.evaluate_embeddings, x, labels, CUTOFF_KEYS + DEEP_KEYS, **kw)
    chunked = on_device(device, rc.evaluate_embeddings, x, labels, CUTOFF_KEYS + DEEP_KEYS,
                        memory_budget=7 * 500 * 128, **kw)
    for key in whole:
        assert torch.equal(whole[key].isnan(), chunked[key].isnan()), key
        torch.testing.assert_close(whole[key].nan_to_num(-1.0), chunked[key].nan_to_num(-1.0), atol=0, rtol=0)


def test_continuous_cosine_agrees_to_float_rounding(device):
    g = torch.Generator().manual_seed(3)
    labels = torch.randint(0, 10, (400,), generator=g)
    x = torch.randn(10, 32, generator=g)[labels] + 0.7 * torch.randn(400, 32, generator=g)
    r = on_device(device, rc.evaluate_embeddings, x, labels, CUTOFF_KEYS + DEEP_KEYS, reduce="none", atol=1e-6)
    assert all(v.shape == (400,) for v in r.values())
