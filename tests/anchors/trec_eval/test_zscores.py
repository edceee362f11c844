"""trec_eval's ``-Z`` (z-scores) against the oracle's transcription of convert_zscores.c and the summary
over the converted values (trec_eval_arith.py), on random runs with random z-score files: pairs absent,
zero stddevs (with the value equal to the mean or not), negative stddevs, queries and measures the file
has but the evaluation lacks."""
from __future__ import annotations

import random

import pytest

pytest.importorskip("numpy")

from retrieval_core.cli import main  # noqa: E402
from retrieval_core.trec import evaluate_trec, qrels_from_dict, run_from_dict  # noqa: E402
from retrieval_core.trec.zscores import read_zscores  # noqa: E402

from . import trec_eval_arith as oracle  # noqa: E402

MEASURES = ["num_q", "num_ret", "num_rel", "num_rel_ret", "num_nonrel_judged_ret", "map", "gm_map", "Rprec",
            "bpref", "gm_bpref", "recip_rank", "P.5,10", "iprec_at_recall.0,.5", "ndcg_cut.3", "relstring", "set_F",
            "G", "ndcg", "infAP", "unj.5", "rbp", "success.1", "11pt_avg", "utility"]


def _case(rng: random.Random, complete: bool):
    n_docs = rng.choice([3, 8, 20])
    qrels, run = {}, {}
    for i in range(rng.randint(1, 12)):
        docs = [f"d{j}" for j in range(n_docs)]
        qrels[f"q{i}"] = {d: rng.choice([0, 0, 1, 2, -1]) for d in rng.sample(docs, rng.randint(1, n_docs))}
        qrels[f"q{i}"][docs[0]] = max(qrels[f"q{i}"].get(docs[0], 0), 0)  # not all negative (trec_eval crashes)
        if complete and rng.random() < 0.3:
            continue
        pool = docs + ["x0", "x1"]
        run[f"q{i}"] = {d: float(rng.randint(0, 3)) for d in rng.sample(pool, rng.randint(1, len(pool)))}
    return qrels, run or {"q0": {"d0": 1.0}}


def _table(rng: random.Random, qids, per) -> dict:
    """A random z-score table over the per-query values ``per`` (before conversion): absent pairs, zero
    stddevs with the mean equal to the value or not, negative stddevs, pairs of no evaluated query."""
    table = {("zz", "map"): (0.5, 0.1)}
    for name, values in per.items():
        for qid, v in zip(qids, values):
            kind = rng.random()
            if kind < 0.2 or isinstance(v, str):
                continue
            if kind < 0.35:
                table[(qid, name)] = (v, 0.0)
            elif kind < 0.45:
                table[(qid, name)] = (v + rng.choice([1.0, -0.25]), 0.0)
            else:
                table[(qid, name)] = (rng.uniform(-2, 2), rng.choice([1.0, -1.0]) * rng.uniform(1e-3, 3))
    return table


def _write(path, table) -> None:
    path.write_text("".join(f"{q} {m} {mean!r}\t{sd!r}\n" for (q, m), (mean, sd) in rng_order(table)))


def rng_order(table):
    return sorted(table.items(), key=lambda kv: (kv[0][1], kv[0][0]), reverse=True)  # not the file's sorted order


def test_random_runs_and_zscore_files_print_trec_evals_lines(tmp_path):
    rng = random.Random(2929)
    differing = []
    for case in range(150):
        complete, level = rng.random() < 0.35, rng.choice([1, 1, 2])
        qrels, run = _case(rng, complete)
        names = rng.sample(MEASURES, 8)
        plain = evaluate_trec(qrels_from_dict(qrels), run_from_dict(run), names, level=level, complete=complete)
        out = [name for _, name in plain.measures]
        qids, per, _ = oracle.evaluate(qrels, run, out, level=level, complete=complete)
        table = _table(rng, qids, per)
        _write(tmp_path / "z", table)
        zs = read_zscores(tmp_path / "z")
        assert zs.table == table  # the file's numbers read back exactly
        ev = evaluate_trec(qrels_from_dict(qrels), run_from_dict(run), names, level=level, complete=complete,
                           zscores=zs)
        got = ev.lines(per_query=True)
        want = oracle.lines(qrels, run, out, per_query=True, level=level, complete=complete, zscores=table)
        if got != want:
            differing.append((case, [(a, b) for a, b in zip(got, want) if a != b][:3]))
        _, zper, zsummary = oracle.evaluate(qrels, run, out, level=level, complete=complete, zscores=table)
        assert ev.summary() == {n: v for n, v in zsummary.items()}  # the doubles, not only their digits
        for j, name in enumerate(out):
            if name not in ev.texts:
                assert ev.values[:, j].tolist() == zper[name], (case, name)
    assert not differing, differing[:3]


def test_missing_pairs_zero_stddevs_and_the_summary_of_the_converted_values(tmp_path):
    qrels = {"q1": {"a": 1, "b": 0}, "q2": {"c": 1}}
    run = {"q1": {"a": 2.0, "b": 1.0}, "q2": {"x": 1.0, "c": 0.5}}
    (tmp_path / "z").write_text("q1 map 0.5 0.25\nq2 map 0.5 0.25\nq1 num_ret 2 0\nq2 num_ret 3 0\n"
                                "q1 gm_map 0 1\nq2 gm_map 0 1\n")
    ev = evaluate_trec(qrels_from_dict(qrels), run_from_dict(run), ["map", "num_ret", "gm_map", "num_q", "P.1"],
                       zscores=read_zscores(tmp_path / "z"))
    assert ev.per_query() == {"q1": {"num_ret": 0.0, "map": 2.0, "P_1": -1000000.0},
                              "q2": {"num_ret": -1000000.0, "map": 0.0, "P_1": -1000000.0}}
    # num_q: the number of queries; the counts: the sum; gm_map: exp of the mean of the converted logs
    # (APs 1 and 0.5: gm_map's converted values are log 1 and log 0.5)
    assert ev.summary() == {"num_q": 2.0, "num_ret": -1000000.0, "map": 1.0, "gm_map": pytest.approx(0.5 ** 0.5),
                            "P_1": -1000000.0}
    assert ev.lines()[:2] == ["Znum_q                 \tall\t2.0000", "Znum_ret               \tall\t-1000000.0000"]


def test_the_cli_flag_and_relstring_printed_as_is(tmp_path, capsys):
    qrels, run = tmp_path / "qrels", tmp_path / "run"
    qrels.write_text("q1 0 a 1\nq1 0 b 0\n")
    run.write_text("q1 Q0 b 1 2 tag\nq1 Q0 a 2 1 tag\n")
    (tmp_path / "z").write_text("q1 P_1 0.5 0.5\nq1 relstring_2 0 1\n")  # (trec_eval 10 reads past its table and
    # may crash when a name sorts after all of its query's in the file: relstring_2 is there)
    assert main(["trec", "-q", "-m", "P.1,relstring.2,runid", "-Z", str(tmp_path / "z"), str(qrels), str(run)]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "ZP_1                   \tq1\t-1.0000", "relstring_2           \tq1\t'01'", "runid                 \tall\ttag",
        "ZP_1                   \tall\t-1.0000"]
