"""One specification per metric: every fact about a metric, in one line of :data:`REGISTRY`.

A :class:`MetricSpec` holds the metric's kernel and its ``ties="expected"`` kernel, the
forms its keys take (``@k``, ``@r``, a float parameter ``@x``/``@p``, the bare name), its
bounds and direction, its empty-query rule, what the Ranking must hold for it (the ideal
gains, every candidate of the collection), whether its per-query values are 0 or 1, and
its names in trec_eval, ir_measures, torchmetrics, PML and OML. Keys are parsed against
this table in :mod:`retrieval_core.metrics.keys` (where the depth a key needs is computed);
every other module reads these facts from here.

Adding a per-query metric: a kernel in :mod:`~retrieval_core.metrics.kernels` (and its
``ties="expected"`` form in :mod:`~retrieval_core.metrics.tie_kernels` where one exists),
one line below, and its tests (docs/architecture.md, "Adding a metric").

Example:
    >>> spec = REGISTRY["rbp"]
    >>> sorted(spec.cutoffs), spec.param_name, spec.param_range, spec.bounded, spec.lower_is_better
    (['x'], 'p', (0.0, 1.0), True, False)
    >>> REGISTRY["fall_out"].needs_all_candidates, REGISTRY["fall_out"].lower_is_better
    (True, True)
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Dict, NamedTuple, Optional, Tuple

from torch import Tensor

from ..ranking.ranking import Ranking
from . import items as I
from . import kernels as K
from . import one_relevant as O
from . import set_level
from .direction import LOWER_IS_BETTER
from . import tie_kernels as T

__all__ = ["AT_K", "AT_R", "WHOLE", "AT_X", "Names", "MetricSpec", "REGISTRY", "ALIASES"]

# The forms a key may take: "@k" (a positive int), "@r" (each query's R), the whole list,
# and "@x" a float parameter (named by the spec's param_name: fnmr@0.1, rbp@0.8)
AT_K, AT_R, WHOLE, AT_X = "k", "r", "whole", "x"


class Names(NamedTuple):
    """A metric's names elsewhere (None: that library has none). ``trec_eval``: (its whole-list
    measure, its measure with cutoffs), e.g. ``("map", "map_cut")``; the others are the
    names their users know (for docs and for the TREC measure parser)."""

    trec_eval: Tuple[Optional[str], Optional[str]] = (None, None)
    ir_measures: Optional[str] = None
    torchmetrics: Optional[str] = None
    pml: Optional[str] = None
    oml: Optional[str] = None
    torch_geometric: Optional[str] = None
    recbole: Optional[str] = None
    recommenders: Optional[str] = None


_NO_EXPECTED_AT_K = ("has no closed form under ties='expected' (how many relevant and non-relevant candidates "
                     "the top k holds depends on the order); use auroc (whole list), or ties='stable', "
                     "'optimistic' or 'pessimistic'")
_NO_EXPECTED_ERR = ("has no closed form under ties='expected' (each tied candidate's own gain enters the product "
                    "over the ranks above it, and a tied group keeps only its summed gains); use ties='stable', "
                    "'optimistic' or 'pessimistic'")


@dataclass(frozen=True)
class MetricSpec:
    """Every fact about one metric name.

    ``plain`` is what the bare name means (``WHOLE``: the whole list, ``AT_R``: cut at R,
    None: a cutoff is required); ``cutoffs`` every form the name takes. A per-query metric
    has a ``kernel`` (``f(ranking, k)``, or ``f(ranking, k, x)`` with a float parameter);
    ``expected`` is its ``ties="expected"`` kernel, for the forms ``expected_forms`` (None:
    every form), the other forms refused with ``no_expected`` (after the key). A set-level
    metric has no kernel but a ``set_metric`` (:mod:`retrieval_core.metrics.set_level`).
    The depth a key ranks to follows from its form alone (:func:`retrieval_core.metrics.keys.depth_needed`):
    ``@k`` ranks to k, ``@r`` to each R, the bare whole-list name and a per-query float
    parameter to the whole list.
    """

    name: str
    kernel: Optional[K.Kernel]
    cutoffs: frozenset
    plain: Optional[str] = None
    expected: Optional[Callable] = None
    expected_forms: Optional[frozenset] = None
    no_expected: str = ""
    # the float parameter "@x": its placeholder in messages, its open interval (None: any finite
    # number) and the example that a malformed one's message gives
    param_name: str = "x"
    param_range: Optional[Tuple[float, float]] = None
    param_example: float = 0.1
    needs_ideal: bool = False
    # needs every candidate of the collection (a ranked list cut from it, with R given, lacks them)
    needs_all_candidates: bool = False
    empty: Callable[[Ranking], Tensor] = K.no_relevant
    # graded: evaluate_trec gives it the judged gains (the DCG family, err), binary relevance otherwise
    trec_gains: bool = False
    # per-query values lie in [0, 1] (erc: reads 1 - value as an error), and higher is better
    bounded: bool = True
    set_metric: Optional[set_level.SetMetric] = None
    # per-query values are 0 or 1 at every cutoff (binary) or at k = 1 (binary_at_one):
    # what ci_method="beta" accepts
    binary: bool = False
    # the value at k reads the gains of the first k as a set only (hits@k): the order within
    # them may stay unrepaired (search.EuclideanOrder.top's cuts)
    order_free: bool = False
    binary_at_one: bool = False
    names: Names = Names()
    # a beyond-accuracy metric of top-k lists (evaluate_topk only): read from the recommended
    # items' ids, per user (item_kernel: f(lists, k) -> [U]) or set-level (set_metric), and the
    # item data it needs (the evaluate_topk arguments named in check_topk_keys)
    items: bool = False
    item_kernel: Optional[Callable] = None
    item_data: Tuple[str, ...] = ()
    # the value of one relevant item at rank r of n, f(ranks, k, n) (k = inf: the whole list;
    # metrics.one_relevant), for the forms at_rank_forms (None: every form but @x): what the
    # sampled-metric corrections estimate (docs/metrics.md, "Sampled protocols")
    at_rank: Optional[Callable] = None
    at_rank_forms: Optional[frozenset] = None

    @property
    def lower_is_better(self) -> bool:
        """Whether a lower value is better (:mod:`~retrieval_core.metrics.direction`)."""
        return self.name in LOWER_IS_BETTER

    @property
    def per_query(self) -> bool:
        return self.kernel is not None

    @property
    def empty_means_no_relevant(self) -> bool:
        """Its undefined queries are those without a relevant item (the note of the command line)."""
        return self.empty in (K.no_relevant, K.no_relevant_or_candidate)

    def has_expected(self, form: str) -> bool:
        """Whether ``ties="expected"`` has a value for keys of this form."""
        return self.expected is not None and (self.expected_forms is None or form in self.expected_forms)


def _spec(name, kernel, cutoffs, plain=None, **facts) -> MetricSpec:
    forms = frozenset(cutoffs) | ({plain} if plain else frozenset())
    return MetricSpec(name, kernel, forms, plain, **facts)


def _set_spec(name, set_metric, cutoffs, plain=None, **facts) -> MetricSpec:
    forms = frozenset(cutoffs) | ({plain} if plain else frozenset())
    return MetricSpec(name, None, forms, plain, set_metric=set_metric, **facts)


def _item_spec(name, item_kernel, **facts) -> MetricSpec:
    """A per-user beyond-accuracy metric of top-k lists (``@k`` only)."""
    return MetricSpec(name, None, frozenset({AT_K}), items=True, item_kernel=item_kernel, empty=K.no_candidate,
                      **facts)


def _item_set_spec(name, set_metric, **facts) -> MetricSpec:
    """A set-level beyond-accuracy metric of top-k lists (``@k`` only)."""
    return MetricSpec(name, None, frozenset({AT_K}), set_metric=set_metric, items=True, **facts)


REGISTRY: Dict[str, MetricSpec] = {
    s.name: s
    for s in [
        _spec("hit_rate", K.hit_rate, {AT_K}, expected=T.hit_rate, binary=True, order_free=True,
              at_rank=O.hit,
              names=Names((None, "success"), "Success", "RetrievalHitRate", "precision_at_1", "cmc")),
        _spec("precision", K.precision, {AT_K, AT_R}, expected=T.precision, binary_at_one=True, order_free=True,
              at_rank=O.precision,
              names=Names((None, "P"), "P", "RetrievalPrecision")),
        _spec("precision_adaptive", K.precision_adaptive, {AT_K}, expected=T.precision_adaptive,
              empty=K.no_relevant_or_candidate, binary_at_one=True, order_free=True,
              names=Names(torchmetrics="RetrievalPrecision(adaptive_k=True)")),
        _spec("precision_capped", K.precision_capped, {AT_K}, expected=T.precision_capped, binary_at_one=True,
              order_free=True,
              names=Names(oml="precision")),
        _spec("recall", K.recall, {AT_K, AT_R}, expected=T.recall, order_free=True,
              at_rank=O.hit,
              names=Names((None, "recall"), "R", "RetrievalRecall")),
        _spec("f1", K.f1, {AT_K, AT_R}, expected=T.f1, order_free=True, at_rank=O.f1),
        _spec("map", K.average_precision, {AT_K, AT_R}, plain=WHOLE, expected=T.average_precision,
              at_rank=O.reciprocal,
              names=Names(("map", "map_cut"), "AP", pml="mean_average_precision")),
        _spec("map_capped", K.average_precision_capped, {AT_K}, expected=T.average_precision_capped,
              at_rank=O.reciprocal,
              names=Names(torch_geometric="LinkPredMAP")),
        _spec("map_hits", K.average_precision_hits, {AT_K}, expected=T.average_precision_hits,
              names=Names(torchmetrics="RetrievalMAP", oml="map")),
        _spec("r_precision", K.precision, set(), plain=AT_R, expected=T.precision,
              names=Names(("Rprec", None), "Rprec", "RetrievalRPrecision", "r_precision")),
        _spec("mrr", K.reciprocal_rank, {AT_K}, plain=WHOLE, expected=T.reciprocal_rank, binary_at_one=True,
              at_rank=O.reciprocal,
              names=Names(("recip_rank", None), "RR", "RetrievalMRR", "mean_reciprocal_rank")),
        _spec("ndcg", K.ndcg, {AT_K, AT_R}, plain=WHOLE, expected=T.ndcg, needs_ideal=True, trec_gains=True,
              at_rank=O.ndcg,
              names=Names(("ndcg", "ndcg_cut"), "nDCG", "RetrievalNormalizedDCG")),
        _spec("ndcg_exp", K.ndcg_exp, {AT_K, AT_R}, plain=WHOLE, expected=T.ndcg_exp, needs_ideal=True,
              trec_gains=True,
              at_rank=O.ndcg,
              names=Names(ir_measures="nDCG(dcg='exp-log2')")),
        _spec("dcg", K.dcg, {AT_K}, plain=WHOLE, expected=T.dcg, bounded=False, trec_gains=True, names=Names(("dcg", None))),
        _spec("dcg_exp", K.dcg_exp, {AT_K}, plain=WHOLE, expected=T.dcg_exp, bounded=False, trec_gains=True),
        _spec("fall_out", K.fall_out, {AT_K}, expected=T.fall_out, empty=K.no_irrelevant,
              needs_all_candidates=True, names=Names(torchmetrics="RetrievalFallOut")),
        _spec("acg", K.acg, {AT_K}, expected=T.acg, bounded=False),
        _spec("wap", K.wap, {AT_K}, expected=T.wap, bounded=False),
        _spec("auroc", K.auroc, {AT_K}, plain=WHOLE, expected=T.auroc, expected_forms=frozenset({WHOLE}),
              no_expected=_NO_EXPECTED_AT_K, empty=K.no_relevant_or_irrelevant, needs_all_candidates=True,
              at_rank=O.area_under_roc, at_rank_forms=frozenset({WHOLE}),
              names=Names(torchmetrics="RetrievalAUROC")),
        _spec("rbp", K.rbp, {AT_X}, expected=T.rbp, param_name="p", param_range=(0.0, 1.0), param_example=0.8,
              names=Names(ir_measures="RBP(p=p)")),
        _spec("err", K.err, {AT_K}, plain=WHOLE, no_expected=_NO_EXPECTED_ERR, needs_ideal=True, trec_gains=True),
        # embedding-set metrics (docs/metrics.md), evaluated by evaluate_embeddings
        _set_spec("fnmr", set_level.fnmr_values, {AT_X},
                  names=Names(oml="calc_fnmr_at_fmr")),
        _set_spec("pcf", set_level.pcf_values, {AT_X}, names=Names(oml="calc_pcf")),
        _set_spec("nmi", set_level.nmi_values, set(), plain=WHOLE, names=Names(pml="NMI")),
        _set_spec("ami", set_level.ami_values, set(), plain=WHOLE, bounded=False, names=Names(pml="AMI")),
        # beyond-accuracy metrics of top-k lists (docs/metrics.md), evaluated by evaluate_topk
        _item_spec("popularity", I.popularity, item_data=("item_popularity",), bounded=False,
                   names=Names(torch_geometric="LinkPredAveragePopularity")),
        _item_spec("novelty", I.novelty, item_data=("item_popularity > 0",), bounded=False),
        _item_spec("tail", I.tail, item_data=("item_popularity",), names=Names(recbole="TailPercentage")),
        _item_spec("serendipity", I.serendipity, item_data=("history", "item_categories or item_embeddings"),
                   names=Names(recommenders="serendipity")),
        _item_spec("diversity", I.diversity, item_data=("item_categories or item_embeddings",),
                   names=Names(torch_geometric="LinkPredDiversity")),
        _item_set_spec("coverage", I.coverage_values, item_data=("n_items",),
                       names=Names(torch_geometric="LinkPredCoverage")),
        _item_set_spec("gini", I.gini_values, item_data=("n_items",),
                       names=Names(recbole="GiniIndex")),
        _item_set_spec("entropy", I.entropy_values, bounded=False),
        _item_set_spec("personalization", I.personalization_values,
                       names=Names(torch_geometric="LinkPredPersonalization")),
    ]
}
ALIASES: Dict[str, str] = {"cmc": "hit_rate"}
