"""One generator of random qrels and runs for the cross-checks (pytrec_eval, ranx, the
validation-loop judge): ``random_case(seed)`` gives ranx / pytrec_eval dicts
``({qid: {docid: rel}}, {qid: {docid: score}})`` that hold, whatever the seed:

* ``q0``: in the run, not in the qrels (trec_eval ignores it);
* ``q1``: judged, no relevant document (every rel 0);
* ``q2``: in the qrels, not in the run;
* graded rels 0..3 and -1 (in the pool, unjudged), relevant documents the run misses;
* scores with many ties (``ties=True``: small integers) or none at all (``ties=False``:
  distinct values over the whole run).

Doc ids are ``d0``..``d{n_docs - 1}``, so byte order (``"d10" < "d9"``) differs from
numeric order, which trec_eval's tie order (doc id descending, bytes) exercises.

``make_loop(seed)``: the same case as a validation loop's top-k batches (for
``retrieval_core.trec.QrelsJudge``).
"""
from __future__ import annotations

import random
from typing import Dict, List, NamedTuple, Tuple

import torch

from retrieval_core.trec import qrels_from_dict

Qrels = Dict[str, Dict[str, int]]
Run = Dict[str, Dict[str, float]]


def random_case(seed: int, *, n_queries: int = 12, n_docs: int = 40, ties: bool = True,
                max_judged: int = 15, max_retrieved: int = 30) -> Tuple[Qrels, Run]:
    rng = random.Random(seed)
    docs = [f"d{i}" for i in range(n_docs)]
    qrels: Qrels = {}
    run: Run = {}
    # distinct scores over the whole run: a sample of a large range, scaled
    distinct = iter(rng.sample(range(10 ** 6), n_queries * max_retrieved)) if not ties else None
    for q in range(n_queries):
        qid = f"q{q}"
        judged = rng.sample(docs, rng.randint(0, max_judged))
        if q != 0:  # q0: no judgement at all -> not evaluated
            qrels[qid] = {d: rng.choice([0, 0, 1, 2, 3, -1]) for d in judged} or {"d0": 0}
        if q == 1:
            qrels[qid] = {d: 0 for d in judged} or {"d0": 0}  # no relevant document
        if q == 2:
            continue  # in the qrels, not in the run
        ranked = rng.sample(docs, rng.randint(1, max_retrieved))
        if ties:
            run[qid] = {d: float(rng.randint(0, 6)) for d in ranked}
        else:
            run[qid] = {d: next(distinct) / 1024.0 for d in ranked}
    return qrels, run


class Batch(NamedTuple):
    queries: List[str]
    doc_index: torch.Tensor  # [B, k] into qrels.docs, -1 = padding
    doc_names: list  # the same as strings (None = padding)
    scores: torch.Tensor
    mask: torch.Tensor  # False where padded


def make_loop(seed: int, *, ties: bool = True):
    """``(Qrels, [Batch])``: the case's run as the batches of a validation loop (1 to 4
    queries each, in a shuffled query order): each row's documents in shuffled columns, as
    indices into ``qrels.docs`` (extended with the whole corpus) and as strings, with
    padding (-1 / None, NaN scores, ``mask`` False); scores / 4, float32 in some batches."""
    qrels_d, run_d = random_case(seed, ties=ties)
    qrels = qrels_from_dict(qrels_d)
    for i in range(40):  # the corpus: the qrels' documents first, then the others
        qrels.docs.add(f"d{i}".encode())
    rng = random.Random(seed)
    queries = list(run_d)
    rng.shuffle(queries)
    k = max(len(v) for v in run_d.values()) + 2  # every row has padding
    batches, start = [], 0
    while start < len(queries):
        size = rng.randint(1, 4)
        rows = queries[start:start + size]
        start += size
        idx = torch.full((len(rows), k), -1, dtype=torch.int64)
        scores = torch.full((len(rows), k), float("nan"), dtype=torch.float64)  # padding: anything
        for r, q in enumerate(rows):
            items = list(run_d[q].items())
            cols = rng.sample(range(k), len(items))  # shuffled columns: not trec_eval's order
            for c, (doc, score) in zip(cols, items):
                idx[r, c], scores[r, c] = qrels.docs.index(doc), score / 4
        if rng.random() < 0.5:
            scores = scores.float()  # float32 scores: written exactly, ties kept
        mask = idx >= 0
        names = [[None if i < 0 else qrels.docs[i] for i in row] for row in idx.tolist()]
        batches.append(Batch(rows, idx, names, scores, mask))
    return qrels, batches
