"""The input checks of score and embedding mode, once: the core's entry points
(``evaluate_scores``, ``score_values``, ``evaluate_embeddings``) and the adapters'
``RankingMetrics``/``EmbeddingMetrics`` (ignite and torchmetrics/Lightning) call
these, so a bad input gets the same exception and message from each face (an
adapter may name its inputs differently, e.g. ignite's ``y_pred``/``y``, and ignite
puts the metric's name in front).

* Structure (types, shapes, dtypes, devices) is cheap and checked wherever input
  arrives, per batch in the adapters: :func:`check_scores`, :func:`check_score_batch`,
  :func:`check_rows`, :func:`check_embeddings`, :func:`check_labels`,
  :func:`check_batch_like_earlier`, :func:`check_query_gallery`, ...
* Options are checked where they are given (constructors, entry points):
  :func:`check_score_options`, :func:`check_embedding_options`, ...
* Values (NaN, inf, negative gains, codes) are read from the data: once per
  evaluation, never per batch. In score mode an adapter keeps :func:`value_flags`
  of each batch as a summed state and calls :func:`raise_value_flags` at compute;
  :func:`check_values` does both at once. :func:`check_embedding_values` reads the
  embeddings and labels once, at evaluation.

Example:
    >>> import torch
    >>> check_scores(torch.rand(2, 3), torch.ones(2, 4))
    Traceback (most recent call last):
    ...
    ValueError: preds and target must be 2-D [queries, candidates] of the same shape, or 1-D with indexes=; got (2, 3) and (2, 4)
"""
from __future__ import annotations

import numbers
from typing import Optional, Sequence, Tuple

import torch
from torch import Tensor

from . import sizing
from .ranking import GAIN_LIMIT
from .search import DISTANCES

TIES = ("stable", "expected", "optimistic", "pessimistic")
EMPTY = ("skip", "zero", "one", "error")
REDUCE = ("mean", "median", "min", "max", "none")
PER_CLASS = (None, "macro", "all")
BACKENDS = ("torch", "faiss")

_KINDS = {"int": ("integer", "an integer", "integers"), "flag": ("bool", "a bool", "bools")}


def _shape(t: Tensor) -> tuple:
    return tuple(t.shape)


def _contains(name: str) -> str:
    """``preds contain``, ``y contains``: the verb agrees with the input's name."""
    return f"{name} contain" if name.endswith("s") else f"{name} contains"


# -- generic ----------------------------------------------------------------------


def check_tensor(name: str, value) -> Tensor:
    """``value`` itself if it is a tensor.

    Example:
        >>> check_tensor("preds", [0.5])
        Traceback (most recent call last):
        ...
        TypeError: preds must be a torch.Tensor; got list
    """
    if not isinstance(value, Tensor):
        raise TypeError(f"{name} must be a torch.Tensor; got {type(value).__name__}")
    return value


_WIDE_UNSIGNED = (torch.uint16, torch.uint32, torch.uint64)


def widen_unsigned(name: str, value):
    """``value`` as int64 when it is uint16/uint32/uint64 (query ids, gains), for which torch
    lacks the operations the kernels use; exact, since uint64 values past int64's range
    are refused (one read of the data, for uint64 only). Anything else passes unchanged.

    Example:
        >>> widen_unsigned("indexes", torch.tensor([3, 1], dtype=torch.uint32))
        tensor([3, 1])
        >>> widen_unsigned("indexes", torch.tensor([2**63], dtype=torch.uint64))
        Traceback (most recent call last):
        ...
        ValueError: indexes holds uint64 values above 2**63 - 1, which int64 cannot hold; map them to smaller ids
    """
    if not isinstance(value, Tensor) or value.dtype not in _WIDE_UNSIGNED:
        return value
    if value.dtype == torch.uint64:
        signed = value.view(torch.int64)  # the same bits: values past 2**63 - 1 read as negative
        if signed.numel() and bool((signed < 0).any()):
            raise ValueError(f"{name} holds uint64 values above 2**63 - 1, which int64 cannot hold; map them to "
                             "smaller ids")
        return signed.clone()
    return value.to(torch.int64)


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


def check_same_device(**tensors: Optional[Tensor]) -> None:
    """The given (not None) tensors share one device.

    Example:
        >>> check_same_device(preds=torch.zeros(1), target=torch.zeros(1, device="meta"))
        Traceback (most recent call last):
        ...
        ValueError: preds and target must be on the same device; got cpu and meta
    """
    present = {k: v for k, v in tensors.items() if v is not None}
    devices = {v.device for v in present.values()}
    if len(devices) > 1:
        names = " and ".join(present)
        got = " and ".join(str(v.device) for v in present.values())
        raise ValueError(f"{names} must be on the same device; got {got}")


