"""``exclude=`` beyond evaluate_scores / evaluate_embeddings (issue 30): ``score_values``, the
score accumulator's update (the adapters' ``RankingMetrics``: rows of the batch), the embedding
accumulator's update (``EmbeddingMetrics``: items named by their ids) and ``evaluate_split``.

The reference everywhere: ``mask=`` False at the excluded items (dense scores), or
``evaluate_embeddings(exclude=)`` with the pairs by position (itself checked against the mask
in test_exclude.py), under every tie mode, with ties, offsets, float64 and rows with every item
excluded.
"""
from __future__ import annotations

import pytest
import torch

import retrieval_core as rc
from retrieval_core import sizing
from retrieval_core.distributed import evaluate_split
from retrieval_core.evaluation.accumulator import EmbeddingAccumulator, ScoreAccumulator
from tests.unit.evaluation.test_exclude import MODES, assert_same, dense_of, keys_for, random_pairs


def scored(generator, n_users=24, n_items=10, dtype=torch.float64, offset=0.0):
    """Integer scores (many exact ties) moved by ``offset``, graded gains, seen pairs (repeats
    included) and a user (row 1) who has seen every item."""
    preds = torch.randint(0, 4, (n_users, n_items), generator=generator).to(dtype) + offset
    target = torch.randint(0, 3, (n_users, n_items), generator=generator)
    seen = random_pairs(generator, n_users, n_items, 3 * n_users)
    every = torch.stack([torch.ones(n_items, dtype=torch.int64), torch.arange(n_items)])
    return preds, target, torch.cat([seen, every], 1)


def forms(pairs, n_users, n_items):
    """The pairs, a sparse COO and a sparse CSR tensor of the same items."""
    dense = dense_of(pairs, n_users, n_items)
    return pairs, dense.to_sparse(), dense.to_sparse_csr()


# ------------------------------------------------------------------ score_values(exclude=)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("sync_free", [False, True])
@pytest.mark.parametrize("dtype, offset", [(torch.float64, 0.0), (torch.float32, 1e6), (torch.float64, -2.0 ** 40)])
def test_score_values_exclude_equals_the_mask(generator, mode, sync_free, dtype, offset):
    preds, target, seen = scored(generator, dtype=dtype, offset=offset)
    keys = keys_for(4, mode)
    with sizing.force_sync_free(sync_free):
        want = rc.score_values(preds, target, keys, mask=~dense_of(seen, *preds.shape), ties=mode).values
        for exclude in forms(seen, *preds.shape):
            for block in (None, 20):  # one block; blocks of two rows
                got = rc.score_values(preds, target, keys, ties=mode, exclude=exclude, block_elements=block).values
                torch.testing.assert_close(got, want, rtol=0, atol=1e-12, equal_nan=True)
    assert torch.isnan(got[1]).all()  # every item of row 1 excluded: nothing relevant, nothing ranked


def test_score_values_exclude_with_a_mask_and_no_pair(generator):
    preds, target, seen = scored(generator)
    pad = torch.rand(preds.shape, generator=generator) > 0.2
    keys = ["ndcg@3", "map@r", "auroc", "recall@5"]
    want = rc.score_values(preds, target, keys, mask=pad & ~dense_of(seen, *preds.shape)).values
    torch.testing.assert_close(rc.score_values(preds, target, keys, mask=pad, exclude=seen).values, want, rtol=0,
                               atol=0, equal_nan=True)
    none = rc.score_values(preds, target, keys, exclude=torch.zeros(2, 0, dtype=torch.int64)).values  # no pair
    torch.testing.assert_close(none, rc.score_values(preds, target, keys).values, rtol=0, atol=0, equal_nan=True)


