"""Fast reading of whitespace-separated TREC tables (qrels, runs) into columns, with no Python
object per token.

The file is read into a buffer padded for 8-byte loads past its end and processed in chunks of
whole lines (``CHUNK`` bytes, so that every pass over a chunk stays in the cache). In a chunk
where every field is followed by exactly one whitespace byte and every line holds exactly
``n_fields`` fields (the common case, tabs or single spaces, LF or CR LF ends), the positions of
the whitespace bytes are the field ends, and the byte after each the next field's start. Any
other chunk (comments, blank lines, runs of blanks, extra fields) takes the general path: field
starts and ends from the whitespace transitions, each line's fields found by binary search,
with trec_eval's rules: leading whitespace skipped, a line whose first non-blank character is
``#`` and a blank line ignored. Whitespace is C's ``isspace`` (``bytes.split``'s).

The wanted fields go, as (start, width) spans, to collectors: :class:`Words` gathers ids as
zero-padded little-endian uint64 words, by length class so that an id costs its own length
(``_codes.Ids``), and ``_numbers.Numbers`` parses scores and relevance levels.

Example:
    >>> cols, lines = parse_table(b"q1 0 d1 1\\n# c\\nq1 0 d2 0\\n", "x", 4, exact=True, fields=(0, 2, 3))
    >>> cols[1].tolist(), lines.tolist()
    ([b'd1', b'd2'], [1, 3])
"""
from __future__ import annotations

import os
import stat
from typing import List, Optional, Sequence, Tuple

from retrieval_core.optional import require

from ._codes import Ids, as_bytes, word_class, word_classes

CHUNK = 1 << 20  # bytes per chunk (whole lines)
PAD = 16  # bytes after the content: a final newline, and 8-byte loads that start inside a token
_MASKS = [(1 << (8 * r)) - 1 for r in range(8)] + [(1 << 64) - 1]  # the low r bytes of a word


def numpy():
    """numpy, which the TREC readers need (the ``cli`` extra brings it)."""
    return require("numpy", feature="retrieval_core.trec (reading TREC files)", package="numpy")


class Source:
    """A file's bytes (``data``, a bytearray padded with ``PAD`` zero bytes) and its length
    ``size``, counting a final newline added when the file lacks one."""

    def __init__(self, data: bytearray, size: int, name: str):
        if size and data[size - 1] != 10:
            data[size] = 10
            size += 1
        self.data, self.size, self.name = data, size, name

    @classmethod
    def read(cls, name: str) -> "Source":
        """The file ``name``, read into its padded buffer at once when it is a regular file."""
        with open(name, "rb") as f:
            if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):  # a pipe, /dev/stdin: read as it comes
                return cls.of(f.read(), name)
            size = os.fstat(f.fileno()).st_size
            data = bytearray(size + PAD)
            if (f.readinto(memoryview(data)[:size]) if size else 0) == size and not f.read(1):
                return cls(data, size, name)
        with open(name, "rb") as f:  # the file changed while read: read it again as it is now
            return cls.of(f.read(), name)

    @classmethod
    def of(cls, raw: bytes, name: str) -> "Source":
        data = bytearray(len(raw) + PAD)
        data[:len(raw)] = raw
        return cls(data, len(raw), name)

    def line_at(self, start: int) -> bytes:
        """The line from byte ``start`` to its newline (excluded)."""
        return bytes(self.data[start:self.data.find(b"\n", start)])


def words_view(np, data):
    """The uint64 (little-endian) starting at every byte of ``data``: ``view[i]`` holds bytes i..i+7."""
    return np.ndarray((len(data) - 7,), "<u8", buffer=data, strides=(1,))


def gather_words(np, view, masks, starts, widths, n_words: int):
    """The tokens at ``starts`` as ``[n, n_words]`` uint64 words, zero past each token's width (a
    word wholly past a short token may start past the buffer: clipped, its mask is zero)."""
    out = np.empty((len(starts), n_words), "<u8")
    for j in range(n_words):
        left = np.clip(widths - 8 * j, 0, 8)
        at = starts + 8 * j
        if j:  # (np.take(mode="clip") would copy the whole strided view)
            np.minimum(at, len(view) - 1, out=at)
        np.bitwise_and(view[at], masks[left], out=out[:, j])
    return out


