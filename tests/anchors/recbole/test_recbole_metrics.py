"""evaluate_scores / evaluate_topk against RecBole's own code (``recbole.evaluator``,
1.2.1: its ``Collector`` and the metric classes of ``metrics.py``) on random data and
hand cases.

RecBole is loaded from a folder of its own (tests/anchors/recommenders/rec_env.py; run by
tests/anchors/suites/run_recommenders.py); skipped, with the reason, where it does not
load. Its full-sort evaluation is reproduced as its trainer does it
(``recbole/trainer/trainer.py``, ``_full_sort_batch_eval``): item 0 is its padding item
``[PAD]``, scored -inf for every user as the user's training items are, the scores go
through ``Collector.eval_batch_collect`` in two batches of users, and only users with a
test item are evaluated (its evaluation data holds no other user; ours skips them).
``data.num_items`` is the number of item ids, ``[PAD]`` included (``Dataset.num``), and
``data.count_items`` the training items' counts (``Dataset.item_counter``). Agreement to
1e-12 (RecBole rounds its means to ``metric_decimal_place``, set to 15 here)."""
from __future__ import annotations

import math
from collections import Counter

import pytest
import torch

import retrieval_core as rc
from tests.anchors.recommenders.rec_env import load_recbole

metrics, _why = load_recbole()
if metrics is None:
    pytest.skip(_why, allow_module_level=True)
from recbole.evaluator.collector import Collector  # noqa: E402
from recbole.evaluator.register import metrics_dict  # noqa: E402

U, I, K = 40, 30, 8  # item 0 is [PAD]: 29 real items
KS = [1, 3, K]
TOL = 1e-12
ACCURACY = {"hit": "hit_rate", "mrr": "mrr", "map": "map_capped", "recall": "recall", "ndcg": "ndcg",
            "precision": "precision"}


def _data(seed: int, ties: bool = False):
    """Scores (integers in [0, 4) with ``ties``), history (never [PAD]), test items unseen
    in training (every fifth user without)."""
    g = torch.Generator().manual_seed(seed)
    scores = torch.randint(0, 4, (U, I), generator=g).double() if ties else torch.rand(U, I, generator=g,
                                                                                     dtype=torch.float64)
    seen = torch.rand(U, I, generator=g) < 0.25
    seen[:, 0] = False
    test = (torch.rand(U, I, generator=g) < 0.2) & ~seen
    test[:, 0] = False
    test[::5] = False
    return scores, seen, test


def _config(names, tail_ratio=0.1, ks=KS):
    return {"eval_args": {"mode": "full"}, "topk": ks, "device": torch.device("cpu"), "metrics": names,
            "metric_decimal_place": 15, "tail_ratio": tail_ratio, "ITEM_ID_FIELD": "item_id"}


def _recbole(names, scores, seen, test, tail_ratio=0.1, ks=KS):
    """RecBole's results dict and its data struct, users with a test item only."""
    config = _config(names, tail_ratio, ks)
    collector = Collector(_config(names + ["itemcoverage"], tail_ratio, ks))  # its lists ("rec.items") too
    users = test.any(1).nonzero().squeeze(1)
    for batch in users.tensor_split(2):
        masked = scores[batch].clone()
        masked[:, 0] = -math.inf
        masked[seen[batch]] = -math.inf
        positive_u, positive_i = test[batch].nonzero().T
        collector.eval_batch_collect(masked, None, positive_u, positive_i)
    struct = collector.get_data_struct()
    # its data entries (what Collector.data_collect sets from the training data) come after
    # get_data_struct, which calls .cpu() on every entry: an int or a Counter there is
    # RecBole 1.2.1's AttributeError (its issues #2131, #2191)
    struct.set("data.num_items", scores.shape[1])
    struct.set("data.count_items", Counter(seen.nonzero()[:, 1].tolist()))
    results = {}
    for name in names:
        results.update(metrics_dict[name](config).calculate_metric(struct))
    return results, struct


