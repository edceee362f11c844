"""Old flat path of the Ranking builders (now in :mod:`retrieval_core.ranking`), kept as re-exports.

Builders of :class:`Ranking` from scores.

* :func:`rank_dense` ranks a block of dense rows ``preds[B, N], target[B, N]``.
* :func:`group_flat` groups the flat form ``(indexes, preds, target)`` by query,
  and :func:`iter_flat_blocks` cuts it into padded dense blocks of similar-sized
  queries, so the flat path shares the dense builder and its scratch memory stays
  bounded (never a ``[Q, max group size]`` matrix).
* :func:`sorted_flat_parts` is the flat path of devices where a host read is a
  synchronisation (``sizing.sync_free``): one sort puts every entry in its final
  place, and padded blocks are cut from it with a constant number of host reads.

Tie order ("stable"): higher score first, then lower candidate index (column, or
position of appearance in the flat form), the same on every device and block size.

How the first ``d`` candidates are selected (``select`` of :func:`rank_dense`):
``"checked"`` tests each block for ties (a host read per test: free on CPU);
``"deferred"`` never reads: ties inside the top are always ordered, and rows whose
tie crosses the cut are flagged in ``Ranking.inexact`` for the caller to re-rank
with ``"exact"`` (a full stable sort) after its loop; ``"presorted"`` takes the
first ``d`` columns of rows already in rank order.
"""
from .ranking.dense import rank_binary, rank_dense
from .ranking.flat import rank_flat, sorted_flat_parts
from .ranking.groups import Groups, group_flat, iter_flat_blocks, iter_groups
from .ranking.topk import BLOCK_ELEMENTS, DEEP_BLOCK_DIVISOR, SELECTS, row_blocks

__all__ = [
    "rank_dense", "rank_binary", "rank_flat", "group_flat", "iter_groups", "iter_flat_blocks", "sorted_flat_parts",
    "row_blocks", "Groups", "BLOCK_ELEMENTS", "SELECTS",
]
