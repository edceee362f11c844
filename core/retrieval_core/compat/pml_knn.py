"""Exact k-NN in pytorch-metric-learning's ``knn_func`` protocol, and PML's label counts.

:class:`ExactKNN` is the default ``knn_func`` of
:class:`retrieval_core.compat.pml.AccuracyCalculator`: ``(query, k, reference,
ref_includes_query) -> (distances [Q, k], indices [Q, k])`` as PML's ``FaissKNN``
returns them, found by :func:`retrieval_core.evaluate_embeddings` (chunked, on the
embeddings' device, no ``[Q, G]`` matrix held). With ``ref_includes_query`` the
first ``Q`` reference items are the queries, and each query's own item is never
returned (excluded by position, so a duplicate embedding is not mistaken for it).
"""
from __future__ import annotations

from typing import Callable, Optional, Tuple

import torch
from torch import Tensor

from .. import evaluate_embeddings

__all__ = ["ExactKNN", "equal_rows", "label_match_counts", "lone_queries", "relevant_per_query"]

# distance name -> (returns similarities, like faiss.IndexFlatIP, rather than distances)
DISTANCES = {"squared_euclidean": False, "euclidean": False, "cosine": True, "dot": True}


def equal_rows(x: Tensor, y: Tensor) -> Tensor:
    """Label equality, broadcast as PML calls ``label_comparison_fn``: 1-D labels
    compare as values, ``[..., D]`` labels as rows (every column equal).

    Example:
        >>> equal_rows(torch.tensor([[1.0], [2.0]]), torch.tensor([[1.0, 2.0], [2.0, 2.0]])).tolist()
        [[True, False], [True, True]]
    """
    same = x == y
    return same.all(-1) if x.ndim >= 3 or y.ndim >= 3 else same


class ExactKNN:
    """PML's ``knn_func`` protocol, exact: the ``k`` nearest reference items of each query.

    ``distance``: ``"squared_euclidean"`` (default: faiss ``IndexFlatL2``'s order and
    values), ``"euclidean"``, ``"cosine"`` or ``"dot"`` (these two return similarities,
    larger = closer, as ``IndexFlatIP``). Ties are broken by lower reference index.

    Example:
        >>> x = torch.tensor([[0.0], [1.0], [3.0]])
        >>> d, i = ExactKNN()(x, 1, x, True)
        >>> i.tolist(), d.tolist()
        ([[1], [0], [1]], [[1.0], [1.0], [4.0]])
    """

    def __init__(self, distance: str = "squared_euclidean", memory_budget: Optional[int] = None) -> None:
        if distance not in DISTANCES:
            raise ValueError(f"ExactKNN distance must be one of {sorted(DISTANCES)}; got {distance!r}")
        self.distance = distance
        self.memory_budget = memory_budget

    def __call__(self, query: Tensor, k: int, reference: Optional[Tensor] = None,
                 ref_includes_query: bool = False) -> Tuple[Tensor, Tensor]:
        reference = query if reference is None else reference
        if ref_includes_query and reference.shape[0] < query.shape[0]:
            raise ValueError("ref_includes_query=True needs the queries as the first len(query) reference items; "
                             f"got {query.shape[0]} queries and {reference.shape[0]} reference items")
        found = self.search(query, k, reference, ref_includes_query)
        return found[2], found[1]

    def search(self, query: Tensor, k: int, reference: Tensor, ref_includes_query: bool, labels=None,
               keys=("cmc@1",), relevance: Optional[Callable] = None):
        """One pass of :func:`retrieval_core.evaluate_embeddings` with ``return_neighbours=k``
        (``k`` = 0: none): ``(results, indices, distances)``. ``labels``: ``(query_labels,
        reference_labels)`` for ``keys`` (None: one class, only the neighbours are wanted)."""
        if labels is None:
            labels = (torch.zeros(query.shape[0], dtype=torch.long, device=query.device),
                      torch.zeros(reference.shape[0], dtype=torch.long, device=query.device))
        ids = {}
        if ref_includes_query:
            ids = {"query_ids": torch.arange(query.shape[0], device=query.device),
                   "gallery_ids": torch.arange(reference.shape[0], device=query.device)}
        results = evaluate_embeddings(
            query, labels[0], list(keys), gallery=reference, gallery_labels=labels[1], distance=self.distance,
            relevance=relevance, reduce="none", memory_budget=self.memory_budget, progress=False,
            return_neighbours=k or None, **ids)
        if not k:
            return results, None, None
        index, score = results.neighbours
        distances = score if DISTANCES[self.distance] else -score
        return results, index, distances.to(torch.float32)


