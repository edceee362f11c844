"""evaluate_trec against trec_eval's own outputs (tests/trec/data, every supported measure, per
query and in the summary, to 4 decimals) and against pytrec_eval on random qrels and runs."""
from __future__ import annotations

import random
from pathlib import Path

import pytest
import torch

pytest.importorskip("numpy")

from retrieval_core.trec import (  # noqa: E402
    align,
    evaluate_trec,
    qrels_from_dict,
    read_qrels,
    read_run,
    read_trec_eval_output,
    run_from_dict,
)
from retrieval_core.trec.kernels import iprec_at_recall  # noqa: E402

DATA = Path(__file__).parent / "data"
SUPPORTED = ["official", "recall", "ndcg", "ndcg_cut", "map_cut", "success", "num_nonrel_judged_ret"]
CASES = {  # out file: (qrels, run, measures, options) as data/README.md lists the commands
    "out.test": ("qrels.test", "results.test", "official", {}),
    "out.test.aq": ("qrels.test", "results.test", SUPPORTED, {}),
    "out.test.aqc": ("qrels.test", "results.trunc", SUPPORTED, {"complete": True}),
    "out.test.aqcM": ("qrels.test", "results.trunc", SUPPORTED, {"complete": True, "max_per_query": 100}),
    "out.test.aql": ("qrels.rel_level", "results.test", SUPPORTED, {"level": 2}),
}
LEVELS = [i / 10 for i in range(11)]


def _evaluate(name):
    qrels_file, run_file, measures, options = CASES[name]
    qrels = read_qrels(DATA / qrels_file)
    run = read_run(DATA / run_file, docs=qrels.docs)
    return qrels, run, options, evaluate_trec(qrels, run, measures, **options)


def _half_up_iprec(qrels, run, options):
    """iprec_at_recall with c = floor(x R + 0.5): the rule trec_eval's test outputs follow."""
    al = align(run, qrels, **options)
    q = len(al.query_ids)
    d = int(al.num_ret.max())
    rel = torch.zeros(q, d, dtype=torch.bool)
    rel[al.query, al.rank - 1] = al.relevant
    return al.query_ids, iprec_at_recall(rel, al.n_relevant, LEVELS, offset=0.5)


@pytest.mark.parametrize("name", list(CASES))
def test_every_supported_measure_matches_trec_eval_output(name):
    qrels, run, options, ev = _evaluate(name)
    expected = read_trec_eval_output(DATA / name)
    got = dict(ev.per_query()) if name != "out.test" else {}
    got["all"] = ev.summary()
    assert expected["all"]["runid"] == ev.tag
    explained = {}
    if "iprec_at_recall_0.00" in got["all"]:
        ids, half_up = _half_up_iprec(qrels, run, options)
        explained = {(q, f"iprec_at_recall_{x:.2f}"): half_up[i, j].item()
                     for i, q in enumerate(ids) for j, x in enumerate(LEVELS)}
        for j, x in enumerate(LEVELS):
            explained[("all", f"iprec_at_recall_{x:.2f}")] = half_up[:, j].mean().item()
    checked = differ = 0
    for query, row in got.items():
        assert set(row) <= set(expected[query]), query
        for measure, value in row.items():
            checked += 1
            want = expected[query][measure]
            if f"{value:.4f}" != f"{want:.4f}":
                # the only known difference: trec_eval's test outputs round x R half up (module doc of kernels)
                assert (query, measure) in explained, (query, measure, value, want)
                assert f"{explained[query, measure]:.4f}" == f"{want:.4f}", (query, measure)
                differ += 1
    assert checked >= len(got["all"]) and differ <= 8
    assert (differ > 0) == (name in ("out.test", "out.test.aq", "out.test.aqc", "out.test.aql"))
    # every measure of the expected file that we support was compared
    ours = set(got["all"])
    assert {m for m in expected["all"] if m in ours} == ours


def test_the_half_up_rule_reproduces_every_iprec_value_of_trec_eval_outputs():
    for name in ("out.test.aq", "out.test.aqc", "out.test.aqcM", "out.test.aql"):
        qrels, run, options, _ = _evaluate(name)
        expected = read_trec_eval_output(DATA / name)
        ids, half_up = _half_up_iprec(qrels, run, options)
        for i, q in enumerate(ids):
            assert [f"{v:.4f}" for v in half_up[i].tolist()] == [
                f"{expected[q][f'iprec_at_recall_{x:.2f}']:.4f}" for x in LEVELS]


def test_counts_are_summed_and_gm_map_is_geometric():
    _, _, _, ev = _evaluate("out.test.aqc")
    per_query = ev.per_query()
    summary = ev.summary()
    assert summary["num_ret"] == sum(row["num_ret"] for row in per_query.values())
    assert summary["num_q"] == 3
    aps = [max(row["map"], 1e-5) for row in per_query.values()]
    assert summary["gm_map"] == pytest.approx((aps[0] * aps[1] * aps[2]) ** (1 / 3))
    assert ev.results.per_query["map"].tolist() == [row["map"] for row in per_query.values()]


def _random_case(seed):
    rng = random.Random(seed)
    docs = [f"d{i}" for i in range(40)]
    qrels, run = {}, {}
    for q in range(12):
        qid = f"q{q}"
        judged = rng.sample(docs, rng.randint(0, 15))
        if q != 0:  # q0: no judgement at all in the run's terms -> not evaluated
            qrels[qid] = {d: rng.choice([0, 0, 1, 2, 3, -1]) for d in judged} or {"d0": 0}
        if q == 1:
            qrels[qid] = {d: 0 for d in judged} or {"d0": 0}  # no relevant document
        if q == 2:
            continue  # in the qrels, not in the run
        ranked = rng.sample(docs, rng.randint(1, 30))
        run[qid] = {d: float(rng.randint(0, 6)) for d in ranked}  # many ties
    return qrels, run


PYTREC = {"map": "map", "P_5": "P_5", "recall_100": "recall_100", "ndcg": "ndcg", "ndcg_cut_10": "ndcg_cut_10",
          "recip_rank": "recip_rank", "Rprec": "Rprec", "bpref": "bpref", "num_rel_ret": "num_rel_ret",
          "num_ret": "num_ret", "num_rel": "num_rel", **{f"iprec_at_recall_{x:.2f}": f"iprec_at_recall_{x:.2f}"
                                                         for x in LEVELS}}


@pytest.mark.parametrize("level", [1, 2])
@pytest.mark.parametrize("seed", range(6))
def test_random_qrels_and_runs_match_pytrec_eval(seed, level):
    pytrec_eval = pytest.importorskip("pytrec_eval")
    qrels_d, run_d = _random_case(seed)
    ev = evaluate_trec(qrels_from_dict(qrels_d), run_from_dict(run_d), list(PYTREC), level=level)
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
    with pytest.raises(ValueError, match="unsupported measure names: infAP; ERR@20"):
        evaluate_trec(qrels, run, ["map", "infAP", "ERR@20"])


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
    ev = evaluate_trec(qrels, run, ["map", "num_ret"], ci=0.9)
    low, high = ev.results.ci["map"]
    assert low <= ev.results["map"] <= high and low < high
    assert ev.results["num_ret"].item() == 24 and ev.results.per_query["num_ret"].tolist() == [3.0] * 8
