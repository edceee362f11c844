"""Small shared helpers for the anchor tests: random data without ties, and the
conversions that external references (pytrec_eval, ranx, ...) need.

Import from a test module with ``tests/`` on ``sys.path`` (see the anchor tests).
"""
from __future__ import annotations

from typing import Dict, Sequence, Tuple

import torch
from torch import Tensor

__all__ = ["distinct_scores", "graded_gains", "to_trec", "qid", "did", "ours_per_query"]


def distinct_scores(shape: Tuple[int, ...], generator: torch.Generator) -> Tensor:
    """float32 scores in (0, 1), continuous and pairwise distinct along the last dim.

    Entry j of a row lies in its own bin ``[(p_j + 0.1) / n, (p_j + 0.9) / n]`` for a
    random permutation p, so no two are within 0.2 / n: no ties even after the
    float32 conversion that torchmetrics applies, and strictly positive (torchmetrics
    zeroes targets whose score is <= 0 in some metrics).
    """
    n = shape[-1]
    perm = torch.rand(shape, generator=generator).argsort(dim=-1)
    jitter = 0.1 + 0.8 * torch.rand(shape, generator=generator, dtype=torch.float64)
    return ((perm.to(torch.float64) + jitter) / n).to(torch.float32)


def graded_gains(
    shape: Tuple[int, ...], generator: torch.Generator, p_relevant: float = 0.25, max_gain: int = 3
) -> Tensor:
    """int64 gains: 0 with probability 1 - p_relevant, else uniform in 1..max_gain."""
    relevant = torch.rand(shape, generator=generator) < p_relevant
    level = torch.randint(1, max_gain + 1, shape, generator=generator)
    return torch.where(relevant, level, torch.zeros_like(level))


def qid(i: int) -> str:
    """Query id string whose lexical order is the row order."""
    return f"q{i:05d}"


def did(j: int) -> str:
    """Document id string whose lexical order is the column order."""
    return f"d{j:05d}"


def to_trec(preds: Tensor, target: Tensor) -> Tuple[Dict[str, Dict[str, int]], Dict[str, Dict[str, float]]]:
    """Dense ``[Q, N]`` scores and gains as TREC-style ``(qrels, run)`` dicts.

    Every candidate is judged (gain 0 included), so each query's qrels hold all of
    its candidates and R counts the same documents as ours.
    """
    p, t = preds.tolist(), target.tolist()
    qrels = {qid(i): {did(j): int(g) for j, g in enumerate(row)} for i, row in enumerate(t)}
    run = {qid(i): {did(j): float(s) for j, s in enumerate(row)} for i, row in enumerate(p)}
    return qrels, run


def ours_per_query(preds: Tensor, target: Tensor, keys: Sequence[str], **kwargs) -> Dict[str, Tensor]:
    """Our per-query values (``reduce="none"``) as float64 tensors, one per key."""
    import retrieval_core

    out = retrieval_core.evaluate_scores(preds, target, list(keys), reduce="none", **kwargs)
    return {k: v.to(torch.float64) for k, v in out.items()}
