"""The checks of the sampled protocols (:func:`~retrieval_core.sample_negatives`,
:func:`~retrieval_core.evaluate_sampled`): the sampling options, the popularity weights,
the scores of the positives and the negatives, and the correction's options and keys.

Example:
    >>> check_sampling(10, 0, alpha=1.0, replace=True, seed=0)
    Traceback (most recent call last):
    ...
    ValueError: n (negatives per user) must be a positive int; got 0
"""
from __future__ import annotations

import math
import numbers
from typing import Optional, Sequence

import torch
from torch import Tensor

from .counting import check
from .options import positive_int

# the corrections of Krichene & Rendle (2020): docs/metrics.md, "Sampled protocols"
CORRECTIONS = ("mle", "bv")
# how the negatives were drawn (sample_negatives: popularity=None or not)
SAMPLINGS = ("uniform", "popularity")

__all__ = ["CORRECTIONS", "SAMPLINGS", "check_correction", "check_popularity", "check_sampled_scores", "check_sampling"]


@check
def check_sampling(n_items, n, *, alpha, replace, seed) -> None:
    """``n_items`` and ``n`` positive ints, ``alpha`` a finite number, ``replace`` a bool, ``seed`` an int."""
    positive_int("n_items", n_items)
    positive_int("n (negatives per user)", n)
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not math.isfinite(alpha):
        raise ValueError(f"alpha must be a finite number; got {alpha!r}")
    if not isinstance(replace, bool):
        raise TypeError(f"replace must be a bool; got {type(replace).__name__}")
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral):
        raise TypeError(f"seed must be an int; got {type(seed).__name__}")


@check
def check_popularity(popularity, n_items: int, alpha: float) -> Tensor:
    """``[n_items]`` real weights, finite and >= 0, returned as float64 ``popularity ** alpha``
    (an item of popularity 0 is never drawn, as RecBole's ``pop`` sampling), whose sum is finite."""
    if not isinstance(popularity, Tensor):
        raise TypeError(f"popularity must be a tensor of one weight per item; got {type(popularity).__name__}")
    if popularity.shape != (n_items,):
        raise ValueError(f"popularity must be [n_items] = [{n_items}]; got shape {tuple(popularity.shape)}")
    if popularity.dtype == torch.bool or popularity.is_complex():
        raise TypeError(f"popularity must hold real numbers; got {popularity.dtype}")
    weights = popularity.to(torch.float64)
    if not bool((torch.isfinite(weights) & (weights >= 0)).all()):
        raise ValueError("popularity must be finite and >= 0")
    weights = torch.where(weights > 0, weights.pow(float(alpha)), torch.zeros_like(weights))
    if not bool(torch.isfinite(weights.sum())):  # the draws and the allowed shares divide by it
        raise ValueError(f"popularity ** alpha (alpha={alpha}) sums past float64 (up to {weights.max().item():.3g}): "
                         "scale the popularity down (the sampling reads only its proportions)")
    return weights


@check
def check_sampled_scores(positive_scores, negative_scores, truth, distinct_of: Optional[int] = None) -> None:
    """``positive_scores`` ``[E]`` (one per pair of ``truth``, ``[2, E]``, in its order) and
    ``negative_scores`` ``[U, m]`` (m >= 1): real tensors on one device, without NaN;
    ``distinct_of``: the negatives are distinct items of that many (m at most that)."""
    if isinstance(truth, Tensor) and truth.layout != torch.strided:
        raise ValueError("truth must be [2, E] (user, item) pairs here, in the order of positive_scores (a sparse "
                         "tensor's pairs: truth.coalesce().indices())")
    if not isinstance(truth, Tensor) or truth.ndim != 2 or truth.shape[0] != 2:
        raise ValueError(f"truth must be [2, E] (user, item) pairs; got "
                         f"{tuple(truth.shape) if isinstance(truth, Tensor) else type(truth).__name__}")
    n_pairs = truth.shape[1]
    for name, value, ndim in (("positive_scores", positive_scores, 1), ("negative_scores", negative_scores, 2)):
        if not isinstance(value, Tensor):
            raise TypeError(f"{name} must be a tensor; got {type(value).__name__}")
        if value.dtype == torch.bool or value.is_complex():
            raise TypeError(f"{name} must hold real scores; got {value.dtype}")
        if value.ndim != ndim:
            raise ValueError(f"{name} must be {ndim}-D; got shape {tuple(value.shape)}")
        if value.is_floating_point() and bool(torch.isnan(value).any()):
            raise ValueError(f"{name} holds NaN")
    if positive_scores.shape[0] != n_pairs:
        raise ValueError(f"positive_scores must hold one score per truth pair ({n_pairs}); got "
                         f"{positive_scores.shape[0]}")
    if negative_scores.shape[1] == 0:
        raise ValueError("negative_scores must hold at least one negative per user ([U, m], m >= 1)")
    if positive_scores.device != negative_scores.device:
        raise ValueError(f"positive_scores and negative_scores must be on one device; got "
                         f"{positive_scores.device} and {negative_scores.device}")
    if distinct_of is not None and negative_scores.shape[1] > distinct_of:
        raise ValueError(f"replace=False: {negative_scores.shape[1]} distinct negatives per user cannot be drawn "
                         f"from the n_items - 1 = {distinct_of} other items")


@check
def check_correction(correction, gamma, keys: Sequence, n_items: Optional[int], correctable: Sequence[str], *,
                     replace=True, sampling="uniform") -> None:
    """``correction`` None, ``"mle"`` or ``"bv"``; ``replace`` a bool and ``sampling`` one of
    :data:`SAMPLINGS` (how the negatives were drawn); with a correction, uniform sampling (the
    law of the sampled rank under popularity sampling is not one of the full rank alone),
    ``n_items`` (n, at least 2), ``gamma`` in [0, 1] and keys whose spec gives the value of one
    relevant item at rank r (``at_rank``, in the key's form; ``correctable``: those metrics'
    names, for the message)."""
    if not isinstance(replace, bool):
        raise TypeError(f"replace must be a bool; got {type(replace).__name__}")
    if sampling not in SAMPLINGS:
        raise ValueError(f"sampling must be one of {', '.join(repr(s) for s in SAMPLINGS)}; got {sampling!r}")
    if correction is None:
        return
    if correction not in CORRECTIONS:
        raise ValueError(f"correction must be None or one of {', '.join(repr(c) for c in CORRECTIONS)}; "
                         f"got {correction!r}")
    if sampling == "popularity":
        raise ValueError(f"correction={correction!r} models negatives drawn uniformly; with popularity sampling "
                         f"the number of negatives above a user's relevant item depends on the popularity of the "
                         f"items ranked above it (their share of the weight), not on its rank alone, and sampled "
                         f"scores do not give that share (it needs every item's score): rank every item instead, "
                         f"or sample uniformly")
    if isinstance(n_items, bool) or not isinstance(n_items, int) or n_items < 2:
        raise ValueError(f"correction={correction!r} needs n_items, the catalogue size n (an int >= 2); got "
                         f"{n_items!r}")
    if isinstance(gamma, bool) or not isinstance(gamma, (int, float)) or not 0 <= gamma <= 1:
        raise ValueError(f"gamma must be a number in [0, 1]; got {gamma!r}")
    refused = [m.key for m in keys if m.confidence or m.spec.at_rank is None or m.form == "x"
               or (m.spec.at_rank_forms is not None and m.form not in m.spec.at_rank_forms)]
    if refused:
        raise ValueError(f"correction={correction!r} takes the keys {', '.join(correctable)} (with @k, @r or "
                         f"none; auroc without a cutoff); got {', '.join(refused)}")
