"""Old flat path of the per-query kernels (:mod:`retrieval_core.metrics.kernels`), kept as re-exports."""
from .metrics.kernels import (  # noqa: F401
    Cutoff, Kernel, cut_length, value_at, nominal_k, hit_rate, precision, precision_adaptive,
    precision_capped, recall, f1, average_precision, average_precision_hits, reciprocal_rank, unscale, dcg,
    dcg_exp, ndcg, ndcg_exp, fall_out, acg, wap, partial_auroc, auroc, no_relevant, no_irrelevant,
    no_relevant_or_irrelevant, recall_at_fixed_precision,
)
