"""Measure names of trec_eval, ir_measures and ours parse to the same canonical keys."""
from __future__ import annotations

import re

import pytest

import retrieval_core
from retrieval_core.trec import parse_measures, split_measures
from retrieval_core.trec.measures import CUTOFFS, NEW_KEYS

# every row: names from the three vocabularies that mean the same measure, its key, its trec_eval name
SAME = [
    (["map", "AP"], "map", "map"),
    (["P_5", "P.5", "P@5", "precision@5"], "precision@5", "P_5"),
    (["recall_100", "recall.100", "R@100", "recall@100"], "recall@100", "recall_100"),
    (["ndcg", "nDCG", "nDCG(dcg='log2')"], "ndcg", "ndcg"),
    (["ndcg_cut_10", "ndcg_cut.10", "nDCG@10", "ndcg@10"], "ndcg@10", "ndcg_cut_10"),
    (["recip_rank", "RR", "mrr"], "mrr", "recip_rank"),
    (["Rprec", "r_precision"], "r_precision", "Rprec"),
    (["success_1", "success.1", "Success@1", "hit_rate@1", "cmc@1"], "hit_rate@1", "success_1"),
    (["map_cut_10", "map_cut.10", "AP@10", "map@10"], "map@10", "map_cut_10"),
    (["bpref", "Bpref"], "bpref", "bpref"),
    (["num_ret", "NumRet"], "num_ret", "num_ret"),
    (["num_rel", "NumRel"], "num_rel", "num_rel"),
    (["num_rel_ret", "NumRelRet"], "num_rel_ret", "num_rel_ret"),
    (["num_q", "NumQ"], "num_q", "num_q"),
    (["gm_map"], "gm_map", "gm_map"),
    (["iprec_at_recall_0.10", "iprec_at_recall..10", "iprec_at_recall.0.1", "IPrec@0.1", "iprec_at_recall@0.1"],
     "iprec_at_recall@0.1", "iprec_at_recall_0.10"),
]


@pytest.mark.parametrize("names, key, trec", SAME, ids=[row[1] for row in SAME])
def test_every_spelling_parses_to_one_key(names, key, trec):
    for name in names:
        assert parse_measures([name]) == [(key, trec)], name
    assert parse_measures(names) == [(key, trec)]  # one key, given once


def test_existing_keys_are_valid_core_keys():
    for _, key, _ in SAME:
        if key.split("@")[0] not in NEW_KEYS:
            (parsed,) = retrieval_core.parse_metrics([key])
            assert parsed.key == key


def test_default_cutoff_sets():
    assert parse_measures("P") == [(f"precision@{k}", f"P_{k}") for k in (5, 10, 15, 20, 30, 100, 200, 500, 1000)]
    assert [t for _, t in parse_measures("success")] == ["success_1", "success_5", "success_10"]
    assert [t for _, t in parse_measures("iprec_at_recall")] == [f"iprec_at_recall_{i / 10:.2f}" for i in range(11)]
    # trec_eval sorts a measure's parameters (meas_init.c)
    assert parse_measures("P.5,7,3") == [("precision@3", "P_3"), ("precision@5", "P_5"), ("precision@7", "P_7")]
    assert len(CUTOFFS) == 9


def test_official_set_equals_trec_eval_default_output_names():
    from pathlib import Path

    from retrieval_core.trec import read_trec_eval_output
    out_test = Path(__file__).resolve().parents[2] / "anchors" / "trec_eval" / "data" / "out.test"  # trec_eval's output
    names = list(read_trec_eval_output(out_test)["all"])
    assert names[0] == "runid"  # the run's tag, not a measure
    for spelled in ("official", "-m official", "-mofficial"):
        assert [t for _, t in parse_measures(spelled)] == names[1:]


def test_all_trec_is_every_measure_without_preference_files():
    pairs, bad = split_measures(["-m all_trec", "P_5"])
    assert bad == [] and ("precision@5", "P_5") in pairs
    assert {"infAP", "rbp", "rbp_resid", "G", "binG", "relstring", "utility", "11pt_avg", "unj_5", "set_F"} <= {
        t for _, t in pairs}
    assert parse_measures("all_trec") == pairs  # P_5 is one of all_trec's


