"""TopkAccumulator and the adapters' TopKMetrics (issue 30, "Adapters"): over batches they
equal evaluate_topk on the concatenated batches (every key, set-level ones included),
repeated users (DistributedSampler padding) count once by user id, a user repeated with
other rows is an error, and each bad input has its exception and message."""
from __future__ import annotations

import pytest
import torch

import retrieval_core as rc
from retrieval_core.evaluation.accumulator import TopkAccumulator

U, I, K = 14, 30, 5
KEYS = ["precision@5", "recall@5", "ndcg@5", "ndcg@3", "mrr@5", "hit_rate@5", "map@5", "map_capped@5",
        "coverage@5", "gini@5", "entropy@5", "personalization@5", "coverage@3", "popularity@5", "novelty@5",
        "diversity@5", "tail@5", "serendipity@5"]


def _data(seed: int, graded: bool = False):
    g = torch.Generator().manual_seed(seed)
    topk = torch.stack([torch.randperm(I, generator=g)[:K] for _ in range(U)])
    topk[2, 3:] = -1  # a short list
    target = (torch.rand(U, I, generator=g) < 0.2).long()
    if graded:
        target = target * torch.randint(1, 4, (U, I), generator=g)
    target[4] = 0  # a user without truth
    history = torch.rand(U, I, generator=g) < 0.2
    items = dict(n_items=I, item_popularity=torch.randint(1, 9, (I,), generator=g).double(),
                 item_categories=torch.randint(0, 4, (I,), generator=g))
    return topk, target, history, items


def _rows(target: torch.Tensor, rows: slice, graded: bool):
    """The truth of users ``rows`` as the batch gives it: pairs of batch rows, or sparse rows."""
    part = target[rows]
    return part.to_sparse() if graded else part.nonzero().T


def _batches(topk, target, history, graded, cuts=(0, 3, 4, 9, U)):
    for a, b in zip(cuts[:-1], cuts[1:]):
        yield dict(topk=topk[a:b], truth=_rows(target, slice(a, b), graded),
                   history=history[a:b].nonzero().T, user_ids=torch.arange(a, b) * 10)


def _expected(topk, target, history, items, graded, keys=KEYS, **options):
    truth = target.to_sparse() if graded else target.nonzero().T
    return rc.evaluate_topk(topk, truth, keys, history=history.nonzero().T, **items, **options)


def _assert_same(ours, theirs, keys=KEYS):
    for key in keys:
        assert torch.allclose(torch.as_tensor(ours[key], dtype=torch.float64), theirs[key].double(), rtol=1e-12,
                              atol=0, equal_nan=True), (key, ours[key], theirs[key])


@pytest.mark.parametrize("graded", [False, True])
def test_the_accumulator_equals_evaluate_topk_on_the_concatenated_batches(graded):
    topk, target, history, items = _data(0, graded)
    acc = TopkAccumulator(KEYS, **items)
    state = acc.new_state()
    for batch in _batches(topk, target, history, graded):
        acc.update(state, batch.pop("topk"), batch.pop("truth"), **batch)
    _assert_same(acc.compute(state), _expected(topk, target, history, items, graded))


def test_ignite_and_lightning_equal_evaluate_topk():
    from ignite.engine import Engine
    import ignite_retrieval
    import lightning_retrieval

    topk, target, history, items = _data(1)
    batches = list(_batches(topk, target, history, graded=False))
    evaluator = Engine(lambda engine, batch: batch)
    ignite_retrieval.TopKMetrics(KEYS, **items).attach(evaluator, "rec")
    expected = _expected(topk, target, history, items, graded=False)
    _assert_same(evaluator.run(batches).metrics, expected)
    metric = lightning_retrieval.TopKMetrics(KEYS, **items)
    for batch in batches:
        metric.update(batch["topk"], batch["truth"], user_ids=batch["user_ids"], history=batch["history"])
    _assert_same(metric.compute(), expected)


def test_repeated_users_count_once_in_any_order_of_their_entries():
    """DistributedSampler pads by repeating users: the same list and truth (its pairs in
    another order) counts once, so every key (coverage and gini too) is one process's."""
    topk, target, history, items = _data(2)
    keys = ["recall@5", "coverage@5", "gini@5", "personalization@5", "serendipity@5"]
    acc = TopkAccumulator(keys, **items)
    state = acc.new_state()
    for batch in _batches(topk, target, history, graded=False):
        acc.update(state, batch["topk"], batch["truth"], user_ids=batch["user_ids"], history=batch["history"])
    pairs = target[[5, 0]].nonzero().T
    acc.update(state, topk[[5, 0]], pairs[:, torch.arange(pairs.shape[1] - 1, -1, -1)],
               user_ids=torch.tensor([50, 0]), history=history[[5, 0]].nonzero().T)
    _assert_same(acc.compute(state, processes=3), _expected(topk, target, history, items, False, keys), keys)


