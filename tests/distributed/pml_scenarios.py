"""The suite of ``compat.pml.AccuracyCalculator(gather=...)`` for the multi-process harness.

Every rank builds the same data (fixed seeds) and passes its own rows (uneven
shares, a rank with none); a case returns, per rank, ``dist``: what the
calculator with ``gather=True`` returned on this rank's shard, ``one``: what one
process computes on the concatenation of every rank's rows (the same calculator
without ``gather``, no collective), and ``searched`` / ``gathered``: how many
queries this rank searched in the divided search, and whether the embeddings
were gathered whole. ``error_*`` cases must raise on every rank
(``test_pml_distributed.py``).
"""
from __future__ import annotations

from typing import Any, Dict, List

import torch

from retrieval_core.compat import pml_dist
from retrieval_core.compat.pml import AccuracyCalculator, ExactKNN

WORLDS = (2, 3)
N, M, DIM = 41, 29, 5
ALL = ("precision_at_1", "mean_average_precision", "mean_average_precision_at_r", "mean_reciprocal_rank",
       "r_precision", "NMI", "AMI")
KNN = ALL[:5]


def _data(seed: int = 7):
    g = torch.Generator().manual_seed(seed)
    labels = torch.randint(0, 5, (N,), generator=g)
    labels[3] = 9  # a lone label: its query is left out (PML's rule)
    x = torch.randn(N, DIM, generator=g) + 2.0 * torch.nn.functional.one_hot(labels % 5, DIM).float()
    x[30] = x[2]  # equal embeddings on different ranks: ties by global position
    ref_labels = torch.randint(0, 6, (M,), generator=g)  # label 5: only in the reference set
    ref = torch.randn(M, DIM, generator=g) + 2.0 * torch.nn.functional.one_hot(ref_labels % 5, DIM).float()
    return x, labels, ref, ref_labels


