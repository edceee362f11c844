"""Issue 18: inputs that crashed deep inside torch or gave a silently wrong number now
get a clear exception (type and message checked), or work."""
from __future__ import annotations

import itertools
import json

import pytest
import torch

import retrieval_core as rc
from retrieval_core import sizing
from retrieval_core.stats import comparison
from retrieval_core.stats.intervals import intervals
from retrieval_core.set_metrics import kmeans

WIDE_UNSIGNED = [torch.uint16, torch.uint32, torch.uint64]
X = torch.randn(6, 4, generator=torch.Generator().manual_seed(0))
LABELS = torch.tensor([0, 0, 1, 1, 2, 2])


# -- unsigned integer dtypes ----------------------------------------------------------------

def _unsigned_calls(dt):
    p, t = torch.rand(2, 3, generator=torch.Generator().manual_seed(1)), torch.tensor([[1, 0, 1], [0, 1, 0]])
    return {
        "indexes": lambda: rc.evaluate_scores(p.flatten(), t.flatten(), ["mrr"],
                                              indexes=torch.tensor([0, 0, 0, 1, 1, 1]).to(dt)),
        "target": lambda: rc.evaluate_scores(p, t.to(dt), ["ndcg"]),
        "flat target": lambda: rc.evaluate_scores(p.flatten(), t.flatten().to(dt), ["ndcg"],
                                                  indexes=torch.tensor([0, 0, 0, 1, 1, 1])),
    }


@pytest.mark.parametrize("dt", WIDE_UNSIGNED)
@pytest.mark.parametrize("which", list(_unsigned_calls(torch.uint16)))
def test_wide_unsigned_indexes_and_gains_give_the_values_of_int64(dt, which):
    """uint16/32/64 ids and gains crashed deep inside torch (no "ge" for UInt64): they are
    widened to int64 exactly, giving the values of int64 inputs."""
    got, want = _unsigned_calls(dt)[which](), _unsigned_calls(torch.int64)[which]()
    assert list(got) == list(want) and all(torch.equal(got[k], want[k]) for k in want)


def test_uint64_past_int64_is_refused_not_wrapped():
    p, t = torch.rand(4), torch.tensor([1, 0, 1, 0])
    for name, call in (("indexes", lambda big: rc.evaluate_scores(p, t, ["mrr"], indexes=big)),
                       ("target", lambda big: rc.evaluate_scores(p.view(1, 4), big.view(1, 4), ["ndcg"]))):
        big = torch.tensor([0, 0, 2**63, 2**63], dtype=torch.uint64) if name == "indexes" else \
            torch.tensor([2**63, 0, 0, 0], dtype=torch.uint64)
        with pytest.raises(ValueError, match=f"^{name} holds uint64 values above 2\\*\\*63 - 1"):
            call(big)


def _taken_calls(dt):
    p, t = torch.rand(2, 3, generator=torch.Generator().manual_seed(1)), torch.tensor([[1, 0, 1], [0, 1, 0]])
    return {
        "preds": lambda d: rc.evaluate_scores(torch.tensor([[3, 2, 1], [1, 2, 3]]).to(d), t, ["mrr"]),
        "categories": lambda d: rc.evaluate_scores(p, t, ["mrr"], categories=torch.tensor([0, 1]).to(d)),
        "labels": lambda d: rc.evaluate_embeddings(X, LABELS.to(d), ["cmc@1", "map@r"]),
        "ids": lambda d: rc.evaluate_embeddings(X, LABELS, ["cmc@1"], query_ids=torch.tensor([0, 1, 0, 2, 3, 4]).to(d)),
    }


@pytest.mark.parametrize("dt", WIDE_UNSIGNED)
@pytest.mark.parametrize("which", list(_taken_calls(torch.uint16)))
def test_wide_unsigned_elsewhere_taken(dt, which):
    """Where they work (the distributed and DDP tests gather labels of every integer dtype):
    the results of int64."""
    call = _taken_calls(dt)[which]
    got, want = call(dt), call(torch.int64)
    assert list(got) == list(want)
    assert all(torch.equal(got[k], want[k]) for k in want), (dict(got), dict(want))


