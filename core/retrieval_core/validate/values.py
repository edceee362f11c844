"""Value checks read from the data (NaN, inf, negative or too large gains): once per evaluation, never per batch."""
from __future__ import annotations

import math
from typing import Optional, Sequence, Tuple

import torch
from torch import Tensor

from .. import sizing
from ..ranking.gains import GAIN_LIMIT
from .tensors import _contains
from .counting import check

__all__ = [
    "value_flags", "value_flags_and_max", "score_flag", "sign_flag", "gain_max_flag", "raise_value_flags",
    "check_values", "check_representable",
]

# a float's bits read as the signed integer of its size: negative exactly when its sign bit is set
_BITS = {torch.float64: torch.int64, torch.float32: torch.int32, torch.float16: torch.int16, torch.bfloat16: torch.int16}

# -- score mode: values (read from the data) -------------------------------------------


def value_flags(preds: Tensor, target: Tensor) -> Tensor:
    """``[3]`` int64 flags of one batch: NaN/inf scores, NaN/inf gains (or above
    :data:`GAIN_LIMIT`), negative gains.

    No host sync where one costs (``sizing.sync_free``): an adapter sums them as a
    state and calls :func:`raise_value_flags` once, at compute. Elsewhere (CPU) the
    scores are checked by their sum, with the exact check only when the sum is not
    finite (see :func:`_nonfinite`).

    Example:
        >>> value_flags(torch.tensor([[0.5, float("nan")]]), torch.tensor([[1, -1]])).tolist()
        [1, 0, 1]
    """
    return value_flags_and_max(preds, target, want_max=False)[0]


def value_flags_and_max(preds: Tensor, target: Tensor, want_max: bool = True) -> Tuple[Tensor, Optional[Tensor]]:
    """:func:`value_flags` and the largest gain (0-dim, the gains' dtype), read in the
    same pass: None for bool gains, for empty ones, or when not ``want_max`` (integer
    gains then read their minimum only).

    Example:
        >>> flags, high = value_flags_and_max(torch.tensor([[0.5, 0.2]]), torch.tensor([[1, 0]]))
        >>> flags.tolist(), high.item()
        ([0, 0, 0], 1)
    """
    zero = torch.zeros((), dtype=torch.bool, device=preds.device)
    bad_preds = bad_target = negative = zero
    high = None
    if preds.is_floating_point() and preds.numel():
        bad_preds = _nonfinite(preds)
    if target.dtype != torch.bool and target.numel():
        if target.is_floating_point():  # one pass for both (a NaN propagates to both)
            low, high = torch.aminmax(target)
            bad_target = ~torch.isfinite(low) | gain_max_flag(high)
        elif want_max:
            low, high = torch.aminmax(target)
        else:
            low = target.amin()
        negative = low < 0
    flags = torch.stack([bad_preds, bad_target.to(preds.device), negative.to(preds.device)]).to(torch.int64)
    return flags, high if want_max else None


def score_flag(preds: Tensor) -> bool:
    """The scores' part of :func:`value_flags`, with a host read (the CPU policy): whether
    ``preds`` hold a NaN or an infinity.

    Example:
        >>> score_flag(torch.tensor([[0.5, float("-inf")]])), score_flag(torch.tensor([[3, 1]]))
        (True, False)
    """
    if not preds.is_floating_point() or preds.numel() == 0:
        return False
    if preds.dtype in (torch.float32, torch.float64) and math.isfinite(preds.sum().item()):
        return False  # the common case of _nonfinite, without its 0-dim tensors
    return bool(_nonfinite(preds))


def sign_flag(target: Tensor) -> bool:
    """Part of :func:`value_flags` for float gains, with a host read (the CPU policy):
    whether a gain has its sign bit set (negative, -0.0, -inf, -NaN), read as the
    minimum of the bits as integers (one pass, ~0.6x the time of an ``aminmax``). The
    rest is :func:`gain_max_flag` of the largest gain, where the caller has it from
    elsewhere (nDCG's ideal gains: their top-k reads every gain anyway). On True,
    :func:`value_flags` decides (-0.0 is a valid gain).

    Example:
        >>> sign_flag(torch.tensor([[1.0, -0.0]])), sign_flag(torch.tensor([[1.0, float("nan")]]))
        (True, False)
    """
    bits = _BITS.get(target.dtype)
    if bits is None:  # a float dtype without a known bit layout: let value_flags decide
        return True
    return target.numel() > 0 and target.view(bits).amin().item() < 0


