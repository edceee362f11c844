"""One registry of metric keys: ``name@k``, ``name@r``, ``name`` (whole list).

Keys are parsed once (cached) into :class:`MetricKey` objects that carry the
kernel, its cutoff and what the Ranking must provide for it.
"""
from __future__ import annotations

import difflib
import math
import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Callable, Dict, Iterable, Optional, Tuple, Union

from torch import Tensor

from ..ranking.ranking import Ranking
from . import kernels as K
from . import set_level
from .tie_kernels import expected_kernel

__all__ = [
    "MetricSpec", "MetricKey", "REGISTRY", "ALIASES", "parse_metrics", "metric_key", "known_metrics", "did_you_mean",
]

# Cutoff forms a key may take; AT_X is a float parameter (set-level metrics).
AT_K, AT_R, WHOLE, AT_X = "k", "r", "whole", "x"


@dataclass(frozen=True)
class MetricSpec:
    """A metric name: its kernel, the cutoff forms it accepts, and its empty-query rule.

    ``plain`` is what the bare name means (``WHOLE``: the whole list, ``AT_R``:
    cut at R, None: a cutoff is required). Set-level metrics have no ``kernel`` but a
    ``set_metric`` (see :mod:`retrieval_core.metrics.set_level`), computed once per
    evaluation of embeddings, not per query.
    """

    name: str
    kernel: Optional[K.Kernel]
    cutoffs: frozenset
    plain: Optional[str] = None
    needs_ideal: bool = False
    empty: Callable[[Ranking], Tensor] = K.no_relevant
    set_metric: Optional[set_level.SetMetric] = None
    # per-query values are 0 or 1 at every cutoff (binary) or at k = 1 (binary_at_one):
    # what ci_method="beta" accepts
    binary: bool = False
    binary_at_one: bool = False

    @property
    def per_query(self) -> bool:
        return self.kernel is not None


def _spec(name, kernel, cutoffs, plain=None, needs_ideal=False, empty=K.no_relevant, binary=False,
          binary_at_one=False):
    forms = frozenset(cutoffs) | ({plain} if plain else frozenset())
    return MetricSpec(name, kernel, forms, plain, needs_ideal, empty, binary=binary, binary_at_one=binary_at_one)


def _set_spec(name, set_metric, cutoffs, plain=None):
    forms = frozenset(cutoffs) | ({plain} if plain else frozenset())
    return MetricSpec(name, None, forms, plain, set_metric=set_metric)


REGISTRY: Dict[str, MetricSpec] = {
    s.name: s
    for s in [
        _spec("hit_rate", K.hit_rate, {AT_K}, binary=True),
        _spec("precision", K.precision, {AT_K, AT_R}, binary_at_one=True),
        _spec("precision_adaptive", K.precision_adaptive, {AT_K}, empty=K.no_relevant_or_candidate,
              binary_at_one=True),
        _spec("precision_capped", K.precision_capped, {AT_K}, binary_at_one=True),
        _spec("recall", K.recall, {AT_K, AT_R}),
        _spec("f1", K.f1, {AT_K, AT_R}),
        _spec("map", K.average_precision, {AT_K, AT_R}, plain=WHOLE),
        _spec("map_hits", K.average_precision_hits, {AT_K}),
        _spec("r_precision", K.precision, set(), plain=AT_R),
        _spec("mrr", K.reciprocal_rank, {AT_K}, plain=WHOLE, binary_at_one=True),
        _spec("ndcg", K.ndcg, {AT_K, AT_R}, plain=WHOLE, needs_ideal=True),
        _spec("ndcg_exp", K.ndcg_exp, {AT_K, AT_R}, plain=WHOLE, needs_ideal=True),
        _spec("dcg", K.dcg, {AT_K}, plain=WHOLE),
        _spec("dcg_exp", K.dcg_exp, {AT_K}, plain=WHOLE),
        _spec("fall_out", K.fall_out, {AT_K}, empty=K.no_irrelevant),
        _spec("acg", K.acg, {AT_K}),
        _spec("wap", K.wap, {AT_K}),
        _spec("auroc", K.auroc, {AT_K}, plain=WHOLE, empty=K.no_relevant_or_irrelevant),
        # embedding-set metrics (docs/metrics.md), evaluated by evaluate_embeddings
        _set_spec("fnmr", set_level.fnmr_values, {AT_X}),
        _set_spec("pcf", set_level.pcf_values, {AT_X}),
        _set_spec("nmi", set_level.nmi_values, set(), plain=WHOLE),
        _set_spec("ami", set_level.ami_values, set(), plain=WHOLE),
    ]
}
ALIASES: Dict[str, str] = {"cmc": "hit_rate"}

# Cutoffs and parameters are plain ASCII: int() and float() also take other
# Unicode digits ("１０", "٣") and surrounding whitespace, which would make
# distinct keys mean the same thing.
_ASCII_INT = re.compile(r"-?[0-9]+")
INT64_MAX = 2**63 - 1  # the largest cutoff: an int64 (a tensor holds it)
_ASCII_FLOAT = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")


