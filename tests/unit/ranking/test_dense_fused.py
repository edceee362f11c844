"""The CPU's dense path with fewer passes over the inputs (BENCHMARKS.md, "dense 10k x 1k"):

* the scores' first top-k level read slice by slice of rows, each slice handed to the
  caller's checks while in cache (``topk._topk``'s ``visit``);
* the ideal gains, R and the ranked gains from one pass over the gains (``dense._gain_pass``);
* integer gains whose largest is 1 ranked as 0/1 (``rank_dense(binary=True)``: no top-k);
* the value checks read slice by slice with the ranking (``rank_dense``'s ``on_scores`` /
  ``on_gains``), raising what :func:`check_values` raises.

Each is compared with the path it replaces, exactly (values bit for bit, ties included),
and the sync-free policy (which keeps the separate passes) serves as the reference of
whole evaluations.
"""
from __future__ import annotations

import pytest
import torch

import retrieval_core as rc
from retrieval_core import sizing
from retrieval_core import score_values
from retrieval_core.ranking import dense, topk
from retrieval_core.validate import check_values

KEYS = ["ndcg@10", "map@10", "mrr@10", "precision@10", "recall@10"]
MORE_KEYS = KEYS + ["ndcg_exp@5", "ndcg@3", "map@r", "ndcg", "hit_rate@2", "dcg@4"]


def scores(b: int, n: int, levels: int, seed: int, dtype=torch.float32) -> torch.Tensor:
    """Continuous scores (``levels=0``) or few distinct values (ties everywhere)."""
    g = torch.Generator().manual_seed(seed)
    if levels == 0:
        return torch.randn(b, n, generator=g).to(dtype)
    return torch.randint(0, levels, (b, n), generator=g).to(dtype)


def gains(b: int, n: int, density: float, seed: int, top: int = 3) -> torch.Tensor:
    """Graded gains 1..top with the given density (float32)."""
    g = torch.Generator().manual_seed(seed)
    t = torch.randint(1, top + 1, (b, n), generator=g) * (torch.rand(b, n, generator=g) < density)
    return t.to(torch.float32)


@pytest.fixture
def small_slices(monkeypatch):
    """Blocks of 4,096 entries and cache slices of 512: several blocks, several slices each."""
    monkeypatch.setattr(sizing, "CPU_BLOCK_ELEMENTS", 4096)
    monkeypatch.setattr(sizing, "CPU_CACHE_ELEMENTS", 512)


# ------------------------------------------------- the scores' first level, slice by slice

@pytest.mark.parametrize("n", [100, 257, 1000, 1003, 8192, 10003])
@pytest.mark.parametrize("k", [1, 11, 40])
@pytest.mark.parametrize("levels", [0, 3])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.int64])
def test_topk_with_a_visit_reads_every_row_once_and_keeps_its_result(n, k, levels, dtype, small_slices):
    x = scores(37, n, levels, seed=n + k + levels, dtype=dtype)
    x[1] = 1  # a row all tied
    seen = []
    vals, idx = topk._topk(x, k, seen.append)
    assert torch.equal(torch.cat(seen), x), "every row once, in order"
    if topk._group_width(n, k):
        assert len(seen) > 1, "the first level reads the rows slice by slice"
    plain = topk._topk(x, k)
    assert torch.equal(vals, plain[0]) and torch.equal(idx, plain[1])
    assert torch.equal(vals, x.topk(k, dim=1).values) and torch.equal(x.gather(1, idx), vals)


@pytest.mark.parametrize("levels", [0, 2, 9])
@pytest.mark.parametrize("d", [1, 10, 30, 2000])
def test_stable_top_with_a_visit_equals_the_stable_sort(levels, d, small_slices):
    x = scores(11, 1001, levels, seed=levels + d)
    x[2, :] = 0.0
    x[2, 700:720] = 5.0  # a tie across the cut, late in the row
    seen = []
    vals, idx = topk.stable_top(x, d, visit=seen.append)
    v, i = torch.sort(x, dim=1, descending=True, stable=True)
    assert torch.equal(vals, v[:, :d]) and torch.equal(idx, i[:, :d])
    assert torch.equal(torch.cat(seen), x)


