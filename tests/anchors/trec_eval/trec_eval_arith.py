"""trec_eval 10's arithmetic, written out in plain Python loops (a test oracle, in our own
words: no code of trec_eval's), for the measures ``evaluate_trec`` prints under its names.

What it follows, from trec_eval's sources (trec_eval.c, form_res_rels.c, meas_acc.c,
meas_avg.c, m_*.c):

* queries: the qrels' queries in byte order of their ids, those the run has (``complete``,
  ``-c``: all of them, a missing one with nothing retrieved);
* a query's run: score descending, doc id descending in byte order; the first
  ``max_per_query`` (``-M``); each retrieved document's rel: the qrels' value, ``NONPOOL``
  when absent, ``UNJUDGED`` when negative;
* per query, each measure by a loop over the ranks with one double accumulator, added to
  term by term, then one division; ``log2`` / ``log`` / ``exp`` of the C library
  (Python's ``math``);
* the summary: each measure's values added one query after the other to a double that
  starts at 0, then divided by the number of queries; the counts are sums; ``gm_map``
  adds ``log(max(AP, 1e-5))`` and prints ``exp(sum / Q)``; with ``complete`` the summary
  ``num_rel`` counts every qrels judgement with rel > 0, whatever the level;
* ``complete``: a query the run lacks is evaluated with one made-up retrieved document
  outside the qrels (trec_eval.c's ``bogus_ranking``, then cut by ``max_per_query``); after
  its measures, trec_eval sets ``num_ret``, ``utility`` (that exact name), ``unj*`` to 0 and
  ``relstring`` (that exact name) to '';
* the set measures and the measures of counts at cutoffs (m_set_*.c, m_rel_P.c,
  m_Rprec_mult.c, m_11pt_avg.c, m_utility.c, m_unjudged.c, m_relstring.c): their loops, the
  parameters read from the output name (``Rprec_mult_0.20``, ``utility_2,-1,0,0``,
  ``11pt_avg_.25,.5,.75``), ``num_docs`` for ``-N``; ``relstring`` printed per query only.

``lines(...)`` gives trec_eval's output lines for the measures asked (trec_eval names:
``P_5``, ``ndcg_cut_10``, ``iprec_at_recall_0.10``...), in the order asked.
"""
from __future__ import annotations

import math
from typing import Dict, List, Optional, Sequence

NONPOOL, UNJUDGED = -1, -2
MIN_GEO_MEAN = 1e-5
COUNTS = ("num_q", "num_ret", "num_rel", "num_rel_ret", "num_nonrel_judged_ret")
MADE_UP = "ceci_nest_pas_un_docno"  # trec_eval.c's document for a query the run lacks (-c)
SET_MEASURES = ("set_relative_P", "set_recall", "set_map", "set_P", "set_F", "relative_P", "Rprec_mult", "11pt_avg",
                "utility", "unj", "relstring")
DEFAULTS = {"set_F": [1.0], "11pt_avg": [0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0],
            "utility": [1.0, -1.0, 0.0, 0.0], "relstring": [10.0]}


def _key(doc: str) -> bytes:
    return doc.encode("utf-8", "surrogateescape")


class Query:
    """One query as trec_eval's measures see it: ``rels`` in rank order, ``levels[v]`` the
    qrels' judgements of rel v >= 0, ``num_rel`` (rel >= level)."""

    def __init__(self, judged: Dict[str, int], scores: Dict[str, float], level: int, max_per_query: Optional[int]):
        by_id = sorted(scores, key=_key, reverse=True)  # ties: doc id descending
        ranked = sorted(by_id, key=lambda d: -scores[d])  # stable
        if max_per_query is not None:
            ranked = ranked[:max_per_query]
        self.rels = [NONPOOL if d not in judged else UNJUDGED if judged[d] < 0 else judged[d] for d in ranked]
        top = max(judged.values()) if judged else 0
        self.levels = [0] * (max(top, 0) + 1)
        for v in judged.values():
            if v >= 0:
                self.levels[v] += 1
        self.level = level
        self.num_rel = sum(c for v, c in enumerate(self.levels) if v >= level)
        self.num_ret = len(self.rels)
        self.made_up = False  # the run lacks it (complete): MADE_UP retrieved
        self.num_docs = 0  # -N
        self.rule = "lround"  # 11pt_avg's count of relevant documents at x (v9: trec_eval 9)

    def is_rel(self, i: int) -> bool:
        return self.rels[i] >= self.level