@pytest.mark.parametrize("change", ["list", "truth", "history"])
def test_a_user_repeated_with_other_rows_is_an_error(change):
    topk, target, history, items = _data(3)
    acc = TopkAccumulator(["recall@5", "serendipity@5"], **items)
    state = acc.new_state()
    acc.update(state, topk[:2], target[:2].nonzero().T, user_ids=torch.tensor([0, 1]),
               history=history[:2].nonzero().T)
    again = dict(topk=topk[1:2].clone(), truth=target[1:2].nonzero().T, history=history[1:2].nonzero().T)
    if change == "list":
        again["topk"][0, 0] = topk[0, 0] if topk[0, 0] not in topk[1] else topk[1, 1]
        again["topk"][0, 1] = topk[1, 0]
    else:
        again[change] = again[change].clone()
        again[change][1, 0] = int(torch.tensor([i for i in range(I) if i not in again[change][1]])[0])
    acc.update(state, again["topk"], again["truth"], user_ids=torch.tensor([1]), history=again["history"])
    with pytest.raises(ValueError, match="id 1 repeats with"):
        acc.compute(state, processes=2)


def test_lists_of_other_widths_are_padded_and_sparse_truth_needs_n_items():
    topk, target, history, items = _data(4, graded=True)
    acc = TopkAccumulator(["ndcg@5", "coverage@3"], n_items=I)
    state = acc.new_state()
    acc.update(state, topk[:6, :3], target[:6].to_sparse_csr())
    acc.update(state, topk[6:], target[6:].to_sparse())
    padded = torch.cat([torch.cat([topk[:6, :3], torch.full((6, 2), -1)], 1), topk[6:]])
    expected = rc.evaluate_topk(padded, target.to_sparse(), ["ndcg@5", "coverage@3"], n_items=I)
    _assert_same(acc.compute(state), expected, ["ndcg@5", "coverage@3"])
    with pytest.raises(ValueError, match="a sparse truth needs the metric's n_items"):
        TopkAccumulator(["ndcg@5"]).update(TopkAccumulator(["ndcg@5"]).new_state(), topk, target.to_sparse())


def test_categories_give_per_category_results():
    topk, target, history, items = _data(5)
    cats = torch.arange(U) % 3
    acc = TopkAccumulator(["recall@5"], n_items=I)
    state = acc.new_state()
    acc.update(state, topk[:7], target[:7].nonzero().T, categories=cats[:7])
    acc.update(state, topk[7:], target[7:].nonzero().T, categories=cats[7:])
    expected = rc.evaluate_topk(topk, target.nonzero().T, ["recall@5"], n_items=I, categories=cats)
    assert set(expected) == set(acc.compute(state)) and len(expected) > 1
    _assert_same(acc.compute(state), expected, list(expected))


BAD = [
    (dict(topk=torch.rand(2, 3)), TypeError, "topk must hold integer ids; got torch.float32"),
    (dict(topk=torch.tensor([1, 2])), ValueError, r"topk must be \[B, k\] item ids in rank order; got shape \(2,\)"),
    (dict(truth=torch.tensor([0, 1])), ValueError, r"truth must be \[2, E\] \(user row, item\) pairs"),
    (dict(truth=torch.tensor([[0.0], [1.0]])), TypeError, "truth must hold integer ids"),
    (dict(truth=[[0], [1]]), TypeError, "truth must be a torch tensor"),
    (dict(user_ids=torch.tensor([1, 2])), ValueError, "user_ids must be 1-D with one entry per list of topk"),
    (dict(user_ids=torch.tensor([0.5])), TypeError, "user_ids"),
    (dict(categories=torch.tensor([[1]])), ValueError, "categories must be 1-D"),
]


@pytest.mark.parametrize("bad, error, message", BAD)
def test_a_bad_batch_is_an_error_at_update(bad, error, message):
    batch = dict(dict(topk=torch.tensor([[1, 2]]), truth=torch.tensor([[0], [1]])), **bad)
    acc = TopkAccumulator(["recall@2"], n_items=4, numpy=False)
    with pytest.raises(error, match=message):
        acc.update(acc.new_state(), batch.pop("topk"), batch.pop("truth"), **batch)


# values are read once, at compute (no host sync per batch): the same errors, raised there
BAD_VALUES = [
    (dict(topk=torch.tensor([[1, -1, 2]])), "pads a short list with -1 after its items"),
    (dict(topk=torch.tensor([[1, -2]])), "topk holds ids below -1"),
    (dict(topk=torch.tensor([[1, 1]])), "topk lists item 1 twice"),
    (dict(truth=torch.tensor([[0, 5], [1, 2]])), "truth holds 1 .row, item. pair whose row is outside its batch"),
    (dict(history=torch.tensor([[3, -1], [1, 2]])), "history holds 2 .row, item. pairs whose row is outside"),
    (dict(truth=torch.tensor([[0], [7]])), "item ids outside"),
    (dict(truth=torch.tensor([[0, 0], [1, 1]])), r"holds the pair \(user 0, item 1\) twice"),
]


