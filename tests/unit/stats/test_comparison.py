"""Paired comparisons: the t test against scipy.stats.ttest_rel, the sign-flip test
against a brute force over every sign pattern and scipy.stats.permutation_test,
the bootstrap against a loop over the same resamples, Holm against the step-down
rule applied directly."""
from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from retrieval_core import Comparison, compare, compare_many
from retrieval_core.stats.comparison import adjust_p_values


def _pairs(n, effect, seed):
    rng = np.random.default_rng(seed)
    b = rng.random(n)
    a = np.clip(b + effect + 0.2 * rng.standard_normal(n), 0, 1)
    return a, b


@pytest.mark.parametrize("n,effect", [(5, 0.0), (12, 0.05), (40, 0.02), (300, 0.01), (2000, 0.0)])
@pytest.mark.parametrize("level", [0.9, 0.95])
def test_paired_t_equals_scipy(n, effect, level):
    a, b = _pairs(n, effect, n)
    r = compare(a, b, test="paired_t", ci=level)
    ref = stats.ttest_rel(a, b)
    low, high = ref.confidence_interval(level)
    assert isinstance(r, Comparison) and r.test == "paired_t" and r.n == n
    assert r.mean_difference == pytest.approx(np.mean(a - b), abs=1e-15)
    assert r.p_value == pytest.approx(ref.pvalue, rel=1e-9, abs=1e-14)
    assert r.ci == pytest.approx((low, high), rel=1e-9, abs=1e-14)


def _brute_force_sign_flip(d):
    observed = abs(np.mean(d))
    count = 0
    for signs in itertools.product((1.0, -1.0), repeat=len(d)):
        count += abs(np.mean(np.array(signs) * d)) >= observed - 1e-12
    return count / 2 ** len(d)


@pytest.mark.parametrize("seed", range(4))
def test_permutation_exact_for_small_n(seed):
    a, b = _pairs(9, 0.1 * seed, seed)
    b[3] = a[3]  # a zero difference: both its signs tie
    r = compare(a, b)  # 2**9 <= 10000: every sign pattern
    assert r.p_value == _brute_force_sign_flip(a - b)
    ref = stats.permutation_test((a, b), lambda x, y: np.mean(x - y), permutation_type="samples",
                                 n_resamples=np.inf, alternative="two-sided")
    assert r.p_value == pytest.approx(ref.pvalue, abs=1e-12)


def test_permutation_randomised_close_to_exact():
    a, b = _pairs(15, 0.08, 1)
    exact = _brute_force_sign_flip(a - b)
    r = compare(a, b, n_resamples=20000, seed=3)  # 2**15 > 20000: random sign flips
    se = math.sqrt(exact * (1 - exact) / 20000)
    assert abs(r.p_value - exact) < 4 * se + 1 / 20001
    assert r.p_value >= 1 / 20001  # the +1 correction: never 0
    strong = compare(np.ones(50), np.zeros(50), n_resamples=999)
    assert strong.p_value == pytest.approx(1 / 1000)


def test_bootstrap_equals_loop_and_p_value():
    a, b = _pairs(60, 0.03, 2)
    d = a - b
    r = compare(a, b, test="bootstrap", n_resamples=500, seed=9)
    g = torch.Generator().manual_seed(9)
    draws = torch.randint(60, (500, 60), generator=g).numpy()
    means = np.array([d[i].mean() for i in draws])
    assert r.ci == pytest.approx(tuple(np.percentile(means, [2.5, 97.5])), abs=1e-12)
    hits = np.sum(np.abs(means - d.mean()) >= abs(d.mean()) - 1e-12)
    assert r.p_value == pytest.approx((1 + hits) / 501)


def test_permutation_interval_is_the_bootstrap_one():
    a, b = _pairs(300, 0.02, 4)
    p = compare(a, b, test="permutation", n_resamples=400)
    # the interval is a percentile bootstrap interval: it holds the mean difference
    assert p.ci[0] < p.mean_difference < p.ci[1]
    t = compare(a, b, test="paired_t")
    assert p.ci == pytest.approx(t.ci, abs=0.2 * (t.ci[1] - t.ci[0]))


def test_nan_pairs_are_skipped():
    a = torch.tensor([0.5, float("nan"), 0.7, 0.2, 0.9, 0.4], dtype=torch.float64)
    b = torch.tensor([0.4, 0.3, float("nan"), 0.1, 0.5, 0.6], dtype=torch.float64)
    r = compare(a, b, test="paired_t")  # (a list of Python floats is read as float64)
    ref = compare([0.5, 0.2, 0.9, 0.4], [0.4, 0.1, 0.5, 0.6], test="paired_t")
    assert r == ref and r.n == 4


def test_same_seed_same_result():
    a, b = _pairs(100, 0.01, 5)
    assert compare(a, b, seed=1) == compare(a, b, seed=1)
    assert compare(a, b, seed=1, test="bootstrap") != compare(a, b, seed=2, test="bootstrap")


def test_constant_differences():
    r = compare([1.0, 2.0, 3.0], [1.0, 2.0, 3.0], test="paired_t")
    assert (r.mean_difference, r.ci, r.p_value) == (0.0, (0.0, 0.0), 1.0)
    r = compare([1.0, 2.0], [0.0, 1.0], test="paired_t")
    assert (r.mean_difference, r.p_value) == (1.0, 0.0)


