"""open-metric-learning 4.0's functional metrics, computed by the core.

The functions here take the arguments of ``oml.functional.metrics`` (and of
``oml.metrics.calc_retrieval_metrics_rr`` / ``calc_fnmr_at_fmr_rr``) and return the
same keys and nesting: ``{"cmc": {k: value}, "precision": {k: ...}, "map": {k: ...}}``,
under ``{"OVERALL": ..., category: ...}`` with ``query_categories``. They follow
OML's definitions, each the value of one of our keys (docs/metrics.md):

* OML ``cmc@k`` is ``hit_rate@k`` (alias ``cmc@k``);
* OML ``precision@k`` is ``precision_capped@k``, hits@k / min(k, n_gt), where the
  cutoff is also clipped to the list OML was given (hits / min(k, n_gt, length));
* OML ``map@k`` is ``map_hits@k``, divided by the hits in the top k (0 without one).

Every per-query value comes from a :class:`retrieval_core.Ranking` built from the
retrieved ids (or ``gt_tops``) and evaluated by :func:`retrieval_core.ranking_values`;
``calc_pcf`` and ``calc_fnmr_at_fmr`` are ``pcf@x`` and ``fnmr@x`` of
:func:`retrieval_core.evaluate_embeddings`. The work is vectorised over the
queries and stays on the tensors' device; values are float32 as OML's.

OML's own conventions for the queries its formulas leave undefined are kept
(values per query, before the mean):

* a query with no ground truth (``n_gt = 0``) and an empty retrieved list: 1.0
  for cmc, precision and map;
* a query with ground truth and an empty retrieved list: 0.0;
* a query with no ground truth and a non-empty list: cmc 0, map 0, precision
  NaN (0 / 0), so the reduced precision is NaN, as OML's plain mean.

The deliberate differences from OML are listed in docs/compat_oml.md.

Example:
    >>> import torch
    >>> from retrieval_core.compat.oml import calc_retrieval_metrics
    >>> retrieved = [torch.tensor([0, 5, 4]), torch.tensor([2, 1, 5])]
    >>> gt = [torch.tensor([0, 10, 4]), torch.tensor([2, 3])]
    >>> m = calc_retrieval_metrics(retrieved, gt, cmc_top_k=(1,), precision_top_k=(3,), map_top_k=(3,))
    >>> m["cmc"][1].item(), round(m["precision"][3].item(), 4), round(m["map"][3].item(), 4)
    (1.0, 0.5833, 0.9167)
"""
from __future__ import annotations

from typing import Any, Dict, List, Tuple

import numpy as np
import torch
from torch import Tensor

from retrieval_core import evaluate_embeddings

from .oml_inputs import (_as_rows, _categories_masks, _check_fractions, _check_top_k, _distances, _gt_tops_values,
                         _id_hits, _values)

__all__ = [
    "OVERALL_CATEGORIES_KEY",
    "calc_cmc",
    "calc_fnmr_at_fmr",
    "calc_fnmr_at_fmr_rr",
    "calc_map",
    "calc_pcf",
    "calc_precision",
    "calc_retrieval_metrics",
    "calc_retrieval_metrics_rr",
    "calc_topological_metrics",
]

OVERALL_CATEGORIES_KEY = "OVERALL"  # oml.const.OVERALL_CATEGORIES_KEY
TMetricsDict = Dict[Any, Any]



# ---------------------------------------------------------------- the per-query values


def calc_cmc(gt_tops: Any, n_gts: Any, top_k: Tuple[int, ...], verbose: bool = False) -> List[Tensor]:
    """OML's ``calc_cmc``: ``cmc@k`` per query (1 if a relevant item is in the top k), one ``[Q]`` tensor per k.

    Args:
        gt_tops: per query, a bool tensor: is the j-th retrieved item relevant (a
            sequence of 1-D tensors of any lengths, or a ``[Q, d]`` tensor).
        n_gts: ground-truth count per query.
        top_k: the cutoffs (positive ints).
        verbose: accepted for OML's signature; there is no progress bar to show.

    Example:
        >>> import torch
        >>> gt_tops = [torch.tensor([True, False]), torch.tensor([False, True, True]),
        ...            torch.tensor([False, False]), torch.tensor([], dtype=torch.bool)]
        >>> calc_cmc(gt_tops, [2, 2, 1, 0], top_k=(1, 2))
        [tensor([1., 0., 0., 1.]), tensor([1., 1., 0., 1.])]
    """
    return _gt_tops_values(gt_tops, n_gts, top_k, "cmc")


