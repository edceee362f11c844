"""The accumulator's state and its sync across ranks, whatever the framework.

A state is a mapping of named entries: "cat" entries (a list, one tensor of rows per
batch; one tensor once a framework has merged them) and "sum" entries (a tensor that
batches add to). :meth:`Accumulator.state_spec` lists them with their defaults and
reductions, which is what torchmetrics' ``add_state`` takes: there the entries are the
metric's own states (:class:`AttributeState` views them as a mapping), torchmetrics
syncs them itself (pass :func:`gather_per_rank` as ``dist_sync_fn``: uneven and empty
ranks) and :meth:`Accumulator.sync` is not called. A framework that does not sync
(ignite, a plain loop) calls :meth:`Accumulator.sync` before ``compute``: the ranks'
options are compared, one all-reduce counts their rows and the optional inputs they
gave, then "cat" entries are gathered and "sum" entries summed.

Example:
    >>> import torch
    >>> from retrieval_core.evaluation.accumulator import ScoreAccumulator
    >>> acc = ScoreAccumulator(["mrr"])
    >>> state = acc.new_state()
    >>> acc.update(state, torch.tensor([[0.9, 0.2]]), torch.tensor([[1, 0]]))
    1
    >>> synced = acc.sync(state, {"metric": "mine"}, what="mine")  # one process: the state itself
    >>> synced.rows, synced.processes, acc.compute(synced.state)["mrr"].item()
    (1, 1, 1.0)
"""
from __future__ import annotations

import hashlib
import warnings
from collections.abc import MutableMapping
from typing import Any, Dict, Iterator, List, NamedTuple, Optional, Sequence, Tuple

import torch
from torch import Tensor

from ...distributed.agree import agree_options
from ...distributed.agreement import option_texts
from ...distributed.collectives import all_reduce_sum, gather_cat, rank_of, world_size
from ...validate import check_device_available

__all__ = ["Accumulator", "AttributeState", "Synced", "agree", "options_digest", "same_rows"]


class Synced(NamedTuple):
    """What :meth:`Accumulator.sync` gives: the ``state`` with every rank's rows (empty
    when no rank saw any), the ``rows`` over all ranks and the number of ``processes``
    whose rows it holds."""

    state: Dict[str, Any]
    rows: int
    processes: int


class AttributeState(MutableMapping):
    """A state whose entries are attributes of ``holder`` (torchmetrics' ``add_state``).

    Example:
        >>> from types import SimpleNamespace
        >>> holder = SimpleNamespace(values=[])
        >>> AttributeState(holder, ["values"])["values"].append(1); holder.values
        [1]
    """

    def __init__(self, holder: Any, names: Sequence[str]) -> None:
        self._holder, self._names = holder, tuple(names)

    def __getitem__(self, name: str) -> Any:
        return getattr(self._holder, name)

    def __setitem__(self, name: str, value: Any) -> None:
        setattr(self._holder, name, value)

    def __delitem__(self, name: str) -> None:
        raise TypeError("the entries of a state are fixed")

    def __iter__(self) -> Iterator[str]:
        return iter(self._names)

    def __len__(self) -> int:
        return len(self._names)


def agree(options: Dict[str, Any], *, what: str, group=None, device=None) -> int:
    """Compare ``options`` between the ranks of ``group`` (one exchange; the same
    ``ValueError`` on every rank when they differ) and return the group's size."""
    agree_options(options, what=what, group=group, device=device)
    return world_size(group)


def options_digest(cls: type, options: Dict[str, Any]) -> Tensor:
    """``[16]`` int64 (byte values): a digest of a class and its options, a state that
    tells apart metrics of other classes or options (equal digests: equal tensors).

    Example:
        >>> options_digest(dict, {"k": 1}).equal(options_digest(dict, {"k": 2}))
        False
    """
    text = repr((cls.__module__, cls.__qualname__, sorted(option_texts(options).items())))
    return torch.tensor(list(hashlib.sha256(text.encode("utf-8")).digest()[:16]), dtype=torch.int64)


def same_rows(n_rows: int, **optional: Optional[Tensor]) -> None:
    """Optional entries hold one row per row of the state, or none."""
    for name, t in optional.items():
        if t is not None and t.shape[0] != n_rows:
            raise ValueError(f"{name} were given for {t.shape[0]} of {n_rows} rows: pass {name} with every update "
                             "(on every rank) or with none")


