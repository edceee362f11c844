"""Gathering evaluation state across processes (torch.distributed), for every adapter.

Ranks may hold different numbers of rows, or none at all (a rank that saw no
batch): sizes are exchanged first, rows padded to the largest count, gathered and
trimmed, so the collective never sees unequal shapes and never hangs. Rows travel
as their raw bytes (``uint8``), which every backend can move, whatever the dtype
(gloo cannot move ``int16`` or ``uint16/32/64`` itself); dtype and values come
back exactly. Without an initialised process group everything is the identity.

:func:`evaluate_embeddings` divides an embedding evaluation between the ranks:
each evaluates its own queries (against the gathered gallery, or against every
rank's gallery shard with ``shard_gallery=True``) and only the per-query values
travel; every rank then aggregates the same values. :func:`evaluate_split` is
its form for state that every rank already holds whole (the adapters' gathered
states): each rank takes a contiguous share of the queries. :func:`agree` runs a
local step on every rank and raises the same error on every rank when it failed
on any, so no rank is left waiting in a later collective.
"""
from __future__ import annotations

import json
import math
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import torch
import torch.distributed as dist
from torch import Tensor

from .agreement import disagreement, option_texts

__all__ = ["world_size", "gather_per_rank", "gather_cat", "all_reduce_sum", "drop_duplicates", "row_rtol", "ROW_TOL",
           "agree", "agree_options", "evaluate_embeddings", "evaluate_split"]

_MAX_DIMS = 8
# every dtype a state may hold; the index is what ranks exchange (uint16/32/64: torch >= 2.3)
_DTYPES = tuple(d for d in (
    torch.bool, torch.uint8, getattr(torch, "uint16", None), getattr(torch, "uint32", None),
    getattr(torch, "uint64", None), torch.int8, torch.int16, torch.int32, torch.int64,
    torch.float16, torch.bfloat16, torch.float32, torch.float64, torch.complex64, torch.complex128,
) if d is not None)


def world_size(group=None) -> int:
    if not (dist.is_available() and dist.is_initialized()):
        return 1
    return dist.get_world_size(group)


def rank_of(group=None) -> int:
    """This process's rank in ``group`` (0 without a process group)."""
    return dist.get_rank(group) if world_size(group) > 1 else 0


def _shape_code(t: Tensor) -> Tensor:
    if t.ndim > _MAX_DIMS - 2:
        raise ValueError(f"gather_cat takes tensors of at most {_MAX_DIMS - 2} dimensions; got {t.ndim}")
    if t.dtype not in _DTYPES:
        raise TypeError(f"gather_cat cannot move tensors of dtype {t.dtype}; expected one of {list(_DTYPES)}")
    code = [t.numel(), _DTYPES.index(t.dtype), t.ndim, *t.shape]
    return torch.tensor(code + [0] * (_MAX_DIMS + 1 - len(code)), dtype=torch.int64, device=t.device)


def gather_per_rank(tensor: Tensor, group=None) -> List[Tensor]:
    """Rows of ``tensor`` on each rank: one tensor per rank, in rank order.

    Sizes may differ between ranks, and a rank may hold no rows (any empty tensor,
    e.g. a 1-D float placeholder); such a rank's entry has zero rows with the dtype
    and trailing dimensions of the ranks that hold data. Any dtype (bool, unsigned,
    16-bit) comes back exact. This is also the contract of torchmetrics'
    ``dist_sync_fn`` (called as ``fn(tensor, group=...)``).

    Example:
        >>> [t.tolist() for t in gather_per_rank(torch.arange(3))]  # one process
        [[0, 1, 2]]
    """
    n = world_size(group)
    if n == 1:
        return [tensor]
    if tensor.ndim == 0:  # one value per rank (e.g. a summed count)
        return [t.reshape(()) for t in gather_per_rank(tensor.reshape(1), group)]
    codes = [torch.empty(_MAX_DIMS + 1, dtype=torch.int64, device=tensor.device) for _ in range(n)]
    dist.all_gather(codes, _shape_code(tensor), group=group)
    codes = torch.stack(codes).tolist()
    filled = [c for c in codes if c[0] > 0]
    if not filled:
        return [tensor for _ in range(n)]
    _, dtype_i, ndim, *dims = filled[0]
    dtype, trailing = _DTYPES[dtype_i], dims[1:ndim]
    for c in filled:
        if c[1:3] != [dtype_i, ndim] or c[4:3 + ndim] != trailing:
            raise ValueError(
                "ranks hold states of different dtypes or trailing shapes; got "
                f"{[(_DTYPES[k[1]], tuple(k[3:3 + k[2]])) for k in filled]}"
            )
    rows = [c[3] if c[0] > 0 else 0 for c in codes]
    local = tensor.reshape(-1, *trailing) if tensor.numel() else tensor.new_zeros((0, *trailing), dtype=dtype)
    row_bytes = math.prod(trailing) * local.element_size()
    as_bytes = local.contiguous().reshape(-1).view(torch.uint8).reshape(-1, row_bytes)
    padded = torch.zeros((max(rows), row_bytes), dtype=torch.uint8, device=tensor.device)
    padded[: as_bytes.shape[0]] = as_bytes
    out = [torch.empty_like(padded) for _ in range(n)]
    dist.all_gather(out, padded, group=group)
    return [o[:r].reshape(-1).view(dtype).reshape(r, *trailing) for o, r in zip(out, rows)]


