"""Negatives sampled per user for a sampled protocol: ``n`` items that are none of the user's
positives (``truth``) and none of its ``exclude`` items (a history), drawn uniformly or with
probability proportional to ``popularity ** alpha``, with or without replacement.

The method (exact, no ``[U, I]`` tensor): each user draws a sequence of items independently
from the whole catalogue (``torch.randint``, or ``torch.multinomial`` over the weights: past its 2^24
items, a search in their cumulative sum), and
keeps, in the order drawn, the first ``n`` that are allowed (neither positive nor excluded,
found by a binary search in the user's sorted pairs) and, without replacement, not drawn
before. Rejecting the forbidden items leaves each kept draw distributed as a draw from the
allowed items alone (the weights renormalised); rejecting repeats makes the kept sequence
successive sampling without replacement (each next item drawn from the allowed items not
yet kept, in proportion to its weight), which is uniform sampling of an ordered ``n``-subset
when the weights are equal. A user whose sequence is too short draws more of it (the same
sequence continued: no restart, so nothing conditions the result), twice as many each round.
One ``torch.Generator`` on the tensors' device, seeded with ``seed``, draws everything:
equal inputs and seed give equal negatives on a device (another device may draw others).
Sampling is a preparation step, not a hot path. It reads the device a constant number of
times before the rounds, and once per round: the number of users left, which sizes the
next draw (the draws of the users left are the generator's next numbers, so they must
be drawn as one ``[users left, width]`` block: the rounds cannot run without knowing it).
The rounds themselves depend on the draws, so no constant bounds them; but the first
round draws enough for most users (n, four binomial deviations of slack, at the mean
allowed share), each further round doubles the sequences of the users left, and a user
whose allowed share is s needs about log2(n / (s * width)) + 1 rounds.

Example:
    >>> import torch
    >>> truth = torch.tensor([[0, 1], [2, 0]])                 # user 0 likes item 2, user 1 item 0
    >>> neg = sample_negatives(truth, 4, 3, replace=False, seed=1)
    >>> neg.shape, sorted(neg[0].tolist()), sorted(neg[1].tolist())
    (torch.Size([2, 3]), [0, 1, 3], [1, 2, 3])
"""
from __future__ import annotations

import math
from typing import Optional, Tuple

import torch
from torch import Tensor

from ..inputs.pairs import UserItems
from ..inputs.sampled import sampling_inputs

__all__ = ["sample_negatives"]


def _allowed_mass(forbidden: UserItems, weights: Optional[Tensor]) -> Tensor:
    """``[U]`` float64: each user's allowed items (uniform), or their share of the weight."""
    rows, items, _ = forbidden.pairs(slice(0, forbidden.n_users))
    if weights is None:
        taken = forbidden.counts().to(torch.float64)
        return (forbidden.n_items - taken) / forbidden.n_items
    taken = torch.zeros(forbidden.n_users, dtype=torch.float64, device=items.device).index_add_(0, rows, weights[items])
    total = weights.sum()
    return ((total - taken) / total).clamp_(min=0.0)


MULTINOMIAL_CATEGORIES = 2**24  # the most categories torch.multinomial takes


def _draw(rows: int, width: int, n_items: int, weights: Optional[Tensor], generator) -> Tensor:
    """``[rows, width]`` items drawn independently: uniformly, or in proportion to ``weights``
    (``torch.multinomial``; past its 2^24 categories, the inverse of the cumulative weights:
    item i where the cumulative sum first exceeds a uniform draw in [0, total), so an item of
    weight 0, whose sum equals the one before, is never drawn)."""
    device = generator.device
    if weights is None:
        return torch.randint(0, n_items, (rows, width), generator=generator, device=device)
    if weights.numel() <= MULTINOMIAL_CATEGORIES:
        return torch.multinomial(weights, rows * width, replacement=True, generator=generator).view(rows, width)
    cumulative = torch.cumsum(weights, 0)
    last = torch.searchsorted(cumulative, cumulative[-1:])  # the last item of weight > 0 (a draw rounded up to total)
    u = torch.rand(rows * width, dtype=torch.float64, generator=generator, device=device) * cumulative[-1]
    return torch.minimum(torch.searchsorted(cumulative, u, right=True), last).view(rows, width)


def _kept(sequence: Tensor, users: Tensor, forbidden: UserItems, replace: bool) -> Tensor:
    """``[r, L]`` bool: the draws kept (allowed and, without replacement, each item's first)."""
    keep = ~forbidden.contains(users, sequence)
    if not replace:
        ordered, order = sequence.sort(dim=1, stable=True)  # equal items in the order drawn
        first = torch.ones_like(keep)
        first[:, 1:] = ordered[:, 1:] != ordered[:, :-1]
        keep &= torch.empty_like(first).scatter_(1, order, first)
    return keep


