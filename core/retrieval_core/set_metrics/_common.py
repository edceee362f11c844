"""Input checks and the chunk size shared by the set metrics."""
from __future__ import annotations

from numbers import Integral, Real
from typing import List, Optional, Tuple

import torch
from torch import Tensor

_CHUNK_ELEMENTS = 1 << 20  # scratch elements per chunk of a [rows, k] block
_INT_DTYPES = (torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64)


def _chunk_rows(n_cols: int) -> int:
    """Rows per chunk of a ``[rows, n_cols]`` scratch block."""
    return max(1, _CHUNK_ELEMENTS // max(1, n_cols))


def _check_tensor(name: str, value) -> Tensor:
    if not isinstance(value, Tensor):
        raise TypeError(f"{name} must be a torch.Tensor; got {type(value).__name__}")
    return value


def _check_int(name: str, value, minimum: Optional[int] = None) -> int:
    if isinstance(value, bool) or not isinstance(value, Integral):
        raise TypeError(f"{name} must be an int; got {type(value).__name__}")
    value = int(value)
    if minimum is not None and value < minimum:
        raise ValueError(f"{name} must be >= {minimum}; got {value}")
    return value


def _check_real_dtype(name: str, t: Tensor) -> None:
    """A floating-point or integer tensor (not bool, not complex)."""
    if t.dtype == torch.bool or t.is_complex() or not (t.is_floating_point() or t.dtype in _INT_DTYPES):
        raise TypeError(f"{name} must be a floating-point or integer tensor; got {t.dtype}")


def _check_finite(name: str, t: Tensor) -> None:
    """Raise if a floating ``t`` holds NaN or +-inf.

    Fast path: a sum with a non-finite term is non-finite in IEEE arithmetic (NaN and
    +-inf absorb every addition, +inf plus -inf is NaN), whatever the summation order,
    so a finite ``t.sum()`` proves every element finite; a non-finite sum (a non-finite
    element, or finite ones overflowing) falls back to the element-wise test.
    """
    if not t.is_floating_point() or bool(torch.isfinite(t.sum())):
        return
    if not bool(torch.isfinite(t).all()):
        raise ValueError(f"{name} must not contain NaN or infinite values")


def _check_fractions(name: str, values) -> Tuple[List[float], bool]:
    """A float, or a non-empty sequence of floats, each in [0, 1]. Returns (list, was_scalar)."""
    expected = f"{name} must be a float in [0, 1] or a sequence of them"
    if isinstance(values, Tensor):
        if values.dtype == torch.bool or values.is_complex() or values.ndim > 1:
            raise TypeError(f"{expected}; got a {values.dtype} tensor of shape {tuple(values.shape)}")
        scalar = values.ndim == 0
        seq = values.reshape(-1).tolist()
    elif isinstance(values, Real) and not isinstance(values, bool):
        scalar, seq = True, [values]
    elif isinstance(values, (str, bytes, bool)) or not hasattr(values, "__iter__"):
        raise TypeError(f"{expected}; got {type(values).__name__}")
    else:
        scalar, seq = False, list(values)
    out: List[float] = []
    for v in seq:
        if isinstance(v, bool) or not isinstance(v, Real):
            raise TypeError(f"{name} must contain real numbers; got {type(v).__name__} in {values!r}")
        f = float(v)
        if not (0.0 <= f <= 1.0):  # also rejects NaN
            raise ValueError(f"{name} must be in [0, 1] (a fraction, not a percent); got {v!r} in {values!r}")
        out.append(f)
    if not out:
        raise ValueError(f"{name} must not be empty; got {values!r}")
    return out, scalar
