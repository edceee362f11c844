"""Fast reading of whitespace-separated TREC tables (qrels, runs) into columns.

The file is read as bytes and processed in chunks of whole lines. A chunk whose
lines all hold exactly the expected number of fields (no comment, no blank line,
no trailing junk) is split at once by ``bytes.split`` and its columns taken by
stride; numpy counts the fields of every line first, so a short line followed by
a long one can never shift the columns. Any other chunk is read line by line,
with the same rules as trec_eval: leading whitespace skipped, a line whose first
non-blank character is ``#`` and a blank line are ignored.

Example:
    >>> cols, lines = parse_table(b"q1 0 d1 1\\n# c\\nq1 0 d2 0\\n", "x", 4, exact=True, fields=(0, 2, 3))
    >>> cols[1], lines.tolist()
    ([b'd1', b'd2'], [1, 3])
"""
from __future__ import annotations

from typing import List, Sequence, Tuple

from ..optional import require

CHUNK = 1 << 23  # bytes per chunk (whole lines): bounds the memory of the token lists


def numpy():
    """numpy, which the TREC readers need (the ``cli`` extra brings it)."""
    return require("numpy", feature="retrieval_core.trec (reading TREC files)", package="numpy")


def _field_counts(np, chunk: bytes):
    """Fields per line of ``chunk`` (ending with a newline) and whether the line starts with '#'."""
    buf = np.frombuffer(chunk, np.uint8)
    ws = (buf == 32) | ((buf >= 9) & (buf <= 13))  # C isspace, and bytes.split's whitespace
    starts = np.empty(len(buf), bool)
    starts[0] = not ws[0]
    np.greater(ws[:-1], ws[1:], out=starts[1:])  # a blank followed by a non-blank: a field starts
    nl = np.flatnonzero(buf == 10)
    lo = np.empty(len(nl), np.int64)
    lo[0] = 0
    lo[1:] = nl[:-1] + 1
    counts = np.add.reduceat(starts.view(np.uint8), lo, dtype=np.int64)
    counts[lo == nl] = 0  # an empty line: reduceat returns the element itself
    return counts


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
    """Columns ``fields`` (lists of bytes) of the records of ``data``, and each record's line number.

    ``exact``: a record has exactly ``n_fields`` fields (qrels), else at least that many
    (runs: trec_eval ignores what follows the sixth field).
    """
    np = numpy()
    if b"\x00" in data:
        line = data[: data.index(b"\x00")].count(b"\n") + 1
        raise ValueError(f"{path}: line {line}: a NUL byte (is this a text file?)")
    cols: List[list] = [[] for _ in fields]
    line_parts = []
    for chunk, line0 in chunks(data):
        counts = _field_counts(np, chunk)
        if b"#" not in chunk and len(counts) and (counts == n_fields).all():
            tokens = chunk.split()
            for col, f in zip(cols, fields):
                col.extend(tokens[f::n_fields])
            line_parts.append(np.arange(line0, line0 + len(counts), dtype=np.int64))
        else:
            lines: List[int] = []
            _slow_chunk(chunk, path, line0, n_fields, exact, fields, cols, lines)
            line_parts.append(np.asarray(lines, dtype=np.int64))
    line_numbers = np.concatenate(line_parts) if line_parts else np.zeros(0, np.int64)
    return cols, line_numbers


def to_float(np, col: list, lines, path: str, what: str):
    """float64 array of a column of bytes; a clear error (file, line) for a bad or non-finite value."""
    try:
        values = np.array(col, dtype=bytes).astype(np.float64) if col else np.zeros(0, np.float64)
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


def to_int(np, col: list, lines, path: str, what: str):
    """int64 array of a column of bytes; a clear error (file, line) for a non-integer."""
    try:
        return np.array(col, dtype=bytes).astype(np.int64) if col else np.zeros(0, np.int64)
    except (ValueError, OverflowError):
        for i, v in enumerate(col):
            try:
                int(v)
            except ValueError:
                raise ValueError(f"{path}: line {int(lines[i])}: {what} must be an integer; got "
                                 f"{v.decode('utf-8', 'replace')!r}") from None
        raise


def factorize(np, col: list, index: dict, keys: list) -> Tuple:
    """Codes of ``col`` in the vocabulary ``index`` (bytes -> code), extended in place with new keys."""
    for k in dict.fromkeys(col):
        if k not in index:
            index[k] = len(keys)
            keys.append(k)
    return np.array([index[k] for k in col], dtype=np.int64)
