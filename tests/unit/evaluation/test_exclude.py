"""Seen items excluded (``exclude=``) and two-tower evaluation (``relevance=`` as (user, item)
pairs or a sparse tensor) in evaluate_scores and evaluate_embeddings (issue 30).

The references: ``mask=`` False at the same items (dense scores), the excluded columns
removed by hand, the mean over every order of tied scores (brute force), and a two-tower
evaluation against ``evaluate_scores`` of the dense ``u @ v.T`` with the dense truth and mask.
"""
from __future__ import annotations

import itertools
import math

import pytest
import torch

import retrieval_core as rc
from retrieval_core import sizing
from retrieval_core.metrics.spec import AT_K, AT_R, AT_X, REGISTRY

MODES = ("stable", "expected", "optimistic", "pessimistic")


def keys_for(k: int, mode: str):
    """Every per-query key of the registry at cutoff k, @r, @p and bare (those the mode takes)."""
    keys = []
    for name, spec in sorted(REGISTRY.items()):
        if not spec.per_query:
            continue
        forms = [(spec.plain, name)] if spec.plain else []
        forms += [(AT_K, f"{name}@{k}")] if AT_K in spec.cutoffs else []
        forms += [(AT_R, f"{name}@r")] if AT_R in spec.cutoffs and spec.plain != AT_R else []
        forms += [(AT_X, f"{name}@0.5")] if AT_X in spec.cutoffs else []
        keys += [key for form, key in forms if mode != "expected" or spec.has_expected(form)]
    return keys


def random_pairs(generator, n_users: int, n_items: int, n: int) -> torch.Tensor:
    return torch.stack([torch.randint(0, n_users, (n,), generator=generator),
                        torch.randint(0, n_items, (n,), generator=generator)])


def dense_of(pairs: torch.Tensor, n_users: int, n_items: int) -> torch.Tensor:
    out = torch.zeros(n_users, n_items, dtype=torch.bool)
    out[pairs[0], pairs[1]] = True
    return out


def assert_same(got, want, keys, atol=1e-12):
    for key in keys:
        torch.testing.assert_close(got[key], want[key], equal_nan=True, rtol=0, atol=atol, msg=key)


# ------------------------------------------------------------------ evaluate_scores(exclude=)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("sync_free", [False, True])
def test_exclude_equals_mask_false_at_the_same_items(generator, mode, sync_free):
    preds = torch.randint(0, 4, (30, 12), generator=generator).double()  # many ties
    target = torch.randint(0, 3, (30, 12), generator=generator)
    seen = random_pairs(generator, 30, 12, 90)  # repeated pairs: excluded once
    pad = torch.rand(30, 12, generator=generator) > 0.1  # a mask of the caller's too
    keys = keys_for(4, mode)
    with sizing.force_sync_free(sync_free):
        want = rc.evaluate_scores(preds, target, keys, mask=pad & ~dense_of(seen, 30, 12), ties=mode, reduce="none")
        for exclude in (seen, dense_of(seen, 30, 12).to_sparse(), dense_of(seen, 30, 12).to_sparse_csr()):
            got = rc.evaluate_scores(preds, target, keys, mask=pad, exclude=exclude, ties=mode, reduce="none")
            assert_same(got, want, keys)


def test_excluded_items_are_the_columns_removed(generator):
    """Each query's excluded columns dropped by hand: the same values (neither relevant nor
    irrelevant, no rank; R counts only the items left)."""
    preds, target = torch.rand(8, 10, generator=generator), torch.randint(0, 2, (8, 10), generator=generator)
    seen = random_pairs(generator, 8, 10, 25)
    keys = ["ndcg@3", "map@r", "recall@4", "precision@4", "mrr", "r_precision", "auroc"]
    got = rc.evaluate_scores(preds, target, keys, exclude=seen, reduce="none", empty="zero")
    kept = ~dense_of(seen, 8, 10)
    for q in range(8):
        row = rc.evaluate_scores(preds[q, kept[q]][None], target[q, kept[q]][None], keys, reduce="none",
                                 empty="zero")
        for key in keys:
            assert math.isclose(got[key][q].item(), row[key][0].item(), abs_tol=1e-12), (key, q)


