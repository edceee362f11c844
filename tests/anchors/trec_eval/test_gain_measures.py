"""trec_eval's graded and sampled-pool measures (issue 29): infAP, gm_bpref, binG, G, dcg / ideal_dcg /
ndcg with a gain table, ndcg_rel, Rndcg, rbp, rbp_resid. Each per-query value is trec_eval's double:
against pytrec_eval (trec_eval 9.0.8's code) where it computes the measure, and against the plain-Python
transcription of trec_eval 10's loops (trec_eval_arith.py) for all of them, gain tables included; the
lines trec_eval 10 prints in corner cases (checked by hand with its binary) are asserted as such."""
from __future__ import annotations

import math
import random

import pytest

pytest.importorskip("numpy")

from retrieval_core.cli import main  # noqa: E402
from retrieval_core.trec import evaluate_trec, qrels_from_dict, run_from_dict  # noqa: E402

from . import trec_eval_arith as oracle  # noqa: E402

BARE = ["infAP", "gm_bpref", "binG", "G", "ndcg_rel", "Rndcg", "rbp", "rbp_resid", "ideal_dcg", "dcg", "ndcg"]
TABLES = ["1=3,2=9,4=4.5", "0=1", "1=3,2=2.5", "2=0.5,1=0.2,3=3.7", "1=-1,2=5", "-1=2", "-2=1,-1=0.5,0=-1",
          "3=1,1=3", "0=0.5,2=0", "4=2.5,2=3,1=2.9", "1=1e1,2=+.5"]


def _names(rng: random.Random):
    names = rng.sample(BARE, 4)
    for base in rng.sample(["G", "dcg", "ideal_dcg", "ndcg", "ndcg_rel", "Rndcg", "rbp"], 3):
        names.append(f"{base}.{rng.choice(TABLES)}")
    names.append(rng.choice(["rbp.p=0.5", "rbp.p=0.95,2=1", "rbp_resid.p=0.8", "rbp_resid.p=1", "rbp.p=0"]))
    return names


def _case(rng: random.Random, complete: bool):
    grades = rng.choice([[0, 1], [0, 1, 2, 3, 4], [0, 0, 1, 2, -1], [0, 1, -1, -1], [0, 2, 4], [0, 0, 0, 1]])
    qrels, run = {}, {}
    for i in range(rng.choice([rng.randint(1, 6), rng.randint(15, 30)])):
        docs = [f"d{j}" for j in range(rng.choice([3, 8, 20]))]
        qrels[f"q{i}"] = {d: rng.choice(grades) for d in rng.sample(docs, rng.randint(1, len(docs)))}
        if complete and rng.random() < 0.3:
            continue  # a query the run lacks
        tied = rng.random() < 0.5
        pool = docs + [f"x{j}" for j in range(4)]  # x: outside the qrels
        run[f"q{i}"] = {d: float(rng.randint(0, 3)) if tied else rng.random()
                        for d in rng.sample(pool, rng.randint(1, len(pool)))}
    return qrels, run or {"q0": {"d0": 1.0}}


def test_random_runs_print_the_lines_of_trec_evals_loops():
    # 600 small random runs: graded, negative (pooled, unjudged) and absent documents, ties, gain tables with
    # fractional, negative and out-of-range levels, -c (a lacking query "retrieves" one document), -M, -l
    rng = random.Random(29)
    differing = []
    for case in range(600):
        complete, level = rng.random() < 0.3, rng.choice([0, 1, 1, 2])
        max_per_query = rng.choice([None, None, 3, 0])
        qrels, run = _case(rng, complete)
        ev = evaluate_trec(qrels_from_dict(qrels), run_from_dict(run), _names(rng), level=level, complete=complete,
                           max_per_query=max_per_query)
        got = ev.lines(per_query=True)
        want = oracle.lines(qrels, run, [name for _, name in ev.measures], per_query=True, level=level,
                            complete=complete, max_per_query=max_per_query)
        if got != want:
            differing.append((case, [(a, b) for a, b in zip(got, want) if a != b][:3]))
    assert not differing, differing[:3]


def _same(a: float, b: float) -> bool:
    return a == b or (math.isnan(a) and math.isnan(b) and math.copysign(1, a) == math.copysign(1, b))


def test_many_queries_bit_for_bit_per_query_and_in_the_mean():
    rng = random.Random(30)
    docs = [f"d{j}" for j in range(60)]
    qrels = {f"q{i:03d}": {d: rng.choice([0, 1, 2, 3, -1]) for d in rng.sample(docs, rng.randint(1, 60))}
             for i in range(300)}
    run = {q: {d: float(rng.randint(0, 9)) for d in rng.sample(docs + ["x", "y"], rng.randint(1, 62))}
           for q in qrels}
    names = BARE + ["G.1=3,2=9", "ndcg_rel.2=2.5,3=2", "Rndcg.1=0.5", "rbp.p=0.8,3=9", "ndcg.1=3,2=2.5"]
    ev = evaluate_trec(qrels_from_dict(qrels), run_from_dict(run), names, level=2)
    out = [name for _, name in ev.measures]
    qids, per, summary = oracle.evaluate(qrels, run, out, level=2)
    assert list(ev.query_ids) == qids
    for j, name in enumerate(out):
        if name != "gm_bpref":
            assert all(_same(a, b) for a, b in zip(ev.values[:, j].tolist(), per[name])), name
    assert all(_same(ev.summary()[n], summary[n]) for n in out)