@pytest.mark.parametrize("args,kwargs,error,message", [
    (([1.0, 2.0], [1.0]), {}, ValueError, r"a and b must hold the values of the same queries: got 2 and 1 values"),
    (([float("nan")], [1.0]), {}, ValueError, r"no query where both values are defined"),
    (([1.0], [0.5]), dict(test="paired_t"), ValueError, r"paired t test needs at least 2 paired queries; got 1"),
    (([1.0, 2.0], [1.0, 0.0]), dict(test="wilcoxon"), ValueError,
     r"test must be one of \['permutation', 'paired_t', 'bootstrap'\]; got 'wilcoxon'"),
    (([1.0, 2.0], [1.0, 0.0]), dict(ci=95), ValueError, r"ci must be a level in \(0, 1\)"),
    (([1.0, 2.0], [1.0, 0.0]), dict(n_resamples=0), ValueError, r"n_resamples must be a positive int"),
    (([[1.0, 2.0]], [[1.0, 0.0]]), {}, ValueError, r"a must be 1-D \(one value per query\); got shape \(1, 2\)"),
    (([1.0, float("inf")], [1.0, 0.0]), {}, ValueError, r"a holds inf"),
    (("ab", [1.0, 0.0]), {}, TypeError, r"a must be a 1-D tensor or sequence of numbers"),
    (([True, False], [1.0, 0.0]), {}, TypeError, r"a must hold real numbers; got dtype torch.bool"),
])
def test_compare_errors(args, kwargs, error, message):
    with pytest.raises(error, match=message):
        compare(*args, **kwargs)


def _holm_by_rule(p, grid):
    """The Holm-adjusted p-value of each hypothesis: the smallest alpha of ``grid`` at which
    the step-down rule (reject the smallest while p_(i) <= alpha / (m - i)) rejects it."""
    m = len(p)
    order = sorted(range(m), key=lambda i: p[i])
    out = [1.0] * m
    for alpha in grid[::-1]:
        rejected = set()
        for rank, i in enumerate(order):
            if p[i] <= alpha / (m - rank):
                rejected.add(i)
            else:
                break
        for i in rejected:
            out[i] = alpha
    return out


def test_holm_equals_the_step_down_rule():
    rng = np.random.default_rng(0)
    grid = np.round(np.arange(1, 10001) / 10000, 4)
    for _ in range(20):
        p = list(np.round(rng.random(5) ** 3, 4))
        adjusted = adjust_p_values(dict(zip("abcde", p)), "holm")
        by_rule = _holm_by_rule(p, grid)
        assert [adjusted[k] for k in "abcde"] == pytest.approx(by_rule, abs=1e-4)


def test_holm_and_bonferroni_by_hand():
    p = {"x": 0.01, "y": 0.04, "z": 0.03}
    assert adjust_p_values(p, "holm") == pytest.approx({"x": 0.03, "y": 0.06, "z": 0.06})
    assert adjust_p_values(p, "bonferroni") == pytest.approx({"x": 0.03, "y": 0.12, "z": 0.09})
    assert adjust_p_values(p, None) == p
    with pytest.raises(ValueError, match=r"correction must be one of \['holm', 'bonferroni', None\]; got 'bh'"):
        adjust_p_values(p, "bh")


def test_compare_many():
    a, base = _pairs(80, 0.05, 1)
    c, _ = _pairs(80, 0.0, 2)
    systems = {"base": base, "a": a, "c": c}
    out = compare_many(systems, baseline="base", test="paired_t")
    raw = {k: compare(v, base, test="paired_t") for k, v in systems.items() if k != "base"}
    holm = adjust_p_values({k: r.p_value for k, r in raw.items()}, "holm")
    assert set(out) == {"a", "c"}
    for k in out:
        assert out[k].p_value == pytest.approx(holm[k])
        assert out[k].mean_difference == raw[k].mean_difference and out[k].ci == raw[k].ci
    with pytest.raises(ValueError, match=r"baseline 'zzz' is not one of the systems \['base', 'a', 'c'\]"):
        compare_many(systems, baseline="zzz")
    with pytest.raises(ValueError, match=r"needs the baseline and at least one other system"):
        compare_many({"base": base}, baseline="base")


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.floats(0, 1), st.floats(0, 1)), min_size=3, max_size=40),
       st.sampled_from(["permutation", "paired_t", "bootstrap"]))
def test_swapping_the_systems_mirrors_the_result(pairs, test):
    a = [p[0] for p in pairs]
    b = [p[1] for p in pairs]
    ab = compare(a, b, test=test, n_resamples=300)
    ba = compare(b, a, test=test, n_resamples=300)
    assert ba.mean_difference == pytest.approx(-ab.mean_difference, abs=1e-12)
    assert ba.p_value == pytest.approx(ab.p_value, abs=1e-12)
    assert ba.ci == pytest.approx((-ab.ci[1], -ab.ci[0]), abs=1e-12)
    assert 0 < ab.p_value <= 1 or (test == "paired_t" and ab.p_value == 0.0)


@pytest.mark.parametrize("test", ["permutation", "paired_t", "bootstrap"])
def test_result_holds_plain_python_numbers(test):
    a, b = _pairs(30, 0.02, 7)
    r = compare(torch.tensor(a), torch.tensor(b), test=test, n_resamples=np.int64(200), seed=np.int64(1),
                ci=np.float32(0.9))
    assert type(r.mean_difference) is float and type(r.p_value) is float and type(r.n) is int
    assert all(type(x) is float for x in r.ci) and isinstance(r.ci, tuple)
