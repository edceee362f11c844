"""Regrouping of ungrouped flat input in id-range buckets (ranking/groups.py): range scans
of the ids and narrow (int16/int32/int64) sort keys, against a plain per-id reference,
with adversarial ids (int64 limits, every index dtype), one query, ties, queries
without a relevant entry and rows of a query spread over the input."""
from unittest import mock

import pytest
import torch

import retrieval_core as rc
from retrieval_core.ranking import groups
from retrieval_core.ranking.groups import iter_groups

KEYS = ["ndcg@3", "map@3", "mrr", "precision@2", "recall@3", "ndcg", "map@r", "auroc"]
INT64_MAX, INT64_MIN = 2**63 - 1, -(2**63)


def reference(ids, *arrays):
    """{id: (arrays' entries of that id, in order of appearance)}, one id at a time."""
    return {int(i): tuple(a[ids == i] for a in arrays) for i in torch.unique(ids)}


def flat_case(id_values, seed, per_query=(1, 7)):
    """Flat input with each id of ``id_values`` on 1-6 entries, rows shuffled (a query's rows
    are not contiguous), tied scores and some queries without a relevant entry."""
    g = torch.Generator().manual_seed(seed)
    sizes = torch.randint(*per_query, (len(id_values),), generator=g)
    ids = torch.tensor(id_values, dtype=torch.int64).repeat_interleave(sizes)
    order = torch.randperm(ids.numel(), generator=g)
    preds = torch.randint(0, 3, (ids.numel(),), generator=g).double()[order]  # ties
    target = (torch.randint(0, 3, (ids.numel(),), generator=g) * (torch.rand(ids.numel(), generator=g) < 0.3))[order]
    return ids[order], preds, target


def check_parts(ids, *arrays):
    expected = reference(ids, *arrays)
    seen = {}
    for part, grouped in iter_groups(ids, *arrays):
        for q in range(part.n_queries):
            start, size = int(part.starts[q]), int(part.sizes[q])
            seen[int(part.ids[q])] = tuple(a[start:start + size] for a in grouped)
    assert seen.keys() == expected.keys()
    for i, want in expected.items():
        for got, ref in zip(seen[i], want):
            assert torch.equal(got, ref), i


def same_values(ids, preds, target):
    """evaluate_scores and rank_flat give bitwise the same results in one part and in many."""
    one = rc.score_values(preds, target, KEYS, indexes=ids)
    _, one_ranking = rc.rank_flat(ids, preds, target, 3)
    with mock.patch.object(groups, "BUCKET_ENTRIES", 3):
        many = rc.score_values(preds, target, KEYS, indexes=ids)
        _, many_ranking = rc.rank_flat(ids, preds, target, 3)
        check_parts(ids, preds, target)
    assert torch.equal(one.query_ids, many.query_ids)
    assert torch.equal(one.values.isnan(), many.values.isnan())
    assert torch.equal(one.values.nan_to_num(), many.values.nan_to_num())
    assert torch.equal(one_ranking.relevance, many_ranking.relevance)


@pytest.mark.parametrize("span", [40, 2**14, 2**15 * 127, 2**24, 2**40, 2**61])  # int16, int32, int64 keys
@pytest.mark.parametrize("near", ["max", "min", "zero"])
def test_buckets_equal_one_part_near_the_int64_limits(span, near):
    g = torch.Generator().manual_seed(span % 1000)
    offsets = sorted({0, span, 1, span - 1, span // 2, *torch.randint(0, span, (12,), generator=g).tolist()})
    base = {"max": INT64_MAX - span, "min": INT64_MIN, "zero": -(span // 2)}[near]
    ids, preds, target = flat_case([base + o for o in offsets], seed=span % 997)
    assert int(ids.max()) - int(ids.min()) == span
    same_values(ids, preds, target)


@pytest.mark.parametrize("dtype", [torch.int8, torch.uint8, torch.int16, torch.int32, torch.int64])
def test_buckets_equal_one_part_for_every_index_dtype(dtype):
    info = torch.iinfo(dtype)
    values = [info.min, info.min + 1, 0, info.max - 1, info.max] + list(range(max(info.min, -9), 9))
    ids, preds, target = flat_case(sorted(set(values)), seed=3)
    same_values(ids.to(dtype), preds, target)


def test_one_query_and_a_single_entry_per_query():
    ids, preds, target = flat_case([INT64_MAX], seed=5, per_query=(9, 10))
    same_values(ids, preds, target)
    ids, preds, target = flat_case(list(range(-20, 20, 3)), seed=6, per_query=(1, 2))
    same_values(ids, preds, target)


def test_range_keys_use_the_narrowest_exact_dtype():
    ids = torch.tensor([INT64_MAX, INT64_MAX - 2**15 + 1, 7], dtype=torch.int64)
    where = torch.tensor([0, 1], dtype=torch.int32)
    keys = groups._range_keys(ids, where, INT64_MAX - 2**15 + 1, 2**15)
    assert keys.dtype == torch.int16 and keys.tolist() == [2**15 - 1, 0]
    keys = groups._range_keys(ids, where, INT64_MAX - 2**15 + 1, 2**15 + 1)
    assert keys.dtype == torch.int32 and keys.tolist() == [2**15 - 1, 0]
    keys = groups._range_keys(ids, where, INT64_MAX - 2**31, 2**31 + 1)
    assert keys.dtype == torch.int64 and keys.tolist() == [2**31, 2**31 - 2**15 + 1]
