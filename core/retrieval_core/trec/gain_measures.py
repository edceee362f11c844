"""trec_eval's graded and sampled-pool measures, bit for bit: ``G``, ``binG``, ``dcg`` / ``ideal_dcg`` /
``ndcg`` with a gain table, ``ndcg_rel``, ``Rndcg``, ``rbp``, ``rbp_resid`` and ``infAP`` (m_*.c of
trec_eval 10), on the flat entries of an aligned run (:func:`~retrieval_core.trec.align`).

Each per-query value is trec_eval's double: the same terms (IEEE divisions and products, the C
library's ``log2``) added one after the other in rank order (running sums,
:mod:`retrieval_core.trec.exact`). What each adds, per query (``g_i`` the gain of the document
at rank ``i + 1`` from the query's gain table, :mod:`retrieval_core.trec.gains`; ``I_j`` the
ideal list; ``D_i``, ``ID_j`` the running DCG of the list and of the ideal, ``g / log2(i + 2)``
where ``g != 0``):

* ``dcg``, ``ideal_dcg``, ``ndcg``: ``D``, ``ID``, ``D / ID`` (0 when ``ID`` is 0) over the whole
  lists (m_ndcg.c);
* ``G`` (m_G.c): ``sum_i g_i / log2(2 + C_i - S_i)`` with ``S_i`` the running sum of the
  gains and ``C_i`` that of ``max(I_i, 1)`` (1 past the ideal), over ``sum_j I_j``;
* ``binG`` (m_binG.c): ``sum 1 / log2(2 + nonrelevant above)`` over the relevant retrieved, / R;
* ``ndcg_rel`` (m_ndcg_rel.c): ``D_i / ID_min(i, L-1)`` at each retrieved document of positive
  gain, plus ``(L - their number) D / ID``; divided by L (the ideal's length) when positive, else 0;
* ``Rndcg`` (m_Rndcg.c): the mean of ``D / ID`` at the ranks where the ideal gain changes and at
  its end (``D`` of the first ``min(rank, n)`` documents, ``ID`` of the ideal before that rank),
  and at the end of a list longer than the ideal by two or more; 0 when R is 0 (NaN, printed
  ``-nan`` as trec_eval does, when no such rank exists);
* ``rbp`` (m_rbp.c): ``(1 - p) sum_i g_i p^i`` (``p^i`` by repeated products), the table's gains
  mapped to [0, 1] by ``(g - min) / (max - min)`` when one lies outside;
* ``rbp_resid`` (m_rbp_resid.c): ``p^n + (1 - p) sum p^i`` over the unjudged retrieved, when one is;
* ``infAP`` (m_infap.c): at each judged relevant document at 0-based rank ``j > 0``,
  ``1 / (j + 1) + (j / (j + 1)) ((r - 1 + n + u) / j) ((r - 1 + eps) / (r - 1 + n + 2 eps))`` (r, n,
  u: the relevant, judged non-relevant and pooled-but-unjudged documents so far, eps = 1e-5), 1 at
  rank 1; the sum over R.

Example:
    >>> from retrieval_core.trec import qrels_from_dict, run_from_dict, align
    >>> qrels = qrels_from_dict({"q": {"a": 2, "b": 0, "c": 1, "z": -1}})
    >>> al = align(run_from_dict({"q": {"b": 0.9, "a": 0.8, "z": 0.7, "x": 0.6}}), qrels)
    >>> got = gain_values(al, qrels, ["binG", "G", "infAP", "rbp", "rbp_resid", "ideal_dcg", "ndcg.1=3,2=9"])
    >>> {k: round(v.item(), 4) for k, v in got.items()}
    {'binG': 0.3155, 'G': 0.4206, 'infAP': 0.25, 'rbp': 0.09, 'rbp_resid': 0.81, 'ideal_dcg': 2.6309, 'ndcg.1=3,2=9': 0.5213}
    >>> # trec_eval 10, -q -m each: binG 0.3155, G 0.4206, infAP 0.2500, rbp 0.0900, rbp_resid 0.8100,
    >>> # ideal_dcg 2.6309, ndcg_1=3,2=9 0.5213
"""
from __future__ import annotations

