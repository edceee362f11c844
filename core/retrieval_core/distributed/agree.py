"""Agreement across ranks: a local step that fails on one rank fails on all; options that must match do."""
from __future__ import annotations

import json
from typing import Any, Callable, Dict, List, Optional, Tuple

import torch
import torch.distributed as dist
from torch import Tensor

from .agreement import disagreement, option_texts
from .collectives import gather_per_rank, world_size

__all__ = ["exchange_text", "agree", "agree_options"]

# -- agreement: the same error on every rank ------------------------------------------

# exceptions re-raised with their own type on the ranks where they did not happen
_RAISED = {t.__name__: t for t in (ValueError, TypeError, NotImplementedError, ImportError, RuntimeError)}


def _comm_device(hint, group) -> torch.device:
    """Where the small exchanges of this module live: ``hint``'s device, else the
    backend's (nccl moves CUDA tensors only)."""
    if isinstance(hint, Tensor):
        return hint.device
    if dist.get_backend(group) == "nccl":
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


def exchange_text(text: str, group=None, device=None) -> List[str]:
    """Every rank's ``text``, in rank order (one gather of its UTF-8 bytes).

    Example:
        >>> exchange_text("hello")  # one process
        ['hello']
    """
    if world_size(group) == 1:
        return [text]
    data = torch.tensor(list(text.encode("utf-8")), dtype=torch.uint8, device=device)
    return [bytes(t.tolist()).decode("utf-8") for t in gather_per_rank(data, group)]


def agree(fn: Callable[[], Tuple[Any, Any]], *, group=None, device=None, options: Optional[Dict[str, Any]] = None,
          what: str = "distributed") -> Tuple[Any, List[Any]]:
    """Run ``fn() -> (result, info)`` on every rank (``fn`` itself holds no
    collective); returns ``(result, [info of each rank])`` (``info``: anything JSON
    writes). When ``fn`` raised on any rank, every rank raises: a rank's own
    exception when it raised on every rank, else the first failing rank's error
    with its type (ValueError, TypeError, ... ; RuntimeError for others) and
    message, plus ``(raised on rank r of n)``.

    ``options`` (``{name: value}``) travel in the same exchange: when they differ
    between ranks, every rank raises a ``ValueError`` (rank 0's ``what`` first) naming
    each option that differs and its value on each rank, before ``fn``'s errors
    (see :mod:`retrieval_core.distributed.agreement`).

    Example:
        >>> agree(lambda: (3, {"rows": 3}))  # one process
        (3, [{'rows': 3}])
    """
    n = world_size(group)
    if n == 1:
        result, info = fn()
        return result, [info]
    texts = None if options is None else [what, option_texts(options)]  # before fn: a bad value still shows
    error: Optional[Exception] = None
    try:
        result, info = fn()
    except Exception as exc:  # noqa: BLE001 - every rank learns of it and raises
        result, info, error = None, None, exc
    mine = json.dumps([None if error is None else [type(error).__name__, str(error)], info, texts])
    every = [json.loads(t) for t in exchange_text(mine, group, device)]
    # rank 0's words, so that the message is the same on every rank
    differ = disagreement([o and o[1] for _, _, o in every], (every[0][2] or [what])[0]) if options else None
    if differ:
        raise ValueError(differ) from error
    failed = [(r, e) for r, (e, _, _) in enumerate(every) if e is not None]
    if failed:
        if error is not None and len(failed) == n:
            raise error
        r, (name, message) = failed[0]
        text = f"{message} (raised on rank {r} of {n})"
        kind = _RAISED.get(name)
        raise (kind(text) if kind is not None else RuntimeError(f"{name}: {text}")) from error
    return result, [i for _, i, _ in every]


def agree_options(options: Dict[str, Any], *, what: str, group=None, device=None) -> None:
    """Raise the same ``ValueError`` on every rank when ``options`` differ between
    ranks (one exchange; nothing without a process group). Call it before any
    collective whose shape depends on them.

    Example:
        >>> agree_options({"ties": "stable", "k": [1, 5]}, what="MyMetric")  # one process: nothing to compare
    """
    if world_size(group) > 1:
        device = torch.device(device) if device is not None else _comm_device(None, group)
        agree(lambda: (None, None), group=group, device=device, options=options, what=what)