def calc_precision(gt_tops: Any, n_gts: Any, top_k: Tuple[int, ...], verbose: bool = False) -> List[Tensor]:
    """OML's ``calc_precision``: hits@k / min(k, n_gt) per query (the cutoff clipped to the list).

    Arguments as :func:`calc_cmc`.

    Example:
        >>> import torch
        >>> gt_tops = [torch.tensor([True, False]), torch.tensor([False, True, True]),
        ...            torch.tensor([False, False]), torch.tensor([], dtype=torch.bool)]
        >>> calc_precision(gt_tops, [2, 3, 5, 2], top_k=(1, 2))
        [tensor([1., 0., 0., 0.]), tensor([0.5000, 0.5000, 0.0000, 0.0000])]
    """
    return _gt_tops_values(gt_tops, n_gts, top_k, "precision")


def calc_map(gt_tops: Any, n_gts: Any, top_k: Tuple[int, ...], verbose: bool = False) -> List[Tensor]:
    """OML's ``calc_map``: sum of precision@i at the hits of the top k, over the hits (0 without one).

    Arguments as :func:`calc_cmc`.

    Example:
        >>> import torch
        >>> gt_tops = [torch.tensor([True, False]), torch.tensor([False, True]),
        ...            torch.tensor([False, False, False, False]), torch.tensor([], dtype=torch.bool)]
        >>> calc_map(gt_tops, [1, 1, 2, 0], top_k=(1, 2))
        [tensor([1., 0., 0., 1.]), tensor([1.0000, 0.5000, 0.0000, 1.0000])]
    """
    return _gt_tops_values(gt_tops, n_gts, top_k, "map")


# ---------------------------------------------------------------- retrieved ids


def _reduce(metrics: TMetricsDict) -> TMetricsDict:
    """OML's ``reduce_metrics``: the mean of every tensor (NaN values included)."""
    return {k: (v.to(torch.float64).mean().to(v.dtype) if isinstance(v, Tensor) else _reduce(v))
            for k, v in metrics.items()}


def calc_retrieval_metrics(
    retrieved_ids: Any,
    gt_ids: Any,
    query_categories: Any = None,
    cmc_top_k: Tuple[int, ...] = (5,),
    precision_top_k: Tuple[int, ...] = (5,),
    map_top_k: Tuple[int, ...] = (5,),
    reduce: bool = True,
    verbose: bool = True,
) -> TMetricsDict:
    """OML's ``calc_retrieval_metrics``: cmc, precision and map from retrieved and ground-truth ids.

    Args:
        retrieved_ids: per query, the retrieved gallery ids in rank order (a sequence of
            1-D integer tensors, any lengths, or a ``[Q, d]`` tensor).
        gt_ids: per query, the relevant gallery ids (``n_gt`` = its length).
        query_categories: one category per query (array or tensor): adds one entry per
            category next to ``"OVERALL"``.
        cmc_top_k, precision_top_k, map_top_k: cutoffs; an empty tuple leaves the metric out.
        reduce: the mean over the queries (0-d tensors) or per-query ``[Q]`` tensors.
        verbose: accepted for OML's signature; there is no progress bar to show.

    Returns:
        ``{"cmc": {k: value}, "precision": {k: value}, "map": {k: value}}``, or
        ``{"OVERALL": that, category: that over the category's queries, ...}``;
        float32 tensors on the ids' device.

    Example:
        >>> import numpy as np, torch
        >>> retrieved = [torch.tensor([0, 5, 4]), torch.tensor([2, 1, 5]), torch.tensor([2, 1, 5])]
        >>> gt = [torch.tensor([0, 10, 4]), torch.tensor([2, 3]), torch.tensor([2, 3])]
        >>> m = calc_retrieval_metrics(retrieved, gt, query_categories=np.array(["cat", "dog", "dog"]),
        ...                            cmc_top_k=(1,), precision_top_k=(3,), map_top_k=(), reduce=False)
        >>> m["OVERALL"]["precision"][3], m["dog"]["cmc"][1]
        (tensor([0.6667, 0.5000, 0.5000]), tensor([1., 1.]))
    """
    names, ks = [], []
    for name, top_k in (("cmc", cmc_top_k), ("precision", precision_top_k), ("map", map_top_k)):
        if top_k:  # OML leaves out a metric whose cutoffs are empty
            names.append(name)
            ks.append(_check_top_k(top_k, f"{name}_top_k"))
    hit, lengths, n_gts = _id_hits(retrieved_ids, gt_ids)
    values = iter(_values(hit, lengths, n_gts, names, ks))
    metrics: TMetricsDict = {name: {k: next(values) for k in cut} for name, cut in zip(names, ks)}
    if query_categories is not None:
        by_cat = {c: {name: {k: v[mask] for k, v in m.items()} for name, m in metrics.items()}
                  for c, mask in _categories_masks(query_categories, hit.shape[0], hit.device)}
        metrics = {OVERALL_CATEGORIES_KEY: metrics, **by_cat}
    return _reduce(metrics) if reduce else metrics


