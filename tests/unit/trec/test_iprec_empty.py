"""trec_eval's interpolated precision of an empty list: 0 retrieved relevant / 0 retrieved is a
NaN (-nan on x86-64) that m_iprec_at_recall.c keeps for the recall levels needing no relevant
document; the expected lines below are trec_eval 10's output on this case (checked by hand:
``trec_eval -q -c -J -m iprec_at_recall.0,.5 -m 11pt_avg qrels run``)."""
from __future__ import annotations

import math

import pytest
import torch

from retrieval_core.trec import evaluate_trec, qrels_from_dict, run_from_dict
from retrieval_core.trec.kernels import iprec_at_recall

QRELS = {"q1": {"d1": 1, "d2": 0}, "q2": {"d1": 0}, "q3": {"d5": 1, "d6": 1}, "q4": {"d1": 1},
         "q5": {"d9": 1}, "q6": {"d1": 1}, "q7": {"d3": 0}}
RUN = {"q1": {"x1": 3.0, "d1": 2.0}, "q2": {"x1": 3.0}, "q3": {"x2": 3.0, "x3": 2.0}, "q4": {"d1": 1.0},
       "q5": {"d9": 1.0, "zz": 0.0}}
NAMES = ["iprec_at_recall@0", "iprec_at_recall@0.5", "11pt_avg"]


def _lines(**options):
    ev = evaluate_trec(qrels_from_dict(QRELS), run_from_dict(RUN), NAMES, complete=True, **options)
    return {(m, q): v for m, q, v in (line.split("\t") for line in ev.lines(per_query=True))}


@pytest.mark.parametrize("rule", ["lround", "v9"])
def test_an_empty_list_is_nan_where_no_relevant_document_is_needed(rule):
    rel = torch.zeros(0, dtype=torch.bool)
    got = iprec_at_recall(rel, torch.tensor([0, 0, 0]), torch.tensor([0, 4]), [0.0, 0.1, 0.5], rule)
    # R = 0: every level needs 0 documents; R = 4: 0.1 needs lround(0.4) = 0 (trec_eval 10), 1 (v9)
    assert math.isnan(got[0, 0]) and math.isnan(got[0, 1]) and math.isnan(got[0, 2])
    assert math.isnan(got[1, 0]) and got[1, 2] == 0.0
    assert math.isnan(got[1, 1]) if rule == "lround" else got[1, 1] == 0.0
    assert math.copysign(1.0, float(got[0, 0])) < 0  # printed -nan, as C's 0.0 / 0.0


def test_a_made_up_document_is_retrieved():
    """Under -c a query the run lacks counts trec_eval's one made-up document: no NaN."""
    got = iprec_at_recall(torch.zeros(0, dtype=torch.bool), torch.tensor([0, 0]), torch.tensor([1]), [0.0, 1.0],
                          retrieved=torch.tensor([1]))
    assert got.tolist() == [[0.0, 0.0]]


def test_empty_lists_are_nan_as_in_trec_eval():
    lines = _lines(judged_only=True)
    nan, zero, one = "  -nan", "0.0000", "1.0000"
    for q in ("q2", "q7"):  # -J empties the list; R = 0
        assert [lines[(m, q)] for m in ("iprec_at_recall_0.00  ", "iprec_at_recall_0.50  ", "11pt_avg              ")] \
            == [nan, nan, nan]
    for q in ("q3", "q6"):  # R = 2, R = 1 (q6: the run lacks it, -J removes the made-up document)
        assert [lines[(m, q)] for m in ("iprec_at_recall_0.00  ", "iprec_at_recall_0.50  ", "11pt_avg              ")] \
            == [nan, zero, nan]
    assert lines[("iprec_at_recall_0.50  ", "q1")] == one and lines[("11pt_avg              ", "all")] == nan


def test_without_judged_only_the_made_up_document_keeps_values():
    lines = _lines()
    assert lines[("iprec_at_recall_0.00  ", "q6")] == "0.0000" and lines[("11pt_avg              ", "q7")] == "0.0000"
    assert lines[("iprec_at_recall_0.00  ", "all")] != "  -nan"


def test_max_per_query_0_empties_every_list():
    lines = _lines(max_per_query=0)
    assert lines[("iprec_at_recall_0.00  ", "q1")] == "  -nan" and lines[("iprec_at_recall_0.50  ", "q1")] == "0.0000"
