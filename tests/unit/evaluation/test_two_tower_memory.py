"""The memory of a two-tower evaluation (issue 30: 1M users x 100k items within the memory
budget): beyond the inputs and the per-user values, nothing grows with the number of users or
with the embeddings' width but the pairs' own CSR; a query chunk's scratch is the budget's.

Peaks are the CPU allocator's, read from the profiler's allocation events (each one carries the
running total of allocated bytes): every tensor and every kernel's scratch, exactly, in-process.
"""
from __future__ import annotations

import pytest
import torch

import retrieval_core as rc
from retrieval_core import sizing
from retrieval_core.inputs.pairs import user_items
from retrieval_core.validate.embeddings import check_embedding_values
from retrieval_core.validate.pairs import check_user_items


def peak_bytes(fn) -> int:
    """The largest number of bytes the CPU allocator held during ``fn()`` beyond what it held
    before (allocations made and freed inside ``fn`` included)."""
    profiler = pytest.importorskip("torch._C._profiler")
    event_type = getattr(profiler, "_EventType", None)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], profile_memory=True) as prof:
        fn()
    try:
        roots = prof.profiler.kineto_results.experimental_event_tree()
    except AttributeError:
        pytest.skip("this torch's profiler gives no allocation events")
    events, stack = [], list(roots)
    while stack:
        node = stack.pop()
        stack.extend(node.children)
        if event_type is not None and node.tag == event_type.Allocation:
            events.append((node.start_time_ns, node.extra_fields.alloc_size, node.extra_fields.total_allocated))
    if not events:
        pytest.skip("this torch's profiler gives no allocation events")
    events.sort()
    start = events[0][2] - events[0][1]  # held before the first event
    return max(total for _, _, total in events) - start


def two_tower(n_users: int, dims: int, n_items: int = 300, seen: int = 10, test: int = 3, seed: int = 0):
    g = torch.Generator().manual_seed(seed)

    def pairs(per_user):
        key = (torch.arange(n_users).repeat_interleave(per_user) * n_items
               + torch.randint(0, n_items, (n_users * per_user,), generator=g)).unique()
        return torch.stack([key // n_items, key % n_items])

    return torch.randn(n_users, dims, generator=g), torch.randn(n_items, dims, generator=g), pairs(test), pairs(seen)


KEYS = ["ndcg@5", "recall@5", "map@5", "mrr@5"]


def evaluate(users, items, truth, seen, budget):
    return rc.evaluate_embeddings(users, None, KEYS, gallery=items, distance="dot", relevance=truth, exclude=seen,
                                  memory_budget=budget, reduce="none")


@pytest.mark.parametrize("sync_free", [False, True])
def test_two_tower_peak_does_not_grow_with_the_embedding_width(sync_free):
    """Widening the embeddings 32 times changes nothing of the scratch but each chunk's own
    queries: no copy of the [U, D] queries (dot's scaling is applied chunk by chunk; the
    finite check reads the extremes). Before, float64 copies of every query made the peak
    grow by ~5 copies of the queries."""
    n_users, narrow, wide = 4000, 8, 256
    budget = 256 * (8 * 300 + 64 * 5)  # chunks of ~256 users
    peaks = {}
    with sizing.force_sync_free(sync_free):
        for dims in (narrow, wide):
            inputs = two_tower(n_users, dims)
            evaluate(*inputs, budget)  # warm
            peaks[dims] = peak_bytes(lambda: evaluate(*inputs, budget))
    queries = n_users * (wide - narrow) * 4  # what one float32 copy of the widened queries adds
    assert peaks[wide] - peaks[narrow] < queries / 2, peaks


def test_two_tower_values_equal_with_any_chunk():
    """The chunks' own scaling gives each query the values of one whole chunk, at scales that
    need the scaling (huge, tiny, mixed rows)."""
    users, items, truth, seen = two_tower(300, 6, n_items=40)
    users = users * torch.logspace(-30, 30, 300).unsqueeze(1)  # per-row scales far apart
    whole = evaluate(users, items, truth, seen, None)
    for budget in (1, 5000, 20000):  # one user per chunk; chunks of a few users
        got = evaluate(users, items, truth, seen, budget)
        for key in KEYS:
            torch.testing.assert_close(got[key], whole[key], equal_nan=True, rtol=0, atol=0)


def test_finite_check_builds_no_copy_of_the_embeddings():
    x = torch.randn(20000, 64)
    check_embedding_values(x, torch.zeros(20000, dtype=torch.int64))  # warm
    assert peak_bytes(lambda: check_embedding_values(x, torch.zeros(20000, dtype=torch.int64))) < x.numel()


def test_overlap_is_searched_in_blocks_of_users(monkeypatch):
    """The overlap of the relevance and the exclusion holds one block of pairs at a time
    (bucket_entries of them), not the keys of every pair (isin over all of them)."""
    n_users, n_items = 3000, 500
    _, _, truth, seen = two_tower(n_users, 1, n_items=n_items, seen=20, test=5)
    t, s = user_items("relevance", truth, n_users, n_items), user_items("exclude", seen, n_users, n_items)
    monkeypatch.setattr(sizing, "bucket_entries", lambda device: 512)
    t.overlap(s)  # warm
    per_block = (2 * 512 + 2 * 25) * 8 * 6  # a block's pairs and the largest user's: keys, rows, positions
    assert peak_bytes(lambda: t.overlap(s)) < n_users * 8 + per_block


def test_sorted_pairs_are_not_sorted_again():
    """Pairs given in order (sorted, or a coalesced COO tensor) are kept as given: the check
    holds their keys and a few bools per pair, not a sort and sorted copies."""
    n_users, n_items = 20000, 1000
    _, _, _, seen = two_tower(n_users, 1, n_items=n_items, seen=10)
    check_user_items("exclude", seen, n_users, n_items, repeats=True)  # warm
    n = seen.shape[1]
    assert peak_bytes(lambda: check_user_items("exclude", seen, n_users, n_items, repeats=True)) < n * 12


def test_the_representable_check_holds_one_copy_of_the_values():
    """The per-user values [U, M] are checked (before they are reduced) with one float64
    temporary and a mask, not two temporaries: the aggregation of a million users' values."""
    from retrieval_core.validate.values import check_representable
    values = torch.rand(50000, 9, dtype=torch.float64)
    values[::7, 3] = float("nan")
    check_representable(values, [f"k{j}" for j in range(9)])  # warm
    peak = peak_bytes(lambda: check_representable(values, [f"k{j}" for j in range(9)]))
    assert peak < values.numel() * (8 + 1) + 4096
    values[5, 2] = float("inf")
    with pytest.raises(ValueError, match="k2: values up to inf"):
        check_representable(values, [f"k{j}" for j in range(9)])
