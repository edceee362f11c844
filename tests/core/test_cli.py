"""The command line: eval on saved files (.pt, .npy, .npz) and the digits demo."""
import json

import numpy as np
import pytest
import torch

import retrieval_core as rc
from retrieval_core import cli


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