import dataclasses
import math
from typing import Dict, List, Sequence, Tuple

import torch
from torch import Tensor

from .exact import after, layout, running_sums
from .gains import GAIN_MEASURES, P_MEASURES, GainParams, parse_gain_params, table_order

__all__ = ["GAIN_KEYS", "is_gain_key", "gain_values", "c_log2", "trec_codes"]

# the measures computed here (bare names are keys; "ndcg.1=3,2=9", "rbp.p=0.8": with parameters)
GAIN_KEYS = ("G", "binG", "dcg", "ideal_dcg", "ndcg", "ndcg_rel", "Rndcg", "rbp", "rbp_resid", "infAP")
_DEFAULT_ELSEWHERE = ("dcg", "ndcg")  # their default forms: exact.py's
INFAP_EPSILON = 0.00001
NONPOOL, UNJUDGED = -1, -2


def is_gain_key(key: str) -> bool:
    """Whether ``key`` is computed here: one of :data:`GAIN_KEYS`, or ``base.params`` of one."""
    base, dot, _ = key.partition(".")
    return base in GAIN_KEYS and (bool(dot) or base not in _DEFAULT_ELSEWHERE)


def c_log2(x: Tensor) -> Tensor:
    """C's ``log2`` of every entry of ``x`` (float64): the C library's (Python's ``math.log2``, once
    per distinct value), -inf at 0, and below 0 glibc's NaN (its sign bit set: printed ``-nan``)."""
    if x.numel() == 0:
        return x.clone()
    top = float(x.max())
    if float(x.min()) >= 1.0 and top <= min(x.numel(), 1 << 20) and bool((x == torch.floor(x)).all()):
        return _log2_ints(int(top))[x.to(torch.int64)]  # integers (default gains): a table of log2(k)
    values, inverse = torch.unique(x, return_inverse=True)
    logs = [math.log2(v) if v > 0 else -math.inf if v == 0 else -math.nan for v in values.tolist()]
    return torch.tensor(logs, dtype=torch.float64)[inverse]


def _log2_ints(top: int) -> Tensor:
    """``log2(k)`` for k = 0 .. top (k >= 1 used), by the C library."""
    return torch.tensor([-math.inf] + [math.log2(k) for k in range(1, top + 1)], dtype=torch.float64)


def trec_codes(al) -> Tensor:
    """trec_eval's rel of each retrieved document: the qrels' rel when >= 0, -2 when negative
    (pooled, unjudged), -1 when absent from the qrels (form_res_rels.c)."""
    return torch.where(al.judged, al.rel, torch.where(al.pooled, UNJUDGED, NONPOOL))


def level_counts(qrels, al) -> Tuple[Tensor, Tensor, Tensor]:
    """``(query, level, count)`` of the evaluated queries' judgements with rel >= 0, sorted by
    (query, level); and M per query (its highest such level + 1, 0 if none) as a 4th tensor."""
    pos = {qid: i for i, qid in enumerate(al.query_ids)}
    to_eval = torch.tensor([pos.get(qid, -1) for qid in qrels.query_ids], dtype=torch.int64)
    eq = to_eval[qrels.query] if len(qrels.query_ids) else qrels.query
    keep = (eq >= 0) & (qrels.rel >= 0)
    levels, code = torch.unique(qrels.rel[keep], return_inverse=True)
    # (query, level) as one int64: Q <= N (each evaluated query has a judgement) and width <= N, the
    # judgements: Q * width <= N**2 < 2**63 for N < 3e9
    width = max(len(levels), 1)
    pairs, counts = torch.unique(eq[keep] * width + code, return_counts=True)
    q, level = pairs // width, levels[pairs % width] if len(levels) else pairs
    m = torch.zeros(len(al.query_ids), dtype=torch.int64).scatter_reduce(0, q, level + 1, "amax")
    return q, level, counts, m