def test_score_values_exclude_bad_inputs():
    p, t = torch.rand(2, 3), torch.ones(2, 3)
    cases = [
        (torch.tensor([[0.0], [1.0]]), TypeError, r"exclude must hold integer \(user, item\) ids; got torch.float32"),
        (torch.tensor([[2], [0]]), ValueError, r"exclude holds user ids outside \[0, 2\) \(the users, rows\); got 2"),
        (torch.tensor([[-1], [0]]), ValueError, r"exclude holds user ids outside \[0, 2\).*got -1"),
        (torch.tensor([[0], [3]]), ValueError,
         r"exclude holds item ids outside \[0, 3\) \(the items, columns\); got 3"),
        (torch.tensor([[0], [-2]]), ValueError, r"item ids outside \[0, 3\).*got -2"),
        ([[0], [1]], TypeError, "exclude must be"),
        (torch.ones(3, 3).to_sparse(), ValueError, r"sparse \[users, items\] = \[2, 3\]"),
    ]
    for exclude, error, message in cases:
        with pytest.raises(error, match=message):
            rc.score_values(p, t, ["mrr"], exclude=exclude)
    with pytest.raises(ValueError, match="exclude= takes dense"):
        rc.score_values(p.reshape(-1), t.reshape(-1), ["mrr"], indexes=torch.tensor([0, 0, 0, 1, 1, 1]),
                        exclude=torch.tensor([[0], [0]]))


def test_numpy_pairs_are_taken_as_tensors(generator):
    """A NumPy array of pairs is converted as the scores are, in every entry point of dense scores."""
    np = pytest.importorskip("numpy")
    preds, target, seen = scored(generator, n_users=6)
    keys = ["ndcg@3", "map@r"]
    want = rc.score_values(preds, target, keys, exclude=seen).values
    got = rc.score_values(preds.numpy(), target.numpy(), keys, exclude=seen.numpy()).values
    torch.testing.assert_close(got, want, rtol=0, atol=0, equal_nan=True)
    assert_same(rc.evaluate_scores(preds, target, keys, exclude=seen.numpy(), reduce="none"),
                rc.evaluate_scores(preds, target, keys, exclude=seen, reduce="none"), keys)
    acc = ScoreAccumulator(keys, reduce="none")
    state = acc.new_state()
    acc.update(state, preds.numpy(), target.numpy(), exclude=np.asarray(seen.numpy()))
    torch.testing.assert_close(acc.compute(state).per_query["ndcg@3"], want[:, 0], rtol=0, atol=0, equal_nan=True)


# ------------------------------------------------------------------ the score accumulator (RankingMetrics)


def batches_of(n_users, sizes):
    start = 0
    for size in sizes:
        yield torch.arange(start, start + size)
        start += size


def local_pairs(seen, users):
    """The pairs of the users ``users`` (consecutive), rows numbered in the batch."""
    inside = (seen[0] >= users[0]) & (seen[0] <= users[-1]) if users.numel() else torch.zeros_like(seen[0]).bool()
    return torch.stack([seen[0][inside] - (users[0] if users.numel() else 0), seen[1][inside]])


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("form", [0, 1, 2])
def test_score_accumulator_exclude_equals_the_mask(generator, mode, form):
    preds, target, seen = scored(generator)
    keys = keys_for(4, mode)
    want = rc.evaluate_scores(preds, target, keys, mask=~dense_of(seen, *preds.shape), ties=mode, reduce="none")
    acc = ScoreAccumulator(keys, ties=mode, reduce="none")
    state = acc.new_state()
    for users in batches_of(24, [5, 0, 1, 11, 7]):  # uneven batches, an empty one
        exclude = forms(local_pairs(seen, users), users.numel(), preds.shape[1])[form]
        assert acc.update(state, preds[users], target[users], ids=users, exclude=exclude) == users.numel()
    assert_same(acc.compute(state), want, keys)


def test_score_accumulator_padding_repeat_with_its_exclusions_counts_once(generator):
    preds, target, seen = scored(generator, n_users=6)
    keys = ["ndcg@3", "recall@2", "mrr"]
    mask = ~dense_of(seen, *preds.shape)
    want = rc.evaluate_scores(preds, target, keys, mask=mask)
    acc = ScoreAccumulator(keys)
    state = acc.new_state()
    acc.update(state, preds, target, ids=torch.arange(6), exclude=seen)
    repeat = local_pairs(seen, torch.tensor([2]))
    acc.update(state, preds[2:3], target[2:3], ids=torch.tensor([2]), exclude=repeat)  # the padding's repeat
    assert_same(acc.compute(state, processes=2), want, keys)
    assert not torch.equal(rc.score_values(preds[2:3], target[2:3], keys).values,
                           rc.score_values(preds[2:3], target[2:3], keys, exclude=repeat).values)
    acc.update(state, preds[2:3], target[2:3], ids=torch.tensor([2]))  # the same query without its exclusions
    with pytest.raises(ValueError, match="id 2 .*different"):
        acc.compute(state, processes=3)