def check_rows(name: str, value, n: int, *, kind: str = "int", unit: str = "row", lists: bool = False) -> Tensor:
    """A 1-D tensor with one entry per ``unit`` (``n`` of them): ids and categories
    (``kind="int"``, returned as int64) or query/gallery flags (``kind="flag"``:
    bool, or integers where nonzero is True; returned as bool). ``lists=True`` also
    takes a list or tuple (the adapters' batches).

    Example:
        >>> check_rows("ids", torch.tensor([3, 1]), 2).dtype
        torch.int64
        >>> check_rows("is_query", [1, 0], 2, kind="flag", lists=True).tolist()
        [True, False]
        >>> check_rows("ids", torch.arange(2), 3)
        Traceback (most recent call last):
        ...
        ValueError: ids must be 1-D with one entry per row; got shape (2,) for 3 rows
    """
    word, article, plural = _KINDS[kind]
    more = f" or a list of {plural}" if lists else ""
    if lists and isinstance(value, (list, tuple)):
        try:
            value = torch.as_tensor(value)
        except (TypeError, ValueError, RuntimeError):
            raise TypeError(f"{name} must be a 1-D {word} tensor{more}; got {value!r:.80}") from None
    if not lists:
        check_tensor(name, value)
    elif not isinstance(value, Tensor):
        raise TypeError(f"{name} must be a 1-D {word} tensor{more}; got {type(value).__name__}")
    if value.ndim != 1 or value.shape[0] != n:
        raise ValueError(f"{name} must be 1-D with one entry per {unit}; got shape {_shape(value)} for {n} {unit}s")
    if value.is_complex() or value.is_floating_point() or (kind == "int" and value.dtype == torch.bool):
        also = " (0/1 integers are taken too)" if kind == "flag" else ""
        raise TypeError(f"{name} must be {article} tensor; got {value.dtype}{also}")
    if kind == "flag":
        return value if value.dtype == torch.bool else value != 0
    return value.to(torch.int64)


# -- score mode: structure ----------------------------------------------------------


def _check_score_tensors(preds, target, names: Tuple[str, str]) -> None:
    p, t = names
    check_tensor(p, preds)
    check_tensor(t, target)
    if preds.dtype == torch.bool or preds.is_complex():
        raise TypeError(f"{p} must be a floating-point or integer tensor; got {preds.dtype}")
    if target.is_complex():
        raise TypeError(f"{t} must be a bool, integer or floating-point tensor; got {target.dtype}")


def _check_dense(preds, target, mask, names: Tuple[str, str], dims: str, hint: str) -> None:
    p, t = names
    _check_score_tensors(preds, target, names)
    if preds.ndim != 2 or preds.shape != target.shape:
        raise ValueError(f"{p} and {t} must be 2-D {dims} of the same shape{hint}; got {_shape(preds)} and {_shape(target)}")
    if mask is not None:
        check_tensor("mask", mask)
        if mask.dtype != torch.bool:
            raise TypeError(f"mask must be a bool tensor; got {mask.dtype}")
        if mask.shape != preds.shape:
            raise ValueError(f"mask must have the shape of {p}; got {_shape(mask)} and {_shape(preds)}")
    check_same_device(**{p: preds, t: target, "mask": mask})


def check_score_batch(
    preds, target, *, mask=None, names: Tuple[str, str] = ("preds", "target"), dims: str = "[queries, candidates]"
) -> None:
    """One adapter batch of dense scores ``[B, N]`` and gains (``B`` may be 0);
    ``names`` and ``dims`` as the adapter calls them.

    Example:
        >>> check_score_batch(torch.rand(3, 4), torch.ones(3, 3), names=("y_pred", "y"), dims="[batch, items]")
        Traceback (most recent call last):
        ...
        ValueError: y_pred and y must be 2-D [batch, items] of the same shape; got (3, 4) and (3, 3)
    """
    _check_dense(preds, target, mask, names, dims, "")


def check_scores(preds, target, *, indexes=None, mask=None) -> None:
    """The structure of score-mode input: dense ``[Q, N]`` (optional ``mask``) or
    flat ``[n]`` with ``indexes``; not empty.

    Example:
        >>> check_scores(torch.rand(6), torch.ones(6), indexes=torch.zeros(5, dtype=torch.long))
        Traceback (most recent call last):
        ...
        ValueError: indexes must have one entry per prediction; got 5 indexes for 6 predictions
    """
    if indexes is None:
        _check_dense(preds, target, mask, ("preds", "target"), "[queries, candidates]", ", or 1-D with indexes=")
        if preds.numel() == 0:
            raise ValueError(f"preds and target are empty; got shape {_shape(preds)}")
        return
    _check_score_tensors(preds, target, ("preds", "target"))
    if preds.shape != target.shape:
        raise ValueError(f"preds and target must have the same shape; got {_shape(preds)} and {_shape(target)}")
    check_tensor("indexes", indexes)
    if indexes.dtype == torch.bool or indexes.is_floating_point() or indexes.is_complex():
        raise TypeError(f"indexes must be an integer tensor; got {indexes.dtype}")
    if preds.ndim != 1 or indexes.ndim != 1:
        raise ValueError(f"with indexes, preds, target and indexes must be 1-D; got {_shape(preds)} and {_shape(indexes)}")
    if indexes.shape != preds.shape:
        raise ValueError(
            f"indexes must have one entry per prediction; got {indexes.numel()} indexes for {preds.numel()} predictions"
        )
    if preds.numel() == 0:
        raise ValueError("preds, target and indexes are empty")
    if mask is not None:
        raise ValueError("mask is for dense [queries, candidates] input; the flat form needs none")
    check_same_device(preds=preds, target=target, indexes=indexes)


