"""The beyond-accuracy metrics of top-k lists (metrics.items): hand-computed cases, the
pairwise definitions written out by brute force (personalization without its [U, U]
overlaps, diversity without its [k, k] similarities), and the set-level values as
functions of summed exposure counts (what ranks would sync)."""
from __future__ import annotations

import itertools
import math

import pytest
import torch

import retrieval_core as rc
from retrieval_core.metrics import items as M

TOPK = torch.tensor([[0, 1, 2], [0, 3, -1], [0, 1, 4]])
TRUTH = torch.tensor([[0], [2]])
POPULARITY = torch.tensor([10, 4, 2, 1, 1, 0])
CATEGORIES = torch.tensor([0, 0, 1, 1, 2, 2])
KEYS = ["coverage@3", "coverage@1", "gini@3", "entropy@3", "personalization@3", "popularity@3", "novelty@3",
        "diversity@3"]


def test_hand_computed_values():
    r = rc.evaluate_topk(TOPK, TRUTH, KEYS, n_items=6, item_popularity=POPULARITY, item_categories=CATEGORIES)
    # exposure counts c = [3, 2, 1, 1, 1, 0] over 8 recommended slots
    assert r["coverage@3"].item() == pytest.approx(5 / 6) and r["coverage@1"].item() == pytest.approx(1 / 6)
    # counts ascending [0, 1, 1, 1, 2, 3] weighted by 2j - n - 1 = -5, -3, -1, 1, 3, 5: 18 / (6 * 8)
    assert r["gini@3"].item() == pytest.approx(18 / 48)
    p = [3 / 8, 2 / 8, 1 / 8, 1 / 8, 1 / 8]
    assert r["entropy@3"].item() == pytest.approx(-sum(x * math.log2(x) for x in p))
    # overlaps of the user pairs: 1, 2, 1 items of k = 3
    assert r["personalization@3"].item() == pytest.approx(1 - (1 + 2 + 1) / 3 / 3)
    assert r["popularity@3"].item() == pytest.approx((16 / 3 + 11 / 2 + 15 / 3) / 3)
    info = [-math.log2(x / 18) for x in (10, 4, 2, 1, 1)]
    novelty = [(info[0] + info[1] + info[2]) / 3, (info[0] + info[3]) / 2, (info[0] + info[1] + info[4]) / 3]
    assert r["novelty@3"].item() == pytest.approx(sum(novelty) / 3)
    # categories of the lists: (0, 0, 1), (0, 1), (0, 0, 2): 2 of 6 ordered pairs alike, 0 of 2, 2 of 6
    assert r["diversity@3"].item() == pytest.approx((2 / 3 + 1 + 2 / 3) / 3)


def test_empty_lists_are_empty_users_of_the_per_user_keys():
    topk = torch.tensor([[-1, -1], [2, -1], [1, 2]])
    r = rc.evaluate_topk(topk, TRUTH, ["popularity@2", "diversity@2"], n_items=6, item_popularity=POPULARITY,
                         item_categories=CATEGORIES, reduce="none")
    assert r["popularity@2"][0].isnan() and r["popularity@2"][1:].tolist() == [2.0, 3.0]
    assert r["diversity@2"][:2].isnan().all() and r["diversity@2"][2].item() == 1.0  # fewer than 2 items: none


def _lists(seed: int, users: int = 9, width: int = 5, n_items: int = 12):
    g = torch.Generator().manual_seed(seed)
    ids = torch.stack([torch.randperm(n_items, generator=g)[:width] for _ in range(users)])
    lengths = torch.randint(0, width + 1, (users,), generator=g)
    return ids.masked_fill(torch.arange(width) >= lengths.unsqueeze(1), -1), n_items


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("k", [1, 3, 5])
def test_personalization_is_one_minus_the_mean_pairwise_overlap(seed, k):
    ids, n_items = _lists(seed)
    lists = [set(row[:k][row[:k] >= 0].tolist()) for row in ids]
    overlaps = [len(a & b) / k for a, b in itertools.combinations(lists, 2)]
    value = M.personalization(M.exposure_counts(ids, k, n_items), ids.shape[0], k)
    assert value.item() == pytest.approx(1 - sum(overlaps) / len(overlaps), abs=1e-12)


