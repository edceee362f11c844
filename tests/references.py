"""Small shared helpers for the anchor tests: random data without ties, and the
conversions that external references (pytrec_eval, ranx, ...) need.

Import from a test module with ``tests/`` on ``sys.path`` (see the anchor tests).
"""
from __future__ import annotations

from typing import Dict, Sequence, Tuple

import torch
from torch import Tensor

__all__ = ["distinct_scores", "graded_gains", "make_dense", "DENSE_CASES", "dense_case", "make_graded",
           "GRADED_CASES", "graded_case", "check_against_anchor", "clusters", "to_trec", "qid", "did",
           "ours_per_query"]


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


def make_dense(n_queries, n_docs, seed, graded="int"):
    """Dense ``[Q, N]`` float32 scores without ties and gains (``graded="int"``: 0..3;
    otherwise floats in (0, 3), some below 1); every fourth query has no relevant item."""
    g = torch.Generator().manual_seed(seed)
    preds = distinct_scores((n_queries, n_docs), g)
    if graded == "int":
        target = graded_gains((n_queries, n_docs), g, p_relevant=0.25)
    else:  # float gains in (0, 3), some below 1
        level = torch.rand((n_queries, n_docs), generator=g, dtype=torch.float64) * 3
        target = torch.where(torch.rand((n_queries, n_docs), generator=g) < 0.3, level, torch.zeros_like(level))
    target[::4] = 0  # R = 0 queries
    return preds, target


# the dense cases the sklearn and ignite cross-checks share: name -> make_dense arguments
DENSE_CASES = {
    "q30_n5_int": (30, 5, 301, "int"),
    "q30_n40_int": (30, 40, 302, "int"),
    "q20_n60_float": (20, 60, 303, "float"),
}
_DENSE_CACHE: Dict[str, Tuple[Tensor, Tensor]] = {}


def dense_case(name: str) -> Tuple[Tensor, Tensor]:
    """``(preds, target)`` of ``DENSE_CASES[name]``, built once per process."""
    if name not in _DENSE_CACHE:
        _DENSE_CACHE[name] = make_dense(*DENSE_CASES[name])
    return _DENSE_CACHE[name]

def make_graded(n_queries: int, n_docs: int, seed: int):
    """Dense ``[Q, N]`` float32 scores without ties and int64 gains 0..3 (about 25% relevant);
    queries 0, 5, 10, ... have no relevant item."""
    g = torch.Generator().manual_seed(seed)
    preds = distinct_scores((n_queries, n_docs), g)
    target = graded_gains((n_queries, n_docs), g, p_relevant=0.25)
    target[::5] = 0  # queries with R = 0, always (rows 0, 5, 10, ...)
    target[1, -1] = 3  # and at least one with R > 0 whose relevant item is last-ranked often
    return preds, target


# the cases the trec_eval and ranx cross-checks share: name -> make_graded arguments (Q, N, seed);
# N = 5 and 30 put some k past the end of the list.
GRADED_CASES = {
    "q7_n5": (7, 5, 101),
    "q50_n30": (50, 30, 102),
    "q7_n200": (7, 200, 103),
    "q50_n200": (50, 200, 104),
}
_GRADED_CACHE: Dict[str, Tuple[Tensor, Tensor, Tensor]] = {}


def graded_case(name: str) -> Tuple[Tensor, Tensor, Tensor]:
    """``(preds, target, n_relevant)`` of ``GRADED_CASES[name]``, built once per process."""
    if name not in _GRADED_CACHE:
        preds, target = make_graded(*GRADED_CASES[name])
        _GRADED_CACHE[name] = (preds, target, (target > 0).sum(1))
    return _GRADED_CACHE[name]


def check_against_anchor(anchor: torch.Tensor, preds, target, key: str, n_relevant: torch.Tensor, atol=1e-6):
    """The comparison every anchor value goes through (the trec_eval and ranx cross-checks).

    R = 0: both anchors report 0 for such a query (when it is in the qrels); our metrics are
    undefined there. So the anchor equals ours under ``empty="zero"`` on every query, and ours
    under ``empty="skip"`` on the queries with R > 0 (NaN, i.e. skipped, on the others); its
    mean over R > 0 queries is our skip mean.
    """
    import retrieval_core

    skip = ours_per_query(preds, target, [key], empty="skip")[key]
    zero = ours_per_query(preds, target, [key], empty="zero")[key]
    has = n_relevant > 0
    assert has.any() and (~has).any(), "the data must have queries with and without relevant items"
    torch.testing.assert_close(skip[has], anchor[has], atol=atol, rtol=0, msg=lambda m: f"{key}: {m}")
    # R = 0: undefined for us (NaN = skipped), 0 for the anchor.
    assert torch.isnan(skip[~has]).all(), key
    assert (anchor[~has] == 0).all(), key
    torch.testing.assert_close(zero, anchor, atol=atol, rtol=0, msg=lambda m: f"{key} (empty='zero'): {m}")
    mean = retrieval_core.evaluate_scores(preds, target, [key], empty="skip")[key]
    torch.testing.assert_close(mean, anchor[has].mean(), atol=atol, rtol=0)


def clusters(n: int, dim: int, n_classes: int, seed: int, lone_labels: int = 0) -> Tuple[Tensor, Tensor]:
    """float32 points ``[n, dim]`` around ``n_classes`` random centres and their int64 labels;
    the first ``lone_labels`` points get labels no other point has."""
    g = torch.Generator().manual_seed(seed)
    labels = torch.randint(0, n_classes, (n,), generator=g)
    labels[:lone_labels] = n_classes + torch.arange(lone_labels)  # labels nobody else has
    centres = torch.randn(n_classes + lone_labels, dim, generator=g)
    return centres[labels] + 1.3 * torch.randn(n, dim, generator=g), labels


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
