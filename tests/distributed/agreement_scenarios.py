"""Ranks given different options (issue 18, item 4), for the multi-process harness.

In each case the last rank passes other options than the others (one option,
or several, through every distributed entry point: ``distributed.evaluate_embeddings_across_ranks``,
``distributed.evaluate_split``, the ignite adapters' ``compute`` and the
torchmetrics adapters' synced ``compute``). Every rank must raise the same
``ValueError`` naming the options that differ, and quickly (no rank waiting in
a collective). A case records what it raised and how long it took, so that
``test_option_agreement.py`` can check both; ``CONTROLS`` must return values.

``CASES[name] = (case, options named in the message)``.
"""
from __future__ import annotations

import time
from typing import Any, Callable, Dict, List, Tuple

import torch

from retrieval_core import distributed as D
from tests.distributed.eval_scenarios import _data, _graded, _rows

WORLDS = (2, 3)
KEYS = ["cmc@1", "map@r"]


def _timed(fn: Callable[[], Any]) -> Dict[str, Any]:
    start = time.monotonic()
    try:
        fn()
        out: Dict[str, Any] = {"error": None, "message": None}
    except Exception as exc:  # recorded: the test checks type and message
        out = {"error": type(exc).__name__, "message": str(exc)}
    out["seconds"] = time.monotonic() - start
    return out


def _differ(entry: Callable[..., Any], first: Dict[str, Any], last: Dict[str, Any]) -> Callable[[int, int], Any]:
    """``entry(rank, world, **options)``: ``last`` on the last rank, ``first`` elsewhere."""
    def case(rank: int, world: int) -> Dict[str, Any]:
        return _timed(lambda: entry(rank, world, **(last if rank == world - 1 else first)))
    return case


# -- entry points -----------------------------------------------------------------------

def _evaluate(rank: int, world: int, metrics=KEYS, **options):
    x, labels, _, _ = _data()
    return D.evaluate_embeddings_across_ranks(_rows(x, rank, world), _rows(labels, rank, world), metrics, **options)


def _split(rank: int, world: int, metrics=KEYS, **options):
    x, labels, _, _ = _data()  # every rank holds the whole (gathered) state
    return D.evaluate_split(x, labels, metrics, **options)


def _scores(rank: int):
    g = torch.Generator().manual_seed(7 + rank)
    return torch.rand(6, 8, generator=g), torch.rand(6, 8, generator=g) > 0.6


def _ignite(cls_name: str, *args, **options):
    def entry(rank: int, world: int, **more):
        import ignite_retrieval as ir

        metric = getattr(ir, more.pop("cls", cls_name))(*args, **options, **more)
        if cls_name == "EmbeddingMetrics":
            x, labels, _, _ = _data()
            metric.update((_rows(x, rank, world), _rows(labels, rank, world)))
        else:
            metric.update(_scores(rank))
        return metric.compute()
    return entry


