"""ir_measures' names evaluated by ``evaluate_trec`` against ir_measures 0.4.3 itself (its default
pipeline: pytrec_eval, cwl_eval, compat, judged, msmarco, gdeval, ranx, the first that supports
a measure), per query and in the mean, on the random qrels and runs of
``tests/unit/trec/cases.py`` (graded rels 0..3, unjudged pool entries -1, documents absent from
the qrels, relevant documents the runs miss, a query without relevant document, a qrels query
absent from the run, a run query absent from the qrels, short runs).

Where ir_measures differs, a test shows it by a value (docs/trec.md, "ir_measures"):

* queries: ir_measures gives every qrels query the run lacks its default value (0) and counts
  it in the mean: its mean is trec_eval's ``-c`` mean (``complete=True``); its counts (NumQ,
  NumRet, NumRel) add 0 for such a query, as trec_eval without ``-c`` does;
* tie order: pytrec_eval and gdeval rank equal scores by doc id descending, as trec_eval and
  this library; ir_measures' judged, compat and msmarco providers by doc id ascending, cwl_eval
  by insertion order: Judged, Compat, RR@k and RBP are compared on runs without ties, and on
  runs with ties against ir_measures given the same run with its ties broken trec_eval's way;
* IPrec: pytrec_eval's trec_eval 9 rule (``iprec_rule="v9"``);
* ERR@k and nDCG(dcg='exp-log2')@k: gdeval.pl prints 5 decimals (compared to 5e-6) and reads
  numeric query ids only.
"""
from __future__ import annotations

import logging
import math

import pytest

ir_measures = pytest.importorskip("ir_measures")
pytest.importorskip("pytrec_eval")
pytest.importorskip("cwl")

from retrieval_core.trec import evaluate_trec, parse_one, qrels_from_dict, run_from_dict  # noqa: E402
from tests.unit.trec.cases import random_case  # noqa: E402

logging.getLogger("ir_measures").setLevel(logging.ERROR)
logging.getLogger("cwl").disabled = True

# the names, by the provider ir_measures 0.4.3 picks for them
PYTREC_EVAL = ["AP", "AP@5", "AP(rel=2)", "AP(rel=2,judged_only=True)@10", "P@5", "P(rel=2)@5",
               "P(judged_only=True)@10", "R@10", "R(rel=2)@10", "R(judged_only=True)@20", "nDCG", "nDCG@10",
               "nDCG(judged_only=True)@5", "RR", "RR(rel=2)", "RR(judged_only=True)", "Rprec", "Rprec(rel=3)",
               "Success@1", "Success(rel=2)@5", "Success(judged_only=True)@3", "Bpref", "Bpref(rel=2)", "IPrec@0.2",
               "IPrec(rel=2)@0.5", "IPrec@0.0"]
COUNTS = ["NumQ", "NumRet", "NumRet(rel=1)", "NumRet(rel=2)", "NumRelRet", "NumRel"]
# pytrec_eval's set measures and infAP: trec_eval's set_P, set_relative_P, set_recall, set_F, set_map, infAP
SETS = ["SetP", "SetP(rel=2)", "SetP(judged_only=True)", "SetRelP", "SetR", "SetR(rel=2)", "SetF", "SetF(beta=2.0)",
        "SetF(rel=2,beta=0.5)", "SetAP", "SetAP(judged_only=True)"]
# pytrec_eval's infAP and nDCG with a gain table: trec_eval's infAP and ndcg.0=0,1=1,...
GAINS = ["infAP", "infAP(rel=2)", "nDCG(gains={0:0,1:1,2:3,3:5})", "nDCG(gains={1:4},judged_only=True)"]
TIE_ORDER = ["Judged@5", "Judged@10", "Judged", "Compat", "Compat(p=0.8)", "Compat(p=0.5,normalize=False)",
             "RBP(rel=1)", "RBP(p=0.5,rel=2)", "RR@5", "RR(rel=2)@3"]
RANX = ["nDCG(dcg='exp-log2')"]  # ranx ranks ties its own way (tests/anchors/ranx)
GDEVAL = ["ERR@5", "ERR@10", "nDCG(dcg='exp-log2')@10"]
SEEDS = range(3)


def theirs(names, qrels_d, run_d):
    """``({name: mean}, {name: {qid: value}})`` from ir_measures' default pipeline."""
    measures = {}  # NumRelRet is NumRet(rel=1): one measure, two names
    for n in names:
        measures.setdefault(ir_measures.parse_measure(n), []).append(n)
    mean, per_query = ir_measures.calc(list(measures), qrels_d, run_d)
    per = {n: {} for n in names}
    for metric in per_query:
        for n in measures[metric.measure]:
            per[n][metric.query_id] = float(metric.value)
    return {n: float(v) for m, v in mean.items() for n in measures[m]}, per


