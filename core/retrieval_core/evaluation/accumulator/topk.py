"""Accumulating top-k recommendation lists with sparse truth: rows kept at update,
evaluated once at compute by :func:`~retrieval_core.evaluate_topk`.

The state is "cat" entries, one row per list: ``widths`` (the batch's ``k``), optional
``user_ids``, ``categories`` and ``history_counts``, ``truth_counts``; and the entries of
the rows, in row order: ``items`` (each list, ``-1`` padding included: ``widths`` of
them), ``truth_items``/``truth_gains`` and ``history_items``/``history_gains`` (each
row's ``*_counts`` of them); and the "sum" entry ``invalid`` (pairs naming a row outside
their batch, raised at compute). No host sync at update (but a sparse tensor's
coalescing). Every entry concatenates across batches and ranks in the same
order, so a gathered state is the rows of every rank, each with its own entries; the
set-level keys (coverage, gini, entropy, personalization) are computed once from it,
exactly as over one process.

Example:
    >>> import torch
    >>> acc = TopkAccumulator(["recall@2", "coverage@2"], n_items=4)
    >>> state = acc.new_state()
    >>> acc.update(state, torch.tensor([[2, 0]]), torch.tensor([[0, 0], [0, 3]]), user_ids=torch.tensor([7]))
    1
    >>> acc.update(state, torch.tensor([[1, -1]]), torch.tensor([[0], [1]]), user_ids=torch.tensor([9]))
    1
    >>> {k: v.item() for k, v in acc.compute(state).items()}
    {'recall@2': 0.75, 'coverage@2': 0.75}
"""
from __future__ import annotations

from typing import Any, Dict, Optional, Tuple

import torch
from torch import Tensor

from ...distributed.duplicates import drop_duplicates
from ...metrics.keys import parse_metrics
from ...stats.aggregate import MetricResults
from ...validate.stats import N_RESAMPLES
from ...validate.topk_batch import ROW_FLAGS, check_topk_accumulator_options, check_topk_batch, raise_row_flags
from ..topk import evaluate_topk
from .state import Accumulator, same_rows

__all__ = ["TopkAccumulator", "finalize_topk"]

_I64, _F64 = torch.int64, torch.float64