def test_an_excluded_relevant_item_is_not_counted_in_r():
    """Item 0 is relevant and seen: recall@1 is 1 (R = 1, item 2), not 1/2 as when R counted it."""
    preds, target = torch.tensor([[0.9, 0.1, 0.5]]), torch.tensor([[1, 0, 1]])
    r = rc.evaluate_scores(preds, target, ["recall@1", "map@r"], exclude=torch.tensor([[0], [0]]))
    assert r["recall@1"].item() == 1.0 and r["map@r"].item() == 1.0
    r = rc.evaluate_scores(preds, target, ["recall@1"], exclude=torch.tensor([[0, 0], [0, 2]]))
    assert math.isnan(r["recall@1"].item())  # nothing relevant left: empty="skip"


@pytest.mark.parametrize("mode", MODES[1:])
def test_tie_modes_with_exclusion_are_the_orders_of_the_items_left(mode):
    """Brute force on the items left: "expected" is the mean over every order of them (each
    order ranked stably), "optimistic"/"pessimistic" the order with tied items by gain,
    highest/lowest first."""
    preds = torch.tensor([[0.5, 0.9, 0.5, 0.5, 0.2, 0.5]])
    target = torch.tensor([[1, 0, 0, 2, 1, 0]])
    seen = torch.tensor([[0, 0], [1, 3]])  # the top item and a tied relevant one
    keys = keys_for(2, mode)
    got = rc.evaluate_scores(preds, target, keys, exclude=seen, ties=mode, reduce="none")
    left = [0, 2, 4, 5]
    p, t = preds[0, left], target[0, left]
    if mode == "expected":
        perms = torch.tensor(list(itertools.permutations(range(4))))
        every = rc.evaluate_scores(p[perms], t[perms], keys, reduce="none")  # stable: each order of the columns
        want = {key: every[key].mean() for key in keys}
    else:
        sign = -1 if mode == "optimistic" else 1
        order = sorted(range(4), key=lambda j: (-p[j].item(), sign * t[j].item(), j))
        want = rc.evaluate_scores(p[order][None], t[order][None], keys)
    for key in keys:
        a, b = got[key].item(), want[key].item()
        assert math.isclose(a, b, abs_tol=1e-9) or (math.isnan(a) and math.isnan(b)), key


def test_exclude_bad_inputs():
    p, t = torch.rand(2, 3), torch.ones(2, 3)
    cases = [
        ([[0, 1], [1, 2]], TypeError, "exclude must be"),
        (torch.tensor([[0.0], [1.0]]), TypeError, "integer"),
        (torch.tensor([0, 1]), ValueError, r"\[2, E\]"),
        (torch.tensor([[2], [0]]), ValueError, r"user ids outside \[0, 2\).*got 2"),
        (torch.tensor([[0], [3]]), ValueError, r"item ids outside \[0, 3\).*got 3"),
        (torch.tensor([[0], [-1]]), ValueError, "item ids outside"),
        (torch.ones(2, 4).to_sparse(), ValueError, r"sparse \[users, items\] = \[2, 3\]"),
        (torch.tensor([[0.0, -1.0, 0.0], [0.0, 0.0, 0.0]]).to_sparse(), ValueError, "finite and >= 0"),
    ]
    for exclude, error, message in cases:
        with pytest.raises(error, match=message):
            rc.evaluate_scores(p, t, ["mrr"], exclude=exclude)
    with pytest.raises(ValueError, match="exclude= takes dense"):
        rc.evaluate_scores(p.reshape(-1), t.reshape(-1), ["mrr"], indexes=torch.tensor([0, 0, 0, 1, 1, 1]),
                           exclude=torch.tensor([[0], [0]]))
    with pytest.raises(ValueError, match="exclude= takes dense"):
        rc.evaluate_scores(p, t, ["mrr"], n_relevant=torch.tensor([3, 3]), exclude=torch.tensor([[0], [0]]))


