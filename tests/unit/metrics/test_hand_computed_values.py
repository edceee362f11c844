"""Hand-computed values for every key, ties included; on CPU and on CUDA (``device``
fixture: off CPU each value is also checked against CPU's)."""
import math

import pytest
import torch

import retrieval_core as rc
from tests.devices import on_device

L3 = math.log2(3)  # discount of rank 2
L5 = math.log2(5)  # discount of rank 4

# One query, ranked gains [0, 2, 0, 1, 0] (scores decreasing), R = 2, 5 candidates.
PREDS = torch.tensor([[0.9, 0.8, 0.7, 0.6, 0.5]])
TARGET = torch.tensor([[0, 2, 0, 1, 0]])

EXPECTED = {
    "hit_rate@1": 0.0,
    "hit_rate@2": 1.0,
    "cmc@2": 1.0,
    "precision@2": 1 / 2,
    "precision@10": 2 / 10,
    "precision_adaptive@10": 2 / 5,
    "precision_capped@1": 0.0,
    "precision_capped@4": 2 / 2,
    "recall@2": 1 / 2,
    "recall@4": 1.0,
    "f1@2": 2 * 0.5 * 0.5 / (0.5 + 0.5),
    "f1@4": 2 * 0.5 * 1.0 / 1.5,
    "map@2": (1 / 2) / 2,
    "map@5": (1 / 2 + 2 / 4) / 2,
    "map": (1 / 2 + 2 / 4) / 2,
    "map@r": (1 / 2) / 2,
    "map_hits@2": (1 / 2) / 1,
    "map_hits@5": (1 / 2 + 2 / 4) / 2,
    "r_precision": 1 / 2,
    "precision@r": 1 / 2,
    "mrr@1": 0.0,
    "mrr@2": 1 / 2,
    "mrr": 1 / 2,
    "dcg@3": 2 / L3,
    "dcg": 2 / L3 + 1 / L5,
    "dcg_exp@3": 3 / L3,
    "ndcg@3": (2 / L3) / (2 + 1 / L3),
    "ndcg": (2 / L3 + 1 / L5) / (2 + 1 / L3),
    "ndcg_exp@3": (3 / L3) / (3 + 1 / L3),
    "fall_out@2": 1 / 3,
    "fall_out@5": 3 / 3,
    "acg@4": (2 + 1) / 4,
    "wap@4": ((2 / 2) + (3 / 4)) / 2,
    "auroc": (2 + 1) / (2 * 3),  # relevant at 2 beats 2 negatives, at 4 beats 1
}


@pytest.mark.parametrize("key", sorted(EXPECTED))
def test_toy_value(device, key):
    got = on_device(device, rc.evaluate_scores, PREDS, TARGET, [key])[key]
    assert got.dtype == torch.float64
    assert got.item() == pytest.approx(EXPECTED[key], abs=1e-12)


def test_all_keys_together_match_one_by_one(device):
    together = on_device(device, rc.evaluate_scores, PREDS, TARGET, sorted(EXPECTED))
    for key, value in EXPECTED.items():
        assert together[key].item() == pytest.approx(value, abs=1e-12)


def test_flat_form_gives_the_same_toy_values(device):
    flat = on_device(device, rc.evaluate_scores, PREDS[0], TARGET[0], sorted(EXPECTED),
                     indexes=torch.zeros(5, dtype=torch.long))
    for key, value in EXPECTED.items():
        assert flat[key].item() == pytest.approx(value, abs=1e-12)


# --- ties: higher score first, then the lower column ------------------------------------

def test_stable_ties_go_by_column_inside_the_top_k(device):
    preds = torch.tensor([[0.5, 0.5, 0.5, 0.1]])
    target = torch.tensor([[0, 0, 1, 0]])
    r = on_device(device, rc.evaluate_scores, preds, target, ["mrr", "hit_rate@2", "hit_rate@3", "precision@3"])
    assert r["mrr"].item() == pytest.approx(1 / 3)
    assert r["hit_rate@2"].item() == 0.0
    assert r["hit_rate@3"].item() == 1.0


def test_stable_ties_across_the_cut_take_the_lower_columns(device):
    # Four candidates tie at 0.5; only columns 0 and 1 (the lowest) enter a top 3 after column 5.
    preds = torch.tensor([[0.5, 0.5, 0.5, 0.5, 0.1, 0.9]])
    for relevant_col, hit in [(0, 1.0), (1, 1.0), (2, 0.0), (3, 0.0)]:
        target = torch.zeros(1, 6, dtype=torch.long)
        target[0, relevant_col] = 1
        assert on_device(device, rc.evaluate_scores, preds, target, ["hit_rate@3"])["hit_rate@3"].item() == hit


def test_ties_in_many_rows_match_a_full_stable_sort(device):
    g = torch.Generator().manual_seed(1)
    preds = torch.randint(0, 3, (300, 40), generator=g).float()  # heavy ties
    target = torch.randint(0, 3, (300, 40), generator=g)
    order = torch.sort(preds, dim=1, descending=True, stable=True).indices
    ranked = rc.Ranking.from_relevance(target.gather(1, order).double())
    for key in ["ndcg@5", "map@7", "mrr@3", "precision@5", "auroc", "wap@6"]:
        want = rc.parse_metrics([key])[0](ranked)
        got = on_device(device, rc.evaluate_scores, preds, target, [key], reduce="none", empty="zero")[key]
        want = want.masked_fill(rc.parse_metrics([key])[0].spec.empty(ranked), 0.0)
        torch.testing.assert_close(got, want)