def _taken(sequence: Tensor, keep: Tensor, n: int) -> Tuple[Tensor, Tensor]:
    """``(done [r] bool, first [r, n])``: whether a row kept ``n`` draws, and the first ``n``
    it kept, in the order drawn (rows not done: any values). No host read: each kept draw
    is scattered to its place among the kept ones, the others to a spare column, dropped."""
    place = torch.cumsum(keep, 1) - 1
    taken = keep & (place < n)
    done = taken.sum(1) == n
    first = sequence.new_empty(sequence.shape[0], n + 1)  # a done row fills its n places
    first.scatter_(1, torch.where(taken, place, n), sequence)
    return done, first[:, :n]


def _check_enough(forbidden: UserItems, mass: Tensor, weights: Optional[Tensor], n: int, replace: bool) -> None:
    """Refuse a user who cannot be given ``n`` negatives."""
    if replace:
        short = mass <= 0
    elif weights is None:
        short = forbidden.n_items - forbidden.counts() < n
    else:
        rows, items, _ = forbidden.pairs(slice(0, forbidden.n_users))
        drawable = (weights > 0).to(torch.int64)
        short = int(drawable.sum()) - torch.zeros_like(forbidden.counts()).index_add_(0, rows, drawable[items]) < n
    if bool(short.any()):
        user = int(short.nonzero()[0, 0])
        what = "an item" if replace else f"{n} items"
        raise ValueError(f"user {user} has not {what} to sample (neither positive, nor excluded"
                         f"{'' if weights is None else ', nor of popularity 0'}); "
                         f"{int(short.sum())} users are short")


def sample_negatives(truth, n_items: int, n: int, *, n_users: Optional[int] = None, exclude=None, popularity=None,
                     alpha: float = 1.0, replace: bool = True, seed: int = 0) -> Tensor:
    """``[U, n]`` int64: ``n`` sampled negative items of each user, on the truth's device.

    Args:
        truth: each user's positives, ``[2, E]`` (user, item) pairs or a sparse ``[U, I]`` tensor
            (its non-zero entries): never sampled.
        n_items: the catalogue size I (items ``0..I-1``).
        n: negatives per user.
        n_users: U (default: a sparse truth's rows, else the largest user id + 1).
        exclude: each user's items never sampled either (e.g. the training history), in
            the same forms; a pair given twice counts once.
        popularity: ``[I]`` weights >= 0 (e.g. training interactions per item): item i is drawn
            with probability proportional to ``popularity[i] ** alpha`` (RecBole's ``pop``
            sampling: its frequency to the power ``alpha``; 0 is never drawn); None: uniform.
        replace: True (the default): each negative drawn independently, so a user's list
            may repeat an item (Krichene & Rendle's model; RecBole's sampler, as read, rejects
            only the user's items); False: ``n`` distinct items per user. Pass the same
            ``replace`` (and ``sampling="popularity"`` with ``popularity=``) to
            :func:`evaluate_sampled`: its corrections use the law of that sampling.
        seed: the seed of the generator (on the truth's device).

    The method is in the module's docstring: rejection, never a ``[U, I]`` tensor.
    """
    inputs = sampling_inputs(truth, n_items, n, n_users=n_users, exclude=exclude, popularity=popularity,
                             alpha=alpha, replace=replace, seed=seed)
    forbidden, weights = inputs.forbidden, inputs.weights
    device, n_users = forbidden.items.device, forbidden.n_users
    mass = _allowed_mass(forbidden, weights)
    _check_enough(forbidden, mass, weights, n, replace)
    generator = torch.Generator(device=device).manual_seed(inputs.seed)
    out = torch.empty(n_users, n, dtype=torch.int64, device=device)
    users = torch.arange(n_users, device=device)
    sequence = torch.empty(n_users, 0, dtype=torch.int64, device=device)
    # enough draws for most users at once (n kept, 4 binomial deviations of slack, at the mean
    # allowed share); the users left continue their sequence, doubled each round
    width = math.ceil((n + 4 * math.sqrt(n) + 8) / max(float(mass.mean()) if n_users else 1.0, 1e-3))
    left = n_users
    while left:
        sequence = torch.cat([sequence, _draw(left, width, n_items, weights, generator)], dim=1)
        done, first = _taken(sequence, _kept(sequence, users, forbidden, replace), n)
        kept = torch.where(done.unsqueeze(1), first, out.index_select(0, users))
        out.index_copy_(0, users, kept)  # the users are distinct: no collision
        pending = (~done).nonzero().squeeze(1)  # the round's one host read: the users left size the next draw
        users, sequence, left = users[pending], sequence[pending], pending.numel()
        width = sequence.shape[1]  # doubles the pending users' sequences
    return out
