"""Beyond-accuracy metrics of top-k recommendation lists: what the recommended items are,
not whether they are relevant (docs/metrics.md, "Top-k lists (evaluate_topk)").

Per user (averaged over users like the accuracy keys): ``popularity@k``, ``novelty@k``,
``diversity@k``, ``tail@k``, ``serendipity@k``, each ``f(lists, k) -> [U]`` float64, NaN where the
user's first k hold no item (diversity: fewer than two). Set-level (one value over all users): ``coverage@k``,
``gini@k``, ``entropy@k``, ``personalization@k``, each ``f(keys, lists) -> [value per key]``
computed from the exposure counts alone (:func:`exposure_counts`: ``c_i``, the users whose
first k hold item i; :func:`recommended_counts`, those above 0 alone: no tensor of the
catalogue's size) and the number of users: across ranks the counts and the user counts
add up, and the values follow from their sums (no per-user value travels).

Example:
    >>> ids = torch.tensor([[0, 1], [0, 2]])
    >>> exposure_counts(ids, 2, 4).tolist()
    [2, 1, 1, 0]
    >>> personalization(exposure_counts(ids, 2, 4), 2, 2).item()   # one shared item of 2
    0.5
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence, Tuple

import torch
from torch import Tensor

from .. import sizing

__all__ = ["ItemLists", "exposure_counts", "recommended_counts", "coverage", "gini", "entropy", "personalization",
           "popularity", "novelty", "diversity", "unit_rows", "tail", "tail_items", "serendipity", "item_values",
           "item_set_values", "coverage_values", "gini_values", "entropy_values", "personalization_values"]


@dataclass(eq=False)
class ItemLists:
    """Checked top-k lists and item data: ``ids`` ``[U, d]`` int64 item ids in rank order
    (-1 pads a short list), ``n_items`` (None: unknown), ``popularity`` float64 ``[I]``,
    ``categories`` int64 ``[I]``, ``embeddings`` ``[I, D]`` (each None when not given), and
    ``tail_ratio``, what :func:`tail_items` reads; ``history``: each user's training items as
    sorted int64 keys ``user * history_scale + item`` (None: not given)."""

    ids: Tensor
    n_items: Optional[int] = None
    popularity: Optional[Tensor] = None
    categories: Optional[Tensor] = None
    embeddings: Optional[Tensor] = None
    tail_ratio: float = 0.1
    history: Optional[Tensor] = None
    history_scale: int = 1
    _counts: Dict[int, Tensor] = field(default_factory=dict)

    def cut(self, k: int) -> Tuple[Tensor, Tensor]:
        """``(ids [U, c], valid [U, c])`` of the first ``c = min(k, d)`` ranks, padding as item 0."""
        ids = self.ids[:, :k]
        valid = ids >= 0
        return ids.clamp(min=0), valid

    def counts(self, k: int) -> Tensor:
        """:func:`recommended_counts` at ``k``, computed once per cutoff."""
        if k not in self._counts:
            self._counts[k] = recommended_counts(self.ids, k, self.n_items)
        return self._counts[k]


def exposure_counts(ids: Tensor, k: int, n_items: int) -> Tensor:
    """``[n_items]`` int64: c_i, how many users' first ``k`` hold item i (a list holds an item once).
    Counted by an index_add (padding adds 0), not a bincount: no host read of the ids."""
    first = ids[:, :k].reshape(-1)
    width = max(n_items, 1)
    listed = (first >= 0) & (first < width)
    counts = torch.zeros(width, dtype=torch.int64, device=ids.device)
    return counts.index_add_(0, torch.where(listed, first, 0), listed.to(torch.int64))


def recommended_counts(ids: Tensor, k: int, n_items: Optional[int] = None) -> Tensor:
    """int64: the c_i > 0 of :func:`exposure_counts`, in increasing item id, without a tensor of
    the catalogue's size when it exceeds the lists' (n_items may be 10^15): the set-level keys
    read these alone (an item at 0 adds nothing to a sum; ``gini`` is told how many there
    are). A count per item (:func:`exposure_counts`, faster than sorting the slots) where
    the ids range over at most ``max(slots, 2^20)`` values (``n_items``, else the largest id
    + 1), else ``torch.unique``'s counts: the same counts in the same order."""
    first = ids[:, :k].reshape(-1)
    width = n_items if n_items is not None else int(first.max()) + 1 if first.numel() else 1
    if width <= max(first.numel(), 1 << 20):
        counts = exposure_counts(ids, k, width)
        return counts[counts > 0]
    return torch.unique(first[first >= 0], return_counts=True)[1].to(torch.int64)


