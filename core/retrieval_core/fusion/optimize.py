"""``optimize_fusion``: the fusion weights that score best on a qrels set, by grid search as ranx does.

Every weight vector on the grid ``{0, step, 2 step, ..., 1}^n`` whose weights sum to 1 is tried
(counted in integer multiples of ``step``, so no grid point is lost to rounding; ranx sums the
floats and drops those, e.g. ``(0.2, 0.7, 0.1)``, whose float sum is not exactly 1). Each candidate's
fused run is evaluated against the qrels with :func:`~retrieval_core.trec.evaluate_trec` (every qrels
query counts, 0 where the fused run has none: trec_eval ``-c``); the best mean wins, the last in grid
order (lexicographic, first weight slowest) among equals, as ranx's ``>=`` picks.

Example:
    >>> from retrieval_core.trec import qrels_from_dict, run_from_dict
    >>> qrels = qrels_from_dict({"q1": {"a": 1}, "q2": {"c": 1}})
    >>> good = run_from_dict({"q1": {"a": 2.0, "b": 1.0}, "q2": {"c": 2.0, "d": 1.0}})
    >>> bad = run_from_dict({"q1": {"a": 1.0, "b": 2.0}, "q2": {"c": 1.0, "d": 2.0}})
    >>> best, table = optimize_fusion(qrels, [good, bad], metric="ndcg@10", step=0.5)
    >>> best, table
    ((1.0, 0.0), {(0.0, 1.0): 0.6309297535714575, (0.5, 0.5): 0.6309297535714575, (1.0, 0.0): 1.0})
"""
from __future__ import annotations

from itertools import product
from typing import Dict, List, Optional, Sequence, Tuple

from ..trec.evaluate import evaluate_trec
from ..trec.files import Qrels, Run
from .align import check_runs
from .fuse import fuse
from .methods import check_method

__all__ = ["optimize_fusion", "weight_grid"]


def weight_grid(n_runs: int, step: float) -> List[Tuple[float, ...]]:
    """Every weight vector of ``n_runs`` multiples of ``step`` summing to 1, in lexicographic order;
    ``1 / step`` must be a whole number (to 1e-9)."""
    if not step > 0 or step > 1:
        raise ValueError(f"step must be in (0, 1]; got {step!r}")
    m = round(1 / step)
    if abs(m * step - 1) > 1e-9:
        raise ValueError(f"1 / step must be a whole number; got step={step!r}")
    return [tuple(i / m for i in c) for c in product(range(m + 1), repeat=n_runs) if sum(c) == m]


def optimize_fusion(qrels: Qrels, runs: Sequence[Run], method: str = "wsum", norm: Optional[str] = "min-max",
                    metric: str = "ndcg@100", step: float = 0.1
                    ) -> Tuple[Tuple[float, ...], Dict[Tuple[float, ...], float]]:
    """The best ``weights`` for ``fuse(runs, method, norm, weights)`` on ``qrels`` by ``metric`` (a name
    :func:`~retrieval_core.trec.evaluate_trec` knows: ``"ndcg@100"``, ``"map"``, ``"P_10"``...), and the
    table ``{weights: mean metric}`` of every candidate tried (module doc). Only ``"wsum"`` has weights."""
    method = check_method(method)
    if method != "wsum":
        raise ValueError(f"optimize_fusion searches the weights of method 'wsum'; got {method!r}")
    check_runs(runs)
    table: Dict[Tuple[float, ...], float] = {}
    best, best_score = None, float("-inf")
    for weights in weight_grid(len(runs), step):
        fused = fuse(runs, method=method, norm=norm, weights=weights)
        ev = evaluate_trec(qrels, fused, [metric], complete=True)
        score = next(iter(ev.summary().values()))
        table[weights] = score
        if score >= best_score:
            best, best_score = weights, score
    return best, table
