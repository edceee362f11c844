"""Value checks read from the data (NaN, inf, negative or too large gains): once per evaluation, never per batch."""
from __future__ import annotations

from typing import Optional, Sequence, Tuple

import torch
from torch import Tensor

from .. import sizing
from ..ranking.ranking import GAIN_LIMIT
from .tensors import _contains

__all__ = ["value_flags", "raise_value_flags", "check_values", "check_representable"]

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
    zero = torch.zeros((), dtype=torch.bool, device=preds.device)
    bad_preds = bad_target = negative = zero
    if preds.is_floating_point() and preds.numel():
        bad_preds = _nonfinite(preds)
    if target.dtype != torch.bool and target.numel():
        if target.is_floating_point():  # one pass for both (a NaN propagates to both)
            low, high = torch.aminmax(target)
            bad_target = ~(torch.isfinite(low) & torch.isfinite(high) & (high <= GAIN_LIMIT))
        else:
            low = target.amin()
        negative = low < 0
    return torch.stack([bad_preds, bad_target.to(preds.device), negative.to(preds.device)]).to(torch.int64)


def _nonfinite(x: Tensor) -> Tensor:
    """0-dim bool: ``x`` (floats) holds a NaN or an infinity.

    The sum of finite float32/float64 values is finite unless it overflows, and a
    NaN or infinity makes it non-finite: where host reads are free, one sum (0.3-0.7x
    the time of an ``aminmax`` pass on CPU) settles the common case, and the minimum and
    maximum decide only when the sum is not finite. Elsewhere: the minimum and maximum.
    """
    if x.dtype in (torch.float32, torch.float64) and not sizing.sync_free(x):
        total = x.sum()
        if bool(torch.isfinite(total)):
            return torch.zeros((), dtype=torch.bool, device=x.device)
    low, high = torch.aminmax(x)
    return ~(torch.isfinite(low) & torch.isfinite(high))


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


def check_values(preds: Tensor, target: Tensor, names: Tuple[str, str] = ("preds", "target")) -> None:
    """NaN/inf scores, NaN/inf or negative gains, with one host sync.

    Example:
        >>> check_values(torch.tensor([[0.5, float("inf")]]), torch.tensor([[1, 0]]))
        Traceback (most recent call last):
        ...
        ValueError: preds contain NaN or inf; scores must be finite
    """
    raise_value_flags(value_flags(preds, target), names)


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
    largest = torch.where(torch.isnan(values), 0.0, values.abs()).amax(0)
    bad = [(k, v) for k, v in zip(keys, largest.tolist()) if v > limit]
    if bad:
        raise ValueError(
            f"{', '.join(k for k, _ in bad)}: values up to {max(v for _, v in bad):g} over {n} quer{'y' if n == 1 else 'ies'}, "
            "beyond what float64 can sum (dcg_exp's 2^g - 1 overflows from gains of about 1024 on, dcg's sums from "
            "gains near 1e308); use ndcg_exp/ndcg, or smaller gains"
        )
