"""evaluate_trec against trec_eval's own outputs (tests/anchors/trec_eval/data, every supported measure, per
query and in the summary, to 4 decimals) and against pytrec_eval on random qrels and runs."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch

pytest.importorskip("numpy")

from retrieval_core.trec import (  # noqa: E402
    evaluate_trec,
    qrels_from_dict,
    read_qrels,
    read_run,
    read_trec_eval_output,
    run_from_dict,
)
from tests.unit.trec.cases import random_case  # noqa: E402

DATA = Path(__file__).parent / "data"
SUPPORTED = ["official", "recall", "ndcg", "ndcg_cut", "map_cut", "success", "num_nonrel_judged_ret"]
CASES = {  # out file: (qrels, run, measures, options) as data/README.md lists the commands
    "out.test": ("qrels.test", "results.test", "official", {}),
    "out.test.a": ("qrels.test", "results.test", SUPPORTED, {}),
    "out.test.aq": ("qrels.test", "results.test", SUPPORTED, {}),
    "out.test.aqc": ("qrels.test", "results.trunc", SUPPORTED, {"complete": True}),
    "out.test.aqcM": ("qrels.test", "results.trunc", SUPPORTED, {"complete": True, "max_per_query": 100}),
    "out.test.aql": ("qrels.rel_level", "results.test", SUPPORTED, {"level": 2}),
    # its supported measures (ndcg_cut.23.4 read as trec_eval's atol reads it: 23)
    "out.test.meas_params": ("qrels.test", "results.test", ["iprec_at_recall..10,.20,.25,.75,.50", "P.5,7,3",
                                                            "recall.20,2000", "ndcg_cut.10,20,23.4", "success.2,5,20"],
                             {}),
}
PER_QUERY = ("out.test.aq", "out.test.aqc", "out.test.aqcM", "out.test.aql", "out.test.meas_params")


def _evaluate(name, **extra):
    qrels_file, run_file, measures, options = CASES[name]
    qrels = read_qrels(DATA / qrels_file)
    run = read_run(DATA / run_file, docs=qrels.docs)
    return evaluate_trec(qrels, run, measures, **options, **extra)


def _compared(name, ev):
    """``(query, measure, ours, trec_eval's)`` of every value both print, as 4-decimal text."""
    expected = read_trec_eval_output(DATA / name)
    got = dict(ev.per_query()) if name in PER_QUERY else {}
    got["all"] = ev.summary()
    assert set(got) == set(expected)
    out = []
    for query, row in got.items():
        assert set(row) <= set(expected[query]), (query, set(row) - set(expected[query]))
        out += [(query, m, f"{v:.4f}", f"{expected[query][m]:.4f}") for m, v in row.items()]
    return out


@pytest.mark.parametrize("name", list(CASES))
def test_every_supported_measure_matches_trec_eval_output(name):
    ev = _evaluate(name)
    pairs = _compared(name, ev)
    assert [p for p in pairs if p[2] != p[3]] == []
    expected = read_trec_eval_output(DATA / name)
    assert expected["all"].get("runid", ev.tag) == ev.tag
    # every measure of trec_eval's output that we support was compared
    assert {m for _, m, _, _ in pairs} == set(ev.summary())


def test_iprec_rule_v9_is_trec_eval_9s_and_differs_from_trec_eval_10s_outputs():
    # trec_eval 10 counts lround(x R) relevant documents; 9 (and pytrec_eval) floor(x R + 0.9)
    differ = [p for p in _compared("out.test.aq", _evaluate("out.test.aq", iprec_rule="v9")) if p[2] != p[3]]
    assert differ and all(m.startswith("iprec_at_recall_") for _, m, _, _ in differ)
    assert ("301", "iprec_at_recall_0.10", "0.2096", "0.2098") in differ  # R = 474: c = 47 (10) vs 48 (9)
    with pytest.raises(ValueError, match=r"iprec_rule must be one of \['lround', 'v9'\]"):
        _evaluate("out.test", iprec_rule="v8")


def test_counts_are_summed_and_gm_map_is_geometric():
    ev = _evaluate("out.test.aqc")
    per_query = ev.per_query()
    summary = ev.summary()
    assert summary["num_ret"] == sum(row["num_ret"] for row in per_query.values())
    assert summary["num_q"] == 3
    aps = [max(row["map"], 1e-5) for row in per_query.values()]
    assert summary["gm_map"] == pytest.approx((aps[0] * aps[1] * aps[2]) ** (1 / 3))
    assert ev.results.per_query["map"].tolist() == [row["map"] for row in per_query.values()]


PYTREC = {"map": "map", "P_5": "P_5", "recall_100": "recall_100", "ndcg": "ndcg", "ndcg_cut_10": "ndcg_cut_10",
          "recip_rank": "recip_rank", "Rprec": "Rprec", "bpref": "bpref", "num_rel_ret": "num_rel_ret",
          "num_ret": "num_ret", "num_rel": "num_rel", **{f"iprec_at_recall_{i / 10:.2f}": f"iprec_at_recall_{i / 10:.2f}"
                                                         for i in range(11)}}


@pytest.mark.parametrize("level", [1, 2])
@pytest.mark.parametrize("seed", range(6))
def test_random_qrels_and_runs_match_pytrec_eval(seed, level):
    pytrec_eval = pytest.importorskip("pytrec_eval")
    qrels_d, run_d = random_case(seed)
    ev = evaluate_trec(qrels_from_dict(qrels_d), run_from_dict(run_d), list(PYTREC), level=level, iprec_rule="v9")
    measures = {"map", "P", "recall", "ndcg", "ndcg_cut", "recip_rank", "Rprec", "bpref", "num_rel_ret", "num_ret",
                "num_rel", "iprec_at_recall"}
    want = pytrec_eval.RelevanceEvaluator(qrels_d, measures, relevance_level=level).evaluate(run_d)
    got = ev.per_query()
    assert sorted(got) == sorted(want)
    for q in got:
        for name, theirs in PYTREC.items():
            assert got[q][name] == pytest.approx(want[q][theirs], abs=1e-9), (q, name)


def test_graded_ndcg_uses_the_rels_and_level_only_changes_relevance():
    qrels = qrels_from_dict({"q": {"a": 3, "b": 1, "c": 0}})
    run = run_from_dict({"q": {"b": 2.0, "a": 1.0}})
    ev = evaluate_trec(qrels, run, ["ndcg", "map", "num_rel"], level=2)
    # b (gain 1) at rank 1, a (gain 3) at rank 2; trec_eval discounts rank i by log2(i + 1)
    dcg = 1 / 1.0 + 3 / torch.log2(torch.tensor(3.0)).item()
    ideal = 3 / 1.0 + 1 / torch.log2(torch.tensor(3.0)).item()
    assert ev.summary()["ndcg"] == pytest.approx(dcg / ideal)
    assert ev.summary()["map"] == pytest.approx(0.5)  # only a is relevant at level 2, at rank 2
    assert ev.summary()["num_rel"] == 1


def test_unsupported_measures_are_named():
    qrels = qrels_from_dict({"q": {"a": 1}})
    run = run_from_dict({"q": {"a": 1.0}})
    with pytest.raises(ValueError, match="unsupported measure names: prefs_simp; INST"):
        evaluate_trec(qrels, run, ["map", "prefs_simp", "INST"])


def test_a_run_without_any_qrels_query_is_an_error_unless_complete():
    qrels = qrels_from_dict({"q1": {"a": 1}, "q2": {"b": 0}})
    run = run_from_dict({"zz": {"a": 1.0}})
    with pytest.raises(ValueError, match=r"the run has none of the qrels' 2 queries .*complete=True, -c"):
        evaluate_trec(qrels, run, "map")
    ev = evaluate_trec(qrels, run, ["map", "gm_map", "num_q", "num_ret"], complete=True)
    assert ev.summary() == {"num_q": 2.0, "num_ret": 0.0, "map": 0.0, "gm_map": pytest.approx(1e-5)}


def test_intervals_and_per_query_values_come_with_the_results():
    qrels = qrels_from_dict({f"q{i}": {"a": 1, "b": 1} for i in range(8)})
    run = run_from_dict({f"q{i}": {"a": 1.0, "c": 0.5, "b": 0.1 * i} for i in range(8)})
    ev = evaluate_trec(qrels, run, ["map", "num_ret", "gm_map"], ci=0.9)
    assert sorted(ev.results.ci) == ["map"]  # none for a sum or a geometric mean
    low, high = ev.results.ci["map"]
    assert low <= ev.results["map"] <= high and low < high
    assert ev.results["num_ret"].item() == 24 and ev.results.per_query["num_ret"].tolist() == [3.0] * 8


def test_measures_without_a_core_key_alone():
    # bpref, the counts or iprec_at_recall alone: no key for evaluate_ranked (was a ValueError)
    qrels = qrels_from_dict({"q": {"a": 1, "b": 0}})
    run = run_from_dict({"q": {"b": 2.0, "a": 1.0}})
    assert evaluate_trec(qrels, run, ["bpref"]).summary() == {"bpref": 0.0}
    assert evaluate_trec(qrels, run, ["num_ret", "iprec_at_recall_0.00"]).summary() == \
        {"num_ret": 2.0, "iprec_at_recall_0.00": 0.5}


def test_keys_without_a_trec_eval_name_pad_by_length_groups_not_to_the_longest_list(monkeypatch):
    """One long list among many short ones: the keys ranked_values computes (no trec_eval
    name) go in groups of like lengths, never as [queries, longest list]; values as alone."""
    import retrieval_core.trec.evaluate as ev

    long_q, n_long, n_short = "q9999", 20000, 3000
    run = {f"q{i:04d}": {f"d{j}": float(-j) for j in range(1 + i % 5)} for i in range(n_short)}
    run[long_q] = {f"d{j}": float(-j) for j in range(n_long)}
    qrels = {q: {"d0": i % 2, "d3": 1, "d17": 2} for i, q in enumerate(run)}
    keys = ["mrr@10", "ndcg_exp", "precision_adaptive@3", "hit_rate@50"]
    seen = []
    real = ev.ranked_values
    monkeypatch.setattr(ev, "ranked_values", lambda g, *a, **k: seen.append(g.numel()) or real(g, *a, **k))
    got = evaluate_trec(qrels_from_dict(qrels), run_from_dict(run), keys)
    entries = sum(len(d) for d in run.values())
    assert max(seen) <= 2 * entries + 65536  # padded to the longest: 3001 x 20000 slots
    alone = {q: evaluate_trec(qrels_from_dict({q: qrels[q]}), run_from_dict({q: run[q]}), keys).per_query()[q]
             for q in ("q0000", "q0003", "q2998", long_q)}
    per_query = got.per_query()
    assert {q: per_query[q] for q in alone} == alone
