"""Exact results where the input's own arithmetic would round: near-equal euclidean
distances follow the exact float64 order (ties by gallery index) whatever float32 scores
would give."""
import pytest
import torch

import retrieval_core as rc
from retrieval_core import search
from retrieval_core.search import euclidean


def _gen(seed=0):
    return torch.Generator().manual_seed(seed)


# ---------------------------------------------------------------- euclidean order


def _brute_force(q, ql, g, gl, keys, exclude_self=False, relevance=None):
    """float64 squared distances summed directly, ties by gallery index (stable)."""
    d = ((q.to(torch.float64)[:, None, :] - g.to(torch.float64)[None]) ** 2).sum(-1)
    target = (ql[:, None] == gl[None]) if relevance is None else relevance(ql, gl)
    mask = None
    if exclude_self:
        mask = ~torch.eye(q.shape[0], dtype=torch.bool)
    return rc.evaluate_scores(-d, target, keys, mask=mask, reduce="none")


def _same(a, b, keys):
    return {k: bool(torch.equal(a[k].nan_to_num(-1.0), b[k].nan_to_num(-1.0))) for k in keys}


def _order_from_origin(q, g, gl):
    """``(order, prepared q, float32 scores, gain_at)`` of the exact Euclidean order of one
    query ``q`` against ``g`` with labels ``gl`` (label 1 relevant)."""
    frame = search.Frame.of(q, g)
    qp, gp = frame.apply(q), frame.apply(g)
    order = search.EuclideanOrder(gp, g, frame)
    return order, qp, search.similarity(qp, gp, "euclidean"), lambda rows, idx: gl[idx] == 1


def _count_rescoring(monkeypatch):
    """Counts, as the exact order runs: ``calls`` of the float64 pair distances, the ``pairs``
    they measure, and the float64 ``product``s (whole rows re-scored)."""
    calls = {"calls": 0, "pairs": 0, "product": 0}
    pairs, product = euclidean._exact_sq_distances, search.EuclideanOrder._scores64

    def count_pairs(*a):
        calls["calls"] += 1
        calls["pairs"] += a[2].shape[0]
        return pairs(*a)

    def count_product(self, *a):
        calls["product"] += 1
        return product(self, *a)

    monkeypatch.setattr(euclidean, "_exact_sq_distances", count_pairs)
    monkeypatch.setattr(search.EuclideanOrder, "_scores64", count_product)
    return calls

def test_float32_euclidean_score_misorders_and_we_do_not():
    # |g| = 1e4: the float32 score 2q.g - |g|^2 (ulp 8 at 1e8) cannot tell the two apart
    g = torch.tensor([[1e4, 0.0], [1e4, 1e-3], [0.0, 0.0]])
    q = torch.tensor([[1e4, 5.1e-4]])  # squared distances 2.601e-7 and 2.401e-7
    s = search.similarity(q, g, "euclidean")
    assert s[0, 0] >= s[0, 1]  # float32 ranks g[0] first (or ties it ahead by index)
    gl = torch.tensor([0, 1, 0])
    for keys in (["cmc@1", "precision@2"], ["cmc@1", "map", "mrr"]):  # top-k and whole-list paths
        r = rc.evaluate_embeddings(q, torch.tensor([1]), keys, gallery=g, gallery_labels=gl, distance="euclidean",
                                   reduce="none")
        assert r["cmc@1"].tolist() == [1.0]
        assert all(_same(r, _brute_force(q, torch.tensor([1]), g, gl, keys), keys).values())
    # squared_euclidean ranks the same way
    r = rc.evaluate_embeddings(q, torch.tensor([1]), ["cmc@1"], gallery=g, gallery_labels=gl,
                               distance="squared_euclidean")
    assert r["cmc@1"].item() == 1.0


def _clustered(seed, n_gallery, n_query, dim=16, spread=1e-2, n_labels=5, dtype=torch.float32):
    """Points of norm ~1e3 within ~1e-2 of each other: float32 scores round by ~0.1."""
    g = _gen(seed)
    base = torch.full((dim,), 250.0, dtype=torch.float64)
    gallery = (base + spread * torch.randn(n_gallery, dim, generator=g, dtype=torch.float64)).to(dtype)
    query = (base + spread * torch.randn(n_query, dim, generator=g, dtype=torch.float64)).to(dtype)
    return (query, torch.randint(0, n_labels, (n_query,), generator=g),
            gallery, torch.randint(0, n_labels, (n_gallery,), generator=g))


