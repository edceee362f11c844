"""sample_negatives: no positive or excluded item is ever drawn, the draws follow the uniform
or popularity law (chi-square with a fixed seed), repeats only with replace=True, equal
seeds give equal draws, and bad inputs are refused with a clear error."""
from __future__ import annotations

import itertools

import pytest
import torch

import retrieval_core as rc

G = torch.Generator().manual_seed(5)
N_USERS, N_ITEMS = 40, 30
TRUTH = torch.stack([torch.randint(0, N_USERS, (120,), generator=G), torch.randint(0, N_ITEMS, (120,), generator=G)])
TRUTH = torch.unique(TRUTH, dim=1)
HISTORY = torch.stack([torch.randint(0, N_USERS, (200,), generator=G), torch.randint(0, N_ITEMS, (200,), generator=G)])
POPULARITY = torch.randint(0, 9, (N_ITEMS,), generator=G)
# chi-square critical values at p = 0.001 (df: degrees of freedom)
CHI2_999 = {3: 16.27, 5: 20.52, 7: 24.32}


def _chi2(counts: torch.Tensor, probabilities: torch.Tensor) -> float:
    expected = probabilities * counts.sum()
    keep = expected > 0
    assert int(counts[~keep].sum()) == 0, "a draw of probability 0"
    return float(((counts[keep] - expected[keep]) ** 2 / expected[keep]).sum())


def _forbidden(truth, history, n_users, n_items):
    out = torch.zeros(n_users, n_items, dtype=torch.bool)
    for pairs in (truth, history):
        if pairs is not None:
            out[pairs[0], pairs[1]] = True
    return out


@pytest.mark.parametrize("replace", [True, False])
@pytest.mark.parametrize("weighted", [False, True])
def test_no_negative_is_a_positive_or_excluded(replace, weighted):
    popularity = POPULARITY if weighted else None
    neg = rc.sample_negatives(TRUTH, N_ITEMS, 5, n_users=N_USERS, exclude=HISTORY, popularity=popularity,
                              replace=replace, seed=3)
    assert neg.shape == (N_USERS, 5) and neg.dtype == torch.int64
    forbidden = _forbidden(TRUTH, HISTORY, N_USERS, N_ITEMS)
    assert not forbidden.gather(1, neg).any()
    if weighted:
        assert bool((POPULARITY[neg] > 0).all())  # popularity 0: never drawn
    if not replace:
        assert all(len(set(row)) == 5 for row in neg.tolist())


def test_equal_seeds_draw_equal_negatives_and_other_seeds_others():
    a = rc.sample_negatives(TRUTH, N_ITEMS, 6, exclude=HISTORY, seed=11)
    b = rc.sample_negatives(TRUTH, N_ITEMS, 6, exclude=HISTORY, seed=11)
    c = rc.sample_negatives(TRUTH, N_ITEMS, 6, exclude=HISTORY, seed=12)
    assert torch.equal(a, b) and not torch.equal(a, c)
    assert a.device == TRUTH.device


def test_sparse_forms_draw_as_the_pairs():
    dense_truth = _forbidden(TRUTH, None, N_USERS, N_ITEMS)
    dense_history = _forbidden(HISTORY, None, N_USERS, N_ITEMS)
    a = rc.sample_negatives(TRUTH, N_ITEMS, 4, n_users=N_USERS, exclude=HISTORY, seed=2)
    b = rc.sample_negatives(dense_truth.to_sparse(), N_ITEMS, 4, exclude=dense_history.to_sparse_csr(), seed=2)
    assert torch.equal(a, b)


def test_a_user_whose_allowed_items_are_exactly_n_gets_them_all():
    """Without replacement, n = the allowed items: the sequence is drawn until each is kept
    (several rounds, the pending users' sequences doubled): a permutation of them."""
    truth = torch.tensor([[0, 0, 1], [0, 1, 5]])
    neg = rc.sample_negatives(truth, 200, 198, replace=False, seed=0)
    assert sorted(neg[0].tolist()) == list(range(2, 200))
    assert len(set(neg[1].tolist())) == 198 and 5 not in neg[1].tolist()


def test_uniform_frequencies_over_the_allowed_items():
    """One user, positive 0, item 1 excluded: each of items 2..9 drawn with probability 1/8."""
    truth, history = torch.tensor([[0], [0]]), torch.tensor([[0], [1]])
    neg = rc.sample_negatives(truth, 10, 8000, exclude=history, seed=7)
    counts = torch.bincount(neg[0], minlength=10).double()
    p = torch.tensor([0, 0] + [1 / 8] * 8, dtype=torch.float64)
    assert _chi2(counts, p) < CHI2_999[7]


@pytest.mark.parametrize("alpha", [1.0, 0.5, 2.0])
def test_popularity_frequencies_follow_popularity_to_the_alpha(alpha):
    """With replacement, item i among the allowed ones with probability popularity[i]**alpha
    over their sum (RecBole's pop sampling after its rejection of the user's items)."""
    popularity = torch.tensor([5.0, 1.0, 2.0, 0.0, 4.0, 3.0])
    truth = torch.tensor([[0] * 1, [4]])  # item 4 is the user's positive
    neg = rc.sample_negatives(truth, 6, 20000, popularity=popularity, alpha=alpha, seed=1)
    counts = torch.bincount(neg[0], minlength=6).double()
    w = popularity.double() ** alpha
    w[3], w[4] = 0, 0
    assert _chi2(counts, w / w.sum()) < CHI2_999[3]