def gain_max_flag(high: Tensor) -> Tensor:
    """0-dim bool: the largest gain ``high`` (0-dim, floats) is NaN, infinite or above
    :data:`GAIN_LIMIT` (a NaN or +inf gain is the largest in the order of the bits).

    Example:
        >>> gain_max_flag(torch.tensor(float("nan"))).item(), gain_max_flag(torch.tensor(3.0)).item()
        (True, False)
    """
    return ~(torch.isfinite(high) & (high <= GAIN_LIMIT))


def _nonfinite(x: Tensor) -> Tensor:
    """0-dim bool: ``x`` (floats) holds a NaN or an infinity.

    The sum of finite float32/float64 values is finite unless it overflows, and a
    NaN or infinity makes it non-finite: where host reads are free, one sum (0.3-0.7x
    the time of an ``aminmax`` pass on CPU) settles the common case, and the minimum and
    maximum decide only when the sum is not finite. Elsewhere: the minimum and maximum.
    """
    if x.dtype in (torch.float32, torch.float64) and not sizing.sync_free(x):
        if math.isfinite(x.sum().item()):  # a host read, as cheap here as a 0-dim isfinite
            return torch.zeros((), dtype=torch.bool, device=x.device)
    low, high = torch.aminmax(x)
    return ~(torch.isfinite(low) & torch.isfinite(high))


@check
def raise_value_flags(flags: Tensor, names: Tuple[str, str] = ("preds", "target")) -> None:
    """Raise for summed :func:`value_flags` (one host read).

    Example:
        >>> raise_value_flags(torch.tensor([0, 0, 2]), names=("y_pred", "y"))
        Traceback (most recent call last):
        ...
        ValueError: y contains negative gains; gains must be >= 0
    """
    bad_preds, bad_target, negative = flags.tolist()
    p, t = names
    if bad_preds:
        raise ValueError(f"{_contains(p)} NaN or inf; scores must be finite")
    if bad_target:
        raise ValueError(f"{_contains(t)} NaN or inf (or gains above 2^960); gains must be finite and >= 0, "
                         "and at most 2^960 (about 1e289) so that sums of them fit float64")
    if negative:
        raise ValueError(f"{_contains(t)} negative gains; gains must be >= 0")


@check
def check_values(preds: Tensor, target: Tensor, names: Tuple[str, str] = ("preds", "target")) -> None:
    """NaN/inf scores, NaN/inf or negative gains, with one host sync.

    Example:
        >>> check_values(torch.tensor([[0.5, float("inf")]]), torch.tensor([[1, 0]]))
        Traceback (most recent call last):
        ...
        ValueError: preds contain NaN or inf; scores must be finite
    """
    raise_value_flags(value_flags(preds, target), names)


_NOT_GAINS = ("popularity",)  # unbounded keys whose values are not gains: the popularity given


@check
def check_representable(values: Tensor, keys: Sequence[str], n_queries: Optional[int] = None) -> None:
    """Per-query ``values[Q, M]`` (or their sums, ``n_queries=1``) that float64 can sum:
    no infinity, and no value so large that a sum over the ``n_queries`` queries (the mean,
    resampled means) could overflow. One host read.

    Example:
        >>> check_representable(torch.tensor([[1.0, float("inf")]]), ["dcg", "dcg_exp"])
        Traceback (most recent call last):
        ...
        ValueError: dcg_exp: values up to inf over 1 query, beyond what float64 can sum (dcg_exp's 2^g - 1 overflows from gains of about 1024 on, dcg's sums from gains near 1e308); use ndcg_exp/ndcg, or smaller gains
    """
    n = max(values.shape[0] if n_queries is None else n_queries, 1)
    if values.numel() == 0:
        return
    limit = torch.finfo(torch.float64).max / n
    largest = values.abs().masked_fill_(torch.isnan(values), 0.0).amax(0)  # one [Q, M] temporary
    bad = [(k, v) for k, v in zip(keys, largest.tolist()) if v > limit]
    if bad:
        gains = any(k.split("@")[0] not in _NOT_GAINS for k, _ in bad)
        raise ValueError(
            f"{', '.join(k for k, _ in bad)}: values up to {max(v for _, v in bad):g} over {n} quer{'y' if n == 1 else 'ies'}, "
            "beyond what float64 can sum " + (
                "(dcg_exp's 2^g - 1 overflows from gains of about 1024 on, dcg's sums from gains near 1e308); use "
                "ndcg_exp/ndcg, or smaller gains" if gains else "(item_popularity near 1e308); scale item_popularity down")
        )