class Accumulator:
    """State, update, sync across ranks and compute of one kind of input.

    Subclasses list ``cat_states`` (name, dtype of a rank without rows) and
    ``optional`` (the optional inputs: given in every batch or in none; ``input_names``:
    the name a user passes one under, where its state's differs), and define
    ``sum_states``, ``update``, ``compute`` and ``agreed_options``.

    ``name``: the metric's name in messages. ``device``: where update keeps the rows
    (None: where each batch is). ``strict_inputs``: an optional input given in some
    batches of a rank and not in others is an error at ``update`` (else rows are
    counted at ``compute``). ``ids_hint``: how a user gives ids, in the warning of a
    compute over several processes without them (``{unit}``: query, item, entry).
    """

    cat_states: Tuple[Tuple[str, torch.dtype], ...] = ()
    optional: Tuple[str, ...] = ()
    input_names: Dict[str, str] = {}
    unit = "row"

    def __init__(self, *, name: str = "metric", device=None, strict_inputs: bool = False,
                 ids_hint: str = "pass each {unit}'s dataset index as ids= to update.") -> None:
        self.device = None if device is None else torch.device(device)
        if self.device is not None:
            check_device_available("device", self.device)  # one line, not torch's bare AssertionError
        self.name, self.strict_inputs, self.ids_hint = name, strict_inputs, ids_hint
        self._warned = False

    # -- state --------------------------------------------------------------------

    def sum_states(self, device=None) -> Dict[str, Tensor]:
        """The "sum" entries of a new state."""
        return {}

    def state_spec(self) -> List[Tuple[str, Any, str]]:
        """``(name, default, reduction)`` of each entry ("cat" or "sum"), for ``add_state``."""
        return ([(name, [], "cat") for name, _ in self.cat_states]
                + [(name, t, "sum") for name, t in self.sum_states().items()])

    def new_state(self, device=None) -> Dict[str, Any]:
        """An empty state (its "sum" entries on ``device``, else the accumulator's)."""
        state: Dict[str, Any] = {name: [] for name, _ in self.cat_states}
        state.update(self.sum_states(device if device is not None else self.device))
        return state

    @staticmethod
    def cat(value) -> Optional[Tensor]:
        """A "cat" entry as one tensor, or None when it holds no rows."""
        if isinstance(value, list):
            if not value:
                return None
            value = torch.cat(value) if len(value) > 1 else value[0]
        return value if value.numel() or value.ndim > 1 else None

    def rows(self, state) -> int:
        """The rows held (those of the first "cat" entry)."""
        first = self.cat(state[self.cat_states[0][0]])
        return 0 if first is None else first.shape[0]

    def given(self, state) -> Dict[str, bool]:
        """Which optional inputs the rows of ``state`` came with."""
        return {k: self.cat(state[k]) is not None for k in self.optional}

    def _check_given(self, state, given: Dict[str, bool]) -> None:
        """With ``strict_inputs``: the optional inputs of this batch are those of the earlier ones."""
        if not self.strict_inputs or self.rows(state) == 0:
            return
        before = self.given(state)
        for k in self.optional:
            if given[k] != before[k]:
                was, now = ("given", "missing") if before[k] else ("missing", "given")
                raise ValueError(f"{self.input_names.get(k, k)!r} was {was} in earlier batches and is {now} in this "
                                 "one; give it in every batch or in none")

    def _append(self, state, device, rows: Dict[str, Optional[Tensor]]) -> None:
        for name, value in rows.items():
            if value is not None:
                state[name].append(value.detach().to(device))

    # -- sync across ranks ------------------------------------------------------------

    def agreed_options(self) -> Dict[str, Any]:
        """The options every rank must give alike."""
        return {}

    def sync(self, state, options: Dict[str, Any], *, what: Optional[str] = None, group=None,
             device=None) -> Synced:
        """Every rank's state, for a framework that does not sync states itself.

        ``options`` (the metric's :meth:`agreed_options`, with what the adapter adds) are
        compared first; then one all-reduce counts the ranks holding rows, the rows and
        the optional inputs each gave: one given on some of the ranks that saw data and
        not on others is the same ``ValueError`` on every rank. Then "cat" entries are
        gathered (ranks of unequal sizes, or none) and "sum" entries summed.
        """
        what = self.name if what is None else what
        device = device if device is not None else (self.device or torch.device("cpu"))
        agree_options(options, what=what, group=group, device=device)
        n, given = self.rows(state), self.given(state)
        counts = [int(n > 0), n] + [int(n > 0 and given[k]) for k in self.optional]
        data_ranks, total, *on = all_reduce_sum(torch.tensor(counts, dtype=torch.int64, device=device), group).tolist()
        processes = world_size(group)
        if total == 0:
            return Synced({}, 0, processes)
        for k, c in zip(self.optional, on):
            if 0 < c < data_ranks:
                raise ValueError(f"{what}: {self.input_names.get(k, k)!r} was given on {c} of the {data_ranks} "
                                 "processes that saw data; give it on all of them or on none")
        present = dict(zip(self.optional, on))
        synced: Dict[str, Any] = {}
        for name, dtype in self.cat_states:
            rows = self.cat(state[name])
            if present.get(name, 1) == 0:
                synced[name] = []
            else:
                synced[name] = gather_cat(torch.empty(0, dtype=dtype, device=device) if rows is None else rows, group)
        for name in self.sum_states():
            synced[name] = all_reduce_sum(state[name], group)
        return Synced(synced, total, processes)

    def warn_without_ids(self, processes: int, group=None, how: Optional[str] = None) -> None:
        """Once, on rank 0 of a compute over several processes without ids: samples that
        DistributedSampler repeats to pad the last batches count again."""
        if processes < 2 or self._warned:
            return
        self._warned = True
        if rank_of(group) == 0:
            how = self.ids_hint.format(unit=self.unit) if how is None else how
            warnings.warn(
                f"{self.name} computed over {processes} processes without ids: samples that "
                "DistributedSampler repeats to pad the last batches count again, so the value may differ from one "
                f"process's. To drop the repeats, {how}", UserWarning, stacklevel=4)