def test_uint8_still_taken():
    p = torch.tensor([[0.9, 0.1, 0.5]])
    want = rc.evaluate_scores(p, torch.tensor([[1, 0, 2]]), ["ndcg"])["ndcg"]
    assert rc.evaluate_scores(p, torch.tensor([[1, 0, 2]], dtype=torch.uint8), ["ndcg"])["ndcg"] == want


# -- relevance callables returning the wrong thing ---------------------------------------------

def _relevance(dt, scale=1.0):
    def rel(a, b):
        return ((a.unsqueeze(1) == b.unsqueeze(0)).double() * scale).to(dt)
    return rel


@pytest.mark.parametrize("sync_free", [False, True])
@pytest.mark.parametrize("dt", [torch.complex64, torch.complex128] + WIDE_UNSIGNED)
def test_relevance_of_wrong_dtype(dt, sync_free):
    with sizing.force_sync_free(sync_free), pytest.raises(
            TypeError, match=r"a relevance callable must return real gains \(bool, int8-64, uint8 or floating point\); "
                             rf"got {dt}"):
        rc.evaluate_embeddings(X, LABELS, ["ndcg@2"], relevance=_relevance(dt))


@pytest.mark.parametrize("sync_free", [False, True])
def test_relevance_too_large(sync_free):
    with sizing.force_sync_free(sync_free), pytest.raises(
            ValueError, match=r"relevance gains must be at most 2\^960 \(about 1e289\) so that sums of them fit "
                              r"float64; got a maximum of 1\.9"):
        rc.evaluate_embeddings(X, LABELS, ["ndcg@2"], relevance=_relevance(torch.float64, 2.0**961))


def test_relevance_wrong_shape():
    with pytest.raises(ValueError, match=r"must return gains \[queries, gallery\] = \(6, 6\); got \(6, 6, 1\)"):
        rc.evaluate_embeddings(X, LABELS, ["ndcg@2"], relevance=lambda a, b: torch.ones(6, 6, 1))


# -- seeds ------------------------------------------------------------------------------------

SEED_MESSAGE = r"seed must be an int from -2\*\*63 to 2\*\*64 - 1 \(a torch.Generator seed\)"


@pytest.mark.parametrize("seed", [2**64, -(2**63) - 1, 10**30])
@pytest.mark.parametrize("where", ["scores ci", "scores", "embeddings", "compare", "compare bootstrap", "kmeans",
                                   "intervals"])
def test_seed_out_of_range(where, seed):
    p, t = torch.rand(3, 4), torch.ones(3, 4)
    calls = {
        "scores ci": lambda: rc.evaluate_scores(p, t, ["mrr"], ci=0.9, seed=seed),
        "scores": lambda: rc.evaluate_scores(p, t, ["mrr"], seed=seed),
        "embeddings": lambda: rc.evaluate_embeddings(X, LABELS, ["nmi", "cmc@1"], ci=0.9, seed=seed),
        "compare": lambda: rc.compare([0.5, 0.7, 0.2], [0.4, 0.1, 0.3], seed=seed),
        "compare bootstrap": lambda: rc.compare([0.5, 0.7, 0.2], [0.4, 0.1, 0.3], test="bootstrap", seed=seed),
        "kmeans": lambda: kmeans(X, 2, seed=seed),
        "intervals": lambda: intervals(torch.rand(5, 1, dtype=torch.float64), ["a"], 0.9, seed=seed),
    }
    with pytest.raises(ValueError, match=SEED_MESSAGE):
        calls[where]()


@pytest.mark.parametrize("seed", [2**64 - 1, -(2**63), -1])
def test_seed_at_the_ends_taken(seed):
    r = rc.compare([0.5, 0.7, 0.2, 0.9], [0.4, 0.1, 0.3, 0.2], test="bootstrap", seed=seed)
    assert 0.0 <= r.p_value <= 1.0


# -- MetricResults.from_dict --------------------------------------------------------------------

GOOD = {"values": {"mrr": 0.5}}


