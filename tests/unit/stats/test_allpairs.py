"""All-pairs comparison of several runs: Tukey's HSD against scipy.stats.tukey_hsd, the paired
(two-way ANOVA) form against the formula computed with numpy, the paired tests against compare()
pair by pair with Holm's step-down computed by hand, the effect size, the compact letter display
(two runs share a letter exactly when they are not separated), properties (adjusted >= raw,
order kept, either order of a pair), and bad input."""
from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

stats = pytest.importorskip("scipy.stats")

from retrieval_core import AllPairs, compare, compare_all  # noqa: E402
from retrieval_core.stats.allpairs import letter_groups  # noqa: E402


def _runs(k, q, seed, spread=0.05):
    rng = np.random.default_rng(seed)
    base = rng.random(q)
    return {f"r{i}": np.clip(base + spread * i + 0.15 * rng.standard_normal(q), 0, 1) for i in range(k)}


def _holm(p):
    """Holm's adjusted p-values, written out: sort, multiply the i-th smallest by m - i, running max, cap."""
    p = np.asarray(p, dtype=float)
    order = np.argsort(p, kind="stable")
    m = len(p)
    out = np.empty(m)
    running = 0.0
    for i, j in enumerate(order):
        running = max(running, min(1.0, (m - i) * p[j]))
        out[j] = running
    return out


@pytest.mark.parametrize("k,q,seed", [(3, 10, 0), (4, 50, 1), (5, 200, 2), (3, 1000, 3), (5, 7, 4)])
@pytest.mark.parametrize("level", [0.95, 0.9])
def test_tukey_equals_scipy(k, q, seed, level):
    runs = _runs(k, q, seed)
    out = compare_all(runs, method="tukey", ci=level)
    ref = stats.tukey_hsd(*runs.values())
    ci = ref.confidence_interval(level)
    names = list(runs)
    assert out.test is None and out.n == q and out.method == "tukey"
    for (i, a), (j, b) in itertools.combinations(enumerate(names), 2):
        c = out.pairs[(a, b)]
        assert c.p_value == c.adjusted_p_value
        assert c.p_value == pytest.approx(ref.pvalue[i, j], rel=1e-6, abs=1e-9)
        assert c.mean_difference == pytest.approx(ref.statistic[i, j], abs=1e-12)
        assert c.ci == pytest.approx((ci.low[i, j], ci.high[i, j]), rel=1e-8, abs=1e-12)


@pytest.mark.parametrize("k,q,seed", [(3, 10, 5), (4, 60, 6), (5, 300, 7)])
def test_paired_tukey_is_the_two_way_anova_formula(k, q, seed):
    runs = _runs(k, q, seed, spread=0.02)
    x = np.column_stack(list(runs.values()))
    residual = x - x.mean(0) - x.mean(1, keepdims=True) + x.mean()
    df = (k - 1) * (q - 1)
    se = np.sqrt((residual ** 2).sum() / df / q)
    out = compare_all(runs, method="tukey_paired")
    names = list(runs)
    for (i, a), (j, b) in itertools.combinations(enumerate(names), 2):
        expected = stats.studentized_range.sf(abs(x[:, i].mean() - x[:, j].mean()) / se, k, df)
        assert out.pairs[(a, b)].p_value == pytest.approx(expected, rel=1e-6, abs=1e-9)
    # the pairing removes the query effect: never less separating than the one-way form here
    one_way = compare_all(runs, method="tukey")
    assert all(out.pairs[p].p_value <= one_way.pairs[p].p_value for p in out.pairs)


@pytest.mark.parametrize("q,seed", [(5, 11), (40, 12), (500, 13)])
def test_two_runs_tukey_is_the_t_test(q, seed):
    # k = 2: the studentized range of two means is sqrt(2) |t|; one-way Tukey is the pooled two-sample
    # t-test, the two-way form the paired t-test (its residual variance is var(a - b) / 2)
    runs = _runs(2, q, seed)
    a, b = runs.values()
    assert compare_all(runs, method="tukey").pair("r0", "r1").p_value == pytest.approx(
        stats.ttest_ind(a, b).pvalue, rel=1e-9, abs=1e-15)
    assert compare_all(runs, method="tukey_paired").pair("r0", "r1").p_value == pytest.approx(
        stats.ttest_rel(a, b).pvalue, rel=1e-9, abs=1e-15)


