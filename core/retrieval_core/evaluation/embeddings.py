"""Embedding mode: query/gallery embeddings and labels in, ``{key: value}`` out
(the entry point; the chunked per-query engine is :mod:`retrieval_core.evaluation.embedding_values`).

The evaluator walks query chunks under a memory budget; for each chunk it computes
the ``[c, G]`` similarities, gains and exclusion mask, ranks them with the same
stable builder as score mode (to the largest k, to the chunk's largest R for
``@r`` keys, or the whole gallery for whole-list keys), runs the kernels and keeps
only ``values[c, M]``. Nothing of size ``[Q, G]`` is ever held.
"""
from __future__ import annotations

import torch
import warnings
from torch import Tensor
from typing import Optional, Sequence, Tuple

from .. import sizing
from .embedding_values import DEFAULT_MEMORY_BUDGET, embedding_values
from ..inputs.embeddings import EmbeddingInputs, embedding_inputs
from ..metrics.keys import MetricKey, depth_needed, split_scopes
from ..metrics.set_level import set_level_values
from ..metrics.spec import AT_K, WHOLE
from ..stats.aggregate import (
    MetricResults, category_groups, fill_empty, aggregate_checked, encode_labels, reduce_values,
)
from ..stats.curves import split_key
from ..stats.intervals import macro_intervals
from ..validate.stats import N_RESAMPLES

__all__ = ["evaluate_embeddings", "evaluate_embedding_inputs", "query_values", "embedding_values",
           "DEFAULT_MEMORY_BUDGET"]


# A whole-list key ranks every gallery item; cutoff keys keep only the top k. Past this
# gallery size and ratio to the deepest cutoff, evaluate_embeddings says so once per call.
WHOLE_LIST_NOTICE = (4096, 16)


def _whole_list_notice(keys: Sequence[MetricKey], n_gallery: int) -> None:
    depth, _, whole = depth_needed(keys)
    size, ratio = WHOLE_LIST_NOTICE
    if whole and n_gallery >= size and n_gallery >= ratio * max(depth, 1):
        whole_keys = [m for m in keys if m.depth == WHOLE]
        cutoffs = f", where the cutoff keys rank only the top {depth}" if depth else ""
        cut = [m.key for m in whole_keys if AT_K in m.spec.cutoffs]  # rbp@p: no cutoff form
        remedy = (f"a cutoff such as '{cut[0]}@100' (or '@r' where the key takes it) bounds the work" if cut
                  else "only a cutoff key bounds the work")
        warnings.warn(
            f"whole-list keys ({', '.join(m.key for m in whole_keys)}) rank all {n_gallery} gallery items of "
            f"every query{cutoffs}: this evaluation is many times slower than with cutoffs; {remedy}",
            stacklevel=5,  # past query_values, evaluate_embedding_inputs and evaluate_embeddings
        )


