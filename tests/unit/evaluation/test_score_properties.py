"""Hypothesis properties: query order, perfect ranking, padding, dtypes, empty policies,
flat vs dense, block size; on CPU and on CUDA (``device`` fixture: off CPU every result is
also checked against CPU's, exactly for counts, to float64 rounding for values)."""
import math
from unittest import mock

import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import retrieval_core as rc
from retrieval_core.ranking import groups
from retrieval_core import group_flat
from retrieval_core.ranking.groups import iter_flat_blocks
from retrieval_core import score_values
from tests.devices import on_device

KEYS = [
    "hit_rate@3", "precision@3", "precision_adaptive@7", "precision_capped@3", "recall@3", "f1@3",
    "map@3", "map", "map@r", "map_hits@3", "r_precision", "mrr@3", "mrr", "ndcg@3", "ndcg",
    "ndcg_exp@3", "dcg@3", "dcg_exp@3", "fall_out@3", "acg@3", "wap@3", "auroc", "ndcg@r",
]
BOUNDED = [k for k in KEYS if not k.startswith(("dcg", "acg", "wap"))]  # in [0, 1]; graded acg, wap exceed 1
PERFECT_ONE = ["hit_rate@3", "precision_capped@3", "map", "map@r", "map_hits@3", "r_precision",
               "mrr", "ndcg@3", "ndcg", "ndcg_exp@3", "auroc", "ndcg@r"]


@st.composite
def problems(draw, max_q=8, max_n=12, ties=False):
    q = draw(st.integers(1, max_q))
    n = draw(st.integers(1, max_n))
    seed = draw(st.integers(0, 2**31 - 1))
    g = torch.Generator().manual_seed(seed)
    if ties:
        preds = torch.randint(0, 3, (q, n), generator=g).double()
    else:
        preds = torch.rand(q, n, generator=g, dtype=torch.float64)
    target = torch.randint(0, 4, (q, n), generator=g) * (torch.rand(q, n, generator=g) < 0.4)
    return preds, target


def random_lengths(q, n, width, g):
    """Per-query list lengths in 1..n and the [q, width] mask of real candidates."""
    lengths = torch.randint(1, n + 1, (q,), generator=g)
    return lengths, torch.arange(width).unsqueeze(0) < lengths.unsqueeze(1)


def nan_equal(a, b, atol=1e-12):
    assert a.shape == b.shape
    both_nan = torch.isnan(a) & torch.isnan(b)
    assert bool((torch.isnan(a) == torch.isnan(b)).all()), (a, b)
    torch.testing.assert_close(a[~both_nan], b[~both_nan], atol=atol, rtol=0)


@settings(max_examples=60, deadline=None)
@given(problems(ties=True), st.randoms(use_true_random=False))
def test_query_order_does_not_matter(device, problem, rnd):
    preds, target = problem
    perm = torch.tensor(rnd.sample(range(preds.shape[0]), preds.shape[0]))
    a = on_device(device, rc.evaluate_scores, preds, target, KEYS, reduce="none")
    b = on_device(device, rc.evaluate_scores, preds[perm], target[perm], KEYS, reduce="none")
    for k in KEYS:
        nan_equal(a[k][perm], b[k])


@settings(max_examples=60, deadline=None)
@given(problems())
def test_values_are_in_range(device, problem):
    preds, target = problem
    r = on_device(device, rc.evaluate_scores, preds, target, BOUNDED, reduce="none")
    for k in BOUNDED:
        v = r[k][~torch.isnan(r[k])]
        assert bool(((v >= 0) & (v <= 1 + 1e-12)).all()), (k, v)


@settings(max_examples=60, deadline=None)
@given(problems())
def test_perfect_ranking_gives_one(device, problem):
    _, target = problem
    preds = target.double() + 0.001 * torch.rand(target.shape, dtype=torch.float64)  # gains decide the order
    r = on_device(device, rc.evaluate_scores, preds, target, PERFECT_ONE, reduce="none")
    for k in PERFECT_ONE:
        v = r[k][~torch.isnan(r[k])]
        torch.testing.assert_close(v, torch.ones_like(v), msg=k)


