"""The two-level top-k of long rows (topk._topk, topk._top_values) and the stable
top built on it give exactly what a full stable sort gives, ties included."""
import pytest
import torch

from retrieval_core import sizing
from retrieval_core.ranking import dense, topk
from retrieval_core import score_values


def rows(b: int, n: int, levels: int, seed: int, dtype=torch.float32) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    if levels == 0:  # continuous
        return torch.randn(b, n, generator=g).to(dtype)
    return torch.randint(0, levels, (b, n), generator=g).to(dtype)


def sorted_prefix(x: torch.Tensor, d: int):
    v, i = torch.sort(x, dim=1, descending=True, stable=True)
    return v[:, :d], i[:, :d]


@pytest.mark.parametrize("n", [300, 1003, 4096, 5003, 20000])
@pytest.mark.parametrize("k", [1, 11, 60, 200])
@pytest.mark.parametrize("levels", [0, 3, 50, 4000])
def test_two_level_topk_values_equal_topk(n, k, levels):
    x = rows(7, n, levels, seed=n + k + levels)
    vals, idx = topk._topk(x, k)
    assert torch.equal(vals, x.topk(k, dim=1).values)
    assert torch.equal(x.gather(1, idx), vals)  # the columns hold those values
    assert all(r.unique().numel() == k for r in idx)  # no column twice
    gains = x.abs()  # ideal gains are >= 0
    gains[0, ::3] = -0.0
    for dtype in (torch.float32, torch.float64, torch.float16, torch.int64):
        g = gains.to(dtype)
        assert torch.equal(topk._top_values(g, k), g.topk(k, dim=1).values), dtype


def test_the_two_level_path_runs_where_it_pays():
    assert topk._group_width(20000, 11) == topk.LONG_GROUP and topk._group_width(6000, 60) == topk.SHORT_GROUP
    assert topk._group_width(1000, 11) == topk.SHORT_GROUP
    assert topk._group_width(200, 11) == 0  # a plain top-k is as fast there
    assert topk._group_width(1000, 101) == 0  # deep cuts: too many candidates
    assert topk._group_width(5000, 115, inner=True) > 0 and topk._group_width(500, 115, inner=True) == 0
    assert topk._candidates(torch.zeros(2, 200), 11) is None
    # other devices keep the levels for long rows (short-row gains measured on CPU only)
    assert topk._candidates(torch.zeros(2, 1000, device="meta"), 11) is None
    assert topk._candidates(torch.zeros(2, 5000, device="meta"), 11) is not None
    # the ideal gains (mostly equal zeros) take the levels in long rows only
    assert topk._candidates(torch.zeros(2, 1000), 11, min_columns=topk.GAIN_TWO_LEVEL_MIN_COLUMNS) is None


@pytest.mark.parametrize("levels", [0, 2, 7, 300])
@pytest.mark.parametrize("d", [1, 10, 59])
def test_stable_top_of_long_rows_equals_the_stable_sort(levels, d):
    x = rows(9, 6000, levels, seed=levels * 100 + d)
    x[0] = 1.0  # one row all tied
    x[1, :] = 0.0
    x[1, 5000:5000 + 2 * d] = 5.0  # the tied top at the end of the row, past the cut
    vals, idx = topk.stable_top(x, d)
    v, i = sorted_prefix(x, d)
    assert torch.equal(vals, v) and torch.equal(idx, i)
    vals, idx, crossing = topk.stable_top_deferred(x, d)
    exact = crossing.logical_not()
    assert torch.equal(vals[exact], v[exact]) and torch.equal(idx[exact], i[exact])
    assert bool(crossing[0]) and bool(crossing[1])  # ties at the cut are flagged


def test_int64_scores_and_padding_in_long_rows():
    g = torch.Generator().manual_seed(5)
    low = torch.iinfo(torch.int64).min
    x = torch.randint(-3, 3, (6, 5000), generator=g) * 2**60
    x[2, 100:4000] = low
    for d in (1, 10, 70):
        vals, idx = topk.stable_top(x, d, floor=None)
        v, i = sorted_prefix(x, d)
        assert torch.equal(vals, v) and torch.equal(idx, i)


def test_ideal_of_short_rows_on_integer_bits():
    g = torch.Generator().manual_seed(1)
    gains = torch.randint(0, 4, (50, 300), generator=g).to(torch.float32) * (torch.rand(50, 300, generator=g) < 0.05)
    gains[3] = -0.0  # a row of -0.0 only: ideal all zeros
    gains[4, :5] = torch.tensor([float("inf"), 2.5, 1e-30, 3e38, 0.5])
    for dtype in (torch.float32, torch.float64, torch.bfloat16):
        t = gains.to(dtype)
        assert torch.equal(topk._top_values(t, 10), t.topk(10, dim=1).values), dtype