def check_categories(categories, n: int, what: str) -> None:
    """Core categories: a 1-D integer tensor or a sequence of labels, one per ``what``.

    Example:
        >>> check_categories(["a", "b", "c"], 2, "query (row)")
        Traceback (most recent call last):
        ...
        ValueError: categories must have one entry per query (row); got 3 for 2
    """
    length = categories.shape[0] if isinstance(categories, Tensor) else len(categories)
    if isinstance(categories, Tensor) and categories.ndim != 1:
        raise ValueError(f"categories must be 1-D; got shape {_shape(categories)}")
    if isinstance(categories, Tensor) and (categories.is_floating_point() or categories.is_complex()):
        raise TypeError(f"categories must be an integer tensor or a sequence of labels; got {categories.dtype}")
    if length != n:
        raise ValueError(f"categories must have one entry per {what}; got {length} for {n}")


def check_confidence(confidence, n: int, unit: str = "query", *, values: bool = True, lists: bool = False) -> Tensor:
    """Per-query confidences: a real 1-D tensor with ``n`` entries (one per ``unit``),
    finite (read when ``values``; the adapters read them once, at compute). Returned
    floating (integers as float64; a float dtype is kept, so that ``conf:`` thresholds
    compare in the confidences' own precision). ``lists=True`` also takes a list or tuple
    of numbers (adapters' batches).

    Example:
        >>> check_confidence(torch.tensor([0.5, 2.0]), 2).tolist()
        [0.5, 2.0]
        >>> check_confidence(torch.tensor([0.5, float("nan")]), 2)
        Traceback (most recent call last):
        ...
        ValueError: confidence contains NaN or infinite values (1 of 2); confidences must be finite numbers
    """
    if lists and isinstance(confidence, (list, tuple)):
        if not all(isinstance(c, numbers.Real) and not isinstance(c, bool) for c in confidence):
            raise TypeError("confidence must be a tensor or a list of real numbers, one per query")
        confidence = torch.tensor([float(c) for c in confidence], dtype=torch.float64)
    if not isinstance(confidence, Tensor):
        raise TypeError(f"confidence must be a torch.Tensor with one real value per {unit}; "
                        f"got {type(confidence).__name__}")
    if confidence.dtype == torch.bool or confidence.is_complex():
        raise TypeError(f"confidence must be a real (float or integer) tensor; got {confidence.dtype}")
    if confidence.ndim != 1:
        raise ValueError(f"confidence must be 1-D with one value per {unit}; got shape {_shape(confidence)}")
    if confidence.shape[0] != n:
        raise ValueError(f"confidence must have one value per {unit}; got {confidence.shape[0]} for {n}")
    if not confidence.is_floating_point():
        confidence = confidence.to(torch.float64)
    if values:
        bad = int((~torch.isfinite(confidence)).sum())
        if bad:
            raise ValueError(f"confidence contains NaN or infinite values ({bad} of {n}); "
                             "confidences must be finite numbers")
    return confidence


def check_confidence_range(confidence: Tensor, keys: Sequence[str]) -> None:
    """``conf:`` keys threshold confidences on a grid of [0, 1]: every value must lie there.

    Example:
        >>> check_confidence_range(torch.tensor([0.2, 1.5]), ["conf:cmc@1"])
        Traceback (most recent call last):
        ...
        ValueError: conf:cmc@1: conf: keys need confidences within [0, 1]; got values from 0.2 to 1.5 (rescale them, or use erc:/spearman:/kendall: keys, which take any range)
    """
    if confidence.numel() == 0:
        return
    low, high = torch.stack([confidence.min(), confidence.max()]).tolist()
    if low < 0 or high > 1:
        raise ValueError(
            f"{', '.join(keys)}: conf: keys need confidences within [0, 1]; got values from {low:g} to {high:g} "
            "(rescale them, or use erc:/spearman:/kendall: keys, which take any range)"
        )


def check_correlation_inputs(x, y, method) -> None:
    """The inputs of ``rank_correlation``: two real finite 1-D tensors of one length
    and device, and a method.

    Example:
        >>> check_correlation_inputs(torch.zeros(3), torch.zeros(2), "spearman")
        Traceback (most recent call last):
        ...
        ValueError: x and y must be 1-D of the same length; got shapes (3,) and (2,)
    """
    check_choice("method", method, ("spearman", "kendall"))
    for name, t in (("x", x), ("y", y)):
        check_tensor(name, t)
        if t.dtype == torch.bool or t.is_complex():
            raise TypeError(f"{name} must be a real (float or integer) tensor; got {t.dtype}")
    if x.ndim != 1 or y.ndim != 1 or x.shape[0] != y.shape[0]:
        raise ValueError(f"x and y must be 1-D of the same length; got shapes {_shape(x)} and {_shape(y)}")
    check_same_device(x=x, y=y)
    for name, t in (("x", x), ("y", y)):
        if t.is_floating_point() and not bool(torch.isfinite(t).all()):
            raise ValueError(f"{name} contains NaN or infinite values; rank correlation needs finite numbers")


def check_per_query_keys(keys, remedy: str) -> None:
    """Score mode takes per-query keys only; ``remedy`` says where set-level keys go.

    Example:
        >>> from retrieval_core import parse_metrics
        >>> check_per_query_keys(parse_metrics(["mrr", "nmi"]), "use EmbeddingMetrics")
        Traceback (most recent call last):
        ...
        ValueError: nmi: embedding-set metrics need embeddings; use EmbeddingMetrics
    """
    set_level = [m.key for m in keys if not m.spec.per_query]
    if set_level:
        raise ValueError(f"{', '.join(set_level)}: embedding-set metrics need embeddings; {remedy}")


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


