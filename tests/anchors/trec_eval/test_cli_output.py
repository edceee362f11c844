"""`retrieval-metrics trec`: its output against trec_eval's own (tests/anchors/trec_eval/data), line by line,
the unsupported measures on stderr, and the table of several runs with its paired tests."""
from __future__ import annotations

import json
import os
import random
from pathlib import Path

import pytest

pytest.importorskip("numpy")

from retrieval_core import compare  # noqa: E402
from retrieval_core.cli import main  # noqa: E402
from retrieval_core.cli.trec import measure_list  # noqa: E402
from retrieval_core.trec import evaluate_trec, read_qrels, read_run  # noqa: E402

DATA = Path(__file__).parent / "data"
CASES = {  # out file: the command's arguments (data/README.md, trec_eval's Makefile)
    "out.test": ["qrels.test", "results.test"],
    "out.test.a": ["-m", "all_trec", "qrels.test", "results.test"],
    "out.test.aq": ["-m", "all_trec", "-q", "qrels.test", "results.test"],
    "out.test.aqc": ["-m", "all_trec", "-q", "-c", "qrels.test", "results.trunc"],
    "out.test.aqcM": ["-m", "all_trec", "-q", "-c", "-M100", "qrels.test", "results.trunc"],
    "out.test.aql": ["-m", "all_trec", "-mrelstring.20", "-q", "-l2", "qrels.rel_level", "results.test"],
    "out.test.meas_params": ["-q", "-miprec_at_recall..10,.20,.25,.75,.50", "-m", "P.5,7,3", "-m", "recall.20,2000",
                             "-m", "Rprec_mult.5.0,0.2,0.35", "-mutility.2,-1,0,0", "-m", "11pt_avg..25,.5,.75",
                             "-mndcg.1=3,2=9,4=4.5", "-mndcg_cut.10,20,23.4", "-msuccess.2,5,20", "qrels.test",
                             "results.test"],
    "out.test.aqZ": ["-q", "-m", "all_trec", "-Z", "zscores_file", "qrels.test", "results.test"],
}


def _run(args, capsys, cwd=DATA):
    old = os.getcwd()
    os.chdir(cwd)
    try:
        status = main(["trec", *args])
    finally:
        os.chdir(old)
    out, err = capsys.readouterr()
    return status, out, err


@pytest.mark.parametrize("name", list(CASES))
def test_output_is_trec_eval_output_line_for_line(name, capsys):
    status, out, err = _run(CASES[name], capsys)
    assert (status, err) == (0, "")
    # `diff` with trec_eval 10's own output is empty: every line, names padded alike, same order, same digits
    assert out.splitlines() == (DATA / name).read_text().splitlines()
    if name == "out.test.meas_params":
        assert "\nndcg_cut_23 " in out  # 23.4 read as 23, as trec_eval's atol


def test_measures_given_by_name_and_unsupported_ones_on_stderr(capsys):
    status, out, err = _run(["-m", "map", "-m", "P.5,10", "-m", "prefs_simp,INST", "qrels.test", "results.test"],
                            capsys)
    assert status == 0
    assert [line.split("\t")[0].strip() for line in out.splitlines()] == ["map", "P_5", "P_10"]
    assert err == "retrieval-metrics trec: unsupported measures, not printed: prefs_simp, INST\n"
    assert measure_list("P.5,10,map") == ["P.5,10", "map"]


def test_runid_alone_prints_the_run_tag(capsys):
    status, out, err = _run(["-m", "runid", "qrels.test", "results.test"], capsys)
    assert (status, err) == (0, "")
    assert out == [line + "\n" for line in (DATA / "out.test").read_text().splitlines() if line.startswith("runid")][0]


def test_nothing_supported_is_an_error(capsys):
    status, out, err = _run(["-m", "prefs_simp", "qrels.test", "results.test"], capsys)
    assert status == 1 and out == ""
    assert err.splitlines()[-1] == "retrieval-metrics trec: error: none of the measures asked for is supported"