def label_match_counts(query_labels: Tensor, reference_labels: Tensor, compare: Callable) -> Tuple[Tensor, Tensor]:
    """PML's ``label_counts``: the unique query labels (sorted rows) and, for each,
    how many reference labels match it under ``compare``.

    Example:
        >>> u, c = label_match_counts(torch.tensor([2.0, 1.0, 2.0]), torch.tensor([1.0, 2.0, 2.0, 3.0]), equal_rows)
        >>> u.tolist(), c.tolist()
        ([1.0, 2.0], [1, 2])
    """
    unique = torch.unique(query_labels, dim=0)
    if compare is equal_rows:  # one [U, G] comparison per block of labels
        counts = torch.cat([compare(block.unsqueeze(1), reference_labels.unsqueeze(0)).sum(1)
                            for block in unique.split(max(1, 2**24 // max(1, reference_labels.shape[0])))]
                           ) if unique.shape[0] else unique.new_zeros(0, dtype=torch.long)
    else:  # a custom comparison: label by label, as PML calls it
        counts = torch.stack([compare(unique[i:i + 1], reference_labels).sum() for i in range(unique.shape[0])]
                             ) if unique.shape[0] else unique.new_zeros(0, dtype=torch.long)
    return unique, counts.to(torch.long)


def lone_queries(query_labels: Tensor, label_counts, ref_includes_query: bool,
                 compare: Callable) -> Tuple[Tensor, Tensor]:
    """PML's ``(lone_query_labels, not_lone_query_mask)``: a label is lone when no
    reference item other than the query itself matches it.

    Example:
        >>> counts = label_match_counts(torch.tensor([0.0, 0.0, 1.0]), torch.tensor([0.0, 0.0, 1.0]), equal_rows)
        >>> lone, keep = lone_queries(torch.tensor([0.0, 0.0, 1.0]), counts, True, equal_rows)
        >>> lone.tolist(), keep.tolist()
        ([1.0], [True, True, False])
    """
    unique, counts = label_counts
    if ref_includes_query:  # a label that does not match itself has no self-match to take away
        itself = torch.ones_like(counts) if compare is equal_rows else compare(unique, unique).to(torch.long)
        lone = counts - itself <= 0
    else:
        lone = counts == 0
    lone_labels = unique[lone]
    keep = ~_matches(query_labels, lone_labels).any(1)
    return lone_labels, keep


def relevant_per_query(query_labels: Tensor, label_counts, ref_includes_query: bool) -> Tensor:
    """R of each query as PML counts it: its label's match count, less one when the
    reference includes the query (``label_counts`` may hold lists, as PML's tests pass).

    Example:
        >>> relevant_per_query(torch.tensor([3, 1]), ([1, 3], [4, 2]), True).tolist()
        [1, 3]
    """
    unique = torch.as_tensor(label_counts[0], device=query_labels.device)
    counts = torch.as_tensor(label_counts[1], device=query_labels.device, dtype=torch.long)
    found = _matches(query_labels, unique.to(query_labels.dtype))
    return (found.to(torch.long) * counts).sum(1) - int(bool(ref_includes_query))


def _matches(labels: Tensor, unique: Tensor) -> Tensor:
    """``[N, U]``: label row n equals unique row u."""
    if unique.numel() == 0:
        return torch.zeros(labels.shape[0], 0, dtype=torch.bool, device=labels.device)
    same = labels.unsqueeze(1) == unique.unsqueeze(0)
    return same.flatten(2).all(2) if same.ndim > 2 else same