def ours(names, qrels_d, run_d, **options):
    ev = evaluate_trec(qrels_from_dict(qrels_d), run_from_dict(run_d), names, iprec_rule="v9", **options)
    out = {n: parse_one(n)[0][1] or parse_one(n)[0][0] for n in names}
    per = ev.per_query()
    return ({n: ev.summary()[out[n]] for n in names},
            {n: {q: values.get(out[n], 1.0) for q, values in per.items()} for n in names})  # num_q: summary only


def assert_same(names, qrels_d, run_d, tol=1e-9):
    their_mean, their_per = theirs(names, qrels_d, run_d)
    our_mean, our_per = ours(names, qrels_d, run_d, complete=True)  # ir_measures: every qrels query
    for n in names:
        assert our_per[n].keys() == their_per[n].keys(), n
        for q, v in their_per[n].items():
            assert math.isclose(our_per[n][q], v, abs_tol=tol), (n, q, our_per[n][q], v)
        assert math.isclose(our_mean[n], their_mean[n], abs_tol=tol), (n, our_mean[n], their_mean[n])


def trec_order(run_d):
    """The run with distinct scores that rank its documents as trec_eval does (score
    descending, doc id descending): the same ranking for every provider."""
    out = {}
    for q, docs in run_d.items():
        ranked = sorted(sorted(docs, key=str.encode, reverse=True), key=lambda d: -docs[d])  # stable
        out[q] = {d: float(len(ranked) - i) for i, d in enumerate(ranked)}
    return out


def numeric_ids(case):
    """gdeval.pl reads numeric query ids only: q7 -> 7."""
    return tuple({q[1:]: v for q, v in part.items()} for part in case)


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("ties", [False, True])
def test_pytrec_eval_measures(seed, ties):
    assert_same(PYTREC_EVAL, *random_case(seed, ties=ties))


@pytest.mark.parametrize("seed", SEEDS)
def test_ir_measures_own_measures_without_ties(seed):
    assert_same(TIE_ORDER, *random_case(seed, ties=False))


@pytest.mark.parametrize("seed", [0])  # ranx compiles its kernels first (seconds)
def test_ranx_measures_without_ties(seed):
    """ir_measures' ranx provider fails with the pandas installed here (its query ids' dtype): ranx itself."""
    ranx = pytest.importorskip("ranx")
    qrels_d, run_d = random_case(seed, ties=False)
    with pytest.raises(AssertionError, match="Query IDs column dtype"):
        theirs(RANX, qrels_d, run_d)
    positive = {q: {d: r for d, r in docs.items() if r > 0} for q, docs in qrels_d.items()}
    got = ranx.evaluate(ranx.Qrels({q: d for q, d in positive.items() if d}), ranx.Run(run_d), "ndcg_burges",
                        return_mean=False, threads=1, make_comparable=True)
    _, our = ours(RANX, qrels_d, run_d, complete=True)
    assert len(got) >= 5
    for q, v in zip(sorted(q for q, d in positive.items() if d), got):  # ranx's order: sorted query ids
        assert math.isclose(our[RANX[0]][q], float(v), abs_tol=1e-12), q


@pytest.mark.parametrize("seed", SEEDS)
def test_ir_measures_own_measures_with_ties_broken_as_trec_eval(seed):
    qrels_d, run_d = random_case(seed, ties=True)
    their_mean, their_per = theirs(TIE_ORDER, qrels_d, trec_order(run_d))
    our_mean, our_per = ours(TIE_ORDER, qrels_d, run_d, complete=True)
    for n in TIE_ORDER:
        for q, v in their_per[n].items():
            assert math.isclose(our_per[n][q], v, abs_tol=1e-9), (n, q)
        assert math.isclose(our_mean[n], their_mean[n], abs_tol=1e-9), n


def test_ties_are_ranked_by_doc_id_descending_where_ir_measures_providers_differ():
    qrels_d = {"q": {"a": 1, "b": 0}}
    run_d = {"q": {"a": 1.0, "b": 1.0, "c": 1.0}}  # trec_eval's order: c, b, a
    mean, _ = ours(["Judged@1", "RR@1", "Compat"], qrels_d, run_d)
    their, _ = theirs(["Judged@1", "RR@1", "Compat"], qrels_d, run_d)
    assert (mean["Judged@1"], their["Judged@1"]) == (0.0, 1.0)  # ir_measures' judged provider: a first
    assert (mean["RR@1"], their["RR@1"]) == (0.0, 1.0)          # msmarco provider: a first
    assert mean["Compat"] < their["Compat"]                       # compat provider: a first


