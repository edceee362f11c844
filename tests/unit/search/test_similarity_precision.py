"""Issue 18, item 1: no silent wrong numbers from the precision of the similarity
products, at any offset or scale of the embeddings, under every tie mode.

The references are exact: embeddings ``2**k * (offset + n)`` with small integers
``n`` (exactly representable in the dtype), whose squared distances are
``4**k * |n_q - n_g|^2`` and dot products ``4**k * n_q.n_g``: integer arithmetic on
``n`` ranks them, and the score evaluator (already tested against its own
references) gives the values of that exact order under each tie mode.
"""
import torch
import pytest
from hypothesis import given, settings, strategies as st

import retrieval_core as rc

TIES = ["stable", "expected", "optimistic", "pessimistic"]
KEYS = ["cmc@1", "precision@3", "recall@r", "map@r", "ndcg@4", "map", "mrr"]


def _equal(a, b, keys):
    return {k: bool(torch.equal(a[k].nan_to_num(-1.0), b[k].nan_to_num(-1.0))) for k in keys}


def _integers(seed: int, n: int, dim: int, span: int = 3) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randint(-span, span + 1, (n, dim), generator=g)


def _embed(n: torch.Tensor, offset: int, k: int, dtype) -> torch.Tensor:
    """``2**k * (offset + n)``, exact in ``dtype`` (checked)."""
    x = torch.ldexp((n + offset).to(torch.float64), torch.tensor(k)).to(dtype)
    assert torch.equal(torch.ldexp(x.to(torch.float64), torch.tensor(-k)), (n + offset).to(torch.float64))
    return x


def _reference(scores, ql, gl, keys, ties, self_gallery):
    mask = ~torch.eye(scores.shape[0], dtype=torch.bool) if self_gallery else None
    return rc.evaluate_scores(scores.to(torch.float64), ql[:, None] == gl[None], keys, mask=mask, ties=ties,
                              reduce="none")


def _problem(data, dtype, with_offset=True):
    seed = data.draw(st.integers(0, 2**31 - 1), label="seed")
    n_q, n_g, dim = data.draw(st.integers(6, 14)), data.draw(st.integers(6, 30)), data.draw(st.integers(1, 5))
    self_gallery = data.draw(st.booleans(), label="self_gallery")
    nq = _integers(seed, n_q, dim)
    ng = nq if self_gallery else _integers(seed + 1, n_g, dim)
    labels = torch.randint(0, 3, (nq.shape[0] + ng.shape[0],), generator=torch.Generator().manual_seed(seed))
    ql, gl = labels[: nq.shape[0]], labels[nq.shape[0]:]
    if self_gallery:
        gl = ql
    offset = data.draw(st.sampled_from([0, 1000, 10**4, 10**6]), label="offset") if with_offset else 0
    top = 100 if dtype == torch.float32 else 1000
    k = data.draw(st.integers(-top, top), label="k")
    return nq, ng, ql, gl, offset, k, self_gallery


@settings(max_examples=60, deadline=None)
@given(st.data(), st.sampled_from([torch.float32, torch.float64]), st.sampled_from(TIES),
       st.sampled_from(["euclidean", "squared_euclidean"]))
def test_euclidean_values_are_those_of_the_exact_order(data, dtype, ties, distance):
    nq, ng, ql, gl, offset, k, self_gallery = _problem(data, dtype)
    q = _embed(nq, offset, k, dtype)
    g = None if self_gallery else _embed(ng, offset, k, dtype)
    got = rc.evaluate_embeddings(q, ql, KEYS, gallery=g, gallery_labels=None if self_gallery else gl,
                                 distance=distance, ties=ties, reduce="none")
    exact = -((nq[:, None, :] - ng[None]) ** 2).sum(-1)
    assert all(_equal(got, _reference(exact, ql, gl, KEYS, ties, self_gallery), KEYS).values())


