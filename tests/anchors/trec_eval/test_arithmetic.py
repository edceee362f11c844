"""trec_eval's arithmetic (issue 26, items 1-3): per-query values and summaries added in
trec_eval's order, so that every printed digit is trec_eval's; ``dcg`` with graded gains;
``num_rel`` under ``-c``. The oracle is tests/anchors/trec_eval/trec_eval_arith.py (trec_eval's loops
in plain Python), itself checked here against trec_eval's own outputs."""
from __future__ import annotations

import math
import random
from pathlib import Path

import pytest
import torch

pytest.importorskip("numpy")

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from retrieval_core.cli import main  # noqa: E402
from retrieval_core.trec import evaluate_trec, qrels_from_dict, read_qrels, read_run, run_from_dict  # noqa: E402
from retrieval_core.trec.exact import running_sums, sequential_gm, sequential_mean  # noqa: E402
from retrieval_core.trec.output import parse_trec_eval_output  # noqa: E402

from . import trec_eval_arith as oracle  # noqa: E402

DATA = Path(__file__).parent / "data"
# every measure evaluate_trec prints under a trec_eval name (with parameters where it takes them)
NAMES = ["num_q", "num_ret", "num_rel", "num_rel_ret", "map", "gm_map", "Rprec", "bpref", "recip_rank",
         "iprec_at_recall", "P.1,2,3,5,7,10,30", "recall.1,3,5,10,100", "dcg", "ndcg", "ndcg_cut.1,3,5,10,30",
         "map_cut.1,3,5,10,30", "success.1,5,10", "num_nonrel_judged_ret"]


def _issue_example():
    """32 queries of 5 documents, ``hits[i]`` of them relevant, the relevant ones first."""
    hits = [3, 3, 0, 2, 4, 3, 3, 2, 3, 2, 4, 1, 4, 1, 2, 1, 0, 4, 2, 4, 5, 4, 1, 2, 0, 5, 0, 5, 2, 3, 4, 0]
    qrels = {f"q{i:02d}": {f"d{d}": int(d < h) for d in range(5)} for i, h in enumerate(hits)}
    run = {f"q{i:02d}": {f"d{d}": float(10 - d) for d in range(5)} for i in range(len(hits))}
    return qrels, run


def test_p5_mean_on_a_half_is_trec_evals_digit(tmp_path, capsys):
    # mean P_5 = 79 / 160 = 0.49375: added query after query (trec_eval) it prints 0.4938;
    # torch's pairwise sum gives a double just below and printed 0.4937
    qrels, run = _issue_example()
    ev = evaluate_trec(qrels_from_dict(qrels), run_from_dict(run), ["P_5"])
    assert ev.lines() == ["P_5                   \tall\t0.4938"]
    (tmp_path / "q").write_text("".join(f"{q} 0 {d} {r}\n" for q, js in qrels.items() for d, r in js.items()))
    (tmp_path / "r").write_text("".join(f"{q} Q0 {d} {i + 1} {s} t\n" for q, ss in run.items()
                                        for i, (d, s) in enumerate(ss.items())))
    assert main(["trec", "-m", "P.5", str(tmp_path / "q"), str(tmp_path / "r")]) == 0
    assert capsys.readouterr().out == "P_5                   \tall\t0.4938\n"


def test_bpref_terms_are_added_rank_by_rank():
    # one query (trec_eval 10: 0.7413; the terms summed pairwise over the row: 0.7412)
    rels = "0112021-110022-22011111001-12210221-211100000102010000-0001"
    judged = {f"d{i:02d}": int(c) for i, c in enumerate(rels) if c != "-"}
    judged.update({"x0": 0, "x1": 0, "x2": 0})
    run = {"q": {f"d{i:02d}": float(len(rels) - i) for i in range(len(rels))}}
    ev = evaluate_trec(qrels_from_dict({"q": judged}), run_from_dict(run), ["bpref"])
    assert ev.lines(per_query=True) == ["bpref                 \tq\t0.7413", "bpref                 \tall\t0.7413"]