KEYS_TOP = ["cmc@1", "cmc@5", "precision@10", "map@r", "recall@r", "ndcg@10"]
KEYS_WHOLE = ["map", "mrr", "ndcg", "auroc"]


@pytest.mark.parametrize("keys", [KEYS_TOP, KEYS_WHOLE])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_dense_near_ties_follow_float64_distances_at_any_chunk_size(keys, dtype):
    q, ql, g, gl = _clustered(5, 300, 40, dtype=dtype)
    g[7] = g[3]  # identical embeddings with different labels: ranked by gallery index
    gl[7], gl[3] = 1, 2
    q[0] = g[3]
    ref = _brute_force(q, ql, g, gl, keys)
    for budget in (None, 20_000, 3_000):
        r = rc.evaluate_embeddings(q, ql, keys, gallery=g, gallery_labels=gl, distance="euclidean",
                                   reduce="none", memory_budget=budget)
        assert all(_same(r, ref, keys).values()), (budget, _same(r, ref, keys))
    # the float32 scores alone get them wrong: the test has teeth
    plain = rc.evaluate_scores(search.similarity(search.prepare(q, "euclidean"), search.prepare(g, "euclidean"),
                                                 "euclidean"), ql[:, None] == gl[None], keys, reduce="none")
    assert not all(_same(plain, ref, keys).values())


def test_near_ties_with_self_exclusion_and_multi_hot_labels():
    q, ql, _, _ = _clustered(6, 1, 120)
    keys = KEYS_TOP + ["map"]
    ref = _brute_force(q, ql, q, ql, keys, exclude_self=True)
    for budget in (None, 5_000):
        r = rc.evaluate_embeddings(q, ql, keys, distance="euclidean", reduce="none", memory_budget=budget)
        assert all(_same(r, ref, keys).values())
    # multi-hot labels: graded gains through the dense builder
    multi = torch.nn.functional.one_hot(ql, 5).bool()
    multi[::3, 0] = True
    shared = lambda a, b: a.to(torch.float64) @ b.to(torch.float64).T  # noqa: E731
    ref = _brute_force(q, multi, q, multi, keys, exclude_self=True, relevance=shared)
    r = rc.evaluate_embeddings(q, multi, keys, distance="euclidean", reduce="none")
    assert all(_same(r, ref, keys).values())


def test_few_near_ties_are_rescored_pairwise_many_with_a_float64_product(monkeypatch):
    calls = _count_rescoring(monkeypatch)
    # two near-equal candidates among 200 far ones: a few pairs re-scored, no product
    g = torch.cat([torch.tensor([[1e4, 0.0], [1e4, 1e-3]]), 100.0 * torch.randn(200, 2, generator=_gen(7))])
    gl = torch.cat([torch.tensor([0, 1]), torch.full((200,), 2)])
    q = torch.tensor([[1e4, 5.1e-4]])
    r = rc.evaluate_embeddings(q, torch.tensor([1]), ["cmc@1"], gallery=g, gallery_labels=gl, distance="euclidean")
    assert r["cmc@1"].item() == 1.0
    assert calls["calls"] == 1 and calls["product"] == 0, calls
    # dense near-ties: a float64 product for the rows (one far item keeps the products'
    # frame wide: centring alone would separate the cluster)
    q, ql, g, gl = _clustered(8, 200, 10)
    g, gl = torch.cat([g, g[:1] + 1e5]), torch.cat([gl, gl[:1]])
    keys = ["cmc@1", "precision@5"]
    r = rc.evaluate_embeddings(q, ql, keys, gallery=g, gallery_labels=gl, distance="euclidean", reduce="none")
    assert calls["product"] >= 1
    assert all(_same(r, _brute_force(q, ql, g, gl, keys), keys).values())


