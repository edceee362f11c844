"""What the processes of a distributed evaluation must agree on: their options.

Every option that changes a result, or the shape of a later collective, must be
the same on every rank; otherwise the ranks would mix values computed under
different options, or wait in collectives of different shapes. Each rank writes
its options as text (:func:`option_texts`, the same text on every process for
the same value), the texts travel in one exchange
(:func:`retrieval_core.distributed.agree`) and :func:`disagreement` words the
differences, the same on every rank.

No collective here: pure functions of the values.
"""
from __future__ import annotations

import functools
import hashlib
import numbers
import types
from typing import Any, Dict, List, Mapping, Optional

import torch
from torch import Tensor

__all__ = ["canonical", "option_texts", "disagreement"]

_SHOWN_CHARS = 80  # longer texts are shown cut, with a digest of the whole
_DEPTH = 4  # nesting followed into containers, closures and defaults


def _digest(data: bytes) -> str:
    return hashlib.sha1(data).hexdigest()[:12]


def _number(x: numbers.Real) -> str:
    if isinstance(x, numbers.Integral):
        return repr(int(x))
    f = float(x)
    return repr(int(f)) if f.is_integer() and abs(f) < 2**53 else repr(f)  # 1 and 1.0 give the same results


def _code(code: types.CodeType, depth: int) -> str:
    """A function's code: bytecode, names and constants (nested code included)."""
    consts = [_code(c, depth - 1) if isinstance(c, types.CodeType) else canonical(c, depth - 1)
              for c in code.co_consts]
    return _digest(code.co_code + repr((code.co_names, consts)).encode())


def _callable(fn: Any, depth: int) -> str:
    if isinstance(fn, functools.partial):
        return (f"partial({canonical(fn.func, depth - 1)}, {canonical(fn.args, depth - 1)}, "
                f"{canonical(fn.keywords, depth - 1)})")
    owner = getattr(fn, "__self__", None)
    if isinstance(fn, types.MethodType):
        return f"method({canonical(fn.__func__, depth - 1)} of {canonical(owner, depth - 1)})"
    name = getattr(fn, "__qualname__", None) or type(fn).__qualname__
    module = getattr(fn, "__module__", None) or type(fn).__module__
    text = f"{module}.{name}"
    if isinstance(fn, types.FunctionType) and depth > 0:
        # two lambdas share a name: their code tells them apart. What a closure
        # captures is each rank's own (its device, its rank) and is not compared.
        defaults = canonical([fn.__defaults__, fn.__kwdefaults__], depth - 1)
        text += f" [code {_code(fn.__code__, depth - 1)}, defaults {_digest(defaults.encode())}]"
    return f"<{text}>"


def canonical(value: Any, depth: int = _DEPTH) -> str:
    """Text of an option value, the same on every process for the same value:
    numbers (``1`` and ``1.0`` alike), strings, containers (mappings by key),
    tensors (dtype, shape and a digest of the bytes; not the device), callables
    (qualified name; for Python functions also a digest of the code and defaults,
    so two lambdas of one place differ, but not what a closure captures, which
    may be each rank's own: its device, its rank), other objects by type (and
    ``repr`` when it holds no address). Devices are each rank's own: all alike.

    Example:
        >>> canonical({"k": [1, 2.0, None], "ties": "stable"})
        "{'k': [1, 2, None], 'ties': 'stable'}"
    """
    if value is None or isinstance(value, (bool, str, bytes)):
        return repr(value)
    if isinstance(value, numbers.Real):
        return _number(value)
    if depth < 0:
        return f"<{type(value).__qualname__}>"
    if isinstance(value, Tensor):
        t = value.detach().to("cpu").contiguous().reshape(-1)
        return f"tensor({t.dtype}, {tuple(value.shape)}, {_digest(t.view(torch.uint8).numpy().tobytes())})"
    if isinstance(value, torch.device):
        return "<a device>"  # each rank's own (cuda:0, cuda:1, ...)
    if isinstance(value, torch.dtype):
        return str(value)
    if isinstance(value, Mapping):
        items = sorted((canonical(k, depth - 1), canonical(v, depth - 1)) for k, v in value.items())
        return "{" + ", ".join(f"{k}: {v}" for k, v in items) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(canonical(v, depth - 1) for v in value) + "]"
    if isinstance(value, (set, frozenset)):
        return "{" + ", ".join(sorted(canonical(v, depth - 1) for v in value)) + "}"
    if callable(value):
        return _callable(value, depth)
    text = repr(value)
    kind = f"{type(value).__module__}.{type(value).__qualname__}"
    return f"<{kind}>" if " at 0x" in text else f"<{kind} {text}>"


def _shown(text: str) -> str:
    if len(text) <= _SHOWN_CHARS:
        return text
    return f"{text[:_SHOWN_CHARS - 20]}... (digest {_digest(text.encode())})"


def option_texts(options: Mapping[str, Any]) -> Dict[str, str]:
    """``{name: text}`` of ``options`` (:func:`canonical`), what ranks exchange."""
    return {name: _shown(_safe(value)) for name, value in options.items()}


def _safe(value: Any) -> str:
    try:
        return canonical(value)
    except Exception:  # noqa: BLE001 - a value that cannot be read still travels: no rank may stop here
        return f"<{type(value).__module__}.{type(value).__qualname__}, unreadable>"


def _ranks(ranks: List[int]) -> str:
    if len(ranks) == 1:
        return f"rank {ranks[0]}"
    return f"ranks {', '.join(map(str, ranks[:-1]))} and {ranks[-1]}"


def disagreement(every: List[Optional[Mapping[str, str]]], what: str) -> Optional[str]:
    """The message naming the options that differ between ranks (``every``: each
    rank's :func:`option_texts`), or None when they all agree.

    Example:
        >>> disagreement([{"ties": "'stable'"}, {"ties": "'expected'"}], "evaluate")
        "evaluate: the processes were given different options (each must be the same on every process): ties: 'stable' on rank 0 vs 'expected' on rank 1"
    """
    every = [dict(e or {}) for e in every]
    names: List[str] = []
    for e in every:  # the first rank's order, then names only some ranks have
        names += [n for n in e if n not in names]
    parts = []
    for name in names:
        texts = [e.get(name, "<not given>") for e in every]
        if len(set(texts)) < 2:
            continue
        by_text: Dict[str, List[int]] = {}
        for rank, text in enumerate(texts):
            by_text.setdefault(text, []).append(rank)
        parts.append(f"{name}: " + " vs ".join(f"{text} on {_ranks(r)}" for text, r in by_text.items()))
    if not parts:
        return None
    return (f"{what}: the processes were given different options (each must be the same on every process): "
            + "; ".join(parts))