def check_compact_inputs(compact: bool, **given) -> None:
    """``compact=True`` keeps sums and counts only: no per-query ``ids``/``categories``.

    Example:
        >>> check_compact_inputs(True, ids=torch.arange(3), categories=None)
        Traceback (most recent call last):
        ...
        ValueError: compact=True keeps only sums and counts; it cannot take 'ids' (de-duplication and per-category results need per-query values): use compact=False
    """
    present = [k for k, v in given.items() if v is not None]
    if compact and present:
        raise ValueError(
            f"compact=True keeps only sums and counts; it cannot take {', '.join(map(repr, present))} "
            "(de-duplication and per-category results need per-query values): use compact=False"
        )



def check_indexed_triplet(indexes, preds, target) -> None:
    """Structure of the torchmetrics-style ``update(preds, target, indexes)`` input,
    worded as ``torchmetrics.retrieval`` words it (the Lightning drop-ins keep their
    anchor's messages): the same shape, integer ``indexes`` (``torch.long`` in
    torchmetrics; any integer dtype here), floating ``preds``, bool/integer/float
    ``target``. Emptiness is checked after ``ignore_index``, by :func:`check_indexed_not_empty`.

    Example:
        >>> check_indexed_triplet(torch.zeros(3, dtype=torch.long), torch.tensor([1, 2, 3]), torch.ones(3))
        Traceback (most recent call last):
        ...
        ValueError: `preds` must be a tensor of floats
    """
    for name, t in (("preds", preds), ("target", target), ("indexes", indexes)):
        if not isinstance(t, Tensor):
            raise TypeError(f"`{name}` must be a torch.Tensor; got {type(t).__name__}")
    if indexes.shape != preds.shape or preds.shape != target.shape:
        raise ValueError("`indexes`, `preds` and `target` must be of the same shape")
    if indexes.dtype == torch.bool or indexes.is_floating_point() or indexes.is_complex():
        raise ValueError("`indexes` must be a tensor of long integers")
    if target.is_complex():
        raise ValueError("`target` must be a tensor of booleans, integers or floats")
    if not preds.is_floating_point():
        raise ValueError("`preds` must be a tensor of floats")
    check_same_device(preds=preds, target=target, indexes=indexes)


def check_indexed_not_empty(indexes: Tensor) -> None:
    """At least one entry left (after ``ignore_index``), in torchmetrics' words.

    Example:
        >>> check_indexed_not_empty(torch.zeros(0, dtype=torch.long))
        Traceback (most recent call last):
        ...
        ValueError: `indexes`, `preds` and `target` must be non-empty and non-scalar tensors
    """
    if indexes.ndim == 0 or indexes.numel() == 0:
        raise ValueError("`indexes`, `preds` and `target` must be non-empty and non-scalar tensors")


def check_binary_target(target: Tensor) -> None:
    """Targets of 0 and 1 only (bool, or numbers), in torchmetrics' words; one host read.

    Example:
        >>> check_binary_target(torch.tensor([0, 2, 1]))
        Traceback (most recent call last):
        ...
        ValueError: `target` must contain `binary` values
    """
    if target.dtype == torch.bool or target.numel() == 0:
        return
    lo, hi = torch.aminmax(target)
    if bool((hi > 1) | (lo < 0)):
        raise ValueError("`target` must contain `binary` values")

# -- score mode: values (read from the data) -------------------------------------------


def value_flags(preds: Tensor, target: Tensor) -> Tensor:
    """``[3]`` int64 flags of one batch: NaN/inf scores, NaN/inf gains (or above
    :data:`GAIN_LIMIT`), negative gains.

    No host sync where one costs (``sizing.sync_free``): an adapter sums them as a
    state and calls :func:`raise_value_flags` once, at compute. Elsewhere (CPU) the
    scores are checked by their sum, with the exact check only when the sum is not
    finite (see :func:`_nonfinite`).

    Example:
        >>> value_flags(torch.tensor([[0.5, float("nan")]]), torch.tensor([[1, -1]])).tolist()
        [1, 0, 1]
    """
    zero = torch.zeros((), dtype=torch.bool, device=preds.device)
    bad_preds = bad_target = negative = zero
    if preds.is_floating_point() and preds.numel():
        bad_preds = _nonfinite(preds)
    if target.dtype != torch.bool and target.numel():
        if target.is_floating_point():  # one pass for both (a NaN propagates to both)
            low, high = torch.aminmax(target)
            bad_target = ~(torch.isfinite(low) & torch.isfinite(high) & (high <= GAIN_LIMIT))
        else:
            low = target.amin()
        negative = low < 0
    return torch.stack([bad_preds, bad_target.to(preds.device), negative.to(preds.device)]).to(torch.int64)


def _nonfinite(x: Tensor) -> Tensor:
    """0-dim bool: ``x`` (floats) holds a NaN or an infinity.

    The sum of finite float32/float64 values is finite unless it overflows, and a
    NaN or infinity makes it non-finite: where host reads are free, one sum (0.3-0.7x
    the time of an ``aminmax`` pass on CPU) settles the common case, and the minimum and
    maximum decide only when the sum is not finite. Elsewhere: the minimum and maximum.
    """
    if x.dtype in (torch.float32, torch.float64) and not sizing.sync_free(x):
        total = x.sum()
        if bool(torch.isfinite(total)):
            return torch.zeros((), dtype=torch.bool, device=x.device)
    low, high = torch.aminmax(x)
    return ~(torch.isfinite(low) & torch.isfinite(high))


