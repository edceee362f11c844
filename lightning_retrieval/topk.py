"""``TopKMetrics``: recommender metrics of top-k lists with sparse truth as a torchmetrics metric."""
from __future__ import annotations

from typing import Any, Dict, Optional, Sequence

import torch
from torch import Tensor

from retrieval_core import N_RESAMPLES
from retrieval_core.evaluation.accumulator import TopkAccumulator

from ._base import CoreStateMetric

__all__ = ["TopKMetrics"]


class TopKMetrics(CoreStateMetric):
    """Recommender metrics of top-k item lists, as a ``torchmetrics.Metric``.

    Args:
        metrics: accuracy keys (``"ndcg@10"``, ``"recall@10"``, ``"map_capped@10"``...)
            and beyond-accuracy keys (``"coverage@10"``, ``"novelty@10"``...).
        n_items, item_popularity, item_categories, item_embeddings, tail_ratio, empty,
            reduce, ci, ci_method, n_resamples, seed, keep_per_query: as
            ``retrieval_core.evaluate_topk`` (a sparse ``truth``/``history`` needs ``n_items``).
        kwargs: torchmetrics' ``Metric`` arguments.

    ``update(topk, truth, *, user_ids=None, history=None, categories=None)`` stores a
    batch: ``topk[B, k]`` item ids in rank order (``-1`` pads a short list),
    ``truth`` as ``[2, E]`` (row, item) pairs whose rows are rows of this batch's
    ``topk`` or a sparse ``[B, n_items]`` tensor of gains, ``user_ids[B]`` (int) the
    users' ids (a user seen twice with the same rows, e.g. DistributedSampler padding,
    counts once; one repeated with different rows is a ``ValueError``), ``history``
    (each user's training items, as ``truth``: for ``serendipity@k``) and
    ``categories[B]`` (int). States are "cat" lists of the rows and of their entries.

    ``compute()`` evaluates once over every user seen (every rank when synced) with
    ``retrieval_core.evaluate_topk`` and returns a ``dict[str, Tensor]`` for
    ``log_dict``; the set-level keys (``coverage@k``, ``gini@k``, ``entropy@k``,
    ``personalization@k``) are computed once over all users, the same as one
    process's. With no data it gives NaN for each key.

    ``forward(...)`` only accumulates (as ``update``) and returns an empty dict: the
    set-level keys of one batch are not those of the epoch. Call ``compute()`` at epoch end.

    Example:
        >>> import torch
        >>> from lightning_retrieval import TopKMetrics
        >>> m = TopKMetrics(["recall@2", "coverage@2"], n_items=4)
        >>> m.update(torch.tensor([[2, 0]]), torch.tensor([[0, 0], [0, 3]]), user_ids=torch.tensor([7]))
        >>> m.update(torch.tensor([[1, 3]]), torch.tensor([[0], [1]]), user_ids=torch.tensor([9]))
        >>> {k: v.item() for k, v in m.compute().items()}
        {'recall@2': 0.75, 'coverage@2': 1.0}
    """

    higher_is_better: Optional[bool] = None

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
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.accumulator = TopkAccumulator(
            metrics, n_items=n_items, item_popularity=item_popularity, item_categories=item_categories,
            item_embeddings=item_embeddings, tail_ratio=tail_ratio, empty=empty, reduce=reduce, ci=ci,
            ci_method=ci_method, n_resamples=n_resamples, seed=seed, keep_per_query=keep_per_query,
            name=type(self).__name__)
        self.keys, self.options = self.accumulator.keys, self.accumulator.options
        self._add_states(self.accumulator)

    def _agreed_options(self) -> Dict[str, Any]:
        return dict(super()._agreed_options(), **self.accumulator.agreed_options())

    def update(self, topk: Tensor, truth: Tensor, *, user_ids: Optional[Tensor] = None,
               history: Optional[Tensor] = None, categories: Optional[Tensor] = None) -> None:
        """Store one batch (detached). Shapes and dtypes are checked here, values in ``compute``."""
        self.accumulator.update(self._states(), topk, truth, user_ids=user_ids, history=history,
                                categories=categories, device=self.device)

    def forward(self, *args: Any, **kwargs: Any) -> dict:
        """Accumulate the batch (as ``update``); returns an empty dict (see the class docs)."""
        self.update(*args, **kwargs)
        return {}

    def compute(self):
        """``{key: value}`` over every user seen (on every rank, when synced)."""
        if self.accumulator.rows(self._states()) == 0:
            return {k: torch.tensor(float("nan"), dtype=torch.float64, device=self.device) for k in self.keys}
        return self._counted(self.accumulator.compute(self._states(), processes=self.synced_processes,
                                                      group=getattr(self, "synced_group", None)))