# ------------------------------------------------------------ ideal gains and R at once

@pytest.mark.parametrize("n", [5, 64, 300, 1000, 5000])
@pytest.mark.parametrize("d", [1, 10, 40])
@pytest.mark.parametrize("density", [0.0, 0.01, 1.0])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int64,
                                   torch.int32])
def test_gain_pass_equals_the_separate_passes(n, d, density, dtype, small_slices):
    t = gains(23, n, density, seed=n + d).to(dtype)
    k = min(n, max(d, n // 64))
    for r, count in enumerate((k - 1, k, k + 1)):  # rows around the top-k's depth
        if 0 <= count <= n:
            t[r] = 0
            t[r, torch.randperm(n, generator=torch.Generator().manual_seed(r))[:count]] = 2
    if t.is_floating_point():
        t[3, ::4] = -0.0  # zero gains with their sign bit set: not relevant
    dd = min(d, n)
    idx = torch.rand(23, n, generator=torch.Generator().manual_seed(n)).argsort(1)[:, :dd]
    want = (topk._top_values(t, dd), dense.count_relevant(t), t.gather(1, idx))
    for visit in (None, [].append):
        got = dense._gain_pass(t, dd, idx, visit)
        assert all(torch.equal(a, b) for a, b in zip(got, want)), (n, d, density, dtype)


def test_gain_pass_visits_every_row_once(small_slices):
    for n in (1000, 5000):  # the top-k's slices, and the long rows' fallback
        t = gains(41, n, 0.02, seed=n)
        seen = []
        dense._gain_pass(t, 10, torch.zeros(41, 10, dtype=torch.int64), seen.append)
        assert torch.equal(torch.cat(seen), t)


# --------------------------------------------------------------- 0/1 integer gains

@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.uint8, torch.int8])
@pytest.mark.parametrize("levels", [0, 3])
def test_binary_integer_gains_equal_the_graded_path(dtype, levels, monkeypatch):
    preds = scores(60, 300, levels, seed=levels)
    target = (gains(60, 300, 0.05, seed=3) > 0).to(dtype)
    target[5] = 0  # a row without a relevant candidate
    graded = rc.evaluate_scores(preds, target.float(), MORE_KEYS, reduce="none")
    calls = []
    real = dense._top_values
    monkeypatch.setattr(dense, "_top_values", lambda *a: calls.append(1) or real(*a))
    monkeypatch.setattr(dense, "_gain_pass", lambda *a: calls.append(1) or pytest.fail("top-k of 0/1 gains"))
    got = rc.evaluate_scores(preds, target, MORE_KEYS, reduce="none")
    assert not calls, "integer gains whose largest is 1 take no top-k"
    for key in MORE_KEYS:
        assert torch.equal(got[key].nan_to_num(-1.0), graded[key].nan_to_num(-1.0)), key


@pytest.mark.parametrize("top", [2, 7])
def test_integer_gains_above_one_keep_the_top_k(top):
    """A largest gain of 2 or more is graded: R ones would be the wrong ideal gains."""
    preds = scores(60, 300, 0, seed=top)
    target = gains(60, 300, 0.05, seed=top, top=top).to(torch.int64)
    graded = rc.evaluate_scores(preds, target.double(), MORE_KEYS, reduce="none")
    got = rc.evaluate_scores(preds, target, MORE_KEYS, reduce="none")
    for key in MORE_KEYS:
        assert torch.equal(got[key].nan_to_num(-1.0), graded[key].nan_to_num(-1.0)), key


# -------------------------------------------- whole evaluations against the sync-free path