# ------------------------------------------------------------------ two-tower: evaluate_embeddings


def two_tower(generator, n_users=40, n_items=25, dims=3, graded=False):
    """Integer embeddings (exact products: many exact ties), test pairs and seen pairs."""
    users = torch.randint(-2, 3, (n_users, dims), generator=generator).float()
    items = torch.randint(-2, 3, (n_items, dims), generator=generator).float()
    truth = random_pairs(generator, n_users, n_items, 3 * n_users).unique(dim=1)
    seen = random_pairs(generator, n_users, n_items, 4 * n_users)
    gains = dense_of(truth, n_users, n_items)
    if graded:
        gains = gains * torch.randint(1, 4, (n_users, n_items), generator=generator)
    return users, items, truth, seen, gains


def dense_scores(users, items, distance):
    if distance == "dot":
        return users.double() @ items.double().T
    return -torch.cdist(users.double(), items.double()) ** 2


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("distance", ["dot", "euclidean"])  # exact scores (integer embeddings): exact ties
@pytest.mark.parametrize("sync_free", [False, True])
def test_two_tower_equals_dense_scores_with_the_mask(generator, mode, distance, sync_free):
    users, items, truth, seen, gains = two_tower(generator)
    keys = keys_for(5, mode)
    want = rc.evaluate_scores(dense_scores(users, items, distance), gains, keys,
                              mask=~dense_of(seen, *gains.shape), ties=mode, reduce="none")
    with sizing.force_sync_free(sync_free):
        for budget in (None, 2000):  # one chunk; chunks of a few users
            got = rc.evaluate_embeddings(users, None, keys, gallery=items, distance=distance, relevance=truth,
                                         exclude=seen, ties=mode, reduce="none", memory_budget=budget)
            assert_same(got, want, keys)


@pytest.mark.parametrize("mode", MODES)
def test_two_tower_graded_sparse_truth(generator, mode):
    users, items, _, seen, gains = two_tower(generator, graded=True)
    keys = keys_for(5, mode)
    want = rc.evaluate_scores(users.double() @ items.double().T, gains, keys, mask=~dense_of(seen, *gains.shape),
                              ties=mode, reduce="none")
    for truth in (gains.to_sparse(), gains.double().to_sparse_csr()):
        got = rc.evaluate_embeddings(users, None, keys, gallery=items, distance="dot", relevance=truth,
                                     exclude=dense_of(seen, *gains.shape).to_sparse_csr(), ties=mode, reduce="none",
                                     memory_budget=3000)
        assert_same(got, want, keys)


def test_two_tower_r_counts_the_truth_not_only_the_retrieved():
    """Item 3 is relevant and ranked last (past the cutoff): R = 2; item 0 is relevant but seen: not in R."""
    users = torch.tensor([[1.0, 0.0]])
    items = torch.tensor([[1.0, 0.0], [0.5, 0.0], [0.25, 0.0], [-1.0, 0.0]])
    truth = torch.tensor([[0, 0, 0], [0, 1, 3]])
    r = rc.evaluate_embeddings(users, None, ["recall@2", "precision@2", "ndcg@1"], gallery=items, distance="dot",
                               relevance=truth, exclude=torch.tensor([[0], [0]]))
    assert r["recall@2"].item() == 0.5 and r["precision@2"].item() == 0.5 and r["ndcg@1"].item() == 1.0


@pytest.mark.parametrize("dtype, scale", [(torch.float32, 2.0 ** 100), (torch.float32, 2.0 ** -120),
                                          (torch.float64, 2.0 ** 1000), (torch.float64, 2.0 ** -1000)])
