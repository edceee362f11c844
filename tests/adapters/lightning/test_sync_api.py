"""How the torchmetrics adapters sync: only torchmetrics' public API (the
``dist_sync_fn`` argument, ``add_state`` reductions, ``sync``), the core's gather by
default, a user's ``dist_sync_fn`` used as given. The multi-process behaviour is
in ``test_ddp.py``."""
from __future__ import annotations

import ast
from pathlib import Path

import torch

import lightning_retrieval
from lightning_retrieval import EmbeddingMetrics, RankingMetrics, RetrievalMAP
from retrieval_core.distributed import gather_per_rank
from tests.adapters.lightning.data import dense_batches

BASE = Path(lightning_retrieval.__file__).with_name("_base.py")


def test_base_uses_no_torchmetrics_internals():
    tree = ast.parse(BASE.read_text())
    imported = [(node.module, alias.name) for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)
                for alias in node.names if (node.module or "").startswith("torchmetrics")]
    imported += [(alias.name, None) for node in ast.walk(tree) if isinstance(node, ast.Import)
                 for alias in node.names if alias.name.startswith("torchmetrics")]
    assert imported == [("torchmetrics", "Metric")]
    used = {node.attr for node in ast.walk(tree) if isinstance(node, ast.Attribute)}
    assert not used & {"_reductions", "_sync_dist", "_defaults", "_cache", "_is_synced"}


def test_default_and_user_dist_sync_fn():
    for metric in (RankingMetrics(["mrr"]), EmbeddingMetrics(["cmc@1"]), RetrievalMAP(),
                   RankingMetrics(["mrr"], dist_sync_fn=None)):
        assert metric.dist_sync_fn is gather_per_rank

    def mine(tensor, group=None):
        return [tensor]

    assert RankingMetrics(["mrr"], dist_sync_fn=mine).dist_sync_fn is mine


def test_sync_without_a_function_uses_the_metrics_own():
    # one process posing as distributed: sync() with no dist_sync_fn calls the metric's
    calls = []

    def mine(tensor, group=None):
        calls.append(tensor.dtype)
        return [tensor]

    m = RankingMetrics(["mrr"], dist_sync_fn=mine)
    p, t, i, _ = dense_batches(3, [4])[0]
    m.update(p, t, ids=i)
    m.sync(distributed_available=lambda: True)
    assert torch.float64 in calls and torch.int64 in calls
    m.unsync()
    assert isinstance(m.values, list)