@settings(max_examples=40, deadline=None)
@given(st.data(), st.sampled_from([torch.float32, torch.float64]), st.sampled_from(TIES))
def test_euclidean_neighbours_are_the_exact_distances_in_order(data, dtype, ties):
    nq, ng, ql, gl, offset, k, self_gallery = _problem(data, dtype)
    q = _embed(nq, offset, k, dtype)
    g = None if self_gallery else _embed(ng, offset, k, dtype)
    n = min(3, ng.shape[0] - int(self_gallery))
    got = rc.evaluate_embeddings(q, ql, ["cmc@1"], gallery=g, gallery_labels=None if self_gallery else gl,
                                 distance="euclidean", ties=ties, return_neighbours=n)
    idx, scores = got.neighbours
    sq = ((nq[:, None, :] - ng[None]) ** 2).sum(-1)
    if self_gallery:
        sq.fill_diagonal_(torch.iinfo(sq.dtype).max)
    order = torch.sort(sq, dim=1, stable=True).indices[:, :n]  # ties by gallery position
    want = -torch.ldexp(sq.gather(1, order).to(torch.float64).sqrt(), torch.tensor(k))
    assert torch.equal(scores, want)  # sqrt(n) * 2**k: the correctly rounded distance
    if ties == "stable":
        assert torch.equal(idx, order)


@settings(max_examples=40, deadline=None)
@given(st.data(), st.sampled_from([torch.float32, torch.float64]), st.sampled_from(TIES))
def test_dot_values_do_not_depend_on_scale(data, dtype, ties):
    """Small-integer rows times ``2**k``: the float32 products are exact at any ``k``
    (no overflow or underflow), so the values are those of the integer dot products."""
    nq, ng, ql, gl, _, k, self_gallery = _problem(data, dtype, with_offset=False)
    k = k + 20 if dtype == torch.float32 else k  # products up to 2**240
    q = _embed(nq, 0, k, dtype)
    g = None if self_gallery else _embed(ng, 0, k, dtype)
    got = rc.evaluate_embeddings(q, ql, KEYS, gallery=g, gallery_labels=None if self_gallery else gl,
                                 distance="dot", ties=ties, reduce="none")
    assert all(_equal(got, _reference(nq @ ng.T, ql, gl, KEYS, ties, self_gallery), KEYS).values())


@settings(max_examples=40, deadline=None)
@given(st.data(), st.sampled_from([torch.float32, torch.float64]), st.sampled_from(TIES))
def test_cosine_values_do_not_depend_on_a_power_of_two_scale(data, dtype, ties):
    nq, ng, ql, gl, _, k, self_gallery = _problem(data, dtype, with_offset=False)
    k = max(k, -120) if dtype == torch.float32 else k
    one = {}
    for scale in (0, k):
        q = _embed(nq, 0, scale, dtype)
        g = None if self_gallery else _embed(ng, 0, scale, dtype)
        one[scale] = rc.evaluate_embeddings(q, ql, KEYS, gallery=g, gallery_labels=None if self_gallery else gl,
                                            distance="cosine", ties=ties, reduce="none")
    assert all(_equal(one[0], one[k], KEYS).values())


# -- the tester's cases -------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("ties", TIES)
def test_no_tie_among_distinct_distances_near_1e4(dtype, ties):
    # 10001 and 10002 are 1 apart, 9999 is 2 and 3 away: no tie, each has its nearest
    # neighbour of its own label (the third has no relevant item)
    x = torch.tensor([[10001.0], [10002.0], [9999.0]], dtype=dtype)
    r = rc.evaluate_embeddings(x, torch.tensor([0, 0, 1]), ["cmc@1"], distance="euclidean", ties=ties, reduce="none")
    assert r["cmc@1"].nan_to_num(-1.0).tolist() == [1.0, 1.0, -1.0]


@pytest.mark.parametrize("offset", [0.0, 1e3, 1e4, 1e6])
@pytest.mark.parametrize("ties", TIES)
def test_offset_embeddings_match_float64_brute_force(offset, ties):
    """randn + offset (float32; at 1e6 on a grid of 1/16, where float64 distances are
    exact and ties occur): values of the float64 distances of the float32 embeddings."""
    g = torch.Generator().manual_seed(3)
    x = (torch.randn(150, 6, generator=g, dtype=torch.float64) + offset).to(torch.float32)
    labels = torch.randint(0, 10, (150,), generator=g)
    keys = ["cmc@1", "map@r", "precision@5", "map"]
    got = rc.evaluate_embeddings(x, labels, keys, distance="euclidean", ties=ties, reduce="none")
    d = ((x.double()[:, None, :] - x.double()[None]) ** 2).sum(-1)
    assert all(_equal(got, _reference(-d, labels, labels, keys, ties, True), keys).values())