@pytest.mark.parametrize("bad, message", BAD_VALUES)
def test_a_bad_value_is_an_error_at_compute(bad, message):
    batch = dict(dict(topk=torch.tensor([[1, 2]]), truth=torch.tensor([[0], [1]])), **bad)
    acc = TopkAccumulator(["recall@2"], n_items=4)
    state = acc.new_state()
    acc.update(state, batch.pop("topk"), batch.pop("truth"), **batch)
    with pytest.raises(ValueError, match=message):
        acc.compute(state)


def test_pairs_outside_an_empty_batch_are_an_error_at_compute():
    acc = TopkAccumulator(["recall@2"], n_items=4)
    state = acc.new_state()
    acc.update(state, torch.tensor([[1, 2]]), torch.tensor([[0], [1]]))
    assert acc.update(state, torch.zeros(0, 2, dtype=torch.int64), torch.tensor([[0], [1]])) == 0
    with pytest.raises(ValueError, match="truth holds 1 .row, item. pair whose row is outside"):
        acc.compute(state)


def test_bad_options_and_values_are_errors_with_the_adapters_name():
    import ignite_retrieval
    import lightning_retrieval

    with pytest.raises(ValueError, match="n_items must be a positive int"):
        lightning_retrieval.TopKMetrics(["recall@2"], n_items=0)
    with pytest.raises(ValueError, match="empty"):
        ignite_retrieval.TopKMetrics(["recall@2"], empty="never")
    metric = ignite_retrieval.TopKMetrics(["recall@2"], n_items=4)
    with pytest.raises(TypeError, match="^TopKMetrics: topk must hold integer ids"):
        metric.update({"topk": torch.rand(1, 2), "truth": torch.tensor([[0], [1]])})
    metric.update({"topk": torch.tensor([[1, 9]]), "truth": torch.tensor([[0], [1]])})  # 9: past n_items
    with pytest.raises(ValueError, match="^TopKMetrics: .*item ids"):
        metric.compute()
    with pytest.raises(ValueError, match="'user_ids' was missing in earlier batches"):
        metric.update({"topk": torch.tensor([[1, 2]]), "truth": torch.tensor([[0], [1]]),
                       "user_ids": torch.tensor([3])})


def test_a_lightning_metric_without_data_gives_nan_and_numpy_batches_are_taken():
    import numpy as np
    import lightning_retrieval

    metric = lightning_retrieval.TopKMetrics(["recall@2", "coverage@2"], n_items=4)
    assert all(torch.isnan(v) for v in metric.compute().values())
    metric.update(np.array([[1, 2]]), np.array([[0], [1]]))
    assert metric.compute()["recall@2"].item() == 1.0


def test_the_per_user_values_carry_the_user_ids():
    topk, target, history, items = _data(6)
    acc = TopkAccumulator(["recall@5", "coverage@5"], n_items=I)
    state = acc.new_state()
    acc.update(state, topk[7:], target[7:].nonzero().T, user_ids=torch.arange(7, U) + 100)
    acc.update(state, topk[:7], target[:7].nonzero().T, user_ids=torch.arange(7) + 100)
    results = acc.compute(state)
    assert results.query_ids.tolist() == list(range(100, 100 + U))
    want = rc.evaluate_topk(topk, target.nonzero().T, ["recall@5"], n_items=I, keep_per_query=True)
    assert torch.equal(results.per_query["recall@5"].nan_to_num(-1), want.per_query["recall@5"].nan_to_num(-1))
    assert results.worst("recall@5", 1)


def test_a_history_given_in_some_batches_is_named_history():
    """The state's name ('history_counts') is not the input's: the messages name 'history'."""
    import ignite_retrieval
    import lightning_retrieval

    metric = ignite_retrieval.TopKMetrics(["recall@2"], n_items=4)
    metric.update({"topk": torch.tensor([[1, 2]]), "truth": torch.tensor([[0], [1]])})
    with pytest.raises(ValueError, match="'history' was missing in earlier batches"):
        metric.update({"topk": torch.tensor([[1, 2]]), "truth": torch.tensor([[0], [1]]),
                       "history": torch.tensor([[0], [3]])})
    metric = lightning_retrieval.TopKMetrics(["recall@2"], n_items=4)  # not strict: rows counted at compute
    metric.update(torch.tensor([[1, 2]]), torch.tensor([[0], [1]]), history=torch.tensor([[0], [3]]))
    metric.update(torch.tensor([[1, 3]]), torch.tensor([[0], [1]]))
    with pytest.raises(ValueError, match="^history were given for 1 of 2 rows: pass history with every update"):
        metric.compute()
