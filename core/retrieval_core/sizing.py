"""Block and chunk sizes, decided from the device: the one place that decides them.

Blocks bound the scratch memory of one step: a block of dense rows (or padded flat
queries), an id-range bucket when ungrouped flat input is regrouped, a query chunk
of the embedding search.

* CPU, and any device type other than CUDA: fixed, cache-sized blocks. They were
  tuned on a 2-core CPU, where a pass over a re-used ~2M-element temporary is ~7x
  faster per element than over a fresh 10M-element one.
* CUDA: sized from the device's free memory (``1 / DEVICE_SHARE`` of it, clamped to
  ``[MIN_DEVICE_BUDGET, MAX_DEVICE_BUDGET]``), so that a large input is a handful of
  blocks. There each block costs kernel launches, host syncs and a Python loop
  turn; cache-sized blocks made whole evaluations 20-130x slower than the bare
  torch primitives.

The device is read in one place, :func:`free_memory`; :func:`pretend_free_memory`
makes every CUDA device report a given number of free bytes, so the CUDA policy
runs (and is tested) on a machine without a GPU. Sizes are recomputed at each
call: free memory changes while a program runs.

Example:
    >>> block_elements("cpu"), block_elements("cpu", deep=True), bucket_entries("cpu")
    (2097152, 262144, 524288)
    >>> with pretend_free_memory(8 * 2**30):  # a CUDA device with 8 GiB free
    ...     memory_budget("cuda") == 2 * 2**30, block_elements("cuda") == 2 * 2**30 // 32
    (True, True)
"""
from __future__ import annotations

from contextlib import contextmanager
from typing import Dict, Iterator, Optional, Union

import torch
from torch import Tensor

__all__ = [
    "CPU_BLOCK_ELEMENTS",
    "CPU_CACHE_ELEMENTS",
    "DEEP_BLOCK_DIVISOR",
    "CPU_BUCKET_ENTRIES",
    "MAX_BUCKETS",
    "CPU_MEMORY_BUDGET",
    "free_memory",
    "pretend_free_memory",
    "memory_budget",
    "block_elements",
    "bucket_entries",
    "max_buckets",
    "chunk_rows",
    "summary",
    "sync_free",
    "force_sync_free",
]

DeviceLike = Union[torch.device, str, Tensor]

# --- CPU: today's values, unchanged ------------------------------------------------
CPU_BLOCK_ELEMENTS = 1 << 21  # elements of one dense block
# Entries of a slice of rows that a CPU core's L2 cache holds (512 KiB of float32): the
# passes over a block's [B, N] inputs run slice by slice where the caller reads the same
# rows again (the value checks), so that its read finds them in cache.
CPU_CACHE_ELEMENTS = 1 << 17
# Whole-list (and @r) rankings hold ~8 float64 [B, N] arrays: blocks this many times smaller.
DEEP_BLOCK_DIVISOR = 8
# flat entries of one id-range bucket when regrouping: its scratch (~20 B per entry:
# positions, keys, the sort, grouped copies) stays under a quarter of the inputs
# (16 B per entry) from 2**21 entries on
CPU_BUCKET_ENTRIES = 1 << 19
MAX_BUCKETS = 127  # bucket numbers are int8 (every device)
CPU_MEMORY_BUDGET = 256 * 2**20  # bytes of scratch for one embedding query chunk

# --- CUDA: a share of the free memory ----------------------------------------------
DEVICE_SHARE = 4  # scratch may take 1/4 of the free device memory
MIN_DEVICE_BUDGET = 64 * 2**20
# Past ~16 GiB of scratch a block of 100M+ elements is already one block; more only
# risks other allocations of the program.
MAX_DEVICE_BUDGET = 16 * 2**30
# A padded flat block holds at most twice its elements: this cap keeps it under 2**31,
# inside the 32-bit indexing that some kernels still use.
MAX_BLOCK_ELEMENTS = 1 << 30
# Scratch bytes per element of a block (estimates, rounded up):
# top-k ranking: gathered preds/target of flat blocks, their int64 positions, mask, sign of integer gains;
BYTES_PER_ELEMENT = 32
# whole-list ranking: the sort (values + int64 indices), float64 relevance/ideal, kernel temporaries.
DEEP_BYTES_PER_ELEMENT = 128
# regrouping one bucket: positions, ids, keys, sort output and its scratch, permuted copies.
BYTES_PER_GROUPED_ENTRY = 64