def test_neighbour_scores_near_1000_are_the_distances_in_order():
    g = torch.Generator().manual_seed(0)
    x = 1000 + 0.01 * torch.randn(20, 4, generator=g, dtype=torch.float64)
    r = rc.evaluate_embeddings(x, torch.arange(20) % 2, ["cmc@1"], distance="euclidean", return_neighbours=5)
    idx, scores = r.neighbours
    d = torch.cdist(x, x).fill_diagonal_(float("inf"))
    want, order = torch.sort(d, dim=1, stable=True)
    assert torch.equal(idx, order[:, :5])
    torch.testing.assert_close(scores, -want[:, :5], rtol=1e-12, atol=0)
    assert bool((scores[:, :-1] >= scores[:, 1:]).all())


@pytest.mark.parametrize("scale", [1e-20, 1e19])
@pytest.mark.parametrize("distance", ["cosine", "dot", "euclidean"])
def test_float32_scale_does_not_change_values(scale, distance):
    g = torch.Generator().manual_seed(1)
    x = torch.randn(60, 4, generator=g)
    labels = torch.randint(0, 5, (60,), generator=g)
    keys = ["cmc@1", "map@r", "map"]
    want = rc.evaluate_embeddings(x, labels, keys, distance=distance, reduce="none")
    got = rc.evaluate_embeddings(x * scale, labels, keys, distance=distance, reduce="none")
    assert all(_equal(got, want, keys).values())


@pytest.mark.parametrize("scale", [1e-150, 1e20, 1e150])
def test_float64_scale_does_not_change_values(scale):
    g = torch.Generator().manual_seed(2)
    x = torch.randn(60, 4, generator=g, dtype=torch.float64)
    labels = torch.randint(0, 5, (60,), generator=g)
    keys = ["cmc@1", "map@r", "map"]
    for distance in ("cosine", "dot", "euclidean", "squared_euclidean"):
        want = rc.evaluate_embeddings(x, labels, keys, distance=distance, ties="expected", reduce="none")
        got = rc.evaluate_embeddings(x * scale, labels, keys, distance=distance, ties="expected", reduce="none")
        assert all(_equal(got, want, keys).values()), distance


# -- embeddings that require grad -----------------------------------------------------------


@pytest.mark.parametrize("distance", ["cosine", "dot", "euclidean", "squared_euclidean", "hamming"])
@pytest.mark.parametrize("ties", ["stable", "expected"])
def test_embeddings_that_require_grad_are_evaluated_detached(distance, ties):
    g = torch.Generator().manual_seed(4)
    x = torch.randn(30, 6, generator=g)
    if distance == "hamming":
        x = (x > 0).float()
    labels = torch.randint(0, 3, (30,), generator=g)
    net = torch.nn.Linear(6, 6)
    with torch.no_grad():  # an identity layer: the embeddings keep their values, and a graph
        net.weight.copy_(torch.eye(6))
        net.bias.zero_()
    y = net(x)
    assert y.requires_grad
    keys = ["cmc@1", "map@r", "map", "fnmr@0.1"]
    for gallery in (None, y[:20]):
        kw = dict(gallery=gallery, gallery_labels=None if gallery is None else labels[:20], distance=distance,
                  ties=ties, reduce="none")
        got = rc.evaluate_embeddings(y, labels, keys, return_neighbours=2, **kw)
        want = rc.evaluate_embeddings(x, labels, keys, return_neighbours=2, **kw | dict(
            gallery=None if gallery is None else x[:20]))
        assert all(_equal(got, want, keys).values())
        assert all(not t.requires_grad for t in got.neighbours)


# -- fnmr@x: pair distances over every query-gallery pair (set-level) -----------------------

@pytest.mark.parametrize("dtype, offset", [(torch.float32, 1e4), (torch.float64, 1e12), (torch.float32, -3e5)])
def test_fnmr_euclidean_does_not_depend_on_an_offset(dtype, offset):
    # integer embeddings: every distance is exact (and many tie) without the offset; the
    # offset once cancelled in |q|^2 - 2 q.g + |g|^2 and changed the rates
    g = torch.Generator().manual_seed(0)
    x = torch.randint(-8, 9, (80, 6), generator=g).double()
    labels = torch.randint(0, 5, (80,), generator=g)
    keys = ["fnmr@0.1", "fnmr@0.3"]
    exact = rc.evaluate_embeddings(x, labels, keys, distance="euclidean")
    for shift, scale in ((offset, 1.0), (offset, 2.0**-40), (0.0, 2.0**60)):
        got = rc.evaluate_embeddings(((x + shift) * scale).to(dtype), labels, keys, distance="euclidean")
        assert {k: got[k].item() for k in keys} == {k: exact[k].item() for k in keys}, (shift, scale)