def test_dcg_is_trec_evals_graded_dcg():
    # trec_eval -m dcg: qrels a 2, b 1; run b, a: 1 / log2(2) + 2 / log2(3) = 2.2619 (binary gains: 1.6309)
    ev = evaluate_trec(qrels_from_dict({"q": {"a": 2, "b": 1}}), run_from_dict({"q": {"b": 2.0, "a": 1.0}}),
                       ["dcg", "ndcg"], level=2)
    assert ev.lines() == ["dcg                   \tall\t2.2619", "ndcg                  \tall\t0.8597"]
    assert ev.summary()["dcg"] == 1.0 + 2.0 / math.log2(3)
    # our dcg@k (no trec_eval name) takes the same gains in evaluate_trec
    ev = evaluate_trec(qrels_from_dict({"q": {"a": 2, "b": 1}}), run_from_dict({"q": {"a": 2.0, "b": 1.0}}),
                       ["dcg@1", "dcg_exp@1"])
    assert ev.summary() == {"dcg@1": 2.0, "dcg_exp@1": 3.0}


def test_num_rel_under_complete_counts_every_positive_rel_whatever_the_level():
    # trec_eval -c -l2: the summary num_rel counts the qrels' rel > 0 over all its queries (3);
    # per query, and without -c, rel >= level (1)
    qrels = qrels_from_dict({"q1": {"a": 2, "b": 1, "e": 0}, "q2": {"c": 1}, "q3": {"z": -1}})
    run = run_from_dict({"q1": {"a": 2.0, "b": 1.0}})
    ev = evaluate_trec(qrels, run, ["num_rel", "map"], level=2, complete=True)
    assert ev.summary()["num_rel"] == 3
    assert [row["num_rel"] for row in ev.per_query().values()] == [1, 0, 0]
    assert evaluate_trec(qrels, run, ["num_rel"], level=2).summary()["num_rel"] == 1
    assert evaluate_trec(qrels, run, ["num_rel"], complete=True).summary()["num_rel"] == 3


def _random_case(rng: random.Random, complete: bool):
    n_docs = rng.choice([3, 8, 20])
    grades = rng.choice([[0, 1], [0, 1, 2, 3, 4], [0, 0, 1, 2, -1]])
    qrels, run = {}, {}
    for i in range(rng.choice([rng.randint(1, 8), rng.randint(20, 40)])):  # many: means on a .5
        docs = [f"d{j}" for j in range(n_docs)]
        qrels[f"q{i}"] = {d: rng.choice(grades) for d in rng.sample(docs, rng.randint(1, n_docs))}
        if complete and rng.random() < 0.3:
            continue
        tied = rng.random() < 0.5
        run[f"q{i}"] = {d: float(rng.randint(0, 3)) if tied else rng.random()
                        for d in rng.sample(docs, rng.randint(1, n_docs))}
    run = run or {"q0": {"d0": 1.0}}
    return qrels, run


def test_random_runs_print_the_lines_of_trec_evals_arithmetic():
    # 1,000 small random runs, every measure, per query and summary, -c / -l / -M mixed
    rng = random.Random(26)
    differing = []
    for case in range(1000):
        complete, level = rng.random() < 0.3, rng.choice([1, 1, 2])
        max_per_query = rng.choice([None, None, 4])
        qrels, run = _random_case(rng, complete)
        names = rng.sample(NAMES, 5)
        ev = evaluate_trec(qrels_from_dict(qrels), run_from_dict(run), names, level=level, complete=complete,
                           max_per_query=max_per_query)
        got = ev.lines(per_query=True)
        want = oracle.lines(qrels, run, [name for _, name in ev.measures], per_query=True, level=level,
                            complete=complete, max_per_query=max_per_query)
        if got != want:
            differing.append((case, [(a, b) for a, b in zip(got, want) if a != b][:3]))
    assert not differing, differing[:3]


def test_many_queries_bit_for_bit_per_query_and_in_the_mean():
    # 400 queries of up to 60 documents in one run: every per-query value and every mean is
    # the oracle's double, not only its printed digits
    rng = random.Random(7)
    docs = [f"d{j}" for j in range(60)]
    qrels = {f"q{i:03d}": {d: rng.choice([0, 1, 2, 3, -1]) for d in rng.sample(docs, rng.randint(1, 60))}
             for i in range(400)}
    run = {q: {d: float(rng.randint(0, 9)) for d in rng.sample(docs, rng.randint(1, 60))} for q in qrels}
    ev = evaluate_trec(qrels_from_dict(qrels), run_from_dict(run), NAMES)
    names = [name for _, name in ev.measures]
    qids, per, summary = oracle.evaluate(qrels, run, names)
    assert list(ev.query_ids) == qids
    for j, name in enumerate(names):
        if name not in ("num_q", "gm_map"):
            assert ev.values[:, j].tolist() == per[name], name
    assert ev.summary() == summary


