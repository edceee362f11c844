"""evaluate_trec against ranx (``ranx.evaluate``) on the random qrels and runs of
``tests/unit/trec/cases.py`` (graded rels, unjudged pool entries (-1), relevant documents the
runs miss, a query without relevant documents, a qrels query absent from the run, a run
query absent from the qrels), per query and in the mean, and every place where ranx
differs from trec_eval on purpose or not, shown by a value (docs/trec.md, "ranx"):

* ranx evaluates the qrels' queries (``make_comparable=True`` is needed when the run
  lacks one; a missing query scores 0): its mean is trec_eval's ``-c`` mean;
* tie order: ranx ranks equal scores by its own sort (insertion order for short lists,
  arbitrary for long ones), trec_eval by doc id descending: the compared runs have no
  ties (``random_case(ties=False)``); ties are checked against pytrec_eval in
  tests/anchors/trec_eval/test_evaluate_trec.py;
* bpref: ranx counts a negative rel (in the pool, unjudged) as judged non-relevant, gives
  NaN to a query with relevant documents retrieved and no judged non-relevant one, and 0
  to every query from a query without relevant document on (in its order, sorted ids; one
  thread: the division by R = 0 stops its numba loop); elsewhere it equals trec_eval's;
* nDCG at a relevance level above 1: ranx drops the gains below the level, trec_eval
  keeps every positive rel (``-l`` does not change nDCG).

ranx compiles its numba kernels on first use (cached afterwards): one module fixture
evaluates every case once, with one thread.
"""
from __future__ import annotations

import math
import warnings

import pytest

pytest.importorskip("numpy")
ranx = pytest.importorskip("ranx")

from ranx.metrics.bpref import _bpref as bpref_kernel  # noqa: E402

from retrieval_core.trec import evaluate_trec, qrels_from_dict, run_from_dict  # noqa: E402
from tests.unit.trec.cases import random_case  # noqa: E402

# ranx name -> trec_eval name
MEASURES = {"map": "map", "map@10": "map_cut_10", "ndcg": "ndcg", "ndcg@10": "ndcg_cut_10", "mrr": "recip_rank",
            "precision@5": "P_5", "recall@100": "recall_100", "r-precision": "Rprec", "hit_rate@1": "success_1",
            "bpref": "bpref"}
SEEDS = range(4)


def ranx_per_query(qrels_d, run_d, metrics, **options):
    """``{metric: {qid: value}}`` from ranx (Qrels / Run objects, one thread)."""
    run = ranx.Run({q: dict(d) for q, d in run_d.items()})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # numba's type-safety warning in ranx's bpref
        got = ranx.evaluate(ranx.Qrels(qrels_d), run, list(metrics), return_mean=False, threads=1, **options)
    got = got if isinstance(got, dict) else {metrics[0]: got}
    return {m: dict(zip(run.get_query_ids(), map(float, v))) for m, v in got.items()}


def without_negative_rels(qrels_d):
    return {q: {d: r for d, r in docs.items() if r >= 0} for q, docs in qrels_d.items()}


def with_relevant(qrels_d):
    """The queries that have a relevant document (ranx's bpref breaks on the others)."""
    return {q: docs for q, docs in qrels_d.items() if any(r > 0 for r in docs.values())}


@pytest.fixture(scope="module")
def cases():
    out = []
    for seed in SEEDS:
        qrels_d, run_d = random_case(seed, ties=False)
        bpref = {name: ranx_per_query(with_relevant(q), run_d, ["bpref"], make_comparable=True)["bpref"]
                 for name, q in (("clean", without_negative_rels(qrels_d)), ("negative", qrels_d))}
        out.append(dict(qrels=qrels_d, run=run_d, bpref=bpref,
                        ranx=ranx_per_query(qrels_d, run_d, list(MEASURES), make_comparable=True)))
    return out