def test_score_accumulator_exclude_compact(generator):
    preds, target, seen = scored(generator)
    want = rc.evaluate_scores(preds, target, ["ndcg@5", "map@r"], mask=~dense_of(seen, *preds.shape))
    acc = ScoreAccumulator(["ndcg@5", "map@r"], compact=True)
    state = acc.new_state()
    for users in batches_of(24, [10, 14]):
        acc.update(state, preds[users], target[users], exclude=local_pairs(seen, users))
    got = acc.compute(state)
    for key in want:
        assert got[key].item() == pytest.approx(want[key].item(), abs=1e-12, rel=0)


def test_score_accumulator_exclude_bad_inputs():
    acc = ScoreAccumulator(["mrr"])
    state = acc.new_state()
    p, t = torch.rand(2, 3), torch.ones(2, 3)
    cases = [
        (dict(exclude=torch.tensor([[2], [0]])), ValueError, r"exclude holds user ids outside \[0, 2\) \(the users, "
                                                             r"rows\); got 2"),
        (dict(exclude=torch.tensor([[0], [3]])), ValueError, r"exclude holds item ids outside \[0, 3\)"),
        (dict(exclude=torch.tensor([[0], [-1]])), ValueError, "item ids outside"),
        (dict(exclude=torch.tensor([[0.0], [1.0]])), TypeError, "exclude must hold integer"),
        (dict(exclude=torch.ones(2, 4).to_sparse()), ValueError, r"\[2, 3\]"),
        (dict(exclude=torch.tensor([[0], [0]]), n_relevant=torch.tensor([3, 3])), ValueError,
         "exclude= takes dense .* nor n_relevant/ideal"),
        (dict(exclude=torch.tensor([[0], [0]]), ideal=torch.ones(2, 3)), ValueError, "nor n_relevant/ideal"),
    ]
    for kw, error, message in cases:
        with pytest.raises(error, match=message):
            acc.update(state, p, t, **kw)
    with pytest.raises(ValueError, match=r"user ids outside \[0, 0\)"):  # an empty batch: no row to exclude from
        acc.update(state, p[:0], t[:0], exclude=torch.tensor([[0], [0]]))
    assert acc.rows(state) == 0


# ------------------------------------------------------------------ the embedding accumulator (EmbeddingMetrics)


def items_of(generator, n=30, dims=3):
    x = torch.randint(-2, 3, (n, dims), generator=generator).float()  # exact products: exact ties
    labels = torch.randint(0, 3, (n,), generator=generator)
    return x, labels


def by_ids(pairs, ids):
    """(batch row, item id) pairs from (position, position) ones; ``ids``: each position's id."""
    return torch.stack([pairs[0], ids[pairs[1]]])


@pytest.mark.parametrize("mode", MODES)
def test_embedding_accumulator_exclude_pml_layout(generator, mode):
    """Every item a query and a gallery item; the pairs given by batch row and item id equal
    evaluate_embeddings(exclude=) by position (and so the mask)."""
    x, labels = items_of(generator)
    ids = torch.randperm(30, generator=generator) * 7 + 100  # ids unlike positions
    seen = random_pairs(generator, 30, 30, 80)
    seen = torch.cat([seen, torch.stack([torch.full((30,), 4), torch.arange(30)])], 1)  # item 4 has seen all
    keys = keys_for(3, mode)
    order = torch.argsort(ids)  # the state's items are in increasing id (drop_duplicates sorts): ties broken so
    at = torch.argsort(order)  # each position's place in that order
    want = rc.evaluate_embeddings(x[order], labels[order], keys, distance="dot", exclude=at[seen], ties=mode,
                                  reduce="none")
    acc = EmbeddingAccumulator(keys, distance="dot", ties=mode, reduce="none")
    state = acc.new_state()
    for rows in batches_of(30, [7, 0, 12, 11]):
        mine = local_pairs(seen, rows)
        exclude = by_ids(mine, ids) if rows.numel() % 2 else dense_of(by_ids(mine, ids), rows.numel(), 400).to_sparse()
        acc.update(state, x[rows], labels[rows], ids=ids[rows], exclude=exclude)
    assert_same(acc.compute(state), want, keys)
    assert all(torch.isnan(want[key][at[4]]) for key in keys)


