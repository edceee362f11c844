"""Several processes for :class:`retrieval_core.compat.pml.AccuracyCalculator` (``gather=True``).

Each rank holds a shard of the query set (and of the reference set, when one is
given); :class:`Shards` combines them as one process would see them: the rows of
every rank concatenated in rank order. Labels are gathered to every rank (PML's
label counts, lone labels and averages need all of them); the embeddings are not:
:meth:`Shards.search` and :meth:`Shards.set_values` run
:func:`retrieval_core.distributed.evaluate_embeddings_across_ranks`, where each rank evaluates
its own queries against the gathered reference set and the per-query values travel.
:meth:`Shards.embeddings` gathers the embeddings whole, for the paths that need
them on every rank (a user's ``knn_func``, a subclass's ``calculate_<name>``,
``ref_includes_query=True`` with a separate reference set).

Without a process group of more than one rank everything is one process's data.

Example:
    >>> import torch
    >>> x, y = torch.tensor([[0.0], [1.0], [3.0]]), torch.tensor([0, 0, 1])
    >>> shards = Shards(x, y, None, y, True)  # one process: the shard is everything
    >>> shards.raw_q.tolist(), shards.local_rows
    ([0, 0, 1], (0, 3))
    >>> shards.search(["cmc@1"], (y, y), None, "squared_euclidean", None)["cmc@1"].tolist()  # label 1: lone
    [1.0, 1.0, nan]
"""
from __future__ import annotations

from typing import Any, Callable, Dict, Optional, Sequence, Tuple

import torch
import torch.distributed as dist
from torch import Tensor

from .. import distributed as D

__all__ = ["Shards", "comm_device", "exchange_options"]


def comm_device(group=None) -> torch.device:
    """Where the small exchanges go: CUDA for nccl (it moves CUDA tensors only), else the CPU."""
    if D.world_size(group) > 1 and dist.get_backend(group) == "nccl":
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


def exchange_options(fn: Callable[[], Any], options: Dict[str, Any], group=None) -> Any:
    """``fn()`` on every rank, with ``options`` compared between ranks in the same
    exchange: a difference, or an error of ``fn`` on any rank, is raised on every
    rank (see :func:`retrieval_core.distributed.agree`).

    Example:
        >>> exchange_options(lambda: 3, {"gather": True})  # one process
        3
    """
    result, _ = D.agree(lambda: (fn(), None), group=group, device=comm_device(group), options=options,
                        what="compat.pml.AccuracyCalculator.get_accuracy")
    return result


class Shards:
    """This rank's rows and every rank's labels (see the module's docstring).

    ``query`` / ``raw_q``: this rank's queries and their labels (zero rows
    allowed); ``reference`` / ``raw_r``: its reference rows, None for the query set
    itself; ``riq``: ``ref_includes_query`` (with a reference: its first
    ``len(query)`` rows are the queries). The combined reference is then every
    rank's queries followed by every rank's other reference rows.
    """

    def __init__(self, query: Tensor, raw_q: Tensor, reference: Optional[Tensor], raw_r: Tensor, riq: bool,
                 group=None) -> None:
        self.query, self.reference, self.riq, self.group = query, reference, riq, group
        rows = [int(t) for t in D.gather_per_rank(torch.tensor([query.shape[0]], device=query.device), group)]
        rank = D.rank_of(group)
        self.local_rows: Tuple[int, int] = (sum(rows[:rank]), sum(rows[:rank + 1]))
        self.raw_q = D.gather_cat(raw_q, group)
        if reference is None:
            self.raw_r, self.ref_rows = self.raw_q, self.local_rows
        elif riq:
            self.raw_r, self.ref_rows = _cat(self.raw_q, D.gather_cat(raw_r[query.shape[0]:], group)), None
        else:
            sizes = [int(t) for t in D.gather_per_rank(torch.tensor([reference.shape[0]], device=query.device),
                                                         group)]
            self.raw_r, self.ref_rows = D.gather_cat(raw_r, group), (sum(sizes[:rank]), sum(sizes[:rank + 1]))

    @property
    def divisible(self) -> bool:
        """Whether the search can be divided between ranks (else: :meth:`embeddings`)."""
        return self.ref_rows is not None

    def embeddings(self) -> Tuple[Tensor, Tensor]:
        """The combined ``(query, reference)`` embeddings, gathered whole to every rank."""
        query = D.gather_cat(self.query, self.group)
        if self.reference is None:
            return query, query
        if self.riq:
            return query, _cat(query, D.gather_cat(self.reference[self.query.shape[0]:], self.group))
        return query, D.gather_cat(self.reference, self.group)

    def search(self, keys: Sequence[str], labels: Tuple[Tensor, Tensor], relevance, distance: str,
               memory_budget: Optional[int]):
        """Per-query values of ``keys`` for every query (rank order), each rank
        evaluating its own queries; ``labels``: the combined ``(query, reference)``
        labels as the single-process search takes them."""
        (q0, q1), gallery, gallery_labels = self.local_rows, None, None
        if self.reference is not None:
            r0, r1 = self.ref_rows
            gallery, gallery_labels = self.reference, labels[1][r0:r1]
        return D.evaluate_embeddings_across_ranks(self.query, labels[0][q0:q1], list(keys), gallery=gallery,
                                                  gallery_labels=gallery_labels, group=self.group,
                                                  distance=distance, relevance=relevance, reduce="none",
                                                  memory_budget=memory_budget)

    def set_values(self, codes: Tensor, keys: Sequence[str]):
        """Set-level ``keys`` (nmi, ami) of every query, labelled by the combined ``codes``."""
        q0, q1 = self.local_rows
        return D.evaluate_embeddings_across_ranks(self.query, codes[q0:q1], list(keys), group=self.group)


def _cat(a: Tensor, b: Tensor) -> Tensor:
    """``a`` then ``b``; an empty part (no rank holds such rows) is left out, whatever its dtype and shape."""
    if b.numel() == 0:
        return a
    return b if a.numel() == 0 else torch.cat([a, b.to(a.dtype)])