@pytest.mark.parametrize("seed", range(4))
def test_diversity_is_one_minus_the_mean_pairwise_similarity(seed):
    ids, n_items = _lists(seed)
    g = torch.Generator().manual_seed(100 + seed)
    emb, cats = torch.randn(n_items, 3, generator=g, dtype=torch.float64), torch.randint(0, 3, (n_items,), generator=g)
    for data, sim in ((dict(embeddings=emb), lambda i, j: torch.cosine_similarity(emb[i], emb[j], 0).item()),
                      (dict(categories=cats), lambda i, j: float(cats[i] == cats[j]))):
        got = M.diversity(M.ItemLists(ids, n_items, **data), 4)
        for row, value in zip(ids, got):
            listed = row[:4][row[:4] >= 0].tolist()
            pairs = [sim(i, j) for i, j in itertools.permutations(listed, 2)]
            expected = 1 - sum(pairs) / len(pairs) if pairs else float("nan")
            assert value.item() == pytest.approx(expected, abs=1e-12, nan_ok=True)


def test_categories_come_before_embeddings_when_both_are_given():
    emb = torch.eye(6, dtype=torch.float64)  # every pair dissimilar
    r = rc.evaluate_topk(TOPK, TRUTH, ["diversity@3"], item_categories=CATEGORIES, item_embeddings=emb)
    assert r["diversity@3"].item() == pytest.approx((2 / 3 + 1 + 2 / 3) / 3)


def test_set_level_values_follow_from_summed_exposure_counts():
    """Across ranks the counts and user counts add up: the values of two halves' summed
    counts are the values of the whole (no per-user value needed)."""
    ids, n_items = _lists(7, users=11)
    whole, a, b = (M.exposure_counts(x, 4, n_items) for x in (ids, ids[:4], ids[4:]))
    assert torch.equal(a + b, whole)
    lists = M.ItemLists(ids, n_items)
    keys = rc.parse_metrics(["coverage@4", "gini@4", "entropy@4", "personalization@4"])
    values = M.item_set_values(keys, lists)
    assert values["coverage@4"] == M.coverage(a + b, n_items) and values["gini@4"] == M.gini(a + b)
    assert values["entropy@4"] == M.entropy(a + b)
    assert values["personalization@4"] == M.personalization(a + b, 11, 4)


def test_undefined_set_values_are_nan():
    nothing = torch.full((3, 2), -1)
    counts = M.exposure_counts(nothing, 2, 5)
    assert M.gini(counts).isnan() and M.entropy(counts).isnan() and M.coverage(counts, 5).item() == 0.0
    assert M.personalization(M.exposure_counts(torch.tensor([[1, 2]]), 2, 5), 1, 2).isnan()  # one user: no pair


def test_novelty_of_an_item_never_seen_is_infinite_and_refused():
    with pytest.raises(ValueError, match="novelty@1: item 5 has popularity 0, whose self-information"):
        rc.evaluate_topk(torch.tensor([[5]]), TRUTH, ["novelty@1"], item_popularity=POPULARITY)


@pytest.mark.parametrize("ratio, tail, expected", [
    (0.1, {3}, (0, 1 / 2, 0)),  # max(floor(0.5), 1) = 1 item: the least popular, ties by id
    (0.5, {3, 4}, (0, 1 / 2, 1 / 3)),  # floor(2.5) = 2 items
    (2, {2, 3, 4}, (1 / 3, 1 / 2, 1 / 3)),  # a ratio above 1: seen at most twice
])
def test_tail_is_recboles_tail_percentage(ratio, tail, expected):
    """Item 5 (popularity 0) is never tail: RecBole's tail is among the items seen in training."""
    seen = sorted((int(c), i) for i, c in enumerate(POPULARITY.tolist()) if c > 0)
    recbole = {i for c, i in seen if c <= ratio} if ratio > 1 else {i for _, i in seen[:max(int(len(seen) * ratio), 1)]}
    assert recbole == tail == set(M.tail_items(POPULARITY, ratio).nonzero().squeeze(1).tolist())
    r = rc.evaluate_topk(TOPK, TRUTH, ["tail@3"], item_popularity=POPULARITY, tail_ratio=ratio, reduce="none")
    assert r["tail@3"].tolist() == pytest.approx(list(expected))


