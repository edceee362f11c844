"""Fusion methods: each (query, doc) pair's fused score from the scores the runs give it, as ranx defines them.

The entries of all runs (already normalised) are grouped by (query, doc) pair with one
``torch.unique``; each method is then one segment reduction over the pairs:

* ``"rrf"``: reciprocal rank fusion, ``sum over the runs holding the doc of 1 / (k + rank)``, rank 1-based
  in that run's order (score descending, docid descending: trec_eval's); normalisation is ignored;
* ``"sum"`` (CombSUM): the sum of the scores, a missing doc counting 0;
* ``"mnz"`` (CombMNZ): CombSUM times the number of runs holding the doc;
* ``"anz"`` (CombANZ): CombSUM divided by that number;
* ``"max"`` / ``"min"`` (CombMAX / CombMIN): the largest / smallest score among the runs holding the doc;
* ``"med"`` (CombMED): their median (the mean of the two middle ones for an even number);
* ``"wsum"``: ``sum of weights[i] * score_i``, a missing doc counting 0.

Example:
    >>> import torch
    >>> pair = torch.tensor([0, 1, 0])  # run 0 gives pairs 0 and 1, run 1 gives pair 0
    >>> s, r, run = torch.tensor([0.5, 0.25, 1.0]), torch.tensor([0, 1, 0]), torch.tensor([0, 0, 1])
    >>> combine("mnz", pair, 2, s, r, run).tolist(), combine("rrf", pair, 2, s, r, run, k=1).tolist()
    ([3.0, 0.25], [1.0, 0.3333333333333333])
"""
from __future__ import annotations

from typing import Optional

import torch
from torch import Tensor

__all__ = ["METHODS", "combine", "check_method"]

METHODS = ("rrf", "sum", "mnz", "anz", "max", "min", "med", "wsum")
ALIASES = {"combsum": "sum", "combmnz": "mnz", "combanz": "anz", "combmax": "max", "combmin": "min",
           "combmed": "med", "comb_sum": "sum", "comb_mnz": "mnz", "comb_anz": "anz", "comb_max": "max",
           "comb_min": "min", "comb_med": "med"}


def check_method(method: str) -> str:
    """``method``'s short name (``"CombSUM"`` -> ``"sum"``), or ValueError naming the choices."""
    name = ALIASES.get(str(method).lower(), method)
    if name not in METHODS:
        raise ValueError(f"unknown fusion method {method!r}; choose one of {list(METHODS)} "
                         "(or CombSUM, CombMNZ, CombANZ, CombMAX, CombMIN, CombMED)")
    return name


def _median(pair: Tensor, n_pairs: int, score: Tensor, count: Tensor) -> Tensor:
    """Per pair, the median of its scores: sort by (pair, score), pick the middle one or two."""
    by_score = torch.sort(score, stable=True).indices
    order = by_score[torch.sort(pair[by_score], stable=True).indices]
    ranked = score[order]
    start = torch.cumsum(count, 0) - count
    return (ranked[start + (count - 1) // 2] + ranked[start + count // 2]) / 2


def combine(method: str, pair: Tensor, n_pairs: int, score: Tensor, rank: Tensor, run: Tensor, *,
            k: float = 60, weights: Optional[Tensor] = None) -> Tensor:
    """The fused score of each of ``n_pairs`` pairs from the entries (``pair``: each entry's pair, ``score``
    its normalised score, ``rank`` its 0-based rank in its run, ``run`` its run's index)."""
    score = score.to(torch.float64)
    zeros = torch.zeros(n_pairs, dtype=torch.float64, device=score.device)
    if method == "rrf":
        return zeros.index_add_(0, pair, 1 / (k + rank.to(torch.float64) + 1))
    if method == "wsum":
        return zeros.index_add_(0, pair, weights[run] * score)
    if method in ("max", "min"):
        return zeros.scatter_reduce_(0, pair, score, reduce="a" + method, include_self=False)
    count = torch.bincount(pair, minlength=n_pairs)
    if method == "med":
        return _median(pair, n_pairs, score, count)
    total = zeros.index_add_(0, pair, score)
    if method == "mnz":
        return total * count
    if method == "anz":
        return total / count
    return total  # "sum"
