"""Confidence metrics: reductions over queries that also read a confidence per query.

A key ``"<kind>:<key>"`` (``kind`` in :data:`KINDS`, ``key`` a per-query key such
as ``cmc@1`` or ``map@r``) is computed from the per-query values of ``key`` and
the per-query confidences (higher = more confident); see docs/metrics.md,
"Confidence metrics". Everything runs on the values' device; the functions here
are pure.

* ``erc``: the error-versus-reject curve of the per-query error ``1 - value``
  (:func:`erc_curve`); the reduced value is its mean (the area under it).
* ``conf``: the metric over the queries whose confidence is at least ``t``, for
  ``t`` on the grid ``i/100`` (:func:`confidence_curve`); the reduced value is the
  mean of the curve where at least one query is kept.
* ``spearman``, ``kendall``: the rank correlation between confidence and value
  (:func:`rank_correlation`; Kendall's tau-b).

Example:
    >>> import torch
    >>> values = torch.tensor([1.0, 0.0, 1.0, 0.0], dtype=torch.float64)
    >>> confidence = torch.tensor([0.9, 0.1, 0.8, 0.3])
    >>> kept, error = erc_curve(1 - values, confidence)
    >>> kept.tolist(), error.tolist()
    ([0.25, 0.5, 0.75, 1.0], [0.0, 0.0, 0.3333333333333333, 0.5])
    >>> rank_correlation(confidence, values).item()  # spearman
    0.8944271909999159
"""
from __future__ import annotations

from typing import Dict, Optional, Sequence, Tuple

import torch
from torch import Tensor

__all__ = ["KINDS", "GRID_POINTS", "split_key", "erc_curve", "confidence_curve", "rank_correlation",
           "confidence_results", "confidence_intervals"]

KINDS = ("erc", "conf", "spearman", "kendall")
GRID_POINTS = 101  # thresholds 0, 0.01, ..., 1 of conf:<key>
_METHODS = ("spearman", "kendall")
_ORDERS = ("stable", "expected", "optimistic", "pessimistic")


def split_key(key: str) -> Optional[Tuple[str, str]]:
    """``(kind, inner key)`` of a confidence key, None for any other name.

    Example:
        >>> split_key("erc:cmc@1"), split_key("cmc@1")
        (('erc', 'cmc@1'), None)
    """
    kind, sep, inner = key.partition(":")
    return (kind, inner) if sep and kind in KINDS else None


# -- error-versus-reject ------------------------------------------------------------------


def _descending(confidence: Tensor, errors: Tensor, ties: str) -> Tensor:
    """Positions of the queries, most confident first; among equal confidences the
    earlier query first ("stable", "expected": the order there is averaged later),
    the smaller error first ("optimistic") or the larger first ("pessimistic")."""
    if ties in ("optimistic", "pessimistic"):
        by_error = torch.sort(errors, descending=ties == "pessimistic", stable=True).indices
        return by_error[torch.sort(confidence[by_error], descending=True, stable=True).indices]
    return torch.sort(confidence, descending=True, stable=True).indices


