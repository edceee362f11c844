"""Hooks shared by the torchmetrics adapters over the core's framework-neutral accumulator
(``retrieval_core.evaluation.accumulator``): its state entries are torchmetrics states,
torchmetrics syncs them, and the accumulator's update and compute run on them.

Synchronisation. torchmetrics gathers states itself before ``compute``, calling
``dist_sync_fn(state, group=...)`` for each state and then applying the state's
``dist_reduce_fx`` ("cat" or "sum" here) to the per-rank list it returns. Its
default function breaks on a rank that saw no batch: torchmetrics puts a 1-D
float placeholder in the list states, which then meets 2-D or integer states of
the other ranks in one ``all_gather`` (an error or a hang). So, unless the user
passes a ``dist_sync_fn`` (which is then used unchanged), these metrics pass the
core's :func:`~retrieval_core.distributed.gather_per_rank` through that public
argument: sizes, dtypes and shapes are exchanged first (uneven and empty ranks
fine, every dtype exact), and an empty rank's placeholder comes back as zero rows
of the other ranks' dtype and shape. Only torchmetrics' documented API is used
for this: the ``dist_sync_fn`` argument and ``add_state``'s reductions.

Compute groups. torchmetrics' ``MetricCollection`` lets metrics share states
when their states are equal after the first update, a test that derived states
(per-query values of one key) can pass for metrics computing different keys. Each
metric therefore also holds ``config_digest``: a fingerprint (16 bytes of SHA-256) of its
class and options, a state that never changes ("max" over ranks: the same on
every rank), so only metrics of one class with the same options share states.

Compute. After the sync the states already hold every rank's rows, and a compute
that is not synced (``sync_on_compute=False``, the batch value of ``forward``) must
stay local; so the metrics call the accumulator's ``compute`` on their states as they
are (its own ``sync``, for frameworks that do not sync states, is not used here).
"""
from __future__ import annotations

import functools
from typing import Any, Dict, Optional

import torch
from torch import Tensor
from torchmetrics import Metric

from retrieval_core import MetricResults
from retrieval_core.evaluation.accumulator import AttributeState, agree, gather_per_rank, options_digest

__all__ = ["CoreStateMetric"]


def config_fingerprint(metric: Metric) -> Tensor:
    """``[16]`` int64 (byte values): a digest of ``metric``'s class and options (the
    ``_agreed_options()`` that ranks also compare: one list of what changes a result).
    Bytes, so torchmetrics' ``allclose`` between two fingerprints is equality."""
    return options_digest(type(metric), metric._agreed_options())


def _adding_digest(init):
    """``init`` that adds the ``config_digest`` state once the outermost ``__init__`` of
    the chain has run (subclasses set their options after ``CoreStateMetric.__init__``).
    A wrapper, not a metaclass: the class keeps its signature and mixes with others."""

    @functools.wraps(init)
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        depth = self.__dict__.get("_init_depth", 0)
        self.__dict__["_init_depth"] = depth + 1
        try:
            init(self, *args, **kwargs)
        finally:
            self.__dict__["_init_depth"] = depth
        if depth == 0:
            self.add_state("config_digest", default=config_fingerprint(self).to(self.device), dist_reduce_fx="max")

    return __init__