@pytest.mark.parametrize("ratio", [0, -1, float("inf"), float("nan"), True, "0.1"])
def test_tail_ratio_is_a_number_above_zero(ratio):
    with pytest.raises(ValueError, match="tail_ratio must be a number > 0"):
        rc.evaluate_topk(TOPK, TRUTH, ["tail@3"], item_popularity=POPULARITY, tail_ratio=ratio)


HISTORY = torch.tensor([[0, 0, 1, 2], [3, 5, 1, 2]])  # user 0 saw items 3 and 5, user 1 item 1, user 2 item 2


def test_serendipity_by_hand_with_categories():
    """Categories of the history: user 0 (1, 2), user 1 (0), user 2 (1); a listed item's mean
    similarity is the share of the history in its category."""
    r = rc.evaluate_topk(TOPK, TRUTH, ["serendipity@3", "serendipity@1"], item_categories=CATEGORIES,
                         history=HISTORY, reduce="none")
    assert r["serendipity@3"].tolist() == pytest.approx([(1 + 1 + 0.5) / 3, (0 + 1) / 2, 1.0])
    assert r["serendipity@1"].tolist() == pytest.approx([1.0, 0.0, 1.0])


@pytest.mark.parametrize("seed", range(3))
def test_serendipity_is_recommenders_definition_written_out(seed):
    """For each recommended (user, item): 1 - the mean cosine similarity to the user's history
    items (relevance 1, Microsoft Recommenders' default); the user's mean over the list; users
    without history left out (empty)."""
    ids, n_items = _lists(seed)
    g = torch.Generator().manual_seed(200 + seed)
    emb = torch.randn(n_items, 4, generator=g, dtype=torch.float64)
    seen = (torch.rand(ids.shape[0], n_items, generator=g) < 0.3)
    seen[0] = False
    r = rc.evaluate_topk(ids, torch.tensor([[0], [0]]), ["serendipity@4"], item_embeddings=emb,
                         history=seen.nonzero().T, reduce="none")["serendipity@4"]
    for u, row in enumerate(ids):
        listed, past = row[:4][row[:4] >= 0].tolist(), seen[u].nonzero().squeeze(1).tolist()
        values = [1 - sum(torch.cosine_similarity(emb[i], emb[j], 0).item() for j in past) / len(past)
                  for i in listed] if past else []
        assert r[u].item() == pytest.approx(sum(values) / len(values) if values else float("nan"), abs=1e-12,
                                            nan_ok=True)


def test_serendipity_needs_a_history_and_checks_it():
    with pytest.raises(ValueError, match="serendipity@3 needs history="):
        rc.evaluate_topk(TOPK, TRUTH, ["serendipity@3"], item_categories=CATEGORIES)
    with pytest.raises(ValueError, match=r"history holds user ids outside \[0, 3\)"):
        rc.evaluate_topk(TOPK, TRUTH, ["serendipity@3"], item_categories=CATEGORIES, history=torch.tensor([[3], [0]]))
    with pytest.raises(ValueError, match=r"history holds item ids outside \[0, 6\) \(the items, columns\); got 6"):
        rc.evaluate_topk(TOPK, TRUTH, ["serendipity@3"], item_categories=CATEGORIES, n_items=6,
                         history=torch.tensor([[0], [6]]))


def test_a_history_pair_given_twice_counts_once():
    """A seen item is seen (as exclude= reads it): a pair repeated in the history, or a COO
    entry repeated (summed, then non-zero), is the pair once."""
    once = rc.evaluate_topk(TOPK, TRUTH, ["serendipity@3"], item_categories=CATEGORIES, history=HISTORY,
                            reduce="none")["serendipity@3"]
    twice = torch.cat([HISTORY, HISTORY[:, :2]], dim=1)
    coo = torch.sparse_coo_tensor(twice, torch.ones(twice.shape[1]), (3, 6))
    for history in (twice, coo):
        again = rc.evaluate_topk(TOPK, TRUTH, ["serendipity@3"], item_categories=CATEGORIES, history=history,
                                 reduce="none")["serendipity@3"]
        assert torch.equal(again, once)


