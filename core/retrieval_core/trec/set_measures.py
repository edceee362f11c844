"""trec_eval's measures of the retrieved set and of counts at cutoffs: ``set_P``, ``set_recall``,
``set_relative_P``, ``set_map``, ``set_F``, ``relative_P``, ``Rprec_mult``, ``11pt_avg``,
``utility``, ``unj`` and ``relstring``; their names with parameters, and their per-query values,
each the double trec_eval 10 computes (its m_*.c: the same integer counts, the same
divisions and products in the same order). The summary of each is the mean over the queries
(``relstring`` has none).

* ``set_P`` = num_rel_ret / num_ret; ``set_recall`` = num_rel_ret / R; ``set_relative_P`` =
  num_rel_ret / min(num_ret, R); ``set_map`` = num_rel_ret² / (num_ret R); ``set_F`` (beta x,
  default 1) = (x + 1) P R' / (x P + R') with P, R' the set precision and recall; 0 where
  trec_eval divides by nothing.
* ``relative_P@k``: the relevant among the first k over min(k, R) (0 when R = 0); ``unj@k``:
  the unjudged (absent from the qrels, or rel < 0) among the first k, over k.
* ``Rprec_mult@x``: precision at c = (long)(x R + 0.9) documents (0 when c <= 0).
* ``11pt_avg``: trec_eval's loop (m_11pt_avg.c), a sum over its parameters taken in reverse
  order, over their number: a parameter whose c (lround(x R); ``rule="v9"``: (long)(x R + 0.9))
  is reached adds the interpolated precision at the c-th relevant retrieved document; the
  trailing parameters whose c exceeds num_rel_ret add nothing; once one is not reached (c <= 0,
  or above the one before, as with unsorted parameters), it and every one before it add the
  best precision of the list (num_rel_ret / num_ret when nothing relevant is retrieved:
  ``-nan`` for an empty list, as trec_eval prints).
* ``utility`` (a, b, c, d; default 1, -1, 0, 0): a num_rel_ret + b (num_ret - num_rel_ret) +
  c (R - num_rel_ret) + d (N + num_rel_ret - num_ret - R), N the documents in the collection
  (trec_eval ``-N``, 0 by default).
* ``relstring`` (length, default 10): the rels of the first documents as a string: the digit
  when 0..9, ``>`` above 9, ``-`` outside the qrels, ``.`` judged negative.

Under ``complete`` (``-c``) trec_eval evaluates a query the run lacks with one made-up document
outside the qrels (``-M0``: none), then sets ``utility`` (named without parameters), ``unj`` and
``relstring`` (without parameters) to 0 / ''; ``missing`` and ``bogus_docs`` say which queries
and how many documents, so that ``utility_2,-1,0,0`` and ``relstring_20`` print what trec_eval's do.

Example:
    >>> pairs("Rprec_mult", "0.5,2", "Rprec_mult.0.5,2")
    [('Rprec_mult@0.5', 'Rprec_mult_0.50'), ('Rprec_mult@2.0', 'Rprec_mult_2.00')]
    >>> pairs("utility", "2,-1,0,0", "utility.2,-1,0,0")
    [('utility@2.0,-1.0,0.0,0.0', 'utility_2,-1,0,0')]
    >>> from retrieval_core.trec import align, qrels_from_dict, run_from_dict
    >>> qrels = qrels_from_dict({"q": {"a": 1, "b": 0, "c": 1, "z": -1}})
    >>> al = align(run_from_dict({"q": {"a": 0.9, "x": 0.8, "z": 0.7, "c": 0.6}}), qrels)
    >>> values, texts = set_values(al, ["set_P", "set_F@0.5", "relative_P@2", "unj@5", "11pt_avg", "relstring"])
    >>> {k: round(v.item(), 4) for k, v in values.items() if k not in texts}
    {'set_P': 0.5, 'set_F@0.5': 0.6, 'relative_P@2': 0.5, 'unj@5': 0.4, '11pt_avg': 0.8636}
    >>> texts
    {'relstring': ['1-.1']}
"""
from __future__ import annotations

import math
import re
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import torch
from torch import Tensor

from .exact import after, along_rows, running_sums

__all__ = ["MEASURES", "TEXT", "is_key", "pairs", "set_values"]

MEASURES = ("set_P", "set_recall", "set_relative_P", "set_map", "set_F", "relative_P", "Rprec_mult", "11pt_avg",
            "utility", "unj", "relstring")
TEXT = "relstring"  # printed per query as a string, no summary
_PLAIN = ("set_P", "set_recall", "set_relative_P", "set_map")
# the default parameters of trec_eval's m_*.c
_LONG_DEFAULTS = {"relative_P": (5, 10, 15, 20, 30, 100, 200, 500, 1000), "unj": (5, 10, 20)}
_RPREC_MULT = (0.2, 0.4, 0.6, 0.8, 1.0, 1.2, 1.4, 1.6, 1.8, 2.0)
_DEFAULTS = {"set_F": (1.0,), "11pt_avg": (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0),
             "utility": (1.0, -1.0, 0.0, 0.0), "relstring": (10.0,)}