@settings(max_examples=60, deadline=None)
@given(problems(ties=True), st.integers(0, 6), st.integers(0, 2**31 - 1))
def test_padding_mask_equals_trimming(device, problem, pad, seed):
    preds, target = problem
    q, n = preds.shape
    g = torch.Generator().manual_seed(seed)
    width = n + pad
    lengths, mask = random_lengths(q, n, width, g)
    padded_p = torch.rand(q, width, generator=g, dtype=torch.float64) * 10  # junk that would win
    padded_t = torch.randint(0, 4, (q, width), generator=g)
    padded_p[:, :n] = torch.where(mask[:, :n], preds, padded_p[:, :n])
    padded_t[:, :n] = torch.where(mask[:, :n], target, padded_t[:, :n])
    got = on_device(device, rc.evaluate_scores, padded_p, padded_t, KEYS, mask=mask, reduce="none")
    for i in range(q):  # trimming, one query at a time
        m = int(lengths[i])
        want = on_device(device, rc.evaluate_scores, preds[i:i + 1, :m], target[i:i + 1, :m], KEYS, reduce="none")
        for k in KEYS:
            nan_equal(got[k][i:i + 1], want[k])


@settings(max_examples=40, deadline=None)
@given(problems())
def test_float32_and_float64_agree(device, problem):
    preds, target = problem
    preds32 = preds.float()
    ev = lambda p: on_device(device, rc.evaluate_scores, p, target, KEYS, reduce="none")  # noqa: E731
    a, b, c, d = ev(preds32.double()), ev(preds32), ev(preds32.half().float()), ev(preds32.half())
    for k in KEYS:
        nan_equal(a[k], b[k])
        nan_equal(c[k], d[k])


@settings(max_examples=60, deadline=None)
@given(problems(ties=True), st.sampled_from(["skip", "zero", "one"]))
def test_empty_policies_relate(device, problem, empty):
    preds, target = problem
    skip = on_device(device, rc.evaluate_scores, preds, target, KEYS, reduce="none")
    got = on_device(device, rc.evaluate_scores, preds, target, KEYS, reduce="none", empty=empty)
    mean = on_device(device, rc.evaluate_scores, preds, target, KEYS, empty=empty)
    for k in KEYS:
        undefined = torch.isnan(skip[k])
        if empty == "skip":
            nan_equal(got[k], skip[k])
            if bool((~undefined).any()):
                assert math.isclose(mean[k].item(), skip[k][~undefined].mean().item(), abs_tol=1e-12)
            continue
        fill = 0.0 if empty == "zero" else 1.0
        assert bool((got[k][undefined] == fill).all())
        nan_equal(got[k][~undefined], skip[k][~undefined])
        assert math.isclose(mean[k].item(), got[k].mean().item(), abs_tol=1e-12)
    if bool(torch.isnan(torch.stack([skip[k] for k in KEYS])).any()):
        try:
            rc.evaluate_scores(preds.to(device), target.to(device), KEYS, empty="error")
        except ValueError as e:
            assert "empty='error'" in str(e)
        else:
            raise AssertionError("empty='error' accepted an empty query")


@settings(max_examples=60, deadline=None)
@given(problems(ties=True), st.integers(0, 2**31 - 1), st.booleans())
def test_flat_form_equals_dense_for_any_grouping(device, problem, seed, shuffle):
    preds, target = problem
    q, n = preds.shape
    g = torch.Generator().manual_seed(seed)
    ids = torch.randperm(1000, generator=g)[:q] - 500  # arbitrary, negative ids too
    _, mask = random_lengths(q, n, n, g)  # uneven group sizes
    flat_i, flat_p, flat_t = ids.unsqueeze(1).expand(q, n)[mask], preds[mask], target[mask]
    if shuffle:  # keep the order of appearance inside each query: a stable sort by a random key
        key = torch.rand(q, generator=g)[torch.arange(q).unsqueeze(1).expand(q, n)[mask]]
        order = torch.sort(key, stable=True).indices
        flat_i, flat_p, flat_t = flat_i[order], flat_p[order], flat_t[order]
    dense = on_device(device, rc.evaluate_scores, preds, target, KEYS, mask=mask, reduce="none")
    sort = torch.argsort(ids)
    for bucket_entries in (groups.BUCKET_ENTRIES, 3):  # one id range, or many small ones
        with mock.patch.object(groups, "BUCKET_ENTRIES", bucket_entries):
            flat = on_device(device, score_values, flat_p, flat_t, KEYS, indexes=flat_i)
            _, ranking = on_device(device, rc.rank_flat, flat_i, flat_p, flat_t, 3)
        assert flat.query_ids.tolist() == ids[sort].tolist()
        for j, k in enumerate(KEYS):
            nan_equal(flat.values[:, j], dense[k][sort])
        assert torch.equal(ranking.n_relevant, (target * mask > 0).sum(1)[sort])


