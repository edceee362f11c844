"""The suite of the validation-loop path (``retrieval_core.trec.QrelsJudge`` feeding the
adapters' ``n_relevant=`` / ``ideal=``) for the multi-process harness.

Every rank builds the same qrels and top-k batches (``tests.unit.trec.cases.make_loop``) and
judges its own share of the batches: uneven (rank 0 the first batch, rank 1 the rest),
and rank 0 also sees again the first query of rank 1 (DistributedSampler's padding
repeats a sample), dropped by its ``ids``. On one process (``harness.run_local``) the
cases see every batch once: the reference, which ``tests/unit/trec/test_judge.py`` checks
against trec_eval's numbers. A case returns the summary and the per-query values by
query name.
"""
from __future__ import annotations

from typing import Any, Dict, List

from ignite_retrieval import RankingMetrics as IgniteRanking
from lightning_retrieval import RankingMetrics as LightningRanking
from retrieval_core.trec import QrelsJudge
from tests.unit.trec.cases import Batch, make_loop

WORLDS = (2,)
SEED = 3
KEYS = ["map", "ndcg", "ndcg@10", "mrr", "precision@5", "recall@100", "r_precision", "hit_rate@1", "map@10"]


def share(rank: int, world: int) -> List[Batch]:
    """This rank's batches (uneven; the padding repeat on rank 0)."""
    _, batches = make_loop(SEED)
    if world == 1:
        return batches
    if rank == 0:
        first_of_next = batches[1]
        repeat = Batch(first_of_next.queries[:1], first_of_next.doc_index[:1], first_of_next.doc_names[:1],
                       first_of_next.scores[:1], first_of_next.mask[:1])
        return [batches[0], repeat]
    return batches[1:]


def _plain(results, qrels) -> Dict[str, Any]:
    names = [qrels.query_ids[i] for i in results.query_ids.tolist()]
    return {"summary": {k: float(results[k]) for k in KEYS},
            "per_query": {q: [float(results.per_query[k][n]) for k in KEYS] for n, q in enumerate(names)}}


def lightning(rank: int, world: int) -> Dict[str, Any]:
    qrels, _ = make_loop(SEED)
    judge, metric = QrelsJudge(qrels), LightningRanking(KEYS, empty="zero")
    for b in share(rank, world):
        metric.update(**judge(b.queries, b.doc_index, b.scores).inputs())
    return _plain(metric.compute(), qrels)


def ignite(rank: int, world: int) -> Dict[str, Any]:
    qrels, _ = make_loop(SEED)
    judge, metric = QrelsJudge(qrels), IgniteRanking(KEYS, empty="zero")
    for b in share(rank, world):
        metric.update(judge(b.queries, b.doc_names, b.scores).inputs(preds="y_pred", target="y"))
    metric.compute()
    return _plain(metric.last_results, qrels)


def lightning_without_ids(rank: int, world: int) -> Dict[str, Any]:
    """Negative control: without ``ids`` the repeated query counts twice on 2 processes."""
    qrels, _ = make_loop(SEED)
    judge, metric = QrelsJudge(qrels), LightningRanking(KEYS, empty="zero")
    for b in share(rank, world):
        inputs = judge(b.queries, b.doc_index, b.scores).inputs()
        del inputs["ids"]
        metric.update(**inputs)
    return {"summary": {k: float(v) for k, v in metric.compute().items()}}


SCENARIOS = {"lightning": lightning, "ignite": ignite, "lightning_without_ids": lightning_without_ids}
PADDED = {"lightning_without_ids"}