_ATOF = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")  # C's atof, finite numbers
_ATOL = re.compile(r"\+?([0-9]+)(?:\.[0-9]*)?")  # C's atol: "23.4" is 23
_LONG_MIN = -2**63  # x86-64's conversion of a double out of a long's range
_NAN = float("-nan")  # 0.0 / 0.0 on x86-64, printed -nan by trec_eval


def is_key(key: str) -> bool:
    """Whether ``key`` (``set_P``, ``relative_P@5``, ``utility@2.0,-1.0,0.0,0.0``...) is computed here."""
    return key.partition("@")[0] in MEASURES


def _number(text: str, name: str) -> float:
    if not _ATOF.fullmatch(text) or not math.isfinite(float(text)):
        raise ValueError(f"{name!r}: a parameter must be a finite number; got {text!r}")
    return float(text)


def _long(text: str, name: str) -> int:
    m = _ATOL.fullmatch(text)
    digits = m[1].lstrip("0") if m else ""
    if not digits:
        raise ValueError(f"{name!r}: a cutoff must be a positive integer; got {text!r}")
    if len(digits) > 19 or int(digits) >= 2**63:
        raise ValueError(f"{name!r}: a cutoff must be at most 2**63 - 1; got {text}")
    return int(digits)


def _sorted_unique(params: str, name: str, parse: Callable) -> list:
    values = sorted(parse(p, name) for p in params.split(","))
    if any(a == b for a, b in zip(values, values[1:])):
        raise ValueError(f"{name!r}: a parameter is given twice (trec_eval: 'duplicate cutoffs detected')")
    return values


def pairs(base: str, params: Optional[str], name: str) -> List[Tuple[str, str]]:
    """``(key, trec_eval output name)`` of measure ``base`` with trec_eval's parameter text
    ``params`` (None: the defaults); a ValueError for parameters trec_eval refuses or
    misreads (``utility`` takes 4 numbers; a number is a finite decimal, not C's ``atof`` of junk)."""
    if base in _PLAIN:
        if params is not None:
            raise ValueError(f"{name!r}: trec_eval's {base} takes no parameter (trec_eval ignores it; refused here)")
        return [(base, base)]
    if base in _LONG_DEFAULTS:
        ks = _LONG_DEFAULTS[base] if params is None else _sorted_unique(params, name, _long)
        return [(f"{base}@{k}", f"{base}_{k}") for k in ks]
    if base == "Rprec_mult":
        xs = _RPREC_MULT if params is None else _sorted_unique(params, name, _number)
        names = [f"{base}_{x:.2f}"[:len(base) + 9] for x in xs]  # trec_eval's buffer: 8 characters
        if len(set(names)) < len(names):
            raise ValueError(f"{name!r}: two parameters print the same name ({', '.join(names)})")
        return [(f"{base}@{x!r}", n) for x, n in zip(xs, names)]
    if params is None:
        return [(base, base)]
    values = [_number(p, name) for p in params.split(",")]
    if base == "utility" and len(values) != 4:
        raise ValueError(f"{name!r}: utility takes 4 numbers a,b,c,d (trec_eval: 'improper number of "
                         "coefficients')")
    return [(f"{base}@{','.join(repr(v) for v in values)}", f"{base}_{params}")]


def _params(key: str) -> Tuple[str, Tuple[float, ...], bool]:
    """``(base, parameters, named)`` of a key; ``named``: given with parameters."""
    base, sep, arg = key.partition("@")
    if not sep:
        return base, _DEFAULTS.get(base, ()), False
    return base, tuple(float(a) for a in arg.split(",")), True


def _as_long(t: Tensor) -> Tensor:
    """C's (long) of integral doubles ``t``: out of range (or NaN), LONG_MIN as on x86-64."""
    inside = (t > -2.0**63) & (t < 2.0**63)
    return torch.where(inside, t, torch.zeros_like(t)).to(torch.int64).masked_fill(~inside, _LONG_MIN)