def test_unsupported_names_are_all_listed_never_dropped():
    with pytest.raises(ValueError) as err:
        parse_measures(["map", "prefs_simp", "INST", "alpha_nDCG@10", "map_avgjg", "P_0", "runid", "map_5"])
    text = str(err.value)
    for name in ("prefs_simp", "INST", "alpha_nDCG@10", "map_avgjg", "P_0", "runid", "map_5"):
        assert name in text
    assert "needs subtopic (intent) judgements" in text and "a cutoff must be a positive integer" in text
    names = ["map", "prefs_simp", "INST", "alpha_nDCG@10", "map_avgjg", "P_0", "runid", "map_5"]
    assert split_measures(names) == ([("map", "map")], names[1:])
    assert split_measures(["prefs_simp", "map"]) == ([("map", "map")], ["prefs_simp"])


def test_our_keys_without_trec_eval_name():
    assert parse_measures(["mrr@10", "ndcg_exp@5", "precision@r", "nDCG(dcg='exp-log2')@10", "RR@10"]) == [
        ("mrr@10", None), ("ndcg_exp@5", None), ("precision@r", None), ("ndcg_exp@10", None)]


def test_bad_types_and_levels():
    with pytest.raises(TypeError, match="measure names are strings"):
        parse_measures([5])
    with pytest.raises(ValueError, match=r"a recall level must be a number in \[0, 1\]"):
        parse_measures("IPrec@1.5")


# -- trec_eval's -m syntax: parameters read as trec_eval reads them; wrong names vs unsupported ones

def test_cutoffs_are_read_as_trec_eval_atol_reads_them():
    from retrieval_core.trec import parse_one
    # trec_eval's own out.test.meas_params: -m ndcg_cut.10,20,23.4 prints ndcg_cut_23
    assert [t for _, t in parse_one("ndcg_cut.10,20,23.4")] == ["ndcg_cut_10", "ndcg_cut_20", "ndcg_cut_23"]
    assert [t for _, t in parse_one("P.5,10,7.9")] == ["P_5", "P_7", "P_10"]  # sorted, as trec_eval
    assert parse_one("P.9223372036854775807") == [("precision@9223372036854775807", "P_9223372036854775807")]


@pytest.mark.parametrize("name, message", [
    ("ndgc_cut.10", r"unknown measure name 'ndgc_cut.10'. Did you mean ndcg_cut.10\?"),
    ("ndgc@10", r"unknown measure name 'ndgc@10'. Did you mean ndcg@10"),
    ("P.5,5", r"'P.5,5': a parameter is given twice \(trec_eval: 'duplicate cutoffs detected'\)"),
    ("iprec_at_recall..1,.10", r"a parameter is given twice"),
    ("P.abc", r"'P.abc': a cutoff must be a positive integer; got 'abc'"),
    ("P.0", r"a cutoff must be a positive integer; got '0'"),
    ("P.", r"'P.': no parameter after '.'"),
    ("map.5", r"'map.5': trec_eval's map takes no parameter"),
    ("official.5", r"the set official takes no parameter"),
    ("P.99999999999999999999", r"a cutoff must be at most 2\*\*63 - 1; got 99999999999999999999"),
    ("precision@99999999999999999999", r"k must be at most 2\*\*63 - 1"),
    ("IPrec@1.5", r"a recall level must be a number in \[0, 1\]"),
])
def test_wrong_names_are_measure_errors(name, message):
    from retrieval_core.trec import MeasureError, parse_one
    with pytest.raises(MeasureError, match=message):
        parse_one(name)
    with pytest.raises(ValueError, match=re.escape(name)):
        parse_measures([name])


@pytest.mark.parametrize("name", ["prefs_simp", "yaap", "map_avgjg", "INST", "alpha_nDCG@10", "RBP(rel=2)@5"])
def test_known_but_unsupported_names_are_not_errors(name):
    from retrieval_core.trec import MeasureError, Unsupported, parse_one
    with pytest.raises(Unsupported) as err:
        parse_one(name)
    assert not isinstance(err.value, MeasureError)


def test_output_names_are_refused_on_the_command_line_only():
    from retrieval_core.trec import MeasureError, parse_one
    assert parse_one("P_5") == [("precision@5", "P_5")]  # the Python API keeps ir_measures users' spelling
    for name, hint in (("P_5", "write P.5"), ("ndcg_cut_10", "write ndcg_cut.10"),
                       ("iprec_at_recall_0.10", "write iprec_at_recall.0.10")):
        with pytest.raises(MeasureError, match=f"trec_eval's output name: {hint} "):
            parse_one(name, command_line=True)


