"""What the ignite adapters share: reading the engine's output (tuples or mappings
with optional keys), the metric's name on the core's messages, and the hooks that
run the core's framework-neutral accumulator (``retrieval_core.evaluation.accumulator``):
``reset`` makes its state, ``update`` checks and appends a batch, ``compute`` syncs
the ranks' states (options agreed, rows gathered) and computes.

No metric math and no input checks of their own here.
"""
from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping, Sequence
from contextlib import contextmanager
from numbers import Number
from typing import Any, Callable, Dict, Iterator, Optional, Tuple, Union

import torch
from torch import Tensor

try:
    from ignite.exceptions import NotComputableError
    from ignite.metrics.metric import Metric, reinit__is_reduced
except ImportError as error:  # pragma: no cover - exercised only without ignite
    raise ImportError(
        "ignite_retrieval needs PyTorch-Ignite: pip install 'retrieval-metrics[ignite]'"
    ) from error

from retrieval_core.evaluation.accumulator import Accumulator, Synced

__all__ = ["RetrievalMetric", "NotComputableError", "to_python"]

Device = Union[str, torch.device]


def _identity(x: Any) -> Any:
    return x


def _is_list_of_tensors_or_numbers(x: Any) -> bool:
    return isinstance(x, Sequence) and not isinstance(x, (str, bytes)) and all(
        isinstance(t, (Tensor, Number)) for t in x
    )


def _batched(x: Union[Tensor, Number], device=None) -> Tensor:
    return x.unsqueeze(0) if isinstance(x, Tensor) else torch.tensor([x], device=device)


