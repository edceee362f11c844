"""(user, item) interactions checked once into a per-user CSR (validate.pairs.check_user_items,
inputs.pairs.user_items; the truth and history of evaluate_topk, relevance= and exclude=): every
form gives the same CSR, whose keys are sorted; bad input, its type and message."""
from __future__ import annotations

import pytest
import torch

from retrieval_core.inputs.pairs import user_items
from retrieval_core.validate.counting import count_checks


def csr(value, n_users=3, n_items=5, **kw):
    u = user_items("relevance", value, n_users, n_items, **kw)
    return u.offsets.tolist(), u.items.tolist(), None if u.gains is None else u.gains.tolist()


def test_every_form_gives_the_same_sorted_csr():
    pairs = torch.tensor([[2, 0, 2, 0], [1, 4, 0, 3]])  # unsorted
    dense = torch.zeros(3, 5, dtype=torch.bool)
    dense[pairs[0], pairs[1]] = True
    want = ([0, 2, 2, 4], [3, 4, 0, 1], None)
    assert csr(pairs) == csr(pairs.to(torch.int32)) == csr(dense.to_sparse()) == want
    assert csr(dense.to_sparse_csr()) == csr(dense.float().to_sparse()) == want  # values of 1: no gains


def test_graded_values_are_kept_and_zeros_dropped():
    gains = torch.tensor([[0.0, 2.0, 0.0, 0.0, 0.5], [0.0] * 5, [1.0, 0.0, 0.0, 0.0, 0.0]])
    sparse = gains.to_sparse()
    sparse = torch.sparse_coo_tensor(torch.cat([sparse.indices(), torch.tensor([[1], [3]])], 1),
                                     torch.cat([sparse.values(), torch.tensor([0.0])]), (3, 5))  # an explicit zero
    assert csr(sparse, graded=True) == ([0, 2, 2, 3], [1, 4, 0], [2.0, 0.5, 1.0])
    assert csr(sparse) == ([0, 2, 2, 3], [1, 4, 0], None)  # not graded: membership only
    coo = torch.sparse_coo_tensor(torch.tensor([[0, 0], [1, 1]]), torch.tensor([1.0, 2.0]), (3, 5))  # uncoalesced
    assert csr(coo, graded=True) == ([0, 1, 1, 1], [1], [3.0])  # torch's meaning: summed


def test_repeated_pairs_count_once_where_allowed():
    pairs = torch.tensor([[1, 1, 0], [2, 2, 2]])
    assert csr(pairs, repeats=True) == ([0, 1, 2, 2], [2, 2], None)
    with pytest.raises(ValueError, match=r"relevance holds the pair \(user 1, item 2\) twice; give each pair once"):
        csr(pairs)


def test_the_csr_gives_sorted_keys():
    """user * n_items + item, ascending: what evaluate_topk searches (its truth and history)."""
    u = user_items("truth", torch.tensor([[2, 0, 2, 0], [1, 4, 0, 3]]), 3, 5, graded=True)
    assert u.keys().tolist() == [3, 4, 10, 11]
    assert u.keys(slice(2, 3)).tolist() == [0, 1]  # rows numbered within the part
    assert user_items("truth", torch.zeros(2, 0, dtype=torch.long), 3, 5).keys().tolist() == []


def test_without_n_items_the_largest_id_or_the_columns_scale_the_keys():
    pairs = user_items("truth", torch.tensor([[0, 1], [3, 6]]), 2)
    assert pairs.n_items == 7 and pairs.keys().tolist() == [3, 13]
    assert user_items("truth", torch.zeros(2, 0, dtype=torch.long), 2).n_items == 1
    sparse = user_items("history", torch.eye(2, 9).to_sparse(), 2)
    assert sparse.n_items == 9 and sparse.keys().tolist() == [0, 10]
    with pytest.raises(ValueError, match=r"truth holds item ids outside \[0, n_items\) \(the items, columns\); got -1"):
        user_items("truth", torch.tensor([[0], [-1]]), 2)
    with pytest.raises(ValueError, match=r"history must be a sparse \[users, items\] = \[3, items\] tensor"):
        user_items("history", torch.eye(2, 9).to_sparse(), 3)