class _Table:
    """One measure's gain table over an aligned run: the gain of every retrieved document
    (``gain``), the ideal list (``ideal``, ``ideal_offsets``), and for rbp the gains mapped to [0, 1]."""

    def __init__(self, al, counts, params: GainParams):
        self.al, self.params = al, params
        self.codes = trec_codes(al)
        q, level, count, m = counts
        self.m = m
        gain = torch.where(self.codes >= 0, self.codes, 0).to(torch.float64)
        for lv, g in params.gains:
            gain = torch.where(self.codes == lv, torch.full_like(gain, g), gain)
        self.gain = gain
        if not params.gains:  # the defaults: the positive judged rels, descending (align's ideal)
            self.ideal, self.ideal_offsets = al.ideal, al.ideal_offsets
            return
        self.ideal, self.ideal_offsets = self._ideal(q, level, count)

    def _tables(self) -> Dict[int, List[Tuple[int, float]]]:
        """trec_eval's sorted table for each M among the queries."""
        if not hasattr(self, "_sorted"):
            self._sorted = {mm: table_order(self.params.gains, mm) for mm in torch.unique(self.m).tolist()}
        return self._sorted

    def _ideal(self, q: Tensor, level: Tensor, count: Tensor) -> Tuple[Tensor, Tensor]:
        """trec_eval's walk of each query's sorted table from its top (gains module doc)."""
        tables = self._tables()
        mq = self.m[q]
        pos = torch.zeros_like(level)
        top_ok = torch.zeros(len(self.m), dtype=torch.bool)
        for mm, table in tables.items():
            where = {lv: i for i, (lv, _) in enumerate(table)}
            at = mq == mm
            lookup = torch.tensor([where[lv] for lv in range(mm)], dtype=torch.int64)
            pos[at] = lookup[level[at]]
            top_ok[self.m == mm] = bool(table) and table[-1][1] > 0.0
        gain = level.to(torch.float64)
        for lv, g in self.params.gains:
            gain = torch.where(level == lv, torch.full_like(gain, g), gain)
        width = int(pos.max()) + 1 if pos.numel() else 1
        order = torch.argsort(q * width + (width - 1 - pos), stable=True)  # by query, top of the table first
        q, gain, count = q[order], gain[order], count[order]
        n_q = len(self.m)
        offsets = torch.zeros(n_q + 1, dtype=torch.int64)
        offsets[1:] = torch.cumsum(torch.bincount(q, minlength=n_q), 0)
        stop = running_sums((gain <= 0.0).to(torch.int64), offsets) > 0  # at and after a non-positive gain
        keep = ~stop & top_ok[q]
        ideal = torch.repeat_interleave(gain[keep], count[keep])
        ideal_offsets = torch.zeros(n_q + 1, dtype=torch.int64)
        ideal_offsets[1:] = torch.cumsum(torch.zeros(n_q, dtype=torch.int64).index_add_(0, q[keep], count[keep]), 0)
        return ideal, ideal_offsets

    def rbp_gains(self) -> Tensor:
        """The gains mapped to [0, 1] (m_rbp.c): ``(g - min) / (max - min)`` per query when the
        table's smallest gain is below 0 or its largest above 1; 0 outside the table. m_rbp.c
        leaves min and max uninitialised before its loop over the table; trec_eval 10 built from
        its sources (gcc, its Makefile's flags) starts them at 0, checked by hand: ``rbp.0=2,1=3``
        maps 2 to 2/3, not 0, and ``rbp.0=-1,1=-2`` maps -1 to 1/2. So do we: min <= 0 <= max."""
        lo = torch.zeros(len(self.m), dtype=torch.float64)
        hi = torch.zeros(len(self.m), dtype=torch.float64)
        for mm, table in self._tables().items():
            lo[self.m == mm] = min([0.0] + [g for _, g in table])
            hi[self.m == mm] = max([0.0] + [g for _, g in table])
        lo, hi = lo[self.al.query], hi[self.al.query]
        mapped = torch.where((lo < 0) | (hi > 1), (self.gain - lo) / (hi - lo), self.gain)
        listed = {lv for lv, _ in self.params.gains}
        in_table = (self.codes >= 0) | torch.isin(self.codes, torch.tensor(sorted(listed), dtype=torch.int64))
        return torch.where(in_table, mapped, torch.zeros_like(mapped))