def _lightning(cls_name: str, *args, **options):
    def entry(rank: int, world: int, **more):
        import lightning_retrieval as lr

        metric = getattr(lr, more.pop("cls", cls_name))(*args, **options, **more)
        if cls_name == "EmbeddingMetrics":
            x, labels, _, _ = _data()
            metric.update(_rows(x, rank, world), _rows(labels, rank, world))
        elif cls_name == "RankingMetrics":
            metric.update(*_scores(rank))
        else:  # the flat drop-ins: (preds, target, indexes)
            preds, target = _scores(rank)
            metric.update(preds.reshape(-1), target.reshape(-1), torch.arange(48) // 8 + 10 * rank)
        return metric.compute()
    return entry


def _other_relevance(q_labels, g_labels):
    return (q_labels.unsqueeze(1) == g_labels.unsqueeze(0)).double()


CASES: Dict[str, Tuple[Callable[[int, int], Any], List[str]]] = {}


def _add(name: str, entry, first: Dict[str, Any], last: Dict[str, Any], named: List[str]) -> None:
    CASES[name] = (_differ(entry, first, last), named)


# distributed.evaluate_embeddings_across_ranks: every option, alone, then several at once
CI = dict(ci=0.9, n_resamples=100)
_add("eval_metric_order", _evaluate, {"metrics": ["cmc@1", "map@r"]}, {"metrics": ["map@r", "cmc@1"]}, ["metrics"])
_add("eval_k", _evaluate, {"metrics": ["cmc@1"]}, {"metrics": ["cmc@5"]}, ["metrics"])
_add("eval_distance", _evaluate, {}, {"distance": "euclidean"}, ["distance"])
_add("eval_reduce", _evaluate, {}, {"reduce": "median"}, ["reduce"])
_add("eval_per_class", _evaluate, {}, {"per_class": "macro"}, ["per_class"])
_add("eval_ties", _evaluate, {}, {"ties": "expected"}, ["ties"])
_add("eval_empty", _evaluate, {}, {"empty": "zero"}, ["empty"])
_add("eval_ci", _evaluate, {}, {"ci": 0.9}, ["ci"])
_add("eval_ci_method", _evaluate, dict(CI, metrics=["cmc@1"]), dict(CI, metrics=["cmc@1"], ci_method="beta"),
     ["ci_method"])
_add("eval_n_resamples", _evaluate, CI, dict(CI, n_resamples=101), ["n_resamples"])
_add("eval_seed", _evaluate, CI, dict(CI, seed=1), ["seed"])
_add("eval_keep_per_query", _evaluate, {}, {"keep_per_query": True}, ["keep_per_query"])
_add("eval_shard_gallery", _evaluate, {"metrics": ["cmc@1"]}, {"metrics": ["cmc@1"], "shard_gallery": True},
     ["shard_gallery"])
_add("eval_shard_gallery_first", _evaluate, {"metrics": ["cmc@1"], "shard_gallery": True}, {"metrics": ["cmc@1"]},
     ["shard_gallery"])
_add("eval_return_neighbours", _evaluate, {}, {"return_neighbours": 3}, ["return_neighbours"])
_add("eval_memory_budget_sharded", _evaluate, {"metrics": ["cmc@1"], "shard_gallery": True},
     {"metrics": ["cmc@1"], "shard_gallery": True, "memory_budget": 4096}, ["memory_budget"])
_add("eval_backend", _evaluate, {}, {"backend": "faiss"}, ["backend"])
_add("eval_relevance_functions", _evaluate, {"relevance": _graded}, {"relevance": _other_relevance}, ["relevance"])
_add("eval_relevance_given_once", _evaluate, {}, {"relevance": _graded}, ["relevance"])
_add("eval_relevance_lambdas", _evaluate,  # two lambdas: the same name, other code
     {"relevance": lambda q, g: (q.unsqueeze(1) == g.unsqueeze(0)).double()},
     {"relevance": lambda q, g: (q.unsqueeze(1) != g.unsqueeze(0)).double()}, ["relevance"])
_add("eval_several", _evaluate, {}, {"ties": "expected", "reduce": "median", "keep_per_query": True},
     ["ties", "reduce", "keep_per_query"])
_add("eval_sharded_ties", _evaluate, {"metrics": ["cmc@1"], "shard_gallery": True},
     {"metrics": ["cmc@1"], "shard_gallery": True, "ties": "expected"}, ["ties"])

# distributed.evaluate_split (the adapters' divided compute)
_add("split_metric_order", _split, {}, {"metrics": ["map@r", "cmc@1"]}, ["metrics"])
_add("split_keep_per_query", _split, {}, {"keep_per_query": True}, ["keep_per_query"])
_add("split_return_neighbours", _split, {}, {"return_neighbours": 2}, ["return_neighbours"])
_add("split_per_class_seed", _split, CI, dict(CI, per_class="all", seed=3), ["per_class", "seed"])

# ignite adapters: compute
_add("ignite_ranking_ties", _ignite("RankingMetrics", ["ndcg@3", "mrr"]), {}, {"ties": "expected"}, ["ties"])
_add("ignite_ranking_compact", _ignite("RankingMetrics", ["ndcg@3", "mrr"]), {},
     {"compact": True, "keep_per_query": False}, ["compact", "keep_per_query"])
_add("ignite_ranking_metric_order", _ignite("RankingMetrics"), {"metrics": ["ndcg@3", "mrr"]},
     {"metrics": ["mrr", "ndcg@3"]}, ["metrics"])
_add("ignite_embedding_distance", _ignite("EmbeddingMetrics", KEYS), {}, {"distance": "dot"}, ["distance"])
_add("ignite_embedding_keep_per_query", _ignite("EmbeddingMetrics", KEYS), {}, {"keep_per_query": False},
     ["keep_per_query"])
_add("ignite_hit_rate_top_k", _ignite("HitRate"), {"top_k": [1, 2]}, {"top_k": [1, 3]}, ["top_k"])
_add("ignite_ndcg_threshold", _ignite("NDCG", top_k=[2]), {}, {"relevance_threshold": 0.5}, ["relevance_threshold"])
_add("ignite_ndcg_gain", _ignite("NDCG", top_k=[2]), {}, {"gain_function": "linear_rank"}, ["gain_function"])
_add("ignite_zero_hits", _ignite("MRR", top_k=[2]), {}, {"ignore_zero_hits": False}, ["ignore_zero_hits"])
_add("ignite_class", _ignite("HitRate", top_k=[2]), {}, {"cls": "MRR"}, ["metric"])

# torchmetrics adapters: compute (synced)
_add("lightning_ranking_compact", _lightning("RankingMetrics", ["ndcg@3", "mrr"]), {},
     {"compact": True, "keep_per_query": False}, ["compact", "keep_per_query"])
_add("lightning_ranking_reduce", _lightning("RankingMetrics", ["ndcg@3", "mrr"]), {}, {"reduce": "max"}, ["reduce"])
_add("lightning_ranking_k", _lightning("RankingMetrics"), {"metrics": ["ndcg@3"]}, {"metrics": ["ndcg@4"]},
     ["metrics"])
_add("lightning_embedding_keep_per_query", _lightning("EmbeddingMetrics", KEYS), {}, {"keep_per_query": False},
     ["keep_per_query"])
_add("lightning_embedding_per_class", _lightning("EmbeddingMetrics", KEYS), {}, {"per_class": "macro"},
     ["per_class"])
_add("lightning_embedding_relevance", _lightning("EmbeddingMetrics", KEYS), {"relevance": _graded},
     {"relevance": _other_relevance}, ["relevance"])
_add("lightning_map_top_k", _lightning("RetrievalMAP"), {}, {"top_k": 3}, ["top_k"])
_add("lightning_ndcg_aggregation", _lightning("RetrievalNormalizedDCG"), {},
     {"aggregation": lambda v, dim=None: v.mean() if dim is None else v.mean(dim)}, ["aggregation"])
_add("lightning_precision_adaptive_k", _lightning("RetrievalPrecision", top_k=3), {}, {"adaptive_k": True},
     ["adaptive_k"])
_add("lightning_auroc_max_fpr", _lightning("RetrievalAUROC"), {}, {"max_fpr": 0.5}, ["max_fpr"])
_add("lightning_ignore_index", _lightning("RetrievalMRR"), {}, {"ignore_index": 0}, ["ignore_index"])
_add("lightning_empty_action", _lightning("RetrievalHitRate"), {}, {"empty_target_action": "skip"},
     ["empty_target_action"])
_add("lightning_curve_max_k", _lightning("RetrievalPrecisionRecallCurve"), {"max_k": 3}, {"max_k": 4}, ["max_k"])
_add("lightning_fixed_precision", _lightning("RetrievalRecallAtFixedPrecision"), {"min_precision": 0.5},
     {"min_precision": 0.25}, ["min_precision"])
_add("lightning_class", _lightning("RetrievalMAP"), {}, {"cls": "RetrievalMRR"}, ["metric"])


# -- a rank whose own input fails (evaluate_split): the error on every rank, no rank waiting

def _split_empty_on_last_rank(rank: int, world: int):
    x, labels, _, _ = _data()
    n = 0 if rank == world - 1 else len(x)
    return D.evaluate_split(x[:n], labels[:n], KEYS)


ERRORS = {  # name: (case, exception type, message part)
    "split_empty_on_last_rank": (lambda rank, world: _timed(lambda: _split_empty_on_last_rank(rank, world)),
                                 "ValueError", "query is empty; got shape (0, 6) (raised on rank"),
}


# -- controls: options that agree (closures capturing each rank's own values) -----------

def _per_rank_closure(rank: int):
    device = torch.device("cpu")  # each rank's own device, captured
    return lambda q, g: (q.unsqueeze(1) == g.unsqueeze(0)).double().to(device) * (1 + 0 * rank)


def _control(entry, **options) -> Callable[[int, int], Any]:
    def case(rank: int, world: int) -> Dict[str, Any]:
        out = _timed(lambda: entry(rank, world, **options))
        out["value"] = out["error"] is None
        return out
    return case


def _control_relevance(rank: int, world: int):
    return _evaluate(rank, world, relevance=_per_rank_closure(rank), ci=0.9, n_resamples=50)


CONTROLS = {
    "control_eval": _control(_evaluate, ci=0.9, n_resamples=50, keep_per_query=True, return_neighbours=2),
    "control_eval_closure": _control(lambda rank, world: _control_relevance(rank, world)),
    "control_split": _control(_split, reduce="median"),
    "control_ignite": _control(_ignite("RankingMetrics", ["ndcg@3", "mrr"], ties="expected")),
    "control_ignite_ndcg": _control(_ignite("NDCG", top_k=[2, 1], relevance_threshold=1)),
    "control_lightning": _control(_lightning("EmbeddingMetrics", KEYS, relevance=_graded)),
    "control_lightning_flat": _control(_lightning("RetrievalNormalizedDCG", top_k=3)),
}

SCENARIOS = {**{name: case for name, (case, _) in CASES.items()}, **{n: e[0] for n, e in ERRORS.items()}, **CONTROLS}