class Words:
    """Collects a column of ids as uint64 words, by length class (``_codes.Ids``); ``result()`` is
    the :class:`~._codes.Ids` column."""

    def __init__(self, np, src: Source):
        self.np, self.view, self.pieces, self.n = np, words_view(np, src.data), [], 0
        self.masks = np.array(_MASKS, np.uint64)

    def add(self, starts, widths) -> None:
        np = self.np
        if not len(starts):
            return
        low, k = word_class((int(widths.min()) + 7) // 8), word_class((int(widths.max()) + 7) // 8)
        if k == low:  # one class (the usual case)
            self.pieces.append((gather_words(np, self.view, self.masks, starts, widths, k), self.n))
        else:
            classes = word_classes(np, widths)
            while low <= k:
                sel = np.flatnonzero(classes == low)
                if len(sel):
                    words = gather_words(np, self.view, self.masks, starts[sel], widths[sel], low)
                    self.pieces.append((words, sel + self.n))
                low *= 2
        self.n += len(starts)

    def result(self) -> Ids:
        return Ids.joined(self.np, self.n, self.pieces)


class _Scratch:
    """Buffers reused from chunk to chunk (fresh allocations would page-fault every time)."""

    def __init__(self, np, n: int):
        self.np, self.n = np, n
        self.ws, self.flag, self.u8 = np.empty(n, bool), np.empty(n, bool), np.empty(n, np.uint8)

    def fit(self, n: int) -> "_Scratch":
        return self if n <= self.n else _Scratch(self.np, n)


def header_hint(line_no: int) -> str:
    """The end of the message of an error on a file's first record: it may be a header."""
    return f" (if line {line_no} is a header, remove it or comment it out with '#')"


def _field_error(path: str, line_no: int, line: bytes, n_fields: int, exact: bool, first: bool) -> ValueError:
    want = f"{n_fields} fields" if exact else f"at least {n_fields} fields"
    text = line.decode("utf-8", "replace").strip()
    got = len(line.split())
    hint = ""
    if first and (n_fields, exact, got >= 6) == (4, True, True):
        hint = " (a run's line has 6 fields: were the qrels and the run swapped?)"
    elif first and (n_fields, exact, got) == (6, False, 4):
        hint = " (a qrels line has 4 fields: were the run and the qrels swapped?)"
    elif first:
        hint = header_hint(line_no)
    return ValueError(f"{path}: line {line_no}: expected {want}, got {got}: {text!r}{hint}")


def _whitespace(np, c, s: _Scratch):
    m = len(c)
    ws, flag, u8 = s.ws[:m], s.flag[:m], s.u8[:m]
    np.equal(c, 32, out=ws)
    np.subtract(c, 9, out=u8)  # wraps: 9..13 become 0..4
    np.less_equal(u8, 4, out=flag)
    np.logical_or(ws, flag, out=ws)
    return ws


def _simple(np, c, ws, s: _Scratch, n_fields: int):
    """``(whitespace positions, per line)`` for a chunk of lines of exactly ``n_fields`` fields, each
    followed by one whitespace byte, every line ending with LF, or every line with CR LF (then the
    CR ends the last field); None for any other chunk (a comment, a blank line...)."""
    if ws[0]:
        return None
    pos = np.flatnonzero(ws)
    n_lines = np.count_nonzero(np.equal(c, 10, out=s.flag[:len(c)]))
    if len(pos) not in (n_fields * n_lines, (n_fields + 1) * n_lines):
        return None
    per_line = len(pos) // n_lines
    line_ends = pos[per_line - 1::per_line]
    if not (c[line_ends] == 10).all():  # then every newline is a line end: there are n_lines of each
        return None
    gaps = pos[1:] - pos[:-1]
    if per_line > n_fields:  # CR LF ends
        cr = gaps[n_fields - 1::per_line]
        if not ((cr == 1).all() and (c[pos[n_fields - 1::per_line]] == 13).all()):
            return None
        cr[:] = 2
    if not (gaps > 1).all():  # two whitespace bytes in a row
        return None
    if (c[line_ends[:-1] + 1] == 35).any() or c[0] == 35:  # a comment
        return None
    return pos, per_line


def _general(np, c, ws, s: _Scratch, n_fields: int, exact: bool, path: str, line0: int, seen: bool):
    """Field starts and ends, the index of each record's first field, each record's line in the chunk
    (from 0) and the chunk's number of lines; the first line with too few or many fields raises
    (``seen``: records came before the chunk)."""
    m = len(c)
    edge = s.flag[:m - 1]
    np.not_equal(ws[:-1], ws[1:], out=edge)
    bounds = np.flatnonzero(edge) + 1
    if not ws[0]:
        bounds = np.concatenate([np.zeros(1, bounds.dtype), bounds])
    starts, ends = bounds[0::2], bounds[1::2]  # the chunk ends with a newline: every field ends
    nl = np.flatnonzero(c == 10)
    line_starts = np.concatenate([np.zeros(1, nl.dtype), nl[:-1] + 1])
    lo = np.searchsorted(starts, line_starts)
    count = np.searchsorted(starts, nl) - lo
    if len(starts):
        record = (count > 0) & (c[starts[np.minimum(lo, len(starts) - 1)]] != 35)
    else:
        record = count > 0
    bad = record & ((count < n_fields) | ((count != n_fields) if exact else False))
    if bad.any():
        i = int(np.argmax(bad))
        line = bytes(c[line_starts[i]:nl[i]])
        raise _field_error(path, line0 + i, line, n_fields, exact, not seen and not record[:i].any())
    recs = np.flatnonzero(record)
    return starts, ends, lo[recs], recs, len(nl)


def scan(np, src: Source, n_fields: int, *, exact: bool, columns: Sequence[Tuple[int, object]]):
    """Feed field ``f``'s spans to ``collector.add`` for every ``(f, collector)`` of ``columns``; return
    each record's line number and the byte offset of the last record's first field (-1 if none).

    ``exact``: a record has exactly ``n_fields`` fields (qrels), else at least that many
    (runs: trec_eval ignores what follows the sixth field).
    """
    data, size, path = src.data, src.size, src.name
    nul = data.find(b"\x00", 0, size)
    if nul >= 0:
        line = data.count(b"\n", 0, nul) + 1
        raise ValueError(f"{path}: line {line}: a NUL byte (is this a text file?)")
    buf = np.frombuffer(data, np.uint8)
    scratch = _Scratch(np, CHUNK + (CHUNK >> 4))
    line_parts: List = []
    a, line0, last = 0, 1, -1
    while a < size:
        b = data.find(b"\n", min(a + CHUNK, size - 1)) + 1
        c = buf[a:b]
        scratch = scratch.fit(b - a)
        ws = _whitespace(np, c, scratch)
        simple = _simple(np, c, ws, scratch, n_fields)
        if simple is not None:
            pos, per = simple
            n_lines = len(pos) // per
            for f, col in columns:
                start = pos[f - 1::per] + 1 if f else np.concatenate([[0], pos[per - 1:-1:per] + 1])
                col.add(start + a, pos[f::per] - start)
            recs = np.arange(n_lines)
            first_of_last = int(pos[len(pos) - per - 1]) + 1 if n_lines > 1 else 0
        else:
            starts, ends, lo, recs, n_lines = _general(np, c, ws, scratch, n_fields, exact, path, line0,
                                                       bool(line_parts))
            for f, col in columns:
                col.add(starts[lo + f] + a, ends[lo + f] - starts[lo + f])
            first_of_last = int(starts[lo[-1]]) if len(recs) else -1
        if len(recs):
            line_parts.append(recs + line0)
            last = a + first_of_last
        line0 += n_lines
        a = b
    lines = np.concatenate(line_parts).astype(np.int64, copy=False) if line_parts else np.zeros(0, np.int64)
    return lines, last


def parse_table(data: bytes, path: str, n_fields: int, *, exact: bool, fields: Sequence[int]):
    """Columns ``fields`` (numpy bytes arrays) of the records of ``data``, and each record's line number."""
    np = numpy()
    src = Source.of(data, path)
    cols = [Words(np, src) for _ in fields]
    lines, _ = scan(np, src, n_fields, exact=exact, columns=list(zip(fields, cols)))
    return [c.result().array(np) for c in cols], lines


def last_field(src: Source, last: int, index: int) -> Optional[bytes]:
    """Field ``index`` of the record whose first field starts at byte ``last`` (None if no record)."""
    return src.line_at(last).split()[index] if last >= 0 else None