@pytest.mark.parametrize("out, args", [
    ("out.test", {}), ("out.test.aq", {}), ("out.test.aqc", {"complete": True}),
    ("out.test.aqcM", {"complete": True, "max_per_query": 100}), ("out.test.aql", {"level": 2}),
    ("out.test.meas_params", {})])
def test_the_oracle_prints_trec_evals_own_outputs(out, args):
    run_file = "results.trunc" if "complete" in args else "results.test"
    qrels = read_qrels(DATA / ("qrels.rel_level" if args.get("level") else "qrels.test"))
    run = read_run(DATA / run_file, docs=qrels.docs)
    text = (DATA / out).read_text()
    skip = ("runid", "relstring", "ndcg") if out == "out.test.meas_params" else ("runid", "relstring")
    names = []
    for line in text.splitlines():
        name, query = line.split("\t")[0].strip(), line.split("\t")[1]
        if query == "all" and name not in skip and name not in names:
            try:
                oracle.value(oracle.Query({}, {}, 1, None), name)
            except KeyError:
                continue
            names.append(name)
    assert len(names) >= 10
    want = [line for line in text.splitlines()
            if line.split("\t")[0].strip() in names]
    got = oracle.lines(qrels.to_dict(), run.to_dict(), names, per_query=out != "out.test", **args)
    assert sorted(got) == sorted(want)
    assert parse_trec_eval_output("\n".join(got)) == parse_trec_eval_output("\n".join(want))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.lists(st.floats(0, 1e6, allow_nan=False), max_size=40), min_size=1, max_size=30))
def test_running_sums_add_left_to_right(rows):
    values = torch.tensor([v for row in rows for v in row], dtype=torch.float64)
    offsets = torch.tensor([0] + [len(row) for row in rows]).cumsum(0)
    got = running_sums(values, offsets).tolist()
    want = []
    for row in rows:
        total = 0.0
        for v in row:
            total += v
            want.append(total)
    assert got == want


@settings(max_examples=200, deadline=None)
@given(st.lists(st.floats(0, 1, allow_nan=False), min_size=1, max_size=300))
def test_summary_adds_query_after_query(values):
    total, logs = 0.0, 0.0
    for v in values:
        total += v
        logs += math.log(max(v, 1e-5))
    col = torch.tensor(values, dtype=torch.float64)
    assert sequential_mean(col.unsqueeze(1)).tolist() == [total / len(values)]
    assert sequential_gm(col) == math.exp(logs / len(values))


PYTREC_MEASURES = {"map", "P", "recall", "ndcg", "ndcg_cut", "map_cut", "recip_rank", "Rprec", "bpref", "success",
                   "num_ret", "num_rel", "num_rel_ret", "num_nonrel_judged_ret", "iprec_at_recall"}


@pytest.mark.parametrize("level", [1, 2, 3])
def test_graded_qrels_per_query_values_are_pytrec_evals_doubles(level):
    # every measure printed under a trec_eval name that pytrec_eval (trec_eval 9.0.8) has, on
    # qrels graded 0..4 with unjudged -1: equal to the last bit (scores exact in float32, the
    # precision pytrec_eval ranks by; iprec_at_recall by trec_eval 9's rule)
    pytrec_eval = pytest.importorskip("pytrec_eval")
    rng = random.Random(level)
    docs = [f"d{j}" for j in range(30)]
    qrels = {f"q{i}": {d: rng.choice([0, 1, 2, 3, 4, -1]) for d in rng.sample(docs, rng.randint(1, 30))}
             for i in range(60)}
    run = {q: {d: rng.randint(0, 64) / 8 for d in rng.sample(docs, rng.randint(1, 30))} for q in qrels}
    ev = evaluate_trec(qrels_from_dict(qrels), run_from_dict(run), sorted(PYTREC_MEASURES), level=level,
                       iprec_rule="v9")
    want = pytrec_eval.RelevanceEvaluator(qrels, PYTREC_MEASURES, relevance_level=level).evaluate(run)
    got = ev.per_query()
    assert sorted(got) == sorted(want) and len(got) == 60
    names = [name for _, name in ev.measures if name not in ("num_q", "gm_map")]
    assert len(names) == 59
    for q in got:
        assert [got[q][n] for n in names] == [want[q][n] for n in names], q
