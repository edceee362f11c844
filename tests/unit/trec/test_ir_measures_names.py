"""ir_measures' language: parameters read, checked per measure, mapped to keys with options."""
from __future__ import annotations

import pytest

from retrieval_core.trec import MeasureError, Unsupported, parse_measures, parse_one
from retrieval_core.trec.ir_measures_names import LanguageError, NotComputed, read_ir_measure
from retrieval_core.trec.measures import split_options, with_options


@pytest.mark.parametrize("name, pairs", [
    ("P(rel=2)@5", [("precision@5|rel=2", "P(rel=2)@5")]),
    ("Precision(rel=2)@5", [("precision@5|rel=2", "Precision(rel=2)@5")]),
    ("AP(rel=2)", [("map|rel=2", "AP(rel=2)")]),
    ("AP(judged_only=True)@10", [("map@10|judged_only=True", "AP(judged_only=True)@10")]),
    ("AP( rel = 2 , judged_only = False )", [("map|rel=2|judged_only=False", "AP(judged_only=False,rel=2)")]),
    ("nDCG(dcg='exp-log2')@10", [("ndcg_exp@10", None)]),
    ('nDCG(dcg="log2")@10', [("ndcg@10", "ndcg_cut_10")]),
    ("nDCG(cutoff=10)", [("ndcg@10", "ndcg_cut_10")]),
    ("RBP(p=0.8,rel=2)", [("rbp@0.8|rel=2", "RBP(p=0.8,rel=2)")]),
    ("RBP(rel=1)", [("rbp@0.8|rel=1", "RBP(rel=1)")]),
    ("Compat(p=0.8)", [("compat@0.8", "Compat(p=0.8)")]),
    ("Compat", [("compat@0.95", "Compat")]),
    ("Compat(normalize=False)", [("compat_unnormalized@0.95", "Compat(normalize=False)")]),
    ("NumRet(rel=1)", [("num_rel_ret|rel=1", "NumRet(rel=1)")]),
    ("NumRet", [("num_ret", "num_ret")]),
    ("NumRelRet", [("num_rel_ret", "num_rel_ret")]),
    ("NumRel(rel=2)", [("num_rel|rel=2", "NumRel(rel=2)")]),
    ("Judged@10", [("judged@10", "Judged@10")]),
    ("Judged", [("judged", "Judged")]),
    ("ERR@20", [("gdeval_err@20", "ERR@20")]),
    ("RR(rel=2)@10", [("mrr@10|rel=2", "RR(rel=2)@10")]),
    ("IPrec(rel=2)@0.25", [("iprec_at_recall@0.25|rel=2", "IPrec(rel=2)@0.25")]),
    ("IPrec(recall=0.5)", [("iprec_at_recall@0.5", "iprec_at_recall_0.50")]),
    ("Success(judged_only=True)@1", [("hit_rate@1|judged_only=True", "Success(judged_only=True)@1")]),
    ("Bpref(rel=3)", [("bpref|rel=3", "Bpref(rel=3)")]),
])
def test_names_map_to_keys_with_their_options(name, pairs):
    assert parse_one(name) == pairs