def _summary(lines):
    return [line for line in lines if line.split("\t")[1] == "all" and not line.startswith("runid")]


def _write_runs(tmp_path, n_queries=30):
    rng = random.Random(0)
    qrels, good, bad, mixed = [], [], [], []
    for q in range(n_queries):
        rel_docs = [f"r{q}_{i}" for i in range(3)]
        other = [f"n{q}_{i}" for i in range(20)]
        qrels += [f"{q} 0 {d} 1" for d in rel_docs] + [f"{q} 0 {d} 0" for d in other[:5]]
        best = rel_docs + other  # the relevant ones first
        worst = other + rel_docs
        rng.shuffle(worst)
        good += [f"{q} Q0 {d} {i + 1} {100 - i} good" for i, d in enumerate(best)]
        bad += [f"{q} Q0 {d} {i + 1} {100 - i} bad" for i, d in enumerate(worst)]
        mixed += (good[-len(best):] if q < 6 else bad[-len(worst):])  # better than a on 6 queries only
    mixed = [line.replace(" good", " mixed").replace(" bad", " mixed") for line in mixed]
    for name, lines in (("qrels", qrels), ("a.run", bad), ("b.run", good), ("c.run", mixed)):
        (tmp_path / name).write_text("\n".join(lines) + "\n")


def test_several_runs_table_marks_the_run_that_beats_the_baseline(tmp_path, capsys):
    _write_runs(tmp_path)
    status, out, _ = _run(["-m", "map,P.5", "qrels", "a.run", "b.run"], capsys, cwd=tmp_path)
    assert status == 0
    rows = [line for line in out.splitlines() if line.startswith("| (")]
    assert rows[0].startswith("| (a) a.run |") and "^" not in rows[0]
    assert rows[1] == "| (b) b.run | 1.0000^a | 0.6000^a |"  # 3 relevant of 3 at the top; 3 of the first 5
    status, out, _ = _run(["-m", "map", "--format", "json", "qrels", "a.run", "b.run", "a.run"], capsys, cwd=tmp_path)
    data = json.loads(out)
    assert data["runs"] == ["a.run#1", "b.run#2", "a.run#3"]  # a file given twice: numbered
    assert data["beats"]["b.run#2"]["map"] == ["a"] and data["beats"]["a.run#3"]["map"] == []
    assert data["tests"]["map"]["a.run#3"]["p_value"] == 1.0
    # c beats a on 6 queries of 30: a p-value between 0.001 and 0.05, so --alpha decides
    status, out, _ = _run(["-m", "map", "--format", "json", "qrels", "a.run", "b.run", "c.run"], capsys, cwd=tmp_path)
    data = json.loads(out)
    assert 0.001 < data["tests"]["map"]["c.run"]["p_value"] < 0.05 and data["beats"]["c.run"]["map"] == ["a"]
    status, out, _ = _run(["-m", "map", "--alpha", "0.001", "--format", "json", "qrels", "a.run", "b.run", "c.run"],
                          capsys, cwd=tmp_path)
    data = json.loads(out)
    assert data["beats"]["c.run"]["map"] == [] and data["beats"]["b.run"]["map"] == ["a"]
    status, out, _ = _run(["-m", "map", "--format", "latex", "qrels", "a.run", "b.run"], capsys, cwd=tmp_path)
    assert r"(b) b.run & 1.0000$^{a}$ \\" in out


