"""``retrieval_core.distributed`` on 2 and 3 gloo processes (the core suite of the
shared harness): every dtype comes back exact (bytes, dtype, shape), uneven ranks
and an empty rank included; repeated ids are dropped or refused after a gather."""
from __future__ import annotations

import pytest
import torch

from tests.distributed import harness
from tests.distributed.sync_scenarios import DTYPES, rank_rows

SUITE = "tests.distributed.sync_scenarios"


def _same_bits(a: torch.Tensor, b: torch.Tensor) -> bool:
    if a.dtype != b.dtype or a.shape != b.shape:
        return False
    return torch.equal(a.contiguous().reshape(-1).view(torch.uint8), b.contiguous().reshape(-1).view(torch.uint8))


def test_shape_code_refuses_what_it_cannot_move():
    # checked before any collective; every rank holds the same kind of state, so all raise
    from retrieval_core.distributed.collectives import _shape_code

    with pytest.raises(TypeError, match=r"gather_cat cannot move tensors of dtype torch.float8_e4m3fn; expected one of"):
        _shape_code(torch.zeros(2, dtype=torch.float8_e4m3fn))
    with pytest.raises(ValueError, match="gather_cat takes tensors of at most 6 dimensions; got 7"):
        _shape_code(torch.zeros((1,) * 7))
    assert _shape_code(torch.zeros(3, 2, dtype=torch.uint32))[:5].tolist() == [6, 3, 2, 3, 2]


def test_dtypes_cover_gloo_gaps():
    # the dtypes gloo cannot move itself are among those tested
    names = {str(d) for d in DTYPES}
    assert {"torch.int16", "torch.uint16", "torch.uint32", "torch.uint64", "torch.bool", "torch.bfloat16"} <= names


@pytest.mark.parametrize("world", [2, 3])
def test_gather_every_dtype_exact(world):
    for rank, suites in enumerate(harness.shared_results(world)):
        got = harness.value(suites[SUITE]["gather_every_dtype"], f"rank {rank}/{world}")
        assert len(got) == 2 * len(DTYPES)
        for dtype in DTYPES:
            for trailing in ((), (2,)):
                cat, *per_rank = got[f"{dtype} {trailing}"]
                expected = [rank_rows(dtype, r, trailing) for r in range(min(world, 2))]
                if world == 3:  # the placeholder rank comes back as zero rows of the shared dtype and shape
                    expected.append(torch.empty((0, *trailing), dtype=dtype))
                where = f"rank {rank}/{world}, {dtype}, trailing {trailing}"
                assert len(per_rank) == world, where
                for r, (g, e) in enumerate(zip(per_rank, expected)):
                    assert _same_bits(g, e), f"{where}, rows of rank {r}: {g} != {e}"
                assert _same_bits(cat, torch.cat(expected)), f"{where}: {cat}"


@pytest.mark.parametrize("world", [2, 3])
def test_drop_duplicates_after_gather(world):
    for rank, suites in enumerate(harness.shared_results(world)):
        got = harness.value(suites[SUITE]["drop_duplicates_gathered"], f"rank {rank}/{world}")
        ids, emb, labels = got["kept"]
        assert ids == [0, 1, 2, 3, 4]  # the padding repeat of item 0 dropped
        assert emb == [[float(i)] * 3 for i in range(5)] and labels == [0, 1, 0, 1, 0]
        assert got["error"] == ("id 0 repeats with different rows (labels: 1 row); ids must identify dataset items "
                                "(DistributedSampler padding repeats the same row, which is dropped)")


@pytest.mark.parametrize("world", [2, 3])
def test_gather_scalar(world):
    for rank, suites in enumerate(harness.shared_results(world)):
        got = harness.value(suites[SUITE]["gather_scalar"], f"rank {rank}/{world}")
        assert [(t.shape, t.dtype, t.item()) for t in got] == [((), torch.float64, r + 0.5) for r in range(world)]
