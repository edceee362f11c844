"""Rankings: the Ranking every metric reads, and its builders from scores (dense, binary, flat).

``ranking`` holds the :class:`Ranking` itself, ``tie_groups`` its tied groups,
``gains`` the scaled exponential gains and the limits on gains, ``topk`` the stable top-k selection,
``dense``, ``groups`` and ``flat`` the builders.

* :func:`~retrieval_core.ranking.dense.rank_dense` ranks a block of dense rows ``preds[B, N], target[B, N]``.
* :func:`~retrieval_core.ranking.groups.group_flat` groups the flat form ``(indexes, preds, target)`` by query,
  and :func:`~retrieval_core.ranking.groups.iter_flat_blocks` cuts it into padded dense blocks of similar-sized
  queries, so the flat path shares the dense builder and its scratch memory stays
  bounded (never a ``[Q, max group size]`` matrix).
* :func:`~retrieval_core.ranking.flat.sorted_flat_parts` is the flat path of devices where a host read is a
  synchronisation (``sizing.sync_free``): one sort puts every entry in its final
  place, and padded blocks are cut from it with a constant number of host reads.

Tie order ("stable"): higher score first, then lower candidate index (column, or
position of appearance in the flat form), the same on every device and block size.

How the first ``d`` candidates are selected (``select`` of :func:`~retrieval_core.ranking.dense.rank_dense`):
``"checked"`` tests each block for ties (a host read per test: free on CPU);
``"deferred"`` never reads: ties inside the top are always ordered, and rows whose
tie crosses the cut are flagged in ``Ranking.inexact`` for the caller to re-rank
with ``"exact"`` (a full stable sort) after its loop; ``"presorted"`` takes the
first ``d`` columns of rows already in rank order.
"""
from .gains import EXP_HEADROOM, GAIN_LIMIT
from .ranking import Ranking

__all__ = ["Ranking", "EXP_HEADROOM", "GAIN_LIMIT"]
