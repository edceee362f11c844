"""Run a computation on a device and check it against the same computation on CPU.

Used with the ``device`` fixture of tests/conftest.py: on CPU :func:`on_device` is a
plain call; on CUDA it runs the function twice (device and CPU inputs) and asserts
that the results agree and that every result tensor stayed on the device.
"""
from __future__ import annotations

import copy
import dataclasses
from typing import Any, Callable

import torch
from torch import Tensor

# float64 kernels on CUDA may differ from CPU's in the last bits (summation order, log2)
FLOAT64_ATOL = 1e-12


def move(obj: Any, device) -> Any:
    """``obj`` with every tensor inside (tuples, lists, dicts, dataclasses) moved to ``device``."""
    if isinstance(obj, Tensor):
        return obj.to(device)
    if isinstance(obj, tuple) and not hasattr(obj, "_fields"):
        return tuple(move(x, device) for x in obj)
    if isinstance(obj, list):
        return [move(x, device) for x in obj]
    if isinstance(obj, dict):
        out = copy.copy(obj)  # keeps the class (MetricResults) and its attributes
        for k, v in obj.items():
            out[k] = move(v, device)
        for name, value in getattr(obj, "__dict__", {}).items():
            setattr(out, name, move(value, device))
        return out
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        out = copy.copy(obj)
        for f in dataclasses.fields(obj):
            setattr(out, f.name, move(getattr(obj, f.name), device))
        return out
    return obj


def assert_same(got: Any, want: Any, device, atol: float = FLOAT64_ATOL, where: str = "result") -> None:
    """``got`` (computed on ``device``) equals ``want`` (computed on CPU): integer and bool
    tensors exactly, floating ones within ``atol`` with NaN at the same places."""
    if isinstance(want, Tensor):
        assert isinstance(got, Tensor), f"{where}: {type(got).__name__} instead of a tensor"
        assert got.device.type == torch.device(device).type, f"{where}: on {got.device}, not on {device}"
        assert got.dtype == want.dtype and got.shape == want.shape, (
            f"{where}: {got.dtype} {tuple(got.shape)} on {device}, {want.dtype} {tuple(want.shape)} on CPU")
        got = got.cpu()
        if want.is_floating_point():
            assert torch.equal(torch.isnan(got), torch.isnan(want)), f"{where}: NaN at other places"
            keep = ~torch.isnan(want)
            torch.testing.assert_close(got[keep], want[keep], atol=atol, rtol=0, msg=f"{where}: values differ")
        else:
            assert torch.equal(got, want), f"{where}: {got} on {device}, {want} on CPU"
        return
    if isinstance(want, dict):
        assert type(got) is type(want) and list(got) == list(want), f"{where}: keys {list(got)} vs {list(want)}"
        for k in want:
            assert_same(got[k], want[k], device, atol, f"{where}[{k!r}]")
        for name, value in getattr(want, "__dict__", {}).items():
            assert_same(getattr(got, name), value, device, atol, f"{where}.{name}")
        return
    if isinstance(want, (tuple, list)):
        assert type(got) is type(want) and len(got) == len(want), f"{where}: {type(got).__name__} of {len(got)}"
        for i, (a, b) in enumerate(zip(got, want)):
            assert_same(a, b, device, atol, f"{where}[{i}]")
        return
    if dataclasses.is_dataclass(want) and not isinstance(want, type):
        assert type(got) is type(want), f"{where}: {type(got).__name__} vs {type(want).__name__}"
        for f in dataclasses.fields(want):
            assert_same(getattr(got, f.name), getattr(want, f.name), device, atol, f"{where}.{f.name}")
        return
    assert got == want, f"{where}: {got!r} on {device}, {want!r} on CPU"


def on_device(device, fn: Callable[..., Any], *args, atol: float = FLOAT64_ATOL, **kwargs) -> Any:
    """``fn(*args, **kwargs)`` with every tensor argument moved to ``device``; the result
    comes back on CPU. Off CPU, also runs ``fn`` on the CPU arguments and asserts the
    two results agree (see :func:`assert_same`) and stayed on ``device``."""
    device = torch.device(device)
    got = fn(*move(args, device), **move(kwargs, device))
    if device.type == "cpu":
        return got
    want = fn(*move(args, "cpu"), **move(kwargs, "cpu"))
    assert_same(got, want, device, atol)
    return move(got, "cpu")