def erc_curve(errors: Tensor, confidence: Tensor, *, ties: str = "stable") -> Tuple[Tensor, Tensor]:
    """The error-versus-reject curve: ``(kept_fraction [n], erc [n])``.

    Queries are ordered most confident first; ``erc[j-1]`` is the mean error of
    the ``j`` first ones and ``kept_fraction[j-1] = j / n``. Among equal
    confidences: ``"stable"``, the earlier query first; ``"optimistic"`` /
    ``"pessimistic"``, the smaller / larger error first; ``"expected"``, the
    average over every order of the tied queries (inside a tied group each
    position carries the group's mean error). ``errors`` and ``confidence`` are
    ``[n]`` tensors, assumed checked (finite, same length and device).

    Example:
        >>> e = torch.tensor([1.0, 0.0, 0.0], dtype=torch.float64)
        >>> c = torch.tensor([0.5, 0.5, 0.2])
        >>> erc_curve(e, c)[1].tolist(), erc_curve(e, c, ties="expected")[1].tolist()
        ([1.0, 0.5, 0.3333333333333333], [0.5, 0.5, 0.3333333333333333])
    """
    if ties not in _ORDERS:
        raise ValueError(f"ties must be one of {', '.join(map(repr, _ORDERS))}; got {ties!r}")
    errors = errors.to(torch.float64)
    n = errors.numel()
    kept = torch.arange(1, n + 1, dtype=torch.float64, device=errors.device)
    order = _descending(confidence, errors, ties)
    total = torch.cumsum(errors[order], 0)
    if ties == "expected" and n:
        c = confidence[order]
        new = torch.ones(n, dtype=torch.bool, device=errors.device)
        new[1:] = c[1:] != c[:-1]
        group = torch.cumsum(new, 0) - 1
        counts = torch.bincount(group)
        ends = torch.cumsum(counts, 0)  # errors up to each group's end, taken from the cumulative sum
        sums_to_end = total[ends - 1]
        before = torch.cat([sums_to_end.new_zeros(1), sums_to_end[:-1]])
        starts = ends - counts
        mean = (sums_to_end - before) / counts
        total = before[group] + (kept - starts[group]) * mean[group]
    return kept / max(n, 1), total / kept


# -- metric over confident queries ---------------------------------------------------------


def thresholds(device=None) -> Tensor:
    """The grid ``i/100``, ``i = 0..100`` (float64), of ``conf:<key>``."""
    return torch.arange(GRID_POINTS, dtype=torch.float64, device=device) / (GRID_POINTS - 1)


def confidence_curve(values: Tensor, confidence: Tensor, *, reduce: str = "mean") -> Tuple[Tensor, Tensor]:
    """``(thresholds [101], curve [101])``: ``curve[i]`` reduces (``"mean"``,
    ``"median"``, ``"min"``, ``"max"``) the values of the queries whose confidence
    is at least ``thresholds[i] = i / 100``; NaN where no query is kept. The
    comparison is made in the confidences' floating dtype (the threshold rounded
    to it: a float32 confidence 0.9 is kept at 0.9). Inputs assumed checked
    (finite values, confidences in [0, 1]).

    Example:
        >>> v = torch.tensor([1.0, 0.0, 1.0], dtype=torch.float64)
        >>> t, curve = confidence_curve(v, torch.tensor([0.9, 0.2, 0.5]))
        >>> [round(x, 4) for x in curve[[0, 30, 60, 95]].tolist()]
        [0.6667, 1.0, 1.0, nan]
    """
    values = values.to(torch.float64)
    grid = thresholds(values.device)
    n = values.numel()
    if not confidence.is_floating_point():
        confidence = confidence.to(torch.float64)
    conf, order = torch.sort(confidence, descending=True, stable=True)
    v = values[order]
    # queries kept at each threshold: the first `count` of the descending order
    count = n - torch.searchsorted(conf.flip(0).contiguous(), grid.to(conf.dtype), right=False)
    if n == 0:
        return grid, torch.full_like(grid, float("nan"))
    last = (count - 1).clamp(min=0)
    if reduce == "mean":
        curve = torch.cumsum(v, 0)[last] / count.clamp(min=1)
    elif reduce == "min":
        curve = torch.cummin(v, 0).values[last]
    elif reduce == "max":
        curve = torch.cummax(v, 0).values[last]
    elif reduce == "median":
        sizes = count.tolist()
        curve = torch.stack([_median(v[:c]) if c else grid.new_tensor(float("nan")) for c in sizes])
    else:
        raise ValueError(f"conf: keys reduce with 'mean', 'median', 'min' or 'max'; got reduce={reduce!r}")
    return grid, torch.where(count > 0, curve, float("nan"))


