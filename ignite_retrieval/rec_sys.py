"""Drop-in replacements for ``ignite.metrics.rec_sys``: ``HitRate``, ``NDCG`` (as in
pytorch-ignite 0.5.5) and ``MRR`` (ignite has no released MRR: ours follows the
API proposed in pytorch/ignite issue #3569 and pull requests #3572/#3573, with
HitRate's arguments), computed by retrieval_core.

Same constructor signatures, same ``(y_pred, y)`` input and the same output: a list
of values ordered by the sorted ``top_k``. On top of ignite's, ``update`` also takes
a mapping with an optional ``"ids"`` key (query ids; repeated ids, as
DistributedSampler pads, count once), and multi-process runs gather per-query
values (``retrieval_core.distributed``) instead of summing.

Mapping onto the core (input preparation only; the metrics are the core's):

* ``HitRate(top_k)`` = ``hit_rate@k``, ``MRR(top_k)`` = ``mrr@k``, with ``y > 0``
  relevant (as ignite).
* ``NDCG(gain_function="exp_rank")`` = ``ndcg_exp@k``, ``"linear_rank"`` = ``ndcg@k``;
  gains below ``relevance_threshold`` are zeroed first, as ignite does.
* ``ignore_zero_hits=True`` = ``empty="skip"``, ``False`` = ``empty="zero"``
  (for NDCG with ``relevance_threshold <= 0`` ignite keeps every query with a gain
  >= threshold, i.e. every query: ``empty="zero"``).

Validation follows ignite's, with its messages (``top_k``, ``gain_function``, the
output's length, shapes that differ, ``NotComputableError`` when no query counts).
Differences on purpose (each listed and tested, docs/ignite.md):

* Ties: ours rank equal scores by lower column, always. ignite's NDCG does the same
  (stable argsort), so values are equal; ignite's HitRate takes ``torch.topk``,
  whose order among equal scores is unspecified. No ignite rec_sys metric averages
  over ties.
* ``HitRate``/``MRR`` with a ``k`` larger than the number of items raise
  ``ValueError`` (ignite's ``torch.topk`` raises ``RuntimeError``); ``NDCG`` cuts
  at the list's end, as ignite. Bools and floats in ``top_k`` are refused.
* Scores with NaN/inf, or negative gains (left by ``relevance_threshold <= 0``),
  raise ``ValueError`` at ``compute``; ignite returns numbers for them.
* Accumulation is float64 (ignite: float32), so values agree to ~1e-6.
"""
from __future__ import annotations

from functools import lru_cache
from typing import Any, Callable, Dict, List, Tuple, Union

import torch
from torch import Tensor

from retrieval_core import MetricResults

from ._base import Device, NotComputableError, _identity
from .ranking import RankingMetrics

__all__ = ["HitRate", "NDCG", "MRR"]


@lru_cache(maxsize=32)
def _float_below(threshold: float, dtype: torch.dtype):
    """The largest ``dtype`` value below ``threshold`` rounded to ``dtype`` (None if
    that is not finite)."""
    t = torch.tensor(float(threshold), dtype=dtype)
    below = torch.nextafter(t, torch.tensor(float("-inf"), dtype=dtype))
    return below.item() if bool(torch.isfinite(below)) else None


def _check_top_k(top_k: Union[int, List[int]], ndcg: bool = False) -> List[int]:
    """ignite's validation of ``top_k``, with its messages (NDCG's differ)."""
    given = top_k
    if ndcg and isinstance(top_k, tuple):  # ignite's NDCG takes any sequence
        top_k = list(top_k)
    if not isinstance(top_k, (int, list)) or isinstance(top_k, bool):
        raise ValueError("top_k must be either int or a list[int]")
    top_k = [top_k] if isinstance(top_k, int) else list(top_k)
    if len(top_k) == 0:
        raise ValueError("top_k must have at least one positive value")
    if any(isinstance(k, bool) or not isinstance(k, int) or k <= 0 for k in top_k):
        if ndcg:
            raise ValueError(f"top_k must be list of positive integers only, but given {given}")
        raise ValueError("top_k must be list of positive integers only.")
    return sorted(top_k)


