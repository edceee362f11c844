"""Intervals of reduced metric values: the percentile bootstrap over queries and
the Beta highest-density interval of 0/1 per-query values (docs/statistics.md).

:func:`intervals` takes the per-query values ``[Q, M]`` that the aggregation
reduces (NaN = an empty query skipped under ``empty="skip"``; the others already
filled) and returns ``{key: (low, high)}`` for every key and, with ``groups``,
for every ``"{key}/{label}"``.

Bootstrap. Each of ``n_resamples`` resamples draws ``Q`` queries with
replacement, the same resample for every key and every category; a resample is
stored as the count of each query in it (``[chunk, Q]`` matrices), so the
resampled means of all keys are one matrix product, and the median, min and max
are read from cumulative counts over the sorted values: one batched pass, no
loop over resamples. The draws come from a ``torch.Generator`` on the CPU seeded
with ``seed`` and are then moved to the values' device, so the same seed gives
the same resamples on every device and with any number of processes (the
per-query values are gathered first). A resample's statistic uses the defined
queries it drew; one that drew none (possible for a small category, or when most
queries are empty) has no statistic and is left out of the percentiles.
"""
from __future__ import annotations

from typing import Callable, Dict, Iterator, List, Optional, Sequence, Tuple

import torch
from torch import Tensor

from .special import beta_hdi
from ..validate.options import check_seed
from ..validate.stats import N_RESAMPLES

__all__ = ["intervals", "macro_intervals", "bootstrap_statistics", "check_binary"]

_CHUNK_ELEMENTS = 1 << 24  # entries of one [chunk, Q] count matrix on accelerators (128 MiB of float64)
_CPU_CHUNK_ELEMENTS = 1 << 16  # on the CPU (512 KiB)


def _chunk_elements(device) -> int:
    """Entries of one ``[chunk, Q]`` count matrix: small on the CPU (a buffer that stays
    in cache is several times faster to fill), large on accelerators (fewer launches).
    The draws do not depend on it (one generator stream, consumed in order)."""
    return _CHUNK_ELEMENTS if torch.device(device).type != "cpu" else _CPU_CHUNK_ELEMENTS