def coverage(counts: Tensor, n_items: int) -> Tensor:
    """Catalogue coverage: items recommended to anyone / n_items."""
    return (counts > 0).sum().to(torch.float64) / n_items


def gini(counts: Tensor, n_items: Optional[int] = None) -> Tensor:
    """Gini index of the exposure over the catalogue (every item, unrecommended ones at 0):
    sum_j (2j - n - 1) c_(j) / (n sum_j c_j), the counts in increasing order (RecBole's
    GiniIndex); NaN when nothing is recommended. ``counts``: every item's (``n_items``
    None), or some of them, the n_items - len(counts) others at 0: those come first in
    the order and add 0 to the sum, so the given counts take the last ranks j."""
    n = counts.numel() if n_items is None else n_items
    c = counts.sort().values.to(torch.float64)
    j = torch.arange(n - c.numel() + 1, n + 1, dtype=torch.float64, device=c.device)
    total = c.sum()
    return torch.where(total > 0, ((2 * j - n - 1) * c).sum() / (n * total.clamp(min=1)), float("nan"))


def entropy(counts: Tensor) -> Tensor:
    """Shannon entropy in bits of the exposure distribution p_i = c_i / sum_j c_j:
    -sum_i p_i log2 p_i (Microsoft Recommenders' distributional_coverage); NaN when nothing
    is recommended."""
    c = counts[counts > 0].to(torch.float64)
    if c.numel() == 0:
        return torch.tensor(float("nan"), dtype=torch.float64, device=counts.device)
    p = c / c.sum()
    return -(p * torch.log2(p)).sum()


def personalization(counts: Tensor, n_users: int, k: int) -> Tensor:
    """1 - the mean over pairs of users of |overlap of their first k| / k. The pairs are never
    formed: the pairs sharing item i number C(c_i, 2), so the summed overlap is
    sum_i c_i (c_i - 1) / 2, exact in int64 (at most U^2 k / 2). NaN with fewer than 2 users."""
    shared = (counts * (counts - 1)).sum()  # twice the summed overlap, an exact integer
    pairs = n_users * (n_users - 1)  # twice the number of pairs
    if pairs == 0:
        return torch.tensor(float("nan"), dtype=torch.float64, device=counts.device)
    return 1.0 - shared.to(torch.float64) / (float(pairs) * k)


def _mean_over_list(values: Tensor, valid: Tensor) -> Tensor:
    """``[U]``: the mean of ``values`` over each user's listed items, NaN for an empty list."""
    n = valid.sum(1)
    total = torch.where(valid, values, 0.0).sum(1)
    return torch.where(n > 0, total / n.clamp(min=1), float("nan"))


def _power_of_two(x: Tensor, exponent: Tensor) -> Tensor:
    """``x * 2^exponent`` (float64 exponents, integers in [-1074, 1074]) in two factors of at
    most 2^537 each (one of 2^1074 overflows): exact wherever the result stays normal."""
    half = torch.floor(exponent / 2)
    return x * torch.exp2(half) * torch.exp2(exponent - half)


def _unit_scale(x: Tensor, dim=None) -> Tuple[Tensor, Tensor]:
    """``(x * 2^-e, e)``: float64 ``x`` scaled by a power of two to a largest |entry| in
    [0.5, 1) (over ``dim``, else the whole tensor; 0 stays 0), with the exponent ``e``
    (float64). Sums of the scaled values neither overflow nor, for the largest, underflow,
    and where nothing leaves the normal range the scaling is exact: a ratio of them has the
    bits it has unscaled."""
    x = x.to(torch.float64)
    largest = x.abs().amax() if dim is None else x.abs().amax(dim=dim, keepdim=True)
    exponent = torch.frexp(largest).exponent.to(torch.float64)
    return _power_of_two(x, -exponent), exponent


def popularity(lists: ItemLists, k: int) -> Tensor:
    """Average recommendation popularity: the mean popularity of the user's first k items."""
    ids, valid = lists.cut(k)
    return _mean_over_list(lists.popularity[ids], valid)


def novelty(lists: ItemLists, k: int) -> Tensor:
    """The mean self-information -log2(p_i) of the user's first k items, p_i = popularity_i /
    sum_j popularity_j (the item's share of all interactions; every listed item's popularity > 0,
    checked by ``validate.topk.check_topk_keys``). The popularity is scaled by a power of two
    first (its sum would overflow past 1e308), and a share below float64's least (an item
    2^1074 times rarer than all together) is -log2 p_i = e + log2(scaled sum) - log2(popularity_i)."""
    ids, valid = lists.cut(k)
    scaled, exponent = _unit_scale(lists.popularity)
    total = scaled.sum()
    share = scaled / total
    information = torch.where(share > 0, -torch.log2(share),
                              exponent + torch.log2(total) - torch.log2(lists.popularity.to(torch.float64)))
    return _mean_over_list(information[ids], valid)


