"""evaluate_topk / evaluate_scores against Microsoft Recommenders' own code
(``recommenders.evaluation.python_evaluation``, 1.2.1) on random data and hand cases.

Recommenders is loaded from a folder of its own (tests/anchors/recommenders/rec_env.py;
run by tests/anchors/suites/run_recommenders.py); skipped, with the reason, where it does
not load. Its lists: rows (user, item, prediction), the prediction -rank, so that its
``relevancy_method="top_k"`` sort keeps our order; its train_df is our ``history=`` and
its item counts our ``item_popularity``. Agreement to 1e-12 (float64 both).

What it does, read from its source, and how ours relates (each checked below):
precision / recall / map / map_at_k average over the users with truth AND a
recommendation (a user with truth but an empty list is left out; ours counts 0);
ndcg_at_k averages over every user with truth (an empty list counts 0, as ours); map is
our map@k, map_at_k our map_capped@k; novelty averages over every recommended slot (ours
per user, then over users: equal for lists of one length); catalog_coverage divides by
the items seen in training (ours by ``n_items``)."""
from __future__ import annotations

import math

import pytest
import torch

import retrieval_core as rc
from tests.anchors.recommenders.rec_env import load_recommenders

pe, _why = load_recommenders()
if pe is None:
    pytest.skip(_why, allow_module_level=True)
import pandas as pd  # noqa: E402  (the pandas Recommenders loaded: 2.x)

pytestmark = pytest.mark.filterwarnings("ignore::FutureWarning")  # pandas 2.3 warning of its 3.0 changes
U, I, K = 30, 24, 6
TOL = 1e-12


def _data(seed: int, short: bool = True, all_seen: bool = True):
    """History (every item seen at least once when ``all_seen``, else items 0-3 never), lists
    of unseen items (some short or empty when ``short``), graded truth among unseen items
    (every fifth user without)."""
    g = torch.Generator().manual_seed(seed)
    seen = torch.rand(U, I, generator=g) < 0.2
    seen[torch.randint(0, U, (I,), generator=g), torch.arange(I)] = True
    if not all_seen:
        seen[:, :4] = False
    seen[3] = False  # a user without history
    topk = torch.full((U, K), -1)
    for u in range(U):
        unseen = (~seen[u]).nonzero().squeeze(1)
        order = unseen[torch.randperm(unseen.numel(), generator=g)][:K]
        length = int(torch.randint(0, K + 1, (), generator=g)) if short and u % 3 == 0 else K
        topk[u, :min(length, order.numel())] = order[:length]
    gains = torch.randint(1, 6, (U, I), generator=g).double() * ((torch.rand(U, I, generator=g) < 0.25) & ~seen)
    gains[::5] = 0
    return seen, topk, gains


def _frames(seen, topk, gains, k=K):
    listed = [(u, int(i), -r) for u in range(U) for r, i in enumerate(topk[u, :k].tolist()) if i >= 0]
    reco = pd.DataFrame(listed, columns=["userID", "itemID", "prediction"])
    truth = pd.DataFrame([(u, i, float(gains[u, i])) for u, i in gains.nonzero().tolist()],
                         columns=["userID", "itemID", "rating"])
    train = pd.DataFrame(seen.nonzero().tolist(), columns=["userID", "itemID"])
    return train, reco, truth