class _RecSysMetric(RankingMetrics):
    """A list-valued ignite rec_sys metric on top of :class:`RankingMetrics`."""

    _optional = ("ids",)
    _per_batch = ()
    _takes_numpy = False  # as ignite's HitRate, MRR and NDCG

    def _init(self, top_k: List[int], ignore_zero_hits: bool, empty: str, core_name: str,
              output_transform: Callable, device: Device, skip_unrolling: bool) -> None:
        self.top_k = top_k
        self.ignore_zero_hits = ignore_zero_hits
        self._key_of = {k: f"{core_name}@{k}" for k in top_k}
        keys = [self._key_of[k] for k in sorted(set(top_k))]
        RankingMetrics.__init__(self, keys, empty=empty, output_transform=output_transform,
                                device=device, skip_unrolling=skip_unrolling)

    def _agreed_options(self) -> Dict[str, Any]:  # ignite's arguments (the core's keys and empty follow)
        return {"metric": type(self).__qualname__, "top_k": self.top_k, "ignore_zero_hits": self.ignore_zero_hits,
                **{k: getattr(self, k) for k in ("relevance_threshold", "gain_function") if hasattr(self, k)}}

    def _check_output_len(self, output: Any) -> None:
        if isinstance(output, (tuple, list)) and len(output) != 2:
            raise ValueError(f"output should be in format `(y_pred,y)` but got tuple of {len(output)} tensors.")

    def update(self, output: Any) -> None:
        self._check_output_len(output)
        fields = self._fields(output)
        y_pred, y = fields["y_pred"], fields["y"]
        if isinstance(y_pred, Tensor) and isinstance(y, Tensor) and y_pred.shape != y.shape:
            raise ValueError(f"y_pred and y must be in the same shape, got {y_pred.shape} != {y.shape}.")
        super().update(output)

    def compute(self) -> List[float]:
        try:
            results: MetricResults = self._results()
        except NotComputableError:  # nothing updated on any rank: ignite's words
            raise NotComputableError(f"{self._name()} must have at least one example.") from None
        self.last_results = results
        counted = int(results.n_queries) - (int(results.n_empty[self._key_of[self.top_k[0]]]) if self._empty == "skip" else 0)
        if counted == 0:
            raise NotComputableError(f"{self._name()} must have at least one example.")
        return torch.stack([results[self._key_of[k]].to(torch.float64) for k in self.top_k]).tolist()


class _BinaryTopK(_RecSysMetric):
    """HitRate and MRR: ``y > 0`` is relevant; k may not exceed the number of items."""

    def _prepare(self, y_pred: Tensor, y: Tensor) -> Tuple[Tensor, Tensor]:
        if self.top_k[-1] > y_pred.shape[1]:  # raised through _named_errors: the metric's name in front
            raise ValueError(f"top_k {self.top_k[-1]} is larger than the number of items {y_pred.shape[1]}")
        return y_pred, y > 0


class HitRate(_BinaryTopK):
    """Hit rate at each k: the fraction of users with a relevant item in their top k.

    Drop-in for ``ignite.metrics.rec_sys.HitRate`` (pytorch-ignite 0.5.5): same
    arguments, ``(y_pred, y)`` input with ``y > 0`` relevant, and a list of values
    ordered by the sorted ``top_k``. Computed as ``retrieval_core``'s ``hit_rate@k``;
    ``ignore_zero_hits`` chooses ``empty="skip"`` (True) or ``"zero"``. See the
    module docstring for the differences (ties, errors).

    Example:
        >>> import torch
        >>> from ignite.engine import Engine
        >>> from ignite_retrieval import HitRate
        >>> evaluator = Engine(lambda engine, batch: batch)
        >>> HitRate(top_k=[1, 2, 3, 4]).attach(evaluator, "hit_rate")
        >>> y_pred = torch.tensor([[4.0, 2.0, 3.0, 1.0], [1.0, 2.0, 3.0, 4.0]])
        >>> y_true = torch.tensor([[0.0, 0.0, 1.0, 1.0], [0.0, 0.0, 0.0, 0.0]])
        >>> evaluator.run([(y_pred, y_true)]).metrics["hit_rate"]
        [0.0, 1.0, 1.0, 1.0]
    """

    def __init__(
        self,
        top_k: Union[List[int], int] = 1,
        ignore_zero_hits: bool = True,
        output_transform: Callable = _identity,
        device: Device = torch.device("cpu"),
        skip_unrolling: bool = False,
    ) -> None:
        self._init(_check_top_k(top_k), ignore_zero_hits, "skip" if ignore_zero_hits else "zero",
                   "hit_rate", output_transform, device, skip_unrolling)