def _at(running: Tensor, offsets: Tensor, q: Tensor, k: Tensor) -> Tensor:
    """``running`` after the first ``k`` entries of query ``q``'s segment, element by element (0 for k = 0)."""
    if running.numel() == 0:
        return torch.zeros(k.shape, dtype=torch.float64)
    idx = (offsets[q] + k - 1).clamp(0, running.numel() - 1)
    return torch.where(k > 0, running[idx], torch.zeros(k.shape, dtype=running.dtype))


class _Lists:
    """The running sums of one gain table over the run and its ideal, each computed once."""

    def __init__(self, al, table: _Table, blocks: list):
        self.al, self.t, self.blocks = al, table, blocks
        self.n = al.num_ret
        self.pos = al.rank - 1                       # 0-based rank of each retrieved document
        io = table.ideal_offsets
        self.L = io[1:] - io[:-1]                    # the ideal's length per query
        self.iq = torch.repeat_interleave(torch.arange(len(self.n)), self.L)
        self.ipos = torch.arange(table.ideal.numel()) - io[self.iq]
        top = max(int(self.n.max()) if len(self.n) else 0, int(self.L.max()) if len(self.L) else 0)
        self.logs = _log2_ints(top + 2)              # log2(i + 2) is logs[i + 2]
        g = table.gain
        self.D = self.sums(torch.where(g != 0, g / self.logs[self.pos + 2], torch.zeros_like(g)))
        self.ID = running_sums(table.ideal / self.logs[self.ipos + 2], io)
        self.d_end = after(self.D, al.offsets, self.n)
        self.id_end = after(self.ID, io, self.L)

    def sums(self, values: Tensor) -> Tensor:
        """Running sums along each query's retrieved documents."""
        return running_sums(values, self.al.offsets, self.blocks)

    def ndcg(self) -> Tensor:
        ok = self.id_end > 0
        return torch.where(ok, self.d_end / torch.where(ok, self.id_end, 1.0), torch.zeros_like(self.d_end))

    def G(self) -> Tensor:
        """m_G.c (module doc)."""
        al, t, q = self.al, self.t, self.al.query
        inside = self.pos < self.L[q]
        ideal_at = t.ideal[(t.ideal_offsets[q] + self.pos).clamp(0, max(t.ideal.numel() - 1, 0))] \
            if t.ideal.numel() else torch.zeros_like(t.gain)
        cost = torch.where(inside, ideal_at.clamp_min(1.0), torch.ones_like(t.gain))
        arg = (2.0 + self.sums(cost)) - self.sums(t.gain)
        term = torch.where(t.gain != 0, t.gain / c_log2(arg), torch.zeros_like(t.gain))
        total = after(self.sums(term), al.offsets, self.n)
        ideal = after(running_sums(t.ideal, t.ideal_offsets), t.ideal_offsets, self.L)
        ok = ideal > 0
        return torch.where(ok, total / torch.where(ok, ideal, 1.0), torch.zeros_like(total))

    def ndcg_rel(self) -> Tensor:
        """m_ndcg_rel.c (module doc)."""
        al, t, q = self.al, self.t, self.al.query
        ideal_at = _at(self.ID, t.ideal_offsets, q, torch.minimum(self.pos + 1, self.L[q]))
        positive = t.gain > 0
        term = torch.where(positive, self.D / ideal_at, torch.zeros_like(self.D))
        total = after(self.sums(term), al.offsets, self.n)
        found = torch.zeros(len(self.n), dtype=torch.int64).index_add_(0, q, positive.to(torch.int64))
        total = total + ((self.L - found).to(torch.float64) * self.d_end) / self.id_end
        return torch.where(total > 0.0, total / self.L.to(torch.float64), torch.zeros_like(total))

    def Rndcg(self) -> Tensor:
        """m_Rndcg.c (module doc): the ranks where the ideal gain changes, its end, the list's end."""
        t, n, L = self.t, self.n, self.L
        ideal = t.ideal
        change = torch.zeros(ideal.numel(), dtype=torch.bool)
        if ideal.numel():
            change[1:] = (ideal[1:] != ideal[:-1]) & (self.ipos[1:] > 0)
        has = torch.nonzero(L > 0).squeeze(1)
        longer = torch.nonzero((L > 0) & (n > L + 1)).squeeze(1)
        eq = torch.cat([self.iq[change], has, longer])
        rank = torch.cat([self.ipos[change], L[has], L[longer]])          # the rank i of each point
        last = torch.cat([torch.zeros(int(change.sum()) + len(has), dtype=torch.bool),
                          torch.ones(len(longer), dtype=torch.bool)])
        order = torch.argsort(eq * (2 * int(L.max() if len(L) else 0) + 4) + rank * 2 + last, stable=True)
        eq, rank, last = eq[order], rank[order], last[order]
        d = _at(self.D, self.al.offsets, eq, torch.where(last, n[eq], torch.minimum(rank, n[eq])))
        term = d / _at(self.ID, t.ideal_offsets, eq, rank)
        offsets = torch.zeros(len(n) + 1, dtype=torch.int64)
        counts = torch.bincount(eq, minlength=len(n))
        offsets[1:] = torch.cumsum(counts, 0)
        total = after(running_sums(term, offsets), offsets, counts)
        value = total / counts.to(torch.float64)  # no point: 0 / 0, NaN as trec_eval's
        return torch.where(self.al.n_relevant > 0, value, torch.zeros_like(value))

    def rbp(self, p: float, resid: bool) -> Tensor:
        """m_rbp.c, m_rbp_resid.c (module doc); ``p^i`` by repeated products, as trec_eval's."""
        al = self.al
        powers = [1.0]
        for _ in range(int(self.n.max()) if len(self.n) else 0):
            powers.append(powers[-1] * p)
        power = torch.tensor(powers, dtype=torch.float64)
        if not resid:
            g = self.t.rbp_gains()
            term = torch.where(g != 0, g * power[self.pos], torch.zeros_like(g))
            return (1.0 - p) * after(self.sums(term), al.offsets, self.n)
        unjudged = self.t.codes < 0
        total = after(self.sums(torch.where(unjudged, power[self.pos], torch.zeros_like(self.D))), al.offsets, self.n)
        any_unjudged = torch.zeros(len(self.n), dtype=torch.int64).index_add_(0, al.query, unjudged.long()) > 0
        return torch.where(any_unjudged, power[self.n] + (1.0 - p) * total, torch.zeros_like(total))