def test_core_cutoffs_beyond_int64_are_refused_before_any_tensor():
    with pytest.raises(ValueError, match=r"k must be at most 2\*\*63 - 1 in 'ndcg@" + "9" * 5000):
        retrieval_core.parse_metrics(["ndcg@" + "9" * 5000])  # no 4300-digit int() error either


# -- the set measures and measures of counts at cutoffs (trec/set_measures.py)

def test_set_measures_keys_and_trec_eval_names():
    assert parse_measures(["set_P", "set_F", "set_F.0.5", "relstring.20", "11pt_avg..25,.5,.75", "unj"]) == [
        ("set_P", "set_P"), ("set_F", "set_F"), ("set_F@0.5", "set_F_0.5"), ("relstring@20.0", "relstring_20"),
        ("11pt_avg@0.25,0.5,0.75", "11pt_avg_.25,.5,.75"), ("unj@5", "unj_5"), ("unj@10", "unj_10"),
        ("unj@20", "unj_20")]
    # trec_eval sorts long and double cutoffs (relative_P, unj, Rprec_mult), not 11pt_avg's or utility's parameters
    assert [t for _, t in parse_measures("Rprec_mult.5.0,0.2,0.35")] == [
        "Rprec_mult_0.20", "Rprec_mult_0.35", "Rprec_mult_5.00"]
    assert parse_measures("utility.2,-1,0,0") == [("utility@2.0,-1.0,0.0,0.0", "utility_2,-1,0,0")]
    assert [t for _, t in parse_measures("relative_P")] == [f"relative_P_{k}" for k in CUTOFFS]
    # keys and output names parse back to themselves
    assert parse_measures(["relative_P@7", "Rprec_mult@0.35", "utility@2.0,-1.0,0.0,0.0", "11pt_avg@0.5"]) == [
        ("relative_P@7", "relative_P_7"), ("Rprec_mult@0.35", "Rprec_mult_0.35"),
        ("utility@2.0,-1.0,0.0,0.0", "utility_2.0,-1.0,0.0,0.0"), ("11pt_avg@0.5", "11pt_avg_0.5")]
    assert parse_measures(["relative_P_5", "Rprec_mult_0.20"]) == [("relative_P@5", "relative_P_5"),
                                                                  ("Rprec_mult@0.2", "Rprec_mult_0.20")]
    # trec_eval's name buffer: the parameter printed in 8 characters at most
    assert parse_measures("Rprec_mult.1e30") == [("Rprec_mult@1e+30", "Rprec_mult_10000000")]


@pytest.mark.parametrize("name, message", [
    ("utility.1,2", r"'utility.1,2': utility takes 4 numbers a,b,c,d \(trec_eval: 'improper number of "
                    r"coefficients'\)"),
    ("Rprec_mult.0.5,0.50", r"a parameter is given twice \(trec_eval: 'duplicate cutoffs detected'\)"),
    ("Rprec_mult.0.201,0.204", r"two parameters print the same name \(Rprec_mult_0.20, Rprec_mult_0.20\)"),
    ("relative_P.0", r"'relative_P.0': a cutoff must be a positive integer; got '0'"),
    ("unj.5,5", r"a parameter is given twice"),
    ("unj.99999999999999999999", r"a cutoff must be at most 2\*\*63 - 1"),
    ("set_P.5", r"'set_P.5': trec_eval's set_P takes no parameter"),
    ("11pt_avg.0.5,x", r"'11pt_avg.0.5,x': a parameter must be a finite number; got 'x'"),
    ("11pt_avg.0.5,,1", r"a parameter must be a finite number; got ''"),
    ("set_F.nan", r"a parameter must be a finite number; got 'nan'"),
    ("relstring.1e999", r"a parameter must be a finite number; got '1e999'"),
])
def test_bad_parameters_of_the_set_measures_are_measure_errors(name, message):
    from retrieval_core.trec import MeasureError, parse_one
    with pytest.raises(MeasureError, match=message):
        parse_one(name)
    with pytest.raises(ValueError, match=re.escape(name)):
        parse_measures([name])


def test_this_librarys_rbp_at_p_is_not_trec_evals_rbp():
    # trec_eval's rbp (graded, p = 0.9) prints as `rbp`; our binary rbp@p keeps its own name
    assert parse_measures(["rbp", "rbp@0.5", "rbp.p=0.8"]) == [("rbp", "rbp"), ("rbp@0.5", None),
                                                               ("rbp.p=0.8", "rbp_p=0.8")]