def raise_value_flags(flags: Tensor, names: Tuple[str, str] = ("preds", "target")) -> None:
    """Raise for summed :func:`value_flags` (one host read).

    Example:
        >>> raise_value_flags(torch.tensor([0, 0, 2]), names=("y_pred", "y"))
        Traceback (most recent call last):
        ...
        ValueError: y contains negative gains; gains must be >= 0
    """
    bad_preds, bad_target, negative = flags.tolist()
    p, t = names
    if bad_preds:
        raise ValueError(f"{_contains(p)} NaN or inf; scores must be finite")
    if bad_target:
        raise ValueError(f"{_contains(t)} NaN or inf (or gains above 2^960); gains must be finite and >= 0, "
                         "and at most 2^960 (about 1e289) so that sums of them fit float64")
    if negative:
        raise ValueError(f"{_contains(t)} negative gains; gains must be >= 0")


def check_values(preds: Tensor, target: Tensor, names: Tuple[str, str] = ("preds", "target")) -> None:
    """NaN/inf scores, NaN/inf or negative gains, with one host sync.

    Example:
        >>> check_values(torch.tensor([[0.5, float("inf")]]), torch.tensor([[1, 0]]))
        Traceback (most recent call last):
        ...
        ValueError: preds contain NaN or inf; scores must be finite
    """
    raise_value_flags(value_flags(preds, target), names)


def check_representable(values: Tensor, keys: Sequence[str], n_queries: Optional[int] = None) -> None:
    """Per-query ``values[Q, M]`` (or their sums, ``n_queries=1``) that float64 can sum:
    no infinity, and no value so large that a sum over the ``n_queries`` queries (the mean,
    resampled means) could overflow. One host read.

    Example:
        >>> check_representable(torch.tensor([[1.0, float("inf")]]), ["dcg", "dcg_exp"])
        Traceback (most recent call last):
        ...
        ValueError: dcg_exp: values up to inf over 1 query, beyond what float64 can sum (dcg_exp's 2^g - 1 overflows from gains of about 1024 on, dcg's sums from gains near 1e308); use ndcg_exp/ndcg, or smaller gains
    """
    n = max(values.shape[0] if n_queries is None else n_queries, 1)
    if values.numel() == 0:
        return
    limit = torch.finfo(torch.float64).max / n
    largest = torch.where(torch.isnan(values), 0.0, values.abs()).amax(0)
    bad = [(k, v) for k, v in zip(keys, largest.tolist()) if v > limit]
    if bad:
        raise ValueError(
            f"{', '.join(k for k, _ in bad)}: values up to {max(v for _, v in bad):g} over {n} quer{'y' if n == 1 else 'ies'}, "
            "beyond what float64 can sum (dcg_exp's 2^g - 1 overflows from gains of about 1024 on, dcg's sums from "
            "gains near 1e308); use ndcg_exp/ndcg, or smaller gains"
        )


# -- options ---------------------------------------------------------------------------


def check_ties(ties) -> None:
    """One of :data:`TIES` (docs/metrics.md, "Tie modes").

    Example:
        >>> check_ties("random")
        Traceback (most recent call last):
        ...
        ValueError: ties must be one of 'stable', 'expected', 'optimistic', 'pessimistic'; got 'random'
    """
    check_choice("ties", ties, TIES)


def check_tie_keys(keys, ties) -> None:
    """Keys that have no value under the tie mode: a clear error before any work.

    Example:
        >>> from retrieval_core.registry import parse_metrics
        >>> check_tie_keys(parse_metrics(["auroc@10"]), "expected")
        Traceback (most recent call last):
        ...
        NotImplementedError: auroc@10 has no closed form under ties='expected' (how many relevant and non-relevant candidates the top k holds depends on the order); use auroc (whole list), or ties='stable', 'optimistic' or 'pessimistic'
    """
    if ties != "expected":
        return
    for m in keys:
        if m.spec.name == "auroc" and m.cutoff is not None:
            raise NotImplementedError(
                f"{m.key} has no closed form under ties='expected' (how many relevant and non-relevant candidates "
                "the top k holds depends on the order); use auroc (whole list), or ties='stable', 'optimistic' "
                "or 'pessimistic'"
            )


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


