"""Intervals (ci=), per-query values and worst queries: special functions against
scipy, the batched bootstrap against a plain loop over the same resamples, the
Beta HDI against a numerical minimisation with scipy, and the error messages."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from scipy import optimize, special, stats

from retrieval_core import evaluate_embeddings, evaluate_scores
from retrieval_core import MetricResults, aggregate
from retrieval_core.stats.intervals import intervals
from retrieval_core.stats.special import beta_hdi, betainc, betaincinv, t_ppf, t_sf

NAN = float("nan")

# -- special functions -----------------------------------------------------------------

SHAPES = [(0.5, 10.5), (2.0, 3.0), (100.5, 3.5), (5000.5, 4000.5), (1e4, 0.5), (3.0, 1e5), (1.0, 1.0), (0.5, 0.5)]


@pytest.mark.parametrize("a,b", SHAPES)
def test_betainc_equals_scipy(a, b):
    for x in [1e-9, 1e-3, 0.3, 0.5, 0.77, 0.999, 1 - 1e-9]:
        assert betainc(a, b, x) == pytest.approx(special.betainc(a, b, x), abs=1e-11, rel=1e-9)


@pytest.mark.parametrize("a,b", SHAPES)
def test_betaincinv_equals_scipy(a, b):
    for p in [1e-6, 0.025, 0.5, 0.975, 1 - 1e-6]:
        assert betaincinv(a, b, p) == pytest.approx(special.betaincinv(a, b, p), abs=1e-10, rel=1e-8)


def _scipy_hdi(a, b, level):
    """The shortest interval of mass ``level``: minimise its width over the lower tail mass."""
    d = stats.beta(a, b)
    res = optimize.minimize_scalar(lambda p: d.ppf(p + level) - d.ppf(p), bounds=(0.0, 1.0 - level),
                                   method="bounded", options={"xatol": 1e-13})
    candidates = [(d.ppf(p + level) - d.ppf(p), p) for p in (0.0, res.x, 1.0 - level)]
    _, p = min(candidates)
    return d.ppf(p), d.ppf(p + level)


@pytest.mark.parametrize("successes,failures", [(0, 10), (10, 0), (1, 1), (3, 7), (500, 9500), (9000, 1000),
                                                (1, 9999), (1, 0), (0, 1), (2, 1), (50, 50)])
@pytest.mark.parametrize("level", [0.5, 0.9, 0.95, 0.99])
def test_beta_hdi_is_the_shortest_interval(successes, failures, level):
    a, b = 0.5 + successes, 0.5 + failures
    low, high = beta_hdi(a, b, level)
    d = stats.beta(a, b)
    assert d.cdf(high) - d.cdf(low) == pytest.approx(level, abs=1e-9)
    ref_low, ref_high = _scipy_hdi(a, b, level)
    width = high - low
    assert width <= ref_high - ref_low + 1e-9  # no longer than the numerically found shortest
    assert low == pytest.approx(ref_low, abs=2e-5 * max(width, 1e-3))
    assert high == pytest.approx(ref_high, abs=2e-5 * max(width, 1e-3))
    if 0 < low and high < 1:  # interior: equal density at the ends
        assert d.logpdf(low) == pytest.approx(d.logpdf(high), abs=1e-6)


def test_beta_hdi_errors():
    with pytest.raises(ValueError, match=r"level must be in \(0, 1\); got 1.0"):
        beta_hdi(2.0, 2.0, 1.0)
    with pytest.raises(ValueError, match="shape parameters must be finite and > 0"):
        beta_hdi(0.0, 2.0, 0.9)
    assert all(math.isnan(x) for x in beta_hdi(0.5, 0.5, 0.9))  # U-shaped: no single interval


@pytest.mark.parametrize("df", [1, 2, 5, 29, 999, 20000])
def test_student_t_equals_scipy(df):
    for t in [0.0, 0.3, 1.7, 2.1, 6.0, -2.5]:
        assert t_sf(t, df) == pytest.approx(stats.t.sf(t, df), abs=1e-12, rel=1e-9)
    for q in [0.6, 0.95, 0.975, 0.995, 0.05]:
        assert t_ppf(q, df) == pytest.approx(stats.t.ppf(q, df), rel=1e-9)


# -- bootstrap: the batched pass equals a loop over the same resamples --------------------

def _loop_reference(values: np.ndarray, level, n_resamples, seed, reduce, rows=None):
    """Draw the resamples as intervals does (CPU generator, ``[B, Q]`` draws), then
    reduce each resample with numpy, one at a time."""
    g = torch.Generator().manual_seed(seed)
    draws = torch.randint(values.shape[0], (n_resamples, values.shape[0]), generator=g).numpy()
    fn = {"mean": np.mean, "median": np.median, "min": np.min, "max": np.max}[reduce]
    out = []
    for j in range(values.shape[1]):
        stat = []
        for d in draws:
            if rows is not None:
                d = d[np.isin(d, rows)]
            v = values[d, j]
            v = v[~np.isnan(v)]
            stat.append(fn(v) if v.size else np.nan)
        stat = np.array(stat)
        stat = stat[~np.isnan(stat)]
        out.append(tuple(np.percentile(stat, [50 * (1 - level), 50 * (1 + level)])))
    return out


@pytest.mark.parametrize("reduce", ["mean", "median", "min", "max"])
def test_bootstrap_equals_loop_over_the_same_resamples(reduce):
    rng = np.random.default_rng(3)
    values = rng.random((37, 3)).round(1)  # ties among values, as metrics have
    values[rng.random((37, 3)) < 0.2] = np.nan  # skipped queries
    categories = rng.integers(0, 3, 37)
    t = torch.tensor(values)
    groups = [(str(c), torch.tensor(np.flatnonzero(categories == c))) for c in range(3)]
    got = intervals(t, ["a", "b", "c"], 0.9, reduce=reduce, n_resamples=300, seed=7, groups=groups)
    for j, (low, high) in enumerate(_loop_reference(values, 0.9, 300, 7, reduce)):
        assert got["abc"[j]][0].item() == pytest.approx(low, abs=1e-12)
        assert got["abc"[j]][1].item() == pytest.approx(high, abs=1e-12)
    for c in range(3):
        ref = _loop_reference(values, 0.9, 300, 7, reduce, rows=np.flatnonzero(categories == c))
        for j, (low, high) in enumerate(ref):
            assert got[f"{'abc'[j]}/{c}"][0].item() == pytest.approx(low, abs=1e-12)
            assert got[f"{'abc'[j]}/{c}"][1].item() == pytest.approx(high, abs=1e-12)


def test_bootstrap_close_to_scipy_percentile_bootstrap():
    rng = np.random.default_rng(5)
    x = rng.random(400) ** 2
    ours = intervals(torch.tensor(x).unsqueeze(1), ["m"], 0.95, n_resamples=4000, seed=1)["m"]
    ref = stats.bootstrap((x,), np.mean, confidence_level=0.95, method="percentile", n_resamples=4000,
                          random_state=rng).confidence_interval
    se = x.std() / math.sqrt(x.size)
    assert abs(ours[0].item() - ref.low) < 0.15 * se
    assert abs(ours[1].item() - ref.high) < 0.15 * se


def test_bootstrap_coverage_of_a_known_mean():
    """The 90% interval of a Bernoulli(0.3) rate holds 0.3 about 90% of the time."""
    g = torch.Generator().manual_seed(11)
    hits = 0
    for rep in range(200):
        v = (torch.rand(300, 1, generator=g, dtype=torch.float64) < 0.3).to(torch.float64)
        low, high = intervals(v, ["hit_rate@1"], 0.9, n_resamples=400, seed=rep)["hit_rate@1"]
        hits += bool(low <= 0.3 <= high)
    assert 0.83 <= hits / 200 <= 0.96


def test_bootstrap_seed_and_device(device):
    v = torch.rand(500, 2, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    a = intervals(v, ["x", "y"], 0.95, seed=3)
    b = intervals(v.to(device), ["x", "y"], 0.95, seed=3)
    c = intervals(v, ["x", "y"], 0.95, seed=4)
    for k in a:
        assert b[k][0].device == device
        torch.testing.assert_close(torch.stack(b[k]).cpu(), torch.stack(a[k]), rtol=0, atol=1e-12)
    assert any(a[k][0].item() != c[k][0].item() for k in a)


def test_bootstrap_resample_chunks_do_not_change_the_interval(monkeypatch):
    import retrieval_core.stats.intervals as iv

    v = torch.rand(300, 2, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    monkeypatch.setattr(iv, "_CPU_CHUNK_ELEMENTS", 1 << 24)  # one chunk
    whole = intervals(v, ["x", "y"], 0.95, n_resamples=200)
    monkeypatch.setattr(iv, "_CPU_CHUNK_ELEMENTS", 300 * 7)  # 7 resamples per chunk
    chunked = intervals(v, ["x", "y"], 0.95, n_resamples=200)
    for k in whole:
        assert torch.equal(torch.stack(whole[k]), torch.stack(chunked[k]))


# -- ci through evaluate_*, beta ------------------------------------------------------------

def test_evaluate_scores_ci_bootstrap_and_beta(dense_scores):
    preds, target = dense_scores
    keys = ["hit_rate@3", "ndcg@5", "precision@1"]
    r = evaluate_scores(preds, target, keys, ci=0.9, keep_per_query=True)
    per_query = torch.stack([r.per_query[k] for k in keys], 1)
    ref = intervals(per_query, keys, 0.9)
    for k in keys:
        assert r.ci[k][0].ndim == 0 and r.ci[k][0] <= r[k] <= r.ci[k][1]
        assert torch.equal(torch.stack(r.ci[k]), torch.stack(ref[k]))
    r = evaluate_scores(preds, target, ["hit_rate@3", "cmc@2", "precision@1", "mrr@1"], ci=0.95, ci_method="beta",
                        empty="zero")
    for k in ["hit_rate@3", "cmc@2", "precision@1", "mrr@1"]:
        s, n = r[k].item() * 8, 8
        d = stats.beta(0.5 + s, 0.5 + n - s)
        low, high = (x.item() for x in r.ci[k])
        assert d.cdf(high) - d.cdf(low) == pytest.approx(0.95, abs=1e-9)
        ref_low, ref_high = _scipy_hdi(0.5 + s, 0.5 + n - s, 0.95)
        assert (low, high) == pytest.approx((ref_low, ref_high), abs=1e-5)


def test_beta_rejects_keys_that_are_not_binary(dense_scores):
    preds, target = dense_scores
    with pytest.raises(ValueError, match=r"ci_method='beta' needs metrics whose per-query values are 0 or 1.*"
                                         r"'ndcg@5' is not"):
        evaluate_scores(preds, target, ["hit_rate@1", "ndcg@5"], ci=0.9, ci_method="beta")
    with pytest.raises(ValueError, match=r"'precision@2', 'recall@1' are not"):
        evaluate_scores(preds, target, ["precision@2", "recall@1", "mrr@1"], ci=0.9, ci_method="beta")
    x = torch.randn(10, 3)
    with pytest.raises(ValueError, match=r"'map@r' is not"):
        evaluate_embeddings(x, torch.arange(10) % 2, ["cmc@1", "map@r"], ci=0.9, ci_method="beta")
    # a binary key whose values are not 0/1 (tie averaging): named too
    v = torch.tensor([[1.0], [0.5]], dtype=torch.float64)
    with pytest.raises(ValueError, match=r"needs per-query values of 0 or 1; 'hit_rate@1' has others"):
        aggregate(v, ["hit_rate@1"], ci=0.9, ci_method="beta")



def test_beta_of_values_under_any_name():
    # the stats layer takes columns under any name and checks their values (0 or 1); that a
    # key is 0/1 by definition is checked where keys are parsed (the evaluations, above)
    v = torch.tensor([[1.0], [0.0], [1.0], [float("nan")]], dtype=torch.float64)
    r = aggregate(v, ["hits"], ci=0.9, ci_method="beta")
    low, high = intervals(v, ["hits"], 0.9, method="beta")["hits"]
    assert torch.equal(torch.stack(r.ci["hits"]), torch.stack([low, high]))
    assert (low.item(), high.item()) == pytest.approx(beta_hdi(0.5 + 2, 0.5 + 1, 0.9), abs=1e-12)
    with pytest.raises(ValueError, match=r"needs per-query values of 0 or 1; 'hits' has others"):
        intervals(v * 0.5, ["hits"], 0.9, method="beta")

@pytest.mark.parametrize("kwargs,error,message", [
    (dict(ci=1.5), ValueError, r"ci must be a level in \(0, 1\) such as 0.95, or None; got 1.5"),
    (dict(ci=0), ValueError, r"ci must be a level in \(0, 1\)"),
    (dict(ci=True), ValueError, r"ci must be a level in \(0, 1\)"),
    (dict(ci="0.9"), ValueError, r"ci must be a level in \(0, 1\)"),
    (dict(ci=0.9, ci_method="normal"), ValueError, r"ci_method must be one of \['bootstrap', 'beta'\]; got 'normal'"),
    (dict(ci=0.9, n_resamples=0), ValueError, r"n_resamples must be a positive int; got 0"),
    (dict(ci=0.9, seed=1.5), TypeError, r"seed must be an int; got 1.5"),
    (dict(ci=0.9, reduce="none"), ValueError, r"ci needs reduced values; reduce='none'"),
    (dict(ci=0.9, ci_method="beta", reduce="median"), ValueError, r"ci_method='beta' is an interval of the mean"),
    (dict(keep_per_query=1), TypeError, r"keep_per_query must be a bool; got 1"),
])
def test_ci_option_errors(dense_scores, kwargs, error, message):
    preds, target = dense_scores
    with pytest.raises(error, match=message):
        evaluate_scores(preds, target, ["hit_rate@1"], **kwargs)


def test_evaluate_embeddings_ci_per_category(embeddings_labels):
    x, labels = embeddings_labels
    categories = (torch.arange(60) % 2).tolist()
    r = evaluate_embeddings(x, labels, ["cmc@1", "map@r"], ci=0.9, categories=categories, keep_per_query=True)
    assert set(r.ci) == {"cmc@1", "map@r", "cmc@1/0", "cmc@1/1", "map@r/0", "map@r/1"}
    per_query = torch.stack([r.per_query["cmc@1"], r.per_query["map@r"]], 1)
    groups = [(str(c), torch.tensor([i for i in range(60) if categories[i] == c])) for c in (0, 1)]
    ref = intervals(per_query, ["cmc@1", "map@r"], 0.9, groups=groups)
    for k, v in ref.items():
        assert torch.equal(torch.stack(r.ci[k]), torch.stack(v))
    assert r.query_ids is None  # no ids given: positions
    with pytest.raises(ValueError, match=r"ci_method='beta' is not available with per_class='macro'"):
        evaluate_embeddings(x, labels, ["cmc@1"], ci=0.9, ci_method="beta", per_class="macro")


@pytest.mark.parametrize("per_class", ["macro", "all"])
def test_per_class_intervals_equal_a_loop(embeddings_labels, per_class):
    x, labels = embeddings_labels
    labels = labels.clone()
    labels[labels == 4] = 3  # classes of different sizes
    keys = ["cmc@1", "map@r"]
    r = evaluate_embeddings(x, labels, keys, ci=0.9, per_class=per_class, n_resamples=200, seed=2)
    values = torch.stack([evaluate_embeddings(x, labels, [k], reduce="none")[k] for k in keys], 1).numpy()
    g = torch.Generator().manual_seed(2)
    draws = torch.randint(60, (200, 60), generator=g).numpy()
    lab = labels.numpy()
    for j, k in enumerate(keys):
        macro = []
        for d in draws:
            per = [values[d[lab[d] == c], j].mean() for c in np.unique(lab) if (lab[d] == c).any()]
            macro.append(np.mean(per))
        low, high = np.percentile(macro, [5, 95])
        assert r.ci[k][0].item() == pytest.approx(low, abs=1e-12)
        assert r.ci[k][1].item() == pytest.approx(high, abs=1e-12)
        assert r.ci[k][0] <= r[k] <= r.ci[k][1]
        if per_class == "all":
            for c in np.unique(lab):
                stat = [values[d[lab[d] == c], j].mean() for d in draws if (lab[d] == c).any()]
                ref = np.percentile(stat, [5, 95])
                got = [t.item() for t in r.ci[f"{k}/class={c}"]]
                assert got == pytest.approx(list(ref), abs=1e-12)


def test_empty_queries_follow_empty(dense_scores):
    """empty='skip': skipped queries are drawn but not counted; 'zero': they count as 0."""
    preds, target = dense_scores  # row 0 has no relevant item
    skip = evaluate_scores(preds, target, ["recall@3"], ci=0.9, keep_per_query=True)
    zero = evaluate_scores(preds, target, ["recall@3"], ci=0.9, keep_per_query=True, empty="zero")
    assert math.isnan(skip.per_query["recall@3"][0].item()) and zero.per_query["recall@3"][0].item() == 0.0
    ref_skip = _loop_reference(skip.per_query["recall@3"].unsqueeze(1).numpy(), 0.9, 1000, 0, "mean")[0]
    ref_zero = _loop_reference(zero.per_query["recall@3"].unsqueeze(1).numpy(), 0.9, 1000, 0, "mean")[0]
    assert [x.item() for x in skip.ci["recall@3"]] == pytest.approx(ref_skip, abs=1e-12)
    assert [x.item() for x in zero.ci["recall@3"]] == pytest.approx(ref_zero, abs=1e-12)


def test_no_queries_give_nan_intervals():
    r = aggregate(torch.empty(0, 1, dtype=torch.float64), ["mrr"], ci=0.9)
    assert all(math.isnan(x.item()) for x in r.ci["mrr"])


# -- per-query values and worst queries -------------------------------------------------------

def test_per_query_and_worst_dense(dense_scores):
    preds, target = dense_scores
    r = evaluate_scores(preds, target, ["ndcg@5", "recall@3"], keep_per_query=True)
    none = evaluate_scores(preds, target, ["ndcg@5", "recall@3"], reduce="none")
    for k in ("ndcg@5", "recall@3"):
        assert r.per_query[k].dtype == torch.float64
        torch.testing.assert_close(r.per_query[k], none[k], equal_nan=True)
    ids, values = r.worst("recall@3", 4)
    v = none["recall@3"].tolist()
    expected = sorted((x, i) for i, x in enumerate(v) if not math.isnan(x))[:4]  # value, then position
    assert ids.tolist() == [i for _, i in expected] and values.tolist() == [x for x, _ in expected]
    assert r.worst("recall@3", 100)[0].numel() == 7  # row 0 skipped (NaN) is never listed
    assert evaluate_scores(preds, target, ["ndcg@5"]).per_query == {}  # kept only when asked


def test_worst_with_flat_ids():
    indexes = torch.tensor([30, 30, 10, 10, 20, 20, 40, 40])
    preds = torch.tensor([0.9, 0.1, 0.2, 0.8, 0.5, 0.6, 0.3, 0.7])
    target = torch.tensor([1, 0, 1, 0, 1, 0, 0, 0])
    r = evaluate_scores(preds, target, ["mrr"], indexes=indexes, keep_per_query=True)
    assert r.query_ids.tolist() == [10, 20, 30, 40]
    assert r.per_query["mrr"].tolist()[:3] == [0.5, 0.5, 1.0] and math.isnan(r.per_query["mrr"][3].item())
    ids, values = r.worst("mrr", 2)
    assert ids.tolist() == [10, 20] and values.tolist() == [0.5, 0.5]


def test_worst_errors():
    r = MetricResults()
    with pytest.raises(KeyError, match=r"no per-query values of 'mrr'; evaluate with keep_per_query=True"):
        r.worst("mrr", 3)
    r.per_query["mrr"] = torch.tensor([1.0])
    with pytest.raises(ValueError, match=r"n must be an int >= 0; got -1"):
        r.worst("mrr", -1)


def test_embeddings_per_query_ids(embeddings_labels):
    x, labels = embeddings_labels
    ids = torch.arange(100, 160)
    r = evaluate_embeddings(x, labels, ["cmc@1"], query_ids=ids, keep_per_query=True)
    assert torch.equal(r.query_ids, ids)
    worst_ids, worst_values = r.worst("cmc@1", 3)
    assert set(worst_ids.tolist()) <= set(ids.tolist())
    assert worst_values.tolist() == sorted(r.per_query["cmc@1"].tolist())[:3]


# -- neighbours -----------------------------------------------------------------------------

def _reference_neighbours(similarity: torch.Tensor, k: int):
    """Rank by similarity, equal similarities by lower gallery position (a stable sort)."""
    order = torch.sort(-similarity, dim=1, stable=True).indices[:, :k]
    return order, similarity.gather(1, order)


@pytest.mark.parametrize("distance", ["cosine", "dot", "euclidean", "squared_euclidean"])
@pytest.mark.parametrize("metrics", [["cmc@1"], ["map@r", "ndcg@20"], ["mrr"]])
def test_neighbours_equal_brute_force(embeddings_labels, distance, metrics):
    x, labels = embeddings_labels
    q, g = x[:25], x[25:]
    r = evaluate_embeddings(q, labels[:25], metrics, gallery=g, gallery_labels=labels[25:], distance=distance,
                            return_neighbours=6, memory_budget=1 << 12)  # several chunks
    sim = {"cosine": lambda: torch.nn.functional.normalize(q, dim=1) @ torch.nn.functional.normalize(g, dim=1).T,
           "dot": lambda: q @ g.T, "euclidean": lambda: -torch.cdist(q, g),
           "squared_euclidean": lambda: -torch.cdist(q, g) ** 2}[distance]()
    ref_idx, ref_scores = _reference_neighbours(sim, 6)
    idx, scores = r.neighbours
    assert idx.shape == (25, 6) and idx.dtype == torch.int64 and scores.dtype == torch.float64
    assert torch.equal(idx, ref_idx)
    torch.testing.assert_close(scores, ref_scores, rtol=1e-5, atol=1e-5)


def test_neighbours_hamming_ties_and_ids():
    codes = torch.tensor([[0, 0, 1, 1], [0, 0, 1, 1], [1, 1, 1, 1], [0, 0, 1, 1], [1, 0, 0, 0]])
    labels = torch.tensor([0, 0, 1, 0, 1])
    ids = torch.tensor([10, 11, 12, 13, 14])
    r = evaluate_embeddings(codes, labels, ["cmc@1"], distance="hamming", query_ids=ids, return_neighbours=4)
    hamming = (codes.unsqueeze(1) != codes.unsqueeze(0)).sum(-1).to(torch.float64)
    sim = -hamming
    sim.fill_diagonal_(float("-inf"))  # an item never retrieves itself
    ref_idx, ref_scores = _reference_neighbours(sim, 4)
    idx, scores = r.neighbours
    assert torch.equal(idx, ids[ref_idx]) and torch.equal(scores, ref_scores)  # ids, ties by position


def test_neighbours_past_the_candidates_and_errors(embeddings_labels):
    x, labels = embeddings_labels
    r = evaluate_embeddings(x[:2], labels[:2], ["cmc@1"], gallery=x[2:5], gallery_labels=labels[2:5],
                            query_ids=torch.tensor([7, 8]), gallery_ids=torch.tensor([7, 1, 2]), return_neighbours=3)
    idx, scores = r.neighbours
    assert idx[0, 2].item() == -1 and scores[0, 2].item() == float("-inf")  # id 7 is excluded for query 7
    assert set(idx[0, :2].tolist()) == {1, 2} and sorted(idx[1].tolist()) == [1, 2, 7]
    with pytest.raises(ValueError, match=r"return_neighbours=9 exceeds the gallery size 3"):
        evaluate_embeddings(x[:2], labels[:2], ["cmc@1"], gallery=x[2:5], gallery_labels=labels[2:5],
                            return_neighbours=9)
    with pytest.raises(ValueError, match=r"return_neighbours must be a positive int"):
        evaluate_embeddings(x, labels, ["cmc@1"], return_neighbours=2.5)
    assert evaluate_embeddings(x, labels, ["cmc@1"]).neighbours is None


def test_distributed_entry_in_one_process(embeddings_labels):
    from retrieval_core import distributed as D

    x, labels = embeddings_labels
    one = evaluate_embeddings(x, labels, ["cmc@1", "map@r"], ci=0.9, keep_per_query=True, return_neighbours=3)
    got = D.evaluate_embeddings_across_ranks(x, labels, ["cmc@1", "map@r"], ci=0.9, keep_per_query=True,
                                             return_neighbours=3)
    for k in one.ci:
        assert torch.equal(torch.stack(got.ci[k]), torch.stack(one.ci[k]))
    assert torch.equal(got.neighbours[0], one.neighbours[0])
    with pytest.raises(ValueError, match=r"return_neighbours needs shard_gallery=False"):
        D.evaluate_embeddings_across_ranks(x, labels, ["cmc@1"], return_neighbours=3, shard_gallery=True)
    with pytest.raises(ValueError, match=r"ci must be a level in \(0, 1\)"):
        D.evaluate_split(x, labels, ["cmc@1"], ci=3)


def test_prefixed_keys_do_not_change_the_plain_intervals():
    """Keys such as "erc:cmc@1" (confidence summaries) are not means of per-query values:
    their intervals come from confidence.py; the plain keys' are the same as alone."""
    v = torch.tensor([[1.0, 1.0], [0.0, 0.0], [1.0, 1.0]], dtype=torch.float64)
    r = aggregate(v, ["cmc@1", "erc:cmc@1"], ci=0.9, keep_per_query=True, confidence=torch.tensor([0.3, 0.2, 0.1]))
    assert list(r.ci) == ["cmc@1", "erc:cmc@1"]
    assert torch.equal(torch.stack(r.ci["cmc@1"]), torch.stack(intervals(v[:, :1], ["cmc@1"], 0.9)["cmc@1"]))


