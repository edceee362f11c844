"""Every pair of runs in a report: the tables and records of
:func:`~retrieval_core.stats.allpairs.compare_all` results, one per metric.

Example:
    >>> from retrieval_core import compare_all
    >>> runs = {"a": [0.2, 0.4, 0.5, 0.1, 0.3], "b": [0.5, 0.7, 0.8, 0.5, 0.6], "c": [0.2, 0.5, 0.5, 0.2, 0.3]}
    >>> by_key = {"map": compare_all(runs, method="tukey_paired")}
    >>> heading, header, rows = pairs_table(by_key)
    >>> header
    ['metric', 'pair', 'difference', '95% interval', 'p-value', 'adjusted p', "Cohen's d_z", 'separable']
    >>> rows[0]
    ['map', 'a - b', '-0.3200', '[-0.3817, -0.2583]', '1.119e-06', '1.119e-06', '-7.155', 'yes']
    >>> groups_table(by_key)[2]
    [['map', 'b', 'a', 'b']]
"""
from __future__ import annotations

import math
from typing import Dict, List, Mapping, Optional, Tuple

from ..stats.allpairs import AllPairs
from .report import format_p_value

__all__ = ["CORRECTION_CHOICES", "correction_of", "method_text", "pair_records", "pairs_table", "groups_table"]

CORRECTION_CHOICES = ("holm", "bonferroni", "none", "tukey", "tukey_paired")  # as typed on a command line
_TESTS = {"permutation": "sign-flip permutation test", "paired_t": "paired t-test",
          "bootstrap": "bootstrap of the mean difference"}
Table = Tuple[str, List[str], List[List[str]]]


def correction_of(choice: str) -> Optional[str]:
    """The ``method`` of :func:`compare_all` for a command line's ``--correction`` (``"none"``: None)."""
    return None if choice == "none" else choice


def method_text(method: Optional[str], test: Optional[str]) -> str:
    """How the pairs were tested, in words.

    Example:
        >>> method_text("holm", "paired_t")
        'paired t-test, Holm-corrected over the pairs'
    """
    if method == "tukey":
        return "Tukey's HSD (as ranx: runs as independent samples)"
    if method == "tukey_paired":
        return "Tukey's HSD on the two-way ANOVA (queries x runs)"
    how = {"holm": "Holm-corrected", "bonferroni": "Bonferroni-corrected", None: "not corrected"}[method]
    return f"{_TESTS[test]}, {how} over the pairs"


def _finite(x: float) -> Optional[float]:
    return float(x) if math.isfinite(x) else None


def pair_records(result: AllPairs) -> List[Dict[str, object]]:
    """One JSON-ready record per pair: ``runs [a, b]``, the mean of ``a - b``, its interval, the
    p-values, the effect size (None when infinite: no spread), ``significant`` and ``n``."""
    return [{"runs": [a, b], "mean_difference": c.mean_difference, "ci": list(c.ci), "p_value": c.p_value,
             "adjusted_p_value": c.adjusted_p_value, "effect_size": _finite(c.effect_size),
             "significant": c.significant, "n": result.n} for (a, b), c in result.pairs.items()]


def pairs_table(by_key: Mapping[str, AllPairs], level: float = 0.95) -> Table:
    """``(heading, header, rows)``: each metric's pairs (``level``: the intervals' level, for the header)."""
    rows = []
    for key, result in by_key.items():
        for (a, b), c in result.pairs.items():
            rows.append([key, f"{a} - {b}", f"{c.mean_difference:+.4f}", f"[{c.ci[0]:+.4f}, {c.ci[1]:+.4f}]",
                         format_p_value(c.p_value), format_p_value(c.adjusted_p_value), f"{c.effect_size:+.4g}",
                         "yes" if c.significant else "no"])
    first = next(iter(by_key.values()), None)
    how = method_text(first.method, first.test) if first is not None else ""
    alpha = f", separable: adjusted p < {first.alpha:g}" if first is not None else ""
    header = ["metric", "pair", "difference", f"{level:.0%} interval", "p-value", "adjusted p", "Cohen's d_z",
              "separable"]
    return f"All pairs of runs ({how}{alpha})", header, rows


def groups_table(by_key: Mapping[str, AllPairs]) -> Table:
    """``(heading, header, rows)``: each metric's letter groups (runs sharing a letter are not separable)."""
    first = next(iter(by_key.values()), None)
    names = list(first.runs) if first is not None else []
    rows = [[key] + [result.groups[n] for n in names] for key, result in by_key.items()]
    return "Letter groups (runs that share a letter are not separable; a: the best run's group)", \
        ["metric"] + names, rows