def _binG(al, blocks: list) -> Tensor:
    """m_binG.c: ``1 / log2(3 + i - r)`` at each relevant retrieved (0-based rank i, r relevant so
    far with it), summed, over R; 0 when none is retrieved."""
    found = running_sums(al.relevant.to(torch.int64), al.offsets)
    arg = 3 + (al.rank - 1) - found
    logs = _log2_ints(int(arg.max()) if arg.numel() else 2)
    term = torch.where(al.relevant, 1.0 / logs[arg.clamp_min(0)], torch.zeros(arg.shape, dtype=torch.float64))
    total = after(running_sums(term, al.offsets, blocks), al.offsets, al.num_ret)
    r = al.n_relevant.to(torch.float64)
    return torch.where(al.num_rel_ret > 0, total / r.clamp_min(1.0), torch.zeros_like(total))


def _infAP(al, blocks: list) -> Tensor:
    """m_infap.c (module doc), its terms in C's order of operations."""
    f64 = torch.float64
    rel, nonrel = al.relevant, al.judged & ~al.relevant
    unjudged = al.pooled & ~al.judged
    r = running_sums(rel.to(torch.int64), al.offsets)
    n = running_sums(nonrel.to(torch.int64), al.offsets)
    u = running_sums(unjudged.to(torch.int64), al.offsets)
    fj = (al.rank - 1).to(f64)
    term = 1.0 / (fj + 1.0) + ((fj / (fj + 1.0)) * ((r - 1 + n + u).to(f64) / fj)) * (
        ((r - 1).to(f64) + INFAP_EPSILON) / ((r - 1 + n).to(f64) + 2 * INFAP_EPSILON))
    term = torch.where(al.rank == 1, torch.ones_like(term), term)
    term = torch.where(rel, term, torch.zeros_like(term))
    total = after(running_sums(term, al.offsets, blocks), al.offsets, al.num_ret)
    big_r = al.n_relevant.to(f64)
    return torch.where(al.n_relevant > 0, total / big_r.clamp_min(1.0), total)