@pytest.mark.parametrize("ties", ["stable", "expected", "optimistic", "pessimistic"])
def test_neighbours_follow_the_tie_order(ties):
    g = torch.Generator().manual_seed(4)
    codes = torch.randint(0, 2, (40, 3), generator=g)  # 8 distinct codes: many ties
    labels = torch.randint(0, 3, (40,), generator=g)
    r = evaluate_embeddings(codes, labels, ["cmc@1", "precision@5"], distance="hamming", ties=ties,
                            return_neighbours=7)
    sim = -(codes.unsqueeze(1) != codes.unsqueeze(0)).sum(-1).to(torch.float64)
    sim.fill_diagonal_(float("-inf"))
    relevant = (labels.unsqueeze(1) == labels.unsqueeze(0)).to(torch.float64)
    position = torch.arange(40, dtype=torch.float64).expand(40, 40)
    # lexicographic: similarity, then (optimistic) relevant first / (pessimistic) last, then position
    tie_key = {"optimistic": -relevant, "pessimistic": relevant}.get(ties, torch.zeros_like(relevant))
    order = torch.stack([torch.tensor(sorted(range(40), key=lambda j: (-sim[i, j].item(), tie_key[i, j].item(),
                                                                        position[i, j].item())))
                         for i in range(40)])[:, :7]
    idx, scores = r.neighbours
    assert torch.equal(idx, order)
    assert torch.equal(scores, sim.gather(1, order))


