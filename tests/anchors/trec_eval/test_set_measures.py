"""trec_eval's set measures and measures of counts at cutoffs (set_P, set_recall, set_relative_P,
set_map, set_F, relative_P, Rprec_mult, 11pt_avg, utility, unj, relstring) and the flags -N / -R:
per query and in the mean, against trec_eval's loops in plain Python (trec_eval_arith.py, itself
checked against trec_eval's outputs in test_arithmetic.py), against pytrec_eval (trec_eval 9.0.8)
where it computes them, and against lines trec_eval 10 printed by hand (the C quirks)."""
from __future__ import annotations

import os
import random
from pathlib import Path

import pytest

pytest.importorskip("numpy")

from retrieval_core.cli import main  # noqa: E402
from retrieval_core.trec import evaluate_trec, qrels_from_dict, run_from_dict  # noqa: E402

from . import trec_eval_arith as oracle  # noqa: E402

DATA = Path(__file__).parent / "data"
NAMES = ["set_P", "set_recall", "set_relative_P", "set_map", "set_F", "set_F.0.5", "set_F.2.5,1", "relative_P",
         "relative_P.1,3,7,40", "unj", "unj.1,2,9,50", "Rprec_mult", "Rprec_mult.-0.5,0,0.35,3.3", "11pt_avg",
         "11pt_avg.0.2,0.5,0.8", "11pt_avg.0.8,0.1,0.5", "11pt_avg.0,0,.33", "utility", "utility.2,-1,0.5,0.25",
         "relstring", "relstring.3", "relstring.30"]


def _case(rng: random.Random, complete: bool):
    """Graded qrels with negative (unjudged) rels, zeros, and queries without a relevant document;
    runs with tied scores, documents outside the qrels, short lists; under ``complete`` some queries
    missing from the run."""
    n_docs = rng.choice([3, 8, 25])
    qrels, run = {}, {}
    for i in range(rng.choice([rng.randint(1, 6), rng.randint(15, 30)])):
        docs = [f"d{j}" for j in range(n_docs)]
        grades = rng.choice([[0, 1], [0, 0, 0, 1, 2, 3, 12], [0, 0, 1, 2, -1], [0, -1]])
        qrels[f"q{i}"] = {d: rng.choice(grades) for d in rng.sample(docs, rng.randint(1, n_docs))}
        qrels[f"q{i}"][docs[0]] = max(qrels[f"q{i}"].get(docs[0], 0), 0)  # not all negative (trec_eval crashes)
        if complete and rng.random() < 0.3:
            continue
        tied = rng.random() < 0.5
        pool = docs + ["x0", "x1", "x2"]
        run[f"q{i}"] = {d: float(rng.randint(0, 3)) if tied else rng.random()
                        for d in rng.sample(pool, rng.randint(1, rng.choice([3, len(pool)])))}
    return qrels, run or {"q0": {"d0": 1.0}}


def test_random_runs_print_the_lines_of_trec_evals_loops():
    # 600 small random runs: every measure here, per query and summary, -c / -l / -M / -N / rule mixed
    rng = random.Random(29)
    differing = []
    for case in range(600):
        complete, level = rng.random() < 0.35, rng.choice([1, 1, 2, 3])
        max_per_query = rng.choice([None, None, None, 4, 1, 0])
        num_docs, rule = rng.choice([0, 0, 50, 1000]), rng.choice(["lround", "v9"])
        qrels, run = _case(rng, complete)
        names = rng.sample(NAMES, 6)
        ev = evaluate_trec(qrels_from_dict(qrels), run_from_dict(run), names, level=level, complete=complete,
                           max_per_query=max_per_query, num_docs=num_docs, iprec_rule=rule)
        got = ev.lines(per_query=True)
        want = oracle.lines(qrels, run, [name for _, name in ev.measures], per_query=True, level=level,
                            complete=complete, max_per_query=max_per_query, num_docs=num_docs, rule=rule)
        if got != want:
            differing.append((case, [(a, b) for a, b in zip(got, want) if a != b][:3]))
    assert not differing, differing[:3]


