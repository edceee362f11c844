"""``fuse``: several runs into one fused :class:`~retrieval_core.trec.Run`, on the runs' device.

The runs are aligned (:mod:`.align`: one vocabulary, the union of their queries), each run's scores
normalised per query (:mod:`.normalize`), every entry grouped with the others of its (query, doc)
pair, and the pairs' fused scores computed by one segment reduction (:mod:`.methods`). The fused run
lists every pair some run holds, in trec_eval's order (query, score descending, docid descending),
as :func:`~retrieval_core.trec.read_run` orders a run, so it evaluates and writes like one read.

Example:
    >>> from retrieval_core.trec import run_from_dict
    >>> bm25 = run_from_dict({"q1": {"a": 12.0, "b": 9.0, "c": 3.0}})
    >>> dense = run_from_dict({"q1": {"b": 0.9, "d": 0.8}})
    >>> fused = fuse([bm25, dense], method="rrf", k=60)
    >>> [fused.docs[i] for i in fused.doc.tolist()]
    ['b', 'a', 'd', 'c']
    >>> wsum = fuse([bm25, dense], method="wsum", norm="min-max", weights=[0.3, 0.7])
    >>> {d: round(s, 6) for d, s in wsum.to_dict()["q1"].items()}  # b: 0.3 * 6 / 9 + 0.7 * 1
    {'b': 0.9, 'a': 0.3, 'd': 0.0, 'c': 0.0}
"""
from __future__ import annotations

from typing import Optional, Sequence

import torch
from torch import Tensor

from ..trec.files import Run
from .align import align_runs
from .methods import check_method, combine
from .normalize import check_norm, normalize

__all__ = ["fuse", "check_weights"]


def check_weights(weights: Optional[Sequence[float]], n_runs: int, method: str, device) -> Optional[Tensor]:
    """The weights as a float64 tensor (``wsum`` only; None: ``1 / n_runs`` each), or ValueError."""
    if method != "wsum":
        if weights is not None:
            raise ValueError(f"weights apply to method 'wsum' only; got weights with method {method!r}")
        return None
    if weights is None:
        return torch.full((n_runs,), 1 / n_runs, dtype=torch.float64, device=device)
    w = torch.as_tensor(weights, dtype=torch.float64).to(device).reshape(-1)
    if w.numel() != n_runs:
        raise ValueError(f"weights: one per run; got {w.numel()} weights for {n_runs} runs")
    if not bool(torch.isfinite(w).all()) or bool((w < 0).any()):
        raise ValueError(f"weights must be finite and >= 0; got {w.tolist()}")
    return w


def _trec_order(query: Tensor, doc: Tensor, score: Tensor, docs) -> Tensor:
    """The permutation that puts the pairs in trec_eval's order: query, score descending, docid descending."""
    by_bytes = torch.as_tensor(docs.byte_order(), dtype=torch.int64).to(score.device)
    place = torch.empty_like(by_bytes)
    place[by_bytes] = torch.arange(len(by_bytes), device=score.device)
    by_doc = torch.sort(place[doc], descending=True, stable=True).indices
    by_score = by_doc[torch.sort(score[by_doc], descending=True, stable=True).indices]
    return by_score[torch.sort(query[by_score], stable=True).indices]


def fuse(runs: Sequence[Run], method: str = "rrf", norm: Optional[str] = "min-max",
         weights: Optional[Sequence[float]] = None, k: float = 60, tag: Optional[str] = None) -> Run:
    """Fuse ``runs`` (a list of :class:`~retrieval_core.trec.Run`, possibly with different vocabularies and
    queries) into one :class:`~retrieval_core.trec.Run` (module doc).

    Args:
        method: ``"rrf"``, ``"sum"``, ``"mnz"``, ``"anz"``, ``"max"``, ``"min"``, ``"med"``, ``"wsum"``
            (or ``"CombSUM"``...; :mod:`retrieval_core.fusion.methods`).
        norm: ``"min-max"``, ``"max"``, ``"sum"``, ``"zmuv"``, ``"rank"`` or None, applied to each run per
            query before fusing (:mod:`retrieval_core.fusion.normalize`); rrf uses ranks only.
        weights: one per run, >= 0, for ``"wsum"`` (default ``1 / len(runs)`` each).
        k: rrf's constant.
        tag: the fused run's tag (default the method's name).
    """
    method, norm = check_method(method), check_norm(norm)
    al = align_runs(runs)
    device = al.entries[0].score.device
    w = check_weights(weights, len(runs), method, device)
    nq = len(al.query_ids)
    scores = [normalize(e.score, e.query, e.rank, nq, None if method == "rrf" else norm) for e in al.entries]
    query = torch.cat([e.query for e in al.entries])
    doc = torch.cat([e.doc for e in al.entries])
    run = torch.cat([torch.full_like(e.query, i) for i, e in enumerate(al.entries)])
    keys, pair = torch.unique(query * max(len(al.docs), 1) + doc, return_inverse=True)
    fused = combine(method, pair, len(keys), torch.cat(scores), torch.cat([e.rank for e in al.entries]), run,
                    k=k, weights=w)
    pq, pd = keys // max(len(al.docs), 1), keys % max(len(al.docs), 1)
    order = _trec_order(pq, pd, fused, al.docs)
    pq, pd, fused = pq[order], pd[order], fused[order]
    offsets = torch.zeros(nq + 1, dtype=torch.int64, device=device)
    offsets[1:] = torch.cumsum(torch.bincount(pq, minlength=nq), 0)
    return Run(al.query_ids, al.docs, pq, pd, fused, offsets, method if tag is None else tag)
