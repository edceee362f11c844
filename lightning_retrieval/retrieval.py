"""Drop-in replacements for ``torchmetrics.retrieval`` (same constructor arguments,
``update(preds, target, indexes)``, same values on continuous scores).

State: the flat entries ``indexes``, ``preds``, ``target`` ("cat" lists, as
torchmetrics). ``compute`` regroups them by query id (equal ids on different
ranks form one query, as in torchmetrics), runs ``retrieval_core.score_values``
for the key that matches the class, applies ``empty_target_action`` through the
core's aggregation (``"neg"``/``"pos"``/``"skip"``/``"error"`` are its
``"zero"``/``"one"``/``"skip"``/``"error"``) and reduces over queries with
torchmetrics' rules for ``aggregation`` (``"median"`` is torch's lower median,
and a callable sees one float32 value per query, in increasing id order).

Argument and input checks are torchmetrics', with its messages (integer scores are
refused, as there); binary targets, NaN/inf scores and negative gains are checked
once, in ``compute``. Where these differ from torchmetrics on purpose: see
docs/lightning.md, "Differences on purpose".

Example:
    >>> import torch
    >>> from lightning_retrieval import RetrievalMAP
    >>> metric = RetrievalMAP()
    >>> metric.update(torch.tensor([0.9, 0.2, 0.5, 0.1]), torch.tensor([1, 0, 0, 1]),
    ...               indexes=torch.tensor([0, 0, 1, 1]))
    >>> round(metric.compute().item(), 4)
    0.75
    >>> metric.update(torch.tensor([3, 1]), torch.tensor([1, 0]), indexes=torch.tensor([2, 2]))
    Traceback (most recent call last):
    ...
    ValueError: `preds` must be a tensor of floats
"""
from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional, Tuple, Union

import torch
from torch import Tensor

from retrieval_core import aggregate, score_values
from retrieval_core.evaluation.accumulator import FlatAccumulator, auroc_values, recall_at_fixed_precision

from ._base import CoreStateMetric
from ._checks import check_binary_target, check_indexed_not_empty, check_indexed_triplet

__all__ = [
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
]

_EMPTY_ACTIONS = {"neg": "zero", "pos": "one", "skip": "skip", "error": "error"}
_AGGREGATIONS = ("mean", "median", "min", "max")
Aggregation = Union[str, Callable]


def _check_top_k(top_k, name: str = "top_k", message: Optional[str] = None) -> Optional[int]:
    """A positive int or None, with torchmetrics' message (``message`` where a class
    words it differently). Unlike torchmetrics' RetrievalMAP/MRR, 0 and negative
    values are rejected (there 0 silently means "the whole list")."""
    if top_k is None:
        return None
    if isinstance(top_k, bool) or not isinstance(top_k, int) or top_k <= 0:
        raise ValueError(message or f"`{name}` has to be a positive integer or None")
    return top_k


def _aggregate_values(values: Tensor, aggregation: Aggregation, dim: Optional[int] = None) -> Tensor:
    """Reduce per-query values as torchmetrics' retrieval metrics document it: a
    callable gets ``(values, dim=dim)``; ``"median"`` is torch's lower median."""
    if callable(aggregation):
        return aggregation(values, dim=dim)
    reduce = getattr(values, aggregation)
    if dim is None:
        return reduce()
    out = reduce(dim=dim)
    return out if aggregation == "mean" else out.values


