"""``EmbeddingMetrics``: retrieval metrics of embeddings and labels as one ignite Metric."""
from __future__ import annotations

from typing import Any, Callable, Dict, Optional, Sequence, Tuple

import torch

from retrieval_core import MetricResults
from retrieval_core.evaluation.accumulator import EmbeddingAccumulator

from ._base import Device, RetrievalMetric, _identity, to_python
from retrieval_core import N_RESAMPLES

__all__ = ["EmbeddingMetrics"]


class EmbeddingMetrics(RetrievalMetric):
    """Retrieval metrics of embeddings (exact k-NN), accumulated over an ignite run.

    ``update`` (and so an ``Engine``'s output) takes ``(embeddings, labels)`` or a
    mapping with keys ``"embeddings"`` (``[B, D]``), ``"labels"`` (``[B]`` integer
    classes or ``[B, C]`` multi-hot) and optionally ``"ids"`` (``[B]`` dataset
    indices: an item seen twice with the same row, as DistributedSampler pads,
    counts once; an id repeated with a different row is a ``ValueError``),
    ``"is_query"`` / ``"is_gallery"`` (``[B]`` bool), ``"categories"``
    (``[B]`` integer labels: adds ``"{key}/{label}"`` results) and ``"confidence"``
    (``[B]`` finite floats, higher = more confident; the queries' are used: needed
    by the confidence keys ``"erc:<key>"``, ``"conf:<key>"``, ``"spearman:<key>"``,
    ``"kendall:<key>"``; curves in ``last_results.curves``). Any batch may also hold
    ``"exclude"``: gallery items removed from the rankings of this batch's queries (a
    recommender's seen items; neither relevant nor irrelevant, they take no rank), as
    ``[2, E]`` (row of this batch, item id) integer pairs or a sparse ``[B, n]`` tensor
    whose columns are item ids: items are named by their ``"ids"`` (needed), so the pairs
    follow their items across batches and processes; each must name a query and a
    gallery item (checked at ``compute``), and a pair given twice counts once.

    Without flags every item is both a query and a gallery item (PML's layout);
    with ``is_query``/``is_gallery`` (OML's layout) each side is the flagged items.
    An item is never matched with itself, nor with another item of the same id.

    The state is the embeddings and their metadata (on ``device``); ``compute``
    gathers it from every process, drops repeated ids and evaluates with
    ``retrieval_core.evaluate_embeddings`` (chunked, never a ``[Q, G]`` matrix);
    with several processes each evaluates a share of the queries and the
    per-query values are gathered (the same result on every process).

    Args:
        metrics: per-query keys (``"cmc@1"``, ``"map@r"``, ``"precision_capped@5"``...)
            and set-level keys (``"nmi"``, ``"pcf@0.5"``, ``"fnmr@0.1"``...).
        distance, relevance, ties, empty, reduce, per_class, memory_budget, progress:
            as ``retrieval_core.evaluate_embeddings``.
        ci, ci_method, n_resamples, seed: intervals of the results (in
            ``last_results.ci``), as ``retrieval_core.evaluate_embeddings``.
        keep_per_query: (default True) ``last_results.per_query`` holds the
            per-query values (ids: the items' ``"ids"`` when given, else their
            positions in the data seen), for ``last_results.worst(key, n)``.
        output_transform, device, skip_unrolling: as every ignite ``Metric``;
            ``device`` is where embeddings are kept and evaluated.

    ``compute`` returns ``{key: float}``; attached to an engine, ignite also
    writes each key into ``engine.state.metrics``. ``last_results`` holds the
    core's ``MetricResults`` of the last ``compute``.

    Example:
        >>> import torch
        >>> from ignite.engine import Engine
        >>> from ignite_retrieval import EmbeddingMetrics
        >>> x = torch.tensor([[1.0, 0.0], [0.9, 0.1], [0.0, 1.0], [0.1, 0.9]])
        >>> labels = torch.tensor([0, 0, 1, 1])
        >>> evaluator = Engine(lambda engine, batch: {"embeddings": batch[0], "labels": batch[1]})
        >>> EmbeddingMetrics(["cmc@1", "map@r"]).attach(evaluator, "retrieval")
        >>> metrics = evaluator.run([(x[:3], labels[:3]), (x[3:], labels[3:])]).metrics
        >>> metrics["cmc@1"], metrics["map@r"]
        (1.0, 1.0)

        Seen items excluded: item 10 (row 0) has seen items 11 and 13, so item 12, of its
        label, comes first.

        >>> metric = EmbeddingMetrics(["cmc@1"], reduce="none")
        >>> metric.update({"embeddings": x, "labels": torch.tensor([0, 1, 0, 1]), "ids": torch.tensor([10, 11, 12, 13]),
        ...                "exclude": torch.tensor([[0, 0], [11, 13]])})
        >>> metric.compute()
        {'cmc@1': [1.0, 0.0, 0.0, 0.0]}
    """

    _required = ("embeddings", "labels")
    _optional = ("ids", "is_query", "is_gallery", "categories", "confidence")
    _per_batch = ("exclude",)
    required_output_keys = _required

    def __init__(
        self,
        metrics: Sequence[str],
        *,
        distance="cosine",
        relevance: Optional[Callable] = None,
        ties: str = "stable",
        empty: str = "skip",
        reduce: str = "mean",
        per_class: Optional[str] = None,
        memory_budget: Optional[int] = None,
        progress: bool = False,
        ci: Optional[float] = None,
        ci_method: str = "bootstrap",
        n_resamples: int = N_RESAMPLES,
        seed: int = 0,
        keep_per_query: bool = True,
        output_transform: Callable = _identity,
        device: Device = torch.device("cpu"),
        skip_unrolling: bool = False,
    ) -> None:
        accumulator = EmbeddingAccumulator(
            metrics, distance=distance, relevance=relevance, ties=ties, empty=empty, reduce=reduce,
            per_class=per_class, memory_budget=memory_budget, progress=progress, ci=ci, ci_method=ci_method,
            n_resamples=n_resamples, seed=seed, keep_per_query=keep_per_query, name=type(self).__name__,
            device=device, strict_inputs=True,
            ids_hint='add each {unit}\'s dataset index to the output mapping as "ids".')
        self.metric_keys: Tuple[str, ...] = accumulator.keys
        self.last_results: Optional[MetricResults] = None
        super().__init__(accumulator, output_transform=output_transform, device=device, skip_unrolling=skip_unrolling)

    def _results(self) -> MetricResults:
        """Gather every rank's state; the ranks divide the evaluation (the same result on every rank)."""
        synced = self._sync()
        return self.accumulator.compute(synced.state, processes=synced.processes, split=True)

    def compute(self) -> Dict[str, Any]:
        results = self._results()
        self.last_results = results
        return to_python(results)
