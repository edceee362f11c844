"""Fast reading of whitespace-separated TREC tables (qrels, runs) into columns.

The file is read as bytes and processed in chunks of whole lines. A chunk whose
lines all hold exactly the expected number of fields (no comment, no blank line,
no trailing junk) is split at once by ``bytes.split`` and its columns taken by
stride; numpy checks first that every line holds exactly that many fields, so a short
line followed by a long one can never shift the columns. Any other chunk is read line by line,
with the same rules as trec_eval: leading whitespace skipped, a line whose first
non-blank character is ``#`` and a blank line are ignored.

Example:
    >>> cols, lines = parse_table(b"q1 0 d1 1\\n# c\\nq1 0 d2 0\\n", "x", 4, exact=True, fields=(0, 2, 3))
    >>> cols[1].tolist(), lines.tolist()
    ([b'd1', b'd2'], [1, 3])
"""
from __future__ import annotations

from typing import List, Sequence

from retrieval_core.optional import require

CHUNK = 1 << 23  # bytes per chunk (whole lines): bounds the memory of the token lists


def numpy():
    """numpy, which the TREC readers need (the ``cli`` extra brings it)."""
    return require("numpy", feature="retrieval_core.trec (reading TREC files)", package="numpy")


def _regular(np, chunk: bytes, n_fields: int) -> bool:
    """Whether every line of ``chunk`` (ending with a newline) holds exactly ``n_fields`` fields.

    From the positions of the field starts: there are ``n_fields`` per line, and for every
    line i the first field of group i starts after the previous newline and the last one
    before line i's newline, so line i holds group i and nothing else.
    """
    buf = np.frombuffer(chunk, np.uint8)
    ws = (buf == 32) | ((buf >= 9) & (buf <= 13))  # C isspace, and bytes.split's whitespace
    starts = np.empty(len(buf), bool)
    starts[0] = not ws[0]
    np.greater(ws[:-1], ws[1:], out=starts[1:])  # a blank followed by a non-blank: a field starts
    pos = np.flatnonzero(starts)
    nl = np.flatnonzero(buf == 10)
    if len(nl) == 0 or len(pos) != n_fields * len(nl):
        return False
    return bool((pos[n_fields - 1::n_fields] < nl).all() and (pos[n_fields::n_fields] > nl[:-1]).all())


def _slow_chunk(chunk: bytes, path: str, line0: int, n_fields: int, exact: bool, fields: Sequence[int],
                cols: List[list], lines: List[int]) -> None:
    for offset, line in enumerate(chunk.split(b"\n")[:-1]):
        parts = line.split()
        if not parts or parts[0].startswith(b"#"):
            continue
        if len(parts) < n_fields or (exact and len(parts) != n_fields):
            want = f"{n_fields} fields" if exact else f"at least {n_fields} fields"
            text = line.decode("utf-8", "replace").strip()
            raise ValueError(f"{path}: line {line0 + offset}: expected {want}, got {len(parts)}: {text!r}")
        for col, f in zip(cols, fields):
            col.append(parts[f])
        lines.append(line0 + offset)


def chunks(data: bytes):
    """``(chunk, first line number)`` pairs of whole lines, each chunk ending with a newline."""
    if data and not data.endswith(b"\n"):
        data += b"\n"
    pos, line = 0, 1
    while pos < len(data):
        end = data.find(b"\n", min(pos + CHUNK, len(data) - 1)) + 1
        chunk = data[pos:end]
        yield chunk, line
        line += chunk.count(b"\n")
        pos = end