def evaluate_embeddings(
    query: Tensor,
    query_labels: Tensor,
    metrics: Sequence[str],
    *,
    gallery: Optional[Tensor] = None,
    gallery_labels: Optional[Tensor] = None,
    distance="cosine",
    query_ids: Optional[Tensor] = None,
    gallery_ids: Optional[Tensor] = None,
    relevance=None,
    ties: str = "stable",
    empty: str = "skip",
    reduce: str = "mean",
    categories=None,
    per_class: Optional[str] = None,
    memory_budget: Optional[int] = None,
    progress: Optional[bool] = None,
    backend: str = "torch",
    ci: Optional[float] = None,
    ci_method: str = "bootstrap",
    n_resamples: int = N_RESAMPLES,
    seed: int = 0,
    keep_per_query: bool = False,
    return_neighbours: Optional[int] = None,
    confidence: Optional[Tensor] = None,
    exclude=None,
) -> MetricResults:
    """Evaluate retrieval of ``gallery`` items by ``query`` embeddings (exact k-NN).

    Args:
        query: ``[Q, D]`` embeddings (integer/bool codes allowed for hamming).
        query_labels: ``[Q]`` int class labels (equal label = relevant), ``[Q, C]``
            multi-hot labels (gain = number of shared labels), or anything a
            ``relevance`` callable understands.
        metrics: per-query keys (``"cmc@1"``, ``"map@r"``, ``"ndcg@10"``...) and
            set-level keys (``"nmi"``, ``"ami"``, ``"pcf@0.5"``, ``"fnmr@0.1"``).
        gallery, gallery_labels: ``[G, D]`` and labels; None: the query set is its own
            gallery and each query's own row is excluded (PML's reference=None).
        distance: ``"cosine"``, ``"dot"``, ``"euclidean"``, ``"squared_euclidean"``,
            ``"hamming"`` (codes in {0,1} or {-1,1}) or ``f(q[c, D], g[G, D]) -> [c, G]``
            distances (smaller = closer).
        query_ids, gallery_ids: ``[Q]``, ``[G]`` ints; a gallery item with the query's
            id is never retrieved nor counted in R (self-match, same sequence).
        relevance: ``f(query_labels[c], gallery_labels) -> gains[c, G]`` (>= 0); or the
            relevance judgements themselves (a two-tower model's users against its items):
            ``[2, E]`` (query row, gallery item) pairs (gain 1) or a sparse ``[Q, G]`` tensor
            (COO or CSR) of graded gains (> 0: relevant), with ``query_labels`` and
            ``gallery_labels`` None. R counts every relevant item of the query (not only
            the retrieved ones), but for the excluded ones.
        ties, empty, reduce, categories: as :func:`evaluate_scores`.
        per_class: ``"macro"``: average per label, then over labels (PML
            avg_of_avgs); ``"all"``: also ``"{key}/class={label}"`` entries. Labels
            are grouped by value, ``[N, C]`` labels by distinct row (``relevance``
            or not; ``{label}`` is the row, e.g. ``[0, 1, 1]``).
        memory_budget: bytes of scratch for one query chunk; None (default): the
            device's share, 256 MiB on CPU and a quarter of the free memory on CUDA
            (within 64 MiB-16 GiB; see ``retrieval_core.sizing``). An int bounds the
            scratch on every device.
        progress: a tqdm progress bar over chunks: True, False, or None (default:
            shown when stderr is a terminal and the ``CI`` variable is unset).
        backend: ``"torch"`` (default: exact, deterministic ties on any device) or
            ``"faiss"`` (CPU, float32, class labels, cosine/dot/euclidean, no
            whole-list keys): faiss' flat index finds the candidates; values equal
            the torch backend's except between candidates within float rounding.
        ci, ci_method, n_resamples, seed, keep_per_query: as :func:`evaluate_scores`
            (per-query keys; ``query_ids`` are the ids of ``results.per_query`` when
            given). ``ci`` is not available with ``per_class``.
        return_neighbours: ``k``: ``results.neighbours = (neighbours [Q, k], scores
            [Q, k])``, each query's first ``k`` gallery items in rank order (the
            ranking of the evaluation): gallery ids when ids were given
            (``gallery_ids``, or ``query_ids`` with ``gallery=None``), else gallery
            positions; scores larger = closer (cosine similarity, dot product, or the
            negated distance). A slot past the query's candidates holds -1 and -inf.
        confidence: ``[Q]`` finite floats, one per query (higher = more
            confident), for the confidence keys (``"erc:cmc@1"``, ``"conf:map@r"``,
            ``"spearman:..."``, ``"kendall:..."``; see :func:`evaluate_scores`).
        exclude: gallery items removed from each query's ranking (a recommender's seen
            items): ``[2, E]`` (query row, gallery item) pairs or a sparse ``[Q, G]`` tensor
            (non-zero entries); neither relevant nor irrelevant, they take no rank and are
            not counted in R (as ``mask=`` of :func:`evaluate_scores`). Written into each
            chunk's scores (no ``[Q, G]`` mask); ``backend="torch"``.

    Example:
        >>> import torch
        >>> x = torch.tensor([[1.0, 0.0], [0.9, 0.1], [0.0, 1.0], [0.1, 0.9]])
        >>> labels = torch.tensor([0, 0, 1, 1])
        >>> r = evaluate_embeddings(x, labels, ["cmc@1", "map@r"])
        >>> r["cmc@1"].item(), r["map@r"].item()
        (1.0, 1.0)
        >>> r = evaluate_embeddings(x, labels, ["spearman:map@r"], confidence=torch.tensor([0.9, 0.2, 0.5, 0.7]))
        >>> r["spearman:map@r"].item()  # every value is 1: the correlation is undefined
        nan

        A two-tower model: users against items by dot product, each user's test items
        relevant, the items seen in training excluded:

        >>> users = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
        >>> items = torch.tensor([[0.9, 0.1], [0.8, 0.0], [0.1, 0.7], [0.0, 0.9]])
        >>> test = torch.tensor([[0, 1], [1, 2]])  # (user, item): user 0 item 1, user 1 item 2
        >>> seen = torch.tensor([[0, 1], [0, 3]])  # user 0 saw item 0, user 1 item 3
        >>> r = evaluate_embeddings(users, None, ["ndcg@2", "recall@1"], gallery=items, distance="dot",
        ...                         relevance=test, exclude=seen)
        >>> r["ndcg@2"].item(), r["recall@1"].item()
        (1.0, 1.0)
    """
    inputs = embedding_inputs(
        query, query_labels, metrics, gallery=gallery, gallery_labels=gallery_labels, query_ids=query_ids,
        gallery_ids=gallery_ids, categories=categories, confidence=confidence, distance=distance, relevance=relevance,
        ties=ties, empty=empty, reduce=reduce, per_class=per_class, memory_budget=memory_budget, progress=progress,
        backend=backend, ci=ci, ci_method=ci_method, n_resamples=n_resamples, seed=seed,
        keep_per_query=keep_per_query, return_neighbours=return_neighbours, exclude=exclude)
    return evaluate_embedding_inputs(inputs)