def test_many_queries_bit_for_bit_per_query_and_in_the_mean():
    rng = random.Random(5)
    docs = [f"d{j}" for j in range(80)]
    qrels = {f"q{i:03d}": {d: rng.choice([0, 0, 1, 2, 3, -1]) for d in rng.sample(docs, rng.randint(1, 80))}
             for i in range(300)}
    run = {q: {d: float(rng.randint(0, 9)) for d in rng.sample(docs + ["y"], rng.randint(1, 81))}
           for q in list(qrels)[:250]}
    names = [n for n in NAMES if not n.startswith("relstring")]
    ev = evaluate_trec(qrels_from_dict(qrels), run_from_dict(run), names, complete=True, num_docs=7)
    trec_names = [name for _, name in ev.measures]
    qids, per, summary = oracle.evaluate(qrels, run, trec_names, complete=True, num_docs=7)
    assert list(ev.query_ids) == qids
    for j, name in enumerate(trec_names):
        assert ev.values[:, j].tolist() == per[name], name
    assert ev.summary() == summary
    texts = evaluate_trec(qrels_from_dict(qrels), run_from_dict(run), ["relstring.30"], complete=True)
    assert [row["relstring_30"] for row in texts.per_query().values()] == \
        oracle.evaluate(qrels, run, ["relstring_30"], complete=True)[1]["relstring_30"]


PYTREC = ["set_P", "set_recall", "set_relative_P", "set_map", "set_F", "set_F.0.5", "relative_P", "relative_P.1,3,7",
          "Rprec_mult", "Rprec_mult.0.5,1.5", "11pt_avg", "utility"]


@pytest.mark.parametrize("level", [1, 2])
def test_per_query_values_are_pytrec_evals_doubles(level):
    # pytrec_eval (trec_eval 9.0.8) computes these (not unj; relstring comes back as 0.0; utility only
    # with its defaults: its parser refuses a negative parameter); 11pt_avg by trec_eval 9's rule
    pytrec_eval = pytest.importorskip("pytrec_eval")
    rng = random.Random(level)
    docs = [f"d{j}" for j in range(30)]
    qrels = {f"q{i}": {d: rng.choice([0, 1, 2, 3, -1]) for d in rng.sample(docs, rng.randint(1, 30))}
             for i in range(80)}
    run = {q: {d: rng.randint(0, 64) / 8 for d in rng.sample(docs + ["z"], rng.randint(1, 31))} for q in qrels}
    ours = evaluate_trec(qrels_from_dict(qrels), run_from_dict(run), PYTREC, level=level, iprec_rule="v9")
    theirs = {}
    for name in PYTREC:  # one evaluator per name: pytrec_eval merges the parameters of one measure
        for q, row in pytrec_eval.RelevanceEvaluator(qrels, {name}, relevance_level=level).evaluate(run).items():
            if name == "set_F.0.5":  # pytrec_eval names it set_F
                row = {"set_F_0.5": row["set_F"]}
            theirs.setdefault(q, {}).update(row)
    got = ours.per_query()
    assert sorted(got) == sorted(theirs) and len(got) == 80
    names = [name for _, name in ours.measures]
    assert len(names) == 6 + 9 + 3 + 10 + 2 + 2 and all(n in theirs["q0"] for n in names)
    for q in got:
        assert [got[q][n] for n in names] == [theirs[q][n] for n in names], q


def _cli(args, capsys):
    old = os.getcwd()
    os.chdir(DATA)
    try:
        status = main(["trec", *args])
    finally:
        os.chdir(old)
    out, err = capsys.readouterr()
    return status, out, err