def test_set_level_keys_hold_no_tensor_of_the_catalogue():
    """A catalogue of 10^15 items (as the accuracy keys run on): the set-level keys read the
    counts of the recommended items alone (an [n_items] count would be 8 PB), and without
    n_items the largest listed id (2^50 here) does not size anything either."""
    n = 10**15
    topk = torch.tensor([[n - 1, 5, 2], [5, 2, -1], [7, 5, n - 2]])
    keys = ["coverage@3", "gini@3", "entropy@3", "personalization@3", "coverage@1", "gini@1"]
    r = rc.evaluate_topk(topk, TRUTH, keys, n_items=n)
    # counts c = 1, 1, 3, 2, 1 (items n-1, n-2, 5, 2, 7) over 8 slots; at 1: n-1, 5, 7 once each
    assert r["coverage@3"].item() == 5 / n and r["coverage@1"].item() == 3 / n
    ascending, first = [1, 1, 1, 2, 3], n - 5 + 1  # the n - 5 items at 0 take the first ranks
    assert r["gini@3"].item() == pytest.approx(
        sum((2 * (first + i) - n - 1) * c for i, c in enumerate(ascending)) / (n * 8), rel=1e-12)
    assert r["gini@1"].item() == pytest.approx((n - 1 + n - 3 + n - 5) / (n * 3), rel=1e-12)
    assert r["entropy@3"].item() == pytest.approx(-sum(c / 8 * math.log2(c / 8) for c in ascending))
    assert r["personalization@3"].item() == pytest.approx(1 - (2 + 1 + 1) / 3 / 3)  # pairs share 2, 1, 1 items
    huge = torch.tensor([[2**50, 1], [1, 3]])
    unsized = rc.evaluate_topk(huge, TRUTH[:, :1], ["entropy@2", "personalization@2"])
    assert unsized["entropy@2"].item() == pytest.approx(1.5) and unsized["personalization@2"].item() == 0.5


@pytest.mark.parametrize("seed", range(3))
def test_gini_of_the_recommended_counts_equals_gini_of_every_count(seed):
    ids, n_items = _lists(seed, n_items=30)
    for k in (1, 3, 5):
        dense, listed = M.exposure_counts(ids, k, n_items), M.recommended_counts(ids, k, n_items)
        assert torch.equal(listed, dense[dense > 0])
        # a count per item (ids within 2^20) or the sorted ids' counts (a catalogue past the lists): the same
        assert torch.equal(M.recommended_counts(ids, k, 2**30), listed)
        assert torch.equal(M.recommended_counts(ids, k), listed)
        assert M.gini(listed, n_items).item() == M.gini(dense).item()


@pytest.mark.parametrize("scale", [1.0, 2.0**-700, 1e-200, 1e-310, 1e200, 1e300])
def test_cosine_keys_do_not_depend_on_the_embeddings_scale(scale):
    """The cosine does not change with the scale of the vectors: tiny embeddings (whose
    squares underflow: the norm was 0 and the values ~ -1e200) and huge ones (whose squared
    norm overflows: every cosine was 0) give the values of ordinary ones."""
    emb = torch.tensor([[1.0, 1.0], [1.0, 1.0], [3.0, 0.0], [1.0, 0.0], [0.0, 1.0], [1.0, 2.0]], dtype=torch.float64)
    topk, history = torch.tensor([[0, 1, -1], [2, 3, 4]]), torch.tensor([[0, 1, 1], [0, 2, 5]])
    keys = ["diversity@3", "serendipity@3"]
    want = rc.evaluate_topk(topk, TRUTH[:, :1], keys, item_embeddings=emb, history=history, reduce="none")
    got = rc.evaluate_topk(topk, TRUTH[:, :1], keys, item_embeddings=emb * scale, history=history, reduce="none")
    for key in keys:
        assert got[key].tolist() == pytest.approx(want[key].tolist(), abs=1e-12), key
    assert want["diversity@3"].tolist() == pytest.approx([0.0, 2 / 3], abs=1e-12)


