"""compare_all against ranx's ``compare`` (ranx.statistical_tests, which ``ranx.compare`` calls):

* ``stat_test="student"``: ranx runs ``scipy.stats.ttest_rel`` on each pair with no adjustment for the
  number of pairs: ``compare_all(method=None, test="paired_t")`` gives the same p-values (1e-9) and the
  same "better than" letters (ranx: ``p <= max_p`` and a higher mean; here ``p < alpha``: the same unless
  a p-value equals the level exactly);
* ``stat_test="tukey"``: ranx calls ``scipy.stats.tukey_hsd(*runs)``: ``compare_all(method="tukey")``
  gives the same p-values (1e-6; our studentized range is computed here, scipy's by its own
  integration) and letters;
* ``stat_test="fisher"`` is not compared: ranx's randomisation test draws its permutations from numba's
  generator, so only its distribution, not its p-values, could agree.

Per-query values are random (3 to 5 runs), and once those of ``ranx.evaluate`` on random qrels and runs,
through ``ranx.compare`` itself (its Report's p-values and superscripts).
"""
from __future__ import annotations

import itertools
import warnings

import pytest

np = pytest.importorskip("numpy")
ranx = pytest.importorskip("ranx")

from ranx.statistical_tests import compute_statistical_significance  # noqa: E402

from retrieval_core import compare_all  # noqa: E402

RANX_TESTS = {"student": dict(method=None, test="paired_t"), "tukey": dict(method="tukey")}


def _scores(k, q, seed):
    rng = np.random.default_rng(seed)
    base = rng.random(q)
    return {f"run_{i + 1}": np.clip(base + 0.05 * i + 0.2 * rng.standard_normal(q), 0, 1)
            for i in range(k)}


def _ranx_better(names, means, comparisons, metric):
    """ranx's superscripts (Report.get_superscript_for_table): the runs each one beats."""
    return {a: [b for b in names if b != a and comparisons[a, b][metric]["significant"] and means[a] > means[b]]
            for a in names}


@pytest.mark.parametrize("stat_test", list(RANX_TESTS))
@pytest.mark.parametrize("k,q,seed", [(3, 20, 0), (4, 50, 1), (5, 100, 2), (5, 12, 3), (3, 300, 4)])
def test_p_values_and_letters_equal_ranx(stat_test, k, q, seed):
    scores = _scores(k, q, seed)
    names = list(scores)
    metric_scores = {name: {"m": values} for name, values in scores.items()}
    max_p = 0.05
    ref = compute_statistical_significance(names, metric_scores, stat_test=stat_test, max_p=max_p)
    out = compare_all(scores, alpha=max_p, **RANX_TESTS[stat_test])
    for a, b in itertools.combinations(names, 2):
        assert out.pair(a, b).p_value == pytest.approx(float(ref[a, b]["m"]["p_value"]), rel=1e-6, abs=1e-9)
        assert out.pair(a, b).significant == bool(ref[a, b]["m"]["significant"])
    means = {n: float(np.mean(v)) for n, v in scores.items()}
    assert out.better == _ranx_better(names, means, ref, "m")


def _random_qrels_and_runs(n_runs, n_queries, seed):
    rng = np.random.default_rng(seed)
    qrels, runs = {}, [dict() for _ in range(n_runs)]
    for qi in range(n_queries):
        q = f"q{qi}"
        docs = [f"d{j}" for j in range(30)]
        qrels[q] = {d: int(rng.integers(1, 3)) for d in rng.choice(docs, size=int(rng.integers(1, 6)), replace=False)}
        for r, run in enumerate(runs):
            boost = 0.15 * r
            run[q] = {d: float(rng.random() + (boost if d in qrels[q] else 0.0)) for d in docs}
    return qrels, runs


@pytest.mark.parametrize("stat_test", list(RANX_TESTS))
def test_ranx_compare_report(stat_test):
    qrels, run_dicts = _random_qrels_and_runs(4, 60, 7)
    metrics = ["ndcg@10", "map@100"]
    runs = [ranx.Run(d, name=f"run_{i + 1}") for i, d in enumerate(run_dicts)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # numba's warnings
        report = ranx.compare(ranx.Qrels(qrels), runs, metrics=metrics, stat_test=stat_test, max_p=0.05, threads=1)
        per_query = {run.name: ranx.evaluate(ranx.Qrels(qrels), run, metrics, return_mean=False, threads=1)
                     for run in runs}
    names = [run.name for run in runs]
    for metric in metrics:
        values = {name: per_query[name][metric] for name in names}
        out = compare_all(values, alpha=0.05, **RANX_TESTS[stat_test])
        for a, b in itertools.combinations(names, 2):
            ref = report.comparisons[a, b][metric]
            assert out.pair(a, b).p_value == pytest.approx(float(ref["p_value"]), rel=1e-6, abs=1e-9)
        means = {n: report.results[n][metric] for n in names}
        assert out.better == _ranx_better(names, means, report.comparisons, metric)
        assert any(out.better.values())  # the boosts make some pairs separable
