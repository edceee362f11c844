"""Option checks of score and embedding mode (ties, empty, reduce, compact, memory, backend,
cutoffs), where options are given.
"""
from __future__ import annotations

import numbers
from typing import Optional, Sequence

import torch
from torch import Tensor

from ..search.frames import DISTANCES
from .counting import check

__all__ = [
    "TIES", "EMPTY", "REDUCE", "PER_CLASS", "BACKENDS", "check_choice", "check_per_query_keys", "check_ties",
    "check_tie_keys", "check_compact_keys", "check_embedding_ties", "check_score_options", "check_memory_budget",
    "check_embedding_options", "check_backend", "check_return_neighbours", "check_seed", "positive_int",
]

TIES = ("stable", "expected", "optimistic", "pessimistic")
EMPTY = ("skip", "zero", "one", "error")
REDUCE = ("mean", "median", "min", "max", "none")
PER_CLASS = (None, "macro", "all")
BACKENDS = ("torch", "faiss")


def positive_int(name: str, value) -> int:
    """``value`` as an int when it is a positive integer (a Python or NumPy integer, not a bool).

    Example:
        >>> import numpy as np
        >>> positive_int("n_items", np.int64(5)), positive_int("n_items", 5)
        (5, 5)
        >>> positive_int("n_items", 2.0)
        Traceback (most recent call last):
        ...
        ValueError: n_items must be a positive int; got 2.0
    """
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value <= 0:
        raise ValueError(f"{name} must be a positive int; got {value!r}")
    return int(value)


@check
def check_choice(name: str, value, choices: Sequence) -> None:
    """
    Example:
        >>> check_choice("reduce", "sum", REDUCE)
        Traceback (most recent call last):
        ...
        ValueError: reduce must be one of 'mean', 'median', 'min', 'max', 'none'; got 'sum'
    """
    if value not in choices:
        raise ValueError(f"{name} must be one of {', '.join(repr(c) for c in choices)}; got {value!r}")


@check
def check_per_query_keys(keys, remedy: str) -> None:
    """Score mode takes per-query keys only; ``remedy`` says where set-level keys go.

    Example:
        >>> from retrieval_core import parse_metrics
        >>> check_per_query_keys(parse_metrics(["mrr", "nmi"]), "use EmbeddingMetrics")
        Traceback (most recent call last):
        ...
        ValueError: nmi: embedding-set metrics need embeddings; use EmbeddingMetrics
    """
    items = [m.key for m in keys if m.spec.items]
    if items:
        raise ValueError(f"{', '.join(items)}: beyond-accuracy metrics read the recommended items' ids; use "
                         "evaluate_topk")
    set_level = [m.key for m in keys if not m.spec.per_query]
    if set_level:
        raise ValueError(f"{', '.join(set_level)}: embedding-set metrics need embeddings; {remedy}")


# -- options ---------------------------------------------------------------------------


@check
def check_ties(ties) -> None:
    """One of :data:`TIES` (docs/metrics.md, "Tie modes").

    Example:
        >>> check_ties("random")
        Traceback (most recent call last):
        ...
        ValueError: ties must be one of 'stable', 'expected', 'optimistic', 'pessimistic'; got 'random'
    """
    check_choice("ties", ties, TIES)


@check
def check_tie_keys(keys, ties) -> None:
    """Keys that have no value under the tie mode: a clear error before any work.

    Example:
        >>> from retrieval_core.metrics.keys import parse_metrics
        >>> check_tie_keys(parse_metrics(["auroc@10"]), "expected")
        Traceback (most recent call last):
        ...
        NotImplementedError: auroc@10 has no closed form under ties='expected' (how many relevant and non-relevant candidates the top k holds depends on the order); use auroc (whole list), or ties='stable', 'optimistic' or 'pessimistic'
    """
    if ties != "expected":
        return
    for m in keys:  # the specification says which forms have a ties="expected" kernel
        if m.spec.per_query and not m.spec.has_expected(m.form):
            raise NotImplementedError(f"{m.key} {m.spec.no_expected}")


@check
def check_embedding_ties(ties, distance, backend="torch") -> None:
    """Tie modes other than ``"stable"`` in embedding mode: the torch backend only
    (faiss' candidate lists do not hold whole tied groups).

    Example:
        >>> check_embedding_ties("expected", "cosine", "faiss")
        Traceback (most recent call last):
        ...
        NotImplementedError: ties='expected' needs backend='torch'; got backend='faiss'
    """
    if ties == "stable":
        return
    if backend != "torch":
        raise NotImplementedError(f"ties={ties!r} needs backend='torch'; got backend={backend!r}")


@check
def check_compact_keys(compact: bool, keys) -> None:
    """``compact=True`` keeps sums and counts only: no confidence keys (they order queries).

    Example:
        >>> from retrieval_core import parse_metrics
        >>> check_compact_keys(True, parse_metrics(["mrr", "erc:cmc@1"]))
        Traceback (most recent call last):
        ...
        ValueError: compact=True keeps only sums and counts; confidence keys (erc:cmc@1) need per-query values: use compact=False
    """
    wanted = [m.key for m in keys if getattr(m, "confidence", None)]
    if compact and wanted:
        raise ValueError(f"compact=True keeps only sums and counts; confidence keys ({', '.join(wanted)}) "
                         "need per-query values: use compact=False")