@pytest.mark.parametrize("method", ["holm", "bonferroni", None])
@pytest.mark.parametrize("test", ["paired_t", "permutation", "bootstrap"])
def test_paired_tests_adjusted_over_the_pairs(method, test):
    runs = _runs(4, 30, 8, spread=0.03)
    out = compare_all(runs, method=method, test=test, n_resamples=2000, seed=3)
    pairs = list(itertools.combinations(runs, 2))
    raw = [compare(runs[a], runs[b], test=test, n_resamples=2000, seed=3).p_value for a, b in pairs]
    m = len(raw)
    expected = {"holm": _holm(raw), "bonferroni": np.minimum(1.0, np.array(raw) * m), None: np.array(raw)}[method]
    assert out.test == test and out.method == method
    for (a, b), p, adj in zip(pairs, raw, expected):
        c = out.pairs[(a, b)]
        assert c.p_value == p and c.adjusted_p_value == pytest.approx(adj, abs=1e-15)
        assert c.significant == (c.adjusted_p_value < 0.05)


def test_effect_size_is_cohens_dz():
    runs = _runs(3, 40, 9)
    out = compare_all(runs, method="tukey")
    for (a, b), c in out.pairs.items():
        d = runs[a] - runs[b]
        assert c.effect_size == pytest.approx(d.mean() / d.std(ddof=1), rel=1e-12)
    same = {"x": [0.25, 0.5, 0.75], "y": [0.25, 0.5, 0.75], "z": [0.5, 0.75, 1.0]}
    out = compare_all(same, method="tukey_paired")  # no residual spread at all
    assert out.pair("x", "y").effect_size == 0.0 and out.pair("x", "y").p_value == 1.0
    assert out.pair("z", "x").effect_size == float("inf") and out.pair("z", "x").p_value == 0.0
    assert out.better == {"x": [], "y": [], "z": ["x", "y"]} and out.groups == {"x": "b", "y": "b", "z": "a"}


def test_queries_with_a_nan_are_left_out_of_every_pair():
    runs = _runs(3, 20, 10)
    holed = {k: v.copy() for k, v in runs.items()}
    holed["r1"][[2, 7]] = np.nan
    holed["r2"][11] = np.nan
    keep = np.ones(20, bool)
    keep[[2, 7, 11]] = False
    for method in ("tukey", "holm"):
        got = compare_all(holed, method=method, test="paired_t")
        ref = compare_all({k: v[keep] for k, v in runs.items()}, method=method, test="paired_t")
        assert got.n == 17 and got.pairs == ref.pairs and got.means == ref.means


def test_lists_of_floats_are_read_as_float64():
    a, b = [0.1, 0.7, 0.3, 0.9], [0.2, 0.3, 0.35, 0.6]
    exact = sum(x - y for x, y in zip(a, b)) / 4
    assert compare(a, b, test="paired_t").mean_difference == pytest.approx(exact, abs=1e-16)
    out = compare_all({"a": a, "b": b}, method="tukey")
    assert out.pair("a", "b").mean_difference == pytest.approx(exact, abs=1e-16)
    assert out.means["a"] == pytest.approx(sum(a) / 4, abs=1e-16)


def test_result_and_either_order():
    runs = {"a": torch.tensor([0.2, 0.4, 0.5, 0.1]), "b": [0.3, 0.5, 0.7, 0.2], "c": np.array([0.2, 0.1, 0.3, 0.4])}
    out = compare_all(runs, method="holm", test="paired_t")
    assert isinstance(out, AllPairs) and out.runs == ("a", "b", "c") and list(out.pairs) == [
        ("a", "b"), ("a", "c"), ("b", "c")]
    ab, ba = out.pair("a", "b"), out.pair("b", "a")
    assert ba.mean_difference == -ab.mean_difference and ba.ci == (-ab.ci[1], -ab.ci[0])
    assert ba.p_value == ab.p_value and ba.effect_size == -ab.effect_size
    with pytest.raises(KeyError, match="no pair of runs 'a' and 'x'"):
        out.pair("a", "x")


@settings(max_examples=30, deadline=None)
@given(st.integers(2, 5), st.integers(3, 25), st.integers(0, 10**6),
       st.sampled_from(["holm", "bonferroni", None, "tukey", "tukey_paired"]))