class CoreStateMetric(Metric):
    """A ``torchmetrics.Metric`` whose "cat" and "sum" states sync through the core's
    gather routine by default (uneven sizes, ranks without data, 2-D states, any
    dtype: no hang). A ``dist_sync_fn`` given by the user replaces it. The
    ``config_digest`` state (see the module docstring) keeps a ``MetricCollection`` from
    merging it with a metric of other options or another class."""

    is_differentiable = False
    full_state_update = False
    synced_processes = 1  # how many processes' states the last sync gathered (1: none synced)

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "__init__" in cls.__dict__:
            cls.__init__ = _adding_digest(cls.__dict__["__init__"])

    def __init__(self, **kwargs: Any) -> None:
        if kwargs.get("dist_sync_fn") is None:
            kwargs["dist_sync_fn"] = gather_per_rank
        super().__init__(**kwargs)

    def sync(self, dist_sync_fn=None, process_group=None, should_sync: bool = True,
             distributed_available=None) -> None:
        """torchmetrics' ``sync``; without a ``dist_sync_fn`` it uses the metric's own
        (the core's gather, or the one given at construction), as ``compute`` does.
        The ranks' options are compared first (:meth:`_agreed_options`, one
        exchange): a difference is the same ``ValueError`` on every rank.
        The group synced over is remembered (``synced_group``) for a compute that
        divides its work between the ranks that now hold the same state."""
        self.synced_group = process_group if process_group is not None else self.process_group
        if distributed_available is None:
            distributed_available = self.distributed_available_fn
        syncing = bool(should_sync and callable(distributed_available) and distributed_available())
        # before the states move (their number and shapes follow the options): the ranks' options compared
        self.synced_processes = agree(self._agreed_options(), what=type(self).__name__, group=self.synced_group,
                                      device=self.device) if syncing else 1
        super().sync(dist_sync_fn=dist_sync_fn if dist_sync_fn is not None else self.dist_sync_fn,
                     process_group=process_group, should_sync=should_sync,
                     distributed_available=distributed_available)

    def _agreed_options(self) -> Dict[str, Any]:
        """The constructor's options that change the result, which every rank must
        give alike, compared before each sync (subclasses add theirs; torchmetrics'
        own arguments, ``kwargs``, are not compared)."""
        return {"metric": type(self).__qualname__}

    def _wrap_compute(self, compute):
        """torchmetrics rebuilds the returned dict (squeeze, clone), which drops the
        bookkeeping of ``MetricResults`` (counts, intervals, per-query values, curves,
        neighbours): put it back."""
        wrapped = super()._wrap_compute(compute)

        def with_counts(*args, **kwargs):
            self._last_results = None
            value = wrapped(*args, **kwargs)
            if self._last_results is not None and isinstance(value, dict):
                value = self._last_results.with_values(value)
                if self._computed is not None:
                    self._computed = value
            return value

        return with_counts

    def _counted(self, results):
        """Remember the bookkeeping of ``results`` for :meth:`_wrap_compute`."""
        if isinstance(results, MetricResults):
            self._last_results = results
        return results

    def _add_states(self, accumulator) -> None:
        """Register the accumulator's state entries as torchmetrics states ("cat" lists and "sum" tensors)."""
        self._state_names = []
        for name, default, reduction in accumulator.state_spec():
            self.add_state(name, default=default, dist_reduce_fx=reduction)
            self._state_names.append(name)

    def _states(self) -> AttributeState:
        """The accumulator's state: this metric's own states, as a mapping."""
        return AttributeState(self, self._state_names)

    def _synced(self) -> Dict[str, Any]:
        """How many processes' rows the states hold (``processes``) and the group of the last sync."""
        return {"processes": self.synced_processes, "group": getattr(self, "synced_group", None)}

    def plot(self, val=None, ax=None):
        """Plot the metric's value(s) (torchmetrics' convention): ``(figure, axes)``.

        ``val``: a result of ``compute()``/``forward()`` or a sequence of them (one
        line per key over the steps); None: ``self.compute()``. ``ax``: draw into
        this matplotlib axes. A precision-recall curve result ``(precision, recall,
        top_k)`` is drawn as precision against recall; a ``(value, k)`` pair as its
        value. Needs matplotlib (``pip install matplotlib``); drawn on an Agg
        figure, never through pyplot.

        Example:
            >>> import torch
            >>> from lightning_retrieval import RankingMetrics
            >>> m = RankingMetrics(["mrr@3", "precision@1"])
            >>> m.update(torch.tensor([[0.9, 0.2, 0.5]]), torch.tensor([[1, 0, 0]]))
            >>> fig, ax = m.plot()
            >>> [t.get_text() for t in ax.get_xticklabels()], ax.get_title()
            (['mrr@3', 'precision@1'], 'RankingMetrics')
        """
        from retrieval_core.reporting.plot import plot_curve, plot_values

        val = self.compute() if val is None else val
        name = type(self).__name__
        if isinstance(val, tuple) and len(val) == 3 and all(isinstance(v, Tensor) for v in val):
            precision, recall, _ = val
            fig = plot_curve(recall, precision, xlabel="recall@k", ylabel="precision@k", ax=ax, title=name)
            return fig, fig.axes[0] if ax is None else ax
        if isinstance(val, tuple) and len(val) == 2 and all(isinstance(v, Tensor) for v in val):
            val = val[0]  # (value, k) of RetrievalRecallAtFixedPrecision
        return plot_values(val, ax=ax, name=name, lower_bound=getattr(self, "plot_lower_bound", None),
                           upper_bound=getattr(self, "plot_upper_bound", None),
                           higher_is_better=getattr(self, "higher_is_better", None))
