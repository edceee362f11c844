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


_BLANKS = frozenset(b" \t\n\v\f\r\0")  # what the readers split on (C's isspace), and NUL, which they refuse


def _field(value, what: str, *, first: bool = False) -> str:
    """``value`` if it reads back as one whole field of a TREC line (``first``: the line's first
    field, which must not make a comment line); else a ValueError saying why."""
    if not isinstance(value, str):
        raise TypeError(f"a {what} written to a TREC file must be a str; got {type(value).__name__} {value!r}")
    try:
        raw = value.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError as e:
        raise ValueError(f"a {what} written to a TREC file must be encodable as UTF-8; got {value!r} ({e.reason})") \
            from None
    if not raw or _BLANKS.intersection(raw):
        raise ValueError(f"a {what} written to a TREC file must be non-empty, without whitespace or NUL (it would "
                         f"not read back as one field); got {value!r}")
    if first and raw.startswith(b"#"):
        raise ValueError(f"a {what} written to a TREC file must not start with '#' (the line would read as a "
                         f"comment); got {value!r}")
    return value


def _check_entries(obj, values: Tensor, what: str):
    """Query ids (distinct, each a line's first field) and the documents used (fields) of a Run or
    Qrels, and no document twice for a query: what the reader would read back differently."""
    if len(set(obj.query_ids)) != len(obj.query_ids):
        raise ValueError(f"{what}: a query id appears twice in query_ids; a TREC file holds one list per query")
    qids = [_field(q, "query id", first=True) for q in obj.query_ids]
    used = torch.unique(obj.doc).tolist()
    docs = {d: _field(obj.docs[d], "doc id") for d in used}
    key = obj.query * max(len(obj.docs), 1) + obj.doc
    if torch.unique(key).numel() != key.numel():
        raise ValueError(f"{what}: a document appears twice for one query; the reader refuses that")
    if values.is_floating_point() and not bool(torch.isfinite(values).all()):
        raise ValueError(f"{what}: scores must be finite; the reader refuses NaN and infinities")
    return qids, docs


def write_run(path: PathLike, run: Union[Run, Tensor], scores: Optional[Tensor] = None, *,
              query_ids: Optional[Sequence[str]] = None, doc_ids: Optional[Sequence[str]] = None,
              tag: Optional[str] = None) -> None:
    """Write a TREC run: from a :class:`Run`, or from top-k doc indices ``[Q, k]`` (``run``; negative =
    padding, skipped) and their ``scores`` ``[Q, k]``, with ``query_ids`` (default "0".."Q-1") and
    ``doc_ids`` (names of the doc indices; default the index itself). Rows are written in
    trec_eval's order (score descending, ties by docid descending) with rank 1, 2, ...; scores
    as the shortest text that reads back to the same float64.

    Nothing is written that would not read back as given: an id that is empty, holds whitespace
    or NUL, or (a query id) starts with ``#``, a tag with whitespace, a query id given for two
    rows, a document twice in a row, a NaN or infinite score raise a ValueError (a row of padding
    only has no line: that query is absent when read back).

    Example:
        >>> import os, tempfile, torch
        >>> p = os.path.join(tempfile.mkdtemp(), "run")
        >>> write_run(p, torch.tensor([[2, 0]]), torch.tensor([0.5, 0.75]).view(1, 2), query_ids=["q"], tag="t")
        >>> print(open(p).read(), end="")
        q Q0 0 1 0.75 t
        q Q0 2 2 0.5 t
        >>> write_run(p, torch.tensor([[2, 2]]), torch.tensor([[0.5, 0.75]]))  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        ValueError: write_run: row 0 (query '0') holds document '2' twice (columns 0 and 1); a run holds ...
    """
    if not isinstance(run, Run):
        run = _run_from_topk(run, scores, query_ids, doc_ids, "run" if tag is None else tag)
    elif scores is not None:
        raise TypeError("write_run(path, run): scores come with the Run; pass doc indices to give scores")
    tag = _field(tag or run.tag or "run", "tag")
    qids, docs = _check_entries(run, run.score, "write_run")
    with open(os.fspath(path), "w", encoding="utf-8", errors="surrogateescape") as f:
        for q, d, r, s in zip(run.query.tolist(), run.doc.tolist(), run.rank.tolist(), run.score.tolist()):
            f.write(f"{qids[q]} Q0 {docs[d]} {r} {s!r} {tag}\n")


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
    n_names = None if doc_ids is None else len(doc_ids)
    table: Dict[str, Dict[str, float]] = {}
    row_of: Dict[str, int] = {}
    for r, (qid, row, srow) in enumerate(zip(query_ids, idx, sc)):
        qid = _field(str(qid), "query id", first=True)
        if qid in row_of:
            raise ValueError(f"write_run: query id {qid!r} is given for rows {row_of[qid]} and {r}; a run holds one "
                             "ranking per query (merge the rows first)")
        row_of[qid] = r
        docs = table[qid] = {}
        column: Dict[str, int] = {}
        for j, (i, s) in enumerate(zip(row, srow)):
            if i < 0:
                continue
            if n_names is not None and i >= n_names:
                raise ValueError(f"write_run: doc index {i} (row {r}) has no name: doc_ids holds {n_names}")
            name = str(i) if doc_ids is None else _field(doc_ids[i], "doc id")
            if name in column:
                raise ValueError(f"write_run: row {r} (query {qid!r}) holds document {name!r} twice (columns "
                                 f"{column[name]} and {j}); a run holds a document once per query")
            column[name] = j
            if s != s or s in (float("inf"), float("-inf")):
                raise ValueError(f"write_run: row {r} (query {qid!r}), document {name!r}: the score must be "
                                 f"finite; got {s!r} (the reader refuses NaN and infinities)")
            docs[name] = s
    return run_from_dict(table, tag=tag)


def write_qrels(path: PathLike, qrels: Union[Qrels, Mapping[str, Mapping[str, int]]]) -> None:
    """Write ``qid 0 docid rel`` lines from a :class:`Qrels` or a ``{qid: {docid: rel}}`` dict; an id
    that would not read back as given is refused as in :func:`write_run`."""
    if not isinstance(qrels, Qrels):
        qrels = qrels_from_dict(qrels)
    qids, docs = _check_entries(qrels, qrels.rel, "write_qrels")
    with open(os.fspath(path), "w", encoding="utf-8", errors="surrogateescape") as f:
        for q, d, r in zip(qrels.query.tolist(), qrels.doc.tolist(), qrels.rel.tolist()):
            f.write(f"{qids[q]} 0 {docs[d]} {r}\n")