def gather_cat(tensor: Tensor, group=None) -> Tensor:
    """Rows of ``tensor`` from every rank, concatenated in rank order
    (see :func:`gather_per_rank`: uneven sizes, ranks without rows, any dtype).

    Example:
        >>> gather_cat(torch.arange(3)).tolist()  # one process: the identity
        [0, 1, 2]
    """
    if world_size(group) == 1:
        return tensor
    return torch.cat(gather_per_rank(tensor, group))


def all_reduce_sum(tensor: Tensor, group=None) -> Tensor:
    """The sum over ranks (a copy; the identity without a process group)."""
    if world_size(group) == 1:
        return tensor
    out = tensor.clone()
    dist.all_reduce(out, op=dist.ReduceOp.SUM, group=group)
    return out


# Floating rows of one id are the same row when every pair of entries is within a
# few units of the dtype's precision of each other, entry by entry: a padding
# sample recomputed in another batch (GPU kernels chosen by the batch shape) differs
# at rounding level only, and a tolerance relative to each entry (not to the row's
# largest entry) never lets a dominant feature, an offset or a scale hide the
# difference between two items. 16-bit floats: one unit (their rounding flip).
_SHOWN_IDS = 5


# Tolerance of drop_duplicates, relative to a row's largest magnitude: a repeat recomputed
# in another batch (other kernels, other summation order) differs by rounding, far below it.
ROW_TOL = 2.0**-16
ROW_TOL_16 = {torch.float16: 2.0**-8, torch.bfloat16: 2.0**-5}  # a few units of their last place


def row_rtol(dtype: torch.dtype) -> float:
    """The tolerance of :func:`drop_duplicates` for rows of ``dtype``, relative to the
    row's largest finite magnitude: ``ROW_TOL`` (2^-16) for 32- and 64-bit floats, a
    few units of the last place for 16-bit ones.

    Example:
        >>> row_rtol(torch.float32) == 2.0**-16, row_rtol(torch.bfloat16)
        (True, 0.03125)
    """
    return ROW_TOL_16.get(dtype, ROW_TOL)


_CHUNK_ELEMENTS = 1 << 24  # rows compared per step: bounded temporaries (64 MiB of float32)