# Embedding chunks, scratch bytes per (query, gallery item) pair: scores, masked scores,
# gains, mask, top-k scratch; whole-list rankings also hold the sort and about eight
# float64 [c, G] arrays for the kernels.
CHUNK_BYTES_PER_PAIR = 24
DEEP_CHUNK_BYTES_PER_PAIR = 128
# 1-D class labels (no gain matrix): the float32 scores, the group maxima of the
# multi-level top-k and, on sync-free devices, a bool exclusion mask per pair
# (measured on CPU: 5.3-7.2 B of extra peak RSS per pair at 40,000 items), plus the
# arrays of each ranked position (values, columns, relevance, validity, float64 sums).
LABEL_BYTES_PER_PAIR = 8
BYTES_PER_RANKED = 64

_pretended: Optional[int] = None
_forced_sync_free: Optional[bool] = None


def _device(device: DeviceLike) -> torch.device:
    return device.device if isinstance(device, Tensor) else torch.device(device)


def free_memory(device: DeviceLike) -> Optional[int]:
    """Free bytes of a CUDA device (``torch.cuda.mem_get_info``); None for other devices,
    which get fixed sizes. Inside :func:`pretend_free_memory`, the pretended value.

    Example:
        >>> free_memory("cpu") is None
        True
        >>> with pretend_free_memory(2**30):
        ...     free_memory(torch.device("cuda", 1))
        1073741824
    """
    device = _device(device)
    if device.type != "cuda":
        return None
    if _pretended is not None:
        return _pretended
    return int(torch.cuda.mem_get_info(device)[0])


@contextmanager
def pretend_free_memory(free_bytes: int) -> Iterator[None]:
    """Within the block, every CUDA device reports ``free_bytes`` free (no GPU needed).

    For tests and for sizing experiments; nests, and restores the previous state on exit.
    """
    global _pretended
    if isinstance(free_bytes, bool) or not isinstance(free_bytes, int) or free_bytes < 0:
        raise ValueError(f"free_bytes must be a non-negative int; got {free_bytes!r}")
    previous, _pretended = _pretended, free_bytes
    try:
        yield
    finally:
        _pretended = previous


