"""Keeping results: MetricResults.to_dict / from_dict, torch.save / torch.load(weights_only=True),
and the report (markdown, JSON, HTML) parsed back."""
from __future__ import annotations

import json
import math
import subprocess
import sys
import textwrap

import pytest
import torch

import retrieval_core as rc
from retrieval_core import MetricResults


def _full_results():
    g = torch.Generator().manual_seed(0)
    x, labels = torch.randn(30, 5, generator=g), torch.arange(30) % 3
    r = rc.evaluate_embeddings(x, labels, ["cmc@1", "map@r"], categories=labels % 2)
    r["auroc"] = torch.tensor(float("nan"), dtype=torch.float64)  # an undefined value
    r.n_empty["auroc"] = torch.tensor(30)
    r.ci = {"cmc@1": (torch.tensor(0.2, dtype=torch.float64), torch.tensor(0.6, dtype=torch.float64))}
    r.per_query = {"cmc@1": torch.tensor([1.0, 0.0, float("nan")], dtype=torch.float64)}
    r.query_ids = torch.tensor([7, 8, 9])
    r.curves = {"erc:cmc@1": (torch.tensor([1 / 3, 2 / 3, 1.0]), torch.tensor([0.0, 0.5, 0.5]))}
    r.neighbours = (torch.tensor([[1, 2], [0, 2]]), torch.tensor([[0.9, 0.5], [0.8, 0.1]]))
    return r


def test_to_dict_is_plain_json_and_reads_back():
    r = _full_results()
    d = r.to_dict()
    text = json.dumps(d, allow_nan=False)  # no NaN/inf tokens: strict JSON
    back = json.loads(text)
    assert back["n_queries"] == 30 and back["n_empty"]["cmc@1"] == 0 and back["n_empty"]["auroc"] == 30
    assert back["values"]["cmc@1"] == r["cmc@1"].item() and back["values"]["auroc"] is None
    assert back["values"]["map@r/0"] == r["map@r/0"].item()
    assert back["ci"]["cmc@1"] == [0.2, 0.6]
    assert back["per_query"]["cmc@1"] == [1.0, 0.0, None]
    assert back["query_ids"] == [7, 8, 9]
    assert back["curves"]["erc:cmc@1"]["y"] == [0.0, 0.5, 0.5]
    assert back["neighbours"]["ids"] == [[1, 2], [0, 2]]
    again = MetricResults.from_dict(back)
    assert list(again) == list(r)
    for key in r:
        assert torch.equal(again[key].isnan(), r[key].isnan())
        assert again[key].nan_to_num().item() == pytest.approx(r[key].nan_to_num().item())
    assert again.n_queries.item() == 30 and again.n_empty["auroc"].item() == 30
    assert [v.item() for v in again.ci["cmc@1"]] == [0.2, 0.6]
    assert again.per_query["cmc@1"][:2].tolist() == [1.0, 0.0] and math.isnan(again.per_query["cmc@1"][2])
    assert again.query_ids.tolist() == [7, 8, 9] and again.query_ids.dtype == torch.int64
    assert again.curves["erc:cmc@1"][1].tolist() == [0.0, 0.5, 0.5]
    assert again.neighbours[0].tolist() == [[1, 2], [0, 2]]
    assert json.dumps(again.to_dict(), allow_nan=False) == text


def test_to_dict_of_per_query_values_and_empty_results():
    v = torch.tensor([[1.0], [float("nan")]], dtype=torch.float64)
    r = rc.aggregate(v, ["mrr"], reduce="none")
    assert r.to_dict()["values"] == {"mrr": [1.0, None]}
    empty = MetricResults().to_dict()
    assert empty == {"values": {}, "n_queries": None, "n_empty": {}, "ci": {}, "per_query": {},
                     "query_ids": None, "curves": {}}
    with pytest.raises(ValueError, match=r"expects the dict of MetricResults.to_dict\(\), with a 'values' mapping"):
        MetricResults.from_dict({"cmc@1": 0.5})


def test_torch_save_and_load_with_weights_only(tmp_path):
    r = _full_results()
    path = tmp_path / "results.pt"
    torch.save(r, path)
    code = textwrap.dedent(f"""
        import json, torch
        import retrieval_core
        r = torch.load({str(path)!r})  # torch's default: weights_only=True
        assert type(r).__name__ == "MetricResults", type(r)
        r2 = torch.load({str(path)!r}, weights_only=True)
        print(json.dumps(r2.to_dict()))
    """)
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout
    assert json.loads(out) == json.loads(json.dumps(r.to_dict()))


# --- the report ----------------------------------------------------------------------------------

import base64  # noqa: E402
import re  # noqa: E402
from html.parser import HTMLParser  # noqa: E402
from pathlib import Path  # noqa: E402

from retrieval_core.reporting import report  # noqa: E402