PYTREC = ["infAP", "gm_bpref", "binG", "G", "ndcg_rel", "Rndcg"]


@pytest.mark.parametrize("level", [1, 2])
def test_per_query_values_are_pytrec_evals_doubles(level):
    # pytrec_eval (trec_eval 9.0.8's m_*.c) on qrels graded 0..4 with unjudged -1 and documents outside the
    # qrels: equal to the last bit (scores exact in float32, which pytrec_eval ranks by); its gm_bpref per
    # query is log(max(bpref, 1e-5)), the term trec_eval adds
    pytrec_eval = pytest.importorskip("pytrec_eval")
    rng = random.Random(level)
    docs = [f"d{j}" for j in range(30)]
    qrels = {}
    for i in range(80):
        judged = {d: rng.choice([0, 1, 2, 3, 4, -1]) for d in rng.sample(docs, rng.randint(1, 30))}
        judged[docs[i % 30]] = rng.choice([0, 1, 2])  # trec_eval 9 and 10 refuse a query judged only below 0
        qrels[f"q{i}"] = judged
    run = {q: {d: rng.randint(0, 64) / 8 for d in rng.sample(docs + ["x", "y", "z"], rng.randint(1, 33))}
           for q in qrels}
    ev = evaluate_trec(qrels_from_dict(qrels), run_from_dict(run), PYTREC + ["bpref"], level=level)
    want = pytrec_eval.RelevanceEvaluator(qrels, set(PYTREC), relevance_level=level).evaluate(run)
    got = ev.per_query()
    assert sorted(got) == sorted(want)
    for q in got:
        ours = [got[q][n] for n in PYTREC if n != "gm_bpref"] + [math.log(max(got[q]["bpref"], 1e-5))]
        assert ours == [want[q][n] for n in PYTREC if n != "gm_bpref"] + [want[q]["gm_bpref"]], q


def test_the_order_of_a_fractional_gain_table_is_trec_evals(tmp_path, capsys):
    # trec_eval 10 by hand: its comparator (int) (g1 - g2) calls 3 and 2.5 equal, and glibc's merge sort
    # leaves level 2 (2.5) on top: the "ideal" takes the level-2 document first (ndcg 1 for that order)
    (tmp_path / "q").write_text("q 0 a 1\nq 0 b 2\nq 0 c 0\n")
    (tmp_path / "r").write_text("q Q0 b 1 2 t\nq Q0 a 2 1 t\nq Q0 c 3 0 t\n")
    assert main(["trec", "-m", "ndcg.1=3,2=2.5", "-m", "G.1=3,2=2.5", "-m", "Rndcg.1=3,2=2.5",
                 str(tmp_path / "q"), str(tmp_path / "r")]) == 0
    assert capsys.readouterr().out == ("G_1=3,2=2.5           \tall\t1.0000\nndcg_1=3,2=2.5        \tall\t1.0000\n"
                                       "Rndcg_1=3,2=2.5       \tall\t1.0000\n")


def test_no_point_of_rndcg_is_nan_printed_as_trec_eval_prints_it(tmp_path, capsys):
    # trec_eval 10 by hand, -l0 (q1 judged 0 only: R = 2 but no ideal gain): Rndcg q1 "  -nan", all "  -nan"
    (tmp_path / "q").write_text("q1 0 a 0\nq1 0 b 0\nq2 0 c 1\nq2 0 d 0\n")
    (tmp_path / "r").write_text("q1 Q0 a 1 0.9 t\nq1 Q0 x 2 0.8 t\nq2 Q0 d 1 0.9 t\nq2 Q0 c 2 0.8 t\n")
    assert main(["trec", "-q", "-l0", "-m", "Rndcg,G", str(tmp_path / "q"), str(tmp_path / "r")]) == 0
    assert capsys.readouterr().out == (
        "G                     \tq1\t0.0000\nRndcg                 \tq1\t  -nan\nG                     \tq2\t0.6309\n"
        "Rndcg                 \tq2\t0.0000\nG                     \tall\t0.3155\nRndcg                 \tall\t  -nan\n")


def test_complete_evaluates_a_lacking_query_on_one_document_outside_the_qrels(tmp_path, capsys):
    # trec_eval 10 by hand, -c: q2 (not in the run) "retrieves" one document outside the qrels: a gain for
    # level -1 and rbp_resid with parameters see it (1.0); the bare rbp_resid is set to 0 there
    (tmp_path / "q").write_text("q1 0 a 1\nq2 0 b 1\n")
    (tmp_path / "r").write_text("q1 Q0 a 1 1 t\n")
    files = [str(tmp_path / "q"), str(tmp_path / "r")]
    assert main(["trec", "-q", "-c", "-m", "dcg.-1=2", "-m", "rbp_resid.p=0.8", *files]) == 0
    assert capsys.readouterr().out == (
        "dcg_-1=2              \tq1\t1.0000\nrbp_resid_p=0.8       \tq1\t0.0000\n"
        "dcg_-1=2              \tq2\t2.0000\nrbp_resid_p=0.8       \tq2\t1.0000\n"
        "dcg_-1=2              \tall\t1.5000\nrbp_resid_p=0.8       \tall\t0.5000\n")
    assert main(["trec", "-q", "-c", "-m", "rbp_resid", *files]) == 0
    assert capsys.readouterr().out.splitlines()[1] == "rbp_resid             \tq2\t0.0000"