@pytest.mark.parametrize("levels", [0, 4])
def test_score_values_of_long_rows_equal_short_blocks(levels):
    """Long rows (two-level selection) against the same rows ranked with one-level
    top-k (a plain topk): every key equal."""
    x = rows(12, 8192, levels, seed=3)
    g = torch.Generator().manual_seed(4)
    target = torch.randint(1, 4, x.shape, generator=g) * (torch.rand(x.shape, generator=g) < 0.02)
    keys = ["ndcg@10", "map@10", "mrr@10", "precision@10", "recall@10", "map@r", "ndcg@100"]
    fast = score_values(x, target, keys).values
    old = topk.TWO_LEVEL_MIN_COLUMNS
    try:
        topk.TWO_LEVEL_MIN_COLUMNS = 10**9
        plain = score_values(x, target, keys).values
    finally:
        topk.TWO_LEVEL_MIN_COLUMNS = old
    assert torch.equal(fast.nan_to_num(-1.0), plain.nan_to_num(-1.0))


@pytest.mark.parametrize("distance", ["cosine", "dot", "euclidean", "squared_euclidean", "hamming"])
@pytest.mark.parametrize("rows_", [3, 16, 40])
def test_similarity_into_a_reused_buffer_equals_a_fresh_product(distance, rows_):
    from retrieval_core import search

    g = torch.Generator().manual_seed(rows_)
    x = torch.randn(300, 24, generator=g) * 3
    if distance == "hamming":
        x = (x > 0).to(torch.int64)
    q, gal = search.prepare(x[:rows_], distance), search.prepare(x[40:], distance)
    g_sq = (gal * gal).sum(1) if "euclidean" in distance else None
    fresh = search.similarity(q, gal, distance, g_sq)
    buffer = torch.full((64, gal.shape[0]), float("nan"))
    reused = search.similarity(q, gal, distance, g_sq, out=buffer)
    assert reused.shape == fresh.shape and torch.equal(reused, fresh)
    again = search.similarity(q[:2], gal, distance, g_sq, out=buffer)  # a shorter chunk in the same buffer
    assert torch.equal(again, search.similarity(q[:2], gal, distance, g_sq))


@pytest.mark.parametrize("n", [1, 3, 4, 7, 255, 1019, 1020, 1021, 2040, 4081])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.int64, torch.bool])
def test_count_relevant_equals_a_plain_count(n, dtype):
    """The packed count (four 0/1 bytes per int32 word, at most 255 words per sum) is
    exact at every width, also with every entry relevant (the largest byte sums)."""
    g = torch.Generator().manual_seed(n)
    for t in (torch.rand(5, n, generator=g) < 0.5, torch.ones(5, n, dtype=torch.bool)):
        t = t.to(dtype)
        assert torch.equal(dense.count_relevant(t), (t != 0).sum(1)), (n, dtype)


def test_count_relevant_of_views():
    """Slices, an odd storage offset, a transposed block and no columns."""
    g = torch.Generator().manual_seed(0)
    flat = torch.rand(1 + 4 * 8, generator=g) < 0.5
    for t in (flat[1:].view(4, 8), (torch.rand(4, 9, generator=g) < 0.5)[:, 1:],
              (torch.rand(8, 6, generator=g) < 0.5).t(), (torch.rand(1, 6, generator=g) < 0.5)[:, :4],
              torch.zeros(3, 0, dtype=torch.bool), torch.zeros(0, 8)):
        assert torch.equal(dense.count_relevant(t), (t != 0).sum(1))


# --------------------------------------------- deep cuts: the threshold of the group maxima

