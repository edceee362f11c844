"""What the ignite adapters share: reading the engine's output (tuples or mappings
with optional keys), the metric's name on the core's input checks, and the
agreement between ranks on which optional inputs were given, so that every rank
enters the same collectives (core.distributed) and none hangs.

No metric math and no input checks of their own here: checks come from
retrieval_core.validate, update-side and compute-side steps from retrieval_core.
"""
from __future__ import annotations

import warnings
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from contextlib import contextmanager
from numbers import Number
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple, Union

import torch
from torch import Tensor

try:
    from ignite.exceptions import NotComputableError
    from ignite.metrics.metric import Metric
except ImportError as error:  # pragma: no cover - exercised only without ignite
    raise ImportError(
        "ignite_retrieval needs PyTorch-Ignite: pip install 'retrieval-metrics[ignite]'"
    ) from error

from retrieval_core.distributed.agree import agree_options
from retrieval_core.distributed.collectives import all_reduce_sum, rank_of, world_size
from retrieval_core.validate import as_tensors, check_device_available

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
    """Base of the adapters: an ignite ``Metric`` whose ``update`` takes a tuple of the
    required inputs or a mapping with required and optional keys.

    Subclasses set ``_required`` / ``_optional`` (names of the inputs; ``_per_batch``:
    optional inputs that any batch may give or not, never gathered) and
    ``_state_attributes`` (what ``state_dict()`` saves); their ``update`` reads the
    output with :meth:`_parse` (every name mapped to a value or None) and their
    ``compute`` starts with :meth:`_agree`: the ranks' options must agree, then one
    collective tells every rank which optional inputs were given and whether
    anything was seen at all.
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
        output_transform: Callable = _identity,
        device: Device = torch.device("cpu"),
        skip_unrolling: bool = False,
    ) -> None:
        check_device_available("device", torch.device(device))  # one line, not torch's bare AssertionError
        super().__init__(output_transform=output_transform, device=device, skip_unrolling=skip_unrolling)

    # -- checkpointing ------------------------------------------------------------
    # State attributes saved by ``state_dict()`` (ignite's per-rank format). ignite's
    # own loader cannot refill lists that change length (batches seen), so the
    # per-rank state is saved and restored whole here.
    _state_attributes: Tuple[str, ...] = ()

    def _state_dict_per_rank(self) -> OrderedDict:
        return OrderedDict((k, _copy_state(getattr(self, k))) for k in self._state_attributes)

    def _load_state_dict_per_rank(self, state_dict: Mapping) -> None:
        missing = [k for k in self._state_attributes if k not in state_dict]
        if missing:
            raise ValueError(f"{self._name()}: state_dict lacks {missing}; expected keys {list(self._state_attributes)}")
        for k in self._state_attributes:
            setattr(self, k, _copy_state(state_dict[k]))
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

    # NumPy arrays in the output become tensors (retrieval_core.validate.as_tensors); the
    # drop-ins of ignite's own metrics keep ignite's refusal
    _takes_numpy = True

    def _parse(self, output: Any) -> Dict[str, Optional[Tensor]]:
        """Every input name mapped to its value (None for an absent optional one), NumPy
        arrays as tensors on the device of the output's tensors (else the metric's)."""
        fields = self._fields(output)
        if not self._takes_numpy:
            return fields
        with self._named_errors():
            return dict(zip(fields, as_tensors(device=self._device, **fields)))

    def _fields(self, output: Any) -> Dict[str, Optional[Tensor]]:
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

    # -- per-batch checks --------------------------------------------------------

    @contextmanager
    def _named_errors(self) -> Iterator[None]:
        """The core's check errors with this metric's name in front (same exception type)."""
        try:
            yield
        except (TypeError, ValueError, NotImplementedError) as error:
            if type(error) not in (TypeError, ValueError, NotImplementedError):
                raise
            raise type(error)(f"{self._name()}: {error}") from None

    def _check_present(self, fields: Mapping) -> None:
        """Optional inputs must be given in every batch or in none (of this rank)."""
        present = {k: fields[k] is not None for k in self._optional}
        if self._present is None:
            self._present = present
            return
        for k in self._optional:
            if present[k] != self._present[k]:
                before, now = ("given", "missing") if self._present[k] else ("missing", "given")
                raise ValueError(
                    f"{self._name()}: {k!r} was {before} in earlier batches and is {now} in this one; "
                    "give it in every batch or in none"
                )

    # -- compute-side agreement between ranks ---------------------------------------

    def _agreed_options(self) -> Dict[str, Any]:
        """The constructor's options that change the result, which every rank must
        give alike (subclasses add theirs; ``output_transform``, ``device`` and
        ``skip_unrolling`` are each rank's own)."""
        return {"metric": type(self).__qualname__}

    def _agree(self, n_rows: int, checks: Optional[Tensor] = None) -> Tuple[Dict[str, bool], Optional[Tensor]]:
        """The ranks' options compared (:meth:`_agreed_options`, one exchange), then
        one all-reduce: how many ranks hold rows and which optional inputs they gave,
        plus the sum of this rank's ``checks`` counters (value checks postponed from
        ``update``). Raises the same error on every rank, so none is left waiting.
        """
        agree_options(self._agreed_options(), what=self._name(), device=self._device)
        has_rows = n_rows > 0
        flags = [int(has_rows), n_rows] + [int(has_rows and bool(self._present and self._present[k])) for k in self._optional]
        counts = torch.tensor(flags, dtype=torch.int64, device=self._device)
        if checks is not None:
            counts = torch.cat([counts, checks.to(device=self._device, dtype=torch.int64)])
        counts = all_reduce_sum(counts)
        data_ranks, total, *rest = counts.tolist()
        given, summed = rest[: len(self._optional)], counts[2 + len(self._optional):]
        if total == 0:
            raise NotComputableError(f"{self._name()} must have at least one example before it can be computed.")
        for k, c in zip(self._optional, given):
            if 0 < c < data_ranks:
                raise ValueError(
                    f"{self._name()}: {k!r} was given on {c} of the {data_ranks} processes that saw data; "
                    "give it on all of them or on none"
                )
        return {k: c > 0 for k, c in zip(self._optional, given)}, (summed if checks is not None else None)

    def _warn_without_ids(self, how: str) -> None:
        """Once per metric, on rank 0, when several processes compute without ids:
        samples that DistributedSampler repeats to pad the last batches count again,
        and nothing else can tell a repeat from a new sample."""
        if world_size() < 2 or self.__dict__.get("_warned_without_ids", False):  # ignite answers any attribute
            return
        self._warned_without_ids = True
        if rank_of() == 0:
            warnings.warn(
                f"{self._name()} computed over {world_size()} processes without ids: samples that "
                "DistributedSampler repeats to pad the last batches count again, so the value may differ from one "
                f"process's. To drop the repeats, {how}", UserWarning, stacklevel=3)

    @staticmethod
    def _cat(parts: List[Tensor], fallback_dtype: torch.dtype, device) -> Tensor:
        """Rows of this rank's batches; an empty 1-D tensor when it saw none (the
        gather takes trailing shape and dtype from the ranks that hold data)."""
        if parts:
            return torch.cat(parts)
        return torch.empty(0, dtype=fallback_dtype, device=device)
