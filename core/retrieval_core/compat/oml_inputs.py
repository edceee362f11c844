"""Input checks and per-query values shared by the OML drop-ins (:mod:`retrieval_core.compat.oml`).

Example:
    >>> _check_top_k((1, 5), "cmc_top_k")
    (1, 5)
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np
import torch
from torch import Tensor

from retrieval_core import Ranking, parse_metrics, ranking_values

# OML's metric name -> our key name (docs/metrics.md, "Definitions")
_KEYS = {"cmc": "hit_rate", "precision": "precision_capped", "map": "map_hits"}


def _check_top_k(top_k: Any, name: str) -> Tuple[int, ...]:
    """A non-empty sequence of positive ints (bools and floats refused), duplicates dropped."""
    ok = (isinstance(top_k, (tuple, list)) and len(top_k) > 0
          and all(isinstance(k, (int, np.integer)) and not isinstance(k, (bool, np.bool_)) and k > 0
                  for k in top_k))
    if not ok:
        raise ValueError(f"{name} must be a non-empty tuple or list of positive integers, got {top_k!r}")
    return tuple(dict.fromkeys(int(k) for k in top_k))


def _check_fractions(vals: Any, name: str) -> Tuple[float, ...]:
    """A non-empty sequence of real numbers in [0, 1]."""
    ok = (isinstance(vals, (tuple, list)) and len(vals) > 0
          and all(isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, (bool, np.bool_))
                  and 0 <= v <= 1 for v in vals))
    if not ok:
        raise ValueError(f"{name} must be a non-empty tuple or list of numbers in [0, 1], got {vals!r}")
    return tuple(vals)


def _as_rows(rows: Any, name: str, device: Optional[torch.device] = None) -> Tuple[Tensor, Tensor]:
    """A ``[Q, d]`` padded tensor and the ``[Q]`` lengths of a sequence of 1-D tensors
    (or of a 2-D tensor, whose rows all have length d)."""
    if isinstance(rows, Tensor):
        if rows.ndim != 2:
            raise ValueError(f"{name} must be a sequence of 1-D tensors or a 2-D tensor, got shape {tuple(rows.shape)}")
        lengths = torch.full((rows.shape[0],), rows.shape[1], dtype=torch.int64, device=rows.device)
        return rows, lengths
    if isinstance(rows, (str, bytes)) or not isinstance(rows, Sequence):
        raise ValueError(f"{name} must be a sequence of 1-D tensors or a 2-D tensor, got {type(rows).__name__}")
    parts = [r if isinstance(r, Tensor) else torch.as_tensor(r) for r in rows]
    for i, r in enumerate(parts):
        if r.ndim != 1:
            raise ValueError(f"{name}[{i}] must be 1-D, got shape {tuple(r.shape)}")
    if device is None:
        device = parts[0].device if parts else torch.device("cpu")
    if any(r.device != device for r in parts):
        raise ValueError(f"every tensor of {name} must be on one device ({device})")
    lengths = torch.tensor([r.numel() for r in parts], dtype=torch.int64).to(device)
    if not parts:
        return torch.zeros(0, 0, dtype=torch.int64, device=device), lengths
    if all(r.numel() == parts[0].numel() for r in parts):
        return torch.stack(parts), lengths
    dtype = parts[0].dtype
    for r in parts[1:]:
        dtype = torch.promote_types(dtype, r.dtype)
    return torch.nn.utils.rnn.pad_sequence([r.to(dtype) for r in parts], batch_first=True), lengths


def _as_n_gts(n_gts: Any, n_queries: int, device: torch.device) -> Tensor:
    t = n_gts if isinstance(n_gts, Tensor) else torch.as_tensor(np.asarray(n_gts))
    if t.ndim != 1 or t.numel() != n_queries:
        raise ValueError(f"n_gts must hold one count per query ({n_queries}), got shape {tuple(t.shape)}")
    if t.dtype == torch.bool or t.is_complex() or (t.is_floating_point() and not bool((t == t.round()).all())):
        raise ValueError("n_gts must be integer counts")
    t = t.to(device=device, dtype=torch.int64)
    if bool((t < 0).any()):
        raise ValueError("n_gts must be >= 0")
    return t


def _values(hit: Tensor, lengths: Tensor, n_gts: Tensor, names: Sequence[str], top_k: Sequence[Tuple[int, ...]]):
    """OML's per-query values, float32 ``[Q]`` for each (name, k), in order.

    ``hit``: ``[Q, d]`` bool, the retrieved item at the rank is relevant; ``lengths``:
    the retrieved list's length per query (positions past it are padding)."""
    q, d = hit.shape
    device = hit.device
    valid = torch.arange(d, device=device).unsqueeze(0) < lengths.unsqueeze(1)
    hit = hit & valid
    # OML clips the cutoff to the list it was given: precision divides by min(k, n_gt, length)
    reach = torch.minimum(n_gts, lengths)
    ranking = Ranking(
        relevance=hit.to(torch.float64),
        valid=valid,
        # R = 0 only where OML's own conventions decide (below); 1 stands in for the kernels
        n_relevant=torch.where(reach > 0, reach, torch.ones_like(reach)),
        n_candidates=lengths,
        complete=True,
    )
    keys = [f"{_KEYS[name]}@{k}" for name, ks in zip(names, top_k) for k in ks]
    values = ranking_values(ranking, parse_metrics(keys)) if keys else hit.new_zeros(q, 0, dtype=torch.float64)
    out: List[Tensor] = []
    column = 0
    no_list = lengths == 0
    no_gt = (n_gts == 0) & ~no_list
    filled = torch.where(n_gts == 0, 1.0, 0.0).to(torch.float64)
    for name, ks in zip(names, top_k):
        cmc = None
        if name == "precision":  # hits@k / 0 where n_gt = 0: NaN without a hit (inf with one)
            cmc = ranking_values(ranking, parse_metrics([f"hit_rate@{k}" for k in ks]))
        for j, _ in enumerate(ks):
            v = values[:, column]
            column += 1
            if cmc is not None:
                v = torch.where(no_gt, torch.where(cmc[:, j] > 0, float("inf"), float("nan")), v)
            v = torch.where(no_list, filled, v)
            out.append(v.to(torch.float32))
    return out