def test_several_runs_p_values_are_holm_adjusted_over_the_runs(tmp_path, capsys):
    _write_runs(tmp_path)
    files = ["a.run", "b.run", "c.run", "a.run"]
    status, out, _ = _run(["-m", "map", "--format", "json", "qrels", *files], capsys, cwd=tmp_path)
    data = json.loads(out)
    qrels = read_qrels(tmp_path / "qrels")
    per_query = [evaluate_trec(qrels, read_run(tmp_path / f, docs=qrels.docs), ["map"]).values[:, 0] for f in files]
    raw = {name: compare(v, per_query[0], seed=0).p_value for name, v in zip(data["runs"][1:], per_query[1:])}
    # Holm by hand: the i-th smallest p-value times (m - i), running maximum, capped at 1
    ranked = sorted(raw, key=raw.get)
    adjusted, running = {}, 0.0
    for i, name in enumerate(ranked):
        running = max(running, min(1.0, raw[name] * (len(ranked) - i)))
        adjusted[name] = running
    assert adjusted[ranked[1]] != raw[ranked[1]]  # the correction changes something here
    assert {n: t["p_value"] for n, t in data["tests"]["map"].items()} == pytest.approx(adjusted)


# -- -m read as trec_eval reads it; wrong names are errors (status 2), unsupported ones a stderr line

def test_misspelt_measure_is_an_error_with_a_did_you_mean(capsys):
    status, out, err = _run(["-m", "map", "-m", "ndgc_cut.10", "qrels.test", "results.test"], capsys)
    assert (status, out) == (2, "")
    assert err == ("retrieval-metrics trec: error: -m: unknown measure name 'ndgc_cut.10'. Did you mean "
                   "ndcg_cut.10?\n")


@pytest.mark.parametrize("measure, message", [
    ("P.5,5", "'P.5,5': a parameter is given twice (trec_eval: 'duplicate cutoffs detected')"),
    ("P_5", "'P_5' is trec_eval's output name: write P.5 (trec_eval refuses P_5 too)"),
    ("P.99999999999999999999", "'P.99999999999999999999': a cutoff must be at most 2**63 - 1; got 99999999999999999999"),
    ("map.5", "'map.5': trec_eval's map takes no parameter (trec_eval ignores it; refused here)"),
])
def test_parameters_trec_eval_refuses_are_errors(measure, message, capsys):
    status, out, err = _run(["-m", measure, "qrels.test", "results.test"], capsys)
    assert (status, out, err) == (2, "", f"retrieval-metrics trec: error: -m: {message}\n")



@pytest.mark.parametrize("measures, want", [
    # trec_eval 10 by hand (C's atof / atol read these): the same lines
    (["-m", "iprec_at_recall.1e-1"], "iprec_at_recall_0.10  \tall\t0.3885\n"),
    (["-m", "iprec_at_recall.0.5e0,+.25,1E0"], "iprec_at_recall_0.25  \tall\t0.3018\niprec_at_recall_0.50  \tall\t"
                                               "0.2184\niprec_at_recall_1.00  \tall\t0.0312\n"),
    (["-m", "P.+5,+7.9"], "P_5                   \tall\t0.2667\nP_7                   \tall\t0.3333\n"),
])
def test_a_sign_and_an_exponent_read_as_trec_eval_reads_them(measures, want, capsys):
    """'1e-1' was refused as 'not a number in [0, 1]', '+5' as 'not a positive integer'."""
    assert _run([*measures, "qrels.test", "results.test"], capsys) == (0, want, "")

def test_a_measure_takes_the_first_parameters_given_as_in_trec_eval(capsys):
    # trec_eval 10: -m P.5 -m P.10 prints P_5 alone; -m P -m P.10 and -m P.10 -m P print P_10 alone
    status, out, err = _run(["-m", "P.5", "-m", "P.10", "qrels.test", "results.test"], capsys)
    assert out == "P_5                   \tall\t0.2667\n"
    assert err == "retrieval-metrics trec: P.10 not used: trec_eval takes the first parameters given for a measure\n"
    for args in (["-m", "P", "-m", "P.10"], ["-m", "P.10", "-m", "P"]):
        assert _run([*args, "qrels.test", "results.test"], capsys)[1] == "P_10                  \tall\t0.3000\n"
    status, out, _ = _run(["-m", "official", "-m", "P.10", "qrels.test", "results.test"], capsys)
    assert [line.split("\t")[0].strip() for line in out.splitlines() if line.startswith("P_")] == ["P_10"]