def test_popularity_without_replacement_is_successive_sampling():
    """n = 2 distinct items of weights 1, 2, 3: the ordered pair (a, b) has probability
    w_a / W * w_b / (W - w_a) (each next item drawn among those not yet kept)."""
    popularity = torch.tensor([0.0, 1.0, 2.0, 3.0])
    users = 6000
    truth = torch.stack([torch.arange(users), torch.zeros(users, dtype=torch.int64)])
    neg = rc.sample_negatives(truth, 4, 2, popularity=popularity, replace=False, seed=4)
    pairs = list(itertools.permutations([1, 2, 3], 2))
    counts = torch.tensor([float(((neg[:, 0] == a) & (neg[:, 1] == b)).sum()) for a, b in pairs],
                          dtype=torch.float64)
    p = torch.tensor([popularity[a] / 6 * popularity[b] / (6 - popularity[a]) for a, b in pairs], dtype=torch.float64)
    assert counts.sum() == users
    assert _chi2(counts, p) < CHI2_999[5]


@pytest.mark.parametrize("call, error, match", [
    (lambda: rc.sample_negatives(TRUTH, N_ITEMS, 0), ValueError, "n \\(negatives per user\\) must be a positive int"),
    (lambda: rc.sample_negatives(TRUTH, True, 3), ValueError, "n_items must be a positive int"),
    (lambda: rc.sample_negatives(TRUTH, N_ITEMS, 3, alpha=float("nan")), ValueError, "alpha must be a finite"),
    (lambda: rc.sample_negatives(TRUTH, N_ITEMS, 3, replace=1), TypeError, "replace must be a bool"),
    (lambda: rc.sample_negatives(TRUTH, N_ITEMS, 3, seed=1.5), TypeError, "seed must be an int"),
    (lambda: rc.sample_negatives(TRUTH.double(), N_ITEMS, 3), TypeError, "truth"),
    (lambda: rc.sample_negatives([[0], [1]], N_ITEMS, 3), TypeError, "truth"),
    (lambda: rc.sample_negatives(TRUTH, 5, 3), ValueError, "item ids outside"),
    (lambda: rc.sample_negatives(TRUTH, N_ITEMS, 3, popularity=torch.ones(4)), ValueError,
     "popularity must be \\[n_items\\]"),
    (lambda: rc.sample_negatives(TRUTH, N_ITEMS, 3, popularity=-torch.ones(N_ITEMS)), ValueError,
     "popularity must be finite and >= 0"),
    (lambda: rc.sample_negatives(TRUTH, N_ITEMS, 3, popularity=torch.ones(N_ITEMS, dtype=torch.bool)), TypeError,
     "popularity must hold real numbers"),
    (lambda: rc.sample_negatives(TRUTH, N_ITEMS, 3, popularity=[1.0] * N_ITEMS), TypeError,
     "popularity must be a tensor"),
    (lambda: rc.sample_negatives(torch.tensor([[0, 0], [0, 1]]), 3, 2, replace=False), ValueError,
     "user 0 has not 2 items to sample"),
    (lambda: rc.sample_negatives(torch.tensor([[0, 0], [0, 1]]), 2, 2), ValueError, "user 0 has not an item"),
    (lambda: rc.sample_negatives(torch.tensor([[0], [0]]), 3, 1, popularity=torch.tensor([1.0, 0.0, 0.0])),
     ValueError, "nor of popularity 0"),
])
def test_bad_inputs(call, error, match):
    with pytest.raises(error, match=match):
        call()


def test_popularity_sampling_past_two_to_the_24_items():
    """torch.multinomial takes at most 2^24 categories (a RuntimeError past them): a larger
    catalogue draws by the inverse of the cumulative weights, with the same law (chi-square),
    never an item of weight 0 nor a positive."""
    n_items = 2**24 + 5
    popularity = torch.zeros(n_items)
    popularity[[0, 7, n_items - 2, n_items - 1]] = torch.tensor([1.0, 4.0, 2.0, 3.0])
    neg = rc.sample_negatives(torch.tensor([[0, 1], [7, 7]]), n_items, 3000, popularity=popularity, seed=3)
    for row in neg:  # item 7 is both users' positive
        items, counts = torch.unique(row, return_counts=True)
        assert items.tolist() == [0, n_items - 2, n_items - 1]
        assert _chi2(counts.double(), torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64) / 6) < CHI2_999[3]


@pytest.mark.parametrize("popularity, alpha", [([1e200, 1.0, 1.0], 2.0), ([1e-200, 1.0, 1.0], -2.0),
                                               ([1e308, 1e308, 1.0], 1.0)])
def test_popularity_to_the_alpha_past_float64_is_refused(popularity, alpha):
    """Weights whose sum overflows float64 were a 'cannot convert float NaN to integer' (the
    draws' width) or a wrong 'has not an item to sample'."""
    with pytest.raises(ValueError, match=r"popularity \*\* alpha \(alpha=.*\) sums past float64"):
        rc.sample_negatives(torch.tensor([[0], [0]]), 3, 2, popularity=torch.tensor(popularity, dtype=torch.float64),
                            alpha=alpha)