def _median(v: Tensor) -> Tensor:
    s = v.sort().values
    n = s.numel()
    return (s[(n - 1) // 2] + s[n // 2]) / 2


# -- rank correlation -------------------------------------------------------------------


def _average_ranks(x: Tensor) -> Tensor:
    """1-based ranks, tied values sharing the mean of their positions (float64)."""
    n = x.numel()
    s, order = torch.sort(x, stable=True)
    new = torch.ones(n, dtype=torch.bool, device=x.device)
    new[1:] = s[1:] != s[:-1]
    group = torch.cumsum(new, 0) - 1
    counts = torch.bincount(group).to(torch.float64)
    ends = torch.cumsum(counts, 0)  # 1-based last position of each group
    mean_rank = ends - (counts - 1) / 2
    return torch.empty(n, dtype=torch.float64, device=x.device).scatter_(0, order, mean_rank[group])


def _pearson(a: Tensor, b: Tensor) -> Tensor:
    a, b = a - a.mean(), b - b.mean()
    den = torch.sqrt((a * a).sum() * (b * b).sum())
    r = (a * b).sum() / den
    return torch.where(den > 0, r.clamp(-1.0, 1.0), float("nan"))


def _tied_pairs(sorted_x: Tensor) -> Tensor:
    """Pairs of equal entries of a sorted tensor (sum of t(t-1)/2 over groups), int64."""
    counts = torch.unique_consecutive(sorted_x, return_counts=True)[1]
    return (counts * (counts - 1) // 2).sum()


def _inversions(codes: Tensor) -> Tensor:
    """Pairs ``i < j`` with ``codes[i] > codes[j]`` (int64 codes), by a bottom-up merge
    sort: at each level a block's right half counts, for each entry, the entries of
    the (sorted) left half above it (one batched ``searchsorted``), then each block
    is sorted. O(n log^2 n) work in O(log n) vectorised steps."""
    n = codes.numel()
    size = 1 << max(0, (n - 1).bit_length())
    pad = codes.new_full((size - n,), int(torch.iinfo(torch.int64).max))  # larger than every code: no inversion
    a = torch.cat([codes, pad])
    total = codes.new_zeros(())
    width = 1
    while width < size:
        blocks = a.view(-1, 2, width)
        left, right = blocks[:, 0].contiguous(), blocks[:, 1].contiguous()
        at_most = torch.searchsorted(left, right, right=True)
        total = total + (width - at_most).sum()
        width *= 2
        a = a.view(-1, width).sort(dim=1).values.reshape(-1)
    return total


def _kendall_tau_b(x: Tensor, y: Tensor) -> Tensor:
    n = x.numel()
    by_y = torch.sort(y, stable=True).indices
    order = by_y[torch.sort(x[by_y], stable=True).indices]  # by x, then by y
    xs, ys = x[order], y[order]
    pairs = n * (n - 1) // 2
    tied_x = _tied_pairs(xs)
    joint = torch.ones(n, dtype=torch.bool, device=x.device)
    joint[1:] = (xs[1:] != xs[:-1]) | (ys[1:] != ys[:-1])
    joint_counts = torch.bincount(torch.cumsum(joint, 0) - 1)
    tied_xy = (joint_counts * (joint_counts - 1) // 2).sum()
    tied_y = _tied_pairs(torch.sort(y).values)
    codes = torch.unique(ys, return_inverse=True)[1]  # exact comparisons on integer codes
    discordant = _inversions(codes)
    # concordant - discordant = (pairs tied in neither) - 2 * discordant
    score = (pairs - tied_x - tied_y + tied_xy - 2 * discordant).to(torch.float64)
    den = torch.sqrt((pairs - tied_x).to(torch.float64) * (pairs - tied_y).to(torch.float64))
    return torch.where(den > 0, (score / den).clamp(-1.0, 1.0), float("nan"))


def _correlation(x: Tensor, y: Tensor, method: str) -> Tensor:
    """Unchecked :func:`rank_correlation` (NaN for fewer than two values or a constant side)."""
    if x.numel() < 2:
        return torch.tensor(float("nan"), dtype=torch.float64, device=x.device)
    if method == "spearman":
        return _pearson(_average_ranks(x), _average_ranks(y))
    return _kendall_tau_b(x, y)


def rank_correlation(x: Tensor, y: Tensor, method: str = "spearman") -> Tensor:
    """Rank correlation of two ``[n]`` real tensors, on their device (0-d float64).

    ``"spearman"``: Pearson's correlation of the ranks, tied values taking the
    mean of their ranks. ``"kendall"``: Kendall's tau-b, (concordant -
    discordant) / sqrt((pairs - pairs tied in x)(pairs - pairs tied in y)),
    computed in O(n log^2 n) by sorting (no pairwise matrix). NaN when it is
    undefined: fewer than two values, or all of ``x`` (or ``y``) equal. These are
    the statistics of ``scipy.stats.spearmanr`` and ``kendalltau``.

    Example:
        >>> x = torch.tensor([0.1, 0.4, 0.4, 0.9])
        >>> y = torch.tensor([1.0, 3.0, 2.0, 2.0])
        >>> round(rank_correlation(x, y).item(), 4), round(rank_correlation(x, y, "kendall").item(), 4)
        (0.5, 0.4)
    """
    from .validate import check_correlation_inputs

    check_correlation_inputs(x, y, method)
    return _correlation(x, y, method)


# -- the keys --------------------------------------------------------------------------


def _one_key(kind: str, values: Tensor, confidence: Tensor, reduce: str, ties: str):
    """(reduced value, curve or None) of one key from its ``[Q]`` values (NaN = skipped)."""
    kept = ~torch.isnan(values)
    v, c = values[kept], confidence[kept]
    nan = torch.tensor(float("nan"), dtype=torch.float64, device=values.device)
    if kind == "erc":
        curve = erc_curve(1.0 - v, c, ties=ties)
        return (curve[1].mean() if v.numel() else nan), curve
    if kind == "conf":
        curve = confidence_curve(v, c, reduce=reduce)
        defined = ~torch.isnan(curve[1])
        value = torch.where(defined, curve[1], 0.0).sum() / defined.sum()
        return (value if v.numel() else nan), curve
    return _correlation(c.to(torch.float64), v, kind), None


def confidence_results(
    values: Tensor,
    keys: Sequence[str],
    confidence: Optional[Tensor],
    *,
    reduce: str = "mean",
    ties: str = "stable",
    curves: bool = True,
) -> Tuple[Dict[str, Tensor], Dict[str, Tuple[Tensor, Tensor]]]:
    """``({key: value}, {key: curve})`` of the confidence keys among ``keys`` (the
    columns of ``values[Q, M]``, each holding its inner key's per-query values,
    NaN = skipped query: left out before anything else). ``confidence``: ``[Q]``,
    checked here (finite; within [0, 1] for ``conf:`` keys); None is an error
    when a confidence key is asked. ``reduce`` is the reduction of ``conf:`` keys.

    Example:
        >>> v = torch.tensor([[1.0], [0.0], [1.0]], dtype=torch.float64)
        >>> out, curves = confidence_results(v, ["erc:cmc@1"], torch.tensor([3.0, 1.0, 2.0]))
        >>> round(out["erc:cmc@1"].item(), 4), curves["erc:cmc@1"][1].tolist()
        (0.1111, [0.0, 0.0, 0.3333333333333333])
    """
    from .validate import check_confidence, check_confidence_range

    wanted = [(j, key, split_key(key)) for j, key in enumerate(keys)]
    wanted = [(j, key, parts[0]) for j, key, parts in wanted if parts is not None]
    if not wanted:
        return {}, {}
    if confidence is None:
        names = ", ".join(key for _, key, _ in wanted)
        raise ValueError(f"{names}: confidence keys need per-query confidences: pass confidence=[queries] floats")
    confidence = check_confidence(confidence, values.shape[0]).to(values.device)
    if any(kind == "conf" for _, _, kind in wanted):
        check_confidence_range(confidence, [key for _, key, kind in wanted if kind == "conf"])
    out, shapes = {}, {}
    for j, key, kind in wanted:
        value, curve = _one_key(kind, values[:, j], confidence, reduce, ties)
        out[key] = value
        if curve is not None and curves:
            shapes[key] = curve
    return out, shapes


def confidence_intervals(
    values: Tensor,
    keys: Sequence[str],
    confidence: Optional[Tensor],
    level: float,
    *,
    reduce: str = "mean",
    ties: str = "stable",
    n_resamples: int = 1000,
    seed: int = 0,
    groups: Optional[Sequence[Tuple[str, Tensor]]] = None,
) -> Dict[str, Tuple[Tensor, Tensor]]:
    """Percentile bootstrap intervals ``{key: (low, high)}`` of the confidence keys
    among ``keys`` (and ``"{key}/{label}"`` for each ``(label, rows)`` of ``groups``):
    queries are resampled with their confidences (the resamples of
    :func:`retrieval_core.intervals.intervals`, same ``seed``) and each resample's
    key value is computed as :func:`confidence_results` does. Resamples where a key
    is undefined (NaN) are left out of its percentiles.

    Example:
        >>> v = torch.tensor([[1.0], [0.0], [1.0], [1.0], [0.0]], dtype=torch.float64)
        >>> c = torch.tensor([0.9, 0.1, 0.8, 0.7, 0.6])
        >>> low, high = confidence_intervals(v, ["erc:cmc@1"], c, 0.9)["erc:cmc@1"]
        >>> 0 <= low.item() <= confidence_results(v, ["erc:cmc@1"], c)[0]["erc:cmc@1"].item() <= high.item()
        True
    """
    from .intervals import percentile_bootstrap

    wanted = [(j, key) for j, key in enumerate(keys) if split_key(key) is not None]
    if not wanted:
        return {}
    if confidence is None:  # the same error as for the values themselves
        confidence_results(values, keys, confidence)
    names = [key for _, key in wanted]
    parts = {"": (values[:, [j for j, _ in wanted]], confidence)}
    parts.update({f"/{label}": (parts[""][0][rows], confidence[rows]) for label, rows in (groups or [])})

    def statistic(suffix, counts):
        v, c = _resampled(*parts[suffix], counts)
        return torch.stack([_batched(split_key(k)[0], v[..., i], c, reduce, ties) for i, k in enumerate(names)], 1)

    return percentile_bootstrap(statistic, values.shape[0], names, level, n_resamples=n_resamples, seed=seed,
                                device=values.device, groups=groups)


# -- the keys of many resamples at once (intervals) ---------------------------------------


def _resampled(values: Tensor, confidence: Tensor, counts: Tensor) -> Tuple[Tensor, Tensor]:
    """``(values [B, L, M], confidence [B, L])`` of ``B`` resamples given as ``counts[B, n]``
    (draws of each query): each resample's queries in their order, repeated as drawn,
    padded to the longest resample with NaN values (left out as skipped queries)."""
    b, n = counts.shape
    counts = counts.to(torch.int64)
    sizes = counts.sum(1)
    length = max(int(sizes.max()), 1) if b else 1
    flat = torch.repeat_interleave(torch.arange(n, device=values.device).repeat(b), counts.reshape(-1))
    row = torch.repeat_interleave(torch.arange(b, device=values.device), sizes)
    col = torch.arange(flat.numel(), device=values.device) - (torch.cumsum(sizes, 0) - sizes)[row]
    v = values.new_full((b, length, values.shape[1]), float("nan"))
    c = confidence.new_zeros((b, length))
    v[row, col] = values[flat]
    c[row, col] = confidence[flat]
    return v, c


def _row_groups(sorted_rows: Tensor) -> Tuple[Tensor, Tensor, Tensor]:
    """Runs of equal entries in each row of ``sorted_rows[B, L]``: ``(group [B, L]``
    (a flat group id per entry), ``counts [G]``, ``start column [G])``."""
    b, length = sorted_rows.shape
    new = torch.ones_like(sorted_rows, dtype=torch.bool)
    new[:, 1:] = sorted_rows[:, 1:] != sorted_rows[:, :-1]
    group = torch.cumsum(new.reshape(-1), 0) - 1
    counts = torch.bincount(group)
    starts = (torch.cumsum(counts, 0) - counts) % max(length, 1)
    return group.view(b, length), counts, starts


def _batched(kind: str, values: Tensor, confidence: Tensor, reduce: str, ties: str) -> Tensor:
    """``[B]``: the key of each row of ``values[B, L]`` (NaN = left out) with
    ``confidence[B, L]``, as :func:`_one_key` of that row's defined entries."""
    valid = ~torch.isnan(values)
    m = valid.sum(1)
    if kind == "erc":
        return _batched_erc(values, confidence, valid, m, ties)
    if kind == "conf":
        if reduce == "median":  # no running form: row by row
            return torch.stack([_one_key(kind, v, c, reduce, ties)[0] for v, c in zip(values, confidence)])
        return _batched_conf(values, confidence, valid, m, reduce)
    x = torch.where(valid, confidence.to(torch.float64), float("inf"))  # left-out entries last, tied together
    y = torch.where(valid, values, float("inf"))
    if kind == "spearman":
        out = _batched_pearson(_batched_ranks(x), _batched_ranks(y), valid, m)
    else:
        out = _batched_kendall(x, y, valid, m)
    return torch.where(m >= 2, out, float("nan"))


def _batched_erc(values, confidence, valid, m, ties) -> Tensor:
    length = values.shape[1]
    errors = torch.where(valid, 1.0 - values, 0.0)
    c = torch.where(valid, confidence.to(torch.float64), float("-inf"))  # left-out entries last
    if ties in ("optimistic", "pessimistic"):
        first = torch.sort(torch.where(valid, errors, float("inf")), dim=1, descending=ties == "pessimistic",
                           stable=True).indices
        order = first.gather(1, torch.sort(c.gather(1, first), dim=1, descending=True, stable=True).indices)
    else:
        order = torch.sort(c, dim=1, descending=True, stable=True).indices
    e = errors.gather(1, order)
    total = torch.cumsum(e, 1)
    kept = torch.arange(1, length + 1, dtype=torch.float64, device=values.device)
    if ties == "expected":
        group, counts, starts = _row_groups(c.gather(1, order))
        flat = total.reshape(-1)
        ends = torch.cumsum(counts, 0) - 1  # flat index of each group's last entry
        first = ends - counts + 1
        before = torch.where(starts > 0, flat[(first - 1).clamp(min=0)], 0.0)
        mean = (flat[ends] - before) / counts
        total = before[group] + (kept - starts[group]) * mean[group]
    erc = total / kept
    inside = kept <= m.unsqueeze(1)
    return torch.where(m > 0, torch.where(inside, erc, 0.0).sum(1) / m.clamp(min=1), float("nan"))


def _batched_conf(values, confidence, valid, m, reduce) -> Tensor:
    c = confidence if confidence.is_floating_point() else confidence.to(torch.float64)
    c = torch.where(valid, c, float("-inf"))  # never kept
    conf, order = torch.sort(c, dim=1, descending=True, stable=True)
    v = values.gather(1, order)
    grid = thresholds(values.device).to(c.dtype).expand(values.shape[0], -1).contiguous()
    count = values.shape[1] - torch.searchsorted(conf.flip(1).contiguous(), grid, right=False)
    last = (count - 1).clamp(min=0)
    if reduce == "mean":
        curve = torch.cumsum(torch.where(valid.gather(1, order), v, 0.0), 1).gather(1, last) / count.clamp(min=1)
    elif reduce == "min":
        curve = torch.cummin(torch.nan_to_num(v, nan=float("inf")), 1).values.gather(1, last)
    else:
        curve = torch.cummax(torch.nan_to_num(v, nan=float("-inf")), 1).values.gather(1, last)
    defined = count > 0
    value = torch.where(defined, curve, 0.0).sum(1) / defined.sum(1).clamp(min=1)
    return torch.where(m > 0, value, float("nan"))


def _batched_ranks(x: Tensor) -> Tensor:
    """Average 1-based ranks along each row of ``x[B, L]`` (float64)."""
    s, order = torch.sort(x, dim=1, stable=True)
    group, counts, starts = _row_groups(s)
    mean_rank = starts.to(torch.float64) + (counts.to(torch.float64) + 1) / 2
    return torch.empty_like(s, dtype=torch.float64).scatter_(1, order, mean_rank[group])


def _batched_pearson(a, b, valid, m) -> Tensor:
    n = m.clamp(min=1).to(torch.float64).unsqueeze(1)
    a = torch.where(valid, a - torch.where(valid, a, 0.0).sum(1, keepdim=True) / n, 0.0)
    b = torch.where(valid, b - torch.where(valid, b, 0.0).sum(1, keepdim=True) / n, 0.0)
    den = torch.sqrt((a * a).sum(1) * (b * b).sum(1))
    return torch.where(den > 0, ((a * b).sum(1) / den).clamp(-1.0, 1.0), float("nan"))


def _tied_in_rows(sorted_rows: Tensor, valid_sorted: Tensor) -> Tensor:
    """``[B]``: pairs of equal defined entries in each sorted row (int64)."""
    group, counts, _ = _row_groups(sorted_rows)
    first_valid = torch.zeros_like(counts, dtype=torch.bool).scatter_(0, group.reshape(-1), valid_sorted.reshape(-1))
    pairs = torch.where(first_valid, counts * (counts - 1) // 2, 0)
    row = torch.zeros_like(counts).scatter_(0, group.reshape(-1), torch.arange(
        sorted_rows.shape[0], device=sorted_rows.device).repeat_interleave(sorted_rows.shape[1]))
    return torch.zeros(sorted_rows.shape[0], dtype=torch.int64, device=sorted_rows.device).index_add_(0, row, pairs)


def _batched_kendall(x, y, valid, m) -> Tensor:
    b, length = x.shape
    by_y = torch.sort(y, dim=1, stable=True).indices
    order = by_y.gather(1, torch.sort(x.gather(1, by_y), dim=1, stable=True).indices)  # by x, then by y
    xs, ys, vs = x.gather(1, order), y.gather(1, order), valid.gather(1, order)
    tied_x = _tied_in_rows(xs, vs)
    y_sorted, y_order = torch.sort(y, dim=1, stable=True)
    tied_y = _tied_in_rows(y_sorted, valid.gather(1, y_order))
    joint = torch.stack([xs, ys], 2)
    new = torch.ones(b, length, dtype=torch.bool, device=x.device)
    new[:, 1:] = (joint[:, 1:] != joint[:, :-1]).any(2)
    group = (torch.cumsum(new.reshape(-1), 0) - 1)
    counts = torch.bincount(group)
    first_valid = torch.zeros_like(counts, dtype=torch.bool).scatter_(0, group, vs.reshape(-1))
    rows = torch.arange(b, device=x.device).repeat_interleave(length)
    row = torch.zeros_like(counts).scatter_(0, group, rows)
    tied_xy = torch.zeros(b, dtype=torch.int64, device=x.device).index_add_(
        0, row, torch.where(first_valid, counts * (counts - 1) // 2, 0))
    # dense codes of y within each row, read in the x order: inversions = discordant pairs
    code_group, _, _ = _row_groups(y_sorted)
    row_first = code_group[:, :1]
    codes_sorted = code_group - row_first
    codes = torch.empty_like(codes_sorted).scatter_(1, y_order, codes_sorted).gather(1, order)
    discordant = _row_inversions(codes)
    mm = m.to(torch.int64)
    pairs = mm * (mm - 1) // 2
    score = (pairs - tied_x - tied_y + tied_xy - 2 * discordant).to(torch.float64)
    den = torch.sqrt((pairs - tied_x).to(torch.float64) * (pairs - tied_y).to(torch.float64))
    return torch.where(den > 0, (score / den).clamp(-1.0, 1.0), float("nan"))


def _row_inversions(codes: Tensor) -> Tensor:
    """:func:`_inversions` of each row of ``codes[B, L]`` (int64) at once: ``[B]``."""
    b, length = codes.shape
    size = 1 << max(0, (length - 1).bit_length())
    a = torch.cat([codes, codes.new_full((b, size - length), int(torch.iinfo(torch.int64).max))], 1)
    total = codes.new_zeros(b)
    width = 1
    while width < size:
        blocks = a.view(b, -1, 2, width)
        left = blocks[:, :, 0].reshape(-1, width).contiguous()
        right = blocks[:, :, 1].reshape(-1, width).contiguous()
        at_most = torch.searchsorted(left, right, right=True)
        total = total + (width - at_most).view(b, -1).sum(1)
        width *= 2
        a = a.view(b, -1, width).sort(dim=2).values.view(b, size)
    return total