def test_flat_ties_go_by_position_of_appearance(device):
    # query 3's entries appear interleaved with query 1's; equal scores rank by appearance
    indexes = torch.tensor([3, 1, 3, 1, 3])
    preds = torch.tensor([0.5, 0.2, 0.5, 0.9, 0.5])
    target = torch.tensor([0, 1, 1, 0, 0])
    r = on_device(device, rc.evaluate_scores, preds, target, ["mrr"], indexes=indexes, reduce="none")
    assert r["mrr"].tolist() == [pytest.approx(1 / 2), pytest.approx(1 / 2)]  # query 1, query 3


# --- empty queries -------------------------------------------------------------------

def scores_on(device):
    """evaluate_scores on ``device`` (checked against CPU off CPU); results on CPU."""
    return lambda *args, **kwargs: on_device(device, rc.evaluate_scores, *args, **kwargs)


def test_empty_policies(device):
    ev = scores_on(device)
    preds = torch.tensor([[0.9, 0.1], [0.9, 0.1]])
    target = torch.tensor([[1, 0], [0, 0]])
    assert ev(preds, target, ["ndcg@2"])["ndcg@2"].item() == 1.0
    assert ev(preds, target, ["ndcg@2"], empty="zero")["ndcg@2"].item() == 0.5
    assert ev(preds, target, ["ndcg@2"], empty="one")["ndcg@2"].item() == 1.0
    with pytest.raises(ValueError, match=r"ndcg@2: 1.*empty='error'"):
        ev(preds, target, ["ndcg@2"], empty="error")
    r = ev(preds, target, ["ndcg@2"])
    assert r.n_empty["ndcg@2"].item() == 1 and r.n_queries.item() == 2
    none = ev(preds, target, ["ndcg@2"], reduce="none")["ndcg@2"]
    assert none[0].item() == 1.0 and math.isnan(none[1].item())


def test_all_queries_empty_gives_nan_not_a_number_made_up(device):
    r = scores_on(device)(torch.rand(3, 4), torch.zeros(3, 4), ["map@2"])
    assert math.isnan(r["map@2"].item()) and r.n_empty["map@2"].item() == 3


def test_fall_out_is_empty_when_every_candidate_is_relevant(device):
    preds = torch.tensor([[0.9, 0.1], [0.9, 0.1]])
    target = torch.tensor([[1, 1], [1, 0]])
    r = scores_on(device)(preds, target, ["fall_out@1", "auroc"], reduce="none")
    assert math.isnan(r["fall_out@1"][0].item()) and r["fall_out@1"][1].item() == 0.0
    assert math.isnan(r["auroc"][0].item()) and r["auroc"][1].item() == 1.0


# --- reductions and categories -------------------------------------------------------

def test_reductions(device):
    ev = scores_on(device)
    preds = torch.tensor([[0.9, 0.1, 0.0]]).repeat(4, 1)
    target = torch.tensor([[1, 0, 0], [0, 1, 0], [0, 0, 1], [1, 0, 0]])
    values = [1.0, 0.5, 1 / 3, 1.0]
    for reduce, want in [("mean", sum(values) / 4), ("median", (0.5 + 1.0) / 2), ("min", 1 / 3), ("max", 1.0)]:
        got = ev(preds, target, ["mrr"], reduce=reduce)["mrr"].item()
        assert got == pytest.approx(want), reduce
    none = ev(preds, target, ["mrr"], reduce="none")["mrr"]
    torch.testing.assert_close(none, torch.tensor(values, dtype=torch.float64))


def test_categories_dense_and_flat(device):
    ev = scores_on(device)
    preds = torch.tensor([[0.9, 0.1, 0.0]]).repeat(4, 1)
    target = torch.tensor([[1, 0, 0], [0, 1, 0], [0, 0, 1], [1, 0, 0]])
    r = ev(preds, target, ["mrr"], categories=torch.tensor([0, 1, 1, 0]))
    assert r["mrr/0"].item() == 1.0 and r["mrr/1"].item() == pytest.approx((0.5 + 1 / 3) / 2)
    r = ev(preds, target, ["mrr"], categories=["a", "b", "b", "a"])
    assert r["mrr/a"].item() == 1.0
    flat = ev(
        preds.reshape(-1), target.reshape(-1), ["mrr"],
        indexes=torch.arange(4).repeat_interleave(3), categories=["a"] * 3 + ["b"] * 6 + ["a"] * 3,
    )
    assert flat["mrr/a"].item() == 1.0 and flat["mrr/b"].item() == pytest.approx((0.5 + 1 / 3) / 2)


def test_results_stay_on_the_input_device(device):
    dense = rc.evaluate_scores(torch.rand(3, 4, device=device), torch.ones(3, 4, device=device), ["ndcg@2"])
    flat = rc.evaluate_scores(torch.rand(6, device=device), torch.ones(6, device=device), ["ndcg@2"],
                              indexes=torch.tensor([0, 0, 1, 1, 2, 2], device=device), reduce="none")
    for r in (dense, flat):
        assert r["ndcg@2"].device.type == device.type and r.n_queries.device.type == device.type


def test_registry_lists_known_keys_and_builds_keys():
    assert rc.metric_key("ndcg", 10) == "ndcg@10"
    assert rc.metric_key("map", "r") == "map@r"
    assert rc.metric_key("mrr") == "mrr"
    assert "ndcg@k" in rc.known_metrics() and "cmc@k" in rc.known_metrics()
    assert [m.cutoff for m in rc.parse_metrics(["ndcg@10", "map@r", "auroc"])] == [10, "r", None]