def tail_items(popularity: Tensor, ratio: float) -> Tensor:
    """``[I]`` bool: the long tail as RecBole's TailPercentage defines it, among the items seen
    in training (popularity > 0): with ``ratio`` > 1, those seen at most ``ratio`` times; else
    the max(floor(ratio * seen), 1) least popular ones, ties by lower id."""
    seen = popularity > 0
    if ratio > 1:
        return seen & (popularity <= ratio)
    ids = seen.nonzero().squeeze(1)  # increasing ids: the stable sort keeps them in that order among equals
    least = ids[torch.sort(popularity[ids], stable=True).indices][:max(int(ids.numel() * ratio), 1)]
    return torch.zeros_like(seen).index_fill_(0, least, True)


def tail(lists: ItemLists, k: int) -> Tensor:
    """The share of the user's first k items in the long tail (:func:`tail_items`)."""
    ids, valid = lists.cut(k)
    return _mean_over_list(tail_items(lists.popularity, lists.tail_ratio)[ids].to(torch.float64), valid)


def _same_category_pairs(cats: Tensor, valid: Tensor) -> Tensor:
    """``[U]`` float64: ordered pairs of distinct listed items of one category, sum_c n_c (n_c - 1),
    from each row's categories in sorted order (an entry has as many equal ones before it as
    its distance to its run's start); padding takes categories of its own, past the listed
    ones (``cats`` are codes 0..m-1 of the catalogue's m categories, so ``max + 1`` cannot
    wrap around int64 as it could on the categories themselves)."""
    c = cats.shape[1]
    j = torch.arange(c, device=cats.device)
    own = cats.max() + 1 + j if cats.numel() else j
    s = torch.where(valid, cats, own).sort(dim=1).values
    new_run = torch.ones_like(s, dtype=torch.bool)
    new_run[:, 1:] = s[:, 1:] != s[:, :-1]
    start = torch.where(new_run, j, 0).cummax(1).values
    return 2.0 * (j - start).sum(1).to(torch.float64)


