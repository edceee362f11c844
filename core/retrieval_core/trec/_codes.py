"""Integer codes of id columns (exact, in order of first appearance) and sorts that return the
order with the sorted keys, for the TREC readers.

:func:`factorize` hashes each id (its bytes as uint64 words) and sorts the hashes once with
each row's index packed into their low bits, so that equal ids end up adjacent, the first
appearance of each first among them. The ids are then compared with their sorted neighbours:
where two different ids share the hash prefix (a collision), their groups are split again
exactly by a dict, so the codes never depend on the hash.

Example:
    >>> import numpy as np
    >>> first, inv = factorize(np, np.array([b"b", b"a", b"b", b"c"]))
    >>> first.tolist(), inv.tolist()
    ([0, 1, 3], [0, 1, 0, 2])
    >>> order, keys = sort_order(np, np.array([30, 10, 20, 10]))
    >>> order.tolist(), keys.tolist()
    ([1, 3, 2, 0], [10, 10, 20, 30])
"""
from __future__ import annotations

_MIX = 0x9E3779B97F4A7C15


def words_of(np, arr):
    """The bytes of ``arr`` (S dtype) as ``[n, k]`` little-endian uint64 words, zero-padded."""
    width = arr.dtype.itemsize
    padded = -(-width // 8) * 8
    if padded != width:
        arr = arr.astype(f"S{padded}")
    return np.ascontiguousarray(arr).view("<u8").reshape(len(arr), padded // 8)


def take_rows(np, arr, index):
    """``arr[index]`` for a bytes (S) array, gathered as opaque rows (faster than S indexing)."""
    return np.ascontiguousarray(arr).view(f"V{arr.dtype.itemsize}")[index].view(arr.dtype)


def hash_words(np, words):
    """A 64-bit hash of every row of ``[n, k]`` uint64 words."""
    h = np.zeros(len(words), np.uint64)
    for j in range(words.shape[1]):
        h ^= words[:, j]
        h *= np.uint64(_MIX)
        h ^= h >> np.uint64(29)
    h *= np.uint64(_MIX)
    return h


def sort_order(np, key):
    """``(order, key[order])`` for a non-negative int64 ``key``, ``order`` ascending among equal keys:
    one sort of the keys with the indices in their low bits when they fit in 63 bits."""
    n = len(key)
    bits = max(int(n - 1).bit_length(), 1)
    if n == 0 or int(key.max()) >= 1 << (63 - bits):
        order = np.argsort(key, kind="stable")
        return order, key[order]
    packed = np.sort((key << bits) | np.arange(n, dtype=np.int64))
    return packed & ((1 << bits) - 1), packed >> bits


def _split_collisions(np, words, order, new):
    """The group starts (in sorted order) made exact: a hash group holding different words is split
    by value, ``order`` rearranged in place within it (each new group's rows index ascending)."""
    rows = np.ascontiguousarray(words).view(f"V{8 * words.shape[1]}").reshape(-1)[order]
    rows = rows.view("<u8").reshape(len(order), -1)
    differ = rows[1:, 0] != rows[:-1, 0]
    for j in range(1, rows.shape[1]):
        differ |= rows[1:, j] != rows[:-1, j]
    clash = np.flatnonzero(differ & ~new[1:]) + 1  # sorted positions unlike the previous one, same group
    if not len(clash):
        return new
    # the groups holding a clash (a few): regroup their rows by value (a dict), first appearance first
    starts = np.flatnonzero(new)
    ends = np.append(starts[1:], len(new))
    bad = np.unique(np.searchsorted(starts, clash, side="right") - 1)
    at = np.concatenate([np.arange(starts[g], ends[g]) for g in bad.tolist()])
    group = np.repeat(bad, ends[bad] - starts[bad]).tolist()
    keys = rows[at].tobytes()
    width = rows.shape[1] * 8
    index: dict = {}
    codes = np.array([index.setdefault((group[i], keys[i * width:(i + 1) * width]), len(index))
                      for i in range(len(at))], dtype=np.int64)
    # the rows of a group are contiguous, index ascending, and a group's codes follow the previous
    # group's: sorting the rows by code (stable) splits each group in place, index order kept
    by_code = np.argsort(codes, kind="stable")
    order[at] = order[at[by_code]]
    codes = codes[by_code]
    new = new.copy()
    new[at] = np.concatenate([[True], codes[1:] != codes[:-1]])
    return new


def factorize(np, arr, words=None):
    """``(first, inverse)`` of a bytes array: ``arr[first]`` are its distinct values in order of
    first appearance and ``arr == arr[first][inverse]``. ``words``: ``words_of(arr)`` if known
    (then ``arr`` may be None)."""
    words = words_of(np, arr) if words is None else words
    n = len(words)
    if n == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    bits = max(int(n - 1).bit_length(), 1)
    low = np.uint64((1 << bits) - 1)
    packed = hash_words(np, words)
    packed &= ~low
    packed |= np.arange(n, dtype=np.uint64)
    packed.sort()
    order = np.bitwise_and(packed, low).view(np.int64)
    packed >>= np.uint64(bits)
    new = np.empty(n, bool)
    new[0] = True
    np.not_equal(packed[1:], packed[:-1], out=new[1:])
    del packed
    new = _split_collisions(np, words, order, new)
    first = order[new]  # each group's smallest index: its first appearance (groups in hash order)
    appear = np.sort(first)
    at = np.empty(n, np.int64)  # (only the first appearances are written and read)
    at[appear] = np.arange(len(appear))
    sizes = np.diff(np.append(np.flatnonzero(new), n))
    inverse = np.empty(n, np.int64)
    inverse[order] = np.repeat(at[first], sizes)  # groups numbered in order of first appearance
    return appear, inverse
