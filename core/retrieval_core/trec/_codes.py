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

An id column of any lengths is an :class:`Ids`: its ids split by length class (the ids of one to
eight bytes, nine to 16, 17 to 32, 33 to 64...: their number of 8-byte words rounded up to a
power of two), each class a zero-padded ``[m, k]`` matrix of uint64 words with the rows it holds.
An id costs at most twice its length (8 bytes at least), whatever the longest id; equal ids
share a class, so codes are computed class by class and merged in order of first appearance.

    >>> ids = Ids.of(np, [b"a", b"x" * 20, b"b", b"a", b"x" * 20])
    >>> [words.shape for words, rows in ids.parts], ids.factorize(np)[1].tolist()
    ([(3, 1), (2, 4)], [0, 1, 2, 0, 1])
    >>> ids.take(np, [4, 2]).tolist(np)
    [b'xxxxxxxxxxxxxxxxxxxx', b'b']
"""
from __future__ import annotations

from typing import List, Sequence, Tuple

_MIX = 0x9E3779B97F4A7C15


def words_of(np, arr):
    """The bytes of ``arr`` (S dtype) as ``[n, k]`` little-endian uint64 words, zero-padded."""
    width = arr.dtype.itemsize
    padded = -(-width // 8) * 8
    if padded != width:
        arr = arr.astype(f"S{padded}")
    return np.ascontiguousarray(arr).view("<u8").reshape(len(arr), padded // 8)


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


def as_bytes(np, words):
    """The ``S{8k}`` column (one item per row, trailing zeros dropped) of ``[n, k]`` words."""
    n, k = words.shape
    return np.ascontiguousarray(words).view(np.uint8).reshape(n, 8 * k).view(f"S{8 * k}").reshape(n)


def word_class(n_words: int) -> int:
    """The class of an id of ``n_words`` 8-byte words: that number rounded up to a power of two."""
    return 1 << max(n_words - 1, 0).bit_length()


def word_classes(np, widths):
    """:func:`word_class` of every byte width of ``widths`` (int64)."""
    v = np.maximum((widths + 7) >> 3, 1) - 1
    for shift in (1, 2, 4, 8, 16, 32):
        v |= v >> shift
    return v + 1


Part = Tuple[object, object]  # (words [m, k], rows [m] int64; None: every row, in order)


class Ids:
    """A column of ``n`` ids (bytes without NUL) of any lengths, by length class (see the module's
    docstring): ``parts``, one ``(words, rows)`` per class present, ascending class; ``rows`` is
    None for a lone class holding every row in order."""

    def __init__(self, n: int, parts: List[Part]):
        self.n, self.parts = n, parts
        self._where = None

    @classmethod
    def of(cls, np, keys) -> "Ids":
        """The ids of ``keys``: an :class:`Ids`, a numpy bytes array or a sequence of bytes."""
        if isinstance(keys, Ids):
            return keys
        keys = keys.tolist() if hasattr(keys, "tolist") else list(keys)
        widths = np.fromiter(map(len, keys), np.int64, len(keys))
        classes = word_classes(np, widths)
        parts = []
        for k in np.unique(classes).tolist():
            rows = np.flatnonzero(classes == k)
            words = np.array([keys[i] for i in rows.tolist()], f"S{8 * k}").view("<u8").reshape(len(rows), k)
            parts.append((words, rows))
        return cls.joined(np, len(keys), parts)

    @classmethod
    def joined(cls, np, n: int, parts: Sequence[Part]) -> "Ids":
        """The column of ``n`` rows from pieces ``(words, rows)`` (classes in any order, repeated;
        ``rows`` an int: the rows from it on, in order)."""
        by_k: dict = {}
        for words, rows in parts:
            by_k.setdefault(words.shape[1], []).append((words, rows))
        if not by_k:
            return cls(n, [(np.zeros((0, 1), "<u8"), None)])
        if len(by_k) == 1:
            pieces = next(iter(by_k.values()))
            words = pieces[0][0] if len(pieces) == 1 else np.concatenate([w for w, _ in pieces])
            return cls(n, [(words, None)])
        out = []
        for k in sorted(by_k):
            pieces = by_k[k]
            words = pieces[0][0] if len(pieces) == 1 else np.concatenate([w for w, _ in pieces])
            rows = [np.arange(r, r + len(w)) if isinstance(r, int) else r for w, r in pieces]
            out.append((words, np.concatenate(rows)))
        return cls(n, out)

    def __len__(self) -> int:
        return self.n

    def _rows(self, np, rows):
        return np.arange(self.n) if rows is None else rows

    def where(self, np):
        """Each row's part and its position in that part's words."""
        if self._where is None:
            part, pos = np.zeros(self.n, np.int8), np.empty(self.n, np.int64)
            for j, (words, rows) in enumerate(self.parts):
                rows = self._rows(np, rows)
                part[rows], pos[rows] = j, np.arange(len(rows))
            self._where = part, pos
        return self._where

    def take(self, np, index) -> "Ids":
        """The ids at rows ``index``, in that order."""
        index = np.asarray(index, np.int64)
        if len(self.parts) == 1 and self.parts[0][1] is None:
            return Ids(len(index), [(self.parts[0][0][index], None)])
        part, pos = self.where(np)
        p, at = part[index], pos[index]
        pieces = []
        for j, (words, _) in enumerate(self.parts):
            sel = np.flatnonzero(p == j)
            if len(sel):
                pieces.append((words[at[sel]], sel))
        return Ids.joined(np, len(index), pieces)

    def concat(self, np, other: "Ids") -> "Ids":
        """This column followed by ``other``."""
        pieces = [(w, self._rows(np, r)) for w, r in self.parts]
        pieces += [(w, other._rows(np, r) + self.n) for w, r in other.parts]
        return Ids.joined(np, self.n + other.n, pieces)

    def factorize(self, np):
        """``(first, inverse)`` as :func:`factorize` gives them."""
        if len(self.parts) == 1 and self.parts[0][1] is None:
            return factorize(np, None, self.parts[0][0])
        firsts, inverses = [], []
        for words, rows in self.parts:  # an id is in one class only: the classes' groups are disjoint
            first, inverse = factorize(np, None, words)
            firsts.append(rows[first])
            inverses.append(inverse)
        first = np.concatenate(firsts)
        order = np.argsort(first, kind="stable")
        code = np.empty(len(order), np.int64)
        code[order] = np.arange(len(order))
        inverse, at = np.empty(self.n, np.int64), 0
        for (_, rows), f, inv in zip(self.parts, firsts, inverses):
            inverse[rows] = code[at + inv]
            at += len(f)
        return first[order], inverse

    def run_heads(self, np):
        """The rows where a run of equal ids starts (row 0, and each row unlike the one before)."""
        change = np.ones(self.n, bool)
        for words, rows in self.parts:
            # (rows None: every row is in this class; else the previous row must be in it too)
            same = np.ones(max(len(words) - 1, 0), bool) if rows is None else rows[1:] == rows[:-1] + 1
            for j in range(words.shape[1]):
                same &= words[1:, j] == words[:-1, j]
            change[(np.flatnonzero(same) + 1) if rows is None else rows[1:][same]] = False
        return np.flatnonzero(change)

    def tolist(self, np) -> List[bytes]:
        """The ids as bytes, in row order."""
        if len(self.parts) == 1 and self.parts[0][1] is None:
            return as_bytes(np, self.parts[0][0]).tolist()
        out: List[bytes] = [b""] * self.n
        for words, rows in self.parts:
            for r, key in zip(rows.tolist(), as_bytes(np, words).tolist()):
                out[r] = key
        return out

    def key(self, np, i: int) -> bytes:
        """The id at row ``i``."""
        if len(self.parts) == 1 and self.parts[0][1] is None:
            return self.parts[0][0][i].tobytes().rstrip(b"\0")
        part, pos = self.where(np)
        return self.parts[int(part[i])][0][int(pos[i])].tobytes().rstrip(b"\0")

    def array(self, np):
        """The ids as a numpy bytes array (padded to the longest: for small columns)."""
        keys = self.tolist(np)
        return np.array(keys, dtype=bytes) if keys else np.zeros(0, "S1")

    def byte_order(self, np):
        """The rows sorted by their ids in byte order (unsigned, as C's strcmp): one argsort of the
        ids padded to the longest when that costs at most a few times the column, else Python's sort."""
        k = max(words.shape[1] for words, _ in self.parts)
        if self.n * k <= 4 * sum(words.size for words, _ in self.parts) + 1024:
            padded = np.zeros((self.n, k), "<u8")
            for words, rows in self.parts:
                padded[self._rows(np, rows), :words.shape[1]] = words
            return np.argsort(as_bytes(np, padded), kind="stable")
        keys = self.tolist(np)
        return np.array(sorted(range(self.n), key=keys.__getitem__), np.int64)