def test_unit_rows_are_the_plain_normalisation_for_rows_of_ordinary_size():
    """The power-of-two scaling is exact: the same bits as e / |e| where nothing over- or underflows."""
    g = torch.Generator().manual_seed(5)
    for e in (torch.randn(200, 7, generator=g, dtype=torch.float64), torch.randn(200, 3, generator=g) * 1e3):
        plain = e.double() / e.double().norm(dim=1, keepdim=True)
        assert torch.equal(M.unit_rows(e), plain)
    assert torch.equal(M.unit_rows(torch.zeros(2, 3)), torch.zeros(2, 3, dtype=torch.float64))  # no cosine: 0


def test_padding_never_takes_a_listed_category_at_the_int64_extremes():
    """Padding's own categories were max + 1 + j: past 2^63 - 1 they wrapped around onto
    -2^63 + j, here item 1's category, and the two distinct items counted as alike."""
    categories = torch.tensor([2**63 - 1, -2**63 + 2, 0, -2**63])
    topk = torch.tensor([[0, 1, -1], [3, 2, -1], [0, 3, 1]])
    r = rc.evaluate_topk(topk, TRUTH[:, :1], ["diversity@3"], item_categories=categories, reduce="none")
    assert r["diversity@3"].tolist() == [1.0, 1.0, 1.0]


def test_embedding_keys_take_a_block_of_users_at_a_time(monkeypatch):
    """diversity@k and serendipity@k with item_embeddings hold [users, k, D] float64 vectors a
    block of users at a time (whole, 1M users x 20 x 64 were 10 GB each), with the values of
    one block, bit for bit (each user's sums are its own; the history's index_add_ in order)."""
    g = torch.Generator().manual_seed(9)
    ids, n_items = _lists(9, users=23, width=5, n_items=12)
    emb = torch.randn(n_items, 4, generator=g)
    history = (torch.rand(23, n_items, generator=g) < 0.4).nonzero().T
    keys = ["diversity@5", "serendipity@5", "serendipity@2"]
    whole = rc.evaluate_topk(ids, TRUTH[:, :1], keys, item_embeddings=emb, history=history, reduce="none")
    seen, unit_rows = [], M.unit_rows
    monkeypatch.setattr(M, "unit_rows", lambda e: seen.append(e.shape[0]) or unit_rows(e))
    monkeypatch.setattr(M.sizing, "block_elements", lambda device, deep=False: 3 * 5 * 4)
    blocks = rc.evaluate_topk(ids, TRUTH[:, :1], keys, item_embeddings=emb, history=history, reduce="none")
    for key in keys:
        assert torch.equal(blocks[key].nan_to_num(-1), whole[key].nan_to_num(-1)), key
    assert max(n for n in seen if n != n_items) <= 3  # the listed items of 3 users at most (the catalogue: once)


@pytest.mark.parametrize("popularity, expected", [
    ([1.0, 1.0, 5e-324, 1.0], [math.log2(3), (math.log2(3) + 1074 + math.log2(3)) / 2]),  # a share below 2^-1074
    ([1e308, 1e308, 1.0, 1.0], [1.0, 1 + math.log2(1e308)]),  # the sum past float64
    ([2.0**1000, 1.0, 1.0, 1.0], [500.0, 1000.0]),
])
def test_novelty_of_extreme_popularity_is_finite(popularity, expected):
    """-log2 p_i is finite for every popularity > 0: a sum past 1e308 made every share 0 (the
    information inf), and a share below 2^-1074 rounded to 0; both were refused as inf."""
    r = rc.evaluate_topk(torch.tensor([[0, 1], [2, 3]]), TRUTH[:, :1], ["novelty@2"],
                         item_popularity=torch.tensor(popularity, dtype=torch.float64), reduce="none")
    assert r["novelty@2"].tolist() == pytest.approx(expected, rel=1e-15)


def test_novelty_of_ordinary_popularity_has_the_bits_of_the_plain_share():
    """The power-of-two scaling is exact: -log2(popularity / popularity.sum()) bit for bit."""
    g = torch.Generator().manual_seed(4)
    for popularity in (torch.randint(1, 10**6, (50,), generator=g), torch.rand(50, generator=g, dtype=torch.float64)):
        ids = torch.stack([torch.randperm(50, generator=g)[:6] for _ in range(9)])
        share = popularity.double() / popularity.double().sum()
        plain = (-torch.log2(share[ids])).sum(1) / 6
        assert torch.equal(M.novelty(M.ItemLists(ids, 50, popularity.double()), 6), plain)

