"""An embedding evaluation divided between ranks: evaluate_embeddings_across_ranks and evaluate_split."""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence

import torch
from torch import Tensor

from ..evaluation.embeddings import evaluate_embedding_inputs, evaluate_embeddings as evaluate_one
from ..inputs.embeddings import embedding_inputs, embedding_options
from ..metrics.keys import split_scopes
from ..metrics.spec import WHOLE
from .agree import _comm_device, agree
from .collectives import gather_cat, rank_of, world_size
from .sharded import sharded_values
from .shares import _combine, _evaluate_share, _gather_categories, _share
from ..validate.stats import N_RESAMPLES

__all__ = ["evaluate_embeddings_across_ranks", "evaluate_split"]


def _agreed(metrics, options, **more) -> Dict[str, Any]:
    """What every rank must pass alike: the metrics (in order) and every option but
    ``progress`` (which only decides who prints); the other arguments are data (relevance
    pairs too: each rank passes those of its own queries; only their presence is compared)."""
    if isinstance(options.get("relevance"), Tensor):
        options = dict(options, relevance="(query, item) pairs")
    if isinstance(metrics, str):
        metrics = [metrics]
    if isinstance(metrics, (list, tuple)):
        metrics = [getattr(k, "key", k) for k in metrics]  # parsed keys (MetricKey) by their text
    return dict(metrics=metrics, **{k: v for k, v in options.items() if k != "progress"}, **more)


def _gallery_rows(query, gallery) -> int:
    """This rank's gallery rows (its queries' with ``gallery=None``): the items that pairs count.
    Never raises (0 for what is not an array: the checks that follow name the input)."""
    x = query if gallery is None else gallery
    shape = getattr(x, "shape", None)
    return int(shape[0]) if isinstance(shape, tuple) and len(shape) >= 1 else 0


def _check_local(query, query_labels, metrics, gallery, gallery_labels, query_ids, gallery_ids, categories,
                 shard_gallery, options, confidence=None, exclude=None, n_items=None):
    """This rank's inputs, checked as the single-process evaluator checks them
    (:func:`~retrieval_core.inputs.embedding_inputs`, zero rows allowed):
    ``(checked inputs, signature for the other ranks)``."""

    inputs = embedding_inputs(query, query_labels, metrics, gallery=gallery, gallery_labels=gallery_labels,
                              query_ids=query_ids, gallery_ids=gallery_ids, categories=categories,
                              confidence=confidence, local=True, exclude=exclude, n_items=n_items, **options)
    _check_shard_options(inputs.keys, inputs.options, shard_gallery)
    if shard_gallery is True and (inputs.truth is not None or inputs.exclude is not None):
        raise ValueError("relevance pairs and exclude= need shard_gallery=False (the gallery gathered on every rank)")
    query, query_labels, gallery = inputs.query, inputs.query_labels, inputs.gallery
    signature = {
        "rows": query.shape[0], "gallery_rows": None if gallery is None else gallery.shape[0],
        "dim": query.shape[1], "labels": list(query_labels.shape[1:]),
        "dtype": str(query.dtype), "label_dtype": str(query_labels.dtype),
        "gallery": gallery is not None, "ids": inputs.query_ids is not None,
        "categories": None if categories is None else ("tensor" if isinstance(categories, Tensor) else "labels"),
        "confidence": inputs.confidence is not None,
    }
    return inputs, signature


def _check_ranks(query, query_labels, metrics, gallery, gallery_labels, query_ids, gallery_ids, categories,
                 shard_gallery, options, confidence, exclude, group, device):
    """Every rank's inputs checked once, their options and signatures compared (an error on
    every rank): ``(this rank's checked inputs, every rank's signature)``. Relevance pairs
    and ``exclude`` name items of the whole gallery: its size is exchanged first, by every
    rank whatever it passes (a rank may pass ``exclude=None``: no item excluded for its
    queries; an exchange made by some ranks only would leave the others waiting)."""
    n_items = sum(agree(lambda: (None, _gallery_rows(query, gallery)), group=group, device=device)[1])
    inputs, signatures = agree(
        lambda: _check_local(query, query_labels, metrics, gallery, gallery_labels, query_ids, gallery_ids,
                             categories, shard_gallery, options, confidence, exclude, n_items), group=group,
        device=device, options=_agreed(metrics, options, shard_gallery=shard_gallery),
        what="distributed.evaluate_embeddings_across_ranks")
    _check_signatures(signatures)
    return inputs, signatures