def _gt_tops_values(gt_tops: Any, n_gts: Any, top_k: Any, name: str) -> List[Tensor]:
    ks = _check_top_k(top_k, "top_k")
    tops, lengths = _as_rows(gt_tops, "gt_tops")
    if tops.dtype != torch.bool:
        if tops.is_complex() or not bool(((tops == 0) | (tops == 1)).all()):
            raise ValueError("gt_tops must be bool (or 0/1) indicators of correctly retrieved items")
        tops = tops != 0
    n = _as_n_gts(n_gts, tops.shape[0], tops.device)
    by_k = dict(zip(ks, _values(tops, lengths, n, [name], [ks])))
    return [by_k[int(k)] for k in top_k]


def _id_hits(retrieved_ids: Any, gt_ids: Any) -> Tuple[Tensor, Tensor, Tensor]:
    """``[Q, d]`` bool (retrieved id among the query's ground truth: OML's ``isin``),
    the retrieved lengths and the ground-truth counts (``len(gt_ids[i])``)."""
    if len(retrieved_ids) != len(gt_ids):
        raise ValueError(f"retrieved_ids and gt_ids must have one entry per query, got {len(retrieved_ids)} "
                         f"and {len(gt_ids)}")
    ret, lengths = _as_rows(retrieved_ids, "retrieved_ids")
    gt, n_gts = _as_rows(gt_ids, "gt_ids", device=ret.device)
    if ret.is_complex() or gt.is_complex() or ret.dtype == torch.bool or gt.dtype == torch.bool:
        raise ValueError("retrieved_ids and gt_ids must be integer ids")
    dtype = torch.promote_types(ret.dtype, gt.dtype)
    ret, gt = ret.to(dtype), gt.to(dtype)
    q = ret.shape[0]
    if gt.shape[1] == 0 or ret.shape[1] == 0:
        return torch.zeros(ret.shape, dtype=torch.bool, device=ret.device), lengths, n_gts
    # each row's ground truth sorted, its padding last: a batched binary search finds every id
    pad = torch.arange(gt.shape[1], device=gt.device).unsqueeze(0) >= n_gts.unsqueeze(1)
    top = torch.finfo(dtype).max if dtype.is_floating_point else torch.iinfo(dtype).max
    gt = gt.masked_fill(pad, top).sort(dim=1).values
    at = torch.searchsorted(gt, ret.contiguous()).clamp(max=gt.shape[1] - 1)
    found = (gt.gather(1, at) == ret) & (at < n_gts.view(q, 1))
    return found, lengths, n_gts


def _categories_masks(query_categories: Any, n_queries: int, device: torch.device):
    """``[(category, mask)]`` in order of first appearance (OML's dict over the categories)."""
    if isinstance(query_categories, Tensor):
        labels = query_categories.tolist()
    else:
        labels = list(np.asarray(query_categories))
    if len(labels) != n_queries or (isinstance(query_categories, Tensor) and query_categories.ndim != 1):
        raise ValueError(f"query_categories must hold one category per query ({n_queries}), got {len(labels)}")
    index: Dict[Any, int] = {}
    codes = [index.setdefault(c, len(index)) for c in labels]
    codes_t = torch.tensor(codes, dtype=torch.int64).to(device)
    return [(c, codes_t == i) for c, i in index.items()]


def _distances(d: Any, name: str) -> Tensor:
    t = d if isinstance(d, Tensor) else torch.as_tensor(np.asarray(d))
    if t.dtype == torch.bool or t.is_complex():
        raise ValueError(f"{name} must hold real distances, got {t.dtype}")
    t = t.reshape(-1).to(torch.float64)
    if not bool(torch.isfinite(t).all()):
        raise ValueError(f"{name} must be finite")
    return t
