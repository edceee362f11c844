"""Random runs for the fusion tests: several runs with partially overlapping queries and documents, a
query in one run only, a run with one document per query, negative scores, and ties on demand.

Also a reference in plain Python, written from the definitions (docs/fusion.md), one (query, doc)
pair at a time: what the vectorised code must equal."""
from __future__ import annotations

import math
import random
from typing import Dict, List, Optional

Runs = List[Dict[str, Dict[str, float]]]


def random_runs(seed: int, *, ties: bool, n_runs: int = 4, n_queries: int = 6, n_docs: int = 25) -> Runs:
    """``n_runs`` dict runs; ``ties``: scores from a few integers (ties within and across runs), else
    continuous. Query ``q0`` is in run 0 only; the last run holds one doc per query."""
    rng = random.Random(seed)
    runs: Runs = []
    for r in range(n_runs):
        run: Dict[str, Dict[str, float]] = {}
        for q in range(n_queries):
            if (q == 0 and r > 0) or (q > 0 and rng.random() < 0.2):
                continue
            n = 1 if r == n_runs - 1 else rng.randint(1, min(12, n_docs))
            docs = rng.sample(range(n_docs), n)
            score = (lambda: float(rng.randint(-3, 3))) if ties else (lambda: rng.gauss(0, 5))
            run[f"q{q}"] = {f"d{d}": score() for d in docs}
        runs.append(run)
    return runs


def _ranked(results: Dict[str, float]) -> List[str]:
    """Docs in trec_eval's order: score descending, docid descending."""
    by_doc = sorted(results, key=lambda d: d.encode(), reverse=True)
    return sorted(by_doc, key=lambda d: -results[d])


def ref_normalize(results: Dict[str, float], norm: Optional[str]) -> Dict[str, float]:
    s = list(results.values())
    n = len(s)
    if norm is None:
        return dict(results)
    if norm == "rank":
        return {d: 1 - i / n for i, d in enumerate(_ranked(results))}
    if norm == "zmuv":
        mean = sum(s) / n
        std = math.sqrt(sum((x - mean) ** 2 for x in s) / n)
        return {d: (x - mean) / max(std, 1e-9) for d, x in results.items()}
    if norm == "max":
        return {d: x / max(max(s), 1e-9) for d, x in results.items()}
    if norm == "min-max":
        return {d: (x - min(s)) / max(max(s) - min(s), 1e-9) for d, x in results.items()}
    return {d: (x - min(s)) / max(sum(s) - min(s) * n, 1e-9) for d, x in results.items()}  # sum


def ref_fuse(runs: Runs, method: str, norm: Optional[str], weights=None, k: float = 60) -> Dict[str, Dict[str, float]]:
    """The fused ``{qid: {docid: score}}``, pair by pair from the definitions."""
    out: Dict[str, Dict[str, float]] = {}
    for q in sorted({q for run in runs for q in run}):
        per_run = [run.get(q, {}) for run in runs]
        if method == "rrf":
            normed = [{d: 1 / (k + i + 1) for i, d in enumerate(_ranked(r))} for r in per_run]
        else:
            normed = [ref_normalize(r, norm) if r else {} for r in per_run]
        out[q] = {}
        for d in {d for r in normed for d in r}:
            held = [r[d] for r in normed if d in r]
            held_sorted = sorted(held)
            m = len(held)
            out[q][d] = {"rrf": sum(held), "sum": sum(held), "mnz": sum(held) * m, "anz": sum(held) / m,
                         "max": max(held), "min": min(held),
                         "med": (held_sorted[(m - 1) // 2] + held_sorted[m // 2]) / 2,
                         "wsum": sum(w * r.get(d, 0.0) for w, r in zip(weights or [1 / len(runs)] * len(runs),
                                                                        normed))}[method]
    return out


def assert_close(got: Dict[str, Dict[str, float]], want: Dict[str, Dict[str, float]], tol: float = 1e-9) -> None:
    assert set(got) == set(want), (sorted(got), sorted(want))
    for q in want:
        assert set(got[q]) == set(want[q]), q
        for d, v in want[q].items():
            assert abs(got[q][d] - v) <= tol * max(1.0, abs(v)), (q, d, got[q][d], v)