def cases():
    yield "continuous, graded", scores(300, 1000, 0, 1), gains(300, 1000, 0.01, 1), None
    yield "ties, graded", scores(300, 1000, 4, 2), gains(300, 1000, 0.05, 2), None
    yield "ties, dense gains", scores(120, 257, 3, 3), gains(120, 257, 0.6, 3), None
    yield "float64", scores(90, 1003, 0, 4, torch.float64), gains(90, 1003, 0.02, 4).double(), None
    yield "float16 scores", scores(90, 512, 0, 5, torch.float16), gains(90, 512, 0.02, 5).half(), None
    yield "int scores", scores(90, 600, 50, 6, torch.int64), gains(90, 600, 0.02, 6).long(), None
    yield "binary ints", scores(90, 600, 5, 7), (gains(90, 600, 0.03, 7) > 0).long(), None
    yield "bool gains", scores(90, 600, 5, 8), gains(90, 600, 0.03, 8) > 0, None
    mask = torch.rand(200, 400, generator=torch.Generator().manual_seed(9)) < 0.8
    mask[:, :3] = True
    yield "mask", scores(200, 400, 6, 9), gains(200, 400, 0.1, 9), mask
    yield "short rows", scores(200, 30, 3, 10), gains(200, 30, 0.2, 10), None


@pytest.mark.parametrize("name,preds,target,mask", list(cases()), ids=[c[0] for c in cases()])
@pytest.mark.parametrize("keys", [KEYS, MORE_KEYS, ["map@10", "recall@5"]], ids=["five", "more", "no-ideal"])
def test_cpu_path_equals_the_sync_free_path(name, preds, target, mask, keys, small_slices):
    got = rc.evaluate_scores(preds, target, keys, mask=mask, reduce="none")
    with sizing.force_sync_free(True):
        want = rc.evaluate_scores(preds, target, keys, mask=mask, reduce="none")
    for key in keys:
        assert torch.equal(got[key].nan_to_num(-1.0), want[key].nan_to_num(-1.0)), (name, key)


# ------------------------------------------------------------ value checks in the loop

BIG = 3e38


def bad_inputs():
    p, t = scores(40, 300, 0, 11), gains(40, 300, 0.05, 11)
    for row in (0, 39):  # the first block and the last
        for name, v in [("nan", float("nan")), ("-nan", -float("nan")), ("+inf", float("inf")),
                        ("-inf", float("-inf"))]:
            q = p.clone()
            q[row, 7] = v
            yield f"score {name} row {row}", q, t
            g = t.clone()
            g[row, 7] = v
            yield f"gain {name} row {row}", p, g
        g = t.clone()
        g[row, 9] = -2.0
        yield f"negative gain row {row}", p, g
    both = p.clone(), t.clone()
    both[0][39, 1] = float("nan")  # the score error is in the last block,
    both[1][0, 1] = -1.0  # the gain error in the first: the scores' comes first
    yield "score and gain errors", *both
    yield "finite scores, overflowing sum", torch.full((40, 300), BIG), t
    g = t.double()
    g[20, 3] = 2.0**961
    yield "gain above 2^960", p, g
    yield "integer gains, negative", p, t.long().index_put_((torch.tensor([30]), torch.tensor([2])), torch.tensor(-1))


@pytest.mark.parametrize("name,preds,target", list(bad_inputs()), ids=[c[0] for c in bad_inputs()])
@pytest.mark.parametrize("keys", [KEYS, ["map@10"]], ids=["ideal", "no-ideal"])
def test_checks_in_the_loop_raise_what_check_values_raises(name, preds, target, keys, small_slices):
    try:
        check_values(preds, target)
        expected = None
    except ValueError as err:
        expected = str(err)
    if expected is None:  # finite scores whose sum overflows: valid, and equal to the sync-free values
        got = rc.evaluate_scores(preds, target, keys, reduce="none")
        with sizing.force_sync_free(True):
            want = rc.evaluate_scores(preds, target, keys, reduce="none")
        assert all(torch.equal(got[k].nan_to_num(-1.0), want[k].nan_to_num(-1.0)) for k in keys)
        return
    with pytest.raises(ValueError) as err:
        rc.evaluate_scores(preds, target, keys)
    assert str(err.value) == expected, name
    with pytest.raises(ValueError) as err:  # masked: the checks still read every entry
        rc.evaluate_scores(preds, target, keys, mask=torch.ones_like(preds, dtype=torch.bool))
    assert str(err.value) == expected, name


