"""Metric keys: ``name@k``, ``name@r``, ``name@x`` (a float parameter), ``name`` (whole list).

Keys are parsed here only, once (cached), against the specifications of
:mod:`retrieval_core.metrics.spec`, into :class:`MetricKey` objects that carry the
spec, the cutoff and the parameter; :func:`depth_needed` is the one place that says
how deep a set of keys must rank, and :func:`ranking_values` runs the kernels of parsed
keys on a Ranking.
"""
from __future__ import annotations

import difflib
import math
import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Iterable, NamedTuple, Optional, Sequence, Tuple, Union

import torch
from torch import Tensor

from ..ranking.ranking import Ranking
from .spec import ALIASES, AT_K, AT_R, AT_X, REGISTRY, WHOLE, MetricSpec

__all__ = [
    "MetricKey", "Depth", "parse_metrics", "metric_key", "known_metrics", "did_you_mean", "split_scopes",
    "depth_needed", "ranking_values", "CONFIDENCE_KINDS",
]

# Cutoffs and parameters are plain ASCII: int() and float() also take other
# Unicode digits ("１０", "٣") and surrounding whitespace, which would make
# distinct keys mean the same thing.
_ASCII_INT = re.compile(r"-?[0-9]+")
INT64_MAX = 2**63 - 1  # the largest cutoff: an int64 (a tensor holds it)
_ASCII_FLOAT = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")


@dataclass(frozen=True)
class MetricKey:
    """A parsed key. ``cutoff`` is a positive int, ``"r"``, None (whole list), or the
    float parameter of a set-level metric; ``param`` the float parameter of a per-query
    metric (``rbp@0.8``: cutoff None, the whole list, and param 0.8)."""

    key: str
    spec: MetricSpec
    cutoff: Union[int, str, float, None]
    # "erc", "conf", "spearman" or "kendall" for a confidence key "<kind>:<inner key>"
    # (spec and cutoff are then the inner key's: the per-query values it reduces)
    confidence: Optional[str] = None
    param: Optional[float] = None

    @property
    def inner(self) -> str:
        """The per-query key a confidence key reduces (the key itself otherwise)."""
        return self.key.partition(":")[2] if self.confidence else self.key

    @property
    def form(self) -> str:
        """Which of the spec's forms the key takes: AT_K, AT_R, WHOLE or AT_X."""
        if self.param is not None or isinstance(self.cutoff, float):
            return AT_X
        if self.cutoff == AT_R:
            return AT_R
        return WHOLE if self.cutoff is None else AT_K

    @property
    def depth(self) -> Union[int, str, None]:
        """How deep a per-query key ranks: its k, AT_R (each query's R) or WHOLE (every
        candidate: the bare whole-list names and every float parameter); None for a set-level key."""
        if not self.spec.per_query:
            return None
        return WHOLE if self.cutoff is None else self.cutoff

    @property
    def binary(self) -> bool:
        """Per-query values are 0 or 1 (hit_rate@k, precision@1, mrr@1...): ci_method="beta" applies
        (never to a confidence key: its value is not a mean of per-query values)."""
        if self.confidence:
            return False
        return self.spec.binary or (self.spec.binary_at_one and self.cutoff == 1)

    def __call__(self, ranking: Ranking) -> Tensor:
        k = ranking.n_relevant if self.cutoff == AT_R else self.cutoff
        kernel = self.spec.kernel
        if ranking.ties == "expected":
            if not self.spec.has_expected(self.form):
                raise NotImplementedError(f"{self.key} {self.spec.no_expected}")
            kernel = self.spec.expected
        return kernel(ranking, k) if self.param is None else kernel(ranking, k, self.param)


class Depth(NamedTuple):
    """How deep a set of keys must rank (:func:`depth_needed`)."""

    k: int  # the largest integer cutoff (0: none)
    at_r: bool  # a key cut at each query's R
    whole: bool  # a key over the whole list


def depth_needed(keys: Iterable[MetricKey]) -> Depth:
    """The depth of the per-query keys among ``keys``: every caller (scores, rankings,
    embeddings in one process, a sharded gallery) asks here.

    Example:
        >>> depth_needed(parse_metrics(["ndcg@10", "map@r", "precision@3", "rbp@0.8", "nmi"]))
        Depth(k=10, at_r=True, whole=True)
    """
    depths = [m.depth for m in keys if m.spec.per_query]
    return Depth(max([d for d in depths if isinstance(d, int)], default=0), AT_R in depths, WHOLE in depths)