def _blocks(n_rows: int, per_row: int, device) -> List[slice]:
    """Slices of ``n_rows`` rows of ``per_row`` float64 elements each, about one
    :func:`~retrieval_core.sizing.block_elements` a slice (one empty slice for no row): the
    ``[users, k, D]`` vectors of embedding keys are never whole (1M users x 20 x 64: 10 GB each)."""
    step = max(1, sizing.block_elements(device) // max(per_row, 1))
    return [slice(start, min(start + step, n_rows)) for start in range(0, n_rows, step)] or [slice(0, 0)]


def unit_rows(e: Tensor) -> Tensor:
    """float64 ``e`` scaled to unit rows (last dimension), a zero row left at 0 (no cosine).

    Each row is first scaled by a power of two to a largest |entry| in [0.5, 1), in two
    factors of at most 2^538 each (one of 2^1074 overflows): exact wherever the entries stay
    normal, and e / |e| is the same for every scale of e, so rows of ordinary size get the
    bits they would unscaled, while in the norm tiny rows (1e-200: their squares underflow to
    0) and huge ones (1e200: the sum overflows) neither underflow nor overflow."""
    e = _unit_scale(e, dim=-1)[0]
    return e / e.norm(dim=-1, keepdim=True).clamp(min=1e-300)


def diversity(lists: ItemLists, k: int) -> Tensor:
    """Intra-list diversity: 1 - the mean similarity over ordered pairs of distinct items
    among the user's first k (n of them): 1 - sum_{i != j} sim(i, j) / (n (n - 1)), sim = 1
    for items of one category (``categories``), else the cosine similarity of their
    ``embeddings``. No ``[k, k]`` matrix: categories are counted in sorted order, and for
    unit vectors e, sum_{i != j} e_i . e_j = |sum_i e_i|^2 - sum_i |e_i|^2. NaN with fewer
    than 2 items."""
    ids, valid = lists.cut(k)
    n = valid.sum(1).to(torch.float64)
    if lists.categories is not None:
        codes = torch.unique(lists.categories, return_inverse=True)[1]  # of the catalogue's categories
        pairs = _same_category_pairs(codes[ids], valid)
    else:  # [b, c, D] float64 vectors, a block of users at a time
        parts = []
        for rows in _blocks(ids.shape[0], ids.shape[1] * lists.embeddings.shape[1], ids.device):
            unit = unit_rows(lists.embeddings[ids[rows]]) * valid[rows].unsqueeze(2)
            parts.append(unit.sum(1).pow(2).sum(1) - unit.pow(2).sum((1, 2)))
        pairs = torch.cat(parts)
    return torch.where(n > 1, 1.0 - pairs / (n * (n - 1)).clamp(min=1), float("nan"))


def _history_similarity(lists: ItemLists, ids: Tensor) -> Tuple[Tensor, Tensor]:
    """``([U, c] float64 the mean similarity of each listed item to the user's history items,
    [U] int64 history sizes)``. The mean of cosines to unit vectors e_j is the dot product
    with their mean, sum_j e_i . e_j / n = e_i . (sum_j e_j / n): one ``[U, D]`` mean per user,
    no (listed item, history item) pair; with categories (one-hot vectors) it is the share of
    the history in the listed item's category, counted as sorted (user, category) keys."""
    users, items = lists.history // lists.history_scale, lists.history % lists.history_scale
    n_users = ids.shape[0]
    sizes = torch.bincount(users, minlength=n_users)
    if lists.categories is not None:
        codes = torch.unique(lists.categories, return_inverse=True)[1]
        width = int(codes.max()) + 1
        keys, counts = torch.unique(users * width + codes[items], return_counts=True)
        wanted = torch.arange(n_users, device=ids.device).unsqueeze(1) * width + codes[ids]
        at = torch.searchsorted(keys, wanted).clamp(max=max(keys.numel() - 1, 0))
        same = torch.where(keys[at] == wanted, counts[at], 0) if keys.numel() else torch.zeros_like(wanted)
        return same.to(torch.float64) / sizes.clamp(min=1).unsqueeze(1), sizes
    unit = unit_rows(lists.embeddings)
    dims = unit.shape[1]
    mean = torch.zeros(n_users, dims, dtype=torch.float64, device=ids.device)
    for part in _blocks(users.numel(), dims, ids.device):  # in order: the sums of one index_add_
        mean.index_add_(0, users[part], unit[items[part]])
    mean = mean / sizes.clamp(min=1).unsqueeze(1)
    similarity = [(unit[ids[rows]] * mean[rows].unsqueeze(1)).sum(2)
                  for rows in _blocks(n_users, ids.shape[1] * dims, ids.device)]
    return torch.cat(similarity), sizes


def serendipity(lists: ItemLists, k: int) -> Tensor:
    """Microsoft Recommenders' serendipity with its default relevance of 1: the mean over the
    user's first k items of 1 - (the item's mean similarity to the user's history items), the
    similarity as :func:`diversity`'s; NaN for a user without history (MS's join drops them)."""
    ids, valid = lists.cut(k)
    similarity, sizes = _history_similarity(lists, ids)
    value = _mean_over_list(1.0 - similarity, valid)
    return torch.where(sizes > 0, value, float("nan"))


def coverage_values(keys: Sequence, lists: ItemLists) -> List[Tensor]:
    return [coverage(lists.counts(m.cutoff), lists.n_items) for m in keys]


def gini_values(keys: Sequence, lists: ItemLists) -> List[Tensor]:
    return [gini(lists.counts(m.cutoff), lists.n_items) for m in keys]


def entropy_values(keys: Sequence, lists: ItemLists) -> List[Tensor]:
    return [entropy(lists.counts(m.cutoff)) for m in keys]


def personalization_values(keys: Sequence, lists: ItemLists) -> List[Tensor]:
    return [personalization(lists.counts(m.cutoff), lists.ids.shape[0], m.cutoff) for m in keys]


def item_values(keys: Sequence, lists: ItemLists) -> Tensor:
    """``[U, M]`` float64: the per-user beyond-accuracy ``keys`` (their spec's ``item_kernel``)."""
    values = torch.stack([m.spec.item_kernel(lists, m.cutoff) for m in keys], dim=1)
    undefined = torch.stack([m.spec.empty(lists) for m in keys], dim=1)
    return values.masked_fill(undefined, float("nan"))


def item_set_values(keys: Sequence, lists: ItemLists) -> Dict[str, Tensor]:
    """``{key: value}`` of the set-level beyond-accuracy ``keys``, each spec's ``set_metric`` called
    once with all its keys."""
    groups: Dict = {}
    for m in keys:
        groups.setdefault(m.spec.set_metric, []).append(m)
    out: Dict[str, Tensor] = {}
    for compute, group in groups.items():
        out.update(zip((m.key for m in group), compute(group, lists)))
    return {m.key: out[m.key] for m in keys}
