"""False non-match rate at given false match rates (FNMR@FMR, OML's ``fnmr@fmr``).

For the distances of positive pairs (same class) and negative pairs (different
classes), the threshold of a false match rate ``f`` is the ``f``-quantile (numpy's
default, linear) of the negative distances, and FNMR is the fraction of positive
distances at or above it. :func:`fnmr_at_fmr` takes both sets whole;
:func:`fnmr_at_fmr_streaming` takes them in chunks, in bounded memory, and finds
the same quantiles exactly by radix selection (:mod:`.radix_select`).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Iterable, Iterator, List, Optional, Sequence, Tuple, Union

import torch
from torch import Tensor

from ._common import _check_finite, _check_fractions, _check_int, _check_real_dtype, _check_tensor, _chunk_rows
from .radix_select import key_width, keys_to_values, order_keys, select_ranks, top_digit_histogram

__all__ = ["fnmr_at_fmr", "fnmr_at_fmr_streaming"]


def _check_dists(name: str, t) -> Tensor:
    _check_tensor(name, t)
    _check_real_dtype(name, t)
    if t.ndim != 1:
        raise ValueError(f"{name} must be 1-D; got shape {tuple(t.shape)}")
    return t


# ----------------------------------------------------------------------------- quantiles and counts


def _quantile_plan(n: int, fmr: List[float]) -> Tuple[List[int], List[int], List[float]]:
    """numpy ``quantile(method="linear")`` with a sequence ``q``: lower/upper order-statistic ranks and weights.

    ``virtual = (n - 1) * q`` in float64; ``lo = floor(virtual)``, ``hi = lo + 1``;
    at or past the last index both are ``n - 1`` (numpy's index -1, weight
    ``virtual + 1``); ``gamma = virtual - lo``.
    """
    lo_r, hi_r, gam = [], [], []
    for q in fmr:
        v = (n - 1) * q
        if v >= n - 1:
            lo, hi, g = n - 1, n - 1, v - (-1.0)
        else:
            lo = math.floor(v)
            hi, g = lo + 1, v - lo
        lo_r.append(lo)
        hi_r.append(hi)
        gam.append(g)
    return lo_r, hi_r, gam


def _lerp_numpy(v_lo: Tensor, v_hi: Tensor, gamma: List[float]) -> Tensor:
    """numpy ``_lerp``: difference in the input dtype, interpolation in float64."""
    g = torch.tensor(gamma, dtype=torch.float64, device=v_lo.device)
    diff = (v_hi - v_lo).to(torch.float64)
    below = v_lo.to(torch.float64) + diff * g
    above = v_hi.to(torch.float64) - diff * (1 - g)
    return torch.where(g >= 0.5, above, below)


def _count_at_least(pos: Tensor, thresholds: Tensor) -> Tensor:
    """``(pos >= t).sum()`` for each threshold (float64 comparison), chunk-wise; int64 ``[F]``."""
    counts = torch.zeros(thresholds.numel(), dtype=torch.int64, device=thresholds.device)
    step = _chunk_rows(thresholds.numel())
    for s in range(0, pos.numel(), step):
        chunk = pos[s : s + step].to(device=thresholds.device, dtype=torch.float64)
        counts += (chunk.unsqueeze(0) >= thresholds.unsqueeze(1)).sum(1)
    return counts


def _fmr_thresholds(neg: Tensor, fracs: List[float]) -> Tensor:
    """float64 ``np.quantile(neg, fracs)`` (linear), bit for bit, from a full sort."""
    lo, hi, gamma = _quantile_plan(neg.numel(), fracs)
    ranks = torch.tensor(lo + hi, dtype=torch.long, device=neg.device)
    # the order statistics; "+ 0" turns -0.0 into 0.0, as the streaming keys do
    stats = torch.sort(neg + 0).values[ranks]
    f = len(fracs)
    return _lerp_numpy(stats[:f], stats[f:], gamma)


def fnmr_at_fmr(pos_dist: Tensor, neg_dist: Tensor, fmr: Union[float, Sequence[float]]) -> Tensor:
    """False non-match rate at given false match rates (OML's FNMR@FMR).

    For each false match rate ``f`` (a fraction in [0, 1], not a percent), the
    threshold ``t`` is the ``f``-quantile of the negative-pair distances by numpy's
    default ("linear") method, and the result is the fraction of positive-pair
    distances ``>= t``. The threshold equals ``np.quantile(neg_dist, f)`` bit for
    bit: order statistics ``floor((n-1)f)`` and the next, their difference in the
    input dtype, the interpolation in float64 (as numpy's ``_lerp``). This is OML's
    definition since its 2.0 (OML 1.x took percents); OML returns float32, this
    returns float64 on the input's device, a 0-d tensor for a float ``fmr``, 1-D for
    a sequence. Empty inputs and NaN/inf distances raise ``ValueError``.

    Example:
        >>> pos = torch.tensor([0., 0, 1, 1, 2, 2, 5, 5, 9, 9])
        >>> neg = torch.tensor([3., 3, 4, 4, 6, 6, 7, 7, 8, 8])
        >>> fnmr_at_fmr(pos, neg, [0.1, 0.5])
        tensor([0.4000, 0.2000], dtype=torch.float64)
    """
    pos = _check_dists("pos_dist", pos_dist)
    neg = _check_dists("neg_dist", neg_dist)
    fracs, scalar = _check_fractions("fmr", fmr)
    if pos.device != neg.device:
        raise ValueError(f"pos_dist and neg_dist must be on the same device; got {pos.device} and {neg.device}")
    if pos.numel() == 0:
        raise ValueError("pos_dist is empty; FNMR needs at least one positive pair")
    if neg.numel() == 0:
        raise ValueError("neg_dist is empty; the FMR thresholds need at least one negative pair")
    _check_finite("pos_dist", pos)
    _check_finite("neg_dist", neg)
    thr = _fmr_thresholds(neg, fracs)
    out = _count_at_least(pos, thr).to(torch.float64) / pos.numel()
    return out[0] if scalar else out


# ----------------------------------------------------------------------------- streaming


class _Passes:
    """Calls ``make_chunks()`` once per pass and checks what it yields.

    Every item must be a ``(pos, neg)`` pair of 1-D real tensors; all non-empty
    negative chunks share one dtype; every pass after the first must see as many
    positive and negative distances as the first.
    """

    def __init__(self, make_chunks: Callable[[], Iterable[Tuple[Tensor, Tensor]]]) -> None:
        self.make_chunks = make_chunks
        self.number = 0
        self.dtype: Optional[torch.dtype] = None  # of the negative chunks
        self.totals: Optional[Tuple[int, int]] = None  # (positives, negatives) seen by pass 1

    def start(self) -> Iterator[Tuple[Tensor, Tensor]]:
        """A new pass over the checked ``(pos, neg)`` chunks."""
        self.number += 1
        chunks = self.make_chunks()
        if isinstance(chunks, Tensor) or not hasattr(chunks, "__iter__"):
            raise TypeError(f"make_chunks() must return an iterable of (pos, neg) pairs; got {type(chunks).__name__}")
        return self._pairs(chunks)

    def _pairs(self, chunks) -> Iterator[Tuple[Tensor, Tensor]]:
        seen_pos = seen_neg = 0
        for item in chunks:
            if not (isinstance(item, (tuple, list)) and len(item) == 2):
                raise TypeError(
                    f"make_chunks() must yield (pos_dist_chunk, neg_dist_chunk) pairs; got {type(item).__name__} on pass {self.number}"
                )
            pos = _check_dists("pos_dist chunk", item[0])
            neg = _check_dists("neg_dist chunk", item[1])
            seen_pos += pos.numel()
            seen_neg += neg.numel()
            yield pos, neg
        if self.totals is None:
            self.totals = (seen_pos, seen_neg)
        elif (seen_pos, seen_neg) != self.totals:
            raise ValueError(
                "make_chunks() must yield the same data on every call; pass 1 saw "
                f"{self.totals[0]} positive and {self.totals[1]} negative distances, "
                f"pass {self.number} saw {seen_pos} and {seen_neg}"
            )

    def check_dtype(self, neg: Tensor) -> Tensor:
        """``neg`` (non-empty), after checking it has the dtype of the first negative chunk."""
        if self.dtype is None:
            self.dtype = neg.dtype
        elif neg.dtype != self.dtype:
            raise TypeError(f"all neg_dist chunks must share one dtype; got {self.dtype} and {neg.dtype}")
        return neg


@dataclass
class _FirstPass:
    """What the first pass learns: totals, the common device and the top-digit histogram."""

    n_pos: int
    n_neg: int
    device: torch.device
    width: int  # key bits of the negatives' dtype
    histogram: Tensor


def _first_pass(passes: _Passes) -> _FirstPass:
    """Count everything, check devices and finiteness, histogram the negatives' top digits."""
    device: Optional[torch.device] = None
    hist: Optional[Tensor] = None
    n_neg = n_pos = 0
    bad = None
    width = 0
    for pos_c, neg_c in passes.start():
        for name, c in (("pos_dist", pos_c), ("neg_dist", neg_c)):
            if c.numel() == 0:
                continue
            if device is None:
                device = c.device
            if c.device != device:
                raise ValueError(f"all chunks must be on one device; got {device} and {c.device} ({name})")
            if c.is_floating_point():  # one sync at the end, not one per chunk
                chunk_bad = ~torch.isfinite(c).all()
                bad = chunk_bad if bad is None else bad | chunk_bad.to(bad.device)
        n_pos += pos_c.numel()
        if neg_c.numel() == 0:
            continue
        passes.check_dtype(neg_c)
        if hist is None:
            width = key_width(neg_c.dtype)
            hist = top_digit_histogram(order_keys(neg_c), width)
        else:
            hist += top_digit_histogram(order_keys(neg_c), width)
        n_neg += neg_c.numel()
    if bad is not None and bool(bad):
        raise ValueError("pos_dist and neg_dist must not contain NaN or infinite values")
    if n_pos == 0:
        raise ValueError("pos_dist is empty; FNMR needs at least one positive pair")
    if n_neg == 0 or hist is None or device is None:
        raise ValueError("neg_dist is empty; the FMR thresholds need at least one negative pair")
    return _FirstPass(n_pos, n_neg, device, width, hist)


def _negative_key_passes(passes: _Passes, device: torch.device) -> Iterator[Tuple[int, Iterator[Tensor]]]:
    """Endless further passes: ``(pass number, order keys of each non-empty negative chunk)``."""
    while True:
        pairs = passes.start()
        yield passes.number, (order_keys(passes.check_dtype(neg).to(device)) for _, neg in pairs if neg.numel())


def _count_pass(passes: _Passes, thresholds: Tensor) -> Tensor:
    """A last pass: int64 ``[F]`` counts of positive distances at or above each threshold."""
    counts = torch.zeros(thresholds.numel(), dtype=torch.int64, device=thresholds.device)
    for pos_c, _ in passes.start():
        if pos_c.numel():
            counts += _count_at_least(pos_c, thresholds)
    return counts


def fnmr_at_fmr_streaming(
    make_chunks: Callable[[], Iterable[Tuple[Tensor, Tensor]]],
    fmr: Union[float, Sequence[float]],
    *,
    collect_limit: int = 1 << 16,
) -> Tensor:
    """:func:`fnmr_at_fmr` over pair distances that arrive in chunks, exactly, in bounded memory.

    ``make_chunks()`` must return a fresh iterable of ``(pos_dist_chunk, neg_dist_chunk)``
    1-D tensors (either may be empty) and yield the same data on every call; it is
    called a few times. The quantile order statistics of the negatives are found by
    radix selection on order-preserving integer keys of the values (IEEE bits with
    negatives flipped; ``-0.0`` counts as ``0.0``), 16 bits per pass:

    1. pass 1 histograms the top 16 bits of every negative key (and counts everything);
       from the counts each wanted rank knows its bucket and how many keys lie below;
    2. each later pass histograms the next 16 bits inside each wanted rank's bucket,
       or, once a bucket holds ``<= collect_limit`` keys, collects them and selects
       the rank exactly by sorting;
    3. a last pass counts the positives at or above the thresholds.

    That is 2 passes for 16-bit distances, 3 for 32-bit ones and at most 5 for 64-bit
    ones (float64 data usually needs 4: its buckets are small after 32 bits),
    with memory O(chunk + 65536 x ranks + collect_limit x ranks). Ties need nothing
    special: a bucket of equal keys is resolved when its bits run out. The result is
    bitwise equal to :func:`fnmr_at_fmr` on the concatenated distances. All negative
    chunks must share one dtype.

    Example:
        >>> pos = torch.tensor([0., 0, 1, 1, 2, 2, 5, 5, 9, 9])
        >>> neg = torch.tensor([3., 3, 4, 4, 6, 6, 7, 7, 8, 8])
        >>> chunks = lambda: ((pos[i : i + 3], neg[i : i + 3]) for i in range(0, 10, 3))
        >>> fnmr_at_fmr_streaming(chunks, [0.1, 0.5])
        tensor([0.4000, 0.2000], dtype=torch.float64)
    """
    if not callable(make_chunks):
        raise TypeError(f"make_chunks must be a callable returning an iterable of (pos, neg) pairs; got {type(make_chunks).__name__}")
    fracs, scalar = _check_fractions("fmr", fmr)
    collect_limit = _check_int("collect_limit", collect_limit, minimum=0)
    passes = _Passes(make_chunks)
    first = _first_pass(passes)
    lo, hi, gamma = _quantile_plan(first.n_neg, fracs)
    keys = select_ranks(lo + hi, first.histogram, first.width, _negative_key_passes(passes, first.device), collect_limit)
    as_values = lambda ranks: keys_to_values(
        torch.tensor([keys[r] for r in ranks], dtype=torch.int64, device=first.device), passes.dtype
    )
    thresholds = _lerp_numpy(as_values(lo), as_values(hi), gamma)
    out = _count_pass(passes, thresholds).to(torch.float64) / first.n_pos
    return out[0] if scalar else out
