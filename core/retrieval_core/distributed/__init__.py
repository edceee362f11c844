"""Work across torch.distributed ranks: collectives at the bottom, distributed evaluation on top.

``collectives``, ``duplicates``, ``agreement`` and ``agree`` need nothing of the
metrics (the adapters gather their states with them); ``shares``, ``sharded`` and
``evaluation`` divide an embedding evaluation between the ranks.

Ranks may hold different numbers of rows, or none at all (a rank that saw no
batch): sizes are exchanged first, rows padded to the largest count, gathered and
trimmed, so the collective never sees unequal shapes and never hangs. Rows travel
as their raw bytes (``uint8``), which every backend can move, whatever the dtype
(gloo cannot move ``int16`` or ``uint16/32/64`` itself); dtype and values come
back exactly. Without an initialised process group everything is the identity.

:func:`evaluate_embeddings_across_ranks` divides an embedding evaluation between
the ranks: each evaluates its own queries (against the gathered gallery, or
against every rank's gallery shard with ``shard_gallery=True``) and only the
per-query values travel; every rank then aggregates the same values (the
one-process function is :func:`retrieval_core.evaluate_embeddings`).
:func:`evaluate_split` is its form for state that every rank already holds whole
(the adapters' gathered states): each rank takes a contiguous share of the
queries. :func:`agree` runs a local step on every rank and raises the same error
on every rank when it failed on any, so no rank is left waiting in a later
collective.
"""
from .agree import agree, agree_options, exchange_text
from .collectives import all_reduce_sum, gather_cat, gather_per_rank, rank_of, world_size
from .duplicates import ROW_TOL, ROW_TOL_16, drop_duplicates, row_rtol
from .evaluation import evaluate_embeddings_across_ranks, evaluate_split

__all__ = ["world_size", "rank_of", "gather_per_rank", "gather_cat", "all_reduce_sum", "drop_duplicates", "row_rtol",
           "ROW_TOL", "ROW_TOL_16", "agree", "agree_options", "exchange_text", "evaluate_embeddings_across_ranks",
           "evaluate_split"]
