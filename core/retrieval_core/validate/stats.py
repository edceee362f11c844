"""Checks of the statistics options: confidence, intervals (level, method, resamples, seed), correlation inputs."""
from __future__ import annotations

import numbers
from typing import Optional, Sequence

import torch
from torch import Tensor

from .options import check_choice, check_seed
from .tensors import _shape, check_same_device, check_tensor
from .counting import check

# bootstrap resamples of an interval when none is asked: the one default of every entry point and adapter
N_RESAMPLES = 1000

__all__ = [
    "N_RESAMPLES",
    "check_confidence", "check_confidence_values", "check_confidence_range", "check_correlation_inputs",
    "CI_METHODS", "check_level",
    "check_resampling", "check_ci_options", "check_stats_options", "check_keep_per_query",
    "check_ci_keys",
]


@check
def check_confidence(confidence, n: int, unit: str = "query", *, values: bool = True, lists: bool = False) -> Tensor:
    """Per-query confidences: a real 1-D tensor with ``n`` entries (one per ``unit``),
    finite (read when ``values``; the adapters read them once, at compute). Returned
    floating (integers as float64; a float dtype is kept, so that ``conf:`` thresholds
    compare in the confidences' own precision). ``lists=True`` also takes a list or tuple
    of numbers (adapters' batches).

    Example:
        >>> check_confidence(torch.tensor([0.5, 2.0]), 2).tolist()
        [0.5, 2.0]
        >>> check_confidence(torch.tensor([0.5, float("nan")]), 2)
        Traceback (most recent call last):
        ...
        ValueError: confidence contains NaN or infinite values (1 of 2); confidences must be finite numbers
    """
    if lists and isinstance(confidence, (list, tuple)):
        if not all(isinstance(c, numbers.Real) and not isinstance(c, bool) for c in confidence):
            raise TypeError("confidence must be a tensor or a list of real numbers, one per query")
        confidence = torch.tensor([float(c) for c in confidence], dtype=torch.float64)
    if not isinstance(confidence, Tensor):
        raise TypeError(f"confidence must be a torch.Tensor with one real value per {unit}; "
                        f"got {type(confidence).__name__}")
    if confidence.dtype == torch.bool or confidence.is_complex():
        raise TypeError(f"confidence must be a real (float or integer) tensor; got {confidence.dtype}")
    if confidence.ndim != 1:
        raise ValueError(f"confidence must be 1-D with one value per {unit}; got shape {_shape(confidence)}")
    if confidence.shape[0] != n:
        raise ValueError(f"confidence must have one value per {unit}; got {confidence.shape[0]} for {n}")
    if not confidence.is_floating_point():
        confidence = confidence.to(torch.float64)
    if values:
        check_confidence_values(confidence)
    return confidence


@check
def check_confidence_values(confidence: Tensor) -> Tensor:
    """The values of a confidence tensor whose structure :func:`check_confidence` checked
    (``values=False``): finite numbers (one read of the data).

    Example:
        >>> check_confidence_values(torch.tensor([0.5, float("inf")]))
        Traceback (most recent call last):
        ...
        ValueError: confidence contains NaN or infinite values (1 of 2); confidences must be finite numbers
    """
    bad = int((~torch.isfinite(confidence)).sum())
    if bad:
        raise ValueError(f"confidence contains NaN or infinite values ({bad} of {confidence.shape[0]}); "
                         "confidences must be finite numbers")
    return confidence


@check
def check_confidence_range(confidence: Tensor, keys: Sequence[str]) -> None:
    """``conf:`` keys threshold confidences on a grid of [0, 1]: every value must lie there.

    Example:
        >>> check_confidence_range(torch.tensor([0.2, 1.5]), ["conf:cmc@1"])
        Traceback (most recent call last):
        ...
        ValueError: conf:cmc@1: conf: keys need confidences within [0, 1]; got values from 0.2 to 1.5 (rescale them, or use erc:/spearman:/kendall: keys, which take any range)
    """
    if confidence.numel() == 0:
        return
    low, high = torch.stack([confidence.min(), confidence.max()]).tolist()
    if low < 0 or high > 1:
        raise ValueError(
            f"{', '.join(keys)}: conf: keys need confidences within [0, 1]; got values from {low:g} to {high:g} "
            "(rescale them, or use erc:/spearman:/kendall: keys, which take any range)"
        )


@check
def check_correlation_inputs(x, y, method) -> None:
    """The inputs of ``rank_correlation``: two real finite 1-D tensors of one length
    and device, and a method.

    Example:
        >>> check_correlation_inputs(torch.zeros(3), torch.zeros(2), "spearman")
        Traceback (most recent call last):
        ...
        ValueError: x and y must be 1-D of the same length; got shapes (3,) and (2,)
    """
    check_choice("method", method, ("spearman", "kendall"))
    for name, t in (("x", x), ("y", y)):
        check_tensor(name, t)
        if t.dtype == torch.bool or t.is_complex():
            raise TypeError(f"{name} must be a real (float or integer) tensor; got {t.dtype}")
    if x.ndim != 1 or y.ndim != 1 or x.shape[0] != y.shape[0]:
        raise ValueError(f"x and y must be 1-D of the same length; got shapes {_shape(x)} and {_shape(y)}")
    check_same_device(x=x, y=y)
    for name, t in (("x", x), ("y", y)):
        if t.is_floating_point() and not bool(torch.isfinite(t).all()):
            raise ValueError(f"{name} contains NaN or infinite values; rank correlation needs finite numbers")


