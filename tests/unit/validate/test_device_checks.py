"""A CUDA tensor or device on a torch built without CUDA: one clear ValueError from the input
checks, not torch's bare ``AssertionError: Torch not compiled with CUDA enabled``."""
from __future__ import annotations

import pytest
import torch

import retrieval_core as rc

pytestmark = pytest.mark.skipif(torch.cuda.is_available(), reason="needs a torch without CUDA")


def _fake_cuda(*shapes):
    """Tensors that say they are on cuda:0 (FakeTensorMode makes them without CUDA)."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    with FakeTensorMode():
        return [torch.zeros(shape, dtype=dtype, device="cuda") for shape, dtype in shapes]


def test_cuda_tensors_give_one_clear_line():
    query, labels = _fake_cuda(((4, 3), torch.float32), ((4,), torch.int64))
    message = r"query: cuda:0 is not available: this torch has no CUDA \(torch.cuda.is_available\(\) is False\)"
    with pytest.raises(ValueError, match=message):
        rc.evaluate_embeddings(query, labels, metrics=["cmc@1"])
    preds, target = _fake_cuda(((2, 3), torch.float32), ((2, 3), torch.bool))
    with pytest.raises(ValueError, match="preds: cuda:0 is not available: this torch has no CUDA"):
        rc.evaluate_scores(preds, target, metrics=["ndcg@2"])


def test_a_cuda_device_given_to_the_ignite_adapter_gives_one_clear_line():
    pytest.importorskip("ignite")
    from ignite_retrieval import RankingMetrics
    with pytest.raises(ValueError, match="device: cuda is not available: this torch has no CUDA"):
        RankingMetrics(["ndcg@2"], device="cuda")
