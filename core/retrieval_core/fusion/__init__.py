"""Run fusion (hybrid search): reciprocal rank fusion, CombSUM/MNZ/ANZ/MAX/MIN/MED and weighted sum of
:class:`~retrieval_core.trec.Run` objects, with ranx's normalisations, on the runs' device; and
``optimize_fusion``, the weights' grid search over a qrels set. See docs/fusion.md.

Example:
    >>> from retrieval_core.fusion import fuse
    >>> from retrieval_core.trec import run_from_dict
    >>> a = run_from_dict({"q1": {"d1": 3.0, "d2": 1.0}})
    >>> b = run_from_dict({"q1": {"d2": 5.0, "d3": 4.0}, "q2": {"d1": 1.0}})
    >>> fused = fuse([a, b], method="sum", norm="min-max")
    >>> fused.query_ids, fused.to_dict()
    (('q1', 'q2'), {'q1': {'d2': 1.0, 'd1': 1.0, 'd3': 0.0}, 'q2': {'d1': 0.0}})
"""
from .align import AlignedRuns, align_runs
from .fuse import fuse
from .methods import METHODS
from .normalize import NORMS, normalize
from .optimize import optimize_fusion, weight_grid

__all__ = ["METHODS", "NORMS", "AlignedRuns", "align_runs", "fuse", "normalize", "optimize_fusion", "weight_grid"]