def test_ranx_is_trec_eval_with_c_on_runs_without_ties(cases):
    for case in cases:
        qrels, run = qrels_from_dict(case["qrels"]), run_from_dict(case["run"])
        complete = evaluate_trec(qrels, run, list(MEASURES.values()), complete=True)
        default = evaluate_trec(qrels, run, list(MEASURES.values()))
        want = complete.per_query()
        assert sorted(case["ranx"]["map"]) == sorted(want) == sorted(case["qrels"])  # q0 out, q2 in
        assert "q2" not in default.per_query() and "q0" not in want
        for name, trec in MEASURES.items():
            if name == "bpref":
                continue
            got = case["ranx"][name]
            for q in want:
                assert got[q] == pytest.approx(want[q][trec], abs=1e-12, rel=0), (q, name)
            mean = sum(got.values()) / len(got)
            assert mean == pytest.approx(complete.summary()[trec], abs=1e-12, rel=0), name
            # without -c trec_eval averages over the run's queries: q2 (0 in ranx) is left out
            assert got["q2"] == 0.0
            assert mean * len(want) == pytest.approx(default.summary()[trec] * len(default.per_query()), abs=1e-12)
        assert case["ranx"]["map"]["q1"] == 0.0 and want["q1"]["map"] == 0.0  # no relevant document: 0 in both
    with pytest.raises(AssertionError, match="make_comparable=True"):  # a qrels query missing from the run
        ranx.evaluate(ranx.Qrels(cases[0]["qrels"]), ranx.Run(cases[0]["run"]), "map")


def test_bpref_equal_only_without_unjudged_entries_empty_queries_or_no_judged_nonrelevant(cases):
    differ = nans = 0
    for case in cases:
        qrels_d, run = case["qrels"], run_from_dict(case["run"])
        ours = evaluate_trec(qrels_from_dict(qrels_d), run, ["bpref"], complete=True).per_query()
        clean = evaluate_trec(qrels_from_dict(without_negative_rels(qrels_d)), run, ["bpref"], complete=True)
        assert clean.per_query() == ours  # for trec_eval a -1 entry is unjudged, as a document not in the qrels
        nan = 0
        for q, theirs in case["bpref"]["clean"].items():
            hits = [d for d in case["run"].get(q, {}) if qrels_d[q].get(d, 0) > 0]
            if any(r == 0 for r in qrels_d[q].values()) or not hits:
                assert theirs == pytest.approx(ours[q]["bpref"], abs=1e-12, rel=0), q
            else:  # relevant documents retrieved, no judged non-relevant one: NaN in ranx
                nan += 1
                assert math.isnan(theirs) and ours[q]["bpref"] == len(hits) / sum(r > 0 for r in qrels_d[q].values())
        # with the -1 entries: ranx's value is trec_eval's with them judged non-relevant (rel 0)
        as_zero = {q: {d: max(r, 0) for d, r in docs.items()} for q, docs in qrels_d.items()}
        zero = evaluate_trec(qrels_from_dict(as_zero), run, ["bpref"], complete=True).per_query()
        for q, theirs in case["bpref"]["negative"].items():
            if not math.isnan(theirs):
                assert theirs == pytest.approx(zero[q]["bpref"], abs=1e-12, rel=0), q
                differ += abs(theirs - ours[q]["bpref"]) > 1e-9
        # q1 (no relevant document, the first id) in the same call: ranx's bpref is 0 for every query
        assert set(case["ranx"]["bpref"].values()) == {0.0} and max(v["bpref"] for v in ours.values()) > 0.3
        nans += nan
    assert differ >= 3 and nans >= 1
    # the smallest case of each: c (-1) retrieved above a; a query without judged non-relevant
    one = {"q": {"a": 1, "b": 0, "c": -1}}, {"q": {"c": 3.0, "a": 2.0, "x": 1.0}}
    assert ranx_per_query(*one, ["bpref"])["bpref"]["q"] == 0.0
    assert evaluate_trec(qrels_from_dict(one[0]), run_from_dict(one[1]), ["bpref"]).summary()["bpref"] == 1.0
    two = {"q": {"a": 1}}, {"q": {"x": 3.0, "a": 2.0}}
    assert math.isnan(ranx_per_query(*two, ["bpref"])["bpref"]["q"])
    assert evaluate_trec(qrels_from_dict(two[0]), run_from_dict(two[1]), ["bpref"]).summary()["bpref"] == 1.0
    # q has no relevant document: from q on (ranx's order: sorted ids), every bpref is 0 in ranx
    three = ({"p": {"a": 1, "b": 0}, "q": {"c": 0}, "r": {"a": 1, "b": 0}},
             {"p": {"a": 2.0, "b": 1.0}, "q": {"c": 1.0}, "r": {"a": 2.0, "b": 1.0}})
    assert ranx_per_query(*three, ["bpref"])["bpref"] == {"p": 1.0, "q": 0.0, "r": 0.0}
    with pytest.raises(ZeroDivisionError):  # q's own kernel, called alone
        bpref_kernel(ranx.Qrels({"q": three[0]["q"]}).to_typed_list()[0],
                     ranx.Run({"q": three[1]["q"]}).to_typed_list()[0], 1)
    assert evaluate_trec(qrels_from_dict(three[0]), run_from_dict(three[1]), ["bpref"]).per_query() == \
        {"p": {"bpref": 1.0}, "q": {"bpref": 0.0}, "r": {"bpref": 1.0}}


