"""torchmetrics/Lightning adapters of ``retrieval_core``: states and their sync, no metric math.

* :class:`RankingMetrics` (dense scores) and :class:`EmbeddingMetrics` (embeddings):
  any keys of the core, ``compute()`` gives a ``dict[str, Tensor]`` for ``log_dict``.
* :class:`TopKMetrics`: recommender metrics of top-k item lists with sparse truth.
* Drop-in replacements for ``torchmetrics.retrieval`` (same arguments, same
  ``update(preds, target, indexes)``): :class:`RetrievalMAP`, :class:`RetrievalMRR`,
  :class:`RetrievalNormalizedDCG`, :class:`RetrievalPrecision`, :class:`RetrievalRecall`,
  :class:`RetrievalHitRate`, :class:`RetrievalFallOut`, :class:`RetrievalRPrecision`,
  :class:`RetrievalAUROC`, :class:`RetrievalPrecisionRecallCurve`,
  :class:`RetrievalRecallAtFixedPrecision`. Differences on purpose: docs/lightning.md.

The classes are torchmetrics hooks over the core's framework-neutral accumulator
(``retrieval_core.evaluation.accumulator``): its state entries are torchmetrics
states, gathered under DDP by the core's ``gather_per_rank`` (uneven sizes and
ranks without data are fine).
"""
from .metrics import EmbeddingMetrics, RankingMetrics
from .topk import TopKMetrics
from .retrieval import (
    RetrievalAUROC,
    RetrievalFallOut,
    RetrievalHitRate,
    RetrievalMAP,
    RetrievalMRR,
    RetrievalNormalizedDCG,
    RetrievalPrecision,
    RetrievalPrecisionRecallCurve,
    RetrievalRecall,
    RetrievalRecallAtFixedPrecision,
    RetrievalRPrecision,
)

__all__ = [
    "EmbeddingMetrics",
    "RankingMetrics",
    "RetrievalAUROC",
    "RetrievalFallOut",
    "RetrievalHitRate",
    "RetrievalMAP",
    "RetrievalMRR",
    "RetrievalNormalizedDCG",
    "RetrievalPrecision",
    "RetrievalPrecisionRecallCurve",
    "RetrievalRPrecision",
    "RetrievalRecall",
    "RetrievalRecallAtFixedPrecision",
    "TopKMetrics",
]