def _exclude(seen: torch.Tensor) -> torch.Tensor:
    """The pairs RecBole scores -inf: the training items and [PAD] of every user."""
    padded = seen.clone()
    padded[:, 0] = True
    return padded.nonzero().T


@pytest.mark.parametrize("seed", range(4))
def test_accuracy_metrics_from_scores(seed):
    """Each metric's per-user values (``metric_info``) and means, against ours from the
    same scores with the history excluded, and from RecBole's own top-k lists."""
    scores, seen, test = _data(seed)
    results, struct = _recbole(list(ACCURACY), scores, seen, test)
    keys = [f"{ours}@{k}" for ours in ACCURACY.values() for k in KS]
    from_scores = rc.evaluate_scores(scores, test, keys, exclude=_exclude(seen), reduce="none")
    users = test.any(1)
    from_lists = rc.evaluate_topk(struct["rec.items"], test[users].nonzero().T, keys, reduce="none")
    pos_index, pos_len = metrics.TopkMetric(_config([])).used_info(struct)
    for name, ours in ACCURACY.items():
        metric = metrics_dict[name](_config([name]))
        per_user = torch.from_numpy(metric.metric_info(pos_index, pos_len) if name in ("map", "recall", "ndcg")
                                    else metric.metric_info(pos_index)).double()
        for k in KS:
            key = f"{ours}@{k}"
            assert torch.allclose(from_scores[key][users], per_user[:, k - 1], rtol=0, atol=TOL), key
            assert torch.allclose(from_lists[key], per_user[:, k - 1], rtol=0, atol=TOL), key
            assert results[f"{name}@{k}"] == pytest.approx(from_scores[key].nanmean().item(), abs=TOL), key


@pytest.mark.parametrize("seed", range(3))
def test_accuracy_metrics_of_tied_scores_on_recboles_lists(seed):
    """With ties torch.topk picks some order among equal scores: ours on RecBole's own
    lists equals RecBole's values."""
    scores, seen, test = _data(seed, ties=True)
    results, struct = _recbole(list(ACCURACY), scores, seen, test)
    users = test.any(1)
    keys = [f"{ours}@{k}" for ours in ACCURACY.values() for k in KS]
    ours = rc.evaluate_topk(struct["rec.items"], test[users].nonzero().T, keys)
    for name, key in ACCURACY.items():
        for k in KS:
            assert results[f"{name}@{k}"] == pytest.approx(ours[f"{key}@{k}"].item(), abs=TOL), (name, k)


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("ties", [False, True])
def test_gauc_is_auroc_weighted_by_relevant_items(seed, ties):
    """GAUC: each user's AUC over the items not scored -inf, tied scores at their mean rank
    (``Collector._average_rank``), weighted by the user's test items: ours ``auroc`` under
    ties="expected" (a tied pair counts 1/2) with the history excluded, weighted by R."""
    scores, seen, test = _data(seed, ties)
    results, _ = _recbole(["gauc"], scores, seen, test)
    auc = rc.evaluate_scores(scores, test, ["auroc"], exclude=_exclude(seen), ties="expected",
                             reduce="none")["auroc"]
    weights = test.sum(1).double()
    defined = ~auc.isnan()
    expected = (auc[defined] * weights[defined]).sum() / weights[defined].sum()
    assert results["gauc"] == pytest.approx(expected.item(), abs=TOL)


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("tail_ratio", [0.1, 0.5, 3])
@pytest.mark.parametrize("ties", [False, True])
def test_item_metrics(seed, tail_ratio, ties):
    """ItemCoverage, GiniIndex, AveragePopularity, TailPercentage: ours on RecBole's lists
    with ``n_items`` its item ids ([PAD] included) and the training counts as popularity.
    ShannonEntropy takes ln and divides by the number of distinct items recommended:
    ours (log2) times ln 2 over that number."""
    scores, seen, test = _data(seed, ties)
    names = ["itemcoverage", "giniindex", "averagepopularity", "tailpercentage", "shannonentropy"]
    results, struct = _recbole(names, scores, seen, test, tail_ratio)
    users = test.any(1)
    keys = [f"{m}@{k}" for m in ("coverage", "gini", "popularity", "tail", "entropy") for k in KS]
    ours = rc.evaluate_topk(struct["rec.items"], test[users].nonzero().T, keys, n_items=I,
                            item_popularity=seen.sum(0), tail_ratio=tail_ratio)
    for k in KS:
        for theirs, key in (("itemcoverage", "coverage"), ("giniindex", "gini"), ("averagepopularity", "popularity"),
                            ("tailpercentage", "tail")):
            assert results[f"{theirs}@{k}"] == pytest.approx(ours[f"{key}@{k}"].item(), abs=TOL), (theirs, k)
        distinct = ours[f"coverage@{k}"].item() * I
        assert results[f"shannonentropy@{k}"] == pytest.approx(ours[f"entropy@{k}"].item() * math.log(2) / distinct,
                                                               abs=TOL)


