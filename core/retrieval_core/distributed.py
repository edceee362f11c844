"""Old flat path of :mod:`retrieval_core.parallel` (collectives and distributed evaluation), kept as re-exports.

Ranks may hold different numbers of rows, or none at all (a rank that saw no
batch): sizes are exchanged first, rows padded to the largest count, gathered and
trimmed, so the collective never sees unequal shapes and never hangs. Rows travel
as their raw bytes (``uint8``), which every backend can move, whatever the dtype
(gloo cannot move ``int16`` or ``uint16/32/64`` itself); dtype and values come
back exactly. Without an initialised process group everything is the identity.

:func:`evaluate_embeddings` divides an embedding evaluation between the ranks:
each evaluates its own queries (against the gathered gallery, or against every
rank's gallery shard with ``shard_gallery=True``) and only the per-query values
travel; every rank then aggregates the same values. :func:`evaluate_split` is
its form for state that every rank already holds whole (the adapters' gathered
states): each rank takes a contiguous share of the queries. :func:`agree` runs a
local step on every rank and raises the same error on every rank when it failed
on any, so no rank is left waiting in a later collective.
"""
from .parallel.agree import agree, agree_options, exchange_text
from .parallel.collectives import all_reduce_sum, gather_cat, gather_per_rank, rank_of, world_size
from .parallel.duplicates import ROW_TOL, ROW_TOL_16, drop_duplicates, row_rtol
from .parallel.evaluation import evaluate_embeddings, evaluate_split

__all__ = ["world_size", "gather_per_rank", "gather_cat", "all_reduce_sum", "drop_duplicates", "row_rtol", "ROW_TOL",
           "agree", "agree_options", "evaluate_embeddings", "evaluate_split"]