def test_tie_order_is_ranxs_sort_not_the_doc_id(cases):
    qrels_d = {"q": {"a": 1}}
    values = []
    for order in (["a", "b"], ["b", "a"]):  # the same run, inserted in two orders
        run_d = {"q": {d: 1.0 for d in order}}
        values.append((ranx_per_query(qrels_d, run_d, ["mrr"])["mrr"]["q"],
                       evaluate_trec(qrels_from_dict(qrels_d), run_from_dict(run_d), ["recip_rank"]).summary()))
    # ranx: insertion order (a short list); trec_eval: b before a (doc id descending) whatever the order
    assert values == [(1.0, {"recip_rank": 0.5}), (0.5, {"recip_rank": 0.5})]
    docs = [f"d{i:02d}" for i in range(40)]
    qrels_d = {"q": {"d05": 1}}
    ranks = [1 / ranx_per_query(qrels_d, {"q": {d: 1.0 for d in order}}, ["mrr"])["mrr"]["q"]
             for order in (docs, docs[::-1])]
    trec = 1 / evaluate_trec(qrels_from_dict(qrels_d), run_from_dict({"q": {d: 1.0 for d in docs}}),
                             ["recip_rank"]).summary()["recip_rank"]
    # a long list: neither insertion order (d05 at rank 6, or 35 inserted reversed); trec_eval: 35 (d39 ... d05)
    assert trec == pytest.approx(35) and round(ranks[0]) != 6 and round(ranks[1]) != 35
    assert all(len(set(c["run"]["q3"].values())) == len(c["run"]["q3"]) for c in cases)  # compared runs: no ties


def test_ndcg_gain_forms_and_the_relevance_level(cases):
    case = cases[0]
    qrels, run = qrels_from_dict(case["qrels"]), run_from_dict(case["run"])
    theirs = ranx_per_query(case["qrels"], case["run"], ["ndcg_burges", "ndcg_burges@10", "ndcg-l2", "map-l2"],
                            make_comparable=True)
    ours = evaluate_trec(qrels, run, ["ndcg_exp", "ndcg_exp@10"], complete=True).per_query()
    at2 = evaluate_trec(qrels, run, ["ndcg", "map"], complete=True, level=2).per_query()
    # ranx's ndcg_burges (2^rel - 1) is our ndcg_exp (no trec_eval name)
    for q in ours:
        assert theirs["ndcg_burges"][q] == pytest.approx(ours[q]["ndcg_exp"], abs=1e-12, rel=0)
        assert theirs["ndcg_burges@10"][q] == pytest.approx(ours[q]["ndcg_exp@10"], abs=1e-12, rel=0)
        assert theirs["map-l2"][q] == pytest.approx(at2[q]["map"], abs=1e-12, rel=0)
    # at -l2 trec_eval's nDCG keeps rel 1 gains; ranx's drops them: its value is nDCG on qrels cut at 2
    cut = {q: {d: r for d, r in docs.items() if r >= 2 or r <= 0} for q, docs in case["qrels"].items()}
    cut_ndcg = evaluate_trec(qrels_from_dict(cut), run, ["ndcg"], complete=True).per_query()
    assert all(theirs["ndcg-l2"][q] == pytest.approx(cut_ndcg[q]["ndcg"], abs=1e-12, rel=0) for q in cut_ndcg)
    assert sum(abs(theirs["ndcg-l2"][q] - at2[q]["ndcg"]) > 1e-6 for q in at2) >= 3