def _deep_rows(n: int, dtype) -> torch.Tensor:
    """Adversarial rows for the deep-cut path: continuous, few levels, a tie across the cut,
    huge and tiny scales, excluded (-inf) runs, a row all -inf but a few, a row all tied."""
    g = torch.Generator().manual_seed(n)
    x = torch.randn(12, n, generator=g, dtype=torch.float64)
    x[1] = torch.randint(0, 3, (n,), generator=g).double()
    x[2] = torch.randint(0, 300, (n,), generator=g).double()
    x[3] = 0.0
    x[3, n - 900:] = 7.0  # a tie of 900 at the end of the row
    x[4] *= 1e30
    x[5] *= 1e-30
    x[6, ::2] = float("-inf")  # half the row excluded
    x[7] = float("-inf")
    x[7, :40] = 1.0  # fewer real scores than k: its threshold is -inf
    x[8] = 1.0  # all tied
    x[9, : n // 2] = float("-inf")
    x[10] = torch.arange(n, dtype=torch.float64)  # increasing: the top k all in the last groups
    x[11] = -torch.arange(n, dtype=torch.float64)
    return x.to(dtype)


@pytest.mark.parametrize("n", [20000, 40003])
@pytest.mark.parametrize("k", [512, 700, 1001, 1267])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_deep_cut_topk_equals_topk(n, k, dtype):
    x = _deep_rows(n, dtype)
    for rows in (slice(0, 12), slice(0, 6), slice(10, 12)):  # with and without the rows that fall back
        got = topk._deep_top(x[rows], k)
        assert got is not None, "the deep-cut path applies"
        vals, idx = got
        assert torch.equal(vals, x[rows].topk(k, dim=1).values)
        assert torch.equal(x[rows].gather(1, idx), vals)
        assert all(r.unique().numel() == k for r in idx)  # no column twice
    for d in (k - 1, k):
        v, i = topk.stable_top(x, d)
        sv, si = sorted_prefix(x, d)
        real = sv > float("-inf")  # padding (-inf) needs no order among itself
        assert torch.equal(v, sv) and torch.equal(i[real], si[real])


@pytest.mark.parametrize("rows_per_slice", [1, 5, 12])
def test_deep_cut_compacts_slice_by_slice_as_in_one(rows_per_slice, monkeypatch):
    x = _deep_rows(20000, torch.float32)
    monkeypatch.setattr(topk, "DEEP_SLICE_ELEMENTS", rows_per_slice * 20000)
    vals, idx = topk._deep_top(x, 700)
    assert torch.equal(vals, x.topk(700, dim=1).values)
    assert torch.equal(x.gather(1, idx), vals)
    assert all(r.unique().numel() == 700 for r in idx)
    rows, cols, values = topk._at_least(x, vals[:, -1:])
    assert torch.equal(rows, torch.sort(rows, stable=True).values)  # rows ascending, as the packing needs
    assert torch.equal(values, x[rows, cols]) and bool((values >= vals[rows, -1]).all())
    assert torch.equal(torch.bincount(rows, minlength=12), (x >= vals[:, -1:]).sum(1))


def test_deep_cut_runs_only_where_it_applies():
    x = torch.randn(3, 20000)
    assert topk._deep_top(x, topk.DEEP_CUT_MIN_K - 1) is None  # small k: the group candidates
    assert topk._deep_top(x, 5001) is None  # fewer than 2k groups of 2
    assert topk._deep_top(x, 4999) is not None
    assert topk._deep_top(x.to(torch.int64), 1000) is None  # integer scores: the group candidates
    assert topk._deep_top(x[:0], 1000) is None


@pytest.mark.parametrize("small", [False, True])
def test_deep_cut_with_a_visit_reads_every_row_once(small, monkeypatch):
    if small:
        monkeypatch.setattr(sizing, "CPU_CACHE_ELEMENTS", 512)
    x = _deep_rows(20000, torch.float32)
    seen = []
    vals, idx = topk._topk(x, 600, seen.append)
    assert torch.equal(torch.cat(seen), x)
    assert torch.equal(vals, x.topk(600, dim=1).values) and torch.equal(x.gather(1, idx), vals)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16])
@pytest.mark.parametrize("k", [1, 7, 150, 300])
def test_sorted_topk_by_integer_keys_equals_topk(dtype, k):
    """The deep cut's final sort on the floats' bits read as integers: signed zeros,
    infinities, subnormals, the extremes and ties keep the float order."""
    g = torch.Generator().manual_seed(k)
    x = torch.randn(8, 300, generator=g).to(dtype)
    x[0] = 0.0
    x[0, ::3] = -0.0
    x[1, :100] = float("-inf")
    x[2] = torch.tensor([float("inf"), float("-inf")], dtype=dtype).repeat(150)
    x[3] *= torch.finfo(dtype).tiny
    x[4] = torch.randint(-3, 3, (300,), generator=g).to(dtype)
    x[5] = -torch.finfo(dtype).max
    x[5, 7], x[5, 9] = torch.finfo(dtype).max, -torch.finfo(dtype).tiny
    vals, idx = topk._sorted_topk(x, k)
    assert torch.equal(vals, x.topk(k, dim=1).values)
    assert torch.equal(x.gather(1, idx), vals)
    assert all(r.unique().numel() == k for r in idx)
