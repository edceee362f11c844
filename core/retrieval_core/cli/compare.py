"""Reading saved runs (eval --output) and the compare command: paired tests query by query."""
from __future__ import annotations

import json
import os
from typing import Dict, List, Optional, Tuple

import torch

from .parser import PROG, TEST_NAMES
from ..reporting.report import format_p_value, text_table
from ..stats import comparison
from ..stats.aggregate import MetricResults

__all__ = ["SavedRun", "cmd_compare"]

SavedRun = Tuple[MetricResults, Dict[str, object]]  # results, and what identifies their queries


def _read_run(path: str) -> SavedRun:
    """An ``eval --output`` file: its results and its ``"queries"`` record ({} if none)."""
    if not os.path.exists(path):
        raise FileNotFoundError(f"no such file: {path}")
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        where = f"{err.msg} at line {err.lineno}" if isinstance(err, json.JSONDecodeError) else "not UTF-8 text"
        raise ValueError(f"{path} is not JSON ({where}); expected an `eval --output` file") from None
    try:
        results = MetricResults.from_dict(data)
    except (ValueError, TypeError, KeyError, IndexError) as err:
        raise ValueError(f"{path} is not an `eval --output` file ({' '.join(str(err).split())})") from None
    queries = data.get("queries") if isinstance(data.get("queries"), dict) else {}
    return results, queries


def _unique_ids(r: MetricResults) -> Optional[List]:
    if r.query_ids is None:
        return None
    ids = r.query_ids.tolist()
    return ids if len(set(ids)) == len(ids) else None  # sequence ids shared by queries identify none of them


def _pairing(a: SavedRun, b: SavedRun, path_a: str, path_b: str, by_position: bool = False) -> Optional[torch.Tensor]:
    """Positions of B's queries in A's order (None: the same order). Pairs by unique query
    ids when both runs have them; else by position, only when both runs hold the same
    queries in the same order (equal fingerprints) or ``by_position`` says so; else refuses."""
    (ra, qa), (rb, qb) = a, b
    n_a = next(iter(ra.per_query.values())).shape[0] if ra.per_query else 0
    n_b = next(iter(rb.per_query.values())).shape[0] if rb.per_query else 0
    ids_a, ids_b = _unique_ids(ra), _unique_ids(rb)
    if ids_a is not None and ids_b is not None:
        if sorted(ids_a, key=repr) != sorted(ids_b, key=repr):
            raise ValueError(f"{path_a} and {path_b} hold different query ids: a paired comparison needs the "
                             "same queries")
        if ids_a == ids_b:
            return None
        where = {q: i for i, q in enumerate(ids_b)}
        return torch.tensor([where[q] for q in ids_a])
    if n_a != n_b:
        raise ValueError(f"{path_a} has {n_a} queries and {path_b} has {n_b}: a paired comparison needs the "
                         "same queries")
    if by_position:
        return None
    fa, fb = qa.get("fingerprint"), qb.get("fingerprint")
    if fa is None or fb is None:
        missing = path_a if fa is None else path_b
        raise ValueError(f"cannot pair the queries: {missing} records neither unique query ids nor a fingerprint "
                         f"of its queries (written by an older version?); run `{PROG} eval ... --output` again, "
                         "or pass --by-position if both list the same queries in the same order")
    if fa != fb:
        raise ValueError(f"cannot pair the queries of {path_a} and {path_b}: their query labels (and ids) split "
                         "the queries into different classes, so they hold different queries or the same in "
                         "another order; pass --by-position if both list the same queries in the same order, or "
                         "evaluate both with --query-ids FILE (one unique id per query) to pair them by id")
    return None


def _paired_values(a: SavedRun, b: SavedRun, key: str, path_a: str, path_b: str, by_position: bool) -> torch.Tensor:
    """B's per-query values of ``key`` in A's query order."""
    order = _pairing(a, b, path_a, path_b, by_position)
    values = b[0].per_query[key]
    return values if order is None else values[order]


def cmd_compare(args) -> int:
    a, b = _read_run(args.a), _read_run(args.b)
    for path, (r, _) in ((args.a, a), (args.b, b)):
        if not r.per_query:
            raise ValueError(f"{path} holds no per-query values: write it with `{PROG} eval ... --output {path}`")
    keys = args.metrics or [k for k in a[0].per_query if k in b[0].per_query]
    if not keys:
        raise ValueError(f"{args.a} and {args.b} have no metric key with per-query values in common")
    for key in keys:
        for path, (r, _) in ((args.a, a), (args.b, b)):
            if key not in r.per_query:
                raise ValueError(f"{path} has no per-query values of {key!r}; it has {', '.join(r.per_query)}")
    rows = {}
    for key in keys:  # B - A: the second run minus the first, as `report` prints run - base
        va, vb = a[0].per_query[key], _paired_values(a, b, key, args.a, args.b, args.by_position)
        c = comparison.compare(vb, va, test=args.test, n_resamples=args.n_resamples, seed=args.seed, ci=args.ci)
        rows[key] = {"a": float(torch.nanmean(va.double())), "b": float(torch.nanmean(vb.double())),
                     "mean_difference": float(c.mean_difference), "ci": [float(c.ci[0]), float(c.ci[1])],
                     "p_value": float(c.p_value), "n": int(c.n), "test": c.test}
    if args.json:
        print(json.dumps({"a": args.a, "b": args.b, "difference": "B - A", "level": args.ci, "metrics": rows},
                         indent=2))
        return 0
    header = ["metric", "A", "B", "B - A", f"{args.ci:.0%} interval", "p-value", "n"]
    table = [[k, f"{v['a']:.4f}", f"{v['b']:.4f}", f"{v['mean_difference']:+.4f}",
              f"[{v['ci'][0]:+.4f}, {v['ci'][1]:+.4f}]", format_p_value(v["p_value"]), str(v["n"])]
             for k, v in rows.items()]
    print(f"A: {args.a}\nB: {args.b}\n{TEST_NAMES[args.test]} over queries")
    print(text_table(header, table))
    return 0