def bounds(world: int, n: int, layout: str = "uneven") -> List[int]:
    """Row boundaries of each rank's share (uneven; with 3 ranks, rank 1 holds none)."""
    if world == 1:
        return [0, n]
    if layout == "first_empty":
        return [0, 0, n] if world == 2 else [0, 0, n // 2, n]
    cut = n // 3
    return [0, cut, n] if world == 2 else [0, cut, cut, n]


def _part(t, rank, world, layout="uneven"):
    b = bounds(world, len(t), layout)
    return t[b[rank]:b[rank + 1]]


def _watch(fn):
    """``fn()`` with the divided search and the whole gathering recorded."""
    seen: Dict[str, Any] = {"searched": [], "gathered": False}
    search, embeddings = pml_dist.Shards.search, pml_dist.Shards.embeddings

    def counting_search(self, *args, **kwargs):
        seen["searched"].append(self.query.shape[0])
        return search(self, *args, **kwargs)

    def counting_embeddings(self):
        seen["gathered"] = True
        return embeddings(self)

    pml_dist.Shards.search, pml_dist.Shards.embeddings = counting_search, counting_embeddings
    try:
        return fn(), seen
    finally:
        pml_dist.Shards.search, pml_dist.Shards.embeddings = search, embeddings


def _case(*, reference=False, riq: bool = False, layout: str = "uneven", make=AccuracyCalculator, **options):
    def run(rank: int, world: int):
        x, y, ref, ref_y = _data()
        args = dict(options, device=torch.device("cpu"))
        qx, qy = _part(x, rank, world, layout), _part(y, rank, world, layout)
        if reference and riq:  # each rank's reference: its queries, then its share of the others
            rx, ry = torch.cat([qx, _part(ref, rank, world)]), torch.cat([qy, _part(ref_y, rank, world)])
            one_ref = (torch.cat([x, ref]), torch.cat([y, ref_y]))
        elif reference == "itself":  # the query tensors passed as the reference too: self-matches count
            rx, ry, one_ref = qx, qy, (x, y)
        elif reference:  # reference shards cut differently from the query shards
            rx, ry = _part(ref, rank, world, "first_empty"), _part(ref_y, rank, world, "first_empty")
            one_ref = (ref, ref_y)
        else:
            rx = ry = one_ref = None
        call = dict(ref_includes_query=riq)
        dist, seen = _watch(lambda: make(gather=True, **args).get_accuracy(
            qx, qy, rx, ry, **call) if rx is not None else make(gather=True, **args).get_accuracy(qx, qy))
        one = make(**args).get_accuracy(x, y, *(one_ref or ()), **call) if one_ref else make(**args).get_accuracy(x, y)
        return {"dist": dist, "one": one, **seen}
    return run


class WithCustomMetric(AccuracyCalculator):
    """A subclass's own metric (PML's extension protocol): served by gathering whole."""

    def calculate_fraction_of_hits(self, knn_labels, query_labels, **kwargs):
        return float((knn_labels[:, :3] == query_labels[:, None]).float().mean())

    def requires_knn(self):
        return super().requires_knn() + ["fraction_of_hits"]


def _user_knn(query, k, reference, ref_includes_query):
    return ExactKNN()(query, k, reference, ref_includes_query)


def _error_options(rank: int, world: int):
    x, y, _, _ = _data()
    gather = rank == 0  # rank 0 gathers, the others compute their own values
    return AccuracyCalculator(include=KNN, gather=gather, device="cpu").get_accuracy(_part(x, rank, world),
                                                                                       _part(y, rank, world))


def _error_k(rank: int, world: int):
    x, y, _, _ = _data()
    return AccuracyCalculator(include=KNN, k=3 + rank, gather=True, device="cpu").get_accuracy(
        _part(x, rank, world), _part(y, rank, world))


def _error_input(rank: int, world: int):
    x, y, _, _ = _data()
    qx = _part(x, rank, world)
    if rank == world - 1:
        qx = qx[:, 0]  # 1-D embeddings on the last rank only
    return AccuracyCalculator(include=KNN, gather=True, device="cpu").get_accuracy(qx, _part(y, rank, world))


def _per_rank(rank: int, world: int):
    """``gather=False``: every rank's own values (options compared first)."""
    x, y, _, _ = _data()
    qx, qy = _part(x, rank, world), _part(y, rank, world)
    def outcome(**gather):  # a rank without rows raises one process's error, on that rank only
        try:
            return AccuracyCalculator(include=("precision_at_1", "NMI"), device="cpu", **gather).get_accuracy(qx, qy)
        except ValueError as exc:
            return str(exc)

    return {"mine": outcome(gather=False), "alone": outcome()}


def _no_data_anywhere(rank: int, world: int):
    """No rank holds a reference item but the queries themselves: one process's error on every rank."""
    x, y, _, _ = _data()
    return AccuracyCalculator(include=KNN, gather=True, device="cpu").get_accuracy(x[:1] if rank == 0 else x[:0],
                                                                                   y[:1] if rank == 0 else y[:0])


CASES = {
    "self_all": _case(include=ALL),
    "self_first_empty": _case(include=ALL, layout="first_empty"),
    "avg_of_avgs": _case(include=KNN, avg_of_avgs=True, k="max_bin_count"),
    "per_class_k": _case(include=KNN, return_per_class=True, k=4),
    "reference": _case(include=KNN, reference=True),
    "reference_avg_of_avgs": _case(include=KNN, reference=True, avg_of_avgs=True, k=6),
    "reference_includes_query": _case(include=KNN, reference=True, riq=True),
    "reference_is_query": _case(include=KNN, reference="itself"),
    "label_comparison": _case(include=KNN, label_comparison_fn=lambda a, b: (a % 2) == (b % 2)),
    "cosine": _case(include=KNN, knn_func=ExactKNN("cosine")),
    "user_knn_func": _case(include=KNN, knn_func=_user_knn),
    "subclass_metric": _case(make=WithCustomMetric, k=5),
}
ERRORS = {  # name: (kind, part of the message)
    "error_options": ("ValueError", "different options (each must be the same on every process): gather: True on "
                                    "rank 0 vs False on rank"),
    "error_k": ("ValueError", "k: 3 on rank 0 vs 4 on rank 1"),
    "error_input": ("ValueError", "must be 2-D [N, D] embeddings"),
    "error_no_neighbours": ("ValueError", "holds no item other than the query itself"),
}
SCENARIOS = dict(CASES, error_options=_error_options, error_k=_error_k, error_input=_error_input,
                 error_no_neighbours=_no_data_anywhere, per_rank=_per_rank)
DIVIDED = {"self_all", "self_first_empty", "avg_of_avgs", "per_class_k", "reference", "reference_avg_of_avgs",
           "reference_is_query", "label_comparison", "cosine"}
