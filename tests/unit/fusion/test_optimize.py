"""optimize_fusion and its grid: the grid's points, the best weights against a direct evaluation of each
candidate, ties going to the last candidate in grid order (as ranx's ``>=``), and the refusals."""
from __future__ import annotations

import math

import pytest

pytest.importorskip("numpy")
from retrieval_core.fusion import fuse, optimize_fusion, weight_grid  # noqa: E402
from retrieval_core.trec import evaluate_trec, qrels_from_dict, run_from_dict  # noqa: E402


def test_the_grid_holds_every_whole_split_in_lexicographic_order():
    assert weight_grid(2, 0.5) == [(0.0, 1.0), (0.5, 0.5), (1.0, 0.0)]
    for n, step in [(2, 0.1), (3, 0.1), (4, 0.25), (3, 0.05)]:
        m = round(1 / step)
        grid = weight_grid(n, step)
        assert len(grid) == math.comb(m + n - 1, n - 1) and grid == sorted(grid)
        assert all(abs(sum(w) - 1) < 1e-12 and min(w) >= 0 for w in grid)


def _case():
    qrels = qrels_from_dict({"q1": {"a": 1, "c": 2}, "q2": {"e": 1}, "q3": {"x": 1}})
    r1 = run_from_dict({"q1": {"a": 3.0, "b": 2.0, "c": 1.0}, "q2": {"e": 1.0, "f": 2.0}})
    r2 = run_from_dict({"q1": {"c": 0.9, "b": 0.5, "a": 0.1}, "q2": {"f": 5.0, "e": 4.0, "g": 1.0}})
    return qrels, [r1, r2]


def test_the_table_is_each_candidate_evaluated_and_the_best_is_its_maximum():
    qrels, runs = _case()
    best, table = optimize_fusion(qrels, runs, metric="map", step=0.25)
    assert list(table) == weight_grid(2, 0.25)
    for w, score in table.items():
        fused = fuse(runs, method="wsum", weights=w)
        assert score == evaluate_trec(qrels, fused, ["map"], complete=True).summary()["map"]
    top = max(table.values())
    assert table[best] == top and best == [w for w, s in table.items() if s == top][-1]  # the last of the best


def test_ties_go_to_the_last_candidate():
    qrels = qrels_from_dict({"q": {"a": 1}})
    same = run_from_dict({"q": {"a": 1.0, "b": 0.0}})
    best, table = optimize_fusion(qrels, [same, same], metric="ndcg@10", step=0.5)
    assert set(table.values()) == {1.0} and best == (1.0, 0.0)


def test_refusals():
    qrels, runs = _case()
    with pytest.raises(ValueError, match="searches the weights of method 'wsum'; got 'rrf'"):
        optimize_fusion(qrels, runs, method="rrf")
    with pytest.raises(ValueError, match="unknown fusion method 'x'"):
        optimize_fusion(qrels, runs, method="x")
    with pytest.raises(ValueError, match="1 / step must be a whole number; got step=0.3"):
        optimize_fusion(qrels, runs, step=0.3)
    with pytest.raises(ValueError, match=r"step must be in \(0, 1\]; got 0"):
        optimize_fusion(qrels, runs, step=0)
    with pytest.raises(ValueError, match="an empty list"):
        optimize_fusion(qrels, [])
    with pytest.raises(ValueError, match="unknown norm 'l1'"):
        optimize_fusion(qrels, runs, norm="l1")