def _rows_differ(a: Tensor, other: Tensor, exact: bool = False) -> Tensor:
    """``[n]`` bool: row ``i`` of ``a`` differs from row ``other[i]``. Integers and
    bools: any entry. Floats: NaN equals NaN, infinities must match, and every other
    pair ``x, y`` must satisfy ``|x - y| <= row_rtol(dtype) * m``, ``m`` the largest
    finite magnitude in the two rows (``exact``: ``x == y``)."""
    n = a.shape[0]
    flat = a.reshape(n, -1)
    if flat.shape[1] == 0:
        return torch.zeros(n, dtype=torch.bool, device=a.device)
    step = max(1, _CHUNK_ELEMENTS // flat.shape[1])
    return torch.cat([_chunk_differs(flat[i:i + step], flat[other[i:i + step]], exact) for i in range(0, n, step)])


def _chunk_differs(x: Tensor, y: Tensor, exact: bool = False) -> Tensor:
    if not (x.is_floating_point() or x.is_complex()):
        return (x != y).any(1)
    if exact:
        return ((x != y) & ~(torch.isnan(x) & torch.isnan(y))).any(1)
    rtol = row_rtol(x.dtype)
    if x.is_floating_point() and x.element_size() < 4:
        x, y = x.float(), y.float()  # exact: every 16-bit value is a float32
    equal = (x == y) | (torch.isnan(x) & torch.isnan(y))
    gap = torch.nan_to_num((x - y).abs(), nan=float("inf")).masked_fill_(equal, 0.0)  # NaN or inf against a number: inf
    # relative to the rows' largest finite magnitude (an infinity against a number differs)
    scale = torch.nan_to_num(torch.maximum(x.abs(), y.abs()), nan=0.0, posinf=0.0).amax(1, keepdim=True)
    return (gap > rtol * scale).any(1)


def drop_duplicates(ids: Tensor, *arrays: Tensor, names: Optional[Sequence[str]] = None,
                    max_repeats: Optional[int] = None) -> Tuple[Tensor, ...]:
    """Keep one row per id: DistributedSampler pads by repeating samples, and a
    repeated sample repeats its row, which is dropped.

    Returns ``ids`` and ``arrays`` restricted to the first row of each id, in
    increasing id order. Rows of one id must be the same in every array (integers
    and bools exactly; floats entry by entry, NaN equal to NaN, within
    :func:`row_rtol` of the rows' largest magnitude: a repeat recomputed in another
    batch differs by rounding); otherwise the ids do not identify items (e.g.
    counted from 0 in every batch) and a ``ValueError`` names some of them
    (``names``: what each array is, for that message). A repeat with the same bits
    is always dropped. A repeat that is close but not the same (a copy recomputed in
    another batch) is one only padding makes: ``max_repeats`` bounds how many there
    may be (DistributedSampler pads ``world size - 1`` samples at most, each one row
    when a row is a sample), and more is a ``ValueError`` too, so that no tolerance
    can hide ids that do not identify items (a dominant feature, an offset).
    Vectorised; one host sync (plus none when ``ids`` is empty).

    Example:
        >>> ids, v = drop_duplicates(torch.tensor([4, 1, 4]), torch.tensor([5, 1, 5]))
        >>> ids.tolist(), v.tolist()
        ([1, 4], [1, 5])
        >>> drop_duplicates(torch.tensor([4, 1, 4]), torch.tensor([5, 1, 9]), names=["labels"])
        Traceback (most recent call last):
        ...
        ValueError: id 4 repeats with different rows (labels: 1 row); ids must identify dataset items (DistributedSampler padding repeats the same row, which is dropped)
    """
    n = ids.numel()
    if n == 0:
        return (ids, *arrays)
    device = ids.device
    sorted_ids, order = torch.sort(ids, stable=True)
    starts = torch.ones(n, dtype=torch.bool, device=device)
    starts[1:] = sorted_ids[1:] != sorted_ids[:-1]
    group = torch.cumsum(starts, 0) - 1  # group (distinct id) of each sorted row, in id order
    positions = torch.arange(n, device=device)
    first_sorted = torch.cummax(torch.where(starts, positions, 0), 0).values
    # for each original row: its group, and the original index of its group's first row
    group_of_row = torch.empty_like(group).scatter_(0, order, group)
    first_of_row = torch.empty_like(order).scatter_(0, order, order[first_sorted])
    differs = [_rows_differ(a, first_of_row) for a in arrays]
    any_differs = torch.stack(differs).any(0) if differs else torch.zeros(n, dtype=torch.bool, device=device)
    # repeats that are close but not the same bits: recomputed copies, which only padding makes
    inexact = torch.stack([_rows_differ(a, first_of_row, exact=True) for a in arrays]).any(0).sum() \
        if arrays else torch.zeros((), dtype=torch.int64, device=device)
    bad_group = torch.zeros(n, dtype=torch.int64, device=device).scatter_reduce(
        0, group_of_row, any_differs.to(torch.int64), "amax")
    group_ids = torch.zeros_like(sorted_ids).scatter_(0, group, sorted_ids)
    sentinel = torch.iinfo(torch.int64).max
    shown = torch.topk(torch.where(bad_group > 0, group_ids.to(torch.int64), sentinel),
                       min(_SHOWN_IDS, n), largest=False).values
    counts = torch.stack([d.sum() for d in differs]) if differs else torch.zeros(0, dtype=torch.int64, device=device)
    summary = torch.cat([starts.sum().view(1), bad_group.sum().view(1), inexact.view(1), counts, shown]).tolist()
    n_keep, n_bad, n_inexact = summary[:3]
    if max_repeats is not None and n_inexact > max_repeats and not n_bad:
        raise ValueError(
            f"{n_inexact} row{'s repeat' if n_inexact > 1 else ' repeats'} an id with values close to but not the same "
            f"as its first row's, more than the {max_repeats} recomputed copies that DistributedSampler's padding "
            f"can add over {max_repeats + 1} process{'es' if max_repeats else ''}: ids must identify dataset items "
            "(for example the dataset index of each sample, not a position counted from 0 in every batch)")
    if n_bad:
        counts, shown = summary[3:3 + len(arrays)], summary[3 + len(arrays):][: min(n_bad, _SHOWN_IDS)]
        labels = list(names) if names is not None else [f"array {i}" for i in range(len(arrays))]
        where = ", ".join(f"{lab}: {c} row{'s' if c > 1 else ''}" for lab, c in zip(labels, counts) if c)
        listed = ", ".join(map(str, shown)) + (f" and {n_bad - len(shown)} more" if n_bad > len(shown) else "")
        subject = f"ids {listed} repeat" if n_bad > 1 else f"id {listed} repeats"
        raise ValueError(
            f"{subject} with different rows ({where}); ids must identify dataset items "
            "(DistributedSampler padding repeats the same row, which is dropped)"
        )
    keep = torch.full((n_keep,), n, dtype=torch.int64, device=device).scatter_reduce(0, group, order, "amin")
    return (ids[keep], *(a[keep] for a in arrays))


# -- agreement: the same error on every rank ------------------------------------------

# exceptions re-raised with their own type on the ranks where they did not happen
_RAISED = {t.__name__: t for t in (ValueError, TypeError, NotImplementedError, ImportError, RuntimeError)}


def _comm_device(hint, group) -> torch.device:
    """Where the small exchanges of this module live: ``hint``'s device, else the
    backend's (nccl moves CUDA tensors only)."""
    if isinstance(hint, Tensor):
        return hint.device
    if dist.get_backend(group) == "nccl":
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


def exchange_text(text: str, group=None, device=None) -> List[str]:
    """Every rank's ``text``, in rank order (one gather of its UTF-8 bytes).

    Example:
        >>> exchange_text("hello")  # one process
        ['hello']
    """
    if world_size(group) == 1:
        return [text]
    data = torch.tensor(list(text.encode("utf-8")), dtype=torch.uint8, device=device)
    return [bytes(t.tolist()).decode("utf-8") for t in gather_per_rank(data, group)]


def agree(fn: Callable[[], Tuple[Any, Any]], *, group=None, device=None, options: Optional[Dict[str, Any]] = None,
          what: str = "distributed") -> Tuple[Any, List[Any]]:
    """Run ``fn() -> (result, info)`` on every rank (``fn`` itself holds no
    collective); returns ``(result, [info of each rank])`` (``info``: anything JSON
    writes). When ``fn`` raised on any rank, every rank raises: a rank's own
    exception when it raised on every rank, else the first failing rank's error
    with its type (ValueError, TypeError, ... ; RuntimeError for others) and
    message, plus ``(raised on rank r of n)``.

    ``options`` (``{name: value}``) travel in the same exchange: when they differ
    between ranks, every rank raises a ``ValueError`` (rank 0's ``what`` first) naming
    each option that differs and its value on each rank, before ``fn``'s errors
    (see :mod:`retrieval_core.agreement`).

    Example:
        >>> agree(lambda: (3, {"rows": 3}))  # one process
        (3, [{'rows': 3}])
    """
    n = world_size(group)
    if n == 1:
        result, info = fn()
        return result, [info]
    texts = None if options is None else [what, option_texts(options)]  # before fn: a bad value still shows
    error: Optional[Exception] = None
    try:
        result, info = fn()
    except Exception as exc:  # noqa: BLE001 - every rank learns of it and raises
        result, info, error = None, None, exc
    mine = json.dumps([None if error is None else [type(error).__name__, str(error)], info, texts])
    every = [json.loads(t) for t in exchange_text(mine, group, device)]
    # rank 0's words, so that the message is the same on every rank
    differ = disagreement([o and o[1] for _, _, o in every], (every[0][2] or [what])[0]) if options else None
    if differ:
        raise ValueError(differ) from error
    failed = [(r, e) for r, (e, _, _) in enumerate(every) if e is not None]
    if failed:
        if error is not None and len(failed) == n:
            raise error
        r, (name, message) = failed[0]
        text = f"{message} (raised on rank {r} of {n})"
        kind = _RAISED.get(name)
        raise (kind(text) if kind is not None else RuntimeError(f"{name}: {text}")) from error
    return result, [i for _, i, _ in every]


def agree_options(options: Dict[str, Any], *, what: str, group=None, device=None) -> None:
    """Raise the same ``ValueError`` on every rank when ``options`` differ between
    ranks (one exchange; nothing without a process group). Call it before any
    collective whose shape depends on them.

    Example:
        >>> agree_options({"ties": "stable", "k": [1, 5]}, what="MyMetric")  # one process: nothing to compare
    """
    if world_size(group) > 1:
        device = torch.device(device) if device is not None else _comm_device(None, group)
        agree(lambda: (None, None), group=group, device=device, options=options, what=what)


def _from_rank0(value: Optional[Tensor], group, device) -> Tensor:
    """Rank 0's 0-d ``value`` on every rank (exact, any dtype)."""
    mine = value.reshape(1) if value is not None else torch.empty(0, dtype=torch.float64, device=device)
    return gather_per_rank(mine, group)[0].reshape(())


def _gather_categories(categories, group):
    if categories is None or world_size(group) == 1:
        return categories
    if isinstance(categories, Tensor):
        return gather_cat(categories, group)
    every: List[Any] = [None] * world_size(group)
    dist.all_gather_object(every, list(categories), group=group)
    return [c for part in every for c in part]


# -- evaluation divided between ranks ---------------------------------------------------

def _share(n: int, rank: int, world: int) -> slice:
    """Rank ``rank``'s contiguous share of ``n`` rows (sizes differ by at most one)."""
    return slice(n * rank // world, n * (rank + 1) // world)


def _share_values(query, query_labels, query_keys, gallery, gallery_labels, query_ids, gallery_ids, options,
                  show: bool, neighbours: Optional[list] = None) -> Tensor:
    """``[q, M]`` per-query values of this rank's queries against the whole gallery
    (the single-process evaluator with ``reduce="none"``; NaN = undefined). With
    ``neighbours`` (a list), appends this rank's ``(ids or positions, scores)``."""
    from .embeddings import evaluate_embeddings as evaluate_one

    k = options.get("return_neighbours") or 0
    if query.shape[0] == 0:
        if neighbours is not None and k:
            neighbours.append((torch.empty(0, k, dtype=torch.int64, device=query.device),
                               torch.empty(0, k, dtype=torch.float64, device=query.device)))
        return torch.empty(0, len(query_keys), dtype=torch.float64, device=query.device)
    r = evaluate_one(
        query, query_labels, query_keys, gallery=gallery, gallery_labels=gallery_labels, query_ids=query_ids,
        gallery_ids=gallery_ids, distance=options["distance"], relevance=options["relevance"], ties=options["ties"],
        empty="skip", reduce="none", memory_budget=options["memory_budget"], progress=show,
        backend=options["backend"], return_neighbours=k if neighbours is not None and k else None,
    )
    if neighbours is not None and k:
        neighbours.append(r.neighbours)
    return torch.stack([r[m.key] for m in query_keys], 1)


def _set_values(set_keys, query, query_labels, query_ids, gallery, gallery_labels, gallery_ids,
                options) -> Dict[str, Tensor]:
    """The set-level values of the whole evaluation (rank 0 computes them)."""
    from .embeddings import evaluate_embeddings as evaluate_one

    r = evaluate_one(
        query, query_labels, set_keys, gallery=gallery, gallery_labels=gallery_labels, query_ids=query_ids,
        gallery_ids=gallery_ids, distance=options["distance"], relevance=options["relevance"], ties=options["ties"],
        memory_budget=options["memory_budget"], backend=options["backend"],
    )
    return {m.key: r[m.key] for m in set_keys}


def _combine(keys, values: Optional[Tensor], set_values: Optional[Dict[str, Tensor]], n_queries: int, *,
             all_labels: Optional[Tensor], categories, options, group, device, per_query_ids=None,
             neighbours=None, confidence: Optional[Tensor] = None):
    """Gather the per-query values (rank order = global query order), aggregate them
    as one process does, and take rank 0's set-level values: the same on every rank."""
    from .aggregate import MetricResults
    from .embeddings import aggregate_queries
    from .registry import split_scopes

    query_keys, set_keys = split_scopes(keys)
    results = MetricResults(n_queries=torch.tensor(n_queries))
    if query_keys:
        results = aggregate_queries(
            gather_cat(values, group), [m.key for m in query_keys], all_labels, empty=options["empty"],
            reduce=options["reduce"], per_class=options["per_class"], categories=categories, confidence=confidence,
            ties=options["ties"], ci=options["ci"], ci_method=options["ci_method"], n_resamples=options["n_resamples"],
            seed=options["seed"], keep_per_query=options["keep_per_query"], query_ids=per_query_ids)
    for m in set_keys:
        results[m.key] = _from_rank0(None if set_values is None else set_values[m.key], group, device)
    ordered = results.reordered([m.key for m in keys])
    if neighbours:
        ordered.neighbours = (gather_cat(neighbours[0][0], group), gather_cat(neighbours[0][1], group))
    return ordered


def _evaluate_share(keys, query, query_labels, query_ids, *, gallery, gallery_labels, gallery_ids, self_gallery: bool,
                    all_query, all_labels, all_ids, categories, n_queries: int, options, group, device,
                    per_query_ids=None, confidence: Optional[Tensor] = None):
    """This rank's queries against the whole gallery (held by every rank), rank 0's
    set-level values, then :func:`_combine`."""
    from .registry import split_scopes

    query_keys, set_keys = split_scopes(keys)
    rank = rank_of(group)

    neighbours: list = []

    def local():
        values = None
        neighbours.clear()
        if query_keys:
            values = _share_values(query, query_labels, query_keys, gallery, gallery_labels, query_ids, gallery_ids,
                                   options, show=bool(options["progress"]) and rank == 0, neighbours=neighbours)
        set_values = None
        if set_keys and rank == 0:
            set_values = _set_values(set_keys, all_query, all_labels, all_ids, None if self_gallery else gallery,
                                     None if self_gallery else gallery_labels,
                                     None if self_gallery else gallery_ids, options)
        return (values, set_values), None

    (values, set_values), _ = agree(local, group=group, device=device)
    return _combine(keys, values, set_values, n_queries, all_labels=all_labels, categories=categories,
                    options=options, group=group, device=device, per_query_ids=per_query_ids,
                    neighbours=neighbours, confidence=confidence)


def _options(distance, relevance, ties, empty, reduce, per_class, memory_budget, progress, backend,
             stats: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
    return dict(distance=distance, relevance=relevance, ties=ties, empty=empty, reduce=reduce, per_class=per_class,
                memory_budget=memory_budget, progress=progress, backend=backend, **(stats or {}))


def _agreed(metrics, options, **more) -> Dict[str, Any]:
    """What every rank must pass alike: the metrics (in order) and every option but
    ``progress`` (which only decides who prints); the other arguments are data."""
    if isinstance(metrics, str):
        metrics = [metrics]
    if isinstance(metrics, (list, tuple)):
        metrics = [getattr(k, "key", k) for k in metrics]  # parsed keys (MetricKey) by their text
    return dict(metrics=metrics, **{k: v for k, v in options.items() if k != "progress"}, **more)


def _check_local(query, query_labels, metrics, gallery, gallery_labels, query_ids, gallery_ids, categories,
                 shard_gallery, options, confidence=None):
    """This rank's inputs, checked as the single-process evaluator checks them
    (zero rows allowed): ``(checked inputs, signature for the other ranks)``."""
    from .registry import depth_needed, parse_metrics, split_scopes
    from .validate import (
        check_backend, check_categories, check_confidence, check_embedding_values,
        check_embeddings,
        check_labels, check_pairs, check_per_class, check_query_gallery, check_rows, check_same_device,
    )

    distance, relevance = options["distance"], options["relevance"]
    keys = parse_metrics(metrics)
    _check_options(keys, options)
    _check_shard_options(keys, options, shard_gallery)
    custom = relevance is not None
    check_pairs(gallery, gallery_labels, query_ids, gallery_ids)
    query = check_embeddings("query", query, distance, batch=True)
    query_labels = check_labels("query_labels", query_labels, query.shape[0], custom)
    if query_ids is not None:
        query_ids = check_rows("query_ids", query_ids, query.shape[0], unit="embedding")
    if gallery is not None:
        gallery = check_embeddings("gallery", gallery, distance, batch=True)
        gallery_labels = check_labels("gallery_labels", gallery_labels, gallery.shape[0], custom)
        check_query_gallery(query, query_labels, gallery, gallery_labels, custom)
        if gallery_ids is not None:
            gallery_ids = check_rows("gallery_ids", gallery_ids, gallery.shape[0], unit="embedding")
    check_same_device(query=query, query_labels=query_labels, gallery=gallery, gallery_labels=gallery_labels,
                      query_ids=query_ids, gallery_ids=gallery_ids)
    check_backend(options["backend"], distance=distance, custom=custom, labels=query_labels, device=query.device,
                  whole=depth_needed(split_scopes(keys)[0])[2])
    check_per_class(options["per_class"], query_labels, custom)
    if categories is not None:
        check_categories(categories, query.shape[0], "query")
    if confidence is not None:
        confidence = check_confidence(confidence, query.shape[0], "query").to(query.device)
    check_embedding_values(query, query_labels, gallery, gallery_labels, distance=distance, custom=custom)
    signature = {
        "rows": query.shape[0], "gallery_rows": None if gallery is None else gallery.shape[0],
        "dim": query.shape[1], "labels": list(query_labels.shape[1:]),
        "dtype": str(query.dtype), "label_dtype": str(query_labels.dtype),
        "gallery": gallery is not None, "ids": query_ids is not None,
        "categories": None if categories is None else ("tensor" if isinstance(categories, Tensor) else "labels"),
        "confidence": confidence is not None,
    }
    return (keys, query, query_labels, query_ids, gallery, gallery_labels, gallery_ids, confidence), signature


def _check_options(keys, options) -> None:
    """The options of the single-process evaluator, checked as it checks them."""
    from .validate import check_embedding_options, check_stats_options

    check_embedding_options(distance=options["distance"], relevance=options["relevance"], ties=options["ties"],
                            empty=options["empty"], reduce=options["reduce"], per_class=options["per_class"],
                            memory_budget=options["memory_budget"], backend=options["backend"], keys=keys)
    check_stats_options(keys, ci=options["ci"], ci_method=options["ci_method"], n_resamples=options["n_resamples"],
                        seed=options["seed"], keep_per_query=options["keep_per_query"], reduce=options["reduce"],
                        per_class=options["per_class"])


def _check_shard_options(keys, options, shard_gallery) -> None:
    """``shard_gallery``: a bool; when True, what a gallery split over processes cannot do."""
    from .validate import check_return_neighbours

    if not isinstance(shard_gallery, bool):
        raise TypeError(f"shard_gallery must be a bool; got {shard_gallery!r}")
    if not shard_gallery:
        return
    _check_shardable(keys, options["backend"])
    if check_return_neighbours(options["return_neighbours"]):
        raise ValueError("return_neighbours needs shard_gallery=False (the ranks' shards are merged, not kept)")
    if options["ties"] != "stable":
        raise NotImplementedError(f"ties={options['ties']!r} is not available with shard_gallery=True on several "
                                  "processes; use ties='stable', or a gallery gathered to every process")


def _check_signatures(signatures: List[Dict[str, Any]]) -> None:
    """What must agree between ranks (so that every rank enters the same collectives)."""
    for field, what in (("gallery", "a gallery"), ("ids", "query_ids (and gallery_ids)"),
                        ("categories", "categories"), ("confidence", "confidence")):
        got = [s[field] for s in signatures]
        if len(set(map(str, got))) > 1:
            raise ValueError(f"every rank must pass {what} or none; per rank: {got}")
    for field, what in (("dim", "the embedding dimension"), ("labels", "the label shape past the first dimension"),
                        ("dtype", "the query dtype"), ("label_dtype", "the query label dtype")):
        got = {r: s[field] for r, s in enumerate(signatures) if s["rows"] or s["gallery_rows"]}
        if len(set(map(str, got.values()))) > 1:
            raise ValueError(f"ranks holding rows must agree on {what}; per rank: {got}")


def _check_shardable(keys, backend) -> None:
    from .registry import split_scopes

    query_keys, set_keys = split_scopes(keys)
    whole = [m.key for m in query_keys if m.cutoff is None]
    if whole:
        raise ValueError(
            f"shard_gallery=True ranks each query's top candidates only; whole-list keys ({', '.join(whole)}) "
            "need the whole gallery per query: use shard_gallery=False"
        )
    if set_keys:
        raise ValueError(
            f"set-level keys ({', '.join(m.key for m in set_keys)}) need every embedding on one rank: "
            "use shard_gallery=False"
        )
    if backend != "torch":
        raise ValueError(f"shard_gallery=True searches with the torch backend; got backend={backend!r}")


def evaluate_embeddings(
    query: Tensor,
    query_labels: Tensor,
    metrics: Sequence[str],
    *,
    gallery: Optional[Tensor] = None,
    gallery_labels: Optional[Tensor] = None,
    query_ids: Optional[Tensor] = None,
    gallery_ids: Optional[Tensor] = None,
    group=None,
    shard_gallery: bool = False,
    distance="cosine",
    relevance=None,
    ties: str = "stable",
    empty: str = "skip",
    reduce: str = "mean",
    categories=None,
    per_class: Optional[str] = None,
    memory_budget: Optional[int] = None,
    progress: bool = False,
    backend: str = "torch",
    ci: Optional[float] = None,
    ci_method: str = "bootstrap",
    n_resamples: int = 1000,
    seed: int = 0,
    keep_per_query: bool = False,
    return_neighbours: Optional[int] = None,
    confidence: Optional[Tensor] = None,
):
    """:func:`retrieval_core.evaluate_embeddings` with the rows spread over the ranks
    of ``group``, the work divided between them.

    Each rank passes its own rows (``query``, labels, ids, categories, confidence and, unless
    the queries are their own gallery, ``gallery`` rows): sizes may differ, and a
    rank may pass zero rows (``[0, D]``). Every rank returns the same
    :class:`~retrieval_core.MetricResults` as the single-process call on the
    concatenation of all ranks' rows in rank order. Options as there, plus:

    * ``group``: the process group (default: the whole world). Without an
      initialised process group this is the single-process call.
    * ``shard_gallery``: False (default): the gallery is gathered to every rank and
      each rank evaluates its own queries against it. True: the gallery never
      leaves its rank; queries are broadcast chunk by chunk, each rank ranks them
      within its shard and the shards' candidates are merged (memory per rank: its
      shard plus one query chunk). Per-query keys cut at ``k`` or ``r`` only.

    With ``gallery=None`` every item is a query against all the others; without
    ``query_ids`` the items' global positions serve as ids (an item never
    retrieves itself). Per-query values equal one process's bit for bit (the
    stable order: score, then global gallery position); set-level keys (nmi, ami,
    pcf, fnmr) are computed once, on rank 0, and sent to every rank. Input errors
    are raised on every rank (see :func:`agree`), so no rank is left waiting.
    Every option but ``progress`` must be the same on every rank (compared in the
    same exchange): a difference is a ``ValueError`` on every rank naming it.
    ``ci`` intervals are computed after the gather, from the CPU generator of
    ``seed``: the same as one process's; ``keep_per_query`` and
    ``return_neighbours`` (``shard_gallery=False``) give one process's too.

    Example:
        >>> x = torch.tensor([[1.0, 0.0], [0.9, 0.1], [0.0, 1.0], [0.1, 0.9]])
        >>> r = evaluate_embeddings(x, torch.tensor([0, 0, 1, 1]), ["cmc@1", "map@r"])  # one process
        >>> r["cmc@1"].item(), r["map@r"].item()
        (1.0, 1.0)
    """
    from .embeddings import evaluate_embeddings as evaluate_one
    from .registry import parse_metrics, split_scopes

    options = _options(distance, relevance, ties, empty, reduce, per_class, memory_budget, progress, backend,
                       dict(ci=ci, ci_method=ci_method, n_resamples=n_resamples, seed=seed,
                            keep_per_query=keep_per_query, return_neighbours=return_neighbours))
    if world_size(group) == 1:
        if shard_gallery is not False:  # one process: the sharded mode's limits but the tie modes' apply
            _check_shard_options(parse_metrics(metrics), dict(options, ties="stable"), shard_gallery)
        return evaluate_one(query, query_labels, metrics, gallery=gallery, gallery_labels=gallery_labels,
                            query_ids=query_ids, gallery_ids=gallery_ids, categories=categories,
                            confidence=confidence, **options)
    device = _comm_device(query, group)
    checked, signatures = agree(
        lambda: _check_local(query, query_labels, metrics, gallery, gallery_labels, query_ids, gallery_ids,
                             categories, shard_gallery, options, confidence), group=group, device=device,
        options=_agreed(metrics, options, shard_gallery=shard_gallery), what="distributed.evaluate_embeddings")
    _check_signatures(signatures)
    keys, query, query_labels, query_ids, gallery, gallery_labels, gallery_ids, confidence = checked
    rows = [s["rows"] for s in signatures]
    n_queries, rank = sum(rows), rank_of(group)
    if n_queries == 0:  # what one process says of an empty query set, on every rank
        return evaluate_one(query, query_labels, metrics, gallery=gallery, gallery_labels=gallery_labels,
                            query_ids=query_ids, gallery_ids=gallery_ids, categories=categories,
                            confidence=confidence, **options)
    query_keys, set_keys = split_scopes(keys)
    self_gallery = gallery is None
    per_query_ids = gather_cat(query_ids, group) if keep_per_query and query_ids is not None else None
    if self_gallery and query_ids is None:  # global positions serve as ids
        start = sum(rows[:rank])
        query_ids = torch.arange(start, start + rows[rank], device=query.device)
    categories = _gather_categories(categories, group)
    if confidence is not None:  # per-query values and confidences travel in the same (rank) order
        confidence = gather_cat(confidence, group)
    if shard_gallery:
        from .sharded import sharded_values

        values = sharded_values(query, query_labels, query_keys, gallery=gallery, gallery_labels=gallery_labels,
                                query_ids=query_ids, gallery_ids=gallery_ids, signatures=signatures,
                                options=options, group=group, device=device)
        all_labels = gather_cat(query_labels, group) if per_class is not None else None
        return _combine(keys, values, None, n_queries, all_labels=all_labels, categories=categories,
                        options=options, group=group, device=device, per_query_ids=per_query_ids,
                        confidence=confidence)
    if self_gallery:
        gallery, gallery_labels, gallery_ids = (gather_cat(t, group) for t in (query, query_labels, query_ids))
        all_query, all_labels, all_ids = gallery, gallery_labels, gallery_ids
    else:
        gallery, gallery_labels = gather_cat(gallery, group), gather_cat(gallery_labels, group)
        gallery_ids = None if gallery_ids is None else gather_cat(gallery_ids, group)
        need_labels = bool(set_keys) or per_class is not None
        all_query = gather_cat(query, group) if set_keys else None
        all_labels = gather_cat(query_labels, group) if need_labels else None
        all_ids = gather_cat(query_ids, group) if set_keys and query_ids is not None else None
    return _evaluate_share(keys, query, query_labels, query_ids, gallery=gallery, gallery_labels=gallery_labels,
                           gallery_ids=gallery_ids, self_gallery=self_gallery, all_query=all_query,
                           all_labels=all_labels, all_ids=all_ids, categories=categories, n_queries=n_queries,
                           options=options, group=group, device=device, per_query_ids=per_query_ids,
                           confidence=confidence)


def evaluate_split(
    query: Tensor,
    query_labels: Tensor,
    metrics: Sequence[str],
    *,
    gallery: Optional[Tensor] = None,
    gallery_labels: Optional[Tensor] = None,
    query_ids: Optional[Tensor] = None,
    gallery_ids: Optional[Tensor] = None,
    categories=None,
    confidence: Optional[Tensor] = None,
    group=None,
    distance="cosine",
    relevance=None,
    ties: str = "stable",
    empty: str = "skip",
    reduce: str = "mean",
    per_class: Optional[str] = None,
    memory_budget: Optional[int] = None,
    progress: bool = False,
    backend: str = "torch",
    ci: Optional[float] = None,
    ci_method: str = "bootstrap",
    n_resamples: int = 1000,
    seed: int = 0,
    keep_per_query: bool = False,
    return_neighbours: Optional[int] = None,
):
    """:func:`retrieval_core.evaluate_embeddings` of inputs that every rank of
    ``group`` holds whole (e.g. gathered adapter states): each rank evaluates a
    contiguous ``1/world`` share of the queries, the per-query values are gathered
    and every rank aggregates them, with the same result as one process.

    The ranks must hold the same rows and give the same options (all but
    ``progress``); a different number of rows, or an option that differs, on
    some rank is a ``ValueError`` on every rank.

    Example:
        >>> x = torch.tensor([[1.0, 0.0], [0.9, 0.1], [0.0, 1.0], [0.1, 0.9]])
        >>> evaluate_split(x, torch.tensor([0, 0, 1, 1]), ["cmc@1"])["cmc@1"].item()  # one process
        1.0
    """
    from .embeddings import evaluate_embeddings as evaluate_one
    from .registry import parse_metrics
    from .validate import (
        check_categories, check_confidence, check_embeddings, check_labels, check_per_class, check_rows,
    )

    options = _options(distance, relevance, ties, empty, reduce, per_class, memory_budget, progress, backend,
                       dict(ci=ci, ci_method=ci_method, n_resamples=n_resamples, seed=seed,
                            keep_per_query=keep_per_query, return_neighbours=return_neighbours))
    n = world_size(group)
    if n == 1:
        return evaluate_one(query, query_labels, metrics, gallery=gallery, gallery_labels=gallery_labels,
                            query_ids=query_ids, gallery_ids=gallery_ids, categories=categories,
                            confidence=confidence, **options)
    device = _comm_device(query if isinstance(query, Tensor) else None, group)

    def check():  # a rank whose query is not usable raises here too, never alone (no rank left waiting)
        check_embeddings("query", query, distance)
        keys = parse_metrics(metrics)
        _check_options(keys, options)
        check_labels("query_labels", query_labels, query.shape[0], relevance is not None)
        if query_ids is not None:
            check_rows("query_ids", query_ids, query.shape[0], unit="embedding")
        check_per_class(per_class, query_labels, relevance is not None)
        if categories is not None:
            check_categories(categories, query.shape[0], "query")
        checked = None if confidence is None else check_confidence(confidence, query.shape[0], "query")
        return (keys, checked), [query.shape[0], None if gallery is None else int(gallery.shape[0])]

    (keys, confidence), sizes = agree(check, group=group, device=device, options=_agreed(metrics, options),
                                      what="distributed.evaluate_split")
    if any(s != sizes[0] for s in sizes):
        raise ValueError(
            "evaluate_split needs the same rows on every rank (gathered states); got [queries, gallery] rows "
            f"per rank {sizes}"
        )
    self_gallery = gallery is None
    per_query_ids = query_ids if keep_per_query else None
    if self_gallery:
        if query_ids is None:
            query_ids = torch.arange(query.shape[0], device=query.device)
        gallery, gallery_labels, gallery_ids = query, query_labels, query_ids
    part = _share(query.shape[0], rank_of(group), n)
    return _evaluate_share(
        keys, query[part], query_labels[part], None if query_ids is None else query_ids[part], gallery=gallery,
        gallery_labels=gallery_labels, gallery_ids=gallery_ids, self_gallery=self_gallery, all_query=query,
        all_labels=query_labels, all_ids=query_ids, categories=categories, n_queries=query.shape[0],
        options=options, group=group, device=device, per_query_ids=per_query_ids,
        confidence=None if confidence is None else confidence.to(query.device))