class _FlatRetrievalMetric(CoreStateMetric):
    """Flat ``(indexes, preds, target)`` states; ``compute`` evaluates ``self._keys``."""

    higher_is_better: Optional[bool] = True
    allow_non_binary_target = False  # torchmetrics: only nDCG takes graded targets
    _empty_message = "`compute` method was provided with a query with no positive target."
    _top_k_error: Optional[str] = None  # torchmetrics' wording where a class has its own
    plot_lower_bound: float = 0.0
    plot_upper_bound: float = 1.0

    def __init__(
        self,
        empty_target_action: str = "neg",
        ignore_index: Optional[int] = None,
        aggregation: Aggregation = "mean",
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        if empty_target_action not in _EMPTY_ACTIONS:
            raise ValueError(f"Argument `empty_target_action` received a wrong value `{empty_target_action}`.")
        if ignore_index is not None and not isinstance(ignore_index, int):
            raise ValueError("Argument `ignore_index` must be an integer or None.")
        if not (aggregation in _AGGREGATIONS or callable(aggregation)):
            raise ValueError(
                "Argument `aggregation` must be one of `mean`, `median`, `min`, `max` or a custom callable function"
                f"which takes tensor of values, but got {aggregation}."
            )
        self.empty_target_action = empty_target_action
        self.ignore_index = ignore_index
        self.aggregation = aggregation
        # indexes, preds, target and ids: "cat" lists
        self.accumulator = FlatAccumulator(name=type(self).__name__)
        self._add_states(self.accumulator)

    # the constructor's arguments (each class takes some of them): compared between ranks before a
    # sync, and the metric's identity for MetricCollection's compute groups
    _AGREED = ("empty_target_action", "ignore_index", "aggregation", "top_k", "adaptive_k", "max_fpr", "max_k",
               "min_precision")

    def _agreed_options(self) -> Dict[str, Any]:
        return dict(super()._agreed_options(), **{k: getattr(self, k) for k in self._AGREED if hasattr(self, k)})

    def update(self, preds: Tensor, target: Tensor, indexes: Tensor, ids: Optional[Tensor] = None) -> None:
        """Check shapes and dtypes (torchmetrics' checks and messages), flatten, drop
        ``ignore_index`` entries and store.

        ``ids`` (optional, ours; integers of the shape of ``indexes``): the dataset
        index of each entry. An entry whose id repeats with the same query, score
        and target (DistributedSampler padding) counts once; an id repeated with
        another entry is a ``ValueError`` at ``compute``.

        Values (binary targets, NaN/inf scores, negative gains) are checked once in
        ``compute``: no host sync per batch.
        """
        if indexes is None:
            raise ValueError("Argument `indexes` cannot be None")
        check_indexed_triplet(indexes, preds, target)
        self.accumulator.update(self._states(), indexes, preds, target, ids=ids, ignore_index=self.ignore_index,
                                not_empty=check_indexed_not_empty)

    # ------------------------------------------------------------------ compute

    def _flat(self) -> Optional[Tuple[Tensor, Tensor, Tensor]]:
        """The entries (every rank's, when synced), repeated ids dropped, values checked:
        binary targets (except nDCG), finite scores, gains >= 0, in one pass."""
        return self.accumulator.entries(self._states(), check_target=None if self.allow_non_binary_target
                                        else check_binary_target, **self._synced())

    def _keys(self, n_entries: int) -> List[str]:
        """The core keys this class evaluates (``n_entries`` bounds every query's size,
        so ``name@n_entries`` means the whole list)."""
        raise NotImplementedError

    def _query_values(self, indexes: Tensor, preds: Tensor, target: Tensor) -> Tensor:
        """``[Q, M]`` float64 per-query values (NaN = undefined), in increasing query id."""
        return score_values(preds, target, self._keys(preds.numel()), indexes=indexes, ties=self._ties()).values

    def _ties(self) -> str:
        """The core's tie mode: "stable", or "expected" where torchmetrics averages ties."""
        return "stable"

    def _filled(self, values: Tensor) -> Tensor:
        """Per-query values after ``empty_target_action``: rows of skipped queries removed."""
        if self.empty_target_action == "error" and bool(torch.isnan(values).any()):
            raise ValueError(self._empty_message)  # torchmetrics' words
        keys = [str(j) for j in range(values.shape[1])]
        filled = aggregate(values, keys, empty=_EMPTY_ACTIONS[self.empty_target_action], reduce="none")
        values = torch.stack([filled[k] for k in keys], dim=1)
        return values[~torch.isnan(values).any(1)]

    def _aggregate(self, values: Tensor, dim: Optional[int] = None) -> Tensor:
        """torchmetrics' aggregations; named ones in float64, the result float32."""
        if callable(self.aggregation):
            return _aggregate_values(values.float(), self.aggregation, dim=dim)
        return _aggregate_values(values, self.aggregation, dim=dim).float()

    def compute(self) -> Tensor:
        """The aggregated value over all queries (every rank's entries, when synced)."""
        flat = self._flat()
        if flat is None:
            return torch.tensor(0.0, device=self.device)
        indexes, preds, target = flat
        values = self._filled(self._query_values(indexes, preds, target))[:, 0]
        if values.numel() == 0:
            return torch.tensor(0.0, device=preds.device)
        return self._aggregate(values)


class _TopKMetric(_FlatRetrievalMetric):
    def __init__(
        self,
        empty_target_action: str = "neg",
        ignore_index: Optional[int] = None,
        top_k: Optional[int] = None,
        aggregation: Aggregation = "mean",
        **kwargs: Any,
    ) -> None:
        super().__init__(empty_target_action=empty_target_action, ignore_index=ignore_index,
                         aggregation=aggregation, **kwargs)
        message = None if self._top_k_error is None else self._top_k_error.format(top_k)
        self.top_k = _check_top_k(top_k, message=message)


# torchmetrics' RetrievalMAP and RetrievalMRR word the ``top_k`` error their own way
_MAP_MRR_TOP_K_ERROR = "Argument ``top_k`` has to be a positive integer or None, but got {}"


class RetrievalMAP(_TopKMetric):
    """Mean average precision; drop-in for ``torchmetrics.retrieval.RetrievalMAP``.

    ``top_k=None``: core key ``map`` (sum of P@i over relevant ranks / R);
    ``top_k=k``: ``map_hits@k`` (divided by the hits in the top k, as torchmetrics).
    """

    _top_k_error = _MAP_MRR_TOP_K_ERROR

    def _keys(self, n_entries: int) -> List[str]:
        return ["map" if self.top_k is None else f"map_hits@{self.top_k}"]


class RetrievalMRR(_TopKMetric):
    """Mean reciprocal rank; drop-in for ``torchmetrics.retrieval.RetrievalMRR`` (``mrr``, ``mrr@k``)."""

    _top_k_error = _MAP_MRR_TOP_K_ERROR

    def _keys(self, n_entries: int) -> List[str]:
        return ["mrr" if self.top_k is None else f"mrr@{self.top_k}"]


class RetrievalNormalizedDCG(_TopKMetric):
    """nDCG with linear gain; drop-in for ``torchmetrics.retrieval.RetrievalNormalizedDCG``
    (``ndcg``, ``ndcg@k``). Graded targets (>= 0) are the gains. Equal scores are
    averaged (``ties="expected"``), as torchmetrics does."""

    allow_non_binary_target = True

    def _keys(self, n_entries: int) -> List[str]:
        return ["ndcg" if self.top_k is None else f"ndcg@{self.top_k}"]

    def _ties(self) -> str:
        return "expected"


class RetrievalRecall(_TopKMetric):
    """Recall@k; drop-in for ``torchmetrics.retrieval.RetrievalRecall`` (``recall@k``)."""

    def _keys(self, n_entries: int) -> List[str]:
        return [f"recall@{self.top_k or n_entries}"]


class RetrievalHitRate(_TopKMetric):
    """Hit rate@k; drop-in for ``torchmetrics.retrieval.RetrievalHitRate`` (``hit_rate@k``)."""

    def _keys(self, n_entries: int) -> List[str]:
        return [f"hit_rate@{self.top_k or n_entries}"]


class RetrievalFallOut(_TopKMetric):
    """Fall-out@k; drop-in for ``torchmetrics.retrieval.RetrievalFallOut`` (``fall_out@k``).

    A query is empty when it has no non-relevant entry; the default action is ``"pos"``.
    """

    higher_is_better = False
    _empty_message = "`compute` method was provided with a query with no negative target."

    def __init__(
        self,
        empty_target_action: str = "pos",
        ignore_index: Optional[int] = None,
        top_k: Optional[int] = None,
        aggregation: Aggregation = "mean",
        **kwargs: Any,
    ) -> None:
        super().__init__(empty_target_action=empty_target_action, ignore_index=ignore_index, top_k=top_k,
                         aggregation=aggregation, **kwargs)

    def _keys(self, n_entries: int) -> List[str]:
        return [f"fall_out@{self.top_k or n_entries}"]


class RetrievalPrecision(_FlatRetrievalMetric):
    """Precision@k; drop-in for ``torchmetrics.retrieval.RetrievalPrecision``.

    ``precision@k`` (hits@k / k), ``adaptive_k=True``: ``precision_adaptive@k``
    (hits@k / min(k, query size)); ``top_k=None``: the whole list (R / query size).
    """

    def __init__(
        self,
        empty_target_action: str = "neg",
        ignore_index: Optional[int] = None,
        top_k: Optional[int] = None,
        adaptive_k: bool = False,
        aggregation: Aggregation = "mean",
        **kwargs: Any,
    ) -> None:
        super().__init__(empty_target_action=empty_target_action, ignore_index=ignore_index,
                         aggregation=aggregation, **kwargs)
        self.top_k = _check_top_k(top_k)
        if not isinstance(adaptive_k, bool):
            raise ValueError("`adaptive_k` has to be a boolean")
        self.adaptive_k = adaptive_k

    def _keys(self, n_entries: int) -> List[str]:
        if self.top_k is None:
            return [f"precision_adaptive@{n_entries}"]
        return [f"{'precision_adaptive' if self.adaptive_k else 'precision'}@{self.top_k}"]


class RetrievalRPrecision(_FlatRetrievalMetric):
    """R-precision; drop-in for ``torchmetrics.retrieval.RetrievalRPrecision`` (``r_precision``)."""

    def _keys(self, n_entries: int) -> List[str]:
        return ["r_precision"]


class RetrievalAUROC(_TopKMetric):
    """Per-query ROC AUC; drop-in for ``torchmetrics.retrieval.RetrievalAUROC``.

    ``top_k=None, max_fpr=None``: core key ``auroc``. ``top_k`` gives the core key
    ``auroc@k``; ``max_fpr`` runs the core kernel ``partial_auroc`` (McClish-standardised
    partial AUC) on the core's ranking. As torchmetrics: a query without a relevant
    entry is empty (``empty_target_action``); a query with relevant entries whose
    (top-k) list lacks a relevant or a non-relevant one, where the core's AUROC is
    undefined, scores 0.
    """

    def __init__(
        self,
        empty_target_action: str = "neg",
        ignore_index: Optional[int] = None,
        top_k: Optional[int] = None,
        max_fpr: Optional[float] = None,
        aggregation: Aggregation = "mean",
        **kwargs: Any,
    ) -> None:
        super().__init__(empty_target_action=empty_target_action, ignore_index=ignore_index, top_k=top_k,
                         aggregation=aggregation, **kwargs)
        if max_fpr is not None and (isinstance(max_fpr, bool) or not isinstance(max_fpr, (float, int))
                                    or not 0 < max_fpr <= 1):
            raise ValueError(f"Arguments `max_fpr` should be a float in range (0, 1], but got: {max_fpr}")
        self.max_fpr = None if max_fpr is None else float(max_fpr)

    def _keys(self, n_entries: int) -> List[str]:
        return ["auroc" if self.top_k is None else f"auroc@{self.top_k}"]

    def _ties(self) -> str:
        # whole list: tied pairs count half (ties="expected"), as torchmetrics' binary_auroc
        return "expected" if self.top_k is None else "stable"

    def _query_values(self, indexes: Tensor, preds: Tensor, target: Tensor) -> Tensor:
        return auroc_values(indexes, preds, target, key=self._keys(preds.numel())[0], ties=self._ties(),
                            top_k=self.top_k, max_fpr=self.max_fpr)


class RetrievalPrecisionRecallCurve(_FlatRetrievalMetric):
    """Precision and recall at k = 1..max_k, aggregated over queries; drop-in for
    ``torchmetrics.retrieval.RetrievalPrecisionRecallCurve``.

    Core keys ``precision@k`` (``precision_adaptive@k`` with ``adaptive_k``) and
    ``recall@k`` for every k; ``max_k=None``: the largest query. ``compute()``
    returns ``(precision[max_k], recall[max_k], top_k[max_k])``.
    """

    def __init__(
        self,
        max_k: Optional[int] = None,
        adaptive_k: bool = False,
        empty_target_action: str = "neg",
        ignore_index: Optional[int] = None,
        aggregation: Aggregation = "mean",
        **kwargs: Any,
    ) -> None:
        super().__init__(empty_target_action=empty_target_action, ignore_index=ignore_index,
                         aggregation=aggregation, **kwargs)
        self.max_k = _check_top_k(max_k, "max_k")
        if not isinstance(adaptive_k, bool):
            raise ValueError("`adaptive_k` has to be a boolean")
        self.adaptive_k = adaptive_k

    def _curve_k(self, indexes: Tensor) -> int:
        if self.max_k is not None:
            return self.max_k
        return int(torch.unique(indexes, return_counts=True)[1].max())

    def _curve_keys(self, max_k: int) -> List[str]:
        precision = "precision_adaptive" if self.adaptive_k else "precision"
        return [f"{precision}@{k}" for k in range(1, max_k + 1)] + [f"recall@{k}" for k in range(1, max_k + 1)]

    def compute(self) -> Tuple[Tensor, Tensor, Tensor]:  # type: ignore[override]
        flat = self._flat()
        if flat is None:
            max_k = self.max_k or 1
            zeros = torch.zeros(max_k, device=self.device)
            return zeros, zeros.clone(), torch.arange(1, max_k + 1, device=self.device)
        indexes, preds, target = flat
        max_k = self._curve_k(indexes)
        values = self._filled(score_values(preds, target, self._curve_keys(max_k), indexes=indexes).values)
        top_k = torch.arange(1, max_k + 1, device=preds.device)
        if values.shape[0] == 0:
            return torch.zeros(max_k, device=preds.device), torch.zeros(max_k, device=preds.device), top_k
        return self._aggregate(values[:, :max_k], dim=0), self._aggregate(values[:, max_k:], dim=0), top_k


class RetrievalRecallAtFixedPrecision(RetrievalPrecisionRecallCurve):
    """The largest recall@k whose precision@k reaches ``min_precision``, and that k;
    drop-in for ``torchmetrics.retrieval.RetrievalRecallAtFixedPrecision`` (the
    selection torchmetrics documents, on the curve of :class:`RetrievalPrecisionRecallCurve`)."""

    def __init__(
        self,
        min_precision: float = 0.0,
        max_k: Optional[int] = None,
        adaptive_k: bool = False,
        empty_target_action: str = "neg",
        ignore_index: Optional[int] = None,
        aggregation: Aggregation = "mean",
        **kwargs: Any,
    ) -> None:
        super().__init__(max_k=max_k, adaptive_k=adaptive_k, empty_target_action=empty_target_action,
                         ignore_index=ignore_index, aggregation=aggregation, **kwargs)
        if not (isinstance(min_precision, float) and 0.0 <= min_precision <= 1.0):
            raise ValueError("`min_precision` has to be a positive float between 0 and 1")
        self.min_precision = min_precision

    def compute(self) -> Tuple[Tensor, Tensor]:  # type: ignore[override]
        precision, recall, top_k = super().compute()
        return recall_at_fixed_precision(precision, recall, top_k, self.min_precision)