def test_two_tower_adversarial(generator, dtype, scale):
    """Huge and tiny scales (powers of two: the same exact ties; products past the dtype's range
    without the engine's scaling), float64, a user with every item excluded, a user without
    truth, k past the items left."""
    users, items, truth, seen, gains = two_tower(generator, n_users=12, n_items=9)
    every = torch.stack([torch.zeros(9, dtype=torch.int64), torch.arange(9)])  # user 0 has seen everything
    seen = torch.cat([seen, every], 1)
    truth = truth[:, truth[0] != 1]  # user 1 has no test item
    gains = dense_of(truth, 12, 9)
    keys = ["ndcg@20", "recall@20", "precision@20", "map@r", "mrr", "hit_rate@20", "r_precision", "auroc"]
    u, v = (users.to(dtype) * scale), items.to(dtype)
    want = rc.evaluate_scores(users.double() @ items.double().T, gains, keys, mask=~dense_of(seen, 12, 9),
                              reduce="none")
    got = rc.evaluate_embeddings(u, None, keys, gallery=v, distance="dot", relevance=truth, exclude=seen,
                                 reduce="none")
    assert_same(got, want, keys)
    assert all(math.isnan(got[key][0].item()) and math.isnan(got[key][1].item()) for key in keys)
    nb = rc.evaluate_embeddings(u, None, ["ndcg@3"], gallery=v, distance="dot", relevance=truth, exclude=seen,
                                return_neighbours=9).neighbours[0]
    assert (nb[0] == -1).all()  # nothing left for user 0
    kept = ~dense_of(seen, 12, 9)
    for q in range(12):
        assert (nb[q] >= 0).sum().item() == kept[q].sum().item()
        assert kept[q, nb[q][nb[q] >= 0]].all()


@pytest.mark.parametrize("mode", MODES)
def test_labels_with_exclude_equal_the_mask(generator, mode):
    """exclude= with class labels (the self-gallery: its own row excluded too)."""
    x = torch.randint(-2, 3, (20, 3), generator=generator).float()
    labels = torch.randint(0, 3, (20,), generator=generator)
    seen = random_pairs(generator, 20, 20, 40)
    keys = keys_for(3, mode)
    mask = ~torch.eye(20, dtype=torch.bool) & ~dense_of(seen, 20, 20)
    want = rc.evaluate_scores(x.double() @ x.double().T, labels[:, None] == labels[None], keys, mask=mask, ties=mode,
                              reduce="none")
    got = rc.evaluate_embeddings(x, labels, keys, distance="dot", exclude=seen, ties=mode, reduce="none")
    assert_same(got, want, keys)


def test_two_tower_bad_inputs(generator):
    users, items, truth, seen, _ = two_tower(generator, n_users=4, n_items=5)

    def run(**kw):
        args = dict(gallery=items, distance="dot", relevance=truth)
        args.update(kw)
        labels = args.pop("query_labels", None)
        return rc.evaluate_embeddings(users, labels, ["ndcg@3"], **args)

    cases = [
        (dict(relevance=[[0], [1]]), TypeError, "relevance must be a callable"),
        (dict(relevance=torch.tensor([[0, 0], [1, 1]])), ValueError, r"relevance holds the pair \(user 0, item 1\) "
                                                                      "twice"),
        (dict(relevance=torch.tensor([[0], [5]])), ValueError, r"relevance holds item ids outside \[0, 5\)"),
        (dict(relevance=torch.tensor([[4], [0]])), ValueError, r"relevance holds user ids outside \[0, 4\)"),
        (dict(relevance=-torch.ones(4, 5).to_sparse()), ValueError, "relevance values must be finite and >= 0"),
        (dict(relevance=torch.full((4, 5), float("nan")).to_sparse()), ValueError, "finite and >= 0"),
        (dict(relevance=torch.ones(4, 5, dtype=torch.complex64).to_sparse()), TypeError, "real numbers"),
        (dict(relevance=torch.ones(4, 6).to_sparse()), ValueError, r"\[users, items\] = \[4, 5\]"),
        (dict(query_labels=torch.zeros(4)), ValueError, "pass query_labels as None"),
        (dict(gallery_ids=torch.arange(5)), ValueError, "pass gallery_ids as None"),
        (dict(gallery=None), ValueError, "relevance pairs need gallery="),
        (dict(per_class="macro"), ValueError, "per_class needs labels"),
        (dict(backend="faiss"), ValueError, "need backend='torch'"),
        (dict(exclude=torch.tensor([[0], [9]])), ValueError, r"exclude holds item ids outside \[0, 5\)"),
        (dict(exclude=torch.tensor([[0.5], [1.0]])), TypeError, "exclude must hold integer"),
    ]
    for kw, error, message in cases:
        with pytest.raises(error, match=message):
            run(**kw)
    with pytest.raises(ValueError, match="set-level keys"):
        rc.evaluate_embeddings(users, None, ["nmi"], gallery=items, relevance=truth)
    with pytest.raises(ValueError, match="need backend='torch'"):
        rc.evaluate_embeddings(users, torch.zeros(4, dtype=torch.int64), ["cmc@1"], gallery=items,
                               gallery_labels=torch.zeros(5, dtype=torch.int64), exclude=seen, backend="faiss")


