"""Writing TREC runs and qrels: from a :class:`~retrieval_core.trec.files.Run` / ``Qrels``, a
``{qid: {docid: value}}`` dict, or top-k doc indices and scores tensors.

Example:
    >>> import os, tempfile
    >>> p = os.path.join(tempfile.mkdtemp(), "qrels")
    >>> write_qrels(p, {"q2": {"b": 1}, "q1": {"a": 0}})
    >>> print(open(p).read(), end="")
    q1 0 a 0
    q2 0 b 1
"""
from __future__ import annotations

import os
from typing import Dict, Mapping, Optional, Sequence, Union

import torch
from torch import Tensor

from .files import PathLike, Qrels, Run, qrels_from_dict, run_from_dict

__all__ = ["write_run", "write_qrels"]


def _check_field(value: str, what: str) -> str:
    if not value or any(c.isspace() for c in value):
        raise ValueError(f"a {what} written to a TREC file must be non-empty without whitespace; got {value!r}")
    return value


def write_run(path: PathLike, run: Union[Run, Tensor], scores: Optional[Tensor] = None, *,
              query_ids: Optional[Sequence[str]] = None, doc_ids: Optional[Sequence[str]] = None,
              tag: Optional[str] = None) -> None:
    """Write a TREC run: from a :class:`Run`, or from top-k doc indices ``[Q, k]`` (``run``; negative =
    padding, skipped) and their ``scores`` ``[Q, k]``, with ``query_ids`` (default "0".."Q-1") and
    ``doc_ids`` (names of the doc indices; default the index itself). Rows are written in
    trec_eval's order (score descending, ties by docid descending) with rank 1, 2, ...; scores
    as the shortest text that reads back to the same float64.

    Example:
        >>> import os, tempfile, torch
        >>> p = os.path.join(tempfile.mkdtemp(), "run")
        >>> write_run(p, torch.tensor([[2, 0]]), torch.tensor([0.5, 0.75]).view(1, 2), query_ids=["q"], tag="t")
        >>> print(open(p).read(), end="")
        q Q0 0 1 0.75 t
        q Q0 2 2 0.5 t
    """
    if not isinstance(run, Run):
        run = _run_from_topk(run, scores, query_ids, doc_ids, tag or "run")
    elif scores is not None:
        raise TypeError("write_run(path, run): scores come with the Run; pass doc indices to give scores")
    tag = _check_field(tag or run.tag or "run", "tag")
    qids = [_check_field(q, "query id") for q in run.query_ids]
    with open(os.fspath(path), "w", encoding="utf-8", errors="surrogateescape") as f:
        for q, d, r, s in zip(run.query.tolist(), run.doc.tolist(), run.rank.tolist(), run.score.tolist()):
            f.write(f"{qids[q]} Q0 {run.docs[d]} {r} {s!r} {tag}\n")


def _run_from_topk(indices: Tensor, scores: Optional[Tensor], query_ids, doc_ids, tag: str) -> Run:
    if not isinstance(indices, Tensor) or scores is None or not isinstance(scores, Tensor):
        raise TypeError("write_run(path, indices, scores): give a Run, or doc indices and scores as tensors")
    if indices.dim() != 2 or scores.shape != indices.shape:
        raise ValueError(f"write_run: doc indices and scores must both be [Q, k]; got {tuple(indices.shape)} "
                         f"and {tuple(scores.shape)}")
    if indices.dtype.is_floating_point or indices.dtype == torch.bool:
        raise TypeError(f"write_run: doc indices must be integers; got {indices.dtype}")
    n_q = indices.shape[0]
    query_ids = [str(i) for i in range(n_q)] if query_ids is None else list(query_ids)
    if len(query_ids) != n_q:
        raise ValueError(f"write_run: {len(query_ids)} query ids for {n_q} rows of doc indices")
    idx, sc = indices.detach().cpu().tolist(), scores.detach().cpu().double().tolist()
    table: Dict[str, Dict[str, float]] = {}
    for qid, row, srow in zip(query_ids, idx, sc):
        docs = table.setdefault(_check_field(str(qid), "query id"), {})
        for i, s in zip(row, srow):
            if i >= 0:
                docs[str(i) if doc_ids is None else _check_field(doc_ids[i], "doc id")] = s
    return run_from_dict(table, tag=tag)


def write_qrels(path: PathLike, qrels: Union[Qrels, Mapping[str, Mapping[str, int]]]) -> None:
    """Write ``qid 0 docid rel`` lines from a :class:`Qrels` or a ``{qid: {docid: rel}}`` dict."""
    if not isinstance(qrels, Qrels):
        qrels = qrels_from_dict(qrels)
    qids = [_check_field(q, "query id") for q in qrels.query_ids]
    with open(os.fspath(path), "w", encoding="utf-8", errors="surrogateescape") as f:
        for q, d, r in zip(qrels.query.tolist(), qrels.doc.tolist(), qrels.rel.tolist()):
            f.write(f"{qids[q]} 0 {qrels.docs[d]} {r}\n")
