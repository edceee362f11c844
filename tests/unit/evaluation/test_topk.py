"""evaluate_topk: top-k id lists with sparse truth (issue 30). The same values as
evaluate_scores on scores whose top k are the lists (a top-k list has no tied scores: its
order is the ranking, so there is no tie mode to check), padding as evaluate_ranked's mask,
the options of the other entry points, and each bad input's exception and message."""
from __future__ import annotations

import pytest
import torch

import retrieval_core as rc

U, I, K = 12, 20, 5
ACCURACY = ["precision@{k}", "recall@{k}", "f1@{k}", "ndcg@{k}", "ndcg@2", "ndcg_exp@{k}", "dcg@{k}", "mrr@{k}",
            "hit_rate@{k}", "map@{k}", "map_capped@{k}", "map_capped@2", "map_hits@{k}", "precision_capped@{k}",
            "err@{k}", "acg@{k}", "rbp@0.8", "wap@{k}"]


def _scores(seed: int, graded: bool):
    g = torch.Generator().manual_seed(seed)
    scores = torch.randperm(U * I, generator=g).reshape(U, I).double()  # distinct: no ties
    target = (torch.rand(U, I, generator=g) < 0.25).long()
    if graded:
        target = target * torch.randint(1, 4, (U, I), generator=g)
    target[3] = 0  # a user without truth
    return scores, target


@pytest.mark.parametrize("graded", [False, True])
@pytest.mark.parametrize("seed", [0, 1])
def test_equal_to_evaluate_scores_on_scores_with_the_same_top_k(seed, graded):
    scores, target = _scores(seed, graded)
    keys = [k.format(k=K) for k in ACCURACY]
    topk = scores.topk(K, dim=1).indices
    truth = target.to_sparse() if graded else target.nonzero().T
    ours = rc.evaluate_topk(topk, truth, keys, n_items=I, reduce="none")
    theirs = rc.evaluate_scores(scores, target, [k for k in keys if not k.startswith("rbp")], reduce="none")
    for key in theirs:
        assert torch.allclose(ours[key], theirs[key], rtol=1e-12, atol=0, equal_nan=True), key
    # rbp over the list: the list is all that is retrieved (rbp@p of the scores reads every rank)
    assert torch.allclose(ours["rbp@0.8"], rc.evaluate_ranked(
        target.gather(1, topk), ["rbp@0.8"], n_relevant=(target > 0).sum(1), ideal=target.double(),
        reduce="none")["rbp@0.8"], equal_nan=True)


def test_csr_truth_equals_coo_truth_and_pairs_equal_binary_gains():
    scores, target = _scores(2, graded=True)
    topk = scores.topk(K, dim=1).indices
    keys = ["ndcg@5", "map@3", "recall@4"]
    coo = rc.evaluate_topk(topk, target.to_sparse(), keys, reduce="none")
    csr = rc.evaluate_topk(topk, target.to_sparse_csr(), keys, reduce="none")
    assert all(torch.equal(coo[k].nan_to_num(-1), csr[k].nan_to_num(-1)) for k in keys)
    pairs = rc.evaluate_topk(topk, target.nonzero().T, keys, reduce="none")
    binary = rc.evaluate_topk(topk, (target > 0).to_sparse(), keys, reduce="none")
    assert all(torch.equal(pairs[k].nan_to_num(-1), binary[k].nan_to_num(-1)) for k in keys)


def test_r_counts_relevant_items_outside_the_list():
    """R comes from the truth, not from the list: recall@2 of 1 hit among 4 relevant items is 1/4."""
    r = rc.evaluate_topk(torch.tensor([[7, 1]]), torch.tensor([[0, 0, 0, 0], [1, 2, 3, 4]]),
                         ["recall@2", "map@2", "map_capped@2", "ndcg@2", "precision@2", "f1@2"])
    ideal = 1 + 1 / torch.log2(torch.tensor(3.0)).item()
    assert r["recall@2"].item() == 0.25 and r["precision@2"].item() == 0.5
    assert r["map@2"].item() == pytest.approx(0.5 / 4) and r["map_capped@2"].item() == pytest.approx(0.5 / 2)
    assert r["ndcg@2"].item() == pytest.approx((1 / torch.log2(torch.tensor(3.0)).item()) / ideal)
    assert r["f1@2"].item() == pytest.approx(2 * 1 / (2 + 4))