def test_flat_scores_with_categories_and_ci():
    g = torch.Generator().manual_seed(8)
    indexes = torch.randint(0, 30, (400,), generator=g)
    preds = torch.rand(400, generator=g)
    target = torch.rand(400, generator=g) < 0.3
    cats = indexes % 3  # one category per query
    r = evaluate_scores(preds, target, ["ndcg@5", "hit_rate@3"], indexes=indexes, categories=cats, ci=0.9,
                        keep_per_query=True, n_resamples=300)
    ids = r.query_ids
    assert torch.equal(ids, torch.unique(indexes))
    per_query = torch.stack([r.per_query["ndcg@5"], r.per_query["hit_rate@3"]], 1)
    groups = [(str(c), (ids % 3 == c).nonzero().squeeze(1)) for c in range(3)]
    ref = intervals(per_query, ["ndcg@5", "hit_rate@3"], 0.9, n_resamples=300, groups=groups)
    assert set(r.ci) == set(ref)
    for k, v in ref.items():
        assert torch.equal(torch.stack(r.ci[k]), torch.stack(v))


def test_beta_under_expected_ties_names_the_key():
    preds = torch.tensor([[0.5, 0.5, 0.1], [0.9, 0.5, 0.5]])
    target = torch.tensor([[1, 0, 0], [0, 1, 0]])
    with pytest.raises(ValueError, match=r"needs per-query values of 0 or 1; 'hit_rate@1' has others \(tie averaging"):
        evaluate_scores(preds, target, ["hit_rate@1"], ties="expected", ci=0.9, ci_method="beta")
    r = evaluate_scores(preds, target, ["hit_rate@1"], ties="optimistic", ci=0.9, ci_method="beta")
    assert r["hit_rate@1"].item() == 0.5 and r.ci["hit_rate@1"][0] < 0.5 < r.ci["hit_rate@1"][1]


def test_worst_is_the_highest_where_lower_is_better():
    """``worst`` of fall_out, popularity, gini, fnmr: the highest values (the hostile tester of
    session 36: it gave the best queries of a lower-is-better key)."""
    import retrieval_core as rc
    from retrieval_core.metrics.direction import LOWER_IS_BETTER
    from retrieval_core.metrics.spec import REGISTRY

    assert LOWER_IS_BETTER == {name for name, spec in REGISTRY.items() if spec.lower_is_better}
    topk = torch.tensor([[0, 1], [2, 3], [1, 0]])
    truth = torch.tensor([[0, 1, 2], [0, 0, 1]])  # user 1's item is not in its list
    r = rc.evaluate_topk(topk, truth, ["popularity@2", "precision@2"], keep_per_query=True,
                         item_popularity=torch.tensor([1.0, 2.0, 8.0, 4.0]))
    ids, values = r.worst("popularity@2", 2)
    assert ids.tolist() == [1, 0] and values.tolist() == [6.0, 1.5]  # query 2 ties query 0: query order
    ids, values = r.worst("precision@2", 1)
    assert values.tolist() == [0.0] and ids.tolist() == [1]