def _mean_over(values: torch.Tensor, users: torch.Tensor) -> float:
    return values[users].mean().item()


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("k", [1, 3, K])
def test_accuracy_functions(seed, k):
    seen, topk, gains = _data(seed)
    train, reco, truth = _frames(seen, topk, gains)
    ours = rc.evaluate_topk(topk, gains.to_sparse(), [f"precision@{k}", f"recall@{k}", f"map@{k}", f"map_capped@{k}",
                                                      f"ndcg@{k}", f"ndcg_exp@{k}"], reduce="none")
    binary = rc.evaluate_topk(topk, gains.nonzero().T, [f"ndcg@{k}"])
    common = (gains > 0).any(1) & (topk[:, 0] >= 0)  # Recommenders' users: truth and a recommendation
    args = dict(rating_true=truth, rating_pred=reco, k=k)
    assert pe.precision_at_k(**args) == pytest.approx(_mean_over(ours[f"precision@{k}"], common), abs=TOL)
    assert pe.recall_at_k(**args) == pytest.approx(_mean_over(ours[f"recall@{k}"], common), abs=TOL)
    assert pe.map(**args) == pytest.approx(_mean_over(ours[f"map@{k}"], common), abs=TOL)
    assert pe.map_at_k(**args) == pytest.approx(_mean_over(ours[f"map_capped@{k}"], common), abs=TOL)
    with_truth = (gains > 0).any(1)  # nDCG: every user with truth (an empty list is 0), ours under "skip"
    for discount in ("loge", "log2"):  # the base cancels in DCG / ideal DCG
        assert pe.ndcg_at_k(**args, discfun_type=discount) == pytest.approx(binary[f"ndcg@{k}"].item(), abs=TOL)
    assert pe.ndcg_at_k(**args, score_type="raw") == pytest.approx(_mean_over(ours[f"ndcg@{k}"], with_truth), abs=TOL)
    assert pe.ndcg_at_k(**args, score_type="exp") == pytest.approx(_mean_over(ours[f"ndcg_exp@{k}"], with_truth),
                                                                   abs=TOL)


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("k", [1, 3, K])
def test_r_precision_over_the_users_with_a_hit_in_their_first_r(seed, k):
    """r_precision_at_k is hits in the first min(R, k) ranks / R, ours ``r_precision`` of the
    lists cut at k; its mean divides per-user counts by a per-user Series, so a user without
    a hit in its first R ranks has no count (NaN, dropped by mean()): it averages over the
    users with such a hit (ours > 0)."""
    seen, topk, gains = _data(seed)
    _, reco, truth = _frames(seen, topk, gains)
    ours = rc.evaluate_topk(topk[:, :k], gains.nonzero().T, ["r_precision"], reduce="none")["r_precision"]
    hit = ours > 0
    assert pe.r_precision_at_k(truth, reco, k=k) == pytest.approx(ours[hit].mean().item(), abs=TOL)


def test_r_precision_leaves_out_a_user_without_a_hit_in_its_first_r():
    """Difference (docs/metrics.md): user 1 (R = 1, its hit at rank 2) scores 0 here and is
    left out by Recommenders, whose docstring defines the metric per user as precision@R."""
    topk = torch.tensor([[0, 1, 2], [0, 1, -1], [3, 4, -1]])
    truth = torch.tensor([[0, 0, 1, 2, 2, 2], [0, 2, 1, 3, 4, 5]])
    reco = pd.DataFrame([(u, i, -r) for u, row in enumerate(topk.tolist()) for r, i in enumerate(row) if i >= 0],
                        columns=["userID", "itemID", "prediction"])
    rating = pd.DataFrame({"userID": truth[0].tolist(), "itemID": truth[1].tolist(), "rating": 1.0})
    ours = rc.evaluate_topk(topk, truth, ["r_precision"], reduce="none")["r_precision"]
    assert ours.tolist() == pytest.approx([1 / 2, 0, 2 / 3])
    assert pe.r_precision_at_k(rating, reco, k=3) == pytest.approx((1 / 2 + 2 / 3) / 2)


def test_a_user_with_truth_and_no_recommendation_is_left_out_of_precision_recall_map():
    """Difference on purpose (docs/metrics.md): Recommenders averages precision, recall and
    MAP over the users present in both frames; ours counts a user with truth and an empty
    list as 0 (its list found nothing), as its own nDCG does."""
    topk = torch.tensor([[0, 1], [-1, -1]])
    truth = torch.tensor([[0, 1], [0, 0]])  # user 0: item 0, user 1: item 0
    frames = dict(rating_true=pd.DataFrame({"userID": [0, 1], "itemID": [0, 0], "rating": [1.0, 1.0]}),
                  rating_pred=pd.DataFrame({"userID": [0, 0], "itemID": [0, 1], "prediction": [2.0, 1.0]}), k=2)
    ours = rc.evaluate_topk(topk, truth, ["precision@2", "recall@2", "ndcg@2"])
    assert (pe.precision_at_k(**frames), pe.recall_at_k(**frames)) == (0.5, 1.0)
    assert (ours["precision@2"].item(), ours["recall@2"].item()) == (0.25, 0.5)
    assert pe.ndcg_at_k(**frames) == ours["ndcg@2"].item() == 0.5


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("k", [2, 5])
def test_ranking_of_tied_scores_equals_stable_ties(seed, k):
    """Recommenders sorts the prediction frame by (user, prediction descending) with a
    stable sort: rows in item order rank tied items by lower id, ours under ties="stable"."""
    g = torch.Generator().manual_seed(seed)
    scores = torch.randint(0, 3, (U, I), generator=g).double()
    target = (torch.rand(U, I, generator=g) < 0.2) & (torch.arange(U) % 4 != 0).unsqueeze(1)
    reco = pd.DataFrame({"userID": torch.arange(U).repeat_interleave(I).tolist(), "itemID": list(range(I)) * U,
                         "prediction": scores.flatten().tolist()})
    truth = pd.DataFrame(target.nonzero().tolist(), columns=["userID", "itemID"]).assign(rating=1.0)
    keys = [f"precision@{k}", f"recall@{k}", f"map@{k}", f"map_capped@{k}", f"ndcg@{k}"]
    ours = rc.evaluate_scores(scores, target, keys, ties="stable")
    args = dict(rating_true=truth, rating_pred=reco, k=k)
    for key, theirs in zip(keys, (pe.precision_at_k, pe.recall_at_k, pe.map, pe.map_at_k, pe.ndcg_at_k)):
        assert theirs(**args) == pytest.approx(ours[key].item(), abs=TOL), key