def test_chunks_read_their_own_rows():
    u = user_items("exclude", torch.tensor([[0, 2, 2, 1], [4, 0, 3, 1]]), 3, 5)
    assert u.dense(slice(1, 3)).tolist() == [[False, True, False, False, False], [True, False, False, True, False]]
    rows, items, _ = u.pairs(torch.tensor([2, 0]))  # positions (re-ranking): in the order given
    assert rows.tolist() == [0, 0, 1] and items.tolist() == [0, 3, 4]
    assert u.contains(torch.tensor([2, 0]), torch.tensor([[3, 4], [4, 0]])).tolist() == [[True, False], [True, False]]
    assert u.contains(slice(3, 3), torch.zeros(0, 2, dtype=torch.int64)).shape == (0, 2)
    other = user_items("relevance", torch.tensor([[2, 1], [3, 0]]), 3, 5)
    assert u.overlap(other).tolist() == [0, 0, 1]


BAD = [
    ([[0], [1]], TypeError, r"relevance must be \[2, E\] \(user, item\) pairs or a sparse"),
    (torch.tensor([[0.0], [1.0]]), TypeError, "relevance must hold integer .* got torch.float32"),
    (torch.tensor([[True], [False]]), TypeError, "integer"),
    (torch.tensor([[0, 1, 2]]), ValueError, r"got shape \(1, 3\)"),
    (torch.tensor([[[0]], [[1]]]), ValueError, r"got shape \(2, 1, 1\)"),
    (torch.tensor([[3], [0]]), ValueError, r"user ids outside \[0, 3\) \(the users, rows\); got 3"),
    (torch.tensor([[-1], [0]]), ValueError, r"user ids outside \[0, 3\).*got -1"),
    (torch.tensor([[0], [5]]), ValueError, r"item ids outside \[0, 5\) \(the items, columns\); got 5"),
    (torch.ones(3, 4).to_sparse(), ValueError, r"sparse \[users, items\] = \[3, 5\] tensor; got shape \(3, 4\)"),
    (-torch.ones(3, 5).to_sparse(), ValueError, "relevance values must be finite and >= 0; got -1.0"),
    (torch.full((3, 5), float("inf")).to_sparse(), ValueError, "finite and >= 0; got inf"),
    (torch.full((3, 5), 1e300, dtype=torch.float64).to_sparse(), ValueError, "at most 2\\^960"),
    (torch.ones(3, 5, dtype=torch.complex64).to_sparse(), TypeError, "real numbers"),
]


@pytest.mark.parametrize("value, error, message", BAD)
def test_bad_input(value, error, message):
    with pytest.raises(error, match=message):
        csr(value, graded=True)


def test_ids_past_int64_keys_are_refused():
    with pytest.raises(ValueError, match="exceeds int64"):
        user_items("exclude", torch.tensor([[0], [0]]), 2**40, 2**30)


def test_one_check_per_conversion():
    with count_checks() as counts:
        user_items("exclude", torch.tensor([[0], [1]]), 3, 5)
    assert dict(counts) == {"check_user_items(exclude)": 1}


# -- sorted pairs kept as given; the overlap in blocks of users (issue 30: two-tower memory) ------------


def _shuffled(pairs, generator):
    return pairs[:, torch.randperm(pairs.shape[1], generator=generator)]