@pytest.mark.parametrize("offset,scale", [(0.0, 1.0), (1e3, 1.0), (1e6, 1.0), (0.0, 1e35), (0.0, 1e-30), (1e4, 1e-3)])
def test_euclidean_bounds_cover_the_score_errors(offset, scale):
    """The float32 score of the prepared embeddings, and the float64 one, stay within
    half their windows of the exact value |q|^2 - d(q, g) (d: the exact squared
    distance of the embeddings as given, in the frame's units), at any offset or scale."""
    q, _, g, _ = _clustered(9, 500, 50, spread=1.0)
    q, g = [((x.double() + offset) * scale).float() for x in (q, g)]
    frame = search.Frame.of(q, g)
    qp, gp = frame.apply(q), frame.apply(g)
    order = search.EuclideanOrder(gp, g, frame)
    rows = torch.arange(q.shape[0]).repeat_interleave(g.shape[0])
    d = order.exact(q, rows, torch.arange(g.shape[0]).repeat(q.shape[0])).view(q.shape[0], -1)
    target = (qp.double() ** 2).sum(1, keepdim=True) - d
    s = search.similarity(qp, gp, "euclidean", (gp * gp).sum(1))
    every = torch.arange(g.shape[0]).expand(q.shape[0], -1)
    errors = lambda o, qp, terms: o._errors(euclidean._norm_bound(qp)[:, None], o.g_norms[every], terms)  # noqa: E731
    lower, upper = order._interval(s, errors(order, qp, order.terms32))
    assert bool(((lower <= target) & (target <= upper)).all())
    # one product (-|g|^2 its accumulator) within the wider bounds of a fused order
    fused = search.EuclideanOrder(gp, g, frame, fused=True)
    buffer = torch.empty(q.shape[0], g.shape[0])
    s = search.similarity(qp, gp, "euclidean", (gp * gp).sum(1), out=buffer, fused=True)
    lower, upper = fused._interval(s, errors(fused, qp, fused.terms32))
    assert bool(((lower <= target) & (target <= upper)).all())
    target = (frame.apply(q, torch.float64) ** 2).sum(1, keepdim=True) - d
    s64 = order._scores64(q)
    lower, upper = order._interval(s64, errors(order, qp, order.terms64))
    assert bool(((lower <= target) & (target <= upper)).all())
    # tie scores (-|q - g|^2 from float64 products) within theirs of -d
    q64, g64 = frame.apply(q, torch.float64), frame.apply(g, torch.float64)
    ties = search.EuclideanOrder(g64, g, frame)
    s = ties.tie_scores(q64, q, 0)  # depth 0: nothing re-scored
    lower, upper = ties._interval(s, errors(ties, q64, ties.terms_ties))
    assert bool(((lower <= -d) & (-d <= upper)).all())



@pytest.mark.parametrize("offset,scale", [(0.0, 1.0), (1e4, 1.0), (0.0, 1e35), (0.0, 1e-30), (1e4, 1e-3)])
def test_the_row_screen_breaks_only_where_the_exact_order_does(offset, scale):
    """The checked path's clusters come from one bound per row (``_screen``): each of its
    breaks is one of the per-candidate bounds' (``_close``) and one of the exact
    distances (everything before at most everything after), with duplicated items
    (exact ties), excluded candidates (-inf) and a far item in some rows' prefix."""
    q, _, g, _ = _clustered(13, 2000, 40, spread=1e-1)
    g = torch.cat([g, g[:30], g[:1] + 50.0])  # duplicates, and one far item
    q, g = [((x.double() + offset) * scale).float() for x in (q, g)]
    frame = search.Frame.of(q, g)
    qp, gp = frame.apply(q), frame.apply(g)
    order = search.EuclideanOrder(gp, g, frame)
    scores = search.similarity(qp, gp, "euclidean")
    scores[::3, 5:60] = float("-inf")
    for d in (5, 60, g.shape[0] - 5):
        vals, idx, err = order.prefix(scores, d, qp, order.terms32, search.euclidean.stable_top)
        screen, close = order._screen(vals, idx, qp), order._close(vals, err)
        assert bool((close <= screen).all())
        rows = torch.arange(q.shape[0]).repeat_interleave(idx.shape[1])
        dist = order.exact(q, rows, idx.reshape(-1)).view(idx.shape).masked_fill(torch.isneginf(vals), float("inf"))
        before = torch.cummax(dist, 1).values[:, :-1]
        after = torch.cummin(dist.flip(1), 1).values.flip(1)[:, 1:]
        breaks = ~screen & torch.isfinite(vals[:, 1:])
        assert bool((before[breaks] <= after[breaks]).all())
        assert bool((~screen).any()) and bool(screen.any())


