"""retrieval_core.sizing: CPU sizes unchanged, CUDA sizes from free memory (pretended here)."""
from __future__ import annotations

import pytest
import torch

from retrieval_core import sizing
from retrieval_core.sizing import (
    block_elements,
    bucket_entries,
    chunk_rows,
    free_memory,
    max_buckets,
    memory_budget,
    pretend_free_memory,
    summary,
)

MIB, GIB = 2**20, 2**30


# --- CPU: fixed numbers, written out by hand (the bucket halved for issue 9s memory bound) ---

@pytest.mark.parametrize("cpu", ["cpu", torch.device("cpu"), torch.zeros(1)])
def test_cpu_sizes_are_the_previous_fixed_values(cpu):
    assert block_elements(cpu) == 2**21
    assert block_elements(cpu, deep=True) == 2**21 // 8
    assert bucket_entries(cpu) == 2**19
    assert max_buckets(cpu) == 127
    assert memory_budget(cpu) == 256 * MIB
    assert free_memory(cpu) is None


def test_pretended_cuda_memory_does_not_touch_cpu_or_other_devices():
    with pretend_free_memory(40 * GIB):
        for dev in ("cpu", "meta"):
            assert block_elements(dev) == 2**21 and block_elements(dev, deep=True) == 2**18
            assert bucket_entries(dev) == 2**19 and memory_budget(dev) == 256 * MIB


def test_chunk_rows_arithmetic():
    # budget // (bytes per pair * gallery size): 24 bytes per pair, 128 for deep keys
    assert chunk_rows(1000, False, 256 * MIB) == 268435456 // 24000 == 11184
    assert chunk_rows(1000, True, 256 * MIB) == 268435456 // 128000 == 2097
    assert chunk_rows(10**6, True, 256 * MIB) == 2
    assert chunk_rows(10**9, True, 256 * MIB) == 1  # at least one row
    assert chunk_rows(0, False, 256 * MIB) == 256 * MIB // 24  # an empty gallery divides by nothing
    # 1-D labels: 8 bytes per pair plus 64 per ranked position of each query
    assert chunk_rows(40000, False, 256 * MIB, ranked=115) == 268435456 // (8 * 40000 + 64 * 115) == 820
    assert chunk_rows(40000, True, 256 * MIB, ranked=115) == 52  # whole-list keys stay deep
    assert chunk_rows(10**9, False, 256 * MIB, ranked=10) == 1


# --- CUDA, pretended: a share of the free memory ----------------------------------

def test_cuda_budget_is_a_quarter_of_free_memory_clamped():
    for free, want in [(8 * GIB, 2 * GIB), (40 * GIB, 10 * GIB), (100 * MIB, 64 * MIB), (0, 64 * MIB),
                       (1024 * GIB, 16 * GIB)]:
        with pretend_free_memory(free):
            assert memory_budget("cuda") == want, free
            assert memory_budget(torch.device("cuda", 3)) == want


def test_cuda_block_sizes_scale_with_free_memory():
    with pretend_free_memory(8 * GIB):  # budget 2 GiB: 32 bytes per element, 128 when deep, 64 per regrouped entry
        assert block_elements("cuda") == 2 * GIB // 32
        assert block_elements("cuda", deep=True) == 2 * GIB // 128
        assert bucket_entries("cuda") == 2 * GIB // 64
        assert max_buckets("cuda") == 127
    sizes = []
    for free in (1 * GIB, 4 * GIB, 16 * GIB, 64 * GIB):
        with pretend_free_memory(free):
            sizes.append((block_elements("cuda"), block_elements("cuda", deep=True), bucket_entries("cuda")))
    for small, large in zip(sizes, sizes[1:]):
        assert all(a < b for a, b in zip(small, large)), sizes


