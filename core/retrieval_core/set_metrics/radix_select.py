"""Exact order statistics of integer keys that arrive in chunks, by radix selection.

The keys are visited in passes (each pass sees every key again) and never held all
at once: the first pass histograms the top 16 bits of every key; each later pass
histograms the next 16 bits inside the bucket that holds each wanted rank, or,
once such a bucket holds at most ``collect_limit`` keys, collects them and picks
the rank by sorting. Memory is O(chunk + 65536 x ranks + collect_limit x ranks).

Floating-point values become keys through :func:`order_keys`, whose integer order
is the values' order; :func:`keys_to_values` turns keys back into values.
"""
from __future__ import annotations

from typing import Dict, Iterable, Iterator, List, Optional, Sequence, Tuple

import torch
from torch import Tensor

_DIGIT_BITS = 16
_DIGIT_SIZE = 1 << _DIGIT_BITS
_FLOAT_BITS_DTYPE = {torch.float16: torch.int16, torch.bfloat16: torch.int16, torch.float32: torch.int32, torch.float64: torch.int64}


# ----------------------------------------------------------------------------- keys


def order_keys(v: Tensor) -> Tensor:
    """int64 keys whose order is the values' order (floats: IEEE bits, negatives flipped).

    ``-0.0`` and ``0.0`` get one key (that of ``0.0``).

    Example:
        >>> v = torch.tensor([-2.5, -0.0, 0.0, 1e-30, 3.0])
        >>> keys = order_keys(v)
        >>> bool((keys[1:] >= keys[:-1]).all()), bool(keys[1] == keys[2])
        (True, True)
    """
    if not v.is_floating_point():
        return v.to(torch.int64)
    v = v + 0  # -0.0 -> +0.0, so equal values get one key
    width = v.element_size() * 8
    bits = v.view(_FLOAT_BITS_DTYPE[v.dtype]).to(torch.int64)  # sign-extended
    return torch.where(bits < 0, bits ^ ((1 << (width - 1)) - 1), bits)


def keys_to_values(keys: Tensor, dtype: torch.dtype) -> Tensor:
    """The values of ``dtype`` whose :func:`order_keys` are ``keys``.

    Example:
        >>> v = torch.tensor([-2.5, 0.0, 3.0])
        >>> keys_to_values(order_keys(v), torch.float32).tolist()
        [-2.5, 0.0, 3.0]
    """
    if not dtype.is_floating_point:
        return keys.to(dtype)
    width = torch.empty((), dtype=dtype).element_size() * 8
    bits = torch.where(keys < 0, keys ^ ((1 << (width - 1)) - 1), keys)
    return bits.to(_FLOAT_BITS_DTYPE[dtype]).view(dtype)