def _device_budget(device: DeviceLike) -> Optional[int]:
    """The device's share of its free memory, clamped; None for fixed-size devices."""
    free = free_memory(device)
    if free is None:
        return None
    return min(MAX_DEVICE_BUDGET, max(MIN_DEVICE_BUDGET, free // DEVICE_SHARE))


def memory_budget(device: DeviceLike, requested: Optional[int] = None) -> int:
    """Bytes of scratch for one embedding query chunk.

    ``requested=None`` means the device's share: ``CPU_MEMORY_BUDGET`` (256 MiB) on CPU,
    a quarter of the free memory on CUDA (clamped to 64 MiB..16 GiB). An explicit
    ``requested`` is returned as given: it bounds the scratch on every device (it is
    validated by the caller, e.g. ``evaluate_embeddings``).

    Example:
        >>> memory_budget("cpu") == 256 * 2**20, memory_budget("cpu", 2**20)
        (True, 1048576)
    """
    if requested is not None:
        return requested
    budget = _device_budget(device)
    return CPU_MEMORY_BUDGET if budget is None else budget


def block_elements(device: DeviceLike, deep: bool = False) -> int:
    """Elements of one block of scores (rows x columns, padding included).

    ``deep``: the block is ranked to the whole list (or to each row's R), which
    holds several float64 arrays per element. CPU: ``CPU_BLOCK_ELEMENTS`` (divided by
    ``DEEP_BLOCK_DIVISOR`` when deep). CUDA: the device's budget over the bytes one
    element needs, never below the CPU value nor above ``MAX_BLOCK_ELEMENTS``.

    Example:
        >>> block_elements("cpu") // block_elements("cpu", deep=True)
        8
    """
    cpu = CPU_BLOCK_ELEMENTS // DEEP_BLOCK_DIVISOR if deep else CPU_BLOCK_ELEMENTS
    budget = _device_budget(device)
    if budget is None:
        return cpu
    fitted = budget // (DEEP_BYTES_PER_ELEMENT if deep else BYTES_PER_ELEMENT)
    return min(MAX_BLOCK_ELEMENTS, max(cpu, fitted))


def bucket_entries(device: DeviceLike) -> int:
    """Flat entries of one id-range bucket when ungrouped flat input is regrouped
    (also the slice length of the pass that computes the bucket numbers).

    CPU: ``CPU_BUCKET_ENTRIES``. CUDA: the device's budget over the bytes one
    regrouped entry needs, so that 1e8 entries are one sort on a large GPU.

    Example:
        >>> bucket_entries("cpu")
        524288
    """
    budget = _device_budget(device)
    if budget is None:
        return CPU_BUCKET_ENTRIES
    return min(MAX_BLOCK_ELEMENTS, max(CPU_BUCKET_ENTRIES, budget // BYTES_PER_GROUPED_ENTRY))


def max_buckets(device: DeviceLike) -> int:
    """Most id-range buckets (bucket numbers are int8): ``MAX_BUCKETS`` on every device.
    On CUDA the large :func:`bucket_entries` keeps the count small anyway.

    Example:
        >>> max_buckets("cpu")
        127
    """
    _device(device)  # same signature as the others; the bound is the int8 range
    return MAX_BUCKETS


def chunk_rows(n_gallery: int, deep: bool, budget: int, ranked: Optional[int] = None) -> int:
    """Queries per chunk of the embedding search so that one chunk's scratch fits ``budget``
    bytes (at least one row). ``deep``: whole-list or @r keys (ranked past a top-k).
    ``ranked``: the 1-D-label path (no gain matrix), ranked to that depth per query.

    Example:
        >>> chunk_rows(1000, False, 256 * 2**20), chunk_rows(1000, True, 256 * 2**20)
        (11184, 2097)
        >>> chunk_rows(40000, False, 256 * 2**20, ranked=115)
        820
    """
    g = max(1, n_gallery)
    if ranked is not None and not deep:
        return max(1, budget // (LABEL_BYTES_PER_PAIR * g + BYTES_PER_RANKED * ranked))
    per_pair = DEEP_CHUNK_BYTES_PER_PAIR if deep else CHUNK_BYTES_PER_PAIR
    return max(1, budget // (per_pair * g))


def sync_free(device: DeviceLike) -> bool:
    """Whether evaluation on ``device`` avoids host reads inside its loops.

    On CUDA every read of a device value by the host (``bool(t.any())``, ``int(t.max())``,
    ``nonzero``) waits for the queue of kernels: such reads are gathered into a constant
    number per call (tie fixes after the loop, the largest R read once, flat input
    grouped by one sort). On CPU a read costs nothing, and the loops keep the cheaper
    data-dependent shortcuts (tie tests per block, bounded id-range buckets).
    Inside :func:`force_sync_free`, the forced choice (any device).

    Example:
        >>> sync_free("cpu"), sync_free("cuda")
        (False, True)
        >>> with force_sync_free(True):
        ...     sync_free("cpu")
        True
    """
    if _forced_sync_free is not None:
        return _forced_sync_free
    return _device(device).type != "cpu"


@contextmanager
def force_sync_free(enabled: bool) -> Iterator[None]:
    """Within the block, :func:`sync_free` answers ``enabled`` on every device (tests run
    the CUDA policy on CPU, or the CPU policy anywhere); nests, and restores on exit."""
    global _forced_sync_free
    if not isinstance(enabled, bool):
        raise ValueError(f"enabled must be a bool; got {enabled!r}")
    previous, _forced_sync_free = _forced_sync_free, enabled
    try:
        yield
    finally:
        _forced_sync_free = previous


def summary(device: DeviceLike) -> Dict[str, object]:
    """Every size chosen for ``device`` now, for logs and benchmark headers.

    Example:
        >>> summary("cpu")["block_elements"]
        2097152
    """
    dev = _device(device)
    return {
        "device": str(dev),
        "free_memory": free_memory(dev),
        "memory_budget": memory_budget(dev),
        "block_elements": block_elements(dev),
        "deep_block_elements": block_elements(dev, deep=True),
        "bucket_entries": bucket_entries(dev),
        "max_buckets": max_buckets(dev),
    }