def test_a_query_missing_under_c_is_trec_evals_made_up_run(capsys):
    # trec_eval 10 by hand (-q -c; 302 is not in results.trunc): one made-up document outside the
    # qrels, then 'utility' and 'relstring' (those names only) cleared
    args = ["-q", "-c", "-m", "relstring.5,utility.2,-1,0.5,0.1", "-N", "1000", "qrels.test", "results.trunc"]
    status, out, err = _cli(args, capsys)
    assert (status, err) == (0, "")
    lines = out.splitlines()
    assert "relstring_5           \t302\t'-'" in lines and "utility_2,-1,0.5,0.1  \t302\t129.7000" in lines
    assert lines[-1] == "utility_2,-1,0.5,0.1  \tall\t27.0333"
    _, out, _ = _cli(["-q", "-c", "-m", "relstring,utility", "qrels.test", "results.trunc"], capsys)
    assert {"relstring             \t302\t''", "utility               \t302\t0.0000"} <= set(out.splitlines())


def test_unsorted_11pt_avg_parameters_and_an_empty_list_print_trec_evals_lines(capsys):
    # trec_eval 10 by hand: it walks the parameters as given (not sorted); -M0 divides 0 by 0
    _, out, _ = _cli(["-q", "-l2", "-m", "11pt_avg.0.9,0.1,0.5,0.3", "qrels.rel_level", "results.test"], capsys)
    assert [line.split("\t")[2] for line in out.splitlines()] == ["0.0016", "0.9355", "0.1136", "0.3502"]
    assert out.splitlines()[0].startswith("11pt_avg_0.9,0.1,0.5,0.3\t301")  # a name past 22 characters
    _, out, _ = _cli(["-M0", "-m", "11pt_avg,set_P", "qrels.test", "results.test"], capsys)
    assert out == "11pt_avg              \tall\t  -nan\nset_P                 \tall\t0.0000\n"


def test_the_set_nickname(capsys):
    status, out, err = _cli(["-m", "set", "qrels.test", "results.test"], capsys)
    assert (status, err) == (0, "")
    assert out == "".join(line + "\n" for line in [  # trec_eval 10 -m set, by hand
        "runid                 \tall\tSTANDARD", "num_q                 \tall\t3", "num_ret               \tall\t1500",
        "num_rel               \tall\t561", "num_rel_ret           \tall\t131",
        "utility               \tall\t-412.6667",
        "set_P                 \tall\t0.0873", "set_relative_P        \tall\t0.5997",
        "set_recall            \tall\t0.5997", "set_map               \tall\t0.0354",
        "set_F                 \tall\t0.1194"])


def test_N_sets_utility_d_term(capsys):
    # trec_eval 10 by hand: -N 1000 -m utility.1,1,1,1 prints 1000 (every document counts once); without -N,
    # N is 0 (not the help's MAX_LONG): 0
    assert _cli(["-N", "1000", "-m", "utility.1,1,1,1", "qrels.test", "results.test"], capsys)[1] == \
        "utility_1,1,1,1       \tall\t1000.0000\n"
    assert _cli(["-m", "utility.1,1,1,1", "qrels.test", "results.test"], capsys)[1] == \
        "utility_1,1,1,1       \tall\t0.0000\n"


@pytest.mark.parametrize("args, message", [
    (["-R", "prefs"], "argument -R: trec_eval's rel_info_format 'prefs' (preference judgements) is not supported: "
                      "only 'qrels'"),
    (["-R", "qrels_jg"], "argument -R: trec_eval's rel_info_format 'qrels_jg' (preference judgements)"),
    (["-R", "xml"], "argument -R: unknown rel_info_format 'xml'"),
    (["-N", "1e3"], "argument -N: expected an integer from -2**63 to 2**63 - 1; got '1e3'"),
    (["-N", "99999999999999999999"], "argument -N: expected an integer"),
])
def test_bad_flags_are_one_line(args, message, capsys):
    with pytest.raises(SystemExit) as exit_:
        _cli([*args, "qrels.test", "results.test"], capsys)
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and len(err.splitlines()) == 1 and message in err


def test_R_qrels_is_the_default(capsys):
    assert _cli(["-R", "qrels", "-m", "set_P", "qrels.test", "results.test"], capsys)[1] == \
        "set_P                 \tall\t0.0873\n"
