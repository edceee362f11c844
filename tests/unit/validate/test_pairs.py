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