class MRR(_BinaryTopK):
    """Mean reciprocal rank at each k: 1 / rank of the first relevant item within
    the top k (0 when none).

    ignite has no released MRR (pytorch-ignite 0.5.5); this follows the MRR proposed
    for ``ignite.metrics.rec_sys`` (pytorch/ignite #3569, #3572, #3573): HitRate's
    arguments, ``(y_pred, y)`` input with ``y > 0`` relevant, a list of
    values ordered by the sorted ``top_k``. Computed as ``retrieval_core``'s
    ``mrr@k``; ``ignore_zero_hits`` chooses ``empty="skip"`` (True) or ``"zero"``.

    Example:
        >>> import torch
        >>> from ignite.engine import Engine
        >>> from ignite_retrieval import MRR
        >>> evaluator = Engine(lambda engine, batch: batch)
        >>> MRR(top_k=[1, 2, 3, 4]).attach(evaluator, "mrr")
        >>> y_pred = torch.tensor([[4.0, 2.0, 3.0, 1.0], [1.0, 2.0, 3.0, 4.0]])
        >>> y_true = torch.tensor([[0.0, 0.0, 1.0, 1.0], [0.0, 0.0, 0.0, 1.0]])
        >>> evaluator.run([(y_pred, y_true)]).metrics["mrr"]
        [0.5, 0.75, 0.75, 0.75]
    """

    def __init__(
        self,
        top_k: Union[List[int], int] = 10,
        ignore_zero_hits: bool = True,
        output_transform: Callable = _identity,
        device: Device = torch.device("cpu"),
        skip_unrolling: bool = False,
    ) -> None:
        self._init(_check_top_k(top_k), ignore_zero_hits, "skip" if ignore_zero_hits else "zero",
                   "mrr", output_transform, device, skip_unrolling)


class NDCG(_RecSysMetric):
    """Normalised discounted cumulative gain at each k.

    Drop-in for ``ignite.metrics.rec_sys.NDCG`` (pytorch-ignite 0.5.5): same
    arguments and output (a list ordered by the sorted ``top_k``). Gains below
    ``relevance_threshold`` are zeroed, as ignite does; then ``gain_function``
    ``"exp_rank"`` (2^rel - 1) is the core's ``ndcg_exp@k`` and ``"linear_rank"``
    is ``ndcg@k``. Ties are ranked by lower column, as ignite's stable argsort.

    Example:
        >>> import torch
        >>> from ignite.engine import Engine
        >>> from ignite_retrieval import NDCG
        >>> evaluator = Engine(lambda engine, batch: batch)
        >>> NDCG(top_k=[1, 2, 3, 4]).attach(evaluator, "ndcg")
        >>> y_pred = torch.tensor([[4.0, 2.0, 3.0, 1.0], [1.0, 2.0, 3.0, 4.0]])
        >>> y_true = torch.tensor([[0.0, 0.0, 1.0, 1.0], [0.0, 0.0, 0.0, 0.0]])
        >>> [round(v, 4) for v in evaluator.run([(y_pred, y_true)]).metrics["ndcg"]]
        [0.0, 0.3869, 0.3869, 0.6509]
    """

    def __init__(
        self,
        top_k: Union[List[int], int],
        ignore_zero_hits: bool = True,
        relevance_threshold: float = 1.0,
        gain_function: str = "exp_rank",
        output_transform: Callable = _identity,
        device: Device = torch.device("cpu"),
        skip_unrolling: bool = False,
    ) -> None:
        top_k = _check_top_k(top_k, ndcg=True)
        if gain_function not in ["exp_rank", "linear_rank"]:
            raise ValueError(f"gain_function must be either 'exp_rank' or 'linear_rank', but given {gain_function}")
        self.relevance_threshold = relevance_threshold
        self.gain_function = gain_function
        skip = ignore_zero_hits and relevance_threshold > 0
        name = "ndcg_exp" if gain_function == "exp_rank" else "ndcg"
        self._init(top_k, ignore_zero_hits, "skip" if skip else "zero", name,
                   output_transform, device, skip_unrolling)

    def _prepare(self, y_pred: Tensor, y: Tensor) -> Tuple[Tensor, Tensor]:
        """ignite's ``where(y >= relevance_threshold, y, 0)``."""
        if y.dtype == torch.bool:
            y = y.to(torch.float32)
        if y.dtype in (torch.float32, torch.float64):
            # the same in one pass without temporaries (~10x faster on CPU):
            # threshold(x, t, 0) zeroes x <= t; x >= thr <=> x > the float just below thr
            # (thr rounded to y's dtype, as ignite's comparison does). NaN gains stay
            # NaN (ignite zeroes them) and are reported at compute.
            below = _float_below(self.relevance_threshold, y.dtype)
            if below is not None:
                return y_pred, torch.nn.functional.threshold(y, below, 0.0)
        return y_pred, torch.where(y >= self.relevance_threshold, y, torch.zeros((), dtype=y.dtype, device=y.device))
