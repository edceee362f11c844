"""trec_eval's gain tables (gain_init.c): the ``rel_level=gain`` parameters of ``ndcg``, ``dcg``,
``ideal_dcg``, ``ndcg_rel``, ``Rndcg``, ``G`` and ``rbp`` (and ``p=`` of ``rbp`` / ``rbp_resid``),
and the table trec_eval builds from them for each query.

trec_eval's table for a query (``setup_gains``): the pairs given, in their order, then every
level ``0 .. M - 1`` (M: one more than the query's highest judged rel) not among them, with
its own value as gain; each entry counts the query's judgements of its level. It sorts the
table with the C library's ``qsort`` (glibc: a merge sort, halves of ``n // 2``, the left entry
first unless the comparator says "greater") and a comparator that returns the difference of the
two gains converted to ``int``: it truncates, so gains less than 1 apart compare equal, and the
table is not always in gain order (``ndcg.1=3,2=2.5``: level 2 comes last, "highest"). A
retrieved document's gain is its level's (0 for a level outside the table: an unjudged one);
the ideal list walks the table from its last entry down, each level's judgements in turn, and
ends at the first non-empty level whose gain is not positive (at once when the last entry's
gain is not positive). :func:`table_order` reproduces that order, exactly as glibc's merge sort
makes it, for any gains; with integer gains (the defaults) it is the stable order by gain.

Refused (trec_eval reads them some way, silently): a name that is not an integer level (but
``p`` for rbp), a level given twice, a gain that is not a finite number, ``p`` outside [0, 1].

Example:
    >>> parse_gain_params("ndcg", "1=3,2=9,4=4.5")
    GainParams(text='1=3,2=9,4=4.5', gains=((1, 3.0), (2, 9.0), (4, 4.5)), p=0.9)
    >>> [level for level, _ in table_order(((1, 3.0), (2, 2.5)), 3)]   # 3 - 2.5 "is" 0: level 2 last
    [0, 1, 2]
    >>> [level for level, _ in table_order(((1, 3.0), (2, 9.0)), 3)]
    [0, 1, 2]
    >>> [level for level, _ in table_order(((1, 3.5),), 5)]        # 3.5 - 3 "is" 0, 3.5 - 4 too
    [0, 2, 1, 3, 4]
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Callable, List, Optional, Sequence, Tuple

__all__ = ["GAIN_MEASURES", "P_MEASURES", "DEFAULT_P", "GainParams", "parse_gain_params", "table_order",
           "c_int"]

GAIN_MEASURES = ("G", "dcg", "ideal_dcg", "ndcg", "ndcg_rel", "Rndcg", "rbp")  # take rel_level=gain pairs
P_MEASURES = ("rbp", "rbp_resid")  # take p= (m_rbp.c, m_rbp_resid.c)
DEFAULT_P = 0.9
INT_MIN = -2**31
_LEVEL = re.compile(r"[+-]?[0-9]+")  # gain_init.c's valid_int
_NUMBER = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")  # a number as C's atof reads it
SLOW_LIMIT = 1 << 16  # table entries sorted one comparison at a time (fractional gains only)

Entry = Tuple[int, float]


@dataclass(frozen=True)
class GainParams:
    """The parameters of one measure: ``text`` as given (trec_eval prints ``name_text``),
    ``gains`` the ``(level, gain)`` pairs in their order, ``p`` (rbp)."""

    text: str
    gains: Tuple[Entry, ...] = ()
    p: float = DEFAULT_P


def parse_gain_params(base: str, text: Optional[str]) -> GainParams:
    """The parameters ``text`` of measure ``base`` (None: its defaults); a ValueError says what is wrong."""
    if text is None:
        return GainParams("")
    parts = [part.partition("=") for part in text.split(",")]
    if any(not eq or "=" in value for _, eq, value in parts):
        raise ValueError("parameters are name=value pairs separated by commas, e.g. 1=3,2=9 (trec_eval: "
                         "'malformed pair parameters')")
    gains: List[Entry] = []
    p: Optional[float] = None
    for name, _, value in parts:
        if not _NUMBER.fullmatch(value) or not math.isfinite(float(value)):
            raise ValueError(f"{name}={value}: the value must be a finite number")
        if name == "p" and base in P_MEASURES:
            if p is not None:
                raise ValueError("p is given twice")
            p = float(value)
            if not 0.0 <= p <= 1.0:
                raise ValueError(f"p must be in [0, 1]; got {value}")
        elif _LEVEL.fullmatch(name) and base in GAIN_MEASURES:
            level = int(name)
            if not -2**63 <= level < 2**63:
                raise ValueError(f"{name}={value}: a relevance level must be an int64")
            if any(level == known for known, _ in gains):
                raise ValueError(f"relevance level {level} is given twice")
            gains.append((level, float(value)))
        else:
            what = {"rbp": "rel_level=gain pairs and p=", "rbp_resid": "p= alone"}.get(base, "rel_level=gain pairs")
            raise ValueError(f"{name}={value}: {base} takes {what} (a relevance level is an integer)")
    return GainParams(text, tuple(gains), DEFAULT_P if p is None else p)


def c_int(x: float) -> int:
    """C's ``(int)`` of a double on x86-64 (cvttsd2si): truncated toward 0; INT_MIN when out of range or NaN."""
    if x != x or not -2**31 - 1 < x < 2**31:
        return INT_MIN
    return int(x)


def _merge_sort(items: List[Entry], cmp: Callable[[Entry, Entry], int]) -> List[Entry]:
    """glibc's ``msort_with_tmp``: sort the first ``n // 2`` and the rest, then merge, taking the
    left item while ``cmp(left, right) <= 0``."""
    if len(items) <= 1:
        return items
    half = len(items) // 2
    left, right = _merge_sort(items[:half], cmp), _merge_sort(items[half:], cmp)
    out: List[Entry] = []
    i = j = 0
    while i < len(left) and j < len(right):
        if cmp(left[i], right[j]) <= 0:
            out.append(left[i])
            i += 1
        else:
            out.append(right[j])
            j += 1
    return out + left[i:] + right[j:]


def integer_gains(gains: Sequence[Entry]) -> bool:
    """Whether every gain of a table with these pairs (the defaults are levels) is an integer far
    from int's limits: trec_eval's comparator is then exact, its order the stable order by gain."""
    return all(g == math.floor(g) and abs(g) < 2**29 for _, g in gains)


def table_order(gains: Sequence[Entry], m: int) -> List[Entry]:
    """trec_eval's sorted table for a query whose levels are ``0 .. m - 1`` (``setup_gains``,
    module doc): ``(level, gain)``, lowest first."""
    given = {level for level, _ in gains}
    entries = list(gains) + [(level, float(level)) for level in range(m) if level not in given]
    if integer_gains(gains) and m < 2**29:
        return sorted(entries, key=lambda e: e[1])  # stable, as the merge sort with an exact comparator
    if len(entries) > SLOW_LIMIT:
        raise ValueError(f"a gain table with fractional gains and {len(entries)} entries (levels up to {m - 1}): "
                         f"trec_eval's order of such a table is reproduced for at most {SLOW_LIMIT} entries")
    return _merge_sort(entries, lambda a, b: c_int(a[1] - b[1]))