def _features(vectors: torch.Tensor):
    return pd.DataFrame({"itemID": list(range(vectors.shape[0])), "features": list(vectors.numpy())})


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("k", [1, 3, K])
def test_set_level_functions(seed, k):
    seen, topk, gains = _data(seed)
    train, reco, _ = _frames(seen, topk, gains, k)
    ours = rc.evaluate_topk(topk, gains.nonzero().T, [f"coverage@{k}", f"entropy@{k}"], n_items=I)
    assert train["itemID"].nunique() == I  # every item seen: its denominator is ours
    assert pe.catalog_coverage(train, reco) == pytest.approx(ours[f"coverage@{k}"].item(), abs=TOL)
    assert pe.distributional_coverage(train, reco) == pytest.approx(ours[f"entropy@{k}"].item(), abs=TOL)


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("k", [1, 3, K])
def test_novelty(seed, k):
    """Theirs averages over every recommended slot, ours per user then over users: ours
    weighted by list lengths is theirs, and with lists of one length the two are equal."""
    for short in (True, False):
        seen, topk, gains = _data(seed, short)
        train, reco, _ = _frames(seen, topk, gains, k)
        ours = rc.evaluate_topk(topk, gains.nonzero().T, [f"novelty@{k}"], item_popularity=seen.sum(0),
                                reduce="none")[f"novelty@{k}"]
        lengths = (topk[:, :k] >= 0).sum(1)
        listed = lengths > 0
        weighted = (ours[listed] * lengths[listed]).sum() / lengths.sum()
        assert pe.novelty(train, reco) == pytest.approx(weighted.item(), abs=TOL)
        if not short:
            assert pe.novelty(train, reco) == pytest.approx(ours.mean().item(), abs=TOL)


@pytest.mark.parametrize("seed", range(2))
def test_historical_item_novelty_is_novelty_of_a_one_item_list(seed):
    seen, topk, gains = _data(seed, short=False)
    train, reco, _ = _frames(seen, topk, gains)
    per_item = pe.historical_item_novelty(train, reco)
    items = torch.tensor(per_item["itemID"].tolist()).unsqueeze(1)
    ours = rc.evaluate_topk(items, torch.tensor([[0], [0]]), ["novelty@1"], item_popularity=seen.sum(0),
                            reduce="none")["novelty@1"]
    assert torch.allclose(ours, torch.tensor(per_item["item_novelty"].tolist(), dtype=torch.float64), rtol=0,
                          atol=TOL)


def test_novelty_of_an_item_never_seen_in_training():
    """Difference on purpose (docs/metrics.md): Recommenders' novelty joins the recommended
    items with the trained ones, so an item never seen adds 0 (not -log2 0 = inf) but still
    counts as a recommendation; ours refuses it (infinite self-information)."""
    train = pd.DataFrame({"userID": [0, 1], "itemID": [0, 1]})
    reco = pd.DataFrame({"userID": [2, 2], "itemID": [0, 2]})
    assert pe.novelty(train, reco) == pytest.approx((1.0 + 0.0) / 2)
    with pytest.raises(ValueError, match="novelty@2: item 2 has popularity 0"):
        rc.evaluate_topk(torch.tensor([[0, 2]]), torch.tensor([[0], [0]]), ["novelty@2"],
                         item_popularity=torch.tensor([1, 1, 0]))


def _similarities(seen: torch.Tensor, seed: int):
    """(Recommenders' arguments, ours) for each item similarity: its default, item
    co-occurrence in training (ours: the items' columns of the training matrix as
    embeddings), feature vectors (ours: the same vectors), and one-hot category vectors
    (ours: the categories)."""
    g = torch.Generator().manual_seed(100 + seed)
    vectors = torch.randn(I, 5, generator=g, dtype=torch.float64)
    category = torch.randint(0, 4, (I,), generator=g)
    one_hot = torch.nn.functional.one_hot(category, 4).double()
    return [({}, dict(item_embeddings=seen.T.double())),
            (dict(item_feature_df=_features(vectors), item_sim_measure="item_feature_vector"),
             dict(item_embeddings=vectors)),
            (dict(item_feature_df=_features(one_hot), item_sim_measure="item_feature_vector"),
             dict(item_categories=category))]


