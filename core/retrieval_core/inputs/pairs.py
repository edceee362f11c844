"""(user, item) interactions, ``[2, E]`` pairs or a sparse ``[U, I]`` tensor, checked once
into a per-user CSR (:class:`UserItems`): the truth and the history of ``evaluate_topk``,
the relevance judgements of a two-tower evaluation (``relevance=``) and the seen items that
``exclude=`` removes from the ranking (the rules: :mod:`retrieval_core.validate.pairs`).

A chunk of users reads its own slice of the CSR (:meth:`UserItems.pairs`): a dense
``[c, I]`` block of a chunk at most, never a ``[U, I]`` matrix. A chunk given as positions
(the rows re-ranked after a loop, the users left in a sampling round) has pairs whose
number is on the device; where host reads synchronise (``sizing.sync_free``), it reads
none: its dense block is written from its rows padded to the most items of one user
(:meth:`UserItems.padded`, whose width the host offsets give; no larger than the block),
and its look-ups search every user's keys (no ``[c, most items]`` block). Sorted by user, then
item, the CSR's pairs are also sorted int64 keys ``user * n_items + item``
(:meth:`UserItems.keys`): what top-k lists search, one ``searchsorted`` per listed item.

The embedding accumulator's exclusions name items by id, not position (the rows of a
gathered state move): :func:`batch_exclusions` checks a batch's pairs into (query id, item
id) pairs, :func:`excluded_positions` turns them into positions at compute.

Example:
    >>> import torch
    >>> seen = user_items("exclude", torch.tensor([[1, 0, 1], [3, 2, 0]]), 2, 4, repeats=True)
    >>> seen.offsets.tolist(), seen.items.tolist(), seen.counts().tolist()
    ([0, 1, 3], [2, 0, 3], [1, 2])
    >>> seen.keys().tolist()
    [2, 4, 7]
    >>> seen.dense(slice(0, 2)).tolist()
    [[False, False, True, False], [True, False, False, True]]
    >>> seen.contains(slice(1, 2), torch.tensor([[3, 1]])).tolist()
    [[True, False]]
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Dict, List, Optional, Tuple, Union

import torch
from torch import Tensor

from .. import sizing
from ..validate.pairs import check_user_items

__all__ = ["UserItems", "user_items", "user_blocks", "batch_exclusions", "excluded_positions"]

Part = Union[slice, Tensor]  # a chunk of users: a slice, or their positions (ascending or not)


@dataclass(frozen=True)
class UserItems:
    """Each user's items, sorted: user ``u``'s are ``items[offsets[u]:offsets[u + 1]]``, with
    ``gains`` (None: each 1). ``host_offsets``: the offsets on the CPU, so that a chunk
    of users finds its slice without reading the device."""

    offsets: Tensor
    items: Tensor
    gains: Optional[Tensor]
    n_items: int
    host_offsets: Tensor

    @property
    def n_users(self) -> int:
        return self.offsets.shape[0] - 1

    @property
    def binary(self) -> bool:
        """Whether every pair's gain is 1."""
        return self.gains is None

    def counts(self) -> Tensor:
        """``[U]`` int64: the number of items of each user."""
        return self.offsets.diff()

    @cached_property
    def most_items(self) -> int:
        """The most items of one user, from the host offsets (no read of the device)."""
        host = self.host_offsets
        return int((host[1:] - host[:-1]).max()) if host.numel() > 1 else 0

    def _sync_free_part(self, part: Part) -> bool:
        """Whether the chunk ``part`` is positions on a device where host reads synchronise."""
        return isinstance(part, Tensor) and sizing.sync_free(self.items.device)

    def padded(self, part: Tensor) -> Tuple[Tensor, Tensor, Optional[Tensor]]:
        """``(items [c, w], valid [c, w], gains [c, w] or None)`` of the users ``part``
        (positions): each row's items sorted, then padding (item ``n_items``, past every
        item: the rows stay sorted), ``w`` = :attr:`most_items`. No host read; its ``c * w``
        entries are at most the ``c * n_items`` of the chunk's dense block."""
        first, counts = self.offsets[part], self.offsets[part + 1] - self.offsets[part]
        j = torch.arange(self.most_items, device=counts.device)
        valid = j < counts.unsqueeze(1)
        at = (first.unsqueeze(1) + j).clamp(max=max(self.items.numel() - 1, 0))
        items = torch.where(valid, self.items[at], self.n_items)
        return items, valid, None if self.gains is None else self.gains[at]

    def pairs(self, part: Part) -> Tuple[Tensor, Tensor, Optional[Tensor]]:
        """``(rows, items, gains)`` of the users ``part``: rows are positions in ``part``
        (ascending; items sorted within a row)."""
        if isinstance(part, slice):
            start, stop, _ = part.indices(self.n_users)
            stop = max(start, stop)
            lo, hi = int(self.host_offsets[start]), int(self.host_offsets[stop])
            counts = self.offsets[start + 1:stop + 1] - self.offsets[start:stop]
            local = torch.arange(stop - start, device=counts.device)
            rows = torch.repeat_interleave(local, counts, output_size=hi - lo)
            return rows, self.items[lo:hi], None if self.gains is None else self.gains[lo:hi]
        first, counts = self.offsets[part], self.offsets[part + 1] - self.offsets[part]
        total = int(counts.sum())  # positions: the re-ranking of a few rows after the loop (one read)
        rows = torch.repeat_interleave(torch.arange(part.shape[0], device=counts.device), counts, output_size=total)
        at = first[rows] + torch.arange(total, device=counts.device) - (torch.cumsum(counts, 0) - counts)[rows]
        return rows, self.items[at], None if self.gains is None else self.gains[at]

    def dense(self, part: Part, dtype: Optional[torch.dtype] = None) -> Tensor:
        """``[c, I]``: the gains of the users ``part`` (bool when each is 1 and no ``dtype``), 0 elsewhere."""
        if self._sync_free_part(part):
            return self._dense_padded(part, dtype)
        rows, items, gains = self.pairs(part)
        if isinstance(part, slice):
            start, stop, _ = part.indices(self.n_users)
            n_rows = max(stop - start, 0)
        else:
            n_rows = part.shape[0]
        if dtype is None:
            dtype = torch.bool if gains is None else gains.dtype
        out = torch.zeros(n_rows, self.n_items, dtype=dtype, device=self.items.device)
        out[rows, items] = True if gains is None else gains.to(dtype)
        return out

    def _dense_padded(self, part: Tensor, dtype: Optional[torch.dtype], pairs_only: bool = False) -> Tensor:
        """:meth:`dense` of positions without a host read (``pairs_only``: True at each pair,
        whatever its gain): the padded rows written, the padding into a spare row (its
        writes collide, but it is dropped)."""
        items, valid, gains = self.padded(part)
        gains = None if pairs_only else gains
        c = part.shape[0]
        if dtype is None:
            dtype = torch.bool if gains is None else gains.dtype
        out = torch.zeros(c + 1, self.n_items, dtype=dtype, device=self.items.device)
        rows = torch.where(valid, torch.arange(c, device=valid.device).unsqueeze(1), c)
        out[rows, items.clamp(max=max(self.n_items - 1, 0))] = True if gains is None else gains.to(dtype)
        return out[:c]

    def keys(self, part: Part = slice(None)) -> Tensor:
        """Sorted int64 keys ``row * n_items + item`` of the users ``part`` (rows as in
        :meth:`pairs`; all users by default): ascending, as rows ascend and each row's items
        are sorted. Below 2^63: ``n_users * n_items`` is (the check)."""
        rows, items, _ = self.pairs(part)
        return rows * self.n_items + items

    def contains(self, part: Part, index: Tensor) -> Tensor:
        """``[c, d]`` bool: whether item ``index[r, j]`` is one of user ``part[r]``'s (a binary
        search in the chunk's pairs: no ``[c, I]`` block; sync-free positions: in every user's)."""
        if self._sync_free_part(part):
            keys = self.every_key
            wanted = part.unsqueeze(1) * self.n_items + index
        else:
            keys = self.keys(part)
            wanted = torch.arange(index.shape[0], device=index.device).unsqueeze(1) * self.n_items + index
        if keys.numel() == 0:
            return torch.zeros(index.shape, dtype=torch.bool, device=index.device)
        at = torch.searchsorted(keys, wanted).clamp_(max=keys.numel() - 1)
        return keys[at] == wanted

    @cached_property
    def every_key(self) -> Tensor:
        """:meth:`keys` of every user, computed once (no host read: the host offsets size it)."""
        return self.keys()

    def fill_(self, part: Part, target: Tensor, value: float) -> Tensor:
        """``target[r, item] = value`` for each item of user ``part[r]`` (``target``: ``[c, I]``)."""
        if self._sync_free_part(part):
            return target.masked_fill_(self._dense_padded(part, torch.bool, pairs_only=True), value)
        rows, items, _ = self.pairs(part)
        return target.index_put_((rows, items), torch.tensor(value, dtype=target.dtype))  # a 0-d host value

    def rows(self, part: slice) -> "UserItems":
        """The users ``part`` alone (a share of the queries), numbered from 0."""
        start, stop, _ = part.indices(self.n_users)
        stop = max(start, stop)
        lo, hi = int(self.host_offsets[start]), int(self.host_offsets[stop])
        return UserItems(self.offsets[start:stop + 1] - lo, self.items[lo:hi],
                         None if self.gains is None else self.gains[lo:hi], self.n_items,
                         self.host_offsets[start:stop + 1] - lo)

    def overlap(self, other: "UserItems") -> Tensor:
        """``[U]`` int64: how many of each user's items are also the user's in ``other`` (the same
        users): each pair's key searched in ``other``'s sorted keys, in blocks of users of about
        ``sizing.bucket_entries`` pairs of both (no keys of every pair at once)."""
        out = torch.zeros(self.n_users, dtype=torch.int64, device=self.items.device)
        for part in user_blocks(self.host_offsets + other.host_offsets, sizing.bucket_entries(self.items.device)):
            rows, items, _ = self.pairs(part)
            o_rows, o_items, _ = other.pairs(part)
            if rows.numel() and o_rows.numel():
                keys, o_keys = rows * self.n_items + items, o_rows * self.n_items + o_items  # sorted (see keys)
                at = torch.searchsorted(o_keys, keys).clamp_(max=o_keys.numel() - 1)
                out[part].index_add_(0, rows, (o_keys[at] == keys).to(torch.int64))
        return out


