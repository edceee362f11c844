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
from retrieval_core.aggregate import MetricResults


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