def parse_table(data: bytes, path: str, n_fields: int, *, exact: bool, fields: Sequence[int]):
    """Columns ``fields`` (numpy bytes arrays) of the records of ``data``, and each record's line number.

    ``exact``: a record has exactly ``n_fields`` fields (qrels), else at least that many
    (runs: trec_eval ignores what follows the sixth field).
    """
    np = numpy()
    if b"\x00" in data:
        line = data[: data.index(b"\x00")].count(b"\n") + 1
        raise ValueError(f"{path}: line {line}: a NUL byte (is this a text file?)")
    parts: List[list] = [[] for _ in fields]
    line_parts = []
    for chunk, line0 in chunks(data):
        if b"#" not in chunk and _regular(np, chunk, n_fields):
            tokens = chunk.split()
            cols = [tokens[f::n_fields] for f in fields]
            del tokens
            line_parts.append(np.arange(line0, line0 + len(cols[0]), dtype=np.int64))
        else:
            cols = [[] for _ in fields]
            lines: List[int] = []
            _slow_chunk(chunk, path, line0, n_fields, exact, fields, cols, lines)
            line_parts.append(np.asarray(lines, dtype=np.int64))
        for part, col in zip(parts, cols):
            part.append(np.array(col, dtype=bytes) if col else np.zeros(0, "S1"))
    out = [np.concatenate(p) if p else np.zeros(0, "S1") for p in parts]
    line_numbers = np.concatenate(line_parts) if line_parts else np.zeros(0, np.int64)
    return out, line_numbers


def to_float(np, col, lines, path: str, what: str):
    """float64 array of a column of bytes; a clear error (file, line) for a bad or non-finite value."""
    try:
        values = col.astype(np.float64)
    except ValueError:
        values = None
    bad = None
    if values is None:
        for i, v in enumerate(col):
            try:
                float(v)
            except ValueError:
                bad = i
                break
    else:
        finite = np.isfinite(values)
        if not finite.all():
            bad = int(np.flatnonzero(~finite)[0])
    if bad is not None:
        raise ValueError(f"{path}: line {int(lines[bad])}: {what} must be a finite number; got "
                         f"{col[bad].decode('utf-8', 'replace')!r}")
    return values


def to_int(np, col, lines, path: str, what: str):
    """int64 array of a column of bytes; a clear error (file, line) for a non-integer."""
    try:
        return col.astype(np.int64)
    except (ValueError, OverflowError):
        for i, v in enumerate(col):
            try:
                int(v)
            except ValueError:
                raise ValueError(f"{path}: line {int(lines[i])}: {what} must be an integer; got "
                                 f"{v.decode('utf-8', 'replace')!r}") from None
        raise


def _hash_rows(np, arr):
    """The bytes of ``arr`` (S dtype) as big-endian uint64 words [n, w] and a 64-bit hash of each row."""
    width = arr.dtype.itemsize
    padded = -(-width // 8) * 8
    if padded != width:
        arr = arr.astype(f"S{padded}")
    words = np.ascontiguousarray(arr).view(">u8").reshape(len(arr), padded // 8).astype(np.uint64)
    h = np.zeros(len(arr), np.uint64)
    for j in range(words.shape[1]):
        h ^= words[:, j]
        h *= np.uint64(0x9E3779B97F4A7C15)
        h ^= h >> np.uint64(29)
    return words, h


def factorize(np, arr):
    """``(first, inverse)`` of a bytes array: ``arr[first]`` are its distinct values in order of
    first appearance and ``arr == arr[first][inverse]``. Exact: values are grouped by a hash,
    every group checked against its first member, and a dict does it on a collision.

    Example:
        >>> import numpy as np
        >>> first, inv = factorize(np, np.array([b"b", b"a", b"b", b"c"]))
        >>> first.tolist(), inv.tolist()
        ([0, 1, 3], [0, 1, 0, 2])
    """
    n = len(arr)
    if n == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    words, h = _hash_rows(np, arr)
    _, first, inv = np.unique(h, return_index=True, return_inverse=True)
    if not (words == words[first][inv]).all():  # a hash collision: exact, slower
        index: dict = {}
        codes = np.array([index.setdefault(k, len(index)) for k in arr.tolist()], dtype=np.int64)
        first = np.zeros(len(index), np.int64)
        first[codes[::-1]] = np.arange(n - 1, -1, -1)
        return first, codes
    order = np.argsort(first, kind="stable")  # groups in order of first appearance
    rank = np.empty_like(order)
    rank[order] = np.arange(len(order))
    return first[order].astype(np.int64), rank[inv.reshape(-1)].astype(np.int64)