def test_padding_equals_a_masked_ranked_list():
    topk = torch.tensor([[4, 2, -1, -1], [0, 1, 2, 3], [-1, -1, -1, -1]])
    pairs = torch.tensor([[0, 0, 1, 2], [2, 9, 3, 5]])
    keys = ["precision@4", "recall@4", "ndcg@4", "mrr@4", "map@4", "map_capped@4", "ndcg", "map"]
    ours = rc.evaluate_topk(topk, pairs, keys, n_items=10, reduce="none")
    gains = torch.tensor([[0, 1, 0, 0], [0, 0, 0, 1], [0, 0, 0, 0]])
    theirs = rc.evaluate_ranked(gains, keys, n_relevant=torch.tensor([2, 1, 1]), mask=topk >= 0, reduce="none")
    for key in keys:
        assert torch.equal(ours[key], theirs[key]), key


def test_an_item_past_the_truths_ids_is_never_another_users_pair():
    """Without n_items the largest truth id scales the pair keys; a listed item past it
    (7 = 1 * 4 + 3 at scale 4) must not read user 1's item 3."""
    r = rc.evaluate_topk(torch.tensor([[7], [3]]), torch.tensor([[0, 1], [0, 3]]), ["hit_rate@1"], reduce="none")
    assert r["hit_rate@1"].tolist() == [0.0, 1.0]


def test_no_dense_users_by_items_tensor():
    """A catalogue of 10^15 items (a dense [U, I] could never be held): the accuracy keys run."""
    topk = torch.tensor([[10**15 - 1, 5], [3, 4]])
    truth = torch.tensor([[0, 1, 1], [10**15 - 1, 4, 8]])
    r = rc.evaluate_topk(topk, truth, ["recall@2", "mrr@2"], n_items=10**15)
    assert r["recall@2"].item() == pytest.approx(0.75) and r["mrr@2"].item() == pytest.approx(0.75)


