"""Shared pytest fixtures of the whole suite."""
from __future__ import annotations

import pytest
import torch


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
    """``torch.device("cpu")``, then the current CUDA device (``cuda:0``...) where available."""
    if request.param == "cpu":
        return torch.device("cpu")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device: torch.cuda.is_available() is False")
    return torch.device("cuda", torch.cuda.current_device())  # with its index: equal to tensors' .device
# ============================ end of the device fixture ============================
