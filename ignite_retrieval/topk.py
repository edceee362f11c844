"""``TopKMetrics``: recommender metrics of top-k lists with sparse truth as one ignite Metric."""
from __future__ import annotations

from typing import Any, Callable, Dict, Optional, Sequence, Tuple

import torch

from retrieval_core import N_RESAMPLES, MetricResults
from retrieval_core.evaluation.accumulator import TopkAccumulator

from ._base import Device, RetrievalMetric, _identity, to_python

__all__ = ["TopKMetrics"]


class TopKMetrics(RetrievalMetric):
    """Recommender metrics of top-k item lists, accumulated over an ignite run.

    ``update`` (and so an ``Engine``'s output) takes ``(topk, truth)`` or a mapping
    with keys ``"topk"`` (``[B, k]`` item ids in rank order, ``-1`` padding a short
    list), ``"truth"`` (``[2, E]`` (row, item) pairs whose rows are rows of this
    batch's ``topk``, or a sparse ``[B, n_items]`` tensor of gains) and optionally
    ``"user_ids"`` (``[B]`` the users' ids: a user seen twice with the same rows, as
    DistributedSampler pads, counts once; a user id repeated with different rows is a
    ``ValueError``), ``"history"`` (each user's training items, as ``truth``: for
    ``serendipity@k``) and ``"categories"`` (``[B]`` integer labels: adds
    ``"{key}/{label}"`` results).

    The state is the lists and the truth's entries (on ``device``); ``compute``
    gathers it from every process, drops repeated users and evaluates with
    ``retrieval_core.evaluate_topk``: the set-level keys (``coverage@k``, ``gini@k``,
    ``entropy@k``, ``personalization@k``) are computed once over every user, the same
    as one process's.

    Args:
        metrics: accuracy keys (``"ndcg@10"``, ``"recall@10"``, ``"map_capped@10"``...)
            and beyond-accuracy keys (``"coverage@10"``, ``"novelty@10"``...).
        n_items, item_popularity, item_categories, item_embeddings, tail_ratio, empty,
            reduce, ci, ci_method, n_resamples, seed, keep_per_query: as
            ``retrieval_core.evaluate_topk`` (a sparse ``truth``/``history`` needs ``n_items``).
        output_transform, device, skip_unrolling: as every ignite ``Metric``.

    ``compute`` returns ``{key: float}``; ``last_results`` holds the core's
    ``MetricResults`` of the last ``compute``.

    Example:
        >>> import torch
        >>> from ignite.engine import Engine
        >>> from ignite_retrieval import TopKMetrics
        >>> batches = [{"topk": torch.tensor([[2, 0]]), "truth": torch.tensor([[0, 0], [0, 3]]),
        ...             "user_ids": torch.tensor([7])},
        ...            {"topk": torch.tensor([[1, 3]]), "truth": torch.tensor([[0], [1]]),
        ...             "user_ids": torch.tensor([9])}]
        >>> evaluator = Engine(lambda engine, batch: batch)
        >>> TopKMetrics(["recall@2", "coverage@2"], n_items=4).attach(evaluator, "topk")
        >>> metrics = evaluator.run(batches).metrics
        >>> metrics["recall@2"], metrics["coverage@2"]
        (0.75, 1.0)
    """

    _required = ("topk", "truth")
    _optional = ("user_ids", "history", "categories")
    required_output_keys = _required

    def __init__(
        self,
        metrics: Sequence[str],
        *,
        n_items: Optional[int] = None,
        item_popularity=None,
        item_categories=None,
        item_embeddings=None,
        tail_ratio: float = 0.1,
        empty: str = "skip",
        reduce: str = "mean",
        ci: Optional[float] = None,
        ci_method: str = "bootstrap",
        n_resamples: int = N_RESAMPLES,
        seed: int = 0,
        keep_per_query: bool = True,
        output_transform: Callable = _identity,
        device: Device = torch.device("cpu"),
        skip_unrolling: bool = False,
    ) -> None:
        accumulator = TopkAccumulator(
            metrics, n_items=n_items, item_popularity=item_popularity, item_categories=item_categories,
            item_embeddings=item_embeddings, tail_ratio=tail_ratio, empty=empty, reduce=reduce, ci=ci,
            ci_method=ci_method, n_resamples=n_resamples, seed=seed, keep_per_query=keep_per_query,
            name=type(self).__name__, device=device, strict_inputs=True,
            ids_hint='add each {unit}\'s id to the output mapping as "user_ids".')
        self.metric_keys: Tuple[str, ...] = accumulator.keys
        self.last_results: Optional[MetricResults] = None
        super().__init__(accumulator, output_transform=output_transform, device=device, skip_unrolling=skip_unrolling)

    def compute(self) -> Dict[str, Any]:
        synced = self._sync()
        with self._named_errors():
            results = self.accumulator.compute(synced.state, processes=synced.processes)
        self.last_results = results
        return to_python(results)
