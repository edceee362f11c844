"""Old flat path of the tie-aware kernels (:mod:`retrieval_core.metrics.tie_kernels`) and
tie groups, kept as re-exports.

Tie-aware metric values: ``ties="expected"`` in closed form.

Under ``ties="expected"`` each per-query value is the mean of the metric over
every ordering of the candidates that share a score, all orderings equally
likely (McSherry and Najork, 2008). Nothing is sampled or enumerated: a tied
group of ``m`` candidates holding ``h`` relevant ones (gain > 0) and gain ``G``
occupies ranks ``s+1 .. s+m``, each of its candidates is equally likely at each
of those ranks, and every kernel below is a sum over ranks of such group-level
expectations (see docs/metrics.md, "Tie modes", for the derivations). Everything
is vectorised over ``[Q, d]``: no loop over queries, groups or orderings.

Groups are runs of equal scores in ``Ranking.scores`` (padding forms its own
runs); the group that reaches the last rank ``d`` of a partial Ranking extends
past it by ``Ranking.tie_count`` candidates with summed gain ``tie_gain``,
``tie_hits`` relevant ones and summed exponential gain ``tie_exp_gain``.

``"optimistic"`` and ``"pessimistic"`` need no formulas: the builders order each
tied group by gain (highest first, or last) and the stable kernels apply.
"""
from .metrics.tie_kernels import EXPECTED_KERNELS, expected_kernel
from .ranking.tie_groups import TieGroups

__all__ = ["TieGroups", "expected_kernel", "EXPECTED_KERNELS"]