@dataclass(frozen=True)
class MetricKey:
    """A parsed key. ``cutoff`` is a positive int, ``"r"``, None (whole list), or the
    float parameter of a set-level metric."""

    key: str
    spec: MetricSpec
    cutoff: Union[int, str, float, None]
    # "erc", "conf", "spearman" or "kendall" for a confidence key "<kind>:<inner key>"
    # (spec and cutoff are then the inner key's: the per-query values it reduces)
    confidence: Optional[str] = None

    @property
    def inner(self) -> str:
        """The per-query key a confidence key reduces (the key itself otherwise)."""
        return self.key.partition(":")[2] if self.confidence else self.key

    @property
    def binary(self) -> bool:
        """Per-query values are 0 or 1 (hit_rate@k, precision@1, mrr@1...): ci_method="beta" applies
        (never to a confidence key: its value is not a mean of per-query values)."""
        if self.confidence:
            return False
        return self.spec.binary or (self.spec.binary_at_one and self.cutoff == 1)

    def __call__(self, ranking: Ranking) -> Tensor:
        k = ranking.n_relevant if self.cutoff == AT_R else self.cutoff
        if ranking.ties == "expected":
            return expected_kernel(self.spec.kernel)(ranking, k)
        return self.spec.kernel(ranking, k)


def known_metrics() -> str:
    """Human-readable list of the accepted keys, for error messages."""
    parts = []
    for name in sorted(list(REGISTRY) + list(ALIASES)):
        spec = REGISTRY[ALIASES.get(name, name)]
        forms = []
        if spec.plain:
            forms.append(name)
        if AT_K in spec.cutoffs:
            forms.append(f"{name}@k")
        if AT_R in spec.cutoffs and spec.plain != AT_R:
            forms.append(f"{name}@r")
        if AT_X in spec.cutoffs:
            forms.append(f"{name}@x")
        parts.extend(forms)
    parts.extend(f"{kind}:<key>" for kind in CONFIDENCE_KINDS)
    return ", ".join(parts)


CONFIDENCE_KINDS = ("erc", "conf", "spearman", "kendall")  # confidence keys "<kind>:<key>" (confidence.py)
# keys "<kind>:<key>" whose values can be read as 1 - error (erc): bounded in [0, 1], and
# higher is better (1 - fall-out is no error rate: fall-out itself is one)
_UNBOUNDED = frozenset({"dcg", "dcg_exp", "acg", "wap"})
_LOWER_IS_BETTER = frozenset({"fall_out"})


def _parse_confidence(key: str, kind: str, inner_key: str) -> MetricKey:
    """``"<kind>:<inner>"``: the inner per-query key, tagged with the confidence kind."""
    if ":" in inner_key:
        raise ValueError(f"confidence keys take a plain per-query key after '{kind}:', e.g. '{kind}:cmc@1'; "
                         f"got {key!r}")
    inner = _parse_one(inner_key)
    if not inner.spec.per_query:
        raise ValueError(f"{key!r}: confidence keys reduce per-query values; {inner.spec.name!r} is an "
                         "embedding-set metric (one value per evaluation)")
    if kind == "erc" and inner.spec.name in _UNBOUNDED:
        raise ValueError(f"{key!r}: erc: reads 1 - value as the error of a query and needs a metric within "
                         f"[0, 1]; {inner.spec.name!r} is unbounded (use spearman:/kendall:/conf: instead)")
    if kind == "erc" and inner.spec.name in _LOWER_IS_BETTER:
        raise ValueError(f"{key!r}: erc: reads 1 - value as the error of a query, for metrics where higher is "
                         f"better; {inner.spec.name!r} is lower-is-better, so 1 - value is no error "
                         "(use spearman:/kendall:/conf: instead)")
    return MetricKey(key, inner.spec, inner.cutoff, kind)


def did_you_mean(key: str) -> str:
    """``"did you mean ndcg@10? "`` for a key whose name is close to known ones (difflib), else ``""``.

    Example:
        >>> did_you_mean("ndgc@10")
        'did you mean ndcg@10? '
        >>> did_you_mean("xyz")
        ''
    """
    name, sep, arg = key.partition("@")
    names = sorted(list(REGISTRY) + list(ALIASES))
    close = [name.lower()] if name.lower() in names else difflib.get_close_matches(name.lower(), names, n=3, cutoff=0.6)
    keys = []
    for c in close:
        try:  # the same cutoff with the close name, when that is a valid key
            keys.append(_parse_one(f"{c}{sep}{arg}").key)
        except ValueError:
            pass
    if not keys and close:
        keys = [close[0]]
    return "did you mean " + " or ".join(keys) + "? " if keys else ""


