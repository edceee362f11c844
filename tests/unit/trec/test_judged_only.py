"""Judged-only evaluation (trec_eval -J) and measures with their own relevance level, grouped."""
from __future__ import annotations

import io
from contextlib import redirect_stdout

import pytest
import torch

from retrieval_core.cli.trec import measure_list
from retrieval_core.trec import align, evaluate_trec, qrels_from_dict, run_from_dict
from tests.unit.trec.cases import random_case

QRELS = {"q1": {"a": 2, "b": 0, "c": 1, "z": -1}, "q2": {"x": 1}, "q3": {"k": 0}}
RUN = {"q1": {"a": 0.1, "b": 0.9, "d": 0.5, "z": 0.3, "c": 0.05}, "q2": {"y": 1.0}, "q3": {"k": 1.0}}


def test_align_judged_only_drops_unjudged_entries_and_ranks_anew():
    al = align(run_from_dict(RUN), qrels_from_dict(QRELS), judged_only=True)
    assert al.query_ids == ("q1", "q2", "q3")  # q2 keeps no entry, still evaluated
    assert al.num_ret.tolist() == [3, 0, 1]
    assert [al.docs[int(d)] for d in al.doc] == ["b", "a", "c", "k"]  # d (absent), z (rel -1) removed
    assert al.rank.tolist() == [1, 2, 3, 1]
    assert al.score.tolist() == [0.9, 0.1, 0.05, 1.0]
    assert al.relevant.tolist() == [False, True, True, False] and al.judged.all()
    assert al.n_relevant.tolist() == [2, 1, 0]  # R from the qrels, unchanged


def test_max_per_query_applies_before_judged_only():
    al = align(run_from_dict(RUN), qrels_from_dict(QRELS), max_per_query=2, judged_only=True)
    assert al.num_ret.tolist() == [1, 0, 1]  # the first 2 of q1 are b, d: d is not judged


def test_judged_only_equals_the_run_without_its_unjudged_entries():
    """-J is the evaluation of the run where the unjudged documents were never retrieved, but for
    a list -J empties (or a query the run lacks, whose made-up document -J removes): trec_eval's
    interpolated precision of no document is 0 / 0 (NaN) where a query the run lacks retrieves
    trec_eval's made-up document (0)."""
    names = ["official", "ndcg_cut.5,10", "recall.10", "success.1", "mrr@3", "ndcg_exp@5"]
    emptied = 0
    for seed in range(4):
        qrels_d, run_d = random_case(seed)
        judged = {q: {d: s for d, s in docs.items() if qrels_d.get(q, {}).get(d, -1) >= 0}
                  for q, docs in run_d.items()}
        got = evaluate_trec(qrels_from_dict(qrels_d), run_from_dict(run_d), names, judged_only=True, complete=True)
        want = evaluate_trec(qrels_from_dict(qrels_d), run_from_dict(judged), names, complete=True)
        for q, values in want.per_query().items():
            for name, v in values.items():
                mine = got.per_query()[q][name]
                if not judged.get(q) and name.startswith(("iprec_at_recall", "11pt_avg")):
                    emptied += 1
                    assert v == 0.0 and (mine == 0.0 or mine != mine), (q, name)  # mine: 0, or NaN
                else:
                    assert mine == pytest.approx(v, abs=1e-15), (q, name)
    assert emptied  # the cases hold lists -J empties


def test_a_measure_s_own_options_override_the_call_s():
    qrels, run = qrels_from_dict(QRELS), run_from_dict(RUN)
    ev = evaluate_trec(qrels, run, ["P.2", "P(rel=2)@2", "P(judged_only=True)@2", "P(judged_only=False)@2",
                                    "map", "AP(rel=1)"], level=2, judged_only=True)
    names = [n for _, n in ev.measures]
    assert names == ["map", "P_2", "P(rel=2)@2", "P(judged_only=True)@2", "P(judged_only=False)@2", "AP(rel=1)"]
    pq = ev.per_query()["q1"]
    # -l2 -J: judged b, a, c: a relevant at 2
    assert pq["P_2"] == pq["P(rel=2)@2"] == pq["P(judged_only=True)@2"] == 0.5
    assert pq["P(judged_only=False)@2"] == 0.0  # b, d
    assert pq["map"] == 0.5 and pq["AP(rel=1)"] == pytest.approx((1 / 2 + 2 / 3) / 2)
    plain = evaluate_trec(qrels, run, ["P.2", "map"], level=2, judged_only=True)
    assert torch.equal(ev.values[:, :2], plain.values)


def test_counts_with_options_are_summed_and_printed_as_integers():
    ev = evaluate_trec(qrels_from_dict(QRELS), run_from_dict(RUN), ["NumRet(rel=1)", "NumRel(rel=2)", "Judged"])
    assert ev.summary() == {"NumRet(rel=1)": 2.0, "NumRel(rel=2)": 1.0, "Judged": pytest.approx((4 / 5 + 0 + 1) / 3)}
    assert ev.lines()[:2] == ["NumRet(rel=1)         \tall\t2", "NumRel(rel=2)         \tall\t1"]
    ci = evaluate_trec(qrels_from_dict(QRELS), run_from_dict(RUN), ["NumRet(rel=1)", "Judged"], ci=0.9).results.ci
    assert "num_rel_ret|rel=1" not in ci and "judged" in ci  # no interval of a sum


def test_measure_lists_keep_ir_measures_parameters_whole():
    assert measure_list("RBP(p=0.8,rel=2),P(rel=2)@5,map") == ["RBP(p=0.8,rel=2)", "P(rel=2)@5", "map"]
    assert measure_list("nDCG(gains={0:1,1:3}),P.5,10") == ["nDCG(gains={0:1,1:3})", "P.5,10"]


def test_the_trec_command_takes_J(tmp_path):
    from retrieval_core.cli.entry import main
    qrels, run = tmp_path / "qrels", tmp_path / "run"
    qrels.write_text("".join(f"{q} 0 {d} {r}\n" for q, docs in QRELS.items() for d, r in docs.items()))
    run.write_text("".join(f"{q} Q0 {d} 0 {s} tag\n" for q, docs in RUN.items() for d, s in docs.items()))
    out = io.StringIO()
    with redirect_stdout(out):
        assert main(["trec", "-J", "-q", "-m", "num_ret,P(rel=2)@2", str(qrels), str(run)]) == 0
    lines = out.getvalue().splitlines()
    assert "num_ret               \tq1\t3" in lines and "num_ret               \tall\t4" in lines
    assert "P(rel=2)@2            \tq1\t0.5000" in lines
