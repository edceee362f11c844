"""Judging top-k batches against qrels in a validation loop, as trec_eval would judge the
run written from them: ``QrelsJudge(qrels)(query_ids, doc_ids, scores)``.

A dense retriever's validation step has, per query, its top-k documents (indices or ids)
and their scores ``[B, k]``. The judge returns what a metric update needs to give
trec_eval's numbers on the run written from those lists (:func:`write_run`):

* the columns reordered into trec_eval's rank order (score descending, then doc id
  **descending in byte order**, trec_eval's tie order), so that the stable sort of an
  adapter (``ties="stable"``) keeps it; padded slots (``mask`` False, or a negative doc
  index, as :func:`write_run` skips them) last;
* the retrieved gains (judged positive rels, nDCG's) and relevance (judged, ``rel >=
  level``) in that order, each query's R (its judgements with ``rel >= level``,
  retrieved or not) and its ideal gains (its positive judged rels, sorted descending);
* ``ids``: the query's index in ``qrels.query_ids`` (pass it as ``ids=``: a query the
  loop sees twice, as DistributedSampler pads, then counts once).

Queries: trec_eval (without ``-c``) evaluates the run's queries that have judgements and
ignores the others; so a row whose query is not in the qrels is dropped
(``unjudged="error"`` refuses it instead), and so is a row with no valid slot (it writes
no line, so trec_eval never sees the query). ``rows`` tells which input rows were kept.
Queries of the qrels that the loop never sees are not evaluated: the mean is over the
queries seen, as trec_eval's without ``-c``. A query without a relevant document scores 0
in trec_eval: evaluate with ``empty="zero"``.

Relevance level: at ``level=1`` (trec_eval's default) one metric takes every measure
(:meth:`JudgedBatch.inputs`). At another level trec_eval judges the binary measures by
``rel >= level`` but nDCG by the rels and every positive rel as ideal, so two metric
objects are fed: ``inputs(graded=False)`` (map, P, recall...) and ``inputs(graded=True)``
(nDCG).

Example:
    >>> import torch
    >>> from retrieval_core import evaluate_ranked
    >>> from retrieval_core.trec import qrels_from_dict, run_from_dict, evaluate_trec
    >>> qrels = qrels_from_dict({"q1": {"a": 2, "b": 0, "c": 1}, "q2": {"x": 1}})
    >>> judge = QrelsJudge(qrels)
    >>> scores = torch.tensor([[0.5, 0.9, 0.5], [1.0, 0.5, 0.2]], dtype=torch.float64)
    >>> b = judge(["q1", "q9"], [["b", "d", "a"], ["x", "y", "z"]], scores)   # q9: no judgements, dropped
    >>> b.query_ids, b.preds.tolist(), b.gains.tolist(), b.n_relevant.tolist(), b.ideal.tolist()
    (('q1',), [[0.9, 0.5, 0.5]], [[0.0, 0.0, 2.0]], [2], [[2.0, 1.0]])
    >>> got = evaluate_ranked(b.gains, ["map", "ndcg"], n_relevant=b.n_relevant, ideal=b.ideal, mask=b.mask)
    >>> run = run_from_dict({"q1": {"b": 0.5, "d": 0.9, "a": 0.5}, "q9": {"x": 1.0, "y": 0.5, "z": 0.2}})
    >>> want = evaluate_trec(qrels, run, ["map", "ndcg"]).summary()
    >>> got["map"].item() == want["map"], abs(got["ndcg"].item() - want["ndcg"]) < 1e-15
    (True, True)
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Optional, Sequence, Tuple, Union

import torch
from torch import Tensor

from .align import check_relevance_level
from ._parse import numpy
from .files import Qrels

__all__ = ["QrelsJudge", "JudgedBatch", "UNJUDGED"]

UNJUDGED = ("skip", "error")  # a query absent from the qrels: dropped as trec_eval does, or an error


@dataclass(frozen=True, eq=False)
class JudgedBatch:
    """The kept rows of a batch, judged (module doc). ``rows[B']``: their positions in the
    input; ``ids[B']``: their index in ``qrels.query_ids`` (``query_ids`` their names);
    ``order[B', k]``: the input column of each ranked slot; ``preds`` the scores
    (float64) in that order; ``gains`` float64, ``relevant`` and ``mask`` bool, ``[B', k]``;
    ``n_relevant`` (R at ``level``) and ``n_positive`` (positive judged rels) ``[B']``
    int64; ``ideal[B', m]`` float64, each query's positive rels descending, 0-padded.
    On the scores' device."""

    rows: Tensor
    ids: Tensor
    query_ids: Tuple[str, ...]
    order: Tensor
    preds: Tensor
    gains: Tensor
    relevant: Tensor
    mask: Tensor
    n_relevant: Tensor
    n_positive: Tensor
    ideal: Tensor
    level: int

    def inputs(self, graded: Optional[bool] = None, *, preds: str = "preds", target: str = "target"
               ) -> Dict[str, Tensor]:
        """The keyword arguments of an adapter's update: ``{preds, target, mask, n_relevant,
        ideal, ids}`` (``preds=`` / ``target=`` rename the first two: ``"y_pred"``, ``"y"``
        for ignite). ``graded``: None, only at level 1: the gains with R and the ideal (every
        measure); True: the gains with the positive rels as R and the ideal (nDCG); False:
        the relevance at ``level`` with R, no ideal (the binary measures)."""
        if graded is None:
            if self.level != 1:
                raise ValueError(f"at level {self.level} trec_eval judges nDCG by the rels and the other measures by "
                                 f"rel >= {self.level}: feed two metrics, inputs(graded=True) for ndcg keys and "
                                 "inputs(graded=False) for the others")
            graded_gains, r, ideal = self.gains, self.n_relevant, self.ideal
        elif graded is True:
            graded_gains, r, ideal = self.gains, self.n_positive, self.ideal
        elif graded is False:
            return {preds: self.preds, target: self.relevant, "mask": self.mask, "n_relevant": self.n_relevant,
                    "ids": self.ids}
        else:
            raise TypeError(f"graded must be None, True or False; got {graded!r}")
        return {preds: self.preds, target: graded_gains, "mask": self.mask, "n_relevant": r, "ideal": ideal,
                "ids": self.ids}


class QrelsJudge:
    """Judges ``[B, k]`` top-k batches against ``qrels`` (module doc).

    Args:
        qrels: a :class:`~retrieval_core.trec.Qrels` (``read_qrels``, ``qrels_from_dict``).
        level: ``rel >= level`` is relevant (trec_eval ``-l``).
        unjudged: a query absent from the qrels: ``"skip"`` (its row is dropped, as trec_eval
            ignores run queries without judgements) or ``"error"``.

    ``judge(query_ids, doc_ids, scores, *, mask=None)``: ``query_ids`` ``[B]``, names (str)
    or indices into ``qrels.query_ids`` (ints or an integer tensor); ``doc_ids``: an integer
    tensor ``[B, k]`` of indices into ``qrels.docs`` (a vocabulary it shares, e.g. extended
    with the corpus: ``Vocabulary.extend``; negative = padding), or ``B`` rows of ``k`` doc
    ids (str, None = padding); ``scores[B, k]`` finite where valid; ``mask[B, k]`` bool,
    False for padded slots. A document twice in a row is an error (trec_eval refuses it).
    The work is done on the CPU; the result is on the scores' device.
    """

    def __init__(self, qrels: Qrels, *, level: int = 1, unjudged: str = "skip") -> None:
        if not isinstance(qrels, Qrels):
            raise TypeError(f"QrelsJudge takes a Qrels (read_qrels, qrels_from_dict); got {type(qrels).__name__}")
        check_relevance_level(level)
        if unjudged not in UNJUDGED:
            raise ValueError(f"unjudged must be one of {list(UNJUDGED)}; got {unjudged!r}")
        self.qrels, self.level, self.unjudged = qrels, level, unjudged
        self._positions = {q: i for i, q in enumerate(qrels.query_ids)}
        self._n_docs = max(len(qrels.docs), 1)  # the judgements' keys: query * n_docs + doc, sorted
        self._keys = qrels.query * self._n_docs + qrels.doc
        self._rel = qrels.rel
        self._r = qrels.n_relevant(level)
        positive = qrels.rel > 0
        pq, pr = qrels.query[positive], qrels.rel[positive]
        # rels descending in each query: two stable sorts (a key query * (max rel + 1) - rel overflows int64)
        by_rel = torch.sort(pr, descending=True, stable=True).indices
        self._ideal = pr[by_rel[torch.sort(pq[by_rel], stable=True).indices]].to(torch.float64)
        self._n_pos = torch.bincount(pq, minlength=len(qrels.query_ids))
        self._ideal_start = torch.cumsum(self._n_pos, 0) - self._n_pos
        self._doc_rank: Optional[Tensor] = None

    def _vocabulary_rank(self, needed: int) -> Tensor:
        """Rank of every document of ``qrels.docs`` in byte order (rebuilt when it grew)."""
        if self._doc_rank is None or len(self._doc_rank) < needed:
            np = numpy()
            order = self.qrels.docs.byte_order()  # bytes order (unsigned, as strcmp)
            rank = np.empty(len(order), np.int64)
            rank[order] = np.arange(len(order))
            self._doc_rank = torch.from_numpy(rank)
        return self._doc_rank

    def _queries(self, query_ids, b: int) -> Tensor:
        """Each row's index in ``qrels.query_ids``, -1 for a name the qrels lack."""
        if isinstance(query_ids, Tensor):
            if query_ids.is_floating_point() or query_ids.is_complex() or query_ids.dtype == torch.bool:
                raise TypeError(f"query_ids as a tensor must hold integer indices into qrels.query_ids; got "
                                f"{query_ids.dtype}")
            if query_ids.ndim != 1:
                raise ValueError(f"query_ids must be 1-D [B]; got shape {tuple(query_ids.shape)}")
            idx = query_ids.detach().cpu().to(torch.int64)
        elif isinstance(query_ids, (str, bytes)) or not isinstance(query_ids, Sequence):
            raise TypeError(f"query_ids must be a sequence of query ids (str) or of indices (int), or an integer "
                            f"tensor; got {type(query_ids).__name__}")
        elif all(isinstance(q, str) for q in query_ids):
            idx = torch.tensor([self._positions.get(q, -1) for q in query_ids], dtype=torch.int64)
        elif all(isinstance(q, int) and not isinstance(q, bool) for q in query_ids):
            idx = torch.tensor(list(query_ids), dtype=torch.int64)
        else:
            raise TypeError("query_ids must be all str (query ids) or all int (indices into qrels.query_ids); got "
                            f"{sorted({type(q).__name__ for q in query_ids})}")
        if idx.numel() != b:
            raise ValueError(f"{idx.numel()} query ids for {b} rows of scores")
        if not isinstance(query_ids, Tensor) and query_ids and isinstance(query_ids[0], str):
            unknown = [q for q, i in zip(query_ids, idx.tolist()) if i < 0]
            if unknown and self.unjudged == "error":
                raise ValueError(f"queries absent from the qrels: {unknown[:5]}{' ...' if len(unknown) > 5 else ''} "
                                 "(unjudged='error'; trec_eval ignores them: unjudged='skip')")
        else:
            bad = (idx < 0) | (idx >= len(self.qrels.query_ids))
            if bool(bad.any()):
                raise ValueError(f"query index {int(idx[bad][0])} is not in range for the qrels' "
                                 f"{len(self.qrels.query_ids)} queries (indices into qrels.query_ids)")
        return idx

    def _documents(self, doc_ids, b: int, k: int) -> Tuple[Tensor, Tensor, Tensor]:
        """``(index in qrels.docs or -1, byte-order key, valid)``, each ``[B, k]``."""
        if isinstance(doc_ids, Tensor):
            if doc_ids.is_floating_point() or doc_ids.is_complex() or doc_ids.dtype == torch.bool:
                raise TypeError(f"doc_ids as a tensor must hold integer indices into qrels.docs; got {doc_ids.dtype}")
            if tuple(doc_ids.shape) != (b, k):
                raise ValueError(f"doc_ids must be [B, k] = {[b, k]} like the scores; got {list(doc_ids.shape)}")
            d = doc_ids.detach().cpu().to(torch.int64)
            valid = d >= 0
            n = len(self.qrels.docs)
            if bool((d >= n).any()):
                raise ValueError(f"doc index {int(d[d >= n][0])} is not in qrels.docs ({n} documents): index a "
                                 "vocabulary shared with the qrels (qrels.docs, with the corpus ids added)")
            rank = self._vocabulary_rank(n)
            return d, torch.where(valid, rank[d.clamp(min=0)], -1), valid
        if isinstance(doc_ids, (str, bytes)) or not isinstance(doc_ids, Sequence) or len(doc_ids) != b:
            size = f" of {len(doc_ids)}" if isinstance(doc_ids, Sequence) else ""
            raise ValueError(f"doc_ids must be an integer tensor [B, k] or {b} rows of doc ids (str); got "
                             f"{type(doc_ids).__name__}{size}")
        keys = []
        for i, row in enumerate(doc_ids):
            if isinstance(row, (str, bytes)) or not isinstance(row, Sequence) or len(row) != k:
                raise ValueError(f"doc_ids row {i} must hold k = {k} doc ids (like the scores); got {row!r:.80}")
            for x in row:
                if x is not None and not isinstance(x, str):
                    raise TypeError(f"doc_ids row {i}: doc ids must be str (None = padding); got {x!r}")
            keys.append([None if x is None else x.encode("utf-8", "surrogateescape") for x in row])
        distinct = sorted({x for row in keys for x in row if x is not None})
        pos = {x: i for i, x in enumerate(distinct)}
        vocab = self.qrels.docs.positions
        d = torch.tensor([[-1 if x is None else vocab.get(x, -1) for x in row] for row in keys],
                         dtype=torch.int64).view(b, k)
        key = torch.tensor([[-1 if x is None else pos[x] for x in row] for row in keys], dtype=torch.int64).view(b, k)
        return d, key, key >= 0

    def __call__(self, query_ids: Union[Sequence[str], Sequence[int], Tensor], doc_ids, scores: Tensor, *,
                 mask: Optional[Tensor] = None) -> JudgedBatch:
        if not isinstance(scores, Tensor) or scores.ndim != 2:
            raise ValueError(f"scores must be a [B, k] tensor; got "
                             f"{tuple(scores.shape) if isinstance(scores, Tensor) else type(scores).__name__}")
        if scores.is_complex() or scores.dtype == torch.bool:
            raise TypeError(f"scores must be real numbers; got {scores.dtype}")
        b, k = scores.shape
        device = scores.device
        q = self._queries(query_ids, b)
        d, key, valid = self._documents(doc_ids, b, k)
        if mask is not None:
            if not isinstance(mask, Tensor) or mask.dtype != torch.bool or tuple(mask.shape) != (b, k):
                raise ValueError(f"mask must be a bool tensor [B, k] = {[b, k]}; got "
                                 f"{tuple(mask.shape) if isinstance(mask, Tensor) else type(mask).__name__}")
            valid &= mask.detach().cpu()
        s = scores.detach().cpu().to(torch.float64)
        bad = valid & ~torch.isfinite(s)
        if bool(bad.any()):
            r, c = (int(x) for x in bad.nonzero()[0])
            raise ValueError(f"scores must be finite where valid (trec_eval reads numbers); row {r}, column {c} "
                             f"is {float(s[r, c])} (mask it, or give its doc index as -1)")
        ident = torch.where(valid, key, -1 - torch.arange(k).expand(b, k)).sort(1).values
        twice = (ident[:, 1:] == ident[:, :-1]) & (ident[:, 1:] >= 0)
        if bool(twice.any()):
            r = int(twice.any(1).nonzero()[0])
            raise ValueError(f"row {r} (query {self._name(query_ids, r)!r}) retrieves a document twice; a run holds "
                             "each document once per query (trec_eval refuses duplicates)")
        keep = (q >= 0) & valid.any(1)  # judged queries with at least one retrieved document
        rows = keep.nonzero().squeeze(1)
        q, d, key, valid, s = q[rows], d[rows], key[rows], valid[rows], s[rows]
        # trec_eval's order: score descending, then doc id descending (bytes); padding last
        by_doc = torch.sort(torch.where(valid, key, -1), dim=1, descending=True, stable=True).indices
        s = torch.where(valid, s, float("-inf"))
        by_score = torch.sort(s.gather(1, by_doc), dim=1, descending=True, stable=True).indices
        order = by_doc.gather(1, by_score)
        d, valid, s = d.gather(1, order), valid.gather(1, order), s.gather(1, order)
        rel = self._lookup(q, d, valid)
        gains = torch.where(rel > 0, rel, 0).to(torch.float64)
        relevant = (rel >= 0) & (rel >= self.level)
        ideal = self._ideal_rows(q)
        out = dict(rows=rows, ids=q, order=order, preds=torch.where(valid, s, 0.0), gains=gains, relevant=relevant,
                   mask=valid, n_relevant=self._r[q], n_positive=self._n_pos[q], ideal=ideal)
        names = tuple(self.qrels.query_ids[i] for i in q.tolist())
        return JudgedBatch(query_ids=names, level=self.level, **{n: t.to(device) for n, t in out.items()})

    def _name(self, query_ids, row: int) -> str:
        return str(query_ids[row].item() if isinstance(query_ids, Tensor) else query_ids[row])

    def _lookup(self, q: Tensor, d: Tensor, valid: Tensor) -> Tensor:
        """The qrels' rel of each (query, document), -1 where not judged or not valid."""
        if not len(self._keys):
            return torch.full_like(d, -1)
        key = q.unsqueeze(1) * self._n_docs + d.clamp(min=0)
        pos = torch.searchsorted(self._keys, key).clamp(max=len(self._keys) - 1)
        # a document added to the vocabulary after the qrels (index >= _n_docs) has no judgement
        found = valid & (d >= 0) & (d < self._n_docs) & (self._keys[pos] == key)
        return torch.where(found, self._rel[pos], -1)

    def _ideal_rows(self, q: Tensor) -> Tensor:
        """``[B, m]`` the positive rels of each query, descending, 0-padded."""
        counts = self._n_pos[q]
        m = int(counts.max()) if q.numel() else 0
        out = torch.zeros(len(q), m, dtype=torch.float64)
        have = torch.arange(m) < counts.unsqueeze(1)
        if m:
            at = self._ideal_start[q].unsqueeze(1) + torch.arange(m)
            out[have] = self._ideal[at[have]]
        return out