class _Query:
    """Per-query counts of an aligned run (float64 unless said), made once for every key."""

    def __init__(self, al, missing: Optional[Tensor], bogus_docs: int):
        f64 = torch.float64
        self.al, self.q = al, len(al.query_ids)
        self.missing = torch.zeros(self.q, dtype=torch.bool) if missing is None else missing
        self.nr_long = torch.where(self.missing, bogus_docs, al.num_ret)  # trec_eval's made-up run: 1 document
        self.nrr_long, self.r_long = al.num_rel_ret, al.n_relevant.to(torch.int64)
        self.nr, self.nrr, self.r = self.nr_long.to(f64), self.nrr_long.to(f64), self.r_long.to(f64)
        self._rel = self._unj = None

    def rel_at(self, k: Tensor) -> Tensor:
        """The relevant among the first ``k`` (clamped to the list) per query."""
        if self._rel is None:
            self._rel = running_sums(self.al.relevant.to(torch.int64), self.al.offsets)
        return after(self._rel, self.al.offsets, k).to(torch.float64)

    def unj_at(self, k: Tensor) -> Tensor:
        if self._unj is None:
            self._unj = running_sums((~self.al.judged).to(torch.int64), self.al.offsets)
        return after(self._unj, self.al.offsets, k).to(torch.float64)


def _set(c: _Query, base: str, beta: float) -> Tensor:
    """m_set_P.c, m_set_recall.c, m_set_rel_P.c, m_set_map.c, m_set_F.c."""
    zero, one = torch.zeros(c.q, dtype=torch.float64), torch.ones(c.q, dtype=torch.float64)
    nr, nrr, r = c.nr, c.nrr, c.r
    ret, rel = c.nr_long > 0, c.r_long > 0
    if base == "set_P":
        return torch.where(ret, nrr / torch.where(ret, nr, one), zero)
    if base == "set_recall":
        return torch.where(rel, nrr / torch.where(rel, r, one), zero)
    both = ret & rel
    if base == "set_relative_P":
        return torch.where(both, nrr / torch.where(both, torch.minimum(nr, r), one), zero)
    if base == "set_map":
        return torch.where(both, (nrr * nrr) / torch.where(both, nr * r, one), zero)
    found = c.nrr_long > 0  # set_F: then num_ret and R are positive too
    p = nrr / torch.where(found, nr, one)
    rec = nrr / torch.where(found, r, one)
    return torch.where(found, (beta + 1.0) * p * rec / (beta * p + rec), zero)


def _cut(c: _Query, base: str, k: int) -> Tensor:
    """m_rel_P.c: relevant in the first k / min(k, R), 0 when R = 0; m_unjudged.c: unjudged / k."""
    kk = torch.full((c.q,), k, dtype=torch.int64)
    if base == "unj":
        return torch.where(c.missing, torch.zeros(c.q, dtype=torch.float64), c.unj_at(kk) / float(k))
    rel = c.r_long > 0
    denom = torch.minimum(kk, c.r_long).clamp_min(1).to(torch.float64)
    return torch.where(rel, c.rel_at(kk) / denom, torch.zeros(c.q, dtype=torch.float64))


def _rprec_mult(c: _Query, x: float) -> Tensor:
    """m_Rprec_mult.c: precision at c = (long)(x R + 0.9), the relevant in the first c over c
    (c past the list: num_rel_ret / c); 0 when c <= 0."""
    cut = _as_long(torch.trunc(x * c.r + 0.9))
    ok = cut > 0
    safe = torch.where(ok, cut, torch.ones_like(cut))
    return torch.where(ok, c.rel_at(safe) / safe.to(torch.float64), torch.zeros(c.q, dtype=torch.float64))


def _utility(c: _Query, params: Sequence[float], named: bool, num_docs: int) -> Tensor:
    """m_utility.c: a nrr + b (nr - nrr) + c (R - nrr) + d (N + nrr - nr - R), added left to right;
    the counts are integers (C's long), each product a double. Under -c a missing query's
    ``utility`` (named without parameters) is set to 0 by trec_eval."""
    a, b, cc, d = params
    nr, nrr, r = c.nr_long, c.nrr_long, c.r_long
    rest = (num_docs + nrr - nr - r).to(torch.float64)
    value = a * c.nrr + b * (nr - nrr).to(torch.float64) + cc * (r - nrr).to(torch.float64) + d * rest
    return value if named else value.masked_fill(c.missing, 0.0)


def _interpolated(al) -> Callable[[Tensor], Tensor]:
    """``pick(c)``: per query, the best precision at or after the rank of its c-th relevant
    retrieved document (c in 1..num_rel_ret; else anything), each precision rel_so_far / rank."""
    f64 = torch.float64
    n = al.offsets[1:] - al.offsets[:-1]
    count = running_sums(al.relevant.to(torch.int64), al.offsets)
    rank = torch.arange(len(al.relevant)) - torch.repeat_interleave(al.offsets[:-1], n) + 1
    prec = torch.where(al.relevant, count.to(f64) / rank.to(f64), torch.zeros(len(rank), dtype=f64))
    best = along_rows(prec, al.offsets, lambda d: torch.flip(torch.cummax(torch.flip(d, [1]), 1).values, [1]))
    at_rel = torch.nonzero(al.relevant).squeeze(1)  # query by query, in rank order
    first = torch.cumsum(al.num_rel_ret, 0) - al.num_rel_ret

    def pick(c: Tensor) -> Tensor:
        if not len(at_rel):
            return torch.zeros(len(c), dtype=f64)
        return best[at_rel[(first + c - 1).clamp(0, len(at_rel) - 1)]]

    return pick