def _resample_counts(n_rows: int, n_resamples: int, seed: int, device) -> Iterator[Tensor]:
    """The resamples as ``[chunk, n_rows]`` float64 counts, drawn on the CPU (the same on
    every device). One buffer is reused: each chunk is valid until the next is drawn.
    ``seed`` was checked by the entry point (:func:`intervals`, or the evaluation's options)."""
    generator = torch.Generator().manual_seed(int(seed))
    step = max(1, _chunk_elements(device) // max(n_rows, 1))
    buffer = torch.zeros(min(step, n_resamples), n_rows, dtype=torch.float64, device=device)
    ones = torch.ones((), dtype=torch.float64, device=device).expand(buffer.shape)
    for start in range(0, n_resamples, step):
        b = min(step, n_resamples - start)
        draws = torch.randint(n_rows, (b, n_rows), generator=generator).to(device)
        yield buffer[:b].zero_().scatter_add_(1, draws, ones[:b])


def _order_statistic(counts: Tensor, sorted_values: Tensor, n_defined: int, reduce: str) -> Tensor:
    """``[B]`` median/min/max of each resample of one column: ``counts[B, n]`` in the
    order of ``sorted_values`` (defined values first, ascending)."""
    cum = counts[:, :n_defined].cumsum(1)
    drawn = cum[:, -1] if n_defined else counts.new_zeros(counts.shape[0])
    if n_defined == 0:
        return torch.full_like(drawn, float("nan"))

    def at(position: Tensor) -> Tensor:  # the value at 0-based position of each resample's sorted draws
        j = torch.searchsorted(cum, position.unsqueeze(1), right=True).squeeze(1).clamp(max=n_defined - 1)
        return sorted_values[j]

    if reduce == "min":
        out = at(torch.zeros_like(drawn))
    elif reduce == "max":
        out = at(drawn - 1)
    else:
        out = (at(torch.floor((drawn - 1) / 2)) + at(torch.floor(drawn / 2))) / 2
    return torch.where(drawn > 0, out, float("nan"))


def _sorted_columns(values: Tensor) -> List[Tuple[Tensor, Tensor, int]]:
    """Per column: (order putting defined values first, ascending; those values; how many)."""
    present = ~torch.isnan(values)
    out = []
    for j in range(values.shape[1]):
        col = values[:, j]
        order = torch.argsort(torch.where(present[:, j], col, float("inf")), stable=True)
        out.append((order, col[order], int(present[:, j].sum())))
    return out


def bootstrap_statistics(values: Tensor, counts: Tensor, reduce: str = "mean",
                         columns: Optional[List[Tuple[Tensor, Tensor, int]]] = None) -> Tensor:
    """``[B, M]`` statistic of each resample (``counts[B, Q]``) of ``values[Q, M]``;
    NaN values are skipped, and a resample without a defined value gives NaN.
    ``columns``: the sorted columns (for median/min/max), when already at hand.

    Example:
        >>> v = torch.tensor([[0.0], [1.0], [float("nan")]], dtype=torch.float64)
        >>> counts = torch.tensor([[1.0, 2.0, 0.0], [0.0, 0.0, 3.0]], dtype=torch.float64)
        >>> bootstrap_statistics(v, counts).squeeze(1).tolist()
        [0.6666666666666666, nan]
        >>> bootstrap_statistics(v, counts, "median").squeeze(1).tolist()
        [1.0, nan]
    """
    if reduce == "mean":
        present = ~torch.isnan(values)
        total = counts @ torch.where(present, values, 0.0)
        drawn = counts @ present.to(torch.float64)
        return torch.where(drawn > 0, total / drawn.clamp(min=1), float("nan"))
    if columns is None:
        columns = _sorted_columns(values)
    stats = [_order_statistic(counts[:, order], sorted_values, n_defined, reduce)
             for order, sorted_values, n_defined in columns]
    return torch.stack(stats, 1) if stats else counts.new_zeros(counts.shape[0], 0)


def _percentiles(stats: Tensor, level: float) -> Tuple[Tensor, Tensor]:
    q = torch.tensor([(1.0 - level) / 2, (1.0 + level) / 2], dtype=stats.dtype, device=stats.device)
    ends = torch.nanquantile(stats, q, dim=0)  # [2, M]; a column of NaN only gives NaN
    return ends[0], ends[1]


def _beta(values: Tensor, keys: Sequence[str], level: float) -> Tuple[Tensor, Tensor]:
    present = ~torch.isnan(values)
    successes = torch.where(present, values, 0.0).sum(0).tolist()
    n = present.sum(0).tolist()
    lows, highs = [], []
    for s, count in zip(successes, n):
        low, high = beta_hdi(0.5 + s, 0.5 + (count - s), level)
        lows.append(low)
        highs.append(high)
    as_tensor = lambda x: torch.tensor(x, dtype=torch.float64, device=values.device)  # noqa: E731
    return as_tensor(lows), as_tensor(highs)


def check_binary(values: Tensor, keys: Sequence[str]) -> None:
    """``ci_method="beta"`` needs per-query values that are 0 or 1 (``ties="expected"``
    averages them); ``keys`` name the columns in the error. Whether a key is 0/1 by
    definition (the registry's ``binary`` keys) is checked where keys are parsed
    (:func:`~retrieval_core.validate.stats.check_ci_keys`, by the evaluations): here the
    columns may have any name."""
    ok = (values == 0) | (values == 1) | torch.isnan(values)
    if values.numel() and not bool(ok.all()):
        cols = [k for k, good in zip(keys, ok.all(0).tolist()) if not good]
        raise ValueError(
            f"ci_method='beta' needs per-query values of 0 or 1; {', '.join(map(repr, cols))} has others "
            "(tie averaging under ties='expected', or graded gains); use ci_method='bootstrap'"
        )


def intervals(
    values: Tensor,
    keys: Sequence[str],
    level: float,
    *,
    method: str = "bootstrap",
    reduce: str = "mean",
    n_resamples: int = N_RESAMPLES,
    seed: int = 0,
    groups: Optional[Sequence[Tuple[str, Tensor]]] = None,
) -> Dict[str, Tuple[Tensor, Tensor]]:
    """``{key: (low, high)}`` (0-d float64 tensors) of the ``reduce`` of each column
    of ``values[Q, M]`` (NaN = skipped query), and ``"{key}/{label}"`` for each
    ``(label, rows)`` of ``groups``.

    Example:
        >>> v = torch.tensor([[1.0], [0.0], [1.0], [1.0]], dtype=torch.float64)
        >>> low, high = intervals(v, ["hit_rate@1"], 0.9, method="beta")["hit_rate@1"]
        >>> 0 < low.item() < 0.75 < high.item() < 1
        True
    """
    if method != "beta":  # the bootstrap's seed (the beta interval draws nothing)
        check_seed(seed)
    return _intervals(values, keys, level, method=method, reduce=reduce, n_resamples=n_resamples, seed=seed,
                      groups=groups)


def _intervals(values: Tensor, keys: Sequence[str], level: float, *, method: str, reduce: str, n_resamples: int,
               seed: int, groups) -> Dict[str, Tuple[Tensor, Tensor]]:
    """:func:`intervals` of a checked ``seed`` (what the aggregation of checked options calls)."""
    sets: List[Tuple[str, Optional[Tensor]]] = [("", None)] + [(f"/{label}", rows) for label, rows in (groups or [])]
    out: Dict[str, Tuple[Tensor, Tensor]] = {}
    if method == "beta":
        check_binary(values, keys)
        for suffix, rows in sets:
            low, high = _beta(values if rows is None else values[rows], keys, level)
            out.update({f"{k}{suffix}": (lo, hi) for k, lo, hi in zip(keys, low.unbind(0), high.unbind(0))})
        return out
    parts = {suffix: values if rows is None else values[rows] for suffix, rows in sets}
    columns = {suffix: None if reduce == "mean" else _sorted_columns(part) for suffix, part in parts.items()}
    return percentile_bootstrap(
        lambda suffix, counts: bootstrap_statistics(parts[suffix], counts, reduce=reduce, columns=columns[suffix]),
        values.shape[0], keys, level, n_resamples=n_resamples, seed=seed, device=values.device, groups=groups)


def percentile_bootstrap(statistic: Callable[[str, Tensor], Tensor], n_rows: int, keys: Sequence[str], level: float,
                         *, n_resamples: int, seed: int, device, groups=None) -> Dict[str, Tuple[Tensor, Tensor]]:
    """Percentile intervals ``{key: (low, high)}`` (and ``"{key}/{label}"`` for each
    ``(label, rows)`` of ``groups``) of ``statistic(suffix, counts) -> [B, len(keys)]``,
    the keys' values on ``B`` resamples of ``n_rows`` queries given as draw counts
    ``[B, n]`` (``counts[:, rows]`` for a group; ``suffix``: ``""`` or ``"/{label}"``).
    The resamples are :func:`_resample_counts`' (the same for every statistic of a
    seed); a resample where a key is NaN is left out of its percentiles."""
    sets: List[Tuple[str, Optional[Tensor]]] = [("", None)] + [(f"/{label}", rows) for label, rows in (groups or [])]
    if n_rows == 0:
        nan = torch.tensor(float("nan"), dtype=torch.float64, device=device)
        return {f"{k}{suffix}": (nan, nan) for suffix, _ in sets for k in keys}
    stats: Dict[str, List[Tensor]] = {suffix: [] for suffix, _ in sets}
    for counts in _resample_counts(n_rows, n_resamples, seed, device):
        for suffix, rows in sets:
            stats[suffix].append(statistic(suffix, counts if rows is None else counts[:, rows]))
    out: Dict[str, Tuple[Tensor, Tensor]] = {}
    for suffix, _ in sets:
        low, high = _percentiles(torch.cat(stats[suffix]), level)
        out.update({f"{k}{suffix}": (lo, hi) for k, lo, hi in zip(keys, low.unbind(0), high.unbind(0))})
    return out


def macro_intervals(
    values: Tensor,
    keys: Sequence[str],
    level: float,
    groups: Sequence[Tuple[str, Tensor]],
    *,
    reduce: str = "mean",
    n_resamples: int = N_RESAMPLES,
    seed: int = 0,
) -> Dict[str, Tuple[Tensor, Tensor]]:
    """``{key: (low, high)}`` of the mean over ``groups`` of each group's ``reduce``
    (``per_class="macro"``: PML's average of per-class averages), from the same
    resamples as :func:`intervals` (a group without a defined value in a resample is
    left out of that resample's mean).

    Example:
        >>> v = torch.tensor([[1.0], [0.0], [1.0], [1.0]], dtype=torch.float64)
        >>> groups = [("a", torch.tensor([0, 1])), ("b", torch.tensor([2, 3]))]
        >>> low, high = macro_intervals(v, ["cmc@1"], 0.9, groups)["cmc@1"]
        >>> bool(low <= 0.75 <= high)
        True
    """
    if values.shape[0] == 0 or not groups:
        nan = values.new_tensor(float("nan"))
        return {k: (nan, nan) for k in keys}
    parts = [values[rows] for _, rows in groups]
    columns = [None if reduce == "mean" else _sorted_columns(part) for part in parts]
    stats = []
    for counts in _resample_counts(values.shape[0], n_resamples, seed, values.device):
        per = torch.stack([bootstrap_statistics(part, counts[:, rows], reduce=reduce, columns=cols)
                           for part, (_, rows), cols in zip(parts, groups, columns)])
        defined = ~torch.isnan(per)
        stats.append(torch.where(defined, per, 0.0).sum(0) / defined.sum(0))  # 0 / 0: NaN, left out
    low, high = _percentiles(torch.cat(stats), level)
    return {k: (lo, hi) for k, lo, hi in zip(keys, low.unbind(0), high.unbind(0))}