def test_format_with_one_run_prints_its_table(capsys):
    status, out, err = _run(["-m", "map,P.5", "--format", "json", "qrels.test", "results.test"], capsys)
    data = json.loads(out)
    assert (status, err, data["runs"], data["tests"]) == (0, "", ["results.test"], {})
    assert round(data["values"]["results.test"]["map"], 4) == 0.1785  # out.test
    status, out, _ = _run(["-m", "map", "--format", "markdown", "qrels.test", "results.test"], capsys)
    assert out == "| run | map |\n|---|---|\n| (a) results.test | 0.1785 |\n"
    status, out, err = _run(["-q", "-m", "map", "--format", "json", "qrels.test", "results.test"], capsys)
    assert (status, out) == (2, "") and "-q prints one run's lines per query" in err
    status, out, err = _run(["-q", "-m", "map", "qrels.test", "results.test", "results.test"], capsys)
    assert (status, out) == (2, "") and "drop -q or --format" in err


def test_level_beyond_int64_is_one_line_and_a_huge_M_keeps_everything(capsys):
    with pytest.raises(SystemExit) as exit_:
        _run(["-l", "99999999999999999999", "qrels.test", "results.test"], capsys)
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and len(err.splitlines()) == 1
    assert "argument -l: expected an integer from 0 to 2**63 - 1; got '99999999999999999999'" in err
    huge = _run(["-M", "99999999999999999999", "-m", "map", "qrels.test", "results.test"], capsys)
    assert huge == _run(["-m", "map", "qrels.test", "results.test"], capsys)  # trec_eval clamps -M: no limit



@pytest.mark.parametrize("level", ["1_0", "\uff12", "\u0662", "2x", "-1", "-2", " "])
def test_level_is_ascii_digits_not_negative(level, capsys):
    """trec_eval's atol reads 1_0 as 1 and a full-width 2 as 0 where Python's int() reads 10 and 2;
    below 0 trec_eval counts the documents outside the qrels as relevant (map 2.85 on a random run)."""
    with pytest.raises(SystemExit) as exit_:
        _run(["-l", level, "qrels.rel_level", "results.test"], capsys)
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and len(err.splitlines()) == 1
    assert f"argument -l: expected an integer from 0 to 2**63 - 1; got {level!r}" in err


def test_level_zero_and_a_plus_sign_read_as_trec_eval(capsys):
    # trec_eval 10 by hand: -m num_rel -l0 qrels.rel_level results.test: 3377; -l +2: 97
    assert _run(["-m", "num_rel", "-l0", "qrels.rel_level", "results.test"], capsys)[1] == \
        "num_rel               \tall\t3377\n"
    assert _run(["-m", "num_rel", "-l", "+2", "qrels.rel_level", "results.test"], capsys)[1] == \
        "num_rel               \tall\t97\n"

def _dup_files(tmp_path):
    (tmp_path / "qrels").write_text("q1 0 a 1\nq1 0 b 0\nq1 0 c 1\nq3 0 y 1\nq3 0 y 0\n")
    # 'a' twice in q1 (ranks 1 and 4), 'z' twice in q9 (no qrels)
    (tmp_path / "run").write_text("q1 Q0 a 1 0.9 t\nq1 Q0 b 2 0.8 t\nq1 Q0 c 3 0.7 t\nq1 Q0 a 4 0.1 t\n"
                                  "q9 Q0 z 1 1 t\nq9 Q0 z 2 1 t\n")