def evaluate_embedding_inputs(inputs: EmbeddingInputs) -> MetricResults:
    """:func:`evaluate_embeddings` of checked inputs (:func:`~retrieval_core.inputs.embedding_inputs`),
    without checking again."""
    keys, options = inputs.keys, inputs.options
    query_keys, set_keys = split_scopes(keys)
    query, query_labels = inputs.query, inputs.query_labels
    results = MetricResults(n_queries=torch.tensor(query.shape[0]))
    neighbours = None
    if query_keys:
        values, neighbours = query_values(inputs)
        stats = {k: options[k] for k in ("ci", "ci_method", "n_resamples", "seed", "keep_per_query")}
        results = aggregate_queries(values, [m.key for m in query_keys], query_labels, empty=options["empty"],
                                    reduce=options["reduce"], per_class=options["per_class"],
                                    categories=inputs.categories, confidence=inputs.confidence, ties=options["ties"],
                                    query_ids=inputs.given_ids, **stats)
    if set_keys:
        self_gallery = inputs.self_gallery
        results.update(set_level_values(
            set_keys, query, query_labels, gallery=None if self_gallery else inputs.gallery,
            gallery_labels=None if self_gallery else inputs.gallery_labels, distance=options["distance"],
            query_ids=inputs.query_ids, gallery_ids=inputs.gallery_ids, relevance=options["relevance"],
            memory_budget=sizing.memory_budget(query.device, options["memory_budget"]),
        ))
    # the requested keys first, in the order asked, then per-category/per-class views
    ordered = results.reordered([m.key for m in keys])
    if neighbours is not None:
        ordered.neighbours = neighbours
    return ordered


