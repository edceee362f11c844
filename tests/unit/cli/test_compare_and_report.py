"""The command line in a new user's first hour (issue 26, items 15 and 17): `compare` pairs
runs whose labels are the same classes however written, `compare` and `report` show one
difference (the later run minus the first) with one default of resamples, p-values are
never a bare 0, tables have headers, and every `--help` is clean, with examples."""
from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from retrieval_core import cli
from retrieval_core.cli import parser as cli_parser
from retrieval_core.cli.io import fingerprint
from retrieval_core.stats.results import MetricResults
from tests.unit.cli.test_errors_and_outputs import run

COMMANDS = ("demo", "eval", "report", "compare", "trec")


@pytest.fixture()
def files(tmp_path):
    g = torch.Generator().manual_seed(5)
    x = torch.randn(60, 6, generator=g)
    labels = torch.randint(0, 5, (60,), generator=g)
    torch.save(x, tmp_path / "x.pt")
    torch.save(x[:, :3].contiguous(), tmp_path / "x3.pt")
    np.save(tmp_path / "labels.npy", labels.numpy())
    np.save(tmp_path / "labels_shifted.npy", (4 - labels + 10).numpy())  # the same classes, other numbers
    names = np.array(["cat", "dog", "eel", "fox", "gnu"])
    (tmp_path / "names.txt").write_text("\n".join(names[labels.numpy()]) + "\n", encoding="utf-8")
    return tmp_path


def _eval(path, emb, labels, out):
    code, _, err = run("eval", path / emb, path / labels, "--metrics", "cmc@1", "map@r", "--output", path / out)
    assert code == 0, err


# -- item 15: pairing by classes, one convention, one default, honest p-values, headers ----------

def test_fingerprint_is_the_partition_into_classes():
    a = fingerprint(torch.tensor([3, 1, 3, 2]))
    assert a == fingerprint(["b", "a", "b", "c"]) == fingerprint(torch.tensor([0, 9, 0, 4]))
    assert a == fingerprint(torch.tensor([3.0, 1.0, 3.0, 2.0]))
    assert a != fingerprint(torch.tensor([3, 1, 2, 3]))  # another query order
    assert fingerprint(torch.tensor([0, 1]), torch.tensor([5, 5])) == fingerprint(["x", "y"], torch.tensor([1, 1]))
    assert fingerprint(torch.tensor([0, 1]), None) != fingerprint(torch.tensor([0, 1]), torch.tensor([1, 1]))


def test_compare_pairs_names_with_numbers_of_the_same_classes(files):
    _eval(files, "x.pt", "names.txt", "a.json")
    _eval(files, "x3.pt", "labels.npy", "b.json")
    _eval(files, "x3.pt", "labels_shifted.npy", "c.json")
    for other in ("b.json", "c.json"):
        code, _, err = run("compare", files / "a.json", files / other)
        assert code == 0, err
    torch.save(torch.randperm(60, generator=torch.Generator().manual_seed(1)), files / "perm.pt")
    np.save(files / "labels_perm.npy", np.load(files / "labels.npy")[torch.load(files / "perm.pt").numpy()])
    _eval(files, "x3.pt", "labels_perm.npy", "d.json")  # the queries in another order: still refused
    code, _, err = run("compare", files / "a.json", files / "d.json")
    assert code == 1 and "cannot pair the queries" in err and "pass --by-position if both list the same" in err


def _saved_runs(path, shift: float, noise: float = 1e-3):
    """Two runs of 50 queries with unique ids; B = A + shift (+ a little noise)."""
    g = torch.Generator().manual_seed(2)
    va = torch.rand(50, generator=g, dtype=torch.float64)
    vb = va + shift + noise * torch.rand(50, generator=g, dtype=torch.float64)
    for name, v in (("a", va), ("b", vb)):
        r = MetricResults({"map@r": v.mean()})
        r.per_query = {"map@r": v}
        r.query_ids = torch.arange(50)
        (path / f"{name}.json").write_text(json.dumps(r.to_dict()))
    return va, vb