def _eleven_point(c: _Query, params: Sequence[float], rule: str) -> Tensor:
    """m_11pt_avg.c, step by step over the parameters in reverse order (module doc)."""
    f64 = torch.float64
    pick = _interpolated(c.al)
    nrr = c.nrr_long
    has = nrr > 0
    nothing = torch.where(c.nr_long > 0, 0.0, _NAN).to(f64)  # num_rel_ret / num_ret with nothing relevant
    best = torch.where(has, pick(torch.ones_like(nrr)), nothing)
    phase = torch.zeros(c.q, dtype=torch.int64)  # 0: skipping the unreachable tail, 1: matching, 2: stuck
    prev, total = nrr.clone(), torch.zeros(c.q, dtype=f64)
    for x in reversed(params):
        share = x * c.r
        if rule == "v9":
            cut = _as_long(torch.trunc(share + 0.9))
        else:  # lround, half away from zero (a negative half may round up: either way c <= 0)
            whole = torch.floor(share)
            cut = _as_long(whole + (share - whole >= 0.5).to(f64))
        start = (phase == 0) & (cut <= nrr)
        phase = torch.where(start, torch.where(has, 1, 2), phase)
        match = (phase == 1) & (cut >= 1) & (cut <= prev)
        phase = torch.where((phase == 1) & ~match, 2, phase)
        value = torch.where(match, pick(cut.clamp(1, None)), torch.where(phase == 2, best, torch.zeros_like(best)))
        prev = torch.where(match, cut, prev)
        total = total + value
    return total / float(len(params))


def _relstring(c: _Query, length: float, named: bool) -> List[str]:
    """m_relstring.c: the rels of the first (long)length documents as characters."""
    al = c.al
    n = int(length) if -2.0**63 < length < 2.0**63 else _LONG_MIN
    n = max(n, 0)
    counts = al.offsets[1:] - al.offsets[:-1]
    pos = torch.arange(len(al.rel)) - torch.repeat_interleave(al.offsets[:-1], counts)
    rel = al.rel
    code = torch.where(rel > 9, ord(">"), ord("0") + rel.clamp(0, 9))
    code = torch.where(rel < 0, ord("."), code)
    code = torch.where(al.pooled, code, ord("-"))
    keep = pos < n
    text = bytes(code[keep].to(torch.uint8).tolist()).decode("ascii")
    ends = torch.cumsum(torch.clamp(counts, max=n), 0).tolist()
    out = [text[a:b] for a, b in zip([0] + ends[:-1], ends)]
    if c.missing.any():
        made_up = "-" * min(n, int(c.nr_long[c.missing][0])) if named else ""  # trec_eval clears 'relstring' only
        out = [made_up if m else s for s, m in zip(out, c.missing.tolist())]
    return out


def set_values(al, keys: Sequence[str], *, missing: Optional[Tensor] = None, bogus_docs: int = 1, num_docs: int = 0,
               rule: str = "lround") -> Tuple[Dict[str, Tensor], Dict[str, List[str]]]:
    """``({key: [Q] float64}, {relstring key: [Q] strings})`` for the keys :func:`is_key` accepts
    (a relstring's column is NaN) of an aligned run ``al``; ``missing``: the queries the run lacks
    (``complete``), evaluated as trec_eval does with ``bogus_docs`` made-up documents (1; 0 under
    ``-M0``); ``num_docs``: the collection's size (trec_eval ``-N``, for utility); ``rule``: how
    ``11pt_avg`` turns x R into a count (``"lround"``, trec_eval 10; ``"v9"``, trec_eval 9)."""
    c = _Query(al, missing, bogus_docs)
    values: Dict[str, Tensor] = {}
    texts: Dict[str, List[str]] = {}
    for key in keys:
        base, params, named = _params(key)
        if base in _PLAIN or base == "set_F":
            values[key] = _set(c, base, params[0] if params else 1.0)
        elif base in _LONG_DEFAULTS:
            values[key] = _cut(c, base, int(key.partition("@")[2]))
        elif base == "Rprec_mult":
            values[key] = _rprec_mult(c, params[0])
        elif base == "11pt_avg":
            values[key] = _eleven_point(c, params, rule)
        elif base == "utility":
            values[key] = _utility(c, params, named, num_docs)
        elif base == TEXT:
            texts[key] = _relstring(c, params[0], named)
            values[key] = torch.full((c.q,), math.nan, dtype=torch.float64)
        else:
            raise ValueError(f"{key!r} is not one of the measures computed here ({', '.join(MEASURES)})")
    return values, texts
