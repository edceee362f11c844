"""evaluate_topk against torch_geometric's LinkPred* metrics (torch-geometric 2.8.1) on
random top-k lists and truth pairs, for every key both compute, to 1e-6.

What PyG does, read from torch_geometric/metrics/link_pred.py: the accuracy metrics
average over the users with a ground-truth item (ours: empty="skip"); precision divides
by k, F1 is 2PR/(P+R) (= 2 hits / (k + R)), MAP divides by min(R, k) (our map_capped@k),
NDCG's ideal is min(R, k) ones (weighted: the k largest weights), MRR and hit ratio are
ours; the beyond-accuracy metrics average over every user. PyG reads no -1 padding (an
index of -1 is its last item), so full lists are compared; our padding is tested apart."""
from __future__ import annotations

import pytest
import torch

import retrieval_core as rc

M = pytest.importorskip("torch_geometric.metrics")

U, I, K = 40, 30, 6


def _data(seed: int):
    g = torch.Generator().manual_seed(seed)
    topk = torch.stack([torch.randperm(I, generator=g)[:K] for _ in range(U)])
    pairs = (torch.rand(U, I, generator=g) < 0.15).nonzero().T  # test data only: the reference's own form
    return topk, pairs[:, pairs[0] % 5 != 0]  # every fifth user without truth


PAIRS = [  # (our key, PyG's class and its arguments)
    ("precision@{k}", lambda k: M.LinkPredPrecision(k)),
    ("recall@{k}", lambda k: M.LinkPredRecall(k)),
    ("f1@{k}", lambda k: M.LinkPredF1(k)),
    ("map_capped@{k}", lambda k: M.LinkPredMAP(k)),
    ("ndcg@{k}", lambda k: M.LinkPredNDCG(k)),
    ("mrr@{k}", lambda k: M.LinkPredMRR(k)),
    ("hit_rate@{k}", lambda k: M.LinkPredHitRatio(k)),
]


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("k", [1, 3, K])
def test_accuracy_keys_equal_link_pred(seed, k):
    topk, pairs = _data(seed)
    ours = rc.evaluate_topk(topk, pairs, [key.format(k=k) for key, _ in PAIRS], n_items=I)
    for key, make in PAIRS:
        metric = make(k)
        metric.update(topk, pairs)
        assert ours[key.format(k=k)].item() == pytest.approx(metric.compute().item(), abs=1e-6), key


@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("k", [2, K])
def test_graded_ndcg_equals_weighted_link_pred_ndcg(seed, k):
    topk, pairs = _data(seed)
    g = torch.Generator().manual_seed(10 + seed)
    weights = torch.randint(1, 5, (pairs.shape[1],), generator=g).to(torch.float32)
    truth = torch.sparse_coo_tensor(pairs, weights.double(), (U, I), check_invariants=True)
    metric = M.LinkPredNDCG(k, weighted=True)
    metric.update(topk, pairs, weights)
    assert rc.evaluate_topk(topk, truth, [f"ndcg@{k}"])[f"ndcg@{k}"].item() == pytest.approx(
        metric.compute().item(), abs=1e-6)


@pytest.mark.parametrize("seed", [0, 3])
@pytest.mark.parametrize("k", [2, K])
def test_beyond_accuracy_keys_equal_link_pred(seed, k):
    topk, pairs = _data(seed)
    g = torch.Generator().manual_seed(20 + seed)
    popularity = torch.randint(0, 50, (I,), generator=g)
    category = torch.randint(0, 4, (I,), generator=g)
    ours = rc.evaluate_topk(topk, pairs, [f"coverage@{k}", f"popularity@{k}", f"diversity@{k}",
                                          f"personalization@{k}"], n_items=I, item_popularity=popularity,
                            item_categories=category)
    theirs = {f"coverage@{k}": M.LinkPredCoverage(k, I), f"popularity@{k}": M.LinkPredAveragePopularity(k, popularity),
              f"diversity@{k}": M.LinkPredDiversity(k, category),
              f"personalization@{k}": M.LinkPredPersonalization(k, max_src_nodes=None)}
    for key, metric in theirs.items():
        metric.update(topk, pairs)
        # PyG sums in float32: popularity (a count, ~25) agrees to 1e-6 relative
        assert ours[key].item() == pytest.approx(metric.compute().item(), rel=1e-6, abs=1e-6), key


def test_users_without_truth_are_skipped_as_link_pred_skips_them():
    """PyG's mean divides by the users with truth; ours skips the others (n_empty), and
    empty="zero" counts them as 0 (a difference on purpose: the same sum, another count)."""
    topk, pairs = _data(0)
    with_truth = int((torch.bincount(pairs[0], minlength=U) > 0).sum())
    assert with_truth < U
    metric = M.LinkPredRecall(3)
    metric.update(topk, pairs)
    ours = rc.evaluate_topk(topk, pairs, ["recall@3"])
    assert ours.n_empty["recall@3"].item() == U - with_truth
    assert ours["recall@3"].item() == pytest.approx(metric.compute().item(), abs=1e-6)
    zero = rc.evaluate_topk(topk, pairs, ["recall@3"], empty="zero")["recall@3"].item()
    assert zero == pytest.approx(metric.compute().item() * with_truth / U, abs=1e-6)


def test_map_differs_from_link_pred_map_by_its_divisor():
    """Our map@k divides by R (trec_eval's map_cut), LinkPredMAP by min(R, k): map_capped@k is PyG's."""
    topk, pairs = torch.tensor([[0, 1]]), torch.tensor([[0, 0, 0], [0, 1, 2]])  # R = 3 > k = 2
    metric = M.LinkPredMAP(2)
    metric.update(topk, pairs)
    r = rc.evaluate_topk(topk, pairs, ["map@2", "map_capped@2"])
    assert metric.compute().item() == pytest.approx(1.0) == r["map_capped@2"].item()
    assert r["map@2"].item() == pytest.approx(2 / 3)