def _rows(out: str, header_start: str):
    """The header (split on 2+ spaces) of the table whose header starts so, and its rows."""
    lines = out.splitlines()
    i = next(i for i, line in enumerate(lines) if line.startswith(header_start))
    import re

    split = [re.split(r"\s{2,}", line.strip()) for line in lines[i:]]
    return split[0], [row for row in split[1:] if row and row[0] == "map@r"]


def test_compare_and_report_print_the_same_difference_and_p_value(tmp_path):
    va, vb = _saved_runs(tmp_path, shift=0.01)
    code, out, err = run("compare", tmp_path / "a.json", tmp_path / "b.json")
    assert code == 0, err
    header, rows = _rows(out, "metric")
    assert header == ["metric", "A", "B", "B - A", "95% interval", "p-value", "n"]
    diff, p_cmp = rows[0][3], rows[0][5]
    assert diff == f"{(vb - va).mean().item():+.4f}" and diff.startswith("+")
    code, out, err = run("report", tmp_path / "a.json", tmp_path / "b.json", "--output", tmp_path / "rep")
    assert code == 0, err
    header, rows = _rows(out, "metric  run")  # item 15: the terminal table of the tests has a header
    assert header == ["metric", "run", "run - base", "95% interval", "p-value", "n"]
    assert rows[0][1:3] == ["b", diff]
    assert rows[0][4] == p_cmp  # one pair of runs: Holm changes nothing; equal p-values: equal resamples


def test_default_resamples_of_the_paired_tests_are_one():
    compare = cli.parse_args(["compare", "a.json", "b.json"])
    assert compare.n_resamples == cli_parser.TEST_RESAMPLES == 10000
    assert cli.parse_args(["report", "a.json", "b.json", "--output", "r"]).n_resamples is None  # resolved by use
    assert cli.parse_args(["eval", "x.pt", "y.npy"]).n_resamples == cli_parser.CI_RESAMPLES


def test_paired_t_never_prints_a_p_value_of_zero(tmp_path):
    _saved_runs(tmp_path, shift=1.0, noise=1e-9)  # t about 1e10: the t tail underflows to 0.0
    code, out, err = run("compare", tmp_path / "a.json", tmp_path / "b.json", "--test", "paired_t")
    assert code == 0, err
    assert _rows(out, "metric")[1][0][5] == "< 1e-16"
    code, out, err = run("report", tmp_path / "a.json", tmp_path / "b.json", "--output", tmp_path / "rep",
                         "--test", "paired_t")
    assert code == 0, err
    assert _rows(out, "metric  run")[1][0][4] == "< 1e-16"
    assert "< 1e-16" in (tmp_path / "rep" / "report.md").read_text().replace("&lt;", "<")


# -- item 17: --help -----------------------------------------------------------------------------------

def _help(*args) -> str:
    code, out, err = run(*args, "--help")
    assert code == 0 and err == "", err
    return out


@pytest.mark.parametrize("command", [None, *COMMANDS])
def test_every_help_is_clean_and_has_examples(command):
    out = _help(*([command] if command else []))
    assert "``" not in out and ":func:" not in out and "argument parser" not in out
    description = out.split("\n\n")[1]  # after the usage
    assert all(not line.startswith(" ") for line in description.splitlines()), description  # no stray indentation
    examples = out.split("examples:\n", 1)[1].splitlines()
    assert examples and all(line.startswith("  retrieval-metrics " + (command or "")) for line in examples if line)


def test_help_says_what_n_resamples_and_per_class_all_also_do():
    report = " ".join(_help("report").split())
    assert "of the paired tests (default: 10000, as compare)" in report
    assert "all: the same macro means, plus one value per class" in report
    assert "Both change the headline values" in " ".join(_help("eval").split())
