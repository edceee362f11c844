"""Exact, vectorised parsing of the number columns of TREC files (scores, relevance levels).

A token of the common decimal form (an optional sign, digits, for a score at most one ``.``,
at least one digit and at most 19 for a score, 18 for an integer) is parsed from its bytes with
numpy: its digits as an integer mantissa M, and k the number of digits after the point. When M
<= 2**53 (k <= 22 always holds then), M and 10**k are exact doubles and IEEE division rounds
once, so M / 10**k is the correctly rounded value (Clinger's fast path): bit-identical to
``float()``. Every other token (an exponent, a longer mantissa, inf, nan, junk) is parsed by
numpy's ``astype`` (Python's parser) as before, with the same errors (file, line); spellings that
only Python takes (digits grouped by underscores, ``1_0``) are refused as malformed first.

Example:
    >>> import numpy as np
    >>> toks = np.array([b"1", b"-0.5", b".5", b"5.", b"+2", b"1e-3", b"0.12345678901234567890123"])
    >>> values, ok = parse_decimal(np, columns(np, toks), np.char.str_len(toks), integer=False)
    >>> values[ok].tolist(), ok.tolist()
    ([1.0, -0.5, 0.5, 5.0, 2.0], [True, True, True, True, True, False, False])
    >>> to_float(np, toks[5:], np.array([7, 8]), "run", "the score").tolist() == [1e-3, 0.12345678901234568]
    True
"""
from __future__ import annotations

from ._parse import _MASKS, as_bytes, gather_words, words_view

FLOAT_WIDTH, INT_WIDTH = 21, 19  # the longest tokens of the fast forms: sign, 19 digits, point
_POW10 = [float(10 ** k) for k in range(23)]  # exact doubles


def columns(np, tokens):
    """``[width, n]`` uint8: byte j of every token in row j, zero past its end (``tokens``: S array)."""
    n, w = len(tokens), tokens.dtype.itemsize
    return np.ascontiguousarray(np.ascontiguousarray(tokens).view(np.uint8).reshape(n, w).T)


def parse_decimal(np, cols, widths, *, integer: bool):
    """Values and ``ok`` (the token has the fast form, its value is exact) of tokens given as
    ``cols`` (see :func:`columns`) of byte ``widths``; values where not ok are meaningless."""
    n = cols.shape[1]
    digit = cols - np.uint8(48)
    is_digit = digit < 10
    n_digits = is_digit.sum(0, dtype=np.uint8)
    lead = cols[0] if len(cols) else np.zeros(n, np.uint8)
    negative = lead == 45
    n_other = n_digits + (negative | (lead == 43))
    mantissa, step = np.zeros(n, np.uint64), np.empty(n, np.uint64)
    for j in range(len(cols)):  # Horner over the digits (a sign, a point, the padding skipped)
        np.multiply(mantissa, np.uint64(10), out=step)
        np.add(step, digit[j], out=step)
        np.copyto(mantissa, step, where=is_digit[j])
    if integer:
        ok = (n_other == widths) & (n_digits >= 1) & (n_digits <= 18)
        values = mantissa.astype(np.int64)
        np.negative(values, out=values, where=negative)
        return values, ok
    is_point = cols == 46
    n_points = is_point.sum(0, dtype=np.uint8)
    at = (is_point * np.arange(len(cols), dtype=np.uint8)[:, None]).sum(0, dtype=np.int64)
    ok = ((n_other + n_points == widths) & (n_points <= 1) & (n_digits >= 1) & (n_digits <= 19)
          & (mantissa <= np.uint64(1 << 53)))
    decimals = np.where(n_points == 1, widths - 1 - at, 0).clip(0, 22)
    values = mantissa.astype(np.float64) / np.asarray(_POW10)[decimals]
    np.negative(values, out=values, where=negative)
    return values, ok


def _python_only(np, col):
    """Index of the first token in a spelling that Python's parsers take but C's (trec_eval's) do
    not: digits grouped by underscores (``1_0``); None if none."""
    if col.dtype == object:  # (bytes objects: see ``Numbers.result``)
        return next((i for i, token in enumerate(col) if b"_" in token), None)
    grouped = np.flatnonzero(np.char.find(col, b"_") >= 0)
    return int(grouped[0]) if len(grouped) else None