class TopkAccumulator(Accumulator):
    """Top-k recommendation lists over batches (``TopKMetrics`` of both adapters).

    Options as :func:`~retrieval_core.evaluate_topk` (the item data are the metric's: one
    catalogue for every batch); ``numpy``: NumPy arrays in a batch become tensors; the
    other keywords are :class:`~retrieval_core.evaluation.accumulator.state.Accumulator`'s.
    """

    cat_states = (("widths", _I64), ("items", _I64), ("truth_counts", _I64),
                  ("truth_items", _I64), ("truth_gains", _F64), ("user_ids", _I64), ("categories", _I64),
                  ("history_counts", _I64), ("history_items", _I64), ("history_gains", _F64))
    optional = ("user_ids", "categories", "history_counts")
    input_names = {"history_counts": "history"}
    unit = "user"

    def __init__(self, metrics, *, n_items: Optional[int] = None, item_popularity=None, item_categories=None,
                 item_embeddings=None, tail_ratio: float = 0.1, empty: str = "skip", reduce: str = "mean",
                 ci: Optional[float] = None, ci_method: str = "bootstrap", n_resamples: int = N_RESAMPLES,
                 seed: int = 0, keep_per_query: bool = True, numpy: bool = True, **kwargs: Any) -> None:
        parsed = parse_metrics(metrics)
        stats = check_topk_accumulator_options(parsed, n_items=n_items, empty=empty, reduce=reduce, ci=ci,
                                                       ci_method=ci_method, n_resamples=n_resamples, seed=seed,
                                                       keep_per_query=keep_per_query)
        self.keys: Tuple[str, ...] = tuple(m.key for m in parsed)
        self.options: Dict[str, Any] = dict(
            n_items=n_items, item_popularity=item_popularity, item_categories=item_categories,
            item_embeddings=item_embeddings, tail_ratio=tail_ratio, empty=empty, reduce=reduce, **stats)
        self.numpy = numpy
        kwargs.setdefault("ids_hint", "pass each {unit}'s id as user_ids.")
        super().__init__(**kwargs)

    def sum_states(self, device=None) -> Dict[str, Tensor]:
        return {"invalid": torch.zeros(len(ROW_FLAGS), dtype=_I64, device=device)}

    def agreed_options(self) -> Dict[str, Any]:
        """Every option (the item data by dtype, shape and a digest of their bytes)."""
        return dict(metrics=self.keys, **self.options)

    def update(self, state, topk, truth, *, history=None, user_ids=None, categories=None, device=None) -> int:
        """Check one batch once (:func:`~retrieval_core.validate.topk_batch.check_topk_batch`)
        and append its rows; the number of lists. ``truth``/``history``: ``[2, E]`` pairs
        whose users are rows of this batch's ``topk``, or a sparse ``[B, n_items]`` tensor;
        ``user_ids[B]``: the users' ids (a user seen twice with the same rows, as
        DistributedSampler pads, counts once)."""
        rows = check_topk_batch(topk, truth, history=history, user_ids=user_ids, categories=categories,
                                n_items=self.options["n_items"], numpy=self.numpy, device=device)
        self._check_given(state, {"user_ids": user_ids is not None, "categories": categories is not None,
                                  "history_counts": history is not None})
        state["invalid"] += rows.pop("invalid").to(state["invalid"].device)
        n = rows["widths"].shape[0]
        if n == 0:
            return 0
        self._append(state, self.device or rows["widths"].device, rows)
        return n

    def compute(self, state, *, processes: int = 1, group=None) -> MetricResults:
        """The results of a state holding every rank's rows (``processes`` of them)."""
        raise_row_flags(state["invalid"])
        parts = {name: self.cat(state[name]) for name, _ in self.cat_states}
        if parts["widths"] is None:
            raise ValueError(f"{self.name}: no list was given; nothing to evaluate")
        same_rows(parts["widths"].shape[0], **{self.input_names.get(k, k): parts[k]
                                               for k in ("truth_counts",) + self.optional})
        if parts["user_ids"] is None:
            self.warn_without_ids(processes, group)
        return finalize_topk(parts, self.keys, processes=processes, **self.options)


def _lists(widths: Tensor, items: Optional[Tensor]) -> Tensor:
    """``[U, max width]`` item ids: each row's ``widths`` entries of ``items`` (its batch's
    list, ``-1`` padding included), then ``-1`` to the widest batch's ``k``."""
    width = int(widths.max()) if widths.numel() else 0
    out = torch.full((widths.shape[0], width), -1, dtype=_I64, device=widths.device)
    if items is not None:
        out[torch.arange(width, device=widths.device) < widths.unsqueeze(1)] = items.to(out.device)
    return out


def _entry_rows(counts: Tensor) -> Tensor:
    """The row of each entry of a ragged entry (``counts`` per row)."""
    return torch.repeat_interleave(torch.arange(counts.shape[0], device=counts.device), counts)


def _check_same_entries(name: str, user_ids: Tensor, counts: Tensor, items: Optional[Tensor],
                        gains: Optional[Tensor]) -> None:
    """A user repeated (``user_ids``) repeats its ``name`` entries exactly, in any order.

    Each row's items are distinct (else :func:`~retrieval_core.evaluate_topk` rejects the
    kept row) and the repeats of a user have equal counts (checked with the other rows);
    so every (user, item, gain) is in every copy exactly when it occurs as many times as
    its user does."""
    if items is None:
        return
    rows = _entry_rows(counts)
    _, user_of_row, n_copies = torch.unique(user_ids, return_inverse=True, return_counts=True)
    triples = torch.stack([user_ids[rows], items, gains.view(_I64)], 1)
    _, which, occurs = torch.unique(triples, dim=0, return_inverse=True, return_counts=True)
    differ = occurs[which] != n_copies[user_of_row[rows]]
    if bool(differ.any()):
        raise ValueError(f"user id {int(user_ids[rows][differ][0])} repeats with a different {name}; user_ids must "
                         "identify users (DistributedSampler padding repeats the same user, which is dropped)")


