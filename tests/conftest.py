"""Shared fixtures: a seeded generator and small random data in the shapes the
core takes (dense scores/targets, embeddings with class labels).

Each fixture is built anew for every test (function scope), from a fixed seed, so
tests neither share state nor depend on their order.
"""
from __future__ import annotations

from typing import Tuple

import pytest
import torch
from torch import Tensor

SEED = 20240607


@pytest.fixture
def generator() -> torch.Generator:
    """A CPU ``torch.Generator`` seeded with a fixed seed."""
    return torch.Generator().manual_seed(SEED)


@pytest.fixture
def dense_scores(generator) -> Tuple[Tensor, Tensor]:
    """``(preds, target)``: float32 scores ``[8, 12]`` without ties in a row, and binary
    int64 targets with 1 to 4 relevant items per row, except row 0, which has none."""
    preds = torch.rand(8, 12, generator=generator, dtype=torch.float64).argsort(1).float() / 12
    preds += torch.rand(8, 12, generator=generator) / 24  # distinct within a row: spacing 1/12 > jitter
    n_relevant = torch.randint(1, 5, (8,), generator=generator)
    order = torch.rand(8, 12, generator=generator).argsort(1)
    target = (order < n_relevant.unsqueeze(1)).long()
    target[0] = 0
    return preds, target


@pytest.fixture
def embeddings_labels(generator) -> Tuple[Tensor, Tensor]:
    """``(embeddings, labels)``: float64 ``[60, 8]`` points around 5 class centres,
    int64 labels ``[60]`` with every class present."""
    labels = torch.arange(60) % 5
    labels = labels[torch.randperm(60, generator=generator)]
    centres = 2.0 * torch.randn(5, 8, generator=generator, dtype=torch.float64)
    return centres[labels] + torch.randn(60, 8, generator=generator, dtype=torch.float64), labels


# ===================================================================================
# device fixture: run a test on CPU and on CUDA.
# The CUDA case is skipped (with its reason) where torch sees no CUDA device, so the
# suite stays green on CPU-only CI; on a GPU machine it runs. Session-scoped so that
# hypothesis' @given tests can take it (no function-scoped fixture health check).
# Helpers to compare a device's results with CPU's: tests/devices.py.
# ===================================================================================

DEVICES = ("cpu", "cuda")


@pytest.fixture(scope="session", params=DEVICES)
def device(request) -> torch.device:
    """``torch.device("cpu")``, then ``torch.device("cuda")`` where available."""
    if request.param == "cuda" and not torch.cuda.is_available():
        pytest.skip("no CUDA device: torch.cuda.is_available() is False")
    return torch.device(request.param)
# ============================ end of the device fixture ============================