@check
def check_score_options(*, ties="stable", empty="skip", reduce="mean", compact=False, keys=None) -> None:
    """The options of score mode (``compact``: the adapters' sums-and-counts state),
    and with ``keys`` (parsed) the keys they allow.

    Example:
        >>> check_score_options(compact=True, reduce="median")
        Traceback (most recent call last):
        ...
        ValueError: compact=True keeps sums and counts, so reduce must be 'mean'; got 'median'
    """
    check_ties(ties)
    check_choice("empty", empty, EMPTY)
    check_choice("reduce", reduce, REDUCE)
    if not isinstance(compact, bool):
        raise TypeError(f"compact must be a bool; got {compact!r}")
    if compact and reduce != "mean":
        raise ValueError(f"compact=True keeps sums and counts, so reduce must be 'mean'; got {reduce!r}")
    if keys is not None:
        check_compact_keys(compact, keys)
        check_tie_keys(keys, ties)


@check
def check_memory_budget(memory_budget) -> Optional[int]:
    """A positive int of bytes, or None (the default budget).

    Example:
        >>> check_memory_budget(1e9)
        Traceback (most recent call last):
        ...
        ValueError: memory_budget must be an int (number of bytes); got 1000000000.0 of type float
    """
    if memory_budget is None:
        return None
    if isinstance(memory_budget, bool) or not isinstance(memory_budget, numbers.Integral):
        raise ValueError(
            f"memory_budget must be an int (number of bytes); got {memory_budget!r} of type {type(memory_budget).__name__}"
        )
    if memory_budget <= 0:
        raise ValueError(f"memory_budget must be a positive number of bytes; got {memory_budget!r}")
    return int(memory_budget)


@check
def check_embedding_options(
    *, distance="cosine", relevance=None, ties="stable", empty="skip", reduce="mean", per_class=None,
    memory_budget=None, backend="torch", keys=None, pairs: bool = False,
) -> Optional[int]:
    """The options of embedding mode (``evaluate_embeddings``, both ``EmbeddingMetrics``),
    and with ``keys`` (parsed) the keys they allow; returns the memory budget
    (:func:`check_memory_budget`). ``pairs``: ``relevance`` may also be a tensor of relevance
    pairs (``evaluate_embeddings``; not the adapters).

    Example:
        >>> check_embedding_options(distance="manhattan")
        Traceback (most recent call last):
        ...
        ValueError: distance must be one of 'cosine', 'dot', 'euclidean', 'squared_euclidean', 'hamming' or a callable; got 'manhattan'
    """
    check_ties(ties)
    check_embedding_ties(ties, distance, backend)
    if keys is not None:
        check_tie_keys([m for m in keys if m.spec.per_query], ties)
        items = [m.key for m in keys if m.spec.items]
        if items:
            raise ValueError(f"{', '.join(items)}: beyond-accuracy metrics read the recommended items' ids; use "
                             "evaluate_topk")
    check_choice("empty", empty, EMPTY)
    check_choice("reduce", reduce, REDUCE)
    if per_class not in PER_CLASS:
        raise ValueError(f"per_class must be None, 'macro' or 'all'; got {per_class!r}")
    if per_class is not None and reduce == "none":
        raise ValueError("per_class reduces over each label's queries; it cannot go with reduce='none'")
    if not callable(distance) and distance not in DISTANCES:
        raise ValueError(f"distance must be one of {', '.join(map(repr, DISTANCES))} or a callable; got {distance!r}")
    if relevance is not None and not callable(relevance) and not (pairs and isinstance(relevance, Tensor)):
        raise TypeError(
            f"relevance must be a callable f(query_labels, gallery_labels) -> gains; got {type(relevance).__name__}"
        )
    return check_memory_budget(memory_budget)


@check
def check_backend(backend, *, distance, custom: bool, labels: Tensor, device: torch.device, whole: bool) -> None:
    """``"torch"``, or ``"faiss"`` where it applies (``whole``: whole-list keys asked)."""
    if backend not in BACKENDS:
        raise ValueError(f"backend must be 'torch' or 'faiss'; got {backend!r}")
    if backend == "faiss":
        if callable(distance) or distance == "hamming" or custom or labels.ndim != 1:
            raise ValueError("backend='faiss' needs cosine, dot or euclidean distances and 1-D class labels")
        if device.type != "cpu" or whole:
            raise ValueError("backend='faiss' runs on CPU tensors and takes no whole-list keys (map, mrr, ndcg, auroc...)")


@check
def check_return_neighbours(k, n_gallery: Optional[int] = None) -> int:
    """``return_neighbours``: None/0 (none) or a positive int at most the gallery size."""
    if k is None:
        return 0
    if isinstance(k, bool) or not isinstance(k, numbers.Integral) or k < 0:
        raise ValueError(f"return_neighbours must be a positive int (neighbours per query) or None; got {k!r}")
    if n_gallery is not None and k > n_gallery:
        raise ValueError(f"return_neighbours={k} exceeds the gallery size {n_gallery}")
    return int(k)


@check
def check_seed(seed) -> int:
    """The seed of a CPU ``torch.Generator`` (bootstrap, compare, k-means): an int that
    ``manual_seed`` takes, from -2**63 to 2**64 - 1.

    Example:
        >>> check_seed(2**64)
        Traceback (most recent call last):
        ...
        ValueError: seed must be an int from -2**63 to 2**64 - 1 (a torch.Generator seed); got 18446744073709551616
    """
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral):
        raise TypeError(f"seed must be an int; got {seed!r}")
    if not -(2**63) <= int(seed) <= 2**64 - 1:
        raise ValueError(f"seed must be an int from -2**63 to 2**64 - 1 (a torch.Generator seed); got {seed!r}")
    return int(seed)