def _exact_order(order, q, n, excluded=None):
    """``[c, n]`` gallery indexes by (exact float64 distance, index), excluded ones last."""
    rows = torch.arange(q.shape[0]).repeat_interleave(n)
    d = order.exact(q, rows, torch.arange(n).repeat(q.shape[0])).view(q.shape[0], n)
    if excluded is not None:
        d = d.masked_fill(excluded, float("inf"))
    return torch.sort(d, dim=1, stable=True).indices


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("offset,scale", [(0.0, 1.0), (1e3, 1.0), (0.0, 1e30), (0.0, 1e-30), (1e4, 1e-3)])
def test_short_prefix_retries_only_the_rows_it_does_not_cover(dtype, offset, scale):
    """Query 0 cuts through a shell of equidistant candidates (2 dim of them: near-ties
    that float32 misorders) that the first short prefix cannot hold: that row alone is taken
    again (the others keep their prefix, padded); every row gets the exact order, ties by
    index, with excluded candidates, at any offset or scale, for every depth up to past
    the gallery."""
    gen, dim = _gen(11), 16
    centre = torch.full((dim,), 0.25, dtype=torch.float64)
    shell = torch.randn(2 * dim, dim, generator=gen, dtype=torch.float64)
    shell = centre + 0.5 * shell / shell.norm(dim=1, keepdim=True)
    near = centre + 0.01 * torch.randn(5, dim, generator=gen, dtype=torch.float64)
    far = centre + 3.0 + torch.randn(120, dim, generator=gen, dtype=torch.float64)
    g64 = torch.cat([far[:60], shell, near, far[60:]])
    q64 = torch.cat([centre[None], far[:7] + 0.1 * torch.randn(7, dim, generator=gen, dtype=torch.float64)])
    q, g = [((x + offset) * scale).to(dtype) for x in (q64, g64)]
    frame = search.Frame.of(q, g)
    qp, gp = frame.apply(q), frame.apply(g)
    order = search.EuclideanOrder(gp, g, frame)
    n = g.shape[0]
    excluded = torch.zeros(q.shape[0], n, dtype=torch.bool)
    excluded[0, 60 + 3], excluded[0, 60 + 2 * dim + 1], excluded[1:, 7] = True, True, True
    scores = search.similarity(qp, gp, "euclidean").masked_fill(excluded, float("-inf"))
    want = _exact_order(order, q, n, excluded)
    taken = []

    def base_top(s, k):
        taken.append((s.shape[0], k))
        return search.euclidean.stable_top(s, k)

    top = order.top(qp, lambda rows, idx: idx, base_top=base_top, qx=q)  # positions as gains: every cluster
    for d in (1, 5, 5 + dim, 5 + 2 * dim - 3, 40, n - 1, n, n + 3):
        taken.clear()
        vals, idx = top(scores, min(d, n))
        real = torch.isfinite(vals)
        assert torch.equal(idx[real], want[:, : min(d, n)][real]), d
        assert bool((~real).sum(1).le(excluded.sum(1)).all())
        if d == 5 + dim:  # the cut inside the shell: query 0 taken again, alone
            assert taken[0][0] == q.shape[0] and any(rows == 1 for rows, _ in taken[1:]), taken



def test_far_gallery_items_do_not_widen_the_window_of_near_ones(monkeypatch):
    """Each candidate's error bound comes from its own norm: two far items (1e3 away,
    they set the frame's scale) leave the bounds of a tight cluster near the centre
    far below its score gaps, so few pairs there are re-scored (a bound from the
    largest gallery norm made the whole cluster near-ties: a float64 product)."""
    calls = _count_rescoring(monkeypatch)
    gen = _gen(12)
    g = torch.cat([torch.randn(300, 16, generator=gen), torch.full((2, 16), 1e3) * torch.tensor([[1.0], [-1.0]])])
    gl = torch.randint(0, 3, (302,), generator=gen)
    q, ql = g[:20] + 0.1 * torch.randn(20, 16, generator=gen), gl[:20]
    keys = ["cmc@1", "precision@10", "map@r"]
    r = rc.evaluate_embeddings(q, ql, keys, gallery=g, gallery_labels=gl, distance="euclidean", reduce="none")
    assert all(_same(r, _brute_force(q, ql, g, gl, keys), keys).values())
    assert calls["product"] == 0 and calls["pairs"] <= 20, calls



