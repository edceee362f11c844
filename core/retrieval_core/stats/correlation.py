"""Rank correlation between per-query confidence and value: Spearman, and Kendall's tau-b with ties."""
from __future__ import annotations

import torch
from torch import Tensor

from ..validate.stats import check_correlation_inputs

__all__ = ["rank_correlation"]

_METHODS = ("spearman", "kendall")


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

    check_correlation_inputs(x, y, method)
    return _correlation(x, y, method)