def user_blocks(host_offsets: Tensor, per_block: int) -> List[slice]:
    """Consecutive slices of users covering all of them: a block starts at the user holding
    entry ``j * per_block`` (CSR ``host_offsets`` on the CPU: no device read), so it holds
    at most ``per_block`` entries past those of its first user.

    Example:
        >>> user_blocks(torch.tensor([0, 3, 3, 7, 8, 12]), 4)
        [slice(0, 2, None), slice(2, 4, None), slice(4, 5, None)]
    """
    n_users, total = host_offsets.shape[0] - 1, int(host_offsets[-1])
    cuts = torch.arange(per_block, max(total, per_block), per_block)
    firsts = torch.searchsorted(host_offsets, cuts, right=True) - 1
    bounds = [0] + sorted(set(firsts.tolist()) - {0}) + [n_users]
    return [slice(a, b) for a, b in zip(bounds[:-1], bounds[1:]) if b > a]


def user_items(name: str, value, n_users: int, n_items: Optional[int] = None, *, graded: bool = False,
               repeats: bool = False, device: Optional[torch.device] = None) -> UserItems:
    """``value`` (``[2, E]`` pairs or a sparse ``[n_users, n_items]`` tensor) checked once
    (:func:`~retrieval_core.validate.pairs.check_user_items`: ``n_items`` None, ``graded``,
    ``repeats`` as there) into a :class:`UserItems` on ``device`` (None: the value's)."""
    users, items, gains, n_items = check_user_items(name, value, n_users, n_items, graded=graded, repeats=repeats)
    if device is not None:
        users, items = users.to(device), items.to(device)
        gains = None if gains is None else gains.to(device)
    counts = torch.bincount(users, minlength=n_users)
    offsets = torch.cat([counts.new_zeros(1), torch.cumsum(counts, 0)])
    return UserItems(offsets, items, gains, n_items, offsets.cpu())