def test_a_test_item_seen_in_training_counts_in_recboles_recall():
    """Difference on purpose (docs/metrics.md, "Seen items"): a test item the user also had
    in training is scored -inf by RecBole but still counted among the user's positives
    (R), so its recall cannot reach 1; ours excludes it from the ranking and from R."""
    scores = torch.tensor([[0.0, 0.9, 0.8, 0.1, 0.2]], dtype=torch.float64)
    seen = torch.tensor([[False, False, True, False, False]])
    test = torch.tensor([[False, True, True, False, False]])
    results, _ = _recbole(["recall", "ndcg"], scores, seen, test, ks=[3])
    ours = rc.evaluate_scores(scores, test, ["recall@3", "ndcg@3"], exclude=_exclude(seen))
    assert results["recall@3"] == 0.5 and ours["recall@3"].item() == 1.0
    assert results["ndcg@3"] == pytest.approx(1 / (1 + 1 / math.log2(3))) and ours["ndcg@3"].item() == 1.0


def test_hand_case():
    """Two users over items 1-4 ([PAD] = 0): the values written out."""
    scores = torch.tensor([[0.0, 0.4, 0.3, 0.2, 0.1], [0.0, 0.1, 0.2, 0.3, 0.4]], dtype=torch.float64)
    seen = torch.tensor([[False, False, False, False, True], [False, True, False, False, False]])
    test = torch.tensor([[False, False, True, True, False], [False, False, True, False, False]])
    names = ["hit", "mrr", "map", "recall", "ndcg", "precision", "itemcoverage", "giniindex", "averagepopularity"]
    results, struct = _recbole(names, scores, seen, test, ks=[3])
    assert struct["rec.items"].tolist() == [[1, 2, 3], [4, 3, 2]]
    expected = {"hit@3": 1.0, "mrr@3": (1 / 2 + 1 / 3) / 2, "recall@3": 1.0, "precision@3": (2 / 3 + 1 / 3) / 2,
                "map@3": ((1 / 2 + 2 / 3) / 2 + 1 / 3) / 2,
                "ndcg@3": ((1 / math.log2(3) + 1 / 2) / (1 + 1 / math.log2(3)) + 1 / 2) / 2,
                "itemcoverage@3": 4 / 5, "averagepopularity@3": (1 + 0 + 0 + 1 + 0 + 0) / 6,
                # counts of items 0-4 in the top 3: 0, 1, 2, 2, 1 of 6: sorted 0, 1, 1, 2, 2 weighted -4, -2, 0, 2, 4
                "giniindex@3": (-2 + 0 + 4 + 8) / (5 * 6)}
    keys = {**ACCURACY, "itemcoverage": "coverage", "giniindex": "gini", "averagepopularity": "popularity"}
    ours = rc.evaluate_topk(struct["rec.items"], test.nonzero().T, [f"{v}@3" for v in keys.values()], n_items=5,
                            item_popularity=seen.sum(0))
    for name, value in expected.items():
        assert results[name] == pytest.approx(value, abs=TOL), name
        assert ours[f"{keys[name[:-2]]}@3"].item() == pytest.approx(value, abs=TOL), name