class _Page(HTMLParser):
    """Tables (lists of rows of cell texts) and image sources of an HTML page."""

    def __init__(self):
        super().__init__()
        self.tables, self.images, self._cell = [], [], None

    def handle_starttag(self, tag, attrs):
        if tag == "table":
            self.tables.append([])
        elif tag == "tr":
            self.tables[-1].append([])
        elif tag in ("td", "th"):
            self._cell = ""
        elif tag == "img":
            self.images.append(dict(attrs)["src"])

    def handle_endtag(self, tag):
        if tag in ("td", "th"):
            self.tables[-1][-1].append(self._cell)
            self._cell = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell += data


def _two_runs():
    g = torch.Generator().manual_seed(2)
    x, labels = torch.randn(50, 6, generator=g), torch.arange(50) % 5
    keys = ["cmc@1", "cmc@2", "cmc@3", "map@r"]
    a = rc.evaluate_embeddings(x, labels, keys, per_class="all")
    b = rc.evaluate_embeddings(x[:, :3].contiguous(), labels, keys, per_class="all")
    a.ci["cmc@1"] = (torch.tensor(0.1), torch.tensor(0.3))
    return {"A": a, "B <b>": b}


def test_markdown_and_html_hold_the_same_tables():
    runs = _two_runs()
    md = report.markdown_report(runs, metrics=["cmc@1", "map@r"], title="T", settings={"distance": "cosine"})
    assert md.startswith("# T\n\n- distance: cosine\n")
    rows = [line for line in md.splitlines() if line.startswith("| cmc@1 |")]
    a, b = runs["A"], runs["B <b>"]
    assert rows[0] == f"| cmc@1 | {a['cmc@1'].item():.4f} [0.1000, 0.3000] | {b['cmc@1'].item():.4f} |"
    assert "| queries | 50 | 50 |" in md and "| empty queries: map@r | 0 | 0 |" in md
    assert "## Per class: A" in md and "## Per class: B &lt;b&gt;" in md and "<b>" not in md  # escaped: shown as text
    class_row = next(line for line in md.splitlines() if line.startswith("| 3 |"))
    assert class_row == f"| 3 | {a['cmc@1/class=3'].item():.4f} | {a['map@r/class=3'].item():.4f} |"
    page = _Page()
    page.feed(report.html_report(runs, metrics=["cmc@1", "map@r"], title="T", images=[("c", b"\x89PNG")]))
    main = page.tables[0]
    assert main[0] == ["metric", "A", "B <b>"]  # escaped in the page, read back as text
    assert main[1] == ["cmc@1", f"{a['cmc@1'].item():.4f} [0.1000, 0.3000]", f"{b['cmc@1'].item():.4f}"]
    assert page.images == ["data:image/png;base64," + base64.b64encode(b"\x89PNG").decode()]
    with pytest.raises(TypeError, match=r"one MetricResults or a non-empty \{name: MetricResults\} mapping"):
        report.markdown_report({})


def test_write_report_files_and_figures(tmp_path):
    pytest.importorskip("matplotlib")
    runs = _two_runs()
    paths = report.write_report(runs, tmp_path / "out", metrics=["cmc@1", "map@r"], category_keys=["map@r"])
    names = sorted(p.name for p in paths.values())
    assert names == ["a_map_r_per_class.png", "b_b_map_r_per_class.png", "cmc_at_k.png", "report.html",
                     "report.md", "results.json"]
    md = paths["markdown"].read_text()
    assert re.findall(r"!\[[^\]]*\]\(([^)]+)\)", md) == ["cmc_at_k.png", "a_map_r_per_class.png",
                                                          "b_b_map_r_per_class.png"]
    figures = {f: fig for f, _, fig in report.report_figures(runs, metrics=["cmc@1"])}
    lines = figures["cmc_at_k.png"].axes[0].get_lines()
    assert [line.get_label() for line in lines] == ["A: CMC", "B <b>: CMC"]
    assert list(lines[1].get_ydata()) == pytest.approx([runs["B <b>"][f"cmc@{k}"].item() for k in (1, 2, 3)])
    page = _Page()
    page.feed(paths["html"].read_text())
    assert len(page.images) == 3
    assert base64.b64decode(page.images[0].split(",", 1)[1]) == (tmp_path / "out" / "cmc_at_k.png").read_bytes()
    data = json.loads(paths["json"].read_text())
    assert MetricResults.from_dict(data["runs"]["A"])["map@r/class=2"].item() == pytest.approx(
        runs["A"]["map@r/class=2"].item())


def test_docs_snippets_run(tmp_path):
    docs = Path(__file__).resolve().parents[3] / "docs" / "reports.md"
    blocks = re.findall(r"```python\n(.*?)```", docs.read_text(encoding="utf-8"), flags=re.S)
    assert len(blocks) >= 2
    for code in blocks:
        proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, timeout=300)
        assert proc.returncode == 0, proc.stderr[-2000:]
        for line in code.splitlines():  # a print whose comment shows its output
            if line.lstrip().startswith("print(") and "  # " in line:
                assert line.split("  # ", 1)[1].strip() in proc.stdout
