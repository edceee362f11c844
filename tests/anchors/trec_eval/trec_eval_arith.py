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

* the graded and sampled-pool measures (m_G.c, m_binG.c, m_ndcg.c, m_ndcg_rel.c, m_Rndcg.c,
  m_rbp.c, m_rbp_resid.c, m_infap.c, m_gm_bpref.c): their loops as written there, with the gain
  table of gain_init.c (the pairs given, then the levels 0 .. M - 1 not given, sorted by glibc's
  merge sort with trec_eval's comparator ``(int) (gain1 - gain2)``); rbp's min and max start at
  0 (trec_eval 10's binary: m_rbp.c leaves them uninitialised); ``-c``: a query the run lacks
  retrieves one document outside the qrels (trec_eval's ``bogus_ranking``), whose ``num_ret``
  and bare ``rbp_resid`` are then set to 0.

* ``-Z`` (convert_zscores.c, get_zscores.c): after a query's measures (and ``-c``'s clean-up),
  each value becomes ``(v - mean) / stddev`` for the file's ``(qid, output name)``; a zero
  stddev gives 0 if ``v == mean``, else -1000000 (MISSING_ZSCORE_VALUE), as an absent pair
  does; ``gm_map`` / ``gm_bpref`` hold ``log(max(v, 1e-5))`` per query already, so the
  converted logs are summed and the summary is ``exp(sum / Q)``; ``num_q``'s summary is the
  number of queries whatever its values (m_num_q.c); printing puts a ``Z`` before each name
  (not ``relstring``'s) and prints the counts with 4 decimals too.

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

    def __init__(self, judged: Dict[str, int], scores: Dict[str, float], level: int, max_per_query: Optional[int],
                 placeholder: bool = False):
        self.placeholder = placeholder  # -c, a query the run lacks: one document outside the qrels
        if placeholder:
            scores = {"ceci_nest_pas_un_docno": 1.0}
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
        self.made_up = placeholder  # the run lacks it (complete): one made-up document retrieved
        self.num_docs = 0  # -N
        self.rule = "lround"  # 11pt_avg's count of relevant documents at x (v9: trec_eval 9)
        self.num_rel_levels = max([v + 1 for v, c in enumerate(self.levels) if c] or [0])

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
    if need > rel_ret:  # a cutoff never reached keeps its initial 0
        return 0.0
    best, seen = _divide(float(rel_ret), float(q.num_ret)), rel_ret  # nothing retrieved: 0 / 0
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
    graded = _graded(q, name)
    if graded is not None:
        return graded
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
    if name == "gm_bpref":
        return _bpref(q)
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


GAIN_NAMES = ("G", "dcg", "ideal_dcg", "ndcg", "ndcg_rel", "Rndcg", "rbp", "rbp_resid")
INFAP_EPSILON = .00001


def _c_log2(x: float) -> float:
    if x > 0:
        return math.log2(x)
    return -math.inf if x == 0 else -math.nan  # glibc: log2(0) = -inf, below 0 a NaN with its sign bit set


def _to_int(x: float) -> int:  # C's (int) of a double on x86-64: out of range or NaN gives INT_MIN
    return int(x) if x == x and -2147483649.0 < x < 2147483648.0 else -2147483648


def _msort(a: list, cmp) -> list:
    """glibc's msort_with_tmp: n1 = n / 2 first, then merge taking the left while cmp <= 0."""
    if len(a) < 2:
        return a
    b1, b2 = _msort(a[:len(a) // 2], cmp), _msort(a[len(a) // 2:], cmp)
    out = []
    while b1 and b2:
        out.append(b1.pop(0) if cmp(b1[0], b2[0]) <= 0 else b2.pop(0))
    return out + b1 + b2


def _pairs(params: str):
    """(name, value) pairs of 'name=value,...' as get_param_pairs reads them (well-formed here)."""
    return [(part.split("=")[0], float(part.split("=")[1])) for part in params.split(",")] if params else []


def _setup_gains(q: Query, params: str):
    """gain_init.c's setup_gains: [rel_level, gain, num_at_level] entries, sorted."""
    gains = []
    for name, v in _pairs(params):
        body = name[1:] if name[:1] in "+-" else name
        if body.isdigit():
            gains.append([int(name), v, 0])
    given = len(gains)
    for i in range(q.num_rel_levels):
        j = 0
        while j < given and gains[j][0] != i:
            j += 1
        if j < given:
            gains[j][2] = q.levels[i]
        else:
            gains.append([i, float(i), q.levels[i]])
    return _msort(gains, lambda a, b: _to_int(a[1] - b[1]))


def _get_gain(rel: int, gains) -> float:
    for level, gain, _ in gains:
        if level == rel:
            return gain
    return 0.0


def _div(a: float, b: float) -> float:
    """C's ``a / b`` in IEEE arithmetic: x / 0 is an infinity, 0 / 0 the x86 default NaN (-nan)."""
    if b != 0.0 or b != b or a != a:
        return a / b if b != 0.0 else a
    if a == 0.0:
        return -math.nan
    return math.copysign(math.inf, a) * math.copysign(1.0, b)


class _Walk:
    """The ideal gain as m_ndcg.c's loops step it: ``gain`` (0 past the table), ``step()`` one rank on."""

    def __init__(self, gains):
        self.gains, self.cur, self.num_at_level = gains, len(gains) - 1, 0
        self.gain = gains[self.cur][1] if self.cur >= 0 else 0.0

    def step(self) -> None:
        self.num_at_level += 1
        while self.cur >= 0 and self.num_at_level > self.gains[self.cur][2]:
            self.num_at_level = 1
            self.cur -= 1
            self.gain = self.gains[self.cur][1] if self.cur >= 0 else 0.0


def _G(q: Query, gains) -> float:
    walk = _Walk(gains)
    results_g = sum_results = sum_ideal = sum_cost = 0.0
    i = 0
    while i < q.num_ret and walk.gain > 0.0:
        results_gain = _get_gain(q.rels[i], gains)
        sum_results += results_gain
        walk.step()
        if walk.gain > 0.0:
            sum_ideal += walk.gain
        sum_cost += walk.gain if walk.gain >= 1.0 else 1.0
        if results_gain != 0:
            results_g += _div(results_gain, _c_log2(2 + sum_cost - sum_results))
        i += 1
    while i < q.num_ret:
        results_gain = _get_gain(q.rels[i], gains)
        sum_results += results_gain
        sum_cost += 1.0
        if results_gain != 0:
            results_g += _div(results_gain, _c_log2(2 + sum_cost - sum_results))
        i += 1
    while walk.gain > 0.0:
        walk.step()
        if walk.gain > 0.0:
            sum_ideal += walk.gain
    return results_g / sum_ideal if sum_ideal > 0.0 else 0.0


def _dcgs(q: Query, gains):
    """m_ndcg.c: the results' DCG and the ideal DCG."""
    walk = _Walk(gains)
    dcg = idcg = 0.0
    i = 0
    while i < q.num_ret or walk.gain > 0.0:
        if i < q.num_ret:
            g = _get_gain(q.rels[i], gains)
            if g != 0:
                dcg += g / math.log2(i + 2)
        if walk.gain > 0.0:
            walk.step()
            if walk.gain > 0.0:
                idcg += walk.gain / math.log2(i + 2)
        i += 1
    return dcg, idcg


def _ndcg_rel(q: Query, gains) -> float:
    walk = _Walk(gains)
    dcg = idcg = total = 0.0
    num_rel = num_rel_ret = 0
    i = 0
    while i < q.num_ret and walk.gain > 0.0:
        g = _get_gain(q.rels[i], gains)
        if g != 0:
            dcg += g / math.log2(i + 2)
        walk.step()
        if walk.gain > 0.0:
            num_rel += 1
            idcg += walk.gain / math.log2(i + 2)
        if g > 0:
            total += _div(dcg, idcg)
            num_rel_ret += 1
        i += 1
    while i < q.num_ret:
        g = _get_gain(q.rels[i], gains)
        if g != 0:
            dcg += g / math.log2(i + 2)
        if g > 0:
            total += _div(dcg, idcg)
            num_rel_ret += 1
        i += 1
    while walk.gain > 0.0:
        walk.step()
        if walk.gain > 0.0:
            num_rel += 1
            idcg += walk.gain / math.log2(i + 2)
        i += 1
    total += _div(float(num_rel - num_rel_ret) * dcg, idcg)
    return _div(total, float(num_rel)) if total > 0.0 else 0.0


def _Rndcg(q: Query, gains) -> float:
    if q.num_rel == 0:
        return 0.0
    walk = _Walk(gains)
    old = walk.gain
    dcg = idcg = total = 0.0
    points = i = 0
    while i < q.num_ret and walk.gain > 0.0:
        g = _get_gain(q.rels[i], gains)
        walk.step()
        if old != walk.gain:
            if idcg > 0.0:
                total += dcg / idcg
                points += 1
            old = walk.gain
        if g != 0:
            dcg += g / math.log2(i + 2)
        if walk.gain > 0.0:
            idcg += walk.gain / math.log2(i + 2)
        i += 1
    if i < q.num_ret:
        while i < q.num_ret:
            g = _get_gain(q.rels[i], gains)
            if g != 0:
                dcg += g / math.log2(i + 2)
            i += 1
        if idcg > 0.0:
            total += dcg / idcg
            points += 1
    while walk.gain > 0.0:
        walk.step()
        if old != walk.gain:
            if idcg > 0.0:
                total += dcg / idcg
                points += 1
            old = walk.gain
        if walk.gain > 0.0:
            idcg += walk.gain / math.log2(i + 2)
        i += 1
    return _div(total, float(points))


def _rbp(q: Query, gains, p: float, resid: bool) -> float:
    lo = hi = 0.0
    for _, g, _ in gains:
        lo, hi = min(lo, g), max(hi, g)
    if lo < 0 or hi > 1:
        gains = [[lv, (g - lo) / (hi - lo), c] for lv, g, c in gains]
    total, cur_p, unjudged = 0.0, 1.0, 0
    for i in range(q.num_ret):
        if resid and q.rels[i] < 0:
            unjudged += 1
            total += cur_p
        g = _get_gain(q.rels[i], gains)
        if not resid and g != 0:
            total += g * cur_p
        cur_p = cur_p * p
    if resid:
        return cur_p + (1 - p) * total if unjudged else 0.0
    return (1.0 - p) * total


def _binG(q: Query) -> float:
    total, found = 0.0, 0
    for i in range(q.num_ret):
        if q.rels[i] >= q.level:
            found += 1
            total += 1.0 / math.log2(3 + i - found)
    return total / q.num_rel if found else 0.0


def _infAP(q: Query) -> float:
    inf_ap, rel, nonrel, unjudged = 0.0, 0, 0, 0
    for j, v in enumerate(q.rels):
        if v == NONPOOL:
            continue
        if v == UNJUDGED:
            unjudged += 1
        elif v < q.level:
            nonrel += 1
        else:
            rel += 1
            fj = float(j)
            inf_ap += 1.0 if j == 0 else 1.0 / (fj + 1.0) + (fj / (fj + 1.0)) * ((rel - 1 + nonrel + unjudged) / fj) \
                * ((rel - 1 + INFAP_EPSILON) / (rel - 1 + nonrel + 2 * INFAP_EPSILON))
    return inf_ap / q.num_rel if q.num_rel else inf_ap


def _graded(q: Query, name: str) -> Optional[float]:
    """The measures above by output name (``G``, ``ndcg_1=3,2=9``, ``rbp_p=0.8``...); None for another."""
    if name in ("binG", "infAP"):
        return _binG(q) if name == "binG" else _infAP(q)
    base = next((b for b in sorted(GAIN_NAMES, key=len, reverse=True)
                 if name == b or name.startswith(b + "_") and "=" in name), None)
    if base is None or base in ("dcg", "ndcg") and name == base:
        return None  # the default dcg, ndcg: value() below
    params = name[len(base) + 1:]
    p = ([v for k, v in _pairs(params) if k == "p"] or [0.9])[-1]
    gains = _setup_gains(q, params)
    if base in ("rbp", "rbp_resid"):
        return _rbp(q, gains, p, base == "rbp_resid")
    if base == "G":
        return _G(q, gains)
    if base == "ndcg_rel":
        return _ndcg_rel(q, gains)
    if base == "Rndcg":
        return _Rndcg(q, gains)
    dcg, idcg = _dcgs(q, gains)
    return {"dcg": dcg, "ideal_dcg": idcg, "ndcg": dcg / idcg if idcg > 0.0 else 0.0}[base]


MISSING_ZSCORE = -1000000.0
GEOMETRIC = ("gm_map", "gm_bpref")


def zscore(zscores: Dict[tuple, tuple], qid: str, name: str, v: float) -> float:
    """``v`` as trec_eval's z-score for ``(qid, name)`` (``zscores``: ``{(qid, name): (mean, stddev)}``)."""
    if (qid, name) not in zscores:
        return MISSING_ZSCORE
    mean, stddev = zscores[(qid, name)]
    if stddev != 0:
        return (v - mean) / stddev
    return 0.0 if v == mean else MISSING_ZSCORE


def evaluate(qrels: Dict[str, Dict[str, int]], run: Dict[str, Dict[str, float]], names: Sequence[str], *,
             level: int = 1, complete: bool = False, max_per_query: Optional[int] = None, num_docs: int = 0,
             rule: str = "lround", zscores: Optional[Dict[tuple, tuple]] = None):
    """``(query ids, {name: [per-query values]}, {name: summary value})`` (``relstring``: no summary;
    ``zscores``: ``-Z``, ``{(qid, name): (mean, stddev)}``)."""
    qids = sorted((q for q in qrels if complete or q in run), key=_key)
    queries = []
    for qid in qids:
        query = Query(qrels[qid], run.get(qid, {}), level, max_per_query, placeholder=qid not in run)
        query.num_docs, query.rule = num_docs, rule
        queries.append(query)
    per = {n: [0.0 if q.placeholder and n in ("num_ret", "rbp_resid") else value(q, n) for q in queries]
           for n in names}
    for n in names:  # trec_eval's per-query value of a geometric mean is its log
        if n in GEOMETRIC:
            per[n] = [math.log(max(v, MIN_GEO_MEAN)) for v in per[n]]
    if zscores is not None:
        per = {n: vs if n.startswith("relstring") else [zscore(zscores, qid, n, v) for qid, v in zip(qids, vs)]
               for n, vs in per.items()}
    summary: Dict[str, float] = {}
    for n in names:
        if n.startswith("relstring"):
            continue
        total = 0.0
        for v in per[n]:
            total += v
        if n in GEOMETRIC:
            summary[n] = math.exp(total / len(qids))
        elif n == "num_q":
            summary[n] = float(len(qids))
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
    z = "Z" if options.get("zscores") is not None else ""

    def line(name: str, qid: str, v) -> str:
        if isinstance(v, str):
            return f"{name:<22}\t{qid}\t'{v}'"
        if name in COUNTS and not z:
            text = str(int(v))
        elif not math.isfinite(v):  # printf's %6.4f of a NaN or an infinity: its sign, right-aligned
            text = f"{('-' if math.copysign(1.0, v) < 0 else '') + ('nan' if v != v else 'inf'):>6}"
        else:
            text = f"{v:.4f}"
        return f"{z}{name:<22}\t{qid}\t{text}"

    out: List[str] = []
    if per_query:
        for i, qid in enumerate(qids):
            out.extend(line(n, qid, per[n][i]) for n in names if n not in ("num_q", "gm_map", "gm_bpref"))
    out.extend(line(n, "all", summary[n]) for n in names if n in summary)
    return out