def test_two_tower_with_gains_of_one_builds_no_dense_block(generator, monkeypatch):
    """ties="stable", pairs: the seen items go into the scores and the relevance is looked up at
    the ranked positions; no [c, I] gains nor mask is built (UserItems.dense is never called)."""
    from retrieval_core.inputs.pairs import UserItems
    users, items, truth, seen, gains = two_tower(generator)
    want = rc.evaluate_scores(users @ items.T, gains, ["ndcg@5", "map@r", "recall@3"],
                              mask=~dense_of(seen, *gains.shape), reduce="none")

    def refuse(*args, **kwargs):
        raise AssertionError("a dense [c, I] block was built")

    monkeypatch.setattr(UserItems, "dense", refuse)
    got = rc.evaluate_embeddings(users, None, ["ndcg@5", "map@r", "recall@3"], gallery=items, distance="dot",
                                 relevance=truth, exclude=seen, memory_budget=3000, reduce="none")
    assert_same(got, want, ["ndcg@5", "map@r", "recall@3"])
    with pytest.raises(AssertionError, match="dense"):
        rc.evaluate_embeddings(users, None, ["ndcg@5"], gallery=items, distance="dot", relevance=truth, exclude=seen,
                               ties="expected")


def test_numpy_exclude_and_relevance_pairs_are_read_as_tensors():
    """NumPy arrays are taken in every function (README), exclude= and relevance pairs too
    (they were a TypeError in evaluate_scores and evaluate_embeddings, not in evaluate_topk)."""
    g = torch.Generator().manual_seed(3)
    users, items = torch.randn(4, 3, generator=g), torch.randn(7, 3, generator=g)
    truth, seen = random_pairs(g, 4, 7, 6).unique(dim=1), random_pairs(g, 4, 7, 5)
    keys = ["ndcg@3", "recall@5", "mrr"]
    scores = users @ items.T
    target = torch.zeros(4, 7, dtype=torch.int64).index_put_(tuple(truth), torch.tensor(1))
    want = rc.evaluate_scores(scores, target, keys, exclude=seen, reduce="none")
    got = rc.evaluate_scores(scores.numpy(), target.numpy(), keys, exclude=seen.numpy(), reduce="none")
    want_two = rc.evaluate_embeddings(users, None, keys, gallery=items, distance="dot", relevance=truth,
                                      exclude=seen, reduce="none")
    got_two = rc.evaluate_embeddings(users, None, keys, gallery=items, distance="dot", relevance=truth.numpy(),
                                     exclude=seen.numpy(), reduce="none")
    for key in keys:
        assert torch.equal(got[key].nan_to_num(-1), want[key].nan_to_num(-1)), key
        assert torch.equal(got_two[key].nan_to_num(-1), want_two[key].nan_to_num(-1)), key
