"""State handling shared by the torchmetrics adapters: states, their synchronisation,
and the compute-side steps of the core run with ``gather=False`` on the gathered states.

Synchronisation. torchmetrics gathers states itself before ``compute`` (through
``dist_sync_fn``, by default ``gather_all_tensors``). That default breaks on a rank
that saw no batch: torchmetrics puts a 1-D float placeholder in its list states,
which then meets 2-D or integer states of the other ranks in one ``all_gather``
(an error or a hang). So :meth:`CoreStateMetric._sync_dist` gathers with the core's
``gather_cat`` (sizes, dtypes and shapes exchanged first; uneven and empty ranks
fine) and sums with ``all_reduce_sum``, whenever the default ``dist_sync_fn`` is in
use. A user-supplied ``dist_sync_fn`` gets torchmetrics' own treatment, unchanged.

Compute. After the sync the states already hold every rank's rows, and a compute
that is not synced (``sync_on_compute=False``, the batch value of ``forward``) must
stay local; so the metrics call the core's ``finalize_*`` steps with ``gather=False``.
"""
from __future__ import annotations

from typing import Optional

import torch
from torch import Tensor
from torchmetrics import Metric
from torchmetrics.utilities.data import dim_zero_cat, dim_zero_sum
from torchmetrics.utilities.distributed import gather_all_tensors

from retrieval_core.aggregate import MetricResults
from retrieval_core.distributed import all_reduce_sum, gather_cat

__all__ = ["CoreStateMetric", "finalize_scores_local", "finalize_compact_local", "finalize_embeddings_local"]


class CoreStateMetric(Metric):
    """A ``torchmetrics.Metric`` whose "cat" and "sum" states sync through the core's
    gather routine (uneven sizes, ranks without data, 2-D states: no hang)."""

    is_differentiable = False
    full_state_update = False

    def _sync_dist(self, dist_sync_fn=gather_all_tensors, process_group=None) -> None:
        if dist_sync_fn is not None and dist_sync_fn is not gather_all_tensors:
            super()._sync_dist(dist_sync_fn, process_group=process_group)
            return
        group = process_group or self.process_group
        # every rank walks the states in the same (registration) order
        for attr, reduction in self._reductions.items():
            value = getattr(self, attr)
            if reduction is dim_zero_cat:
                setattr(self, attr, gather_cat(self._cat_or_empty(value), group))
            elif reduction is dim_zero_sum:
                setattr(self, attr, all_reduce_sum(value, group))
            else:  # pragma: no cover - every state here is registered as "cat" or "sum"
                raise TypeError(f"state {attr!r} has a reduction this adapter cannot sync: {reduction}")

    def _wrap_compute(self, compute):
        """torchmetrics rebuilds the returned dict (squeeze, clone), which drops the
        ``n_queries``/``n_empty`` bookkeeping of ``MetricResults``: put it back."""
        wrapped = super()._wrap_compute(compute)

        def with_counts(*args, **kwargs):
            self._last_counts = None
            value = wrapped(*args, **kwargs)
            counts = self._last_counts
            if counts is not None and isinstance(value, dict):
                if not isinstance(value, MetricResults):
                    value = MetricResults(value)
                value.n_queries, value.n_empty = counts
                if self._computed is not None:
                    self._computed = value
            return value

        return with_counts

    def _counted(self, results):
        """Remember the bookkeeping of ``results`` for :meth:`_wrap_compute`."""
        if isinstance(results, MetricResults):
            self._last_counts = (results.n_queries, dict(results.n_empty))
        return results

    def _cat_or_empty(self, value) -> Tensor:
        """A "cat" state as one tensor; no rows (a rank without data): an empty tensor."""
        if isinstance(value, Tensor):
            return value
        if not value:
            return torch.empty(0, device=self.device)
        return torch.cat(value) if len(value) > 1 else value[0]

    def _state(self, name: str) -> Optional[Tensor]:
        """A "cat" state as one tensor, or None when it holds no rows."""
        value = self._cat_or_empty(getattr(self, name))
        return value if value.numel() or value.ndim > 1 else None
