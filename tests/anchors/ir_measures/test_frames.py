"""DataFrames as ir_measures takes them: ``to_frame("ir_measures")`` gives the qrels and run frames
ir_measures evaluates (its ``query_id, doc_id, relevance`` / ``score`` columns), to the values
``evaluate_trec(complete=True)`` gives (ir_measures' default provider for these measures is
pytrec_eval; ir_measures scores a qrels query the run lacks 0, as trec_eval's ``-c``), and
``qrels_from_frame`` / ``run_from_frame`` read ir_measures' own frames back (found by their column
names). Runs without tied scores (ties are checked against pytrec_eval in tests/anchors/trec_eval)."""
from __future__ import annotations

import pytest

pd = pytest.importorskip("pandas")
pytest.importorskip("pyarrow")
ir_measures = pytest.importorskip("ir_measures")

from retrieval_core.trec import (  # noqa: E402
    evaluate_trec, qrels_from_dict, qrels_from_frame, run_from_dict, run_from_frame,
)
from tests.unit.trec.cases import random_case  # noqa: E402

# ir_measures name -> trec_eval name
MEASURES = {"AP": "map", "nDCG@10": "ndcg_cut_10", "P@5": "P_5", "RR": "recip_rank", "R@100": "recall_100"}


@pytest.mark.parametrize("seed", range(3))
def test_ir_measures_evaluates_our_frames_to_our_values(seed):
    qrels_d, run_d = random_case(seed, ties=False)
    qrels, run = qrels_from_dict(qrels_d), run_from_dict(run_d)
    qrels_df, run_df = qrels.to_frame("ir_measures"), run.to_frame("ir_measures")
    measures = [ir_measures.parse_measure(name) for name in MEASURES]
    theirs = {(m.query_id, str(m.measure)): m.value for m in ir_measures.iter_calc(measures, qrels_df, run_df)}
    ours = evaluate_trec(qrels, run, list(MEASURES.values()), complete=True).per_query()
    assert {q for q, _ in theirs} == set(ours)
    for (q, name), value in theirs.items():
        assert ours[q][MEASURES[name]] == pytest.approx(value, abs=1e-12), (q, name)
    back_q, back_r = qrels_from_frame(qrels_df), run_from_frame(run_df)
    assert back_q.to_dict() == qrels_d and back_r.to_dict() == run_d


def test_ir_measures_own_frames_are_read():
    qrels = [ir_measures.Qrel("q1", "a", 2), ir_measures.Qrel("q1", "b", 0), ir_measures.Qrel("q2", "a", 1)]
    run = [ir_measures.ScoredDoc("q1", "b", 1.5), ir_measures.ScoredDoc("q1", "a", 0.5)]
    qrels_df, run_df = pd.DataFrame(qrels), pd.DataFrame(run)  # (Qrel also has an iteration field)
    assert qrels_from_frame(qrels_df).to_dict() == {"q1": {"a": 2, "b": 0}, "q2": {"a": 1}}
    assert run_from_frame(run_df).to_dict() == {"q1": {"b": 1.5, "a": 0.5}}