def with_placeholder(al):
    """``al`` where each query without a retrieved document retrieves one document outside the
    qrels at rank 1: trec_eval's ``-c`` evaluates a query the run lacks on such a ranking (its
    ``bogus_ranking``, ``ceci_nest_pas_un_docno``), which a gain given to level -1 sees."""
    empty = torch.nonzero(al.num_ret == 0).squeeze(1)
    if not len(empty):
        return al
    k = len(empty)
    query = torch.cat([al.query, empty])
    order = torch.argsort(query, stable=True)
    offsets = torch.zeros_like(al.offsets)
    offsets[1:] = torch.cumsum(torch.bincount(query, minlength=len(al.query_ids)), 0)

    def add(values: Tensor, fill) -> Tensor:
        return torch.cat([values, torch.full((k,), fill, dtype=values.dtype)])[order]

    return dataclasses.replace(
        al, offsets=offsets, query=query[order], rank=add(al.rank, 1), doc=add(al.doc, -1), score=add(al.score, 1.0),
        rel=add(al.rel, NONPOOL), pooled=add(al.pooled, False), gain=add(al.gain, 0.0), judged=add(al.judged, False),
        relevant=add(al.relevant, False))


def gain_values(al, qrels, keys: Sequence[str], *, placeholder: bool = False) -> Dict[str, Tensor]:
    """``{key: [Q] float64}`` for the keys :func:`is_gain_key` accepts (``base`` or ``base.params``),
    from an aligned run ``al`` and its ``qrels`` (the judgements of each level). ``placeholder``:
    a query without a retrieved document retrieves one outside the qrels (trec_eval's ``-c``
    without ``-M0``, :func:`with_placeholder`), seen by a gain table giving level -1 a gain."""
    out: Dict[str, Tensor] = {}
    counts = None
    blocks = layout(al.offsets) if keys else []
    lists: Dict[Tuple[Tuple[Tuple[int, float], ...], bool], _Lists] = {}
    for key in keys:
        base, _, text = key.partition(".")
        if base == "binG":
            out[key] = _binG(al, blocks)
            continue
        if base == "infAP":
            out[key] = _infAP(al, blocks)
            continue
        params = parse_gain_params(base, text or None)
        table_key = params.gains if base in GAIN_MEASURES else ()
        # the placeholder changes a value where level -1 has a gain, and rbp_resid's unless named bare
        # (trec_eval zeroes "rbp_resid" after its placeholder ranking, not "rbp_resid_p=0.8")
        seen = placeholder and (any(lv == NONPOOL for lv, _ in table_key) or base == "rbp_resid" and bool(text))
        if (table_key, seen) not in lists:
            counts = level_counts(qrels, al) if counts is None else counts
            run = with_placeholder(al) if seen else al
            table = _Table(run, counts, GainParams(params.text, table_key))
            lists[table_key, seen] = _Lists(run, table, layout(run.offsets) if seen else blocks)
        ls = lists[table_key, seen]
        if base in P_MEASURES:
            out[key] = ls.rbp(params.p, resid=base == "rbp_resid")
        else:
            out[key] = {"dcg": lambda: ls.d_end, "ideal_dcg": lambda: ls.id_end, "ndcg": ls.ndcg, "G": ls.G,
                        "ndcg_rel": ls.ndcg_rel, "Rndcg": ls.Rndcg}[base]()
    return out