def test_properties(k, q, seed, method):
    runs = _runs(k, q, seed, spread=0.04)
    out = compare_all(runs, method=method, test="paired_t")
    raw = [c.p_value for c in out.pairs.values()]
    adj = [c.adjusted_p_value for c in out.pairs.values()]
    assert all(0.0 <= p <= a <= 1.0 for p, a in zip(raw, adj))  # adjusted >= raw
    for i, j in itertools.permutations(range(len(raw)), 2):  # the adjustment keeps the order
        if raw[i] < raw[j]:
            assert adj[i] <= adj[j]
    # another order of the runs: the same pairs, the same p-values
    names = list(runs)[::-1]
    back = compare_all({n: runs[n] for n in names}, method=method, test="paired_t")
    for (a, b), c in out.pairs.items():
        other = back.pair(a, b)
        assert other.p_value == pytest.approx(c.p_value, rel=1e-9, abs=1e-15)
        assert other.adjusted_p_value == pytest.approx(c.adjusted_p_value, rel=1e-9, abs=1e-15)
        assert other.mean_difference == pytest.approx(c.mean_difference, abs=1e-12)
    # the letters say exactly which pairs are separated; better[] lists the separated lower ones
    for (a, b), c in out.pairs.items():
        assert (not set(out.groups[a]) & set(out.groups[b])) == c.significant
        low = b if c.mean_difference > 0 else a
        assert (low in out.better[a if low == b else b]) == c.significant


@settings(max_examples=100, deadline=None)
@given(st.integers(2, 8).flatmap(lambda k: st.tuples(
    st.just(k), st.lists(st.tuples(st.integers(0, k - 1), st.integers(0, k - 1)), max_size=20),
    st.lists(st.floats(0, 1), min_size=k, max_size=k))))
def test_letter_groups_share_a_letter_exactly_when_not_separated(case):
    k, pairs, values = case
    names = [f"n{i}" for i in range(k)]
    separated = {frozenset((names[i], names[j])) for i, j in pairs if i != j}
    groups = letter_groups(names, dict(zip(names, values)), [tuple(sorted(p)) for p in separated])
    assert all(groups[n] for n in names)
    for a, b in itertools.combinations(names, 2):
        assert (not set(groups[a]) & set(groups[b])) == (frozenset((a, b)) in separated)
    best = max(names, key=lambda n: (values[names.index(n)], -names.index(n)))
    assert "a" in groups[best]


@pytest.mark.parametrize("runs,options,error,match", [
    ({"a": [0.1, 0.2]}, {}, ValueError, "compare_all needs at least 2 runs; got 1"),
    ({}, {}, ValueError, "at least 2 runs; got 0"),
    ([[0.1, 0.2], [0.3, 0.4]], {}, TypeError, "runs must be a mapping"),
    ({"a": [0.1, 0.2, 0.3], "b": [0.1, 0.2]}, {}, ValueError,
     r"the runs must hold the values of the same queries; got different numbers of values \(a: 3, b: 2\)"),
    ({"a": [0.1, float("nan"), 0.3], "b": [0.1, 0.2, float("nan")]}, {}, ValueError,
     r"the runs have 1 queries where every run has a value \(not NaN\); comparing them needs at least 2"),
    ({"a": [0.1, float("inf")], "b": [0.1, 0.2]}, {}, ValueError, r"runs\['a'\] holds inf"),
    ({"a": [[0.1, 0.2]], "b": [[0.1, 0.2]]}, {}, ValueError, r"runs\['a'\] must be 1-D"),
    ({"a": ["x", "y"], "b": [0.1, 0.2]}, {}, TypeError, r"runs\['a'\] must be a 1-D tensor"),
    ({1: [0.1, 0.2], "1": [0.1, 0.3]}, {}, ValueError, "run names must be distinct as text"),
    ({"a": [0.1, 0.2], "b": [0.1, 0.3]}, {"method": "tukey-kramer"}, ValueError, "method must be one of"),
    ({"a": [0.1, 0.2], "b": [0.1, 0.3]}, {"test": "wilcoxon"}, ValueError, "test must be one of"),
    ({"a": [0.1, 0.2], "b": [0.1, 0.3]}, {"alpha": 1.0}, ValueError, r"alpha must be a number in \(0, 1\)"),
    ({"a": [0.1, 0.2], "b": [0.1, 0.3]}, {"ci": 1.5}, ValueError, "ci"),
])
def test_bad_input(runs, options, error, match):
    with pytest.raises(error, match=match):
        compare_all(runs, **options)
