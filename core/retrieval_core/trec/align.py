"""A run aligned to qrels, as trec_eval reads them: the judgement of every retrieved document,
R per query from the qrels, and the ideal gains.

Semantics (trec_eval's ``form_res_rels``):

* evaluated queries: those of the qrels that the run has (``complete=True``, trec_eval
  ``-c``: every query of the qrels, with no entries where the run has none); run queries
  without judgements are left out;
* ``max_per_query`` (trec_eval ``-M``): only the first that many entries of each query,
  in trec_eval's order (score descending, docid descending);
* a retrieved document is *judged* when the qrels hold it with rel >= 0 (a negative rel
  is in the pool but unjudged, as is a document absent from the qrels); it is
  *relevant* when judged with rel >= ``level`` (trec_eval ``-l``); its gain is its rel
  when judged and positive, else 0;
* ``judged_only`` (trec_eval ``-J``): after ``max_per_query``, the entries that are not judged
  (absent from the qrels, or a negative rel) are removed and the others ranked 1, 2, ... anew
  (form_res_rels.c); the evaluated queries stay, with no entries where none was judged;
* R (``n_relevant``) counts the qrels' judgements with rel >= ``level``, retrieved or not;
  the ideal gains are the query's positive judged rels, sorted descending.

Example:
    >>> from retrieval_core.trec import qrels_from_dict, run_from_dict
    >>> qrels = qrels_from_dict({"q1": {"a": 2, "b": 0, "c": 1, "z": -1}, "q2": {"x": 1}})
    >>> run = run_from_dict({"q1": {"a": 0.1, "b": 0.9, "d": 0.5, "z": 0.3}, "q9": {"x": 1.0}})
    >>> al = align(run, qrels)
    >>> al.query_ids, al.gain.tolist(), al.judged.tolist(), al.relevant.tolist()
    (('q1',), [0.0, 0.0, 0.0, 2.0], [True, False, False, True], [False, False, False, True])
    >>> al.n_relevant.tolist(), al.num_ret.tolist(), al.num_rel_ret.tolist(), al.ideal_dense().tolist()
    ([2], [4], [1], [[2.0, 1.0]])
    >>> align(run, qrels, complete=True, max_per_query=1, level=2).num_rel_ret.tolist()
    [0, 0]
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Tuple

import torch
from torch import Tensor

from ..validate.counting import check
from ._parse import numpy
from .files import Qrels, Run

__all__ = ["Aligned", "DuplicateError", "align"]


@dataclass(frozen=True, eq=False)
class Aligned:
    """Run entries of the evaluated queries (rank order; ``offsets[i]:offsets[i + 1]`` is query i):
    ``query``, ``rank`` (1-based), ``doc`` (index into ``docs``), ``score`` float64, ``rel``
    (the qrels' value, or -1 when absent from the qrels), ``pooled`` (in the qrels, whatever
    its rel), ``gain`` float64, ``judged``,
    ``relevant``; per query ``n_relevant`` (R, int64); ``ideal``: the positive judged gains
    of each query, sorted descending, ``ideal_offsets[i]:ideal_offsets[i + 1]`` for query i."""

    query_ids: Tuple[str, ...]
    docs: object
    offsets: Tensor
    query: Tensor
    rank: Tensor
    doc: Tensor
    score: Tensor
    rel: Tensor
    pooled: Tensor
    gain: Tensor
    judged: Tensor
    relevant: Tensor
    n_relevant: Tensor
    ideal: Tensor
    ideal_offsets: Tensor
    level: int

    def _per_query(self, mask: Tensor) -> Tensor:
        return torch.zeros(len(self.query_ids), dtype=torch.int64).index_add_(0, self.query, mask.long())

    @property
    def num_ret(self) -> Tensor:
        """Retrieved entries per query (after ``max_per_query``): trec_eval num_ret."""
        return self.offsets[1:] - self.offsets[:-1]

    @property
    def num_rel_ret(self) -> Tensor:
        """Relevant retrieved entries per query: trec_eval num_rel_ret."""
        return self._per_query(self.relevant)

    @property
    def num_nonrel_judged_ret(self) -> Tensor:
        """Judged, non-relevant retrieved entries per query: trec_eval num_nonrel_judged_ret."""
        return self._per_query(self.judged & ~self.relevant)

    def ideal_dense(self) -> Tensor:
        """The ideal gains as ``[Q, max judged relevant]`` float64, padded with 0."""
        counts = self.ideal_offsets[1:] - self.ideal_offsets[:-1]
        width = int(counts.max()) if len(counts) else 0
        out = torch.zeros(len(self.query_ids), width, dtype=torch.float64)
        if self.ideal.numel():
            row = torch.repeat_interleave(torch.arange(len(self.query_ids)), counts)
            col = torch.arange(self.ideal.numel()) - self.ideal_offsets[row]
            out[row, col] = self.ideal
        return out


class DuplicateError(ValueError):
    """A document twice for an evaluated query; ``source``: ``"run"`` or ``"qrels"``."""

    def __init__(self, message: str, source: str = ""):
        super().__init__(message)
        self.source = source


def _refuse_duplicates(np, query, doc, rank, n_docs: int, query_ids, docs, source: str) -> None:
    """trec_eval's check (form_res_rels.c): a document twice among an evaluated query's entries
    (a run's within ``-M``; a qrels query's judgements) is an error; elsewhere it is never looked at."""
    key = query * max(n_docs, 1) + doc
    order = np.argsort(key, kind="stable")
    same = np.flatnonzero(key[order][1:] == key[order][:-1])
    if len(same):
        a, b = order[same[0]], order[same[0] + 1]
        where = f" (ranks {int(rank[a])} and {int(rank[b])})" if rank is not None else ""
        raise DuplicateError(f"document {docs[int(doc[a])]!r} appears twice for query {query_ids[int(query[a])]!r}"
                             f"{where}; trec_eval refuses it too", source)


@check
def check_relevance_level(level) -> None:
    """``level`` (trec_eval ``-l``) must be an int that an int64 holds, as the relevances are."""
    if isinstance(level, bool) or not isinstance(level, int):
        raise TypeError(f"level must be an int (rel >= level is relevant); got {level!r}")
    if not -2**63 <= level < 2**63:
        raise ValueError(f"level must be an int64 (-2**63 <= level < 2**63), as the relevances are; got {level}")


def align(run: Run, qrels: Qrels, *, level: int = 1, max_per_query: Optional[int] = None,
          complete: bool = False, judged_only: bool = False) -> Aligned:
    """Judge the entries of ``run`` with ``qrels`` (see the module doc for the semantics;
    ``judged_only``: trec_eval's ``-J``)."""
    np = numpy()
    _check_arguments(run, qrels, level, max_per_query)
    run_to_qrels, present, eval_of_qrels, query_ids = _evaluated_queries(np, run, qrels, complete)
    keep, eq, rank = _kept_entries(np, run, run_to_qrels, eval_of_qrels, max_per_query)
    qq = run_to_qrels[run.query.numpy()[keep]]
    rdoc = run.doc.numpy()[keep]
    qdoc = _in_qrels_vocabulary(np, run, qrels, rdoc)
    if run.duplicates:
        _refuse_duplicates(np, eq, rdoc, rank, len(run.docs), query_ids, run.docs, "run")
    rel, found, judged, relevant, gain = _judge(np, qrels, qq, qdoc, level)
    if judged_only:  # trec_eval -J (form_res_rels.c): after -M, the judged entries alone, ranked anew
        keep[keep] = judged
        eq, rdoc, rel, found, gain, relevant = eq[judged], rdoc[judged], rel[judged], found[judged], gain[judged], \
            relevant[judged]
        judged = judged[judged]
        rank = _ranks(np, eq, len(query_ids))

    n_rel_all = qrels.n_relevant(level).numpy()
    n_relevant = n_rel_all[present]
    offsets = np.zeros(len(query_ids) + 1, np.int64)
    np.cumsum(np.bincount(eq, minlength=len(query_ids)), out=offsets[1:])
    ig, ideal_offsets = _ideal_gains(np, qrels, eval_of_qrels, query_ids)
    t = torch.from_numpy
    c = np.ascontiguousarray
    return Aligned(query_ids, run.docs, t(offsets), t(c(eq)), t(c(rank)), t(c(rdoc)), run.score[torch.from_numpy(keep)],
                   t(rel), t(found), t(gain), t(judged), t(relevant), t(c(n_relevant)), t(ig), t(ideal_offsets),
                   level)


def _ranks(np, eq, n_queries: int):
    """1, 2, ... within each query of entries grouped by query (ascending)."""
    starts = np.zeros(n_queries + 1, np.int64)
    np.cumsum(np.bincount(eq, minlength=n_queries), out=starts[1:])
    return np.arange(len(eq), dtype=np.int64) - starts[eq] + 1


def _check_arguments(run, qrels, level, max_per_query) -> None:
    """:func:`align`'s arguments: a Run and a Qrels, an int64 ``level``, ``max_per_query`` None or an int >= 0."""
    if not isinstance(run, Run) or not isinstance(qrels, Qrels):
        raise TypeError(f"align(run, qrels) takes a Run and a Qrels; got {type(run).__name__}, "
                        f"{type(qrels).__name__}")
    check_relevance_level(level)
    if max_per_query is not None and (isinstance(max_per_query, bool) or not isinstance(max_per_query, int)
                                      or max_per_query < 0):
        raise ValueError(f"max_per_query must be a non-negative int or None; got {max_per_query!r}")


def _evaluated_queries(np, run: Run, qrels: Qrels, complete: bool):
    """``(run_to_qrels, present, eval_of_qrels, query_ids)``: each run query's qrels position
    (-1: none), which qrels queries are evaluated, the evaluated position of each (-1: none),
    and the evaluated queries' ids."""
    qrels_pos = {q: i for i, q in enumerate(qrels.query_ids)}
    run_to_qrels = np.array([qrels_pos.get(q, -1) for q in run.query_ids], dtype=np.int64)
    present = np.zeros(len(qrels.query_ids), bool)
    present[run_to_qrels[run_to_qrels >= 0]] = True
    if complete:
        present[:] = True
    eval_of_qrels = np.full(len(qrels.query_ids), -1, np.int64)
    eval_of_qrels[present] = np.arange(int(present.sum()))
    query_ids = tuple(q for q, p in zip(qrels.query_ids, present.tolist()) if p)
    return run_to_qrels, present, eval_of_qrels, query_ids


def _kept_entries(np, run: Run, run_to_qrels, eval_of_qrels, max_per_query: Optional[int]):
    """``(keep, eq, rank)``: the run entries of evaluated queries within ``max_per_query``, and
    the evaluated query and rank of each kept entry."""
    rq = run.query.numpy()
    rank = run.rank.numpy()
    in_qrels = run_to_qrels[rq]
    eq = np.full(len(rq), -1, np.int64)
    eq[in_qrels >= 0] = eval_of_qrels[in_qrels[in_qrels >= 0]]
    keep = eq >= 0
    if max_per_query is not None:
        keep &= rank <= min(max_per_query, 2**63 - 1)  # beyond int64: every entry
    return keep, eq[keep], rank[keep]


def _in_qrels_vocabulary(np, run: Run, qrels: Qrels, rdoc):
    """The run's documents ``rdoc`` as positions in the qrels' vocabulary (-1: not in it)."""
    if run.docs is qrels.docs:
        return rdoc
    used = np.unique(rdoc)
    lut = np.full(len(run.docs), -1, np.int64)
    lut[used] = qrels.docs.find(run.docs.take(used))
    return lut[rdoc]


def _judge(np, qrels: Qrels, qq, qdoc, level: int):
    """``(rel, found, judged, relevant, gain)`` of the entries (qrels query ``qq``, document
    ``qdoc``): looked up in the qrels, sorted by (query, doc)."""
    n_docs = max(len(qrels.docs), 1)
    jkey = qrels.query.numpy() * n_docs + qrels.doc.numpy()  # sorted: qrels are sorted by (query, doc)
    rkey = qq * n_docs + qdoc
    pos = np.searchsorted(jkey, rkey)
    found = (qdoc >= 0) & (pos < len(jkey))
    found[found] = jkey[pos[found]] == rkey[found]
    qrel = qrels.rel.numpy()
    rel = np.full(len(rkey), -1, np.int64)
    rel[found] = qrel[pos[found]]
    judged = found & (rel >= 0)
    relevant = judged & (rel >= level)
    gain = np.where(judged & (rel > 0), rel, 0).astype(np.float64)
    return rel, found, judged, relevant, gain


def _ideal_gains(np, qrels: Qrels, eval_of_qrels, query_ids):
    """``(ideal, ideal_offsets)``: the positive judged rels of each evaluated query, sorted
    descending (a document judged twice for an evaluated query is refused)."""
    qrel = qrels.rel.numpy()
    jq = eval_of_qrels[qrels.query.numpy()]
    if qrels.duplicates:
        evaluated = jq >= 0
        _refuse_duplicates(np, jq[evaluated], qrels.doc.numpy()[evaluated], None, len(qrels.docs), query_ids,
                           qrels.docs, "qrels")
    pos_rel = (jq >= 0) & (qrel > 0)
    iq, ig = jq[pos_rel], qrel[pos_rel].astype(np.float64)
    order = np.lexsort((-ig, iq))
    iq, ig = iq[order], ig[order]
    ideal_offsets = np.zeros(len(query_ids) + 1, np.int64)
    np.cumsum(np.bincount(iq, minlength=len(query_ids)), out=ideal_offsets[1:])
    return ig, ideal_offsets