def batch_exclusions(exclude, ids: Optional[Tensor], *, n: int) -> Dict[str, Tensor]:
    """The excluded pairs of one batch of ``n`` items as state entries: ``exclude_queries``
    (the query's id) and ``exclude_items`` (the gallery item's id), from ``exclude``: ``[2, E]``
    (row of this batch, item id) pairs or a sparse ``[n, items]`` tensor whose columns are item
    ids (its non-zero entries), checked once (:func:`~retrieval_core.validate.pairs.check_user_items`:
    integer ids, rows in ``[0, n)``, item ids >= 0, a pair given twice counted once). Items
    are named by their ``ids`` (the dataset index that the state keeps and that padding
    repeats), so the pairs follow their query and item across batches and ranks; whether
    each names a query and a gallery item is checked at compute. Empty when not given.

    Example:
        >>> batch_exclusions(torch.tensor([[1, 0], [5, 7]]), torch.tensor([10, 11]), n=2)
        {'exclude_queries': tensor([10, 11]), 'exclude_items': tensor([7, 5])}
        >>> batch_exclusions(torch.tensor([[0], [5]]), None, n=1)
        Traceback (most recent call last):
        ...
        ValueError: exclude names gallery items by their ids: pass ids with this batch (each item's dataset index)
    """
    if exclude is None:
        return {}
    if ids is None:
        raise ValueError("exclude names gallery items by their ids: pass ids with this batch (each item's dataset "
                         "index)")
    rows, items, _, _ = check_user_items("exclude", exclude, n, None, repeats=True)
    return {"exclude_queries": ids[rows.to(ids.device)], "exclude_items": items.to(ids.device)}


def excluded_positions(exclude_ids: Tuple[Tensor, Tensor], query_ids: Tensor, gallery_ids: Tensor) -> Tensor:
    """``[2, E]`` (query position, gallery position) of the excluded (query id, item id)
    pairs; each id must be one of a query (``query_ids``) and of a gallery item
    (``gallery_ids``; both distinct: repeats were dropped)."""
    positions = []
    for ids, among, what in ((exclude_ids[0], query_ids, "query"), (exclude_ids[1], gallery_ids, "gallery item")):
        ids = ids.to(among.device)
        order = torch.argsort(among)
        ascending = among[order]
        at = torch.searchsorted(ascending, ids).clamp_(max=max(among.shape[0] - 1, 0))
        missing = ids != ascending[at] if among.numel() else torch.ones_like(ids, dtype=torch.bool)
        if bool(missing.any()):
            raise ValueError(f"exclude names id {int(ids[missing][0])}, which is no {what}'s id (exclude pairs a "
                             "query row of its batch with a gallery item's id)")
        positions.append(order[at])
    return torch.stack(positions)