def ranking_values(ranking: Ranking, keys: Sequence[MetricKey]) -> Tensor:
    """Run the kernels of ``keys`` on one Ranking: ``[Q, M]`` float64, NaN where undefined."""
    values = torch.stack([m(ranking) for m in keys], dim=1)
    undefined = torch.stack([m.spec.empty(ranking) for m in keys], dim=1)
    return values.masked_fill(undefined, float("nan"))


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
            forms.append(f"{name}@{spec.param_name}")
        parts.extend(forms)
    parts.extend(f"{kind}:<key>" for kind in CONFIDENCE_KINDS)
    return ", ".join(parts)


CONFIDENCE_KINDS = ("erc", "conf", "spearman", "kendall")  # confidence keys "<kind>:<key>" (confidence.py)


def _parse_confidence(key: str, kind: str, inner_key: str) -> MetricKey:
    """``"<kind>:<inner>"``: the inner per-query key, tagged with the confidence kind."""
    if ":" in inner_key:
        raise ValueError(f"confidence keys take a plain per-query key after '{kind}:', e.g. '{kind}:cmc@1'; "
                         f"got {key!r}")
    inner = _parse_one(inner_key)
    if not inner.spec.per_query:
        raise ValueError(f"{key!r}: confidence keys reduce per-query values; {inner.spec.name!r} is an "
                         "embedding-set metric (one value per evaluation)")
    # erc reads 1 - value as an error: bounded in [0, 1] and higher is better (1 - fall-out is no
    # error rate: fall-out itself is one)
    if kind == "erc" and not inner.spec.bounded:
        raise ValueError(f"{key!r}: erc: reads 1 - value as the error of a query and needs a metric within "
                         f"[0, 1]; {inner.spec.name!r} is unbounded (use spearman:/kendall:/conf: instead)")
    if kind == "erc" and inner.spec.lower_is_better:
        raise ValueError(f"{key!r}: erc: reads 1 - value as the error of a query, for metrics where higher is "
                         f"better; {inner.spec.name!r} is lower-is-better, so 1 - value is no error "
                         "(use spearman:/kendall:/conf: instead)")
    return MetricKey(key, inner.spec, inner.cutoff, kind, inner.param)


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
        if spec.plain is None and AT_X in spec.cutoffs and spec.per_query:
            raise ValueError(f"metric {name!r} needs its parameter {spec.param_name}, e.g. "
                             f"'{name}@{spec.param_example:g}'; got {key!r}")
        if spec.plain is None:
            raise ValueError(f"metric {name!r} needs a cutoff, e.g. '{name}@10'; got {key!r}")
        return MetricKey(key, spec, AT_R if spec.plain == AT_R else None)
    if arg == "r":
        if AT_R not in spec.cutoffs:
            raise ValueError(f"metric {name!r} takes no '@r' cutoff; got {key!r}; known keys: {known_metrics()}")
        return MetricKey(key, spec, AT_R)
    if AT_X in spec.cutoffs:
        return _parse_param(key, spec, name, arg)
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


def _parse_param(key: str, spec: MetricSpec, name: str, arg: str) -> MetricKey:
    """``name@x``: a finite number, inside the spec's open interval where it has one; a
    per-query metric's parameter ranks the whole list (cutoff None)."""
    if not _ASCII_FLOAT.fullmatch(arg):
        raise ValueError(f"{name} takes a number after '@', e.g. '{name}@{spec.param_example:g}'; got {key!r}")
    x = float(arg)
    if not math.isfinite(x):
        raise ValueError(f"{name} takes a finite number after '@'; got {key!r}")
    if spec.param_range is not None and not spec.param_range[0] < x < spec.param_range[1]:
        lo, hi = spec.param_range
        raise ValueError(f"{name}@{spec.param_name} takes {spec.param_name} in ({lo:g}, {hi:g}); got {key!r}")
    return MetricKey(key, spec, None, param=x) if spec.per_query else MetricKey(key, spec, x)


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