def _copy_state(x: Any) -> Any:
    """A copy that later updates (appends, in-place sums) cannot change."""
    if isinstance(x, Tensor):
        return x.clone()
    if isinstance(x, dict):
        return {k: _copy_state(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return type(x)(_copy_state(v) for v in x)
    return x


def to_python(values: Mapping) -> Dict[str, Any]:
    """``{key: float}`` (0-d tensors) or ``{key: list}`` (reduce="none") on the host,
    with one device-to-host copy for all scalar results."""
    keys = list(values)
    scalars = [k for k in keys if values[k].ndim == 0]
    out: Dict[str, Any] = {}
    if scalars:
        host = torch.stack([values[k].to(torch.float64) for k in scalars]).tolist()
        out.update(zip(scalars, host))
    return {k: out[k] if k in out else values[k].tolist() for k in keys}


class RetrievalMetric(Metric):
    """Base of the adapters: an ignite ``Metric`` over an accumulator, whose ``update``
    takes a tuple of the required inputs or a mapping with required and optional keys.

    Subclasses set ``_required`` / ``_optional`` (names of the inputs, as the
    accumulator's ``update`` takes them after its state: the required ones in order;
    ``_per_batch``: optional inputs that any batch may give or not) and pass their
    accumulator (built with ``strict_inputs=True`` and ``device``) to ``__init__``.
    """

    _required: Tuple[str, ...] = ()
    _optional: Tuple[str, ...] = ()
    # optional inputs of one batch only (not states): any batch may give them or not
    _per_batch: Tuple[str, ...] = ()
    # The keys a mapping output must hold (ignite's attribute; subclasses set it to
    # _required). ignite's own handling of it cannot take optional keys, so mappings
    # are read here, in iteration_completed and update.
    required_output_keys: Optional[Tuple[str, ...]] = None

    def __init__(
        self,
        accumulator: Accumulator,
        output_transform: Callable = _identity,
        device: Device = torch.device("cpu"),
        skip_unrolling: bool = False,
    ) -> None:
        self.accumulator = accumulator
        super().__init__(output_transform=output_transform, device=device, skip_unrolling=skip_unrolling)

    # -- the accumulator's hooks ----------------------------------------------------

    @reinit__is_reduced
    def reset(self) -> None:
        self._state: Dict[str, Any] = self.accumulator.new_state(self._device)

    @reinit__is_reduced
    def update(self, output: Any) -> None:
        fields = self._fields(output)
        with self._named_errors():
            self.accumulator.update(self._state, *(fields[k] for k in self._required), device=self._device,
                                    **{k: fields[k] for k in self._optional + self._per_batch}, **self._update_options())

    def _update_options(self) -> Dict[str, Any]:
        """More keywords of the accumulator's ``update`` (a drop-in's ``prepare``)."""
        return {}

    def _sync(self) -> Synced:
        """Every rank's state (the same on every rank); ``NotComputableError`` when no rank saw a row."""
        synced = self.accumulator.sync(self._state, self._agreed_options(), what=self._name(), device=self._device)
        if synced.rows == 0:
            raise NotComputableError(f"{self._name()} must have at least one example before it can be computed.")
        return synced

    def _agreed_options(self) -> Dict[str, Any]:
        """The constructor's options that change the result, which every rank must
        give alike (``output_transform``, ``device`` and ``skip_unrolling`` are each rank's own)."""
        return {"metric": type(self).__qualname__, **self.accumulator.agreed_options()}

    # -- checkpointing ------------------------------------------------------------
    # ignite's own loader cannot refill lists that change length (batches seen), so the
    # per-rank state is saved and restored whole here (ignite's per-rank format).
    _state_attributes: Tuple[str, ...] = ("_state",)

    def _state_dict_per_rank(self) -> OrderedDict:
        return OrderedDict((k, _copy_state(getattr(self, k))) for k in self._state_attributes)

    def _load_state_dict_per_rank(self, state_dict: Mapping) -> None:
        missing = [k for k in self._state_attributes if k not in state_dict]
        if missing:
            raise ValueError(f"{self._name()}: state_dict lacks {missing}; expected keys {list(self._state_attributes)}")
        for k in self._state_attributes:
            setattr(self, k, _copy_state(state_dict[k]))
        # a checkpoint written before an entry existed (EmbeddingMetrics' exclusions): that entry empty
        self._state = {**self.accumulator.new_state(self._device), **self._state}
        if "_result" in self.__dict__:
            self._result = None

    # -- reading the engine's output -----------------------------------------

    def iteration_completed(self, engine) -> None:
        """Take ``engine.state.output`` (after ``output_transform``) as a tuple of the
        required inputs or a mapping that may also hold the optional keys.

        ignite's own ``required_output_keys`` can only pick a fixed set of keys, so a
        mapping goes to :meth:`update` whole. Tuples of per-sample lists are unrolled
        as ignite does (unless ``skip_unrolling``).
        """
        output = self._output_transform(engine.state.output)
        if isinstance(output, Mapping):
            self.update(output)
            return
        if (
            not self._skip_unrolling
            and isinstance(output, Sequence)
            and len(output) > 0
            and all(_is_list_of_tensors_or_numbers(o) for o in output)
        ):
            n = len(self._required)
            if not (len(output) == n and all(len(o) == len(output[0]) for o in output)):
                raise ValueError(
                    f"{self._name()}: output of per-sample lists should have {n} items of the same length; "
                    f"got {len(output)} items of lengths {[len(o) for o in output]}"
                )
            for sample in zip(*output):
                first = _batched(sample[0])
                self.update(tuple([first] + [_batched(s, device=first.device) for s in sample[1:]]))
            return
        self.update(output)

    def _name(self) -> str:
        return type(self).__name__

    def _expected(self) -> str:
        req = ", ".join(self._required)
        keys = ", ".join(repr(k) for k in self._required)
        opt = ", ".join(repr(k) for k in self._optional + self._per_batch)
        more = f" (optional: {opt})" if opt else ""
        return f"({req}) or a mapping with keys {keys}{more}"

    def _fields(self, output: Any) -> Dict[str, Optional[Tensor]]:
        """Every input name mapped to its value (None for an absent optional one)."""
        names = self._required + self._optional + self._per_batch
        if isinstance(output, Mapping):
            missing = [k for k in self._required if k not in output]
            if missing:
                raise ValueError(
                    f"{self._name()}: the output mapping lacks {', '.join(repr(k) for k in missing)}; "
                    f"expected {self._expected()}; got keys {list(output.keys())}"
                )
            return {k: output.get(k) for k in names}
        if isinstance(output, (tuple, list)):
            if len(output) != len(self._required):
                raise ValueError(
                    f"{self._name()}: expected output {self._expected()}; "
                    f"got a {type(output).__name__} of {len(output)} items"
                )
            fields = dict(zip(self._required, output))
            fields.update((k, None) for k in self._optional + self._per_batch)
            return fields
        raise TypeError(f"{self._name()}: expected output {self._expected()}; got {type(output).__name__}")

    @contextmanager
    def _named_errors(self) -> Iterator[None]:
        """The core's check errors with this metric's name in front (same exception type)."""
        try:
            yield
        except (TypeError, ValueError, NotImplementedError) as error:
            if type(error) not in (TypeError, ValueError, NotImplementedError):
                raise
            raise type(error)(f"{self._name()}: {error}") from None