# -- intervals, per-query values, neighbours (docs/statistics.md) ----------------------

CI_METHODS = ("bootstrap", "beta")


@check
def check_level(ci, or_none: str = "") -> float:
    """An interval level in (0, 1) (``or_none``: how the message says None is allowed).

    Example:
        >>> check_level(1.5)
        Traceback (most recent call last):
        ...
        ValueError: ci must be a level in (0, 1) such as 0.95; got 1.5
    """
    if isinstance(ci, bool) or not isinstance(ci, numbers.Real) or not 0.0 < float(ci) < 1.0:
        raise ValueError(f"ci must be a level in (0, 1) such as 0.95{or_none}; got {ci!r}")
    return float(ci)


@check
def check_resampling(n_resamples, seed) -> None:
    """A positive int of resamples and a seed (:func:`check_seed`)."""
    if isinstance(n_resamples, bool) or not isinstance(n_resamples, numbers.Integral) or n_resamples < 1:
        raise ValueError(f"n_resamples must be a positive int; got {n_resamples!r}")
    check_seed(seed)


@check
def check_ci_options(ci, ci_method: str = "bootstrap", n_resamples: int = N_RESAMPLES, seed: int = 0,
                     reduce: str = "mean", per_class=None, compact: bool = False) -> Optional[float]:
    """Check the interval options; returns the level as a float (None: no interval).

    Example:
        >>> check_ci_options(0.95)
        0.95
        >>> check_ci_options(1.5)
        Traceback (most recent call last):
        ...
        ValueError: ci must be a level in (0, 1) such as 0.95, or None; got 1.5
    """
    if ci is None:
        return None
    check_level(ci, ", or None")
    if ci_method not in CI_METHODS:
        raise ValueError(f"ci_method must be one of {list(CI_METHODS)}; got {ci_method!r}")
    check_resampling(n_resamples, seed)
    if reduce == "none":
        raise ValueError("ci needs reduced values; reduce='none' returns per-query values (use keep_per_query=True "
                         "with a reduction instead)")
    if ci_method == "beta" and reduce != "mean":
        raise ValueError(f"ci_method='beta' is an interval of the mean (a rate); got reduce={reduce!r}")
    if compact:
        raise ValueError("ci needs the per-query values; compact=True keeps only sums and counts")
    if per_class is not None and ci_method == "beta":
        raise ValueError(f"ci_method='beta' is not available with per_class={per_class!r} (a mean of per-class "
                         "rates is not a rate); use ci_method='bootstrap'")
    return float(ci)


@check
def check_stats_options(keys, *, ci=None, ci_method: str = "bootstrap", n_resamples: int = N_RESAMPLES, seed: int = 0,
                        keep_per_query: bool = False, reduce: str = "mean", per_class=None,
                        compact: bool = False) -> dict:
    """The interval and per-query options with the (parsed) ``keys`` they apply to, as
    the core's evaluations and every adapter take them; returns them as the keyword
    arguments of :func:`~retrieval_core.stats.aggregate.aggregate` (no per-query values
    kept under ``compact``).

    Example:
        >>> from retrieval_core.metrics.keys import parse_metrics
        >>> check_stats_options(parse_metrics(["cmc@1"]), ci=0.9, ci_method="beta")["ci"]
        0.9
    """
    check_ci_options(ci, ci_method, n_resamples, seed, reduce, per_class, compact)
    check_seed(seed)  # also without an interval: a bad seed is an error whatever else is asked
    check_ci_keys(keys, ci, ci_method)
    return dict(ci=ci, ci_method=ci_method, n_resamples=n_resamples, seed=seed,
                keep_per_query=check_keep_per_query(keep_per_query) and not compact)


@check
def check_keep_per_query(keep_per_query) -> bool:
    if not isinstance(keep_per_query, bool):
        raise TypeError(f"keep_per_query must be a bool; got {keep_per_query!r}")
    return keep_per_query


@check
def check_ci_keys(keys, ci, ci_method: str) -> None:
    """``ci_method="beta"`` takes keys whose per-query values are 0 or 1 only
    (``MetricKey.binary``: hit_rate@k/cmc@k, precision@1, mrr@1...).

    Example:
        >>> from retrieval_core.metrics.keys import parse_metrics
        >>> check_ci_keys(parse_metrics(["cmc@5", "map@r"]), 0.9, "beta")
        Traceback (most recent call last):
        ...
        ValueError: ci_method='beta' needs metrics whose per-query values are 0 or 1 (hit_rate@k/cmc@k, precision@1, mrr@1...); 'map@r' is not; use ci_method='bootstrap'
    """
    if ci is None or ci_method != "beta":
        return
    bad = [m.key for m in keys if (m.spec.per_query or m.spec.item_kernel is not None) and not m.binary]
    if bad:
        raise ValueError(
            f"ci_method='beta' needs metrics whose per-query values are 0 or 1 (hit_rate@k/cmc@k, precision@1, "
            f"mrr@1...); {', '.join(map(repr, bad))} {'is' if len(bad) == 1 else 'are'} not; "
            "use ci_method='bootstrap'"
        )