def check_embedding_options(
    *, distance="cosine", relevance=None, ties="stable", empty="skip", reduce="mean", per_class=None,
    memory_budget=None, backend="torch", keys=None,
) -> None:
    """The options of embedding mode (``evaluate_embeddings``, both ``EmbeddingMetrics``),
    and with ``keys`` (parsed) the keys they allow.

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
    check_choice("empty", empty, EMPTY)
    check_choice("reduce", reduce, REDUCE)
    if per_class not in PER_CLASS:
        raise ValueError(f"per_class must be None, 'macro' or 'all'; got {per_class!r}")
    if per_class is not None and reduce == "none":
        raise ValueError("per_class reduces over each label's queries; it cannot go with reduce='none'")
    if not callable(distance) and distance not in DISTANCES:
        raise ValueError(f"distance must be one of {', '.join(map(repr, DISTANCES))} or a callable; got {distance!r}")
    if relevance is not None and not callable(relevance):
        raise TypeError(
            f"relevance must be a callable f(query_labels, gallery_labels) -> gains; got {type(relevance).__name__}"
        )
    check_memory_budget(memory_budget)


# -- embedding mode: structure ------------------------------------------------------------


def check_embeddings(name: str, x, distance="cosine", *, batch: bool = False) -> Tensor:
    """``[items, dim]`` embeddings, not empty (``batch=True``: an adapter's
    ``[batch, dim]``, which may be empty); floating point, or integer/bool codes
    for hamming and callable distances. Returned detached: evaluation never needs
    the autograd graph (``net(x)`` outside ``torch.no_grad()`` is accepted).

    Example:
        >>> check_embeddings("embeddings", torch.rand(3), batch=True)
        Traceback (most recent call last):
        ...
        ValueError: embeddings must be 2-D [batch, dim]; got shape (3,)
    """
    check_tensor(name, x)
    if x.ndim != 2:
        raise ValueError(f"{name} must be 2-D [{'batch' if batch else 'items'}, dim]; got shape {_shape(x)}")
    if x.shape[0] == 0 and not batch:
        raise ValueError(f"{name} is empty; got shape {_shape(x)}")
    if x.is_complex() or (not x.is_floating_point() and distance != "hamming" and not callable(distance)):
        raise TypeError(
            f"{name} must be a floating-point tensor (integer or bool codes only with distance='hamming'); got {x.dtype}"
        )
    return x.detach()


def check_labels(name: str, labels, n: int, custom: bool = False) -> Tensor:
    """One label per embedding: ``[n]`` integer classes or ``[n, C]`` multi-hot
    (bool or integer 0/1); anything with one entry per embedding when ``custom``
    (a relevance callable reads them).

    Example:
        >>> check_labels("labels", torch.tensor([0.0, 1.0]), 2)
        Traceback (most recent call last):
        ...
        TypeError: labels must be integer class labels; got torch.float32
    """
    check_tensor(name, labels)
    if labels.ndim == 0 or labels.shape[0] != n:
        raise ValueError(f"{name} must have one entry per embedding; got shape {_shape(labels)} for {n} embeddings")
    if custom:
        return labels
    if labels.ndim > 2:
        raise ValueError(f"{name} must be 1-D class labels or 2-D multi-hot [N, classes]; got shape {_shape(labels)}")
    if labels.ndim == 1 and (labels.is_floating_point() or labels.is_complex() or labels.dtype == torch.bool):
        raise TypeError(f"{name} must be integer class labels; got {labels.dtype}")
    if labels.ndim == 2 and (labels.is_complex() or labels.is_floating_point()):
        raise TypeError(f"{name} as multi-hot [N, classes] must be bool or integer 0/1; got {labels.dtype}")
    return labels


def check_batch_like_earlier(embeddings: Tensor, labels: Tensor, dim: Optional[int], label_shape: Optional[tuple]) -> None:
    """An adapter's batch against the earlier ones (``dim``: their embedding
    dimension, ``label_shape``: their labels' shape past the batch dimension, ``()``
    for class labels, ``(C,)`` for multi-hot; None before the first batch): the
    states are concatenated at compute, which needs both to stay the same.

    Example:
        >>> check_batch_like_earlier(torch.rand(2, 5), torch.tensor([0, 1]), 3, ())
        Traceback (most recent call last):
        ...
        ValueError: embeddings of every batch must have the same dimension; got 5 after 3
    """
    if dim is not None and embeddings.shape[1] != dim:
        raise ValueError(f"embeddings of every batch must have the same dimension; got {embeddings.shape[1]} after {dim}")
    now = _shape(labels)[1:]
    if label_shape is not None and now != tuple(label_shape):
        raise ValueError(
            f"labels of every batch must have the same shape past the batch dimension; got {now} after "
            f"{tuple(label_shape)} ({_label_form(now)} after {_label_form(tuple(label_shape))})"
        )


def _label_form(trailing: tuple) -> str:
    if trailing == ():
        return "1-D class labels"
    if len(trailing) == 1:
        return f"multi-hot labels of {trailing[0]} classes"
    return f"labels of shape [batch, {', '.join(map(str, trailing))}]"


def check_query_gallery(query: Tensor, query_labels: Tensor, gallery: Tensor, gallery_labels: Tensor, custom: bool) -> None:
    """A separate gallery matches the queries: embedding dimension, label form and
    number of multi-hot classes (any labels when ``custom``).

    Example:
        >>> check_query_gallery(torch.rand(2, 3), torch.tensor([0, 1]), torch.rand(2, 3), torch.ones(2, 4), False)
        Traceback (most recent call last):
        ...
        ValueError: query_labels and gallery_labels must both be 1-D or both multi-hot; got shapes (2,) and (2, 4)
    """
    if gallery.shape[1] != query.shape[1]:
        raise ValueError(f"query and gallery must have the same dimension; got {query.shape[1]} and {gallery.shape[1]}")
    if custom:
        return
    if query_labels.ndim != gallery_labels.ndim:
        raise ValueError(
            "query_labels and gallery_labels must both be 1-D or both multi-hot; "
            f"got shapes {_shape(query_labels)} and {_shape(gallery_labels)}"
        )
    if query_labels.ndim == 2 and query_labels.shape[1] != gallery_labels.shape[1]:
        raise ValueError(
            f"multi-hot labels must have the same number of classes; got {query_labels.shape[1]} and {gallery_labels.shape[1]}"
        )


def check_pairs(gallery, gallery_labels, query_ids, gallery_ids) -> None:
    """What goes together in ``evaluate_embeddings``: gallery with its labels;
    ids on both sides (a self-gallery takes only ``query_ids``).

    Example:
        >>> check_pairs(torch.rand(2, 3), None, None, None)
        Traceback (most recent call last):
        ...
        ValueError: gallery and gallery_labels go together: give both or neither
    """
    if (gallery is None) != (gallery_labels is None):
        raise ValueError("gallery and gallery_labels go together: give both or neither")
    if gallery is None and gallery_ids is not None:
        raise ValueError("gallery_ids needs a gallery; with gallery=None the query_ids serve both sides")
    if gallery is not None and (query_ids is None) != (gallery_ids is None):
        raise ValueError("query_ids and gallery_ids go together: give both or neither")


def check_per_class(per_class, labels: Tensor, custom: bool = False) -> None:
    """``per_class`` groups the queries by equal label: ``[N]`` values or ``[N, C]``
    rows (multi-hot, or any labels of a ``relevance`` callable, ``custom``), real and
    without NaN.

    Example:
        >>> check_per_class("macro", torch.zeros(2, 3, 1), True)
        Traceback (most recent call last):
        ...
        ValueError: per_class groups the queries by equal label, [N] values or [N, C] rows; got query labels of shape (2, 3, 1)
    """
    if per_class is None:
        return
    if labels.ndim > 2 or (labels.ndim == 2 and labels.shape[1] == 0):
        raise ValueError("per_class groups the queries by equal label, [N] values or [N, C] rows; "
                         f"got query labels of shape {_shape(labels)}")
    if labels.is_complex():
        raise TypeError(f"per_class groups the queries by equal label and needs real labels; got {labels.dtype}")
    if labels.is_floating_point() and bool(torch.isnan(labels).any()):
        raise ValueError("per_class groups the queries by equal label; NaN labels equal nothing, not even "
                         "themselves: give every query a label without NaN")


def check_cutoffs(keys, n_gallery: int) -> None:
    """No integer cutoff beyond the gallery.

    Example:
        >>> from retrieval_core import parse_metrics
        >>> check_cutoffs(parse_metrics(["cmc@1", "precision@6"]), 5)
        Traceback (most recent call last):
        ...
        ValueError: k is larger than the gallery (5 items) in precision@6
    """
    big = [m.key for m in keys if isinstance(m.cutoff, int) and m.cutoff > n_gallery]
    if big:
        raise ValueError(f"k is larger than the gallery ({n_gallery} items) in {', '.join(big)}")


def check_backend(backend, *, distance, custom: bool, labels: Tensor, device: torch.device, whole: bool) -> None:
    """``"torch"``, or ``"faiss"`` where it applies (``whole``: whole-list keys asked)."""
    if backend not in BACKENDS:
        raise ValueError(f"backend must be 'torch' or 'faiss'; got {backend!r}")
    if backend == "faiss":
        if callable(distance) or distance == "hamming" or custom or labels.ndim != 1:
            raise ValueError("backend='faiss' needs cosine, dot or euclidean distances and 1-D class labels")
        if device.type != "cpu" or whole:
            raise ValueError("backend='faiss' runs on CPU tensors and takes no whole-list keys (map, mrr, ndcg, auroc...)")


# -- embedding mode: values (read from the data, once per evaluation) -----------------------


def check_embedding_values(
    query: Tensor, query_labels: Tensor, gallery: Optional[Tensor] = None, gallery_labels: Optional[Tensor] = None,
    *, distance="cosine", custom: bool = False,
) -> None:
    """Finite embeddings, binary codes for hamming, 0/1 multi-hot labels
    (``gallery=None``: the query set is its own gallery).

    Example:
        >>> check_embedding_values(torch.tensor([[0.0, float("nan")]]), torch.tensor([0]))
        Traceback (most recent call last):
        ...
        ValueError: query embeddings contain NaN or inf
    """
    sides = [("query", query, "query_labels", query_labels)]
    if gallery is not None:
        sides.append(("gallery", gallery, "gallery_labels", gallery_labels))
    for name, x, _, _ in sides:
        if x.is_floating_point() and not bool(torch.isfinite(x).all()):
            raise ValueError(f"{_contains(name + ' embeddings')} NaN or inf")
    if distance == "hamming":
        for name, x, _, _ in sides:
            if not (bool(((x == 0) | (x == 1)).all()) or bool(((x == -1) | (x == 1)).all())):
                raise ValueError(f"distance='hamming' needs binary codes in {{0, 1}} or {{-1, 1}}; {name} has other values")
    if not custom and query_labels.ndim == 2:
        for _, _, name, labels in sides:
            if labels.dtype != torch.bool and not bool(((labels == 0) | (labels == 1)).all()):
                raise ValueError(f"{name} as multi-hot [N, classes] must hold only 0 and 1")


# -- intervals, per-query values, neighbours (docs/statistics.md) ----------------------

CI_METHODS = ("bootstrap", "beta")


def check_level(ci, or_none: str = "") -> float:
    """An interval level in (0, 1) (``or_none``: how the message says None is allowed).

    Example:
        >>> check_level(1.5)
        Traceback (most recent call last):
        ...
        ValueError: ci must be a level in (0, 1) such as 0.95; got 1.5
    """
    if isinstance(ci, bool) or not isinstance(ci, numbers.Real) or not 0.0 < float(ci) < 1.0:
        raise ValueError(f"ci must be a level in (0, 1) such as 0.95{or_none}; got {ci!r}")
    return float(ci)


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


def check_resampling(n_resamples, seed) -> None:
    """A positive int of resamples and a seed (:func:`check_seed`)."""
    if isinstance(n_resamples, bool) or not isinstance(n_resamples, numbers.Integral) or n_resamples < 1:
        raise ValueError(f"n_resamples must be a positive int; got {n_resamples!r}")
    check_seed(seed)


def check_ci_options(ci, ci_method: str = "bootstrap", n_resamples: int = 1000, seed: int = 0,
                     reduce: str = "mean", per_class=None, compact: bool = False) -> Optional[float]:
    """Check the interval options; returns the level as a float (None: no interval).

    Example:
        >>> check_ci_options(0.95)
        0.95
        >>> check_ci_options(1.5)
        Traceback (most recent call last):
        ...
        ValueError: ci must be a level in (0, 1) such as 0.95, or None; got 1.5
    """
    if ci is None:
        return None
    check_level(ci, ", or None")
    if ci_method not in CI_METHODS:
        raise ValueError(f"ci_method must be one of {list(CI_METHODS)}; got {ci_method!r}")
    check_resampling(n_resamples, seed)
    if reduce == "none":
        raise ValueError("ci needs reduced values; reduce='none' returns per-query values (use keep_per_query=True "
                         "with a reduction instead)")
    if ci_method == "beta" and reduce != "mean":
        raise ValueError(f"ci_method='beta' is an interval of the mean (a rate); got reduce={reduce!r}")
    if compact:
        raise ValueError("ci needs the per-query values; compact=True keeps only sums and counts")
    if per_class is not None and ci_method == "beta":
        raise ValueError(f"ci_method='beta' is not available with per_class={per_class!r} (a mean of per-class "
                         "rates is not a rate); use ci_method='bootstrap'")
    return float(ci)


def check_stats_options(keys, *, ci=None, ci_method: str = "bootstrap", n_resamples: int = 1000, seed: int = 0,
                        keep_per_query: bool = False, reduce: str = "mean", per_class=None,
                        compact: bool = False) -> dict:
    """The interval and per-query options with the (parsed) ``keys`` they apply to, as
    the core's evaluations and every adapter take them; returns them as the keyword
    arguments of :func:`~retrieval_core.aggregate.aggregate` (no per-query values
    kept under ``compact``).

    Example:
        >>> from retrieval_core.registry import parse_metrics
        >>> check_stats_options(parse_metrics(["cmc@1"]), ci=0.9, ci_method="beta")["ci"]
        0.9
    """
    check_ci_options(ci, ci_method, n_resamples, seed, reduce, per_class, compact)
    check_seed(seed)  # also without an interval: a bad seed is an error whatever else is asked
    check_ci_keys(keys, ci, ci_method)
    return dict(ci=ci, ci_method=ci_method, n_resamples=n_resamples, seed=seed,
                keep_per_query=check_keep_per_query(keep_per_query) and not compact)


def check_keep_per_query(keep_per_query) -> bool:
    if not isinstance(keep_per_query, bool):
        raise TypeError(f"keep_per_query must be a bool; got {keep_per_query!r}")
    return keep_per_query


def check_return_neighbours(k, n_gallery: Optional[int] = None) -> int:
    """``return_neighbours``: None/0 (none) or a positive int at most the gallery size."""
    if k is None:
        return 0
    if isinstance(k, bool) or not isinstance(k, numbers.Integral) or k < 0:
        raise ValueError(f"return_neighbours must be a positive int (neighbours per query) or None; got {k!r}")
    if n_gallery is not None and k > n_gallery:
        raise ValueError(f"return_neighbours={k} exceeds the gallery size {n_gallery}")
    return int(k)


def check_ci_keys(keys, ci, ci_method: str) -> None:
    """``ci_method="beta"`` takes keys whose per-query values are 0 or 1 only
    (``MetricKey.binary``: hit_rate@k/cmc@k, precision@1, mrr@1...).

    Example:
        >>> from retrieval_core.registry import parse_metrics
        >>> check_ci_keys(parse_metrics(["cmc@5", "map@r"]), 0.9, "beta")
        Traceback (most recent call last):
        ...
        ValueError: ci_method='beta' needs metrics whose per-query values are 0 or 1 (hit_rate@k/cmc@k, precision@1, mrr@1...); 'map@r' is not; use ci_method='bootstrap'
    """
    if ci is None or ci_method != "beta":
        return
    bad = [m.key for m in keys if m.spec.per_query and not m.binary]
    if bad:
        raise ValueError(
            f"ci_method='beta' needs metrics whose per-query values are 0 or 1 (hit_rate@k/cmc@k, precision@1, "
            f"mrr@1...); {', '.join(map(repr, bad))} {'is' if len(bad) == 1 else 'are'} not; "
            "use ci_method='bootstrap'"
        )