def test_options_as_the_other_entry_points():
    scores, target = _scores(3, graded=False)
    topk, pairs = scores.topk(K, dim=1).indices, target.nonzero().T
    cats = ["a", "b"] * (U // 2)
    r = rc.evaluate_topk(topk, pairs, ["ndcg@5", "popularity@5"], item_popularity=torch.arange(I), categories=cats,
                         ci=0.9, n_resamples=50, keep_per_query=True)
    assert list(r)[:2] == ["ndcg@5", "popularity@5"] and "ndcg@5/a" in r and "popularity@5/b" in r
    assert set(r.ci) >= {"ndcg@5", "popularity@5"} and r.per_query["ndcg@5"].shape == (U,)
    assert r.n_empty["ndcg@5"].item() == 1 and r.n_empty["popularity@5"].item() == 0
    zero = rc.evaluate_topk(topk, pairs, ["ndcg@5"], empty="zero")["ndcg@5"]
    assert zero.item() == pytest.approx(r["ndcg@5"].item() * (U - 1) / U)
    with pytest.raises(ValueError, match="empty='error' forbids them"):
        rc.evaluate_topk(topk, pairs, ["ndcg@5"], empty="error")
    with pytest.raises(ValueError, match="ci_method='beta' needs metrics whose per-query values are 0 or 1"):
        rc.evaluate_topk(topk, pairs, ["popularity@5"], item_popularity=torch.arange(I), ci=0.9, ci_method="beta")


def test_numpy_inputs_are_read_as_tensors():
    np = pytest.importorskip("numpy")
    r = rc.evaluate_topk(np.array([[1, 0]]), np.array([[0], [0]]), ["mrr@2"])
    assert r["mrr@2"].item() == 0.5


BAD = [  # (topk, truth, keys, options, exception, message)
    ([[1, 2]], torch.tensor([[0], [1]]), ["mrr@2"], {}, TypeError, "topk must be a torch.Tensor"),
    (torch.tensor([[1.0, 2.0]]), torch.tensor([[0], [1]]), ["mrr@2"], {}, TypeError, "topk must hold integer ids"),
    (torch.tensor([1, 2]), torch.tensor([[0], [1]]), ["mrr@2"], {}, ValueError, r"topk must be \[users, k\]"),
    (torch.zeros(2, 0, dtype=torch.long), torch.tensor([[0], [1]]), ["mrr"], {}, ValueError, "at least one column"),
    (torch.tensor([[1, -2]]), torch.tensor([[0], [1]]), ["mrr@2"], {}, ValueError, "ids below -1"),
    (torch.tensor([[1, 9]]), torch.tensor([[0], [1]]), ["mrr@2"], {"n_items": 5}, ValueError,
     "item ids >= n_items = 5"),
    (torch.tensor([[1, -1, 2]]), torch.tensor([[0], [1]]), ["mrr@3"], {}, ValueError,
     "row 0 has an item after a -1"),
    (torch.tensor([[0, 1], [3, 3]]), torch.tensor([[0], [1]]), ["mrr@2"], {}, ValueError,
     "topk lists item 3 twice for user 1"),
    (torch.tensor([[1, 2]]), torch.tensor([[0, 0, 0]]), ["mrr@2"], {}, ValueError, r"truth must be \[2, E\]"),
    (torch.tensor([[1, 2]]), torch.tensor([[0.0], [1.0]]), ["mrr@2"], {}, TypeError,
     r"truth must hold integer \(user, item\) ids; got torch.float32"),
    (torch.tensor([[1, 2]]), torch.tensor([[1], [1]]), ["mrr@2"], {}, ValueError, r"user ids outside \[0, 1\)"),
    (torch.tensor([[1, 2]]), torch.tensor([[0], [-1]]), ["mrr@2"], {}, ValueError, "item ids outside"),
    (torch.tensor([[1, 2]]), torch.tensor([[0], [7]]), ["mrr@2"], {"n_items": 5}, ValueError,
     r"item ids outside \[0, 5\)"),
    (torch.tensor([[1, 2]]), torch.tensor([[0, 0], [1, 1]]), ["mrr@2"], {}, ValueError,
     r"truth holds the pair \(user 0, item 1\) twice; give each pair once"),
    (torch.tensor([[1, 0]]), torch.tensor([[-1.0, 2.0]]).to_sparse(), ["mrr@2"], {}, ValueError,
     "truth values must be finite and >= 0; got -1.0"),
    (torch.tensor([[1, 0]]), torch.tensor([[float("nan"), 2.0]]).to_sparse(), ["mrr@2"], {}, ValueError,
     "truth values must be finite and >= 0; got nan"),
    (torch.tensor([[1, 0]]), torch.tensor([[1e300, 2.0]], dtype=torch.float64).to_sparse(), ["ndcg@2"], {},
     ValueError, "truth gains must be at most 2\\^960"),
    (torch.tensor([[1, 0]]), torch.tensor([[1j, 2.0]]).to_sparse(), ["mrr@2"], {}, TypeError,
     "truth values must be real numbers"),
    (torch.tensor([[1, 2]]), torch.ones(2, 3).to_sparse(), ["mrr@2"], {}, ValueError,
     r"truth must be a sparse \[users, items\] = \[1, 3\] tensor; got shape \(2, 3\)"),
    (torch.tensor([[1, 2]]), torch.ones(1, 3).to_sparse(), ["mrr@2"], {"n_items": 4}, ValueError,
     r"truth must be a sparse \[users, items\] = \[1, 4\] tensor; got shape \(1, 3\)"),
    (torch.tensor([[1, 2]]), torch.ones(1, 3).to_sparse(), ["serendipity@2"],
     {"history": torch.ones(1, 4).to_sparse(), "item_categories": torch.zeros(3, dtype=torch.long)}, ValueError,
     r"history must be a sparse \[users, items\] = \[1, 3\] tensor; got shape \(1, 4\)"),
    (torch.tensor([[1, 2]]), torch.tensor([[0], [1]]), ["mrr@3"], {}, ValueError,
     "mrr@3 cuts at 3 but topk holds 2 items per user"),
    (torch.tensor([[1, 2]]), torch.tensor([[0], [1]]), ["auroc"], {}, ValueError,
     "auroc needs every candidate of the collection"),
    (torch.tensor([[1, 2]]), torch.tensor([[0], [1]]), ["erc:mrr@2"], {}, ValueError,
     "confidence keys need per-query confidences"),
    (torch.tensor([[1, 2]]), torch.tensor([[0], [1]]), ["nmi"], {}, ValueError, "use evaluate_embeddings"),
    (torch.tensor([[1, 2]]), torch.tensor([[0], [1]]), ["coverage@2"], {}, ValueError, "coverage@2 needs n_items="),
    (torch.tensor([[1, 2]]), torch.tensor([[0], [1]]), ["novelty@2"], {}, ValueError,
     "novelty@2 needs item_popularity="),
    (torch.tensor([[1, 2]]), torch.tensor([[0], [1]]), ["diversity@2"], {"n_items": 3}, ValueError,
     "diversity@2 needs item_categories or item_embeddings="),
    (torch.tensor([[1, 2]]), torch.tensor([[0], [1]]), ["popularity@2"], {"item_popularity": torch.ones(2)},
     ValueError, "item ids >= n_items = 2"),
    (torch.tensor([[1, 2]]), torch.tensor([[0], [1]]), ["popularity@2"],
     {"n_items": 3, "item_popularity": -torch.ones(3)}, ValueError, "item_popularity must be finite and >= 0"),
    (torch.tensor([[1, 2]]), torch.tensor([[0], [1]]), ["popularity@2"],
     {"n_items": 3, "item_popularity": torch.ones(4)}, ValueError, r"one value per item \[3\]"),
    (torch.tensor([[1, 2]]), torch.tensor([[0], [1]]), ["diversity@2"],
     {"n_items": 3, "item_categories": torch.ones(3)}, TypeError, "item_categories must hold integer ids"),
    (torch.tensor([[1, 2]]), torch.tensor([[0], [1]]), ["diversity@2"],
     {"n_items": 3, "item_embeddings": torch.ones(3, 2, dtype=torch.long)}, ValueError,
     "item_embeddings must be a floating point tensor"),
    (torch.tensor([[1, 2]]), torch.tensor([[0], [1]]), ["mrr@2"], {"n_items": 0}, ValueError,
     "n_items must be a positive int"),
    (torch.tensor([[1, 2]]), torch.tensor([[0], [1]]), ["mrr@2"], {"reduce": "sum"}, ValueError, "reduce must be"),
]


@pytest.mark.parametrize("case", range(len(BAD)))
def test_bad_inputs_raise_with_their_message(case):
    topk, truth, keys, options, error, message = BAD[case]
    with pytest.raises(error, match=message):
        rc.evaluate_topk(topk, truth, keys, **options)


def test_beyond_accuracy_keys_are_refused_by_the_other_entry_points():
    with pytest.raises(ValueError, match="coverage@3: beyond-accuracy metrics read the recommended items' ids; "
                                         "use evaluate_topk"):
        rc.evaluate_scores(torch.rand(2, 4), torch.ones(2, 4), ["coverage@3"])
    with pytest.raises(ValueError, match="popularity@3: beyond-accuracy metrics .* use evaluate_topk"):
        rc.evaluate_ranked(torch.ones(2, 4), ["popularity@3"])
    with pytest.raises(ValueError, match="diversity@3: beyond-accuracy metrics .* use evaluate_topk"):
        rc.evaluate_embeddings(torch.randn(6, 3), torch.tensor([0, 0, 1, 1, 2, 2]), ["diversity@3"])