@pytest.mark.parametrize("repeats", [False, True])
def test_sorted_and_shuffled_pairs_give_the_same_csr(generator, repeats):
    """Pairs already sorted skip the sort; the CSR is the one of the same pairs in any order
    (repeats adjacent in the sorted input counted once, or refused, naming the same pair)."""
    key = torch.randint(0, 40 * 30, (300,), generator=generator).unique()
    pairs = torch.stack([key // 30, key % 30])  # sorted by user, then item
    with_repeats = torch.cat([pairs, pairs[:, ::7]], 1)[:, torch.cat([key, key[::7]]).argsort(stable=True)]
    for value in (pairs, with_repeats) if repeats else (pairs,):
        got = csr(value, 40, 30, repeats=repeats)
        assert got == csr(_shuffled(value, generator), 40, 30, repeats=repeats)
        assert got == csr(value.flip(1), 40, 30, repeats=repeats)  # reversed: sorted again
    if not repeats:
        for value in (with_repeats, _shuffled(with_repeats, generator)):
            with pytest.raises(ValueError, match=r"holds the pair \(user \d+, item \d+\) twice"):
                csr(value, 40, 30)
    for value in (torch.zeros(2, 0, dtype=torch.int64), torch.tensor([[3], [4]])):  # no pair, one pair
        assert csr(value, 40, 30, repeats=repeats) == csr(_shuffled(value, generator), 40, 30, repeats=repeats)


def test_a_coalesced_sparse_tensor_keeps_its_gains_in_order(generator):
    gains = torch.randint(0, 3, (6, 7), generator=generator).float() * torch.rand(6, 7, generator=generator)
    want = (gains > 0).nonzero()
    for value in (gains.to_sparse(), gains.to_sparse_csr()):  # sorted: no sort
        offsets, items, got = csr(value, 6, 7, graded=True)
        assert items == want[:, 1].tolist() and got == gains[want[:, 0], want[:, 1]].tolist()


def _overlap_reference(a, b, n_users, n_items):
    ka, kb = a[0] * n_items + a[1], b[0] * n_items + b[1]
    return torch.zeros(n_users, dtype=torch.int64).index_add_(0, a[0], torch.isin(ka, kb).to(torch.int64))


@pytest.mark.parametrize("per_block", [1, 2, 3, 7, 1000])
def test_overlap_in_blocks_equals_the_membership_of_every_pair(generator, monkeypatch, per_block):
    """Blocks that cut through users, users without pairs (at the start, inside, at the end), users
    with every item in both, none in the other, and either side empty."""
    from retrieval_core import sizing
    monkeypatch.setattr(sizing, "bucket_entries", lambda device: per_block)
    n_users, n_items = 12, 6
    a = torch.randint(0, 2, (n_users, n_items), generator=generator).bool()
    b = torch.randint(0, 2, (n_users, n_items), generator=generator).bool()
    a[0], b[0], a[5], b[11] = False, False, False, False  # no pairs: first user, inside, last user
    a[3], b[3] = True, True  # every item in both
    b[7] = ~a[7]  # none in common
    for x, y in ((a, b), (b, a), (a, a), (a, torch.zeros_like(b)), (torch.zeros_like(a), b)):
        px, py = x.nonzero().T, y.nonzero().T
        got = user_items("relevance", px, n_users, n_items).overlap(user_items("exclude", py, n_users, n_items))
        assert got.tolist() == _overlap_reference(px, py, n_users, n_items).tolist()
    empty = user_items("relevance", torch.zeros(2, 0, dtype=torch.int64), 0, 4)
    assert empty.overlap(empty).tolist() == []


@pytest.mark.parametrize("per_block", [1, 3, 5, 100])
def test_user_blocks_cover_every_user_in_order(generator, per_block):
    """Consecutive, non-empty slices from 0 to U; each block holds at most ``per_block`` entries
    past those of its first user."""
    from retrieval_core.inputs.pairs import user_blocks
    for _ in range(20):
        counts = torch.randint(0, 4, (int(torch.randint(0, 15, (1,), generator=generator)),), generator=generator)
        offsets = torch.cat([torch.zeros(1, dtype=torch.int64), counts.cumsum(0)])
        blocks = user_blocks(offsets, per_block)
        if counts.numel() == 0:
            assert blocks == []
            continue
        assert [b.stop for b in blocks[:-1]] == [b.start for b in blocks[1:]]
        assert blocks[0].start == 0 and blocks[-1].stop == counts.numel() and all(b.stop > b.start for b in blocks)
        for b in blocks:
            assert int(offsets[b.stop] - offsets[b.start + 1]) <= per_block, (offsets.tolist(), b)
