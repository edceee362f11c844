"""Exact k-NN building blocks for embedding mode: similarities, gains, exclusion.

Every function works on one query chunk against the whole gallery (``[c, G]``),
so the evaluator never holds a ``[Q, G]`` matrix. Distances become similarities
(closer = larger); ties are left to the stable Ranking builder. ``frames``:
similarities and distances; ``euclidean``: the exact Euclidean order; ``labels``:
gains, eligibility, exclusion; ``faiss_search``: the optional faiss backend.
"""
from .euclidean import EuclideanOrder
from .faiss_search import FaissSearch
from .frames import (
    DISTANCE_ERROR, DISTANCES, FUSED_MAX_DEPTH, MIN_ROWS, Distance, Frame, Relevance, distances, dot_apply, dot_factors,
    dot_scale, pow2_factor, prepare, similarity,
)
from .labels import Checks, Exclusion, count_equal, eligible, gains, label_counts

__all__ = [
    "DISTANCES", "DISTANCE_ERROR", "FUSED_MAX_DEPTH", "MIN_ROWS", "Distance", "Relevance", "Frame", "EuclideanOrder",
    "FaissSearch", "Checks", "Exclusion", "prepare", "pow2_factor", "dot_scale", "dot_factors", "dot_apply",
    "similarity", "distances", "gains", "eligible", "count_equal", "label_counts",
]
