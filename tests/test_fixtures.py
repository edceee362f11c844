"""The shared fixtures of tests/conftest.py keep what their docstrings promise."""
import torch


def test_generator_is_seeded(generator):
    from tests.conftest import SEED

    assert torch.equal(torch.rand(3, generator=generator), torch.rand(3, generator=torch.Generator().manual_seed(SEED)))


def test_dense_scores(dense_scores):
    preds, target = dense_scores
    assert preds.shape == target.shape == (8, 12) and preds.dtype == torch.float32 and target.dtype == torch.int64
    assert all(len(set(row.tolist())) == 12 for row in preds)  # no ties within a row
    per_row = target.sum(1)
    assert set(target.unique().tolist()) <= {0, 1} and per_row[0] == 0 and ((per_row[1:] >= 1) & (per_row[1:] <= 4)).all()


def test_embeddings_labels(embeddings_labels):
    x, labels = embeddings_labels
    assert x.shape == (60, 8) and x.dtype == torch.float64 and labels.shape == (60,) and labels.dtype == torch.int64
    assert torch.bincount(labels).tolist() == [12] * 5