def calc_retrieval_metrics_rr(
    rr: Any,
    query_categories: Any = None,
    cmc_top_k: Tuple[int, ...] = (5,),
    precision_top_k: Tuple[int, ...] = (5,),
    map_top_k: Tuple[int, ...] = (5,),
    reduce: bool = True,
    verbose: bool = True,
) -> TMetricsDict:
    """OML's ``calc_retrieval_metrics_rr``: :func:`calc_retrieval_metrics` of an object
    with OML ``RetrievalResults``' ``retrieved_ids`` and ``gt_ids``.

    Example:
        >>> import torch
        >>> from types import SimpleNamespace
        >>> rr = SimpleNamespace(retrieved_ids=[torch.tensor([3, 1])], gt_ids=[torch.tensor([1])])
        >>> calc_retrieval_metrics_rr(rr, cmc_top_k=(1, 2), precision_top_k=(), map_top_k=(2,))
        {'cmc': {1: tensor(0.), 2: tensor(1.)}, 'map': {2: tensor(0.5000)}}
    """
    retrieved_ids, gt_ids = _rr_ids(rr)
    return calc_retrieval_metrics(retrieved_ids, gt_ids, query_categories=query_categories, cmc_top_k=cmc_top_k,
                                  precision_top_k=precision_top_k, map_top_k=map_top_k, reduce=reduce,
                                  verbose=verbose)


def _rr_ids(rr: Any):
    if not (hasattr(rr, "retrieved_ids") and hasattr(rr, "gt_ids")):
        raise ValueError(f"rr must have RetrievalResults' retrieved_ids and gt_ids, got {type(rr).__name__}")
    if rr.gt_ids is None:
        raise ValueError("rr.gt_ids is None: the metrics need the ground truth of every query")
    return rr.retrieved_ids, rr.gt_ids


# ---------------------------------------------------------------- fnmr@fmr, pcf


def calc_fnmr_at_fmr(pos_dist: Any, neg_dist: Any, fmr_vals: Tuple[float, ...] = (0.1,)) -> Tensor:
    """OML's ``calc_fnmr_at_fmr``: the share of positive distances >= the ``fmr`` quantile of the negative ones.

    Args:
        pos_dist, neg_dist: distances of relevant and non-relevant pairs (arrays or tensors).
        fmr_vals: false match rates in [0, 1] (fractions: 0.1 is 10%).

    Returns:
        ``[len(fmr_vals)]`` float32, on ``pos_dist``'s device (CPU for arrays).

    Example:
        >>> import numpy as np
        >>> pos_dist = np.array([0, 0, 1, 1, 2, 2, 5, 5, 9, 9])
        >>> neg_dist = np.array([3, 3, 4, 4, 6, 6, 7, 7, 8, 8])
        >>> calc_fnmr_at_fmr(pos_dist, neg_dist, fmr_vals=(0.1, 0.5))
        tensor([0.4000, 0.2000])
    """
    fmr_vals = _check_fractions(fmr_vals, "fmr_vals")
    device = pos_dist.device if isinstance(pos_dist, Tensor) else torch.device("cpu")
    pos, neg = _distances(pos_dist, "pos_dist").to(device), _distances(neg_dist, "neg_dist").to(device)
    if pos.numel() == 0 or neg.numel() == 0:
        raise ValueError(f"pos_dist and neg_dist must not be empty, got {pos.numel()} and {neg.numel()} distances")
    # one query at distance d from each gallery item d (its 1-D "embedding"); relevant: the positives
    gallery = torch.cat([pos, neg]).unsqueeze(1)
    gallery_labels = torch.cat([torch.ones_like(pos, dtype=torch.int64), torch.zeros_like(neg, dtype=torch.int64)])
    keys = [f"fnmr@{float(v)!r}" for v in fmr_vals]
    results = evaluate_embeddings(
        torch.zeros(1, 1, dtype=torch.float64, device=device), torch.ones(1, dtype=torch.int64, device=device),
        list(dict.fromkeys(keys)), gallery=gallery, gallery_labels=gallery_labels,
        distance=lambda q, g: g[:, 0].expand(q.shape[0], -1),
    )
    return torch.stack([results[k] for k in keys]).to(torch.float32)