def _rel_upto(q: Query, k: int) -> int:
    return sum(1 for i in range(min(k, q.num_ret)) if q.is_rel(i))


def _ap_upto(q: Query, k: int) -> float:
    total, found = 0.0, 0
    for i in range(min(k, q.num_ret)):
        if q.is_rel(i):
            found += 1
            total += float(found) / float(i + 1)
    return total


def _dcg_upto(q: Query, k: int) -> float:
    total = 0.0
    for i in range(min(k, q.num_ret)):
        if q.rels[i] > 0:
            total += float(q.rels[i]) / math.log2(i + 2)
    return total


def _ideal_upto(q: Query, k: int) -> float:
    gains = [v for v in range(len(q.levels) - 1, 0, -1) for _ in range(q.levels[v])]
    total = 0.0
    for i, g in enumerate(gains[:k]):
        total += float(g) / math.log2(i + 2)
    return total


def _bpref(q: Query) -> float:
    n_nonrel = sum(q.levels[v] for v in range(min(q.level, len(q.levels))) if v >= 0)
    total, nonrel_above = 0.0, 0
    for v in q.rels:
        if v < 0:
            continue
        if v < q.level:
            nonrel_above += 1
        elif nonrel_above > 0:
            total += 1.0 - float(min(nonrel_above, q.num_rel)) / float(min(n_nonrel, q.num_rel))
        else:
            total += 1.0
    return total / q.num_rel if q.num_rel else total


def _iprec(q: Query, x: float) -> float:
    share = x * q.num_rel
    need = int(math.floor(share)) + (share - math.floor(share) >= 0.5)  # C's lround (half away from 0)
    rel_ret = sum(1 for i in range(q.num_ret) if q.is_rel(i))
    if need > rel_ret or q.num_ret == 0:
        return 0.0
    best, seen = float(rel_ret) / float(q.num_ret), rel_ret
    for i in range(q.num_ret, 0, -1):  # backwards: the best precision at or after each rank
        if seen == 0:
            break
        best = max(best, float(seen) / float(i))
        if q.is_rel(i - 1):
            if seen == need:
                return best
            seen -= 1
    return best


def _lround(x: float) -> int:
    """C's lround: to the nearest integer, a half away from zero."""
    t = int(x)  # toward zero
    return t + (1 if x > 0 else -1) * (abs(x - t) >= 0.5)


def _divide(a: float, b: float) -> float:
    """C's a / b for doubles, 0 / 0 included (-nan on x86-64)."""
    return a / b if b else (float("-nan") if a == 0 else math.copysign(math.inf, a))


def _relative_p(q: Query, k: int) -> float:
    if q.num_rel == 0:
        return 0.0
    found = 0
    for i in range(q.num_ret):
        if i == k:
            return float(found) / float(min(i, q.num_rel))
        if q.is_rel(i):
            found += 1
    return float(found) / float(min(k, q.num_rel))


def _unj(q: Query, k: int) -> float:
    unjudged = 0
    for i in range(q.num_ret):
        if i == k:
            return float(unjudged) / float(i)
        if q.rels[i] in (NONPOOL, UNJUDGED):
            unjudged += 1
    return float(unjudged) / float(k)


def _rprec_mult(q: Query, x: float) -> float:
    cut = int(x * q.num_rel + 0.9)
    rel_ret = _rel_upto(q, q.num_ret)
    if cut > q.num_ret:
        return float(rel_ret) / float(cut)
    seen = rel_ret
    for i in range(q.num_ret, 0, -1):  # backwards, as m_Rprec_mult.c
        if seen <= 0:
            break
        if i == cut:
            return float(seen) / float(i)
        if q.is_rel(i - 1):
            seen -= 1
    return 0.0