@settings(max_examples=40, deadline=None)
@given(problems(max_q=20, ties=True), st.integers(1, 64))
def test_block_size_does_not_change_values(device, problem, block):
    preds, target = problem
    a = on_device(device, score_values, preds, target, KEYS).values
    b = on_device(device, score_values, preds, target, KEYS, block_elements=block).values
    nan_equal(a, b)
    idx = torch.arange(preds.shape[0]).repeat_interleave(preds.shape[1])
    c = on_device(device, score_values, preds.reshape(-1), target.reshape(-1), KEYS, indexes=idx,
                  block_elements=block).values
    nan_equal(a, c)


def test_flat_blocks_pad_at_most_twice_and_cover_every_query(device):
    g = torch.Generator().manual_seed(0)
    sizes = torch.randint(1, 300, (500,), generator=g)
    idx = torch.arange(500).repeat_interleave(sizes)

    def blocks(idx, p, t):
        groups, (p, t) = group_flat(idx, p, t)
        return list(iter_flat_blocks(groups, p, t, block_elements=4096))

    seen, padded = [], 0
    for rows, bp, bt, m in on_device(device, blocks, idx, torch.rand(idx.numel()), torch.zeros(idx.numel())):
        seen.append(rows)
        padded += bp.numel()
        assert bp.numel() <= max(4096, int(sizes[rows].max()))
    assert sorted(torch.cat(seen).tolist()) == list(range(500))
    assert padded <= 2 * idx.numel()


def test_group_flat_skips_the_sort_when_grouped(device):
    p = torch.arange(6.0, device=device)
    for idx in [torch.tensor([1, 1, 2, 2, 9, 9]), torch.tensor([9, 9, 1, 1, 2, 2])]:
        groups, (q,) = group_flat(idx.to(device), p)
        assert q is p  # no copy
    groups, (q,) = on_device(device, group_flat, torch.tensor([2, 1, 2, 1, 2, 1]), p.cpu())
    assert groups.ids.tolist() == [1, 2] and q.tolist() == [1.0, 3.0, 5.0, 0.0, 2.0, 4.0]


@settings(max_examples=40, deadline=None)
@given(problems(ties=True), st.integers(1, 6), st.integers(0, 2**31 - 1))
def test_rank_flat_equals_masked_rank_dense(device, problem, depth, seed):
    preds, target = problem
    q, n = preds.shape
    g = torch.Generator().manual_seed(seed)
    _, mask = random_lengths(q, n, n, g)
    ids = torch.arange(q).unsqueeze(1).expand(q, n)[mask]
    flat_ids, ranking = on_device(device, rc.rank_flat, ids, preds[mask], target[mask], depth, need_ideal=True,
                                  block_elements=16)
    dense = on_device(device, rc.rank_dense, preds, target, depth, mask=mask, need_ideal=True)
    assert flat_ids.tolist() == list(range(q))
    d = min(ranking.depth, dense.depth)  # the deeper one holds only padding past d
    assert not ranking.valid[:, d:].any() and not dense.valid[:, d:].any()
    torch.testing.assert_close(ranking.relevance[:, :d], dense.relevance[:, :d])
    torch.testing.assert_close(ranking.ideal[:, :d], dense.ideal[:, :d])
    assert torch.equal(ranking.valid[:, :d], dense.valid[:, :d])
    assert torch.equal(ranking.n_relevant, dense.n_relevant)
    assert torch.equal(ranking.n_candidates, dense.n_candidates)