def test_negative_zero_gains_are_zero_gains(small_slices):
    p, t = scores(40, 300, 3, 12), gains(40, 300, 0.05, 12)
    z = t.clone()
    z[z == 0] = -0.0
    a, b = rc.evaluate_scores(p, t, MORE_KEYS, reduce="none"), rc.evaluate_scores(p, z, MORE_KEYS, reduce="none")
    assert all(torch.equal(a[k].nan_to_num(-1.0), b[k].nan_to_num(-1.0)) for k in MORE_KEYS)


@pytest.mark.parametrize("options,error", [
    ({"confidence": torch.zeros(3)}, ValueError),  # 3 confidences for 4 queries
    ({"metrics": ["ndcg@10", "nmi"]}, ValueError),  # a set-level key
    ({"metrics": ["ndcg@10", "auroc@10"], "ties": "expected"}, NotImplementedError),
], ids=["confidence", "set-level key", "tie key"])
def test_value_errors_come_before_the_other_checks_of_the_entry_point(options, error):
    """As when the values were checked before them: the values' error first."""
    p, t = scores(4, 300, 0, 13), gains(4, 300, 0.05, 13)
    options = {"metrics": KEYS, **options}
    with pytest.raises(error):
        rc.evaluate_scores(p, t, **options)
    t[1, 1] = float("nan")
    with pytest.raises(ValueError, match="target contains NaN"):
        rc.evaluate_scores(p, t, **options)


# ------------------------------------------------------------------ rank_dense's hooks

def hook_cases():
    p, t = scores(50, 1000, 4, 14), gains(50, 1000, 0.02, 14)
    yield "float32", p, t, {}
    yield "float16", p.half(), t.half(), {}
    yield "int scores", (p * 10).long(), t.long(), {}
    yield "mask", p, t, {"mask": torch.rand(50, 1000, generator=torch.Generator().manual_seed(1)) < 0.9}
    yield "at_r", p, t, {"at_r": True}
    yield "whole", p, t, {"depth": 1000}
    yield "expected ties", p, t, {"ties": "expected"}
    yield "optimistic ties", p, t, {"ties": "optimistic"}
    yield "no ideal", p, t, {"need_ideal": False}
    yield "deferred", p, t, {"select": "deferred"}
    yield "short rows", p[:, :100], t[:, :100], {}
    yield "long rows", torch.cat([p] * 5, 1), torch.cat([t] * 5, 1), {}


@pytest.mark.parametrize("name,preds,target,options", list(hook_cases()), ids=[c[0] for c in hook_cases()])
def test_rank_dense_hands_every_row_to_its_hooks_once(name, preds, target, options, small_slices):
    options = dict(options)
    depth = options.pop("depth", 10)
    options.setdefault("need_ideal", True)
    seen_p, seen_t = [], []
    r = dense.rank_dense(preds, target, depth, on_scores=seen_p.append, on_gains=seen_t.append, **options)
    assert torch.equal(torch.cat(seen_p), preds) and torch.equal(torch.cat(seen_t), target), name
    plain = dense.rank_dense(preds, target, depth, **options)
    assert torch.equal(r.relevance, plain.relevance) and torch.equal(r.n_relevant, plain.n_relevant), name
    assert (r.ideal is None) == (plain.ideal is None) and (r.ideal is None or torch.equal(r.ideal, plain.ideal))
