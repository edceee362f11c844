"""ignite_retrieval: PyTorch-Ignite metrics on top of retrieval_core.

* :class:`RankingMetrics`: any ranking metric keys (``"ndcg@10"``, ``"map@r"``...)
  of dense scores ``(y_pred[B, N], y[B, N])``.
* :class:`EmbeddingMetrics`: retrieval metrics of ``(embeddings, labels)``.
* :class:`TopKMetrics`: recommender metrics of top-k item lists with sparse truth
  (``"ndcg@10"``, ``"coverage@10"``...).
* :class:`HitRate`, :class:`NDCG`, :class:`MRR`: drop-in replacements for
  ``ignite.metrics.rec_sys``.

The classes are ignite hooks over the core's framework-neutral accumulator
(``retrieval_core.evaluation.accumulator``: state, update, sync across processes,
compute); the metrics are the core's.

Example:
    >>> import torch
    >>> from ignite_retrieval import RankingMetrics
    >>> metric = RankingMetrics(["ndcg@2", "mrr"])
    >>> metric.update((torch.tensor([[0.9, 0.2, 0.5]]), torch.tensor([[0, 0, 1]])))
    >>> metric.compute()
    {'ndcg@2': 0.6309297535714575, 'mrr': 0.5}
"""
from ._base import RetrievalMetric
from .embedding import EmbeddingMetrics
from .ranking import RankingMetrics
from .rec_sys import MRR, NDCG, HitRate
from .topk import TopKMetrics

__all__ = ["EmbeddingMetrics", "HitRate", "MRR", "NDCG", "RankingMetrics", "RetrievalMetric", "TopKMetrics"]