def test_cuda_sizes_never_go_below_the_cpu_values():
    with pretend_free_memory(0):  # the 64 MiB floor of the budget
        assert block_elements("cuda") == block_elements("cpu") == 64 * MIB // 32
        assert block_elements("cuda", deep=True) == 64 * MIB // 128 > block_elements("cpu", deep=True)
        assert bucket_entries("cuda") == 64 * MIB // 64 > bucket_entries("cpu")
    with pretend_free_memory(0), pytest.MonkeyPatch.context() as mp:
        mp.setattr(sizing, "MIN_DEVICE_BUDGET", 1)  # a budget below every CPU size
        assert block_elements("cuda") == block_elements("cpu")
        assert block_elements("cuda", deep=True) == block_elements("cpu", deep=True)
        assert bucket_entries("cuda") == bucket_entries("cpu")


def test_block_elements_are_capped(monkeypatch):
    monkeypatch.setattr(sizing, "MAX_DEVICE_BUDGET", 2**45)
    with pretend_free_memory(2**47):
        assert block_elements("cuda") == sizing.MAX_BLOCK_ELEMENTS == 2**30
        assert bucket_entries("cuda") == 2**30


def test_large_gpu_inputs_are_a_handful_of_blocks():
    with pretend_free_memory(70 * GIB):  # an H100 with its inputs loaded
        n = 10**8  # flat entries, or 100k x 1k dense
        assert -(-n // bucket_entries("cuda")) <= 4
        assert -(-n // block_elements("cuda")) <= 4
        assert -(-n // block_elements("cuda", deep=True)) <= 4
        # embeddings 1M x 1M, whole-list/@r keys: chunks of >= 100 queries
        assert chunk_rows(10**6, True, memory_budget("cuda")) >= 100


def test_explicit_budget_is_respected_on_every_device():
    with pretend_free_memory(64 * GIB):
        assert memory_budget("cuda", 5 * MIB) == 5 * MIB
        assert memory_budget("cpu", 5 * MIB) == 5 * MIB
        assert chunk_rows(1000, False, memory_budget("cuda", 24_000 * 3)) == 3


# --- the seam ----------------------------------------------------------------------

def test_every_cuda_size_goes_through_free_memory(monkeypatch):
    seen = []

    def fake(device):
        seen.append(torch.device(device).type)
        return None if torch.device(device).type != "cuda" else 4 * GIB

    monkeypatch.setattr(sizing, "free_memory", fake)
    assert memory_budget("cuda") == GIB
    assert block_elements("cuda") == GIB // 32
    assert bucket_entries("cuda") == GIB // 64
    assert seen == ["cuda", "cuda", "cuda"]


def test_pretend_nests_and_restores():
    with pretend_free_memory(4 * GIB):
        with pretend_free_memory(8 * GIB):
            assert free_memory("cuda") == 8 * GIB
        assert free_memory("cuda") == 4 * GIB
    assert sizing._pretended is None


def test_pretend_restores_after_an_exception():
    with pytest.raises(RuntimeError, match="inside"):
        with pretend_free_memory(GIB):
            raise RuntimeError("inside")
    assert sizing._pretended is None


@pytest.mark.parametrize("bad", [-1, 1.5, "1G", True, None])
def test_pretend_rejects_what_is_not_a_byte_count(bad):
    with pytest.raises(ValueError, match=r"free_bytes must be a non-negative int; got"):
        with pretend_free_memory(bad):
            pass


def test_summary_lists_every_size():
    with pretend_free_memory(8 * GIB):
        s = summary("cuda")
    assert s == {"device": "cuda", "free_memory": 8 * GIB, "memory_budget": 2 * GIB,
                 "block_elements": 2 * GIB // 32, "deep_block_elements": 2 * GIB // 128,
                 "bucket_entries": 2 * GIB // 64, "max_buckets": 127}


def test_free_memory_reads_the_real_device(device):
    free = free_memory(device)
    if device.type == "cpu":
        assert free is None
    else:
        total = torch.cuda.mem_get_info(device)[1]
        assert 0 < free <= total
        assert block_elements(device) >= block_elements("cpu")
