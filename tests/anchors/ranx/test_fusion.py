"""fuse and optimize_fusion against ranx (``ranx.fuse``, ``ranx.optimize_fusion``) on the random runs of
tests/unit/fusion/cases.py: several runs with partially overlapping documents and queries, a query in
one run only (given to ranx as an empty result list in the other runs: ranx asks every run for the same
queries), a run with one document per query, negative scores.

* every fused score equals ranx's to 1e-9, per query and per doc, for every method x normalisation pair
  both have; ties (and negative scores) are on in the runs of the score-based pairs; the rank-based ones
  (rrf, rank normalisation) are compared on runs without ties within a run, because ranx ranks equal
  scores by its numba argsort (an order it leaves unspecified), we by docid descending (trec_eval's);
* CombMAX / CombMIN: ranx gives a document missing from a run the score -1e9 / +1e9 there, we take the
  largest / smallest score among the runs holding it; they differ once a score lies beyond 1e9 in size,
  as max normalisation makes of a query whose scores are all negative (divided by ranx's 1e-9 floor):
  that pair is cross-checked on positive scores, and the difference shown by a test;
* optimize_fusion picks ranx's weights on runs whose fused scores have no ties; where ranx's grid loses
  a point to float rounding (3 runs, step 0.1: ``0.2 + 0.7 + 0.1 != 1.0``), ours keeps it (a test shows it).

ranx compiles its numba kernels on first use (cached afterwards): each case is fused once per pair, with
tiny runs, and one thread.
"""
from __future__ import annotations

import warnings

import pytest

pytest.importorskip("numpy")
ranx = pytest.importorskip("ranx")

from retrieval_core.fusion import METHODS, NORMS, fuse, optimize_fusion, weight_grid  # noqa: E402
from retrieval_core.trec import qrels_from_dict, run_from_dict  # noqa: E402
from tests.unit.fusion.cases import assert_close, random_runs  # noqa: E402

WEIGHTS = [0.1, 0.4, 0.2, 0.3]


def _ranx_fuse(dicts, method, norm):
    queries = sorted({q for d in dicts for q in d})
    runs = [ranx.Run({q: dict(d.get(q, {})) for q in queries}) for d in dicts]
    params = {"weights": WEIGHTS} if method == "wsum" else {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # numba's type-safety warnings
        fused = ranx.fuse(runs, norm=norm, method=method, params=params)
    return {q: dict(docs) for q, docs in fused.to_dict().items()}


def _pairs(ties):
    for method in METHODS:
        for norm in NORMS:
            rank_based = method == "rrf" or norm == "rank"
            if (method == "rrf" and norm is not None) or (ties and rank_based):
                continue  # rrf ignores norm; ranx orders ties its own way (module doc)
            yield method, norm


@pytest.mark.parametrize("ties", [False, True])
def test_fused_scores_equal_ranx(ties):
    compared = 0
    for seed in (11, 12):
        full = random_runs(seed, ties=ties)
        common = set.intersection(*(set(d) for d in full))
        assert common
        for method, norm in _pairs(ties):
            dicts = full
            if norm == "zmuv":  # ranx's zmuv stops at an empty result list (module doc): common queries only
                dicts = [{q: r for q, r in d.items() if q in common} for d in full]
            if method in ("max", "min") and norm == "max":  # positive scores: ranx's +-1e9 stand-in (module doc)
                dicts = [{q: {doc: s + 20 for doc, s in r.items()} for q, r in d.items()} for d in full]
            runs = [run_from_dict(d) for d in dicts]  # each its own vocabulary
            ours = fuse(runs, method=method, norm=norm, weights=WEIGHTS if method == "wsum" else None)
            assert_close(ours.to_dict(), _ranx_fuse(dicts, method, norm))
            compared += 1
    assert compared == 2 * (35 if ties else 43)  # ties: 7 methods x 5 score norms; else rrf + 7 x 6


def _small_case(seed):
    """qrels and 2 runs over every query's 20 documents, continuous scores: fused scores without ties."""
    import random
    rng = random.Random(seed)
    qrels = {f"q{q}": {f"d{d}": rng.randint(0, 2) for d in rng.sample(range(20), 8)} for q in range(6)}
    runs = [{f"q{q}": {f"d{d}": rng.gauss(0, 1) for d in range(20)} for q in range(6)} for _ in range(2)]
    return qrels, runs


@pytest.mark.parametrize("seed", [3, 4])
def test_optimize_fusion_picks_ranx_weights(seed):
    qrels, runs = _small_case(seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        want = ranx.optimize_fusion(ranx.Qrels(qrels), [ranx.Run(r) for r in runs], norm="min-max", method="wsum",
                                    metric="ndcg@10", step=0.1, show_progress=False)["weights"]
    best, table = optimize_fusion(qrels_from_dict(qrels), [run_from_dict(r) for r in runs], norm="min-max",
                                  metric="ndcg@10", step=0.1)
    assert list(best) == list(want) and len(table) == 11


def test_our_grid_keeps_the_points_ranx_loses_to_rounding():
    from ranx.fusion_optimization.optimize_weights import get_possible_weights, get_trial_configs
    theirs = {tuple(map(float, w)) for w in get_trial_configs(get_possible_weights(0.1), 3)}
    ours = set(weight_grid(3, 0.1))
    assert len(ours) == 66 and theirs < ours  # every whole split of 10 tenths into 3
    assert ours - theirs == {(0.2, 0.7, 0.1), (0.3, 0.6, 0.1), (0.6, 0.3, 0.1), (0.7, 0.2, 0.1)}  # 0.2 + 0.7 + 0.1


def test_comb_max_and_min_ignore_missing_runs_where_ranx_puts_1e9():
    dicts = [{"q": {"a": -3.0, "b": -2.0}}, {"q": {"a": -1.0}}]  # max norm: -3e9, -2e9 ; -1e9 (guard 1e-9)
    ours = fuse([run_from_dict(d) for d in dicts], method="max", norm="max").to_dict()["q"]
    theirs = _ranx_fuse(dicts, "max", "max")["q"]
    assert ours["a"] == theirs["a"] == -1.0 / 1e-9
    assert ours["b"] == -2.0 / 1e-9 and theirs["b"] == -1e9  # b is missing from run 1: ranx's -1e9 wins
