"""Per-query score normalisations of one run, as ranx defines them, vectorised over all entries.

Every normalisation acts on each (run, query) alone, over the documents that run retrieved for
that query (a document missing from a run is not among them), with ranx's guard: a denominator
below ``1e-9`` (a zero range, sum or deviation) is replaced by ``1e-9``.

* ``"min-max"``: ``(s - min) / max(max - min, 1e-9)``;
* ``"max"``: ``s / max(max, 1e-9)``;
* ``"sum"``: ``(s - min) / max(sum - min * n, 1e-9)``;
* ``"zmuv"``: ``(s - mean) / max(std, 1e-9)``, the population deviation (divided by ``n``);
* ``"rank"``: ``1 - i / n`` for the entry ranked ``i`` (0-based) among the ``n`` of its query;
* ``None``: the scores as they are.

Example:
    >>> import torch
    >>> s, q, r = torch.tensor([3., 1., 2., 2.]), torch.tensor([0, 0, 1, 1]), torch.tensor([0, 1, 0, 1])
    >>> normalize(s, q, r, 2, "min-max").tolist(), normalize(s, q, r, 2, "rank").tolist()
    ([1.0, 0.0, 0.0, 0.0], [1.0, 0.5, 1.0, 0.5])
"""
from __future__ import annotations

from typing import Optional

import torch
from torch import Tensor

__all__ = ["NORMS", "normalize", "check_norm"]

NORMS = ("min-max", "max", "sum", "zmuv", "rank", None)
GUARD = 1e-9  # ranx's floor for every denominator


def check_norm(norm: Optional[str]) -> Optional[str]:
    """``norm`` itself (``"min_max"`` read as ``"min-max"``), or ValueError naming the choices."""
    norm = "min-max" if norm == "min_max" else norm
    if norm not in NORMS:
        raise ValueError(f"unknown norm {norm!r}; choose one of {list(NORMS)}")
    return norm


def _reduce(score: Tensor, query: Tensor, n_queries: int, how: str) -> Tensor:
    """Per query ``how`` (``"amin"``, ``"amax"``, ``"sum"``) of its entries' scores (0 for a query with none)."""
    out = torch.zeros(n_queries, dtype=score.dtype, device=score.device)
    return out.scatter_reduce_(0, query, score, reduce=how, include_self=False)


def normalize(score: Tensor, query: Tensor, rank: Tensor, n_queries: int, norm: Optional[str]) -> Tensor:
    """The normalised ``score`` of each entry; ``query`` its query (0..n_queries-1), ``rank`` its 0-based
    place in its query's ranking (module doc)."""
    norm = check_norm(norm)
    if norm is None:
        return score
    n = torch.bincount(query, minlength=n_queries).to(score.dtype)[query]
    if norm == "rank":
        return 1 - rank.to(score.dtype) / n
    if norm == "zmuv":
        mean = (_reduce(score, query, n_queries, "sum")[query]) / n
        var = _reduce((score - mean) ** 2, query, n_queries, "sum")[query] / n
        return (score - mean) / torch.sqrt(var).clamp(min=GUARD)
    high = _reduce(score, query, n_queries, "amax")[query]
    if norm == "max":
        return score / high.clamp(min=GUARD)
    low = _reduce(score, query, n_queries, "amin")[query]
    if norm == "min-max":
        return (score - low) / (high - low).clamp(min=GUARD)
    total = _reduce(score, query, n_queries, "sum")[query]
    return (score - low) / (total - low * n).clamp(min=GUARD)  # "sum"