def _check_shard_options(keys, options, shard_gallery) -> None:
    """``shard_gallery``: a bool; when True, what a gallery split over processes cannot do."""

    if not isinstance(shard_gallery, bool):
        raise TypeError(f"shard_gallery must be a bool; got {shard_gallery!r}")
    if not shard_gallery:
        return
    _check_shardable(keys, options["backend"])
    if options["return_neighbours"]:
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

    query_keys, set_keys = split_scopes(keys)
    whole = [m.key for m in query_keys if m.depth == WHOLE]
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


def evaluate_embeddings_across_ranks(
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
    n_resamples: int = N_RESAMPLES,
    seed: int = 0,
    keep_per_query: bool = False,
    return_neighbours: Optional[int] = None,
    confidence: Optional[Tensor] = None,
    exclude=None,
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
    * ``relevance`` pairs and ``exclude``: each rank passes those of its own queries, rows
      numbered from 0 on each rank, items by their position in the whole gallery (every
      rank's gallery rows in rank order); ``shard_gallery=False`` only.
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
        >>> r = evaluate_embeddings_across_ranks(x, torch.tensor([0, 0, 1, 1]), ["cmc@1", "map@r"])  # one process
        >>> r["cmc@1"].item(), r["map@r"].item()
        (1.0, 1.0)
    """

    options = embedding_options(distance=distance, relevance=relevance, ties=ties, empty=empty, reduce=reduce,
                                per_class=per_class, memory_budget=memory_budget, progress=progress, backend=backend,
                                ci=ci, ci_method=ci_method, n_resamples=n_resamples, seed=seed,
                                keep_per_query=keep_per_query, return_neighbours=return_neighbours)
    if world_size(group) == 1:
        inputs = embedding_inputs(query, query_labels, metrics, gallery=gallery, gallery_labels=gallery_labels,
                                  query_ids=query_ids, gallery_ids=gallery_ids, categories=categories,
                                  confidence=confidence, exclude=exclude, **options)
        if shard_gallery is not False:  # one process: the sharded mode's limits but the tie modes' apply
            _check_shard_options(inputs.keys, dict(inputs.options, ties="stable"), shard_gallery)
        return evaluate_embedding_inputs(inputs)
    device = _comm_device(query if isinstance(query, Tensor) else None, group)
    inputs, signatures = _check_ranks(query, query_labels, metrics, gallery, gallery_labels, query_ids, gallery_ids,
                                      categories, shard_gallery, options, confidence, exclude, group, device)
    keys, options, categories = inputs.keys, inputs.options, inputs.categories
    query, query_labels, query_ids, confidence = inputs.query, inputs.query_labels, inputs.query_ids, inputs.confidence
    gallery, gallery_labels, gallery_ids = inputs.gallery, inputs.gallery_labels, inputs.gallery_ids
    rows = [s["rows"] for s in signatures]
    n_queries, rank = sum(rows), rank_of(group)
    if n_queries == 0:  # what one process says of an empty query set (an error), on every rank
        return evaluate_one(query, query_labels, metrics, gallery=gallery, gallery_labels=gallery_labels,
                            query_ids=query_ids, gallery_ids=gallery_ids, categories=categories,
                            confidence=confidence, **options)
    truth, excluded = inputs.truth, inputs.exclude
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
                           confidence=confidence, truth=truth, exclude=excluded)


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
    n_resamples: int = N_RESAMPLES,
    seed: int = 0,
    keep_per_query: bool = False,
    return_neighbours: Optional[int] = None,
    exclude=None,
):
    """:func:`retrieval_core.evaluate_embeddings` of inputs that every rank of
    ``group`` holds whole (e.g. gathered adapter states): each rank evaluates a
    contiguous ``1/world`` share of the queries, the per-query values are gathered
    and every rank aggregates them, with the same result as one process.

    The ranks must hold the same rows and give the same options (all but
    ``progress``); a different number of rows, or an option that differs, on
    some rank is a ``ValueError`` on every rank. ``exclude`` (and relevance pairs) as
    :func:`~retrieval_core.evaluate_embeddings` takes them, for all the queries (every rank
    passes the same): each rank keeps the pairs of its share's queries; given on some ranks
    and not on others is a ``ValueError`` on every rank.

    Example:
        >>> x = torch.tensor([[1.0, 0.0], [0.9, 0.1], [0.0, 1.0], [0.1, 0.9]])
        >>> evaluate_split(x, torch.tensor([0, 0, 1, 1]), ["cmc@1"])["cmc@1"].item()  # one process
        1.0
        >>> seen = torch.tensor([[0, 0], [1, 3]])  # query 0 has seen items 1 and 3: item 2 comes first
        >>> evaluate_split(x, torch.tensor([0, 1, 0, 1]), ["cmc@1"], exclude=seen, reduce="none")["cmc@1"].tolist()
        [1.0, 0.0, 0.0, 0.0]
    """

    options = embedding_options(distance=distance, relevance=relevance, ties=ties, empty=empty, reduce=reduce,
                                per_class=per_class, memory_budget=memory_budget, progress=progress, backend=backend,
                                ci=ci, ci_method=ci_method, n_resamples=n_resamples, seed=seed,
                                keep_per_query=keep_per_query, return_neighbours=return_neighbours)
    n = world_size(group)
    if n == 1:
        return evaluate_one(query, query_labels, metrics, gallery=gallery, gallery_labels=gallery_labels,
                            query_ids=query_ids, gallery_ids=gallery_ids, categories=categories,
                            confidence=confidence, exclude=exclude, **options)
    device = _comm_device(query if isinstance(query, Tensor) else None, group)

    def check():  # every input, once (a rank whose input is not usable raises here, never alone)
        inputs = embedding_inputs(query, query_labels, metrics, gallery=gallery, gallery_labels=gallery_labels,
                                  query_ids=query_ids, gallery_ids=gallery_ids, categories=categories,
                                  confidence=confidence, exclude=exclude, **options)
        return inputs, [inputs.query.shape[0], None if inputs.self_gallery else int(inputs.gallery.shape[0])]

    given = None if exclude is None else "(query, item) pairs"  # data: only its presence is compared
    inputs, sizes = agree(check, group=group, device=device, options=_agreed(metrics, options, exclude=given),
                          what="distributed.evaluate_split")
    if any(s != sizes[0] for s in sizes):
        raise ValueError(
            "evaluate_split needs the same rows on every rank (gathered states); got [queries, gallery] rows "
            f"per rank {sizes}"
        )
    keys, options, self_gallery, categories = inputs.keys, inputs.options, inputs.self_gallery, inputs.categories
    query, query_labels, query_ids = inputs.query, inputs.query_labels, inputs.query_ids
    gallery, gallery_labels, gallery_ids = inputs.gallery, inputs.gallery_labels, inputs.gallery_ids
    per_query_ids = inputs.given_ids if options["keep_per_query"] else None
    part = _share(query.shape[0], rank_of(group), n)
    return _evaluate_share(
        keys, query[part], query_labels[part], None if query_ids is None else query_ids[part], gallery=gallery,
        gallery_labels=gallery_labels, gallery_ids=gallery_ids, self_gallery=self_gallery, all_query=query,
        all_labels=query_labels, all_ids=query_ids, categories=categories, n_queries=query.shape[0],
        options=options, group=group, device=device, per_query_ids=per_query_ids,
        confidence=inputs.confidence, truth=None if inputs.truth is None else inputs.truth.rows(part),
        exclude=None if inputs.exclude is None else inputs.exclude.rows(part))