def key_width(dtype: torch.dtype) -> int:
    """Bits of the keys of ``dtype``, rounded up to whole 16-bit digits."""
    size = torch.empty((), dtype=dtype).element_size() * 8
    return max(_DIGIT_BITS, -(-size // _DIGIT_BITS) * _DIGIT_BITS)


def top_digit_histogram(keys: Tensor, width: int) -> Tensor:
    """``int64 [65536]`` counts of the keys' top 16 bits (signed, so offset by half)."""
    digit = (keys >> (width - _DIGIT_BITS)) + (_DIGIT_SIZE // 2)
    return torch.bincount(digit, minlength=_DIGIT_SIZE)


# ----------------------------------------------------------------------------- selection


class _RankState:
    """Radix-select state of one wanted rank: ``key >> shift == prefix`` holds it, ``below`` keys are smaller."""

    __slots__ = ("rank", "shift", "prefix", "below", "count", "value")

    def __init__(self, rank: int, width: int) -> None:
        self.rank = rank
        self.shift = width  # bits still unknown
        self.prefix = 0
        self.below = 0
        self.count = -1  # keys in the bucket (unknown before the first pass)
        self.value: Optional[int] = None  # the key, once known


def _descend(group: List[_RankState], h: Tensor, width: int) -> None:
    """Pick each rank's next digit from its bucket's histogram ``h [65536]``."""
    cum = torch.cumsum(h, 0)
    targets = torch.tensor([s.rank - s.below for s in group], dtype=torch.int64, device=h.device)
    d = torch.searchsorted(cum, targets, right=True)
    before = torch.where(d > 0, cum[(d - 1).clamp_min(0)], torch.zeros_like(d))
    cnt = h[d]
    for s, di, bi, ci in zip(group, d.tolist(), before.tolist(), cnt.tolist()):
        s.shift -= _DIGIT_BITS
        # the top digit is signed (offset by half), the others are not
        s.prefix = (di - _DIGIT_SIZE // 2) if s.shift == width - _DIGIT_BITS else (s.prefix << _DIGIT_BITS) | di
        s.below += bi
        s.count = ci
        if s.shift == 0:
            s.value = s.prefix


class _BucketPass:
    """One refinement pass over the keys, for the ranks not yet known.

    Ranks that share a bucket are served together. A bucket with more than
    ``collect_limit`` keys gets a histogram of its next digit; a smaller one has its
    keys collected.
    """

    def __init__(self, states: Iterable[_RankState], collect_limit: int, width: int, device) -> None:
        self.width = width
        self.buckets: Dict[Tuple[int, int], List[_RankState]] = {}
        for s in states:
            if s.value is None:  # all open ranks have the same shift: one digit per pass
                self.buckets.setdefault((s.shift, s.prefix), []).append(s)
        self.radix = [b for b in self.buckets if self.buckets[b][0].count > collect_limit]
        self.collect = [b for b in self.buckets if self.buckets[b][0].count <= collect_limit]
        as_tensor = lambda values: torch.tensor(values, dtype=torch.int64, device=device)
        self.r_shift = as_tensor([b[0] for b in self.radix])
        self.r_pref = as_tensor([b[1] for b in self.radix])
        self.c_shift = as_tensor([b[0] for b in self.collect])
        self.c_pref = as_tensor([b[1] for b in self.collect])
        self.hists = torch.zeros(len(self.radix) * _DIGIT_SIZE, dtype=torch.int64, device=device)
        self.gathered: List[List[Tensor]] = [[] for _ in self.collect]

    def add(self, keys: Tensor) -> None:
        """Count (or collect) one chunk of keys."""
        if self.radix:
            match = (keys.unsqueeze(0) >> self.r_shift.unsqueeze(1)) == self.r_pref.unsqueeze(1)  # [G, c]
            g, j = torch.nonzero(match, as_tuple=True)
            digit = (keys[j] >> (self.r_shift[g] - _DIGIT_BITS)) & (_DIGIT_SIZE - 1)
            self.hists += torch.bincount(g * _DIGIT_SIZE + digit, minlength=self.hists.numel())
        if self.collect:
            match = (keys.unsqueeze(0) >> self.c_shift.unsqueeze(1)) == self.c_pref.unsqueeze(1)
            for gi in range(len(self.collect)):
                self.gathered[gi].append(keys[match[gi]])

    def finish(self, number: int) -> None:
        """Move every served rank one digit down, or settle it from the collected keys."""
        for gi, b in enumerate(self.radix):
            _descend(self.buckets[b], self.hists[gi * _DIGIT_SIZE : (gi + 1) * _DIGIT_SIZE], self.width)
        for gi, b in enumerate(self.collect):
            chunks = self.gathered[gi]
            found = torch.sort(torch.cat(chunks)).values if chunks else torch.empty(0, dtype=torch.int64)
            group = self.buckets[b]
            if found.numel() != group[0].count:
                raise ValueError(
                    f"make_chunks() must yield the same data on every call; pass {number} found "
                    f"{found.numel()} values in a bucket that held {group[0].count}"
                )
            idx = torch.tensor([s.rank - s.below for s in group], dtype=torch.int64, device=found.device)
            for s, v in zip(group, found[idx].tolist()):
                s.value = v


def select_ranks(
    ranks: Sequence[int],
    top_histogram: Tensor,
    width: int,
    key_passes: Iterator[Tuple[int, Iterable[Tensor]]],
    collect_limit: int,
) -> Dict[int, int]:
    """``{rank: key}`` for the 0-based ``ranks`` of the sorted keys.

    ``top_histogram`` is the first pass (:func:`top_digit_histogram` summed over all
    keys, of ``width`` bits); ``key_passes`` yields ``(pass number, chunks of int64
    keys)``, one item per further pass, each seeing the same keys.

    Example:
        >>> keys = torch.tensor([70000, -5, 3, 3, 1 << 40, 9])
        >>> passes = ((n, [keys[:2], keys[2:]]) for n in range(2, 10))
        >>> select_ranks([0, 2, 5], top_digit_histogram(keys, 64), 64, passes, collect_limit=1)
        {0: -5, 2: 3, 5: 1099511627776}
    """
    states = [_RankState(r, width) for r in sorted(set(ranks))]
    _descend(states, top_histogram, width)
    while any(s.value is None for s in states):
        number, chunks = next(key_passes)
        refinement = _BucketPass(states, collect_limit, width, top_histogram.device)
        for keys in chunks:
            refinement.add(keys)
        refinement.finish(number)
    return {s.rank: s.value for s in states}