@pytest.mark.parametrize("name, message", [
    ("P(rell=2)@5", r"ir_measures' P takes no parameter rell \(it takes cutoff, rel, judged_only\)"),
    ("Bpref(judged_only=True)", r"ir_measures' Bpref takes no parameter judged_only \(it takes rel\)"),
    ("NumQ(rel=1)", r"ir_measures' NumQ takes no parameter rel \(it takes none\)"),
    ("nDCG(rel=2)@5", r"nDCG takes no parameter rel"),
    ("P(rel=2)", r"ir_measures' P needs a cutoff, e.g. P@10"),
    ("IPrec", r"ir_measures' IPrec needs a recall, e.g. IPrec@0.1"),
    ("P(rel=)@5", r"parameters are written name=value, separated by commas; got 'rel='"),
    ("P(2)@5", r"parameters are written name=value"),
    ("P(rel=2,,judged_only=True)@5", r"parameters are written name=value"),
    ("P(rel=2,rel=3)@5", r"the parameter rel is given twice"),
    ("P(cutoff=5)@5", r"the cutoff is given twice"),
    ("P(rel=two)@5", r"a parameter's value must be a number, True/False, a quoted string or a dict; got 'two'"),
    ("P(rel=True)@5", r"rel must be an integer; got True"),
    ("P(rel=1.5)@5", r"rel must be an integer; got 1.5"),
    ("P(judged_only=1)@5", r"judged_only must be True or False; got 1"),
    ("P@0", r"cutoff must be a positive integer; got 0"),
    ("P@5.5", r"cutoff must be a positive integer; got 5.5"),
    ("RBP(p=1.5,rel=1)", r"p must be a number in \(0, 1\]; got 1.5"),
    ("RBP(p=1,rel=1)", r"RBP's p must be below 1 here"),
    ("nDCG(dcg='exp')", r"dcg must be 'log2' or 'exp-log2'; got 'exp'"),
    ("IPrec@1.5", r"a recall level must be a number in \[0, 1\]; got 1.5"),
    ("P(rel=(2)@5", r"unbalanced brackets or quotes"),
    ("SetF(beta=-1)", r"beta must be a number >= 0"),
])
def test_malformed_parameters_are_measure_errors(name, message):
    with pytest.raises(MeasureError, match=message):
        parse_one(name)
    if "RBP's p" not in message:  # ir_measures' language allows p=1; rbp@p does not
        with pytest.raises(LanguageError):
            read_ir_measure(name)


@pytest.mark.parametrize("name, reason", [
    ("INST", "is a C/W/L measure of cwl_eval"), ("INSQ(T=2)", "C/W/L"), ("SDCG@10", "C/W/L"), ("BPM@5", "C/W/L"),
    ("NERR8@5", "C/W/L"), ("alpha_nDCG@20", "needs subtopic"), ("α_nDCG@20", "needs subtopic"),
    ("ERR_IA@20", "needs subtopic"), ("nERR_IA@20", "needs subtopic"), ("P_IA@10", "needs subtopic"),
    ("AP_IA", "needs subtopic"), ("NRBP", "needs subtopic"), ("StRecall@10", "needs subtopic"),
    ("Accuracy", "diagnostic"),
])
def test_measures_not_computed_say_why(name, reason):
    with pytest.raises(Unsupported, match=reason) as err:
        parse_one(name)
    assert not isinstance(err.value, MeasureError)
    assert "is not computed here: it" in str(err.value)
    with pytest.raises(NotComputed):
        read_ir_measure(name)
    with pytest.raises(ValueError, match=reason):
        parse_measures([name])


@pytest.mark.parametrize("name", ["RBP(rel=2)@5", "nDCG(gains={0:0,1:1,2:3})@10",
                                  "nDCG(dcg='exp-log2',gains={1:2})"])
def test_combinations_no_one_computes_are_unsupported(name):
    with pytest.raises(Unsupported) as err:
        parse_one(name)
    assert not isinstance(err.value, MeasureError)


def test_not_ir_measures_language_falls_through():
    assert read_ir_measure("map") is None and read_ir_measure("ndcg_cut.10") is None
    assert read_ir_measure("Foo(rel=1)@5") is None
    with pytest.raises(MeasureError, match="unknown measure name 'Foo"):
        parse_one("Foo(rel=1)@5")


def test_options_round_trip_and_spelling():
    assert split_options(with_options("map@10", 2, False)) == ("map@10", 2, False)
    assert split_options("ndcg") == ("ndcg", None, None)
    m = read_ir_measure("SetF(rel=2, beta=0.5)")
    assert (m.measure, m.params, m.spelling) == ("SetF", {"rel": 2, "beta": 0.5}, "SetF(beta=0.5,rel=2)")
    assert read_ir_measure("MRR@10").measure == "RR"
    # the same measure in two spellings is one key
    assert parse_measures(["P(rel=2)@5", "P(cutoff=5, rel=2)"]) == [("precision@5|rel=2", "P(rel=2)@5")]