def _per_user(frame: pd.DataFrame, column: str) -> torch.Tensor:
    values = torch.full((U,), float("nan"), dtype=torch.float64)
    users = torch.tensor(frame["userID"].tolist(), dtype=torch.long)
    values[users] = torch.tensor(frame[column].tolist(), dtype=torch.float64)
    return values


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("k", [1, 3, K])
@pytest.mark.parametrize("all_seen", [True, False])
def test_diversity_and_serendipity_per_user(seed, k, all_seen):
    """user_diversity leaves out users with fewer than 2 items (ours: NaN, skipped),
    user_serendipity users without history (ours: empty). An item never seen in training
    co-occurs with none (similarity 0 there, a zero column here: cosine 0)."""
    seen, topk, gains = _data(seed, all_seen=all_seen)
    train, reco, _ = _frames(seen, topk, gains, k)
    history = seen.nonzero().T
    for theirs, data in _similarities(seen, seed):
        ours = rc.evaluate_topk(topk, gains.nonzero().T, [f"diversity@{k}", f"serendipity@{k}"], history=history,
                                reduce="none", **data)
        diversity = _per_user(pe.user_diversity(train, reco, **theirs), "user_diversity")
        serendipity = _per_user(pe.user_serendipity(train, reco, **theirs), "user_serendipity")
        assert torch.allclose(ours[f"diversity@{k}"], diversity, rtol=0, atol=TOL, equal_nan=True), theirs
        assert torch.allclose(ours[f"serendipity@{k}"], serendipity, rtol=0, atol=TOL, equal_nan=True), theirs
        means = rc.evaluate_topk(topk, gains.nonzero().T, [f"diversity@{k}", f"serendipity@{k}"], history=history,
                                 **data)
        if not diversity.isnan().all():
            assert pe.diversity(train, reco, **theirs) == pytest.approx(means[f"diversity@{k}"].item(), abs=TOL)
        assert pe.serendipity(train, reco, **theirs) == pytest.approx(means[f"serendipity@{k}"].item(), abs=TOL)


def test_hand_case():
    """Three users, items 0-3, every item seen in training: the values written out."""
    train = pd.DataFrame({"userID": [0, 0, 1, 1, 2], "itemID": [0, 1, 1, 2, 3]})
    reco = pd.DataFrame({"userID": [0, 0, 1, 1, 2, 2], "itemID": [2, 3, 0, 3, 0, 1]})
    topk = torch.tensor([[2, 3], [0, 3], [0, 1]])
    history = torch.tensor([[0, 0, 1, 1, 2], [0, 1, 1, 2, 3]])
    columns = torch.tensor([[1, 0, 0], [1, 1, 0], [0, 1, 0], [0, 0, 1]], dtype=torch.float64)  # item x user
    ours = rc.evaluate_topk(topk, torch.tensor([[0], [2]]), ["coverage@2", "entropy@2", "novelty@2",
                                                            "diversity@2", "serendipity@2"], n_items=4,
                            item_popularity=torch.tensor([1, 2, 1, 1]), item_embeddings=columns, history=history)
    # exposure 2, 1, 1, 2 of 6 slots; training shares 1/5, 2/5, 1/5, 1/5
    entropy = -2 * (2 / 6 * math.log2(2 / 6)) - 2 * (1 / 6 * math.log2(1 / 6))
    novelty = (5 * math.log2(5) + math.log2(5 / 2)) / 6
    # co-occurrence cosines: (0, 1) 1/sqrt 2, (1, 2) 1/sqrt 2, item 3 with none; lists' pairs (2, 3), (0, 3), (0, 1)
    diversity = (1 + 1 + (1 - 2 ** -0.5)) / 3
    # user 0 (history 0, 1): items 2 (sims 0, 1/sqrt 2) and 3 (0, 0); user 1 (history 1, 2): 0 (1/sqrt 2, 0), 3 (0, 0);
    # user 2 (history 3): 0 and 1, both 0
    serendipity = ((1 - 2 ** -0.5 / 2 + 1) / 2 * 2 + 1) / 3
    expected = {"coverage@2": 1.0, "entropy@2": entropy, "novelty@2": novelty, "diversity@2": diversity,
                "serendipity@2": serendipity}
    theirs = {"coverage@2": pe.catalog_coverage(train, reco), "entropy@2": pe.distributional_coverage(train, reco),
              "novelty@2": pe.novelty(train, reco), "diversity@2": pe.diversity(train, reco),
              "serendipity@2": pe.serendipity(train, reco)}
    for key, value in expected.items():
        assert theirs[key] == pytest.approx(value, abs=TOL), key
        assert ours[key].item() == pytest.approx(value, abs=TOL), key
