"""Accumulating flat entries ``(indexes, preds, target)``: the torchmetrics retrieval form.

The state is "cat" lists of ``indexes`` (the query of each entry), ``preds``,
``target`` and optional ``ids`` (each entry's dataset index). Entries of one query id
on different batches or ranks form one query; :meth:`FlatAccumulator.entries` gives
them back with repeated ids dropped, and :func:`auroc_values` and
:func:`recall_at_fixed_precision` are the values torchmetrics' own AUROC and fixed-
precision metrics define on them.

Example:
    >>> import torch
    >>> acc = FlatAccumulator()
    >>> state = acc.new_state()
    >>> acc.update(state, torch.tensor([0, 0, 1]), torch.tensor([0.75, 0.25, 0.5]), torch.tensor([1, 0, 1]),
    ...            ids=torch.tensor([4, 5, 6]))
    3
    >>> acc.update(state, torch.tensor([0]), torch.tensor([0.75]), torch.tensor([1]), ids=torch.tensor([4]))
    1
    >>> [t.tolist() for t in acc.entries(state)]  # id 4 repeated (DistributedSampler's padding): once
    [[0, 0, 1], [0.75, 0.25, 0.5], [1, 0, 1]]
"""
from __future__ import annotations

from typing import Callable, Optional, Tuple

import torch
from torch import Tensor

from ...distributed.duplicates import drop_duplicates
from ...metrics.kernels import partial_auroc, recall_at_fixed_precision
from ...ranking.flat import rank_flat
from ...validate import check_rows, check_same_device, check_scores, check_values, widen_unsigned
from ..scores import score_values
from .state import Accumulator

__all__ = ["FlatAccumulator", "auroc_values", "recall_at_fixed_precision"]


class FlatAccumulator(Accumulator):
    """Flat entries over batches (the torchmetrics ``Retrieval*`` drop-ins)."""

    cat_states = (("indexes", torch.int64), ("preds", torch.float32), ("target", torch.float32),
                  ("ids", torch.int64))
    optional = ("ids",)
    unit = "entry"

    def update(self, state, indexes: Tensor, preds: Tensor, target: Tensor, *, ids: Optional[Tensor] = None,
               ignore_index: Optional[int] = None, not_empty: Optional[Callable[[Tensor], None]] = None) -> int:
        """Check one batch once (the adapter checked its wording of shapes and dtypes),
        drop ``ignore_index`` targets, flatten and append; the number of entries.

        ``not_empty(indexes)``: the adapter's check that entries are left. Stored dtypes:
        int64 indexes, float32 scores, targets bool, int64 or float32 (every rank alike).
        ``ids``: integers of the shape of ``indexes``."""
        check_same_device(preds=preds, target=target, indexes=indexes)
        indexes, target = widen_unsigned("`indexes`", indexes), widen_unsigned("`target`", target)
        if ids is not None and (not isinstance(ids, Tensor) or ids.shape != indexes.shape):
            got = tuple(ids.shape) if isinstance(ids, Tensor) else type(ids).__name__
            raise ValueError(f"`ids` must be a tensor of the shape of `indexes` {tuple(indexes.shape)}; got {got}")
        if ignore_index is not None:
            keep = target != ignore_index
            indexes, preds, target = indexes[keep], preds[keep], target[keep]
            ids = None if ids is None else ids[keep]
        if not_empty is not None:
            not_empty(indexes)
        indexes, preds, target = indexes.reshape(-1), preds.reshape(-1), target.reshape(-1)
        check_scores(preds, target, indexes=indexes)
        if target.is_floating_point():
            target = target.float()
        elif target.dtype != torch.bool:
            target = target.long()
        if ids is not None:
            ids = check_rows("ids", ids.reshape(-1), indexes.numel(), unit="entry")
        self._append(state, self.device or indexes.device,
                     {"indexes": indexes.long(), "preds": preds.float(), "target": target, "ids": ids})
        return indexes.numel()

    def entries(self, state, *, processes: int = 1, group=None,
                check_target: Optional[Callable[[Tensor], None]] = None) -> Optional[Tuple[Tensor, Tensor, Tensor]]:
        """``(indexes, preds, target)`` of every entry held, repeated ids dropped, values
        checked (``check_target(target)`` first, the adapter's; then finite scores and
        gains >= 0); None when none is held."""
        preds = self.cat(state["preds"])
        if preds is None or preds.numel() == 0:
            return None
        indexes, target, ids = self.cat(state["indexes"]), self.cat(state["target"]), self.cat(state["ids"])
        if ids is None:
            self.warn_without_ids(processes, group, how="pass each entry's dataset index as ids= to update (a "
                                  "padding copy repeats its entries with their ids).")
        elif ids.shape[0] != preds.shape[0]:
            raise ValueError(f"ids were given for {ids.shape[0]} of {preds.shape[0]} entries: pass ids with every "
                             "update (on every rank) or with none")
        else:
            _, indexes, preds, target = drop_duplicates(ids, indexes, preds, target,
                                                        names=["indexes", "preds", "target"])
        if check_target is not None:
            check_target(target)
        check_values(preds, target)
        return indexes, preds, target


def auroc_values(indexes: Tensor, preds: Tensor, target: Tensor, *, key: str, ties: str,
                 top_k: Optional[int] = None, max_fpr: Optional[float] = None) -> Tensor:
    """``[Q, 1]`` float64 per-query ROC AUC of the flat form, in increasing query id, as
    ``torchmetrics.retrieval.RetrievalAUROC`` scores it: ``key`` (``auroc`` or
    ``auroc@k``) or, with ``max_fpr`` below 1, the kernel ``partial_auroc`` (top ``top_k``);
    NaN for a query without a relevant entry, 0 for one whose list lacks a relevant or
    a non-relevant entry (where the AUROC is undefined).

    Example:
        >>> auroc_values(torch.tensor([0, 0, 0, 1]), torch.tensor([0.9, 0.5, 0.1, 0.3]),
        ...              torch.tensor([1, 0, 1, 1]), key="auroc", ties="expected").tolist()
        [[0.5], [0.0]]
    """
    if max_fpr is None or max_fpr == 1.0:
        # "mrr" is undefined exactly for the queries without a relevant entry
        values = score_values(preds, target, [key, "mrr"], indexes=indexes, ties=ties).values
        auroc, relevant = values[:, :1], ~torch.isnan(values[:, 1:])
    else:
        depth = preds.numel() if top_k is None else top_k
        _, ranking = rank_flat(indexes, preds, target, depth)
        auroc, relevant = partial_auroc(ranking, top_k, max_fpr).unsqueeze(1), ranking.n_relevant > 0
        relevant = relevant.unsqueeze(1)
    return torch.where(torch.isnan(auroc) & relevant, 0.0, auroc)