def _eleven_point(q: Query, xs: List[float]) -> float:
    cuts = [int(x * q.num_rel + 0.9) if q.rule == "v9" else _lround(x * q.num_rel) for x in xs]
    rel_ret = _rel_upto(q, q.num_ret)
    cc = len(cuts) - 1
    while cc >= 0 and cuts[cc] > rel_ret:
        cc -= 1
    best = _divide(float(rel_ret), float(q.num_ret))
    total, seen = 0.0, rel_ret
    for i in range(q.num_ret, 0, -1):
        if seen <= 0:
            break
        here = float(seen) / float(i)
        if best < here:
            best = here
        if q.is_rel(i - 1):
            while cc >= 0 and seen == cuts[cc]:
                total += best
                cc -= 1
            seen -= 1
    while cc >= 0:
        total += best
        cc -= 1
    return total / float(len(xs))


def _relstring(q: Query, length: float) -> str:
    chars = []
    for v in q.rels[:max(min(int(length), q.num_ret), 0)]:
        chars.append(">" if v > 9 else str(v) if v >= 0 else "-" if v == NONPOOL else "." if v == UNJUDGED else "<")
    return "".join(chars)


def _set_value(q: Query, base: str, params: List[float]):
    """The measures of m_set_*.c, m_rel_P.c, m_Rprec_mult.c, m_11pt_avg.c, m_utility.c,
    m_unjudged.c, m_relstring.c (``params``: the name's parameters, or the defaults)."""
    nr, nrr, r = q.num_ret, _rel_upto(q, q.num_ret), q.num_rel
    if base == "set_P":
        return float(nrr) / float(nr) if nr else 0.0
    if base == "set_recall":
        return float(nrr) / float(r) if r else 0.0
    if base == "set_relative_P":
        return float(nrr) / float(min(nr, r)) if nr and r else 0.0
    if base == "set_map":
        return (float(nrr) * float(nrr)) / (float(nr) * float(r)) if nr and r else 0.0
    if base == "set_F":
        if not nrr:
            return 0.0
        p, rec, x = float(nrr) / float(nr), float(nrr) / float(r), params[0]
        return (x + 1.0) * p * rec / (x * p + rec)
    if base == "utility":
        a, b, c, d = params
        return a * nrr + b * (nr - nrr) + c * (r - nrr) + d * (q.num_docs + nrr - nr - r)
    if base == "relstring":
        return _relstring(q, params[0])
    if base == "11pt_avg":
        return _eleven_point(q, params)
    if base == "Rprec_mult":
        return _rprec_mult(q, params[0])
    return (_relative_p if base == "relative_P" else _unj)(q, int(params[0]))


def _set_measure(q: Query, name: str):
    """``(found, value)`` for the names of :data:`SET_MEASURES`, trec_eval's clean-up of a
    made-up query (``complete``) applied."""
    base = next((b for b in SET_MEASURES if name == b or name.startswith(b + "_")), None)
    if base is None:
        return False, None
    params = [float(p) for p in name[len(base) + 1:].split(",")] if name != base else DEFAULTS.get(base)
    got = _set_value(q, base, params)
    if q.made_up and (name in ("utility", "relstring") or name.startswith("unj")):
        got = "" if name == "relstring" else 0.0
    return True, got