@pytest.mark.parametrize("mode", MODES)
def test_embedding_accumulator_exclude_two_tower_layout(generator, mode):
    """Users (queries) and items (gallery) in batches of both, ids of two ranges, each user's
    seen items by item id; a padding repeat of a user with its exclusions counts once."""
    users, user_labels = items_of(generator, n=12)
    items, item_labels = items_of(generator, n=9)
    seen = random_pairs(generator, 12, 9, 30)
    keys = keys_for(3, mode)
    want = rc.evaluate_embeddings(users, user_labels, keys, gallery=items, gallery_labels=item_labels,
                                  distance="dot", exclude=seen, ties=mode, reduce="none")
    acc = EmbeddingAccumulator(keys, distance="dot", ties=mode, reduce="none")
    state = acc.new_state()
    item_ids = torch.arange(9) + 1000
    no, yes = torch.zeros(9, dtype=torch.bool), torch.ones(9, dtype=torch.bool)
    acc.update(state, items, item_labels, ids=item_ids, is_query=no, is_gallery=yes)
    for rows in (torch.arange(0, 5), torch.arange(5, 12), torch.arange(3, 4)):  # user 3 again: padding
        mine = local_pairs(seen, rows)
        acc.update(state, users[rows], user_labels[rows], ids=rows, is_query=torch.ones_like(rows, dtype=torch.bool),
                   is_gallery=torch.zeros_like(rows, dtype=torch.bool), exclude=by_ids(mine, item_ids))
    assert_same(acc.compute(state, processes=2), want, keys)


def test_embedding_accumulator_exclude_bad_inputs(generator):
    x, labels = items_of(generator, n=4)
    acc = EmbeddingAccumulator(["cmc@1"])
    state = acc.new_state()
    ids = torch.tensor([5, 6, 7, 8])
    cases = [
        (dict(exclude=torch.tensor([[0], [6]])), ValueError, "exclude names gallery items by their ids: pass ids"),
        (dict(ids=ids, exclude=torch.tensor([[4], [6]])), ValueError, r"exclude holds user ids outside \[0, 4\) "
                                                                       r"\(the users, rows\); got 4"),
        (dict(ids=ids, exclude=torch.tensor([[0], [-6]])), ValueError, "exclude holds item ids outside"),
        (dict(ids=ids, exclude=torch.tensor([[0.0], [6.0]])), TypeError, "exclude must hold integer"),
        (dict(ids=ids, exclude=torch.ones(3, 9).to_sparse()), ValueError, r"sparse \[users, items\] = \[4, items\]"),
    ]
    for kw, error, message in cases:
        with pytest.raises(error, match=message):
            acc.update(state, x, labels, **kw)
    assert acc.rows(state) == 0
    for exclude, what in ((torch.tensor([[0], [9]]), "gallery item"), (torch.tensor([[3], [5]]), "query")):
        acc = EmbeddingAccumulator(["cmc@1"])
        state = acc.new_state()
        acc.update(state, x, labels, ids=ids, is_query=torch.tensor([1, 1, 1, 0]), exclude=exclude)
        with pytest.raises(ValueError, match=f"exclude names id ({9 if what == 'gallery item' else 8}), which is no "
                                             f"{what}'s id"):
            acc.compute(state)


# ------------------------------------------------------------------ evaluate_split(exclude=), one process


def test_evaluate_split_exclude_one_process(generator):
    x, labels = items_of(generator)
    seen = random_pairs(generator, 30, 30, 50)
    keys = ["cmc@1", "map@r", "ndcg@5"]
    want = rc.evaluate_embeddings(x, labels, keys, exclude=seen, reduce="none")
    assert_same(evaluate_split(x, labels, keys, exclude=seen, reduce="none"), want, keys)
    with pytest.raises(ValueError, match=r"exclude holds item ids outside \[0, 30\)"):
        evaluate_split(x, labels, keys, exclude=torch.tensor([[0], [30]]))
