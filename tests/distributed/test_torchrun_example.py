"""``examples/torchrun_eval.py``: 2 processes under torchrun, with and without
``--shard-gallery``, and one plain process print the table of
``retrieval-metrics eval`` on the same files."""
from __future__ import annotations

import contextlib
import io
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from retrieval_core import cli

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = str(ROOT / "examples" / "torchrun_eval.py")


def _run(*args, timeout=240):
    env = dict(os.environ, OMP_NUM_THREADS="1",
               PYTHONPATH=os.pathsep.join(p for p in (str(ROOT / "core"), str(ROOT), os.environ.get("PYTHONPATH"))
                                          if p))
    for k in ("MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE", "LOCAL_RANK"):
        env.pop(k, None)
    proc = subprocess.run([sys.executable, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return proc.stdout


def _torchrun(*args):
    return _run("-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2", SCRIPT, *args)


def _cli(*args) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert cli.main(["eval", *args]) == 0
    return out.getvalue()


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """Embeddings as .npy, labels as .pt, a separate gallery with ids (small, clustered, with ties)."""
    d = tmp_path_factory.mktemp("torchrun")
    g = torch.Generator().manual_seed(4)
    labels = torch.randint(0, 6, (91,), generator=g)
    x = torch.randn(91, 8, generator=g) + 2.0 * torch.nn.functional.one_hot(labels, 8).float()
    x[50] = x[3]
    np.save(d / "emb.npy", x.numpy())
    torch.save(labels, d / "labels.pt")
    np.save(d / "gallery.npy", (x[:60] + 0.2 * torch.randn(60, 8, generator=g)).numpy())
    torch.save(labels[:60], d / "gallery_labels.pt")
    torch.save(torch.arange(91), d / "query_ids.pt")
    torch.save(torch.arange(60) + 30, d / "gallery_ids.pt")
    return {k: str(d / f) for k, f in (("emb", "emb.npy"), ("labels", "labels.pt"), ("gallery", "gallery.npy"),
                                        ("gallery_labels", "gallery_labels.pt"), ("query_ids", "query_ids.pt"),
                                        ("gallery_ids", "gallery_ids.pt"))}


def test_two_processes_print_the_cli_table(saved):
    args = [saved["emb"], saved["labels"], "--metrics", "cmc@1", "cmc@5", "map@r", "precision@r", "ndcg@10"]
    expected = _cli(*args)
    assert "map@r" in expected and len(expected.splitlines()) == 7  # header, 5 keys, queries
    assert _torchrun(*args) == expected
    assert _torchrun(*args, "--shard-gallery") == expected
    assert _run(SCRIPT, *args) == expected  # one plain process


def test_two_processes_with_a_gallery_and_ids(saved):
    args = [saved["emb"], saved["labels"], "--gallery", saved["gallery"], "--gallery-labels",
            saved["gallery_labels"], "--query-ids", saved["query_ids"], "--gallery-ids", saved["gallery_ids"],
            "--distance", "euclidean", "--json"]
    expected = _cli(*args)
    assert '"cmc@1"' in expected
    assert _torchrun(*args) == expected
    assert _torchrun(*args, "--shard-gallery") == expected