def _parse_one(key: str) -> MetricKey:
    if not isinstance(key, str):
        raise TypeError(f"metric keys must be strings like 'ndcg@10'; got {key!r} of type {type(key).__name__}")
    kind, colon, inner_key = key.partition(":")
    if colon:
        if kind not in CONFIDENCE_KINDS:
            raise ValueError(f"unknown prefix {kind + ':'!r} in key {key!r}; confidence keys are "
                             f"{', '.join(k + ':<key>' for k in CONFIDENCE_KINDS)}")
        return _parse_confidence(key, kind, inner_key)
    name, sep, arg = key.partition("@")
    canonical = ALIASES.get(name, name)
    spec = REGISTRY.get(canonical)
    if spec is None:
        raise ValueError(f"unknown metric {name!r} in key {key!r}; {did_you_mean(key)}known keys: {known_metrics()}")
    if not sep:
        if spec.plain is None:
            raise ValueError(f"metric {name!r} needs a cutoff, e.g. '{name}@10'; got {key!r}")
        return MetricKey(key, spec, AT_R if spec.plain == AT_R else None)
    if arg == "r":
        if AT_R not in spec.cutoffs:
            raise ValueError(f"metric {name!r} takes no '@r' cutoff; got {key!r}; known keys: {known_metrics()}")
        return MetricKey(key, spec, AT_R)
    if AT_X in spec.cutoffs:
        if not _ASCII_FLOAT.fullmatch(arg):
            raise ValueError(f"{name} takes a number after '@', e.g. '{name}@0.1'; got {key!r}")
        x = float(arg)
        if not math.isfinite(x):
            raise ValueError(f"{name} takes a finite number after '@'; got {key!r}")
        return MetricKey(key, spec, x)
    if AT_K not in spec.cutoffs:
        raise ValueError(f"metric {name!r} takes no '@k' cutoff; got {key!r}; known keys: {known_metrics()}")
    if not _ASCII_INT.fullmatch(arg):
        raise ValueError(f"k must be a positive integer or 'r' in {key!r}; got {arg!r}")
    if len(arg.lstrip("-0")) > 19 or int(arg) > INT64_MAX:  # before int(): no 5000-digit conversion
        raise ValueError(f"k must be at most 2**63 - 1 in {key!r}; got {arg}")
    k = int(arg)
    if k <= 0:
        raise ValueError(f"k must be a positive integer in {key!r}; got {k}")
    return MetricKey(key, spec, k)


@lru_cache(maxsize=256)
def _parse_tuple(keys: Tuple[str, ...]) -> Tuple[MetricKey, ...]:
    parsed = tuple(_parse_one(k) for k in keys)
    seen = set()
    for p in parsed:
        if p.key in seen:
            raise ValueError(f"metric key {p.key!r} is given twice")
        seen.add(p.key)
    return parsed


def parse_metrics(metrics: Union[str, Iterable[Union[str, MetricKey]]]) -> Tuple[MetricKey, ...]:
    """Parse metric keys once: ``parse_metrics(["ndcg@10", "map@r", "mrr"])``.

    Already parsed keys (a tuple of :class:`MetricKey`) pass through.

    Example:
        >>> [m.cutoff for m in parse_metrics(["ndcg@10", "map@r", "mrr"])]
        [10, 'r', None]
    """
    if isinstance(metrics, str):
        metrics = [metrics]
    try:
        keys = tuple(metrics)
    except TypeError:
        raise TypeError(f"metrics must be a list of keys like ['ndcg@10']; got {type(metrics).__name__}") from None
    if not keys:
        raise ValueError("metrics must name at least one key, e.g. ['ndcg@10']")
    if all(isinstance(k, MetricKey) for k in keys):
        return keys
    for k in keys:
        if not isinstance(k, str):
            raise TypeError(f"metric keys must be strings like 'ndcg@10'; got {k!r} of type {type(k).__name__}")
    return _parse_tuple(keys)


def metric_key(name: str, k: Union[int, str, None] = None) -> str:
    """Build a key from a name and a cutoff, checking k: ``metric_key("ndcg", 10) == "ndcg@10"``.

    ``k`` must be a positive int (not bool), ``"r"``, or None (bare name).
    """
    if k is None:
        key = name
    elif k == "r":
        key = f"{name}@r"
    elif isinstance(k, bool) or not isinstance(k, int):
        raise TypeError(f"k must be a positive int; got {k!r} of type {type(k).__name__}")
    elif k <= 0:
        raise ValueError(f"k must be a positive int; got {k}")
    else:
        key = f"{name}@{k}"
    parse_metrics([key])
    return key


def split_scopes(keys: Iterable[MetricKey]) -> Tuple[Tuple[MetricKey, ...], Tuple[MetricKey, ...]]:
    """(per-query keys, set-level keys)."""
    keys = tuple(keys)
    return tuple(m for m in keys if m.spec.per_query), tuple(m for m in keys if not m.spec.per_query)


def depth_needed(keys: Iterable[MetricKey]) -> Tuple[int, bool, bool]:
    """(largest integer k, any key cut at R, any whole-list key) of per-query keys."""
    ks = [m.cutoff for m in keys if m.spec.per_query]
    return (
        max([c for c in ks if isinstance(c, int)], default=0),
        any(c == AT_R for c in ks),
        any(c is None for c in ks),
    )