def value(q: Query, name: str) -> float:
    """The per-query value of a trec_eval measure name (``P_5``, ``map``, ``ndcg_cut_10``...)."""
    found, got = _set_measure(q, name)
    if found:
        return got
    if name == "num_ret" and q.made_up:
        return 0.0
    base, _, param = name.rpartition("_") if name[-1].isdigit() and "_" in name else (name, "", "")
    if param and base not in ("P", "recall", "success", "map_cut", "ndcg_cut", "iprec_at_recall"):
        raise KeyError(name)
    k = int(param) if param and base != "iprec_at_recall" else 0
    r = q.num_rel
    rel_ret = _rel_upto(q, q.num_ret)
    if name == "num_q":
        return 1.0
    if name in ("num_ret", "num_rel", "num_rel_ret"):
        return float({"num_ret": q.num_ret, "num_rel": r, "num_rel_ret": rel_ret}[name])
    if name == "num_nonrel_judged_ret":
        return float(sum(1 for v in q.rels if 0 <= v < q.level))
    if name in ("map", "gm_map"):
        return _ap_upto(q, q.num_ret) / float(r) if rel_ret else 0.0
    if base == "map_cut":
        return _ap_upto(q, k) / float(r) if r else 0.0
    if base == "P":
        return float(_rel_upto(q, k)) / float(k)
    if base == "recall":
        return float(_rel_upto(q, k)) / float(r) if r else 0.0
    if base == "success":
        return 1.0 if _rel_upto(q, k) else 0.0
    if name == "Rprec":
        return float(_rel_upto(q, r)) / float(r) if min(q.num_ret, r) else 0.0
    if name == "recip_rank":
        first = next((i for i in range(q.num_ret) if q.is_rel(i)), None)
        return 1.0 / float(first + 1) if first is not None else 0.0
    if name == "dcg":
        return _dcg_upto(q, q.num_ret)
    if name == "ndcg":
        ideal = _ideal_upto(q, sum(q.levels))
        return _dcg_upto(q, q.num_ret) / ideal if ideal > 0 else 0.0
    if base == "ndcg_cut":
        ideal = _ideal_upto(q, k)
        return _dcg_upto(q, k) / ideal if ideal > 0 else _dcg_upto(q, k)
    if name == "bpref":
        return _bpref(q)
    if base == "iprec_at_recall":
        return _iprec(q, float(param))
    raise KeyError(name)


def evaluate(qrels: Dict[str, Dict[str, int]], run: Dict[str, Dict[str, float]], names: Sequence[str], *,
             level: int = 1, complete: bool = False, max_per_query: Optional[int] = None, num_docs: int = 0,
             rule: str = "lround"):
    """``(query ids, {name: [per-query values]}, {name: summary value})`` (``relstring``: no summary)."""
    qids = sorted((q for q in qrels if complete or q in run), key=_key)
    queries = []
    for qid in qids:
        query = Query(qrels[qid], run.get(qid, {MADE_UP: 1.0}), level, max_per_query)
        query.made_up, query.num_docs, query.rule = qid not in run, num_docs, rule
        queries.append(query)
    per = {n: [value(q, n) for q in queries] for n in names}
    summary: Dict[str, float] = {}
    for n in names:
        if n.startswith("relstring"):
            continue
        total = 0.0
        for v in per[n]:
            total += math.log(max(v, MIN_GEO_MEAN)) if n == "gm_map" else v
        if n == "gm_map":
            summary[n] = math.exp(total / len(qids))
        elif n in COUNTS:
            summary[n] = total
        else:
            summary[n] = total / len(qids)
    if complete and "num_rel" in names:
        summary["num_rel"] = float(sum(1 for judged in qrels.values() for v in judged.values() if v > 0))
    return qids, per, summary


def lines(qrels, run, names: Sequence[str], *, per_query: bool = False, **options) -> List[str]:
    """trec_eval's output lines (``-q``: ``per_query``) for ``names`` in that order."""
    qids, per, summary = evaluate(qrels, run, names, **options)

    def line(name: str, qid: str, v) -> str:
        if isinstance(v, str):
            text = f"'{v}'"
        elif name in COUNTS:
            text = str(int(v))
        elif v != v:  # printf's %6.4f of a NaN: its sign, right-aligned
            text = ("-nan" if math.copysign(1.0, v) < 0 else "nan").rjust(6)
        else:
            text = f"{v:.4f}"
        return f"{name:<22}\t{qid}\t{text}"

    out: List[str] = []
    if per_query:
        for i, qid in enumerate(qids):
            out.extend(line(n, qid, per[n][i]) for n in names if n not in ("num_q", "gm_map"))
    out.extend(line(n, "all", summary[n]) for n in names if n in summary)
    return out