def test_duplicates_are_refused_where_trec_eval_looks_only(tmp_path, capsys):
    """trec_eval (form_res_rels.c) checks a query's entries within -M, and only the evaluated queries'."""
    _dup_files(tmp_path)
    # checked by hand with trec_eval 10: -M3 -m map -m num_ret prints num_ret 3, map 0.8333; -M4 exits 4
    status, out, err = _run(["-M3", "-m", "map,num_ret", "qrels", "run"], capsys, cwd=tmp_path)
    assert (status, err) == (0, "") and out == "num_ret               \tall\t3\nmap                   \tall\t0.8333\n"
    status, out, err = _run(["-M4", "-m", "map", "qrels", "run"], capsys, cwd=tmp_path)
    assert (status, out) == (1, "")
    assert err == ("retrieval-metrics trec: error: run: document 'a' appears twice for query 'q1' (ranks 1 and 4); "
                   "trec_eval refuses it too\n")
    # q3's twice-judged 'y' is evaluated with -c only (the run lacks q3)
    status, out, err = _run(["-c", "-M3", "-m", "map", "qrels", "run"], capsys, cwd=tmp_path)
    assert (status, err) == (1, "retrieval-metrics trec: error: qrels: document 'y' appears twice for query 'q3'; "
                                "trec_eval refuses it too\n")


def test_the_python_readers_still_refuse_duplicates_unless_asked(tmp_path):
    from retrieval_core.trec import DuplicateError, align
    _dup_files(tmp_path)
    with pytest.raises(ValueError, match=r"run: document 'a' appears twice for query 'q1' \(lines 1 and 4\)"):
        read_run(tmp_path / "run")
    qrels = read_qrels(tmp_path / "qrels", duplicates=True)
    run = read_run(tmp_path / "run", docs=qrels.docs, duplicates=True)
    assert run.duplicates and qrels.duplicates and len(align(run, qrels, max_per_query=3).query_ids) == 1
    with pytest.raises(DuplicateError, match="'a' appears twice for query 'q1'") as err:
        align(run, qrels)
    assert err.value.source == "run"
    with pytest.raises(ValueError, match="holds a document twice for a query"):
        run.to_dict()
    with pytest.raises(ValueError, match=r"level must be an int64 \(-2\*\*63 <= level < 2\*\*63\)"):
        align(run, qrels, level=10**20, max_per_query=3)


def test_latin1_query_id_is_written_as_read_on_a_strict_utf8_stdout(tmp_path):
    import subprocess
    import sys
    (tmp_path / "qrels").write_bytes(b"q\xe9 0 a 1\nq\xe9 0 b 0\n")
    (tmp_path / "run").write_bytes(b"q\xe9 Q0 a 1 0.9 t\xe9\nq\xe9 Q0 b 2 0.8 t\xe9\n")
    env = {**os.environ, "PYTHONIOENCODING": "utf-8:strict",
           "PYTHONPATH": os.pathsep.join(sys.path)}
    done = subprocess.run([sys.executable, "-m", "retrieval_core.cli", "trec", "-q", "-m", "map", "-m", "runid",
                           "qrels", "run"], cwd=tmp_path, env=env, capture_output=True, timeout=120)
    assert (done.returncode, done.stderr) == (0, b"")
    # trec_eval 10 prints these bytes (checked by hand with `cmp`)
    assert done.stdout == (b"map                   \tq\xe9\t1.0000\nrunid                 \tall\tt\xe9\n"
                           b"map                   \tall\t1.0000\n")


@pytest.mark.parametrize("size", [1, 4000])
@pytest.mark.parametrize("name", ["out.test.aq", "out.test.aqc", "out.test.aqcM", "out.test.aql", "out.test.aqZ"])
def test_queries_evaluated_in_blocks_print_the_same_lines(name, size, capsys, monkeypatch):
    from retrieval_core.trec import evaluate as evaluate_module
    monkeypatch.setattr(evaluate_module, "BLOCK_ENTRIES", size)  # 3 queries, 5,181 entries: blocks of 1 and 2
    status, out, err = _run(CASES[name], capsys)
    assert (status, err) == (0, "")
    assert out.splitlines() == (DATA / name).read_text().splitlines()