def _error(path: str, line, what: str, must: str, token, hint: str = "") -> ValueError:
    """The error of a bad token; ``hint`` (for a header line) only if it holds no digit."""
    hint = "" if any(48 <= c <= 57 for c in bytes(token)) else hint
    return ValueError(f"{path}: line {int(line)}: {what} must be {must}; got "
                      f"{token.decode('utf-8', 'replace')!r}{hint}")


def to_float(np, col, lines, path: str, what: str, hint: str = ""):
    """float64 array of a column of bytes (an S array, or an object array of bytes); a clear error
    (file, line) for a bad or non-finite value.
    ``hint`` ends the message when the bad token is on line ``lines[0]`` (the file's first record)."""
    bad = _python_only(np, col)
    try:
        values = col.astype(np.float64) if bad is None else None
    except ValueError:
        values = None
    if values is None:
        for i, v in enumerate(col[:bad]):
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
        raise _error(path, lines[bad], what, "a finite number", col[bad], hint if bad == 0 else "")
    return values


def to_int(np, col, lines, path: str, what: str, hint: str = ""):
    """int64 array of a column of bytes; a clear error (file, line) for a non-integer or an integer
    beyond 64 bits. ``hint`` as for :func:`to_float`."""
    bad = _python_only(np, col)
    if bad is None:
        try:
            return col.astype(np.int64)
        except (ValueError, OverflowError):
            pass
    for i, v in enumerate(col if bad is None else col[:bad]):
        try:
            number = int(v)
        except ValueError:
            bad = i
            break
        if not -(1 << 63) <= number < 1 << 63:
            raise _error(path, lines[i], what, f"an integer of 64 bits ({-(1 << 63)} to {(1 << 63) - 1})", v)
    if bad is None:  # (astype refused what int() takes, in range: not expected)
        return np.array([int(v) for v in col], np.int64)
    raise _error(path, lines[bad], what, "an integer", col[bad], hint if bad == 0 else "")


class Numbers:
    """Collects a number column chunk by chunk (the fast form parsed at once, the spans of the
    other tokens kept); ``result`` parses those with ``astype`` and checks the values."""

    def __init__(self, np, src, *, integer: bool):
        self.np, self.integer, self.data, self.view = np, integer, src.data, words_view(np, src.data)
        self.masks = np.array(_MASKS, np.uint64)
        self.values, self.slow, self.slow_starts, self.slow_widths, self.n = [], [], [], [], 0

    def add(self, starts, widths) -> None:
        np = self.np
        if not len(starts):
            return
        longest = min(int(widths.max()), INT_WIDTH if self.integer else FLOAT_WIDTH)
        words = gather_words(np, self.view, self.masks, starts, widths, (longest + 7) // 8)
        cols = np.ascontiguousarray(words.view(np.uint8).reshape(len(starts), -1).T)[:longest]
        values, ok = parse_decimal(np, cols, widths, integer=self.integer)
        self.values.append(values)
        if not ok.all():
            slow = np.flatnonzero(~ok)
            self.slow.append(slow + self.n)
            self.slow_starts.append(starts[slow])
            self.slow_widths.append(widths[slow])
        self.n += len(starts)

    def result(self, lines, path: str, what: str, hint: str = ""):
        """The values; ``hint`` ends the message of a bad token on the first record."""
        np = self.np
        dtype = np.int64 if self.integer else np.float64
        values = np.concatenate(self.values) if self.values else np.zeros(0, dtype)
        if self.slow:
            slow = np.concatenate(self.slow)
            starts, widths = np.concatenate(self.slow_starts), np.concatenate(self.slow_widths)
            longest = int(widths.max())
            if longest > 64 and len(widths) * longest > 2 * int(widths.sum()) + (1 << 20):
                # a long token among many: each as its own bytes object, not all padded to the longest
                col = np.array([bytes(self.data[a:a + w]) for a, w in zip(starts.tolist(), widths.tolist())] + [b""],
                               dtype=object)[:-1]
            else:
                col = as_bytes(np, gather_words(np, self.view, self.masks, starts, widths, (longest + 7) // 8))
            parse = to_int if self.integer else to_float
            values[slow] = parse(np, col, lines[slow], path, what, hint if slow[0] == 0 else "")
        return values
