"""The command line a new user meets: --version, one-line errors, intervals in JSON,
queries never paired silently, class names as labels, one name for outputs, extras
named in errors, and files that are never overwritten or written through links."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import numpy as np
import pytest
import torch

import retrieval_core as rc
from retrieval_core import cli, optional
from retrieval_core.cli import commands as cli_commands, demo as cli_demo

ROOT = Path(__file__).resolve().parents[3]
NAMES = np.array(["cat", "dog", "eel", "fox", "gnu"])


def run(*args, cwd=None):
    """``retrieval-metrics ARGS`` in a fresh interpreter: (status, stdout, stderr)."""
    env = {k: v for k, v in os.environ.items() if k != "RETRIEVAL_METRICS_TRACEBACK"}
    p = subprocess.run([sys.executable, "-m", "retrieval_core.cli", *map(str, args)], capture_output=True, text=True,
                       cwd=cwd, env=env, timeout=300)
    return p.returncode, p.stdout, p.stderr


@pytest.fixture()
def files(tmp_path):
    g = torch.Generator().manual_seed(3)
    x = torch.randn(60, 6, generator=g)
    labels = torch.randint(0, 5, (60,), generator=g)
    torch.save(x, tmp_path / "x.pt")
    np.save(tmp_path / "labels.npy", labels.numpy())
    perm = torch.randperm(60, generator=g)
    torch.save(x[perm], tmp_path / "x_shuffled.pt")
    np.save(tmp_path / "labels_shuffled.npy", labels[perm].numpy())
    np.save(tmp_path / "ids.npy", np.arange(60))
    np.save(tmp_path / "ids_shuffled.npy", perm.numpy())
    return tmp_path, x, labels, perm


# -- version ---------------------------------------------------------------------------------

def test_version_is_the_distribution_version(capsys):
    assert rc.__version__ == metadata.version("retrieval-metrics")
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["--version"])
    assert exit_info.value.code == 0
    assert capsys.readouterr().out.strip() == f"retrieval-metrics {rc.__version__}"


# -- every error is one line -------------------------------------------------------------------

@pytest.mark.parametrize("device", ["cuda:99", "bogus"])
def test_an_unavailable_device_is_one_line(files, device):
    path, *_ = files
    code, out, err = run("eval", path / "x.pt", path / "labels.npy", "--device", device)
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and err.startswith("retrieval-metrics eval: error: --device")


def test_cuda_on_a_cpu_only_torch_is_one_line(files):
    if torch.cuda.is_available():
        pytest.skip("this torch has CUDA: cuda:99 above covers a device it cannot use")
    path, *_ = files
    code, _, err = run("eval", path / "x.pt", path / "labels.npy", "--device", "cuda")
    assert code == 2 and err.strip() == ("retrieval-metrics eval: error: --device cuda: not available with this "
                                         "torch (Torch not compiled with CUDA enabled)")


def test_an_unexpected_exception_is_one_line_too(files, monkeypatch, capsys):
    path, *_ = files
    monkeypatch.delenv("RETRIEVAL_METRICS_TRACEBACK", raising=False)

    def broken(*args, **kwargs):
        raise AssertionError("internal\ncheck failed")

    monkeypatch.setattr(cli_commands, "evaluate_embeddings", broken)
    assert cli.main(["eval", str(path / "x.pt"), str(path / "labels.npy")]) == 1
    assert capsys.readouterr().err == "retrieval-metrics eval: error: AssertionError: internal check failed\n"


def test_erc_without_confidence_names_the_cli_option(files):
    path, *_ = files
    code, _, err = run("eval", path / "x.pt", path / "labels.npy", "--metrics", "erc:cmc@1")
    assert code == 2 and "pass --confidence FILE" in err and "confidence=" not in err


# -- JSON keeps the intervals ------------------------------------------------------------------

def test_eval_json_carries_the_intervals(files):
    path, x, labels, _ = files
    code, out, err = run("eval", path / "x.pt", path / "labels.npy", "--metrics", "cmc@1", "map@r", "--json",
                         "--ci", "0.9", "--seed", "4")
    assert code == 0, err
    got = json.loads(out)
    want = rc.evaluate_embeddings(x, labels, ["cmc@1", "map@r"], ci=0.9, seed=4)
    assert got["cmc@1"] == pytest.approx(want["cmc@1"].item())
    for key in ("cmc@1", "map@r"):
        assert got["ci"][key] == pytest.approx([want.ci[key][0].item(), want.ci[key][1].item()])
    code, out, _ = run("eval", path / "x.pt", path / "labels.npy", "--metrics", "cmc@1", "--json")
    assert "ci" not in json.loads(out)  # no intervals asked: none written


# -- compare never pairs queries silently ------------------------------------------------------

def _eval(path, emb, labels, out, *extra):
    code, _, err = run("eval", path / emb, path / labels, "--metrics", "cmc@1", "map@r", "--output", path / out, *extra)
    assert code == 0, err


def test_compare_refuses_the_same_embeddings_shuffled(files):
    path, *_ = files
    _eval(path, "x.pt", "labels.npy", "a.json")
    _eval(path, "x_shuffled.pt", "labels_shuffled.npy", "b.json")
    code, _, err = run("compare", path / "a.json", path / "b.json")
    assert code == 1 and "cannot pair the queries" in err and "--query-ids" in err and "--by-position" in err


def test_compare_pairs_shuffled_runs_by_their_ids(files):
    path, *_ = files
    _eval(path, "x.pt", "labels.npy", "a.json", "--query-ids", path / "ids.npy")
    _eval(path, "x_shuffled.pt", "labels_shuffled.npy", "b.json", "--query-ids", path / "ids_shuffled.npy")
    code, out, err = run("compare", path / "a.json", path / "b.json", "--json", "--test", "paired_t")
    assert code == 0, err
    for row in json.loads(out)["metrics"].values():  # the same embeddings: exactly no difference
        assert row["mean_difference"] == 0 and row["ci"] == [0, 0] and row["p_value"] == 1


def test_compare_pairs_by_position_only_with_equal_fingerprints(files):
    path, x, labels, _ = files
    torch.save(x[:, :3].contiguous(), path / "x3.pt")
    _eval(path, "x.pt", "labels.npy", "a.json")
    _eval(path, "x3.pt", "labels.npy", "b.json")  # another model of the same queries, same order
    code, out, err = run("compare", path / "a.json", path / "b.json", "--json", "--test", "paired_t")
    assert code == 0, err
    va = rc.evaluate_embeddings(x, labels, ["map@r"], reduce="none")["map@r"]
    vb = rc.evaluate_embeddings(x[:, :3], labels, ["map@r"], reduce="none")["map@r"]
    assert json.loads(out)["metrics"]["map@r"]["mean_difference"] == pytest.approx((vb - va).nanmean().item())
    legacy = json.loads((path / "b.json").read_text())
    del legacy["queries"]  # a file that identifies nothing (an older version's)
    (path / "old.json").write_text(json.dumps(legacy))
    code, _, err = run("compare", path / "a.json", path / "old.json")
    assert code == 1 and "records neither unique query ids nor a fingerprint" in err
    code, _, err = run("compare", path / "a.json", path / "old.json", "--by-position")
    assert code == 0, err


def test_compare_heading_names_the_test(files):
    path, *_ = files
    _eval(path, "x.pt", "labels.npy", "a.json")
    for test, name in (("paired_t", "paired t-test"), ("permutation", "sign-flip permutation test"),
                       ("bootstrap", "bootstrap of the mean difference")):
        code, out, err = run("compare", path / "a.json", path / "a.json", "--test", test, "--n-resamples", "200")
        assert code == 0, err
        assert f"\n{name} over queries\n" in out and "paired paired" not in out


# -- class names as labels ---------------------------------------------------------------------

def test_class_names_from_text_or_string_arrays(files):
    path, x, labels, _ = files
    names = NAMES[labels.numpy()]
    (path / "names.txt").write_text("\n".join(names) + "\n")
    np.save(path / "names.npy", names)
    want = rc.evaluate_embeddings(x, labels, ["cmc@1", "map@r"])
    for spec in ("names.txt", "names.npy"):
        code, out, err = run("eval", path / "x.pt", path / spec, "--metrics", "cmc@1", "map@r", "--json")
        assert code == 0, err
        assert json.loads(out) == pytest.approx({k: v.item() for k, v in want.items()})


def test_query_and_gallery_names_share_one_vocabulary(files):
    path, x, labels, _ = files
    q, g = slice(0, 20), slice(20, 60)
    (path / "q.txt").write_text("\n".join(NAMES[labels[q].numpy()]))
    (path / "g.txt").write_text("\n".join(NAMES[labels[g].numpy()]))
    torch.save(x[q].clone(), path / "q.pt")
    torch.save(x[g].clone(), path / "g.pt")
    want = rc.evaluate_embeddings(x[q], labels[q], ["map@r"], gallery=x[g], gallery_labels=labels[g])
    code, out, err = run("eval", path / "q.pt", path / "q.txt", "--gallery", path / "g.pt", "--gallery-labels",
                         path / "g.txt", "--metrics", "map@r", "--json")
    assert code == 0, err
    assert json.loads(out)["map@r"] == pytest.approx(want["map@r"].item())
    code, _, err = run("eval", path / "q.pt", path / "q.txt", "--gallery", path / "g.pt", "--gallery-labels",
                       path / "labels.npy")
    assert code == 1 and "both be numbers or both be class names" in err


def test_object_arrays_are_refused_without_unpickling(files):
    path, *_ = files
    np.save(path / "obj.npy", np.array([1, "a", None], dtype=object), allow_pickle=True)
    code, _, err = run("eval", path / "x.pt", path / "obj.npy")
    assert code == 1 and "never unpickled" in err and "one per line" in err


# -- one name for outputs ------------------------------------------------------------------------

@pytest.mark.parametrize("command, flag", [("report", "--output"), ("report", "--out"), ("demo", "--output"),
                                           ("demo", "--report")])
def test_output_has_one_name_and_the_old_aliases(command, flag):
    args = ["report", "x.pt", "y.npy"] if command == "report" else ["demo"]
    assert cli.parse_args(args + [flag, "DIR"]).output == "DIR"


def test_report_reads_eval_outputs_side_by_side_with_paired_tests(files):
    path, x, labels, _ = files
    torch.save(x[:, :3].contiguous(), path / "x3.pt")
    _eval(path, "x.pt", "labels.npy", "full.json")
    _eval(path, "x3.pt", "labels.npy", "small.json")
    code, out, err = run("report", path / "full.json", path / "small.json", "--output", path / "rep",
                         "--test", "paired_t")
    assert code == 0, err
    md = (path / "rep" / "report.md").read_text()
    assert "| metric | full | small |" in md and "Paired tests against full (paired t-test" in md
    va = rc.evaluate_embeddings(x, labels, ["map@r"], reduce="none")["map@r"]
    vb = rc.evaluate_embeddings(x[:, :3], labels, ["map@r"], reduce="none")["map@r"]
    row = next(line for line in md.splitlines() if line.startswith("| map@r | small |"))
    assert row.split(" | ")[2] == f"{(vb - va).nanmean().item():+.4f}"


# -- extras named as extras ----------------------------------------------------------------------

def test_missing_packages_are_named_by_their_extra(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import fails as if not installed
    assert cli_commands._plots_available() is False
    assert capsys.readouterr().err.strip() == ("retrieval-metrics: note: tables only, no plots: drawing the report's "
                                               "plots needs matplotlib: pip install 'retrieval-metrics[plot]'")
    monkeypatch.setitem(sys.modules, "sklearn", None)
    monkeypatch.setitem(sys.modules, "sklearn.datasets", None)
    with pytest.raises(ImportError, match=r"pip install 'retrieval-metrics\[demo\]'$"):
        cli_demo._digits()
    assert optional.install_hint("numpy") == "pip install 'retrieval-metrics[cli]'"


def test_every_named_extra_exists_in_the_metadata():
    extras = set(metadata.metadata("retrieval-metrics").get_all("Provides-Extra"))
    assert set(optional.EXTRAS.values()) <= extras


# -- files: never overwrite an input, never write through a link, never render markup ----------

def test_eval_output_never_overwrites_an_input(files):
    path, *_ = files
    before = (path / "labels.npy").read_bytes()
    code, _, err = run("eval", path / "x.pt", path / "labels.npy", "--output", path / "labels.npy")
    assert code == 1 and "refusing to write" in err
    assert (path / "labels.npy").read_bytes() == before
    os.symlink(path / "x.pt", path / "link.json")  # the same file under another name
    code, _, err = run("eval", path / "x.pt", path / "labels.npy", "--output", path / "link.json")
    assert code == 1 and "it is the input" in err


def test_report_never_writes_through_a_link(files, tmp_path_factory):
    path, *_ = files
    outside = tmp_path_factory.mktemp("outside") / "victim.md"
    outside.write_text("keep me")
    (path / "rep").mkdir()
    os.symlink(outside, path / "rep" / "report.md")
    code, _, err = run("report", path / "x.pt", path / "labels.npy", "--output", path / "rep")
    assert code == 1 and "symbolic link" in err
    assert outside.read_text() == "keep me"


def test_report_refuses_to_overwrite_an_input_in_its_folder(files):
    path, *_ = files
    _eval(path, "x.pt", "labels.npy", "results.json")
    before = (path / "results.json").read_text()
    code, _, err = run("report", path / "results.json", "--output", path)
    assert code == 1 and "refusing to write" in err
    assert (path / "results.json").read_text() == before


HOSTILE = ["<img src=x onerror=alert(1)>", "*bold*", "[link](http://example.com)", "a$$b", "$\\foo{$", "x|y",
           "_under_", "`code`"]


def test_report_markdown_shows_names_as_written(files):
    pytest.importorskip("matplotlib")
    path, x, labels, _ = files
    (path / "cats.txt").write_text("\n".join(HOSTILE[i % len(HOSTILE)] for i in range(60)))
    code, _, err = run("report", path / "x.pt", path / "labels.npy", "--categories", path / "cats.txt", "--title",
                       "# <script>x</script> [t](u)", "--output", path / "rep", "--max-k", "3")
    assert code == 0, err  # the plots drew every name: no math-mode crash on "$"
    md = (path / "rep" / "report.md").read_text()
    for raw in ("<img", "<script", "*bold*", "[t](u)", "a$$b", "_under_", "`code`"):
        assert raw not in md
    text = "\n".join(line for line in md.splitlines() if not line.startswith("!["))  # the plots' own links
    assert not re.search(r"(?<!\\)\]\(", text)  # no link from the data: every "](" has its bracket escaped
    for shown in ("&lt;img src=x onerror=alert(1)&gt;", "\\*bold\\*", "\\[link\\](http://example.com)", "a\\$\\$b",
                  "\\_under\\_", "x\\|y"):
        assert shown in md
    assert md.startswith("# # &lt;script&gt;x&lt;/script&gt; \\[t\\](u)\n")
    assert "onerror" not in (path / "rep" / "report.html").read_text().replace("onerror=alert(1)&gt;", "")


def test_plots_draw_dollar_signs_as_text(files):
    matplotlib = pytest.importorskip("matplotlib")
    from retrieval_core.reporting import plot

    _, x, labels, _ = files
    r = rc.evaluate_embeddings(x, labels, ["cmc@1"], categories=[HOSTILE[i % 5] for i in range(60)])
    fig = plot.plot_categories(r, "cmc@1", title="$\\foo{$ a$$b")
    fig.savefig(os.devnull, format="png")  # would raise in mathtext without the fix
    texts = {t.get_text() for t in fig.findobj(matplotlib.text.Text)}
    assert "a$$b" in texts and "$\\foo{$ a$$b" in texts


# -- examples a newcomer runs ------------------------------------------------------------------

def test_examples_answer_help_without_running():
    for script, words in (("demo.py", "two recommenders scored"), ("lightning_module.py", "in validation.")):
        p = subprocess.run([sys.executable, str(ROOT / "examples" / script), "--help"], capture_output=True,
                           text=True, timeout=120)
        assert p.returncode == 0 and words in " ".join(p.stdout.split()), p.stdout + p.stderr
        assert "ndcg@10" not in p.stdout  # the demo's table: it did not run


def test_torchrun_example_reads_memory_mapped_rows_without_a_warning(tmp_path, recwarn):
    sys.path.insert(0, str(ROOT / "examples"))
    try:
        import torchrun_eval
    finally:
        sys.path.pop(0)
    np.save(tmp_path / "a.npy", np.arange(12, dtype=np.float32).reshape(6, 2))
    rows = torchrun_eval.load_rows(str(tmp_path / "a.npy"), 1, 2)
    assert rows.tolist() == [[6.0, 7.0], [8.0, 9.0], [10.0, 11.0]]
    assert not [w for w in recwarn if "not writable" in str(w.message)]


# -- what the docs call Recall@K -------------------------------------------------------------------

def test_docs_say_that_papers_call_cmc_recall_at_k():
    readme = (ROOT / "README.md").read_text()
    row = next(line for line in readme.splitlines() if line.startswith("| `recall@k`"))
    assert "Recall@K" in row and "cmc@k" in row
    metrics = (ROOT / "docs" / "metrics.md").read_text()
    assert "Recall@K" in metrics and "cmc@k" in metrics