@pytest.mark.parametrize("part,bad", [
    ("ci", {"mrr": [0.1]}),
    ("ci", {"mrr": 0.1}),
    ("values", {"mrr": "x"}),
    ("values", {"mrr": [[1.0], [1.0, 2.0]]}),
    ("curves", {"erc:cmc@1": {"x": [0.5]}}),
    ("curves", {"erc:cmc@1": [1, 2]}),
    ("n_queries", "3"),
    ("n_queries", 2.5),
    ("n_empty", {"mrr": None}),
    ("n_empty", [1]),
    ("per_query", {"mrr": ["a"]}),
    ("query_ids", [1.5]),
    ("query_ids", 3),
    ("neighbours", [1]),
    ("neighbours", {"ids": [[0.5]], "scores": [[1.0]]}),
])
def test_from_dict_malformed(part, bad):
    with pytest.raises(ValueError, match=rf"MetricResults.from_dict: malformed '{part}' \(.*\); expected "):
        rc.MetricResults.from_dict({**GOOD, part: bad})


def test_from_dict_round_trip():
    r = rc.evaluate_scores(torch.rand(4, 5), torch.randint(0, 2, (4, 5)), ["mrr", "erc:cmc@1"], ci=0.9,
                           keep_per_query=True, confidence=torch.rand(4))
    back = rc.MetricResults.from_dict(json.loads(json.dumps(r.to_dict())))
    assert back.to_dict() == r.to_dict()


# -- categories: one type, one name per label ------------------------------------------------------

@pytest.mark.parametrize("categories", [[1, "1"], [1, 1.0], [True, 1], ["a", 2]])
def test_mixed_category_types_refused(categories):
    with pytest.raises(TypeError, match=r"categories must all be of one type .*; got a mix of "):
        rc.evaluate_scores(torch.rand(2, 3), torch.ones(2, 3), ["mrr"], categories=categories)


class Named:
    def __init__(self, value):
        self.value = value

    def __str__(self):
        return "same"


@pytest.mark.parametrize("categories", [[float("nan"), float("nan")], [Named(1), Named(2)]])
def test_labels_with_one_name_refused(categories):
    with pytest.raises(ValueError, match="categories hold different labels with the same name 'same'|'nan'"):
        rc.evaluate_scores(torch.rand(2, 3), torch.ones(2, 3), ["mrr"], categories=categories)


def test_categories_of_one_type_grouped_by_value():
    p = torch.tensor([[0.9, 0.1], [0.1, 0.9], [0.9, 0.1]])
    t = torch.tensor([[1, 0], [1, 0], [0, 1]])
    r = rc.evaluate_scores(p, t, ["mrr"], categories=[2, 10, 2])
    assert sorted(r) == ["mrr", "mrr/10", "mrr/2"]
    assert r["mrr/2"].item() == 0.75 and r["mrr/10"].item() == 0.5


# -- erc: of a lower-is-better key ------------------------------------------------------------------

@pytest.mark.parametrize("key", ["erc:fall_out@2", "erc:fall_out@1"])
def test_erc_of_fall_out_refused(key):
    with pytest.raises(ValueError, match=r"erc: reads 1 - value as the error of a query, for metrics where higher "
                                         r"is better; 'fall_out' is lower-is-better"):
        rc.evaluate_scores(torch.rand(2, 3), torch.tensor([[1, 0, 0], [0, 1, 0]]), [key],
                           confidence=torch.tensor([0.1, 0.2]))


# -- compare: the exact permutation test in bounded memory ---------------------------------------------

def brute_force_p(d):
    """The exact two-sided sign-flip p-value from every sign pattern (itertools)."""
    n = len(d)
    observed = abs(sum(d)) / n
    hits = sum(abs(sum(s * x for s, x in zip(signs, d))) / n >= observed - 1e-12
               for signs in itertools.product([1, -1], repeat=n))
    return hits / 2**n


@pytest.mark.parametrize("bound", [1, 7, 64, 1 << 16])
def test_exact_permutation_chunked(bound, monkeypatch):
    g = torch.Generator().manual_seed(3)
    a = torch.rand(11, generator=g, dtype=torch.float64)
    b = a + 0.05 * torch.randn(11, generator=g, dtype=torch.float64)
    largest = []
    signs = comparison._signs

    def counted(start, stop, n):
        out = signs(start, stop, n)
        largest.append(out.numel())
        return out

    monkeypatch.setattr(comparison, "_CHUNK_ELEMENTS", bound)
    monkeypatch.setattr(comparison, "_signs", counted)
    p = rc.compare(a, b, n_resamples=2**11).p_value
    assert p == pytest.approx(brute_force_p((a - b).tolist()), abs=1e-15)
    assert max(largest) <= max(bound, 11)  # one pattern of n signs at the least
    assert sum(largest) == 2**11 * 11