def calc_fnmr_at_fmr_rr(rr: Any, fmr_vals: Tuple[float, ...] = (0.1,)) -> TMetricsDict:
    """OML's ``calc_fnmr_at_fmr_rr``: ``{"fnmr@fmr": {fmr: value}}`` over the retrieved pairs of ``rr``
    (``distances``, ``retrieved_ids``, ``gt_ids``; a retrieved item is positive when it is in ``gt_ids``).

    Example:
        >>> import torch
        >>> from types import SimpleNamespace
        >>> rr = SimpleNamespace(distances=[torch.tensor([0.1, 0.4, 0.5])], retrieved_ids=[torch.tensor([7, 2, 9])],
        ...                      gt_ids=[torch.tensor([9])])
        >>> calc_fnmr_at_fmr_rr(rr, fmr_vals=(0.5,))  # negatives 0.1, 0.4: median 0.25; the positive 0.5 is above
        {'fnmr@fmr': {0.5: tensor(1.)}}
    """
    retrieved_ids, gt_ids = _rr_ids(rr)
    hit, lengths, _ = _id_hits(retrieved_ids, gt_ids)
    dist, dist_lengths = _as_rows(getattr(rr, "distances", None) if hasattr(rr, "distances") else (), "rr.distances",
                                  device=hit.device)
    if dist.shape[0] != hit.shape[0] or not bool((dist_lengths == lengths).all()):
        raise ValueError("rr.distances must hold one distance per retrieved id")
    valid = torch.arange(hit.shape[1], device=hit.device).unsqueeze(0) < lengths.unsqueeze(1)
    values = calc_fnmr_at_fmr(dist[hit & valid], dist[~hit & valid], fmr_vals)
    return {"fnmr@fmr": dict(zip(fmr_vals, values.unbind(0)))}


def calc_pcf(embeddings: Tensor, pcf_variance: Tuple[float, ...]) -> Tensor:
    """OML's ``calc_pcf``: for each variance share r, the fraction of principal components that explains it.

    Returns ``[len(pcf_variance)]`` in the embeddings' dtype and device; like OML,
    ``pcf@1`` counts one component more than the rank of the centred data.

    Example:
        >>> import torch
        >>> calc_pcf(torch.eye(4, 10), pcf_variance=(0.5, 1))
        tensor([0.2000, 0.5000])
    """
    pcf_variance = _check_fractions(pcf_variance, "pcf_variance")
    if not isinstance(embeddings, Tensor) or embeddings.ndim != 2 or not embeddings.is_floating_point():
        raise ValueError("embeddings must be a [n_embeddings, dim] floating point tensor")
    keys = [f"pcf@{float(v)!r}" for v in pcf_variance]
    labels = torch.zeros(embeddings.shape[0], dtype=torch.int64, device=embeddings.device)
    results = evaluate_embeddings(embeddings, labels, list(dict.fromkeys(keys)))
    return torch.stack([results[k] for k in keys]).to(embeddings.dtype)


def calc_topological_metrics(embeddings: Tensor, pcf_variance: Tuple[float, ...],
                             categories: Any = None, verbose: bool = False) -> TMetricsDict:
    """OML's ``calc_topological_metrics``: ``{"pcf": {r: value}}``, per sorted category too.

    Example:
        >>> import torch
        >>> calc_topological_metrics(torch.eye(4, 10), pcf_variance=(0.5,), categories=torch.tensor([1, 1, 0, 0]))
        {'OVERALL': {'pcf': {0.5: tensor(0.2000)}}, 0: {'pcf': {0.5: tensor(0.1000)}}, 1: {'pcf': {0.5: tensor(0.1000)}}}
    """
    if categories is not None and len(categories) != len(embeddings):
        raise ValueError(f"categories must hold one category per embedding ({len(embeddings)}), "
                         f"got {len(categories)}")
    metrics: TMetricsDict = {}
    if pcf_variance:
        metrics["pcf"] = dict(zip(pcf_variance, calc_pcf(embeddings, pcf_variance).unbind(0)))
    if pcf_variance and categories is not None:
        if isinstance(categories, Tensor):
            unique = categories.unique(sorted=True).tolist()
            cats = categories.tolist()
        else:
            unique = list(np.unique(categories))
            cats = list(np.asarray(categories))
        out: TMetricsDict = {OVERALL_CATEGORIES_KEY: metrics}
        for c in unique:
            rows = torch.tensor([x == c for x in cats], dtype=torch.bool).to(embeddings.device)
            out[c] = calc_topological_metrics(embeddings[rows], pcf_variance)
        return out
    return metrics