@pytest.mark.parametrize("seed", SEEDS)
def test_counts(seed):
    qrels_d, run_d = random_case(seed)
    their_mean, their_per = theirs(COUNTS, qrels_d, run_d)
    our_mean, our_per = ours(COUNTS, qrels_d, run_d)  # counts: trec_eval without -c
    for n in COUNTS:
        assert our_mean[n] == their_mean[n], n
        for q, v in their_per[n].items():
            assert our_per[n].get(q, 0.0) == v, (n, q)  # a qrels query the run lacks: 0 in ir_measures


@pytest.mark.parametrize("seed", SEEDS)
def test_gdeval_measures(seed):
    qrels_d, run_d = numeric_ids(random_case(seed, ties=True))
    assert_same(GDEVAL, qrels_d, run_d, tol=5e-6)  # gdeval.pl prints 5 decimals


@pytest.mark.parametrize("seed", SEEDS)
def test_set_measures(seed):
    assert_same(SETS, *random_case(seed, ties=True))


@pytest.mark.parametrize("seed", SEEDS)
def test_inf_ap_and_gain_tables(seed):
    assert_same(GAINS, *random_case(seed, ties=True))


def test_mean_is_the_complete_mean_and_counts_add_zero_for_a_missing_query():
    qrels_d = {"q1": {"a": 1}, "q2": {"b": 1}}
    run_d = {"q1": {"a": 1.0}}
    their, _ = theirs(["AP", "NumQ", "NumRel"], qrels_d, run_d)
    assert their == {"AP": 0.5, "NumQ": 1.0, "NumRel": 1.0}
    assert ours(["AP"], qrels_d, run_d, complete=True)[0]["AP"] == 0.5
    assert ours(["AP", "NumQ", "NumRel"], qrels_d, run_d)[0] == {"AP": 1.0, "NumQ": 1.0, "NumRel": 1.0}


def test_err_is_gdevals_not_this_librarys_err():
    qrels_d, run_d = {"1": {"a": 1, "b": 2}}, {"1": {"a": 2.0, "b": 1.0}}
    mean, _ = ours(["ERR@2", "err@2"], qrels_d, run_d)
    their, _ = theirs(["ERR@2"], qrels_d, run_d)
    assert math.isclose(mean["ERR@2"], 1 / 16 + (15 / 16) * (3 / 16) / 2)  # R = (2^g - 1) / 2^4
    assert math.isclose(mean["ERR@2"], their["ERR@2"], abs_tol=5e-6)
    assert math.isclose(mean["err@2"], 1 / 4 + (3 / 4) * (3 / 4) / 2)  # R = (2^g - 1) / 2^g_max, g_max = 2


def test_gdeval_grades_beyond_4_are_refused():
    with pytest.raises(ValueError, match="takes relevance grades up to 4"):
        ours(["ERR@5"], {"1": {"a": 5}}, {"1": {"a": 1.0}})



@pytest.mark.parametrize("seed", [0, 2])  # each has such a query
def test_iprec_judged_only_is_nan_where_pytrec_eval_divides_0_by_0(seed):
    """With judged_only, a list left empty: trec_eval divides 0 retrieved relevant by 0 retrieved
    (m_iprec_at_recall.c) and keeps that NaN for the levels needing no relevant document
    (pytrec_eval's trec_eval 9 rule: every level when R = 0); so do we, query by query."""
    qrels_d, run_d = random_case(seed)
    names = ["IPrec(judged_only=True)@0.1", "NumRet", "NumRel"]
    _, their = theirs(names, qrels_d, run_d)
    _, our = ours(names, qrels_d, run_d, complete=True, judged_only=True)
    nan = [q for q, v in their[names[0]].items() if math.isnan(v)]
    assert nan and all(our["NumRet"][q] == our["NumRel"][q] == 0 for q in nan)
    for q, v in their[names[0]].items():
        assert (math.isnan(our[names[0]][q]) if q in nan else our[names[0]][q] == pytest.approx(v, abs=1e-12)), q


@pytest.mark.parametrize("seed", SEEDS)
def test_compat_with_negative_scores(seed):
    """A document not retrieved counts 0.0 in the ideal's order: retrieved ones with a negative
    score come after it."""
    qrels_d, run_d = random_case(seed, ties=False)
    shifted = {q: {d: s - 300.0 for d, s in docs.items()} for q, docs in run_d.items()}
    assert any(s < 0 for docs in shifted.values() for s in docs.values())
    assert_same(["Compat", "Compat(p=0.7,normalize=False)"], qrels_d, shifted)