def test_near_ties_past_the_cut_are_not_rescored(monkeypatch):
    """A cluster of unequal gains that starts past the first ``d`` cannot reach them:
    neither re-scored (checked path) nor flagged (deferred path); one that the cut
    runs through is, and gets the exact order (equal distances: gallery index)."""
    rescored = []
    pairs = euclidean._exact_sq_distances
    monkeypatch.setattr(euclidean, "_exact_sq_distances", lambda *a: rescored.append(a[2].shape[0]) or pairs(*a))
    far = 10.0 * torch.tensor([[1.0, 1.0], [-1.0, 1.0], [1.0, -1.0], [-1.0, -1.0]]).repeat(3, 1)
    g = torch.cat([torch.tensor([[1.0, 0.0], [0.0, 2.0], [-3.0, 0.0], [4.0, 0.0], [0.0, 4.0]]), far])
    gl = torch.tensor([1, 0, 1, 0, 1] + [0] * far.shape[0])
    q = torch.zeros(1, 2)
    order, qp, scores, gain_at = _order_from_origin(q, g, gl)
    vals, idx = order.top(qp, gain_at, qx=q)(scores, 3)
    assert idx.tolist() == [[0, 1, 2]] and rescored == []
    assert order.top(qp, gain_at, select="deferred", qx=q)(scores, 3)[2].tolist() == [False]
    vals, idx = order.top(qp, gain_at, qx=q)(scores, 4)
    assert idx.tolist() == [[0, 1, 2, 3]] and sum(rescored) == 2
    assert order.top(qp, gain_at, select="deferred", qx=q)(scores, 4)[2].tolist() == [True]


def test_order_free_keys_repair_only_the_clusters_a_cut_runs_through(monkeypatch):
    """With ``cuts`` (keys that read the set of the first k: hits@k), a cluster of unequal
    gains wholly inside the top is left in its float32 order (the same gains before every
    cut), one that a cut runs through is re-ranked exactly (equal distances: gallery index);
    without cuts both are; evaluate_embeddings' values stay the exact order's."""
    rescored = []
    pairs = euclidean._exact_sq_distances
    monkeypatch.setattr(euclidean, "_exact_sq_distances", lambda *a: rescored.append(a[2].shape[0]) or pairs(*a))
    far = 10.0 * torch.tensor([[1.0, 1.0], [-1.0, 1.0], [1.0, -1.0], [-1.0, -1.0]]).repeat(50, 1)  # few re-scored
    near = torch.tensor([[1.0, 0.0], [0.0, 1.0], [2.0, 0.0], [0.0, 3.0], [-3.0, 0.0], [0.0, -3.0]])
    g = torch.cat([near, far])
    gl = torch.tensor([1, 0, 1, 0, 1, 1] + [0] * far.shape[0])
    q = torch.zeros(1, 2)
    order, qp, scores, gain_at = _order_from_origin(q, g, gl)
    for cuts, d, count in ((None, 4, 5), ([4], 4, 3), ([2, 4], 4, 3), ([1, 4], 4, 5), ([4], 3, 0)):
        rescored.clear()
        vals, idx = order.top(qp, gain_at, qx=q, cuts=cuts)(scores, d)
        assert sum(rescored) == count, (cuts, d, rescored)
        assert sorted(idx[0, :d].tolist()) == [0, 1, 2, 3][:d] and idx[0, :d].tolist()[2:] == [2, 3][: d - 2]
    keys = ["precision@4", "recall@4", "cmc@1"]
    qs = torch.cat([q, near[:3] + 0.5])
    ql = torch.tensor([1, 0, 1, 1])
    counts = []
    for more in ([], ["map@4"]):
        rescored.clear()
        r = rc.evaluate_embeddings(qs, ql, keys + more, gallery=g, gallery_labels=gl, distance="euclidean",
                                   reduce="none")
        counts.append(sum(rescored))
        assert all(_same(r, _brute_force(qs, ql, g, gl, keys + more), keys + more).values())
    assert counts[0] < counts[1], counts