def query_values(inputs: EmbeddingInputs) -> Tuple[Tensor, Optional[Tuple[Tensor, Tensor]]]:
    """``([Q, M] float64 values of the per-query keys of checked inputs, NaN = undefined,
    (neighbours [Q, k], scores [Q, k]) or None)``: the engine's values before any
    aggregation (what a rank computes for its share of the queries)."""
    options = inputs.options
    query_keys = split_scopes(inputs.keys)[0]
    gallery = inputs.gallery
    _whole_list_notice(query_keys, gallery.shape[0])
    n_neighbours = options["return_neighbours"]
    found = [n_neighbours, None, None]
    values = embedding_values(
        inputs.query, inputs.query_labels, query_keys, gallery=gallery, gallery_labels=inputs.gallery_labels,
        distance=options["distance"], query_ids=inputs.query_ids, gallery_ids=inputs.gallery_ids,
        relevance=options["relevance"],
        memory_budget=sizing.memory_budget(inputs.query.device, options["memory_budget"]),
        progress=options["progress"], backend=options["backend"], ties=options["ties"], neighbours=found,
        truth=inputs.truth, exclude=inputs.exclude,
    )
    if not n_neighbours:
        return values, None
    positions, scores = found[1], found[2]
    named = inputs.gallery_ids if inputs.given_ids is not None or not inputs.self_gallery else None
    if named is not None:
        positions = torch.where(positions >= 0, named[positions.clamp(min=0)], -1)
    return values, (positions, scores)


def aggregate_queries(values: Tensor, names: Sequence[str], labels: Tensor, *, empty: str, reduce: str,
                      per_class: Optional[str], categories=None, confidence: Optional[Tensor] = None,
                      ties: str = "stable", ci: Optional[float] = None, ci_method: str = "bootstrap",
                      n_resamples: int = N_RESAMPLES, seed: int = 0, keep_per_query: bool = False,
                      query_ids: Optional[Tensor] = None) -> MetricResults:
    """:func:`~retrieval_core.stats.aggregate.aggregate` of the per-query values ``[Q, M]``,
    then the per-class views of ``per_class`` (``labels``: the queries' labels): the
    step that the single-process and the distributed evaluations share."""
    # the options and confidence were checked by the entry point (evaluate_embeddings, single or distributed)
    results = aggregate_checked(values, names, empty=empty, reduce=reduce, categories=categories,
                                confidence=confidence, ties=ties, level=None if ci is None else float(ci),
                                ci_method=ci_method, n_resamples=n_resamples, seed=seed,
                                keep_per_query=keep_per_query, query_ids=query_ids)
    if per_class is not None:
        results.update(_per_class(values, names, labels, empty, reduce, per_class, confidence, ties,
                                  ci=ci, ci_out=results.ci, n_resamples=n_resamples, seed=seed))
    return results


def _per_class(values: Tensor, names, labels: Tensor, empty: str, reduce: str, per_class: str,
               confidence: Optional[Tensor] = None, ties: str = "stable", ci: Optional[float] = None,
               ci_out: Optional[dict] = None, n_resamples: int = N_RESAMPLES, seed: int = 0) -> dict:
    """PML's avg_of_avgs: the main keys become the mean over labels (``[N, C]``: distinct rows) of each label's value
    (confidence keys too: the mean of each label's value; their curves stay those of all queries).
    With ``ci``, ``ci_out`` receives the main keys' (bootstrap) intervals, replacing theirs."""
    level = None if ci is None or per_class != "all" else float(ci)  # the options were checked by the entry point
    by_label = aggregate_checked(values, names, empty=empty, reduce=reduce, categories=labels, confidence=confidence,
                                 ties=ties, level=level, ci_method="bootstrap", n_resamples=n_resamples, seed=seed,
                                 keep_per_query=False, query_ids=None, representable=True)
    label_names, _ = encode_labels(labels)
    out = {}
    for key in names:
        per = torch.stack([by_label[f"{key}/{n}"] for n in label_names])
        out[key] = reduce_values(per.unsqueeze(1), "mean")[0]
        if per_class == "all":
            out.update({f"{key}/class={n}": v for n, v in zip(label_names, per.unbind(0))})
            if ci is not None and f"{key}/{label_names[0]}" in by_label.ci:
                ci_out.update({f"{key}/class={n}": by_label.ci[f"{key}/{n}"] for n in label_names})
    if ci is not None:
        plain = [j for j, k in enumerate(names) if split_key(k) is None]  # confidence keys: no interval
        filled = fill_empty(values[:, plain], [names[j] for j in plain], empty)
        ci_out.update(macro_intervals(filled, [names[j] for j in plain], ci, category_groups(labels, values.device),
                                      reduce=reduce, n_resamples=n_resamples, seed=seed))
    return out