def _first_rows(parts: Dict[str, Optional[Tensor]], topk: Tensor, processes: int) -> Tensor:
    """The row kept for each user id (its first, in increasing id order), after checking
    that every repeat of a user is the same (its list, truth, history, category)."""
    ids = parts["user_ids"]
    named = [(n, t) for n, t in (("topk", topk), ("truth counts", parts["truth_counts"]),
                                 ("history counts", parts["history_counts"]), ("categories", parts["categories"]))
             if t is not None]
    drop_duplicates(ids, *(t for _, t in named), names=[n for n, _ in named], max_repeats=max(processes, 1) - 1)
    for name in ("truth", "history"):
        if parts[f"{name}_counts"] is not None:
            _check_same_entries(name, ids, parts[f"{name}_counts"], parts[f"{name}_items"], parts[f"{name}_gains"])
    order = torch.sort(ids, stable=True).indices
    first = torch.ones(ids.shape[0], dtype=torch.bool, device=ids.device)
    first[1:] = ids[order][1:] != ids[order][:-1]
    return order[first]


def _pairs(parts, name: str, kept: Tensor, n_rows: int, n_items: Optional[int]) -> Optional[Tensor]:
    """The kept rows' ``name`` entries as ``[2, E]`` (user, item) pairs (every gain 1), else
    as a sparse COO ``[users, n_items]`` tensor of the gains."""
    counts, items, gains = parts[f"{name}_counts"], parts[f"{name}_items"], parts[f"{name}_gains"]
    if counts is None:
        return None
    if items is None:
        return torch.zeros((2, 0), dtype=_I64, device=counts.device)
    new_row = torch.full((n_rows,), -1, dtype=_I64, device=counts.device)
    new_row[kept] = torch.arange(kept.shape[0], device=counts.device)
    users = new_row[_entry_rows(counts)]
    on = users >= 0
    pairs, gains = torch.stack([users[on], items[on]]), gains[on]
    if bool((gains == 1).all()):
        return pairs
    return torch.sparse_coo_tensor(pairs, gains, (kept.shape[0], n_items), check_invariants=False)  # n_items given


def finalize_topk(parts: Dict[str, Optional[Tensor]], keys, *, processes: int = 1, **options) -> MetricResults:
    """Drop repeated ``user_ids`` of the gathered rows ``parts`` (of ``processes``
    processes: at most ``processes - 1`` repeats each) and evaluate them with
    :func:`~retrieval_core.evaluate_topk` (``options``: its keywords). The lists are
    padded with ``-1`` to the widest batch's ``k``; a user's row is identified by its
    id, and a repeat must be the same (list, truth, history, category), else a
    ``ValueError`` (see :func:`~retrieval_core.distributed.drop_duplicates`). The per-user
    values (``keep_per_query``) carry the user ids as their ``query_ids``."""
    topk = _lists(parts["widths"], parts["items"])
    n_rows = topk.shape[0]
    kept = _first_rows(parts, topk, processes) if parts["user_ids"] is not None \
        else torch.arange(n_rows, device=topk.device)
    categories = parts["categories"]
    results = evaluate_topk(topk[kept], _pairs(parts, "truth", kept, n_rows, options["n_items"]), keys,
                            history=_pairs(parts, "history", kept, n_rows, options["n_items"]),
                            categories=None if categories is None else categories[kept], **options)
    if results.per_query and parts["user_ids"] is not None:
        results.query_ids = parts["user_ids"][kept]  # the per-user values are the kept rows', in order
    return results
