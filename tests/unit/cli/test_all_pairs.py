"""Every pair of several runs on the command line: `trec --all-pairs / --correction` (the table's letters
and its JSON equal compare_all on the runs' per-query values) and `report --all-pairs / --correction`
(the pairs table and the letter groups, in the terminal and in report.md)."""
from __future__ import annotations

import json
import random

import pytest
import torch

from retrieval_core import compare, compare_all
from retrieval_core.stats.results import MetricResults
from retrieval_core.trec import evaluate_trec, read_qrels, read_run
from tests.unit.cli.test_errors_and_outputs import run

RUNS = ("a.run", "b.run", "c.run")


def _write_trec(path, n_queries=30):
    """Three runs of one qrels: a puts the relevant documents low, b first, c first on 8 queries only."""
    rng = random.Random(0)
    qrels, lines = [], {name: [] for name in RUNS}
    for q in range(n_queries):
        rel = [f"r{q}_{i}" for i in range(3)]
        other = [f"n{q}_{i}" for i in range(20)]
        qrels += [f"{q} 0 {d} 1" for d in rel] + [f"{q} 0 {d} 0" for d in other[:5]]
        worst = other + rel
        rng.shuffle(worst)
        for name, docs in (("a.run", worst), ("b.run", rel + other), ("c.run", rel + other if q < 8 else worst)):
            lines[name] += [f"{q} Q0 {d} {i + 1} {100 - i} {name}" for i, d in enumerate(docs)]
    (path / "qrels").write_text("\n".join(qrels) + "\n")
    for name in RUNS:
        (path / name).write_text("\n".join(lines[name]) + "\n")
    qrels = read_qrels(path / "qrels")
    return {name: evaluate_trec(qrels, read_run(path / name, docs=qrels.docs), ["map"]).values[:, 0]
            for name in RUNS}


def _trec(path, *args):
    code, out, err = run("trec", "-m", "map", *args, path / "qrels", *[path / n for n in RUNS])
    assert code == 0, err
    return out


@pytest.mark.parametrize("options,method,test", [
    (["--all-pairs"], "holm", "permutation"),
    (["--all-pairs", "--correction", "none", "--test", "paired_t"], None, "paired_t"),
    (["--correction", "tukey"], "tukey", None),  # Tukey's HSD is all pairs: no --all-pairs needed
    (["--correction", "tukey_paired"], "tukey_paired", None),
])
def test_trec_all_pairs_json_is_compare_all(tmp_path, options, method, test):
    values = _write_trec(tmp_path)
    data = json.loads(_trec(tmp_path, "--format", "json", *options))
    ref = compare_all(values, method=method, test=test or "permutation", seed=0)
    assert data["comparison"] == "all pairs" and data["method"] == method and data["test"] == test
    records = data["tests"]["map"]
    assert [r["runs"] for r in records] == [list(p) for p in ref.pairs]
    for r, c in zip(records, ref.pairs.values()):
        assert r["p_value"] == pytest.approx(c.p_value, rel=1e-12, abs=1e-300)
        assert r["adjusted_p_value"] == pytest.approx(c.adjusted_p_value, rel=1e-12, abs=1e-300)
        assert r["effect_size"] == pytest.approx(c.effect_size) and r["significant"] == c.significant
    assert data["groups"]["map"] == ref.groups
    letters = {name: "abc"[i] for i, name in enumerate(RUNS)}
    assert data["beats"] == {n: {"map": [letters[x] for x in ref.better[n]]} for n in RUNS}
    assert data["beats"]["b.run"]["map"] == ["a", "c"]  # b beats both: every pair, not only the baseline


def test_trec_all_pairs_markdown_marks_every_pair(tmp_path):
    _write_trec(tmp_path)
    baseline = _trec(tmp_path)
    assert "| (b) b.run | 1.0000^a |" in baseline and "against the baseline (a), Holm-corrected over the runs" \
        in baseline
    out = _trec(tmp_path, "--all-pairs")
    assert "| (b) b.run | 1.0000^ac |" in out
    assert "over every pair of runs by sign-flip permutation test, Holm-corrected over the pairs, p < 0.05" in out
    out = _trec(tmp_path, "--correction", "tukey", "--format", "latex")
    assert r"1.0000$^{ac}$" in out and "Tukey's HSD (as ranx: runs as independent samples)" in out


def test_trec_baseline_correction_none_leaves_the_p_values(tmp_path):
    values = _write_trec(tmp_path)
    data = json.loads(_trec(tmp_path, "--format", "json", "--correction", "none"))
    for name in RUNS[1:]:
        assert data["tests"]["map"][name]["p_value"] == compare(values[name], values["a.run"], seed=0).p_value


def _saved(path, names=("x", "y", "z")):
    g = torch.Generator().manual_seed(4)
    base = torch.rand(40, generator=g, dtype=torch.float64)
    values = {}
    for i, name in enumerate(names):
        v = (base + 0.04 * i + 0.05 * torch.rand(40, generator=g, dtype=torch.float64)).clamp(0, 1)
        r = MetricResults({"map@r": v.mean()})
        r.per_query, r.query_ids = {"map@r": v}, torch.arange(40)
        (path / f"{name}.json").write_text(json.dumps(r.to_dict()))
        values[name] = v
    return values


def test_report_all_pairs_tables(tmp_path):
    values = _saved(tmp_path)
    code, out, err = run("report", *[tmp_path / f"{n}.json" for n in values], "--output", tmp_path / "rep",
                         "--correction", "tukey_paired", "--alpha", "0.01")
    assert code == 0, err
    ref = compare_all(values, method="tukey_paired", alpha=0.01)
    assert "All pairs of runs (Tukey's HSD on the two-way ANOVA (queries x runs), separable: adjusted p < 0.01)" in out
    assert "Letter groups" in out
    md = (tmp_path / "rep" / "report.md").read_text()
    for (a, b), c in ref.pairs.items():
        assert f"| {a} - {b} | {c.mean_difference:+.4f} |" in md.replace("\\", "")
    assert "| map@r | " + " | ".join(ref.groups[n] for n in values) + " |" in md
    code, out, err = run("report", *[tmp_path / f"{n}.json" for n in values], "--output", tmp_path / "rep2")
    assert code == 0 and "All pairs" not in out  # only when asked


def test_all_pairs_options_are_checked(tmp_path):
    _write_trec(tmp_path)
    code, out, err = run("trec", "-m", "map", "--correction", "sidak", tmp_path / "qrels", tmp_path / "a.run")
    assert code == 2 and "invalid choice: 'sidak'" in err
