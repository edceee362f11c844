"""Several runs on one footing: one shared document vocabulary and the union of their queries.

Runs read separately have their own :class:`~retrieval_core.trec.Vocabulary` and query sets. The
runs are put on a new vocabulary (the first run's ids first; the runs' own are never extended)
and on the union of their query ids in byte order (trec_eval's), so that a (query, doc) pair means
the same thing in every run. A run without a query contributes nothing to it, as a ranx run whose
results for that query are empty.

Example:
    >>> from retrieval_core.trec import run_from_dict
    >>> a = run_from_dict({"q1": {"d1": 1.0, "d2": 0.5}})
    >>> b = run_from_dict({"q2": {"d3": 2.0}, "q1": {"d2": 3.0}})
    >>> al = align_runs([a, b])
    >>> al.query_ids, al.docs.ids(), [e.query.tolist() for e in al.entries], [e.doc.tolist() for e in al.entries]
    (('q1', 'q2'), ['d1', 'd2', 'd3'], [[0, 0], [0, 1]], [[0, 1], [1, 2]])
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import List, Sequence, Tuple

import numpy as np
import torch
from torch import Tensor

from ..trec.files import Run, Vocabulary

__all__ = ["Entries", "AlignedRuns", "align_runs", "check_runs"]


@dataclass(frozen=True)
class Entries:
    """One run's entries on the shared footing: ``query`` (index into the union), ``doc`` (index into
    the shared vocabulary), ``score`` (float64), ``rank`` (0-based place within its query in the run)."""

    query: Tensor
    doc: Tensor
    score: Tensor
    rank: Tensor


@dataclass(frozen=True)
class AlignedRuns:
    """The union ``query_ids`` (byte order), the shared ``docs``, and each run's :class:`Entries`."""

    query_ids: Tuple[str, ...]
    docs: Vocabulary
    entries: List[Entries]


def check_runs(runs: Sequence[Run]) -> None:
    """ValueError for no run, an object that is no :class:`Run`, or a score that is not finite."""
    if isinstance(runs, Run) or len(runs) == 0:
        raise ValueError("fuse needs a non-empty list of runs (trec.Run objects); got "
                         f"{'a single Run' if isinstance(runs, Run) else 'an empty list'}")
    for i, run in enumerate(runs):
        if not isinstance(run, Run):
            raise ValueError(f"runs[{i}] is a {type(run).__name__}, not a retrieval_core.trec.Run")
        bad = ~torch.isfinite(run.score)
        if bool(bad.any()):
            j = int(torch.nonzero(bad)[0])
            q, d = run.query_ids[int(run.query[j])], run.docs[int(run.doc[j])]
            raise ValueError(f"runs[{i}]: query {q!r}, doc {d!r}: scores must be finite; got {float(run.score[j])}")


def _doc_maps(runs: Sequence[Run], device) -> Tuple[Vocabulary, List[Tensor]]:
    """The shared vocabulary and, per run, its doc index -> shared index (one vocabulary shared: itself).
    The runs' id columns are joined and put in the new vocabulary at once (one factorisation)."""
    if all(run.docs is runs[0].docs for run in runs):
        return runs[0].docs, [None] * len(runs)
    docs = Vocabulary()
    sizes = [len(run.docs) for run in runs]
    columns = [run.docs.take(np.arange(n, dtype=np.int64)) for run, n in zip(runs, sizes) if n]
    if not columns:
        return docs, [torch.zeros(0, dtype=torch.int64, device=device) for _ in runs]
    joined = columns[0]
    for column in columns[1:]:
        joined = joined.concat(np, column)
    codes = torch.as_tensor(np.asarray(docs.extend(joined), dtype=np.int64), device=device)
    return docs, list(torch.split(codes, sizes))


def align_runs(runs: Sequence[Run]) -> AlignedRuns:
    """``runs`` on one vocabulary and the union of their queries (module doc)."""
    check_runs(runs)
    device = runs[0].score.device
    key = lambda q: q.encode("utf-8", "surrogateescape")  # noqa: E731
    query_ids = tuple(sorted({q for run in runs for q in run.query_ids}, key=key))
    where = {q: i for i, q in enumerate(query_ids)}
    docs, maps = _doc_maps(runs, device)
    entries = []
    for run, doc_map in zip(runs, maps):
        q_map = torch.tensor([where[q] for q in run.query_ids], dtype=torch.int64, device=device)
        query = run.query.to(device)
        rank = torch.arange(len(run), dtype=torch.int64, device=device) - run.offsets.to(device)[query]
        doc = run.doc.to(device)
        entries.append(Entries(q_map[query] if len(run) else query, doc if doc_map is None else doc_map[doc],
                               run.score.to(device, torch.float64), rank))
    return AlignedRuns(query_ids, docs, entries)
