"""The command line: eval on saved files (.pt, .npy, .npz) and the digits demo."""
import json

import numpy as np
import pytest
import torch

import retrieval_core as rc
from retrieval_core import cli
from retrieval_core.cli import commands as cli_commands, demo as cli_demo


@pytest.fixture()
def saved(tmp_path):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(40, 8, generator=g)
    labels = torch.randint(0, 4, (40,), generator=g)
    torch.save(x, tmp_path / "x.pt")
    np.save(tmp_path / "labels.npy", labels.numpy())
    np.savez(tmp_path / "both.npz", emb=x.numpy(), lab=labels.numpy())
    return tmp_path, x, labels


def test_eval_json_matches_the_function(saved, capsys):
    path, x, labels = saved
    assert cli.main(["eval", str(path / "x.pt"), str(path / "labels.npy"), "--metrics", "cmc@1", "map@r", "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    want = rc.evaluate_embeddings(x, labels, ["cmc@1", "map@r"])
    assert got == pytest.approx({k: v.item() for k, v in want.items()})


def test_eval_npz_arrays_and_table(saved, capsys):
    path, x, labels = saved
    cli.main(["eval", f"{path / 'both.npz'}:emb", f"{path / 'both.npz'}:lab", "--metrics", "cmc@1", "--distance", "euclidean"])
    out = capsys.readouterr().out
    want = rc.evaluate_embeddings(x, labels, ["cmc@1"], distance="euclidean")["cmc@1"].item()
    assert "cmc@1" in out and f"{want:.4f}" in out


def test_eval_bad_files(saved):
    path, _, _ = saved
    with pytest.raises(ValueError, match=r"holds \['emb', 'lab'\]; pick one"):
        cli.load_tensor(str(path / "both.npz"))
    with pytest.raises(ValueError, match=r"has no array 'nope'"):
        cli.load_tensor(f"{path / 'both.npz'}:nope")
    with pytest.raises(ValueError, match=r"expected a .pt, .npy or .npz file"):
        cli.load_tensor(str(path / "x.csv"))


def test_demo_prints_both_models(capsys):
    assert cli.main(["demo", "--json", "--metrics", "cmc@1", "map@r", "nmi"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert set(got) == {"raw pixels (64-d)", "random projection (16-d)"}
    for values in got.values():
        assert set(values) == {"cmc@1", "map@r", "nmi"}
        assert 0.5 < values["cmc@1"] <= 1.0  # digits are easy for 1-NN on pixels


# --- the command line as users run it: a subprocess --------------------------------------------

import math  # noqa: E402
import os  # noqa: E402
import re  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402

from retrieval_core import MetricResults  # noqa: E402


def run_cli(*args, cwd=None, env=None):
    """``retrieval-metrics ARGS`` in a fresh interpreter: (exit status, stdout, stderr)."""
    full_env = {**os.environ, **(env or {})}
    full_env.pop("RETRIEVAL_METRICS_TRACEBACK", None)
    p = subprocess.run([sys.executable, "-m", "retrieval_core.cli", *map(str, args)], capture_output=True,
                       text=True, cwd=cwd, env=full_env, timeout=300)
    return p.returncode, p.stdout, p.stderr


def test_options_before_or_after_the_files(saved):
    path, x, labels = saved
    want = {k: v.item() for k, v in rc.evaluate_embeddings(x, labels, ["cmc@1", "map@r"], distance="euclidean").items()}
    lines = [
        ["eval", "--json", "--metrics", "cmc@1", "map@r", path / "x.pt", path / "labels.npy", "--distance", "euclidean"],
        ["eval", path / "x.pt", "--distance", "euclidean", path / "labels.npy", "--metrics", "cmc@1,map@r", "--json"],
        ["eval", "--distance=euclidean", "--metrics", "cmc@1", "map@r", "--json", path / "x.pt", path / "labels.npy"],
    ]
    for line in lines:
        code, out, err = run_cli(*line)
        assert code == 0, err
        assert json.loads(out) == pytest.approx(want)


def test_errors_are_one_line_without_traceback(saved, tmp_path):
    path, _, _ = saved
    cases = [
        (["eval", path / "x.pt", path / "labels.npy", "--metrics", "ndgc@10"], 1,
         r"^retrieval-metrics eval: error: unknown metric 'ndgc' in key 'ndgc@10'; did you mean ndcg@10\? known keys: "),
        (["eval", path / "x.pt"], 2,
         r"^retrieval-metrics eval: error: the following arguments are required: query_labels \(see "),
        (["eval", path / "x.pt", path / "labels.npy", "--empty", "drop"], 2,
         r"^retrieval-metrics eval: error: argument --empty: invalid choice: 'drop' \(choose from "),
        (["eval", path / "x.pt", path / "missing.npy"], 1, r"^retrieval-metrics eval: error: no such file: .*missing.npy$"),
        (["eval", path / "x.pt", path / "labels.npy", "--ci", "1.5"], 2,
         r"^retrieval-metrics eval: error: argument --ci: expected a level in \(0, 1\) such as 0.95; got '1.5'"),
        (["eval", path / "x.pt", path / "x.pt"], 1, r"^retrieval-metrics eval: error: .*label"),
        (["frobnicate"], 2, r"^retrieval-metrics: error: argument COMMAND: invalid choice: 'frobnicate'"),
        (["compare", path / "labels.npy", path / "labels.npy"], 1, r"^retrieval-metrics compare: error: .*not JSON"),
    ]
    for args, status, pattern in cases:
        code, out, err = run_cli(*args)
        assert code == status, (args, err)
        assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
        assert re.search(pattern, err.strip()), err


def test_help_is_plain_text_with_choices_and_defaults():
    code, out, err = run_cli("eval", "--help")
    assert code == 0 and err == ""
    text = " ".join(out.split())
    assert "{cosine,dot,euclidean,squared_euclidean,hamming}" in text and "(default: cosine)" in text
    assert "{skip,zero,one,error}" in text and "(default: skip)" in text
    assert "--output FILE" in text and "--confidence FILE" in text and "--categories FILE" in text
    assert "\x1b[" not in out  # no terminal colours
    code, out, _ = run_cli("--help")
    assert code == 0 and all(c in out for c in ("demo", "eval", "report", "compare"))


def test_eval_output_keeps_per_query_values_and_categories(saved, tmp_path):
    path, x, labels = saved
    (tmp_path / "cats.txt").write_text("\n".join("ab"[i % 2] for i in range(40)) + "\n")
    out_file = tmp_path / "run.json"
    code, out, err = run_cli("eval", path / "x.pt", path / "labels.npy", "--metrics", "cmc@1", "ndcg@5",
                             "--categories", tmp_path / "cats.txt", "--empty", "zero", "--reduce", "median",
                             "--output", out_file)
    assert code == 0, err
    r = MetricResults.from_dict(json.loads(out_file.read_text()))
    cats = ["ab"[i % 2] for i in range(40)]
    want = rc.evaluate_embeddings(x, labels, ["cmc@1", "ndcg@5"], categories=cats, empty="zero", reduce="median")
    assert set(r) == set(want)
    for key in want:
        assert r[key].item() == pytest.approx(want[key].item())
        assert f"{want[key].item():.4f}" in out  # the printed table
    per_query = rc.evaluate_embeddings(x, labels, ["cmc@1", "ndcg@5"], empty="zero", reduce="none")
    for key in ("cmc@1", "ndcg@5"):
        assert r.per_query[key].tolist() == pytest.approx(per_query[key].tolist())
    assert r.n_queries.item() == 40 and r.n_empty["cmc@1"].item() == 0


def test_per_class_option(saved):
    path, x, labels = saved
    code, out, err = run_cli("eval", path / "x.pt", path / "labels.npy", "--metrics", "map@r", "--per-class", "all",
                             "--json")
    assert code == 0, err
    want = rc.evaluate_embeddings(x, labels, ["map@r"], per_class="all")
    assert json.loads(out) == pytest.approx({k: v.item() for k, v in want.items()})
    assert "map@r/class=3" in json.loads(out)


def _markdown_tables(text):
    """{heading: [rows as lists of cells]} of the markdown tables under ## headings."""
    tables, heading = {}, None
    for line in text.splitlines():
        if line.startswith("## "):
            heading = line[3:]
        elif line.startswith("|") and not line.startswith("|---"):
            tables.setdefault(heading, []).append([c.strip() for c in line.strip("|").split("|")])
    return tables


def test_report_writes_markdown_json_plots_and_html(saved, tmp_path):
    path, x, labels = saved
    (tmp_path / "cats.txt").write_text("\n".join("ab"[i % 2] for i in range(40)) + "\n")
    out = tmp_path / "rep"
    code, stdout, err = run_cli("report", path / "x.pt", path / "labels.npy", "--metrics", "cmc@1", "map@r",
                                "--categories", tmp_path / "cats.txt", "--out", out, "--max-k", "5")
    assert code == 0, err
    cats = ["ab"[i % 2] for i in range(40)]
    want = rc.evaluate_embeddings(x, labels, ["cmc@1", "map@r"] + [f"cmc@{k}" for k in range(2, 6)],
                                  categories=cats)
    tables = _markdown_tables((out / "report.md").read_text())
    metrics = {row[0]: row[1] for row in tables["Metrics"][1:]}
    assert metrics == {"cmc@1": f"{want['cmc@1'].item():.4f}", "map@r": f"{want['map@r'].item():.4f}"}
    counts = {row[0]: row[1] for row in tables["Queries (empty: the metric is undefined, e.g. no relevant item)"]}
    assert counts["queries"] == "40" and counts["empty queries: map@r"] == "0"
    header, *rows = tables["Per category"]
    assert header == ["category", "cmc@1", "map@r"]
    for label, c1, mr in rows:
        assert c1 == f"{want[f'cmc@1/{label}'].item():.4f}" and mr == f"{want[f'map@r/{label}'].item():.4f}"
    data = json.loads((out / "results.json").read_text())
    back = MetricResults.from_dict(data["runs"]["results"])
    assert back["cmc@5"].item() == pytest.approx(want["cmc@5"].item())  # the curve keys are kept too
    assert data["settings"]["distance"] == "cosine"
    images = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", (out / "report.md").read_text())
    assert "cmc_at_k.png" in images and len(images) >= 3
    for name in images:
        assert (out / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    page = (out / "report.html").read_text()
    inline = re.findall(r'src="data:image/png;base64,([^"]+)"', page)
    assert len(inline) == len(images)
    import base64

    assert base64.b64decode(inline[0]) == (out / images[0]).read_bytes()
    assert f"<td>{want['map@r'].item():.4f}</td>" in page


def test_progress_is_quiet_when_not_a_terminal(saved, monkeypatch):
    path, _, _ = saved
    code, out, err = run_cli("eval", path / "x.pt", path / "labels.npy", "--metrics", "cmc@1")
    assert code == 0 and err == ""  # stderr is a pipe here: no bar
    from retrieval_core import optional

    class Terminal:
        def isatty(self):
            return True

    monkeypatch.setattr(sys, "stderr", Terminal())
    monkeypatch.delenv("CI", raising=False)
    assert optional.progress_bar(None) is optional.tqdm()
    monkeypatch.setenv("CI", "true")
    assert optional.progress_bar(None) is None
    assert optional.progress_bar(True) is optional.tqdm() and optional.progress_bar(False) is None


def test_whole_list_keys_give_a_notice():
    g = torch.Generator().manual_seed(0)
    gallery, query = torch.randn(4096, 4, generator=g), torch.randn(3, 4, generator=g)
    gl, ql = torch.arange(4096) % 5, torch.arange(3) % 5
    with pytest.warns(UserWarning, match=r"^whole-list keys \(mrr\) rank all 4096 gallery items of every query, "
                      r"where the cutoff keys rank only the top 5: .*'mrr@100'"):
        rc.evaluate_embeddings(query, ql, ["mrr", "cmc@5"], gallery=gallery, gallery_labels=gl)
    with pytest.warns(UserWarning, match=r"^whole-list keys \(map, ndcg\) rank all 4096 gallery items of every "
                      r"query: .*'map@100'"):
        rc.evaluate_embeddings(query, ql, ["map", "ndcg"], gallery=gallery, gallery_labels=gl)
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        rc.evaluate_embeddings(query, ql, ["mrr@10", "cmc@5"], gallery=gallery, gallery_labels=gl)
        rc.evaluate_embeddings(query, ql, ["mrr"], gallery=gallery[:100], gallery_labels=gl[:100])


def _fake_compare(calls):
    def compare(a, b, *, test="permutation", n_resamples=10000, seed=0, ci=0.95):
        calls.append((a.clone(), b.clone(), test))
        d = (a - b)[~(a.isnan() | b.isnan())]
        from collections import namedtuple

        C = namedtuple("Comparison", "mean_difference ci p_value n test")
        return C(float(d.mean()), (float(d.min()), float(d.max())), 0.5, d.numel(), test)
    return compare


def test_compare_aligns_queries_by_id_and_prints_each_key(tmp_path, monkeypatch, capsys):
    a = MetricResults({"cmc@1": torch.tensor(0.5)})
    a.per_query = {"cmc@1": torch.tensor([1.0, 0.0, 1.0, 0.0]), "map@r": torch.tensor([0.5, 0.25, 1.0, 0.0])}
    a.query_ids = torch.tensor([10, 11, 12, 13])
    b = MetricResults({"cmc@1": torch.tensor(0.5)})
    b.per_query = {"cmc@1": torch.tensor([0.0, 1.0, 1.0, 1.0]), "map@r": torch.tensor([0.0, 0.5, 0.5, 0.5])}
    b.query_ids = torch.tensor([13, 12, 11, 10])  # the same queries in another order
    (tmp_path / "a.json").write_text(json.dumps(a.to_dict()))
    (tmp_path / "b.json").write_text(json.dumps(b.to_dict()))
    calls = []
    monkeypatch.setattr(rc.stats.comparison, "compare", _fake_compare(calls))
    assert cli.main(["compare", str(tmp_path / "a.json"), str(tmp_path / "b.json"), "--test", "paired_t"]) == 0
    out = capsys.readouterr().out
    assert [c[2] for c in calls] == ["paired_t", "paired_t"]
    # compare(B, A) (B - A), B in A's order: by id
    assert calls[0][1].tolist() == [1.0, 0.0, 1.0, 0.0] and calls[0][0].tolist() == [1.0, 1.0, 1.0, 0.0]
    row = next(line.split() for line in out.splitlines() if line.startswith("cmc@1"))
    assert row[:4] == ["cmc@1", "0.5000", "0.7500", "+0.2500"]
    assert cli.main(["compare", str(tmp_path / "a.json"), str(tmp_path / "b.json"), "--metrics", "map@r",
                     "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert list(got["metrics"]) == ["map@r"] and got["metrics"]["map@r"]["mean_difference"] == pytest.approx(-0.0625)
    b.query_ids = torch.tensor([1, 2, 3, 4])
    (tmp_path / "b.json").write_text(json.dumps(b.to_dict()))
    assert cli.main(["compare", str(tmp_path / "a.json"), str(tmp_path / "b.json")]) == 1
    assert "hold different query ids" in capsys.readouterr().err


@pytest.mark.skipif(not callable(getattr(rc, "compare", None)), reason="retrieval_core.compare (issue 12, stats) "
                    "is not in this build")
def test_compare_two_eval_outputs_against_scipy(saved, tmp_path):
    stats = pytest.importorskip("scipy.stats")
    path, x, labels = saved
    torch.save(x[:, :4].contiguous(), tmp_path / "x4.pt")
    for name, emb in (("a", path / "x.pt"), ("b", tmp_path / "x4.pt")):
        code, _, err = run_cli("eval", emb, path / "labels.npy", "--metrics", "map@r", "--output", tmp_path / f"{name}.json")
        assert code == 0, err
    code, out, err = run_cli("compare", tmp_path / "a.json", tmp_path / "b.json", "--test", "paired_t", "--json")
    assert code == 0, err
    got = json.loads(out)["metrics"]["map@r"]
    va = rc.evaluate_embeddings(x, labels, ["map@r"], reduce="none")["map@r"]
    vb = rc.evaluate_embeddings(x[:, :4], labels, ["map@r"], reduce="none")["map@r"]
    assert got["mean_difference"] == pytest.approx((vb - va).mean().item())  # B - A
    assert got["p_value"] == pytest.approx(stats.ttest_rel(va.numpy(), vb.numpy()).pvalue)
    assert not math.isnan(got["ci"][0]) and got["n"] == 40


def test_demo_report_of_the_digits(tmp_path):
    pytest.importorskip("sklearn")
    code, out, err = run_cli("demo", "--report", "demo-report", "--metrics", "cmc@1", "map@r", "nmi", cwd=tmp_path)
    assert code == 0, err
    folder = tmp_path / "demo-report"
    assert f"report of the demo: {folder / 'report.html'}" in out
    models, labels = cli_demo._digits()
    tables = _markdown_tables((folder / "report.md").read_text())
    header, *rows = tables["Metrics (value \\[interval\\])"]  # as escaped in Markdown
    assert header == ["metric", "raw pixels (64-d)", "random projection (16-d)"]
    for name, col in zip(header[1:], (1, 2)):
        want = rc.evaluate_embeddings(models[name], labels, ["cmc@1", "map@r", "nmi"])
        got = {row[0]: row[col].split(" [")[0] for row in rows}
        assert {k: got[k] for k in want} == {k: f"{v.item():.4f}" for k, v in want.items()}
        # the demo adds its confidence keys (neighbour agreement as the confidence)
        assert {"erc:cmc@1", "spearman:cmc@1"} <= set(got)
    digits = tables["Per digit: raw pixels (64-d)"]
    assert digits[0][:3] == ["digit", "cmc@1", "map@r"] and [row[0] for row in digits[1:]] == [str(d) for d in range(10)]
    pngs = sorted(p.name for p in folder.glob("*.png"))
    assert "cmc_at_k.png" in pngs and "raw_pixels_64_d_map_r_per_category.png" in pngs
    data = json.loads((folder / "results.json").read_text())
    assert set(data["runs"]) == {"raw pixels (64-d)", "random projection (16-d)"}
    assert data["runs"]["raw pixels (64-d)"]["n_queries"] == 1797


def test_report_shows_a_per_class_view_by_default(saved, tmp_path, capsys):
    path, x, labels = saved
    assert cli.main(["report", str(path / "x.pt"), str(path / "labels.npy"), "--metrics", "map@r",
                     "--out", str(tmp_path / "r"), "--curves", "cmc", "--max-k", "3"]) == 0
    tables = _markdown_tables((tmp_path / "r" / "report.md").read_text())
    want = rc.evaluate_embeddings(x, labels, ["map@r"], categories=labels)
    assert tables["Metrics"][1] == ["map@r", f"{want['map@r'].item():.4f}"]  # over all queries, not macro
    header, *rows = tables["Per class"]
    assert header == ["class", "map@r"]
    assert rows == [[str(c), f"{want[f'map@r/{c}'].item():.4f}"] for c in range(4)]
    assert (tmp_path / "r" / "results_map_r_per_category.png").exists()
    assert "the query labels (a per-class view" in (tmp_path / "r" / "report.md").read_text()


@pytest.mark.skipif(not cli_commands._supports("confidence"), reason="evaluate_embeddings(confidence=) (issue 11, conf) is "
                    "not in this build")
def test_confidence_file_gives_erc_values_and_plots(saved, tmp_path):
    pytest.importorskip("matplotlib")
    path, x, labels = saved
    conf = torch.rand(40, generator=torch.Generator().manual_seed(5))
    torch.save(conf, tmp_path / "conf.pt")
    keys = ["cmc@1", "erc:cmc@1", "conf:cmc@1"]
    code, out, err = run_cli("report", path / "x.pt", path / "labels.npy", "--metrics", ",".join(keys),
                             "--confidence", tmp_path / "conf.pt", "--out", tmp_path / "r")
    assert code == 0, err
    want = rc.evaluate_embeddings(x, labels, keys, confidence=conf)
    data = json.loads((tmp_path / "r" / "results.json").read_text())["runs"]["results"]
    assert data["values"]["erc:cmc@1"] == pytest.approx(want["erc:cmc@1"].item())
    assert data["curves"]["erc:cmc@1"]["y"] == pytest.approx(want.curves["erc:cmc@1"][1].tolist())
    assert (tmp_path / "r" / "results_erc_cmc_1.png").exists() and (tmp_path / "r" / "results_conf_cmc_1.png").exists()


def test_a_reader_that_stops_early_is_not_an_error(saved):
    """`retrieval-metrics eval ... | head -1`: the closed pipe ends the command quietly."""
    path, _, _ = saved
    p = subprocess.Popen([sys.executable, "-m", "retrieval_core.cli", "eval", str(path / "x.pt"),
                          str(path / "labels.npy"), "--json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    p.stdout.close()  # before the interpreter has started: its first write meets a closed pipe
    err = p.stderr.read().decode()
    assert p.wait(timeout=300) == 0, err
    assert err == ""


@pytest.mark.parametrize("args", [
    ["eval", "{missing}", "{missing}"],
    ["report", "{missing}", "--output", "{tmp}/out"],
    ["compare", "{missing}", "{missing}"],
    ["trec", "{missing}", "{missing}"],
])
def test_a_missing_file_has_one_wording_in_every_command(args, tmp_path, capsys):
    missing = str(tmp_path / "nope.json")
    status = cli.main([a.format(missing=missing, tmp=tmp_path) for a in args])
    err = capsys.readouterr().err
    assert (status, err) == (1, f"retrieval-metrics {args[0]}: error: no such file: {missing}\n")


def test_a_directory_given_as_a_file_says_so(tmp_path, capsys):
    status = cli.main(["trec", str(tmp_path), str(tmp_path)])
    assert (status, capsys.readouterr().err) == (1, f"retrieval-metrics trec: error: is a directory: {tmp_path}\n")
