"""The vectorised TREC tokenizer and number parsers against a plain line-by-line reference (the
reader's former implementation): random files with mixed whitespace, comments, blank lines,
CRLF ends, a missing final newline, extra fields, bad lines and scores of many spellings give
the same columns, line numbers, values (bit for bit) and error messages, whatever the chunk
size. Also the exactness of factorize under forced hash collisions."""
from __future__ import annotations

import math
import struct

import pytest

np = pytest.importorskip("numpy")

from hypothesis import HealthCheck, example, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from retrieval_core.trec import _codes, _numbers, _parse, read_qrels, read_run  # noqa: E402

SETTINGS = dict(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def bits(x: float) -> bytes:
    return struct.pack("<d", x)


# ----------------------------------------------------------------------------- reference
def reference_table(text: bytes, path: str, n_fields: int, exact: bool, fields):
    """The reader's former line-by-line rules: records' fields and line numbers, or its error."""
    if b"\x00" in text:
        line = text[:text.index(b"\x00")].count(b"\n") + 1
        raise ValueError(f"{path}: line {line}: a NUL byte (is this a text file?)")
    if text and not text.endswith(b"\n"):
        text += b"\n"
    rows, lines = [], []
    for i, line in enumerate(text.split(b"\n")[:-1], 1):
        parts = line.split()
        if not parts or parts[0].startswith(b"#"):
            continue
        if len(parts) < n_fields or (exact and len(parts) != n_fields):
            want = f"{n_fields} fields" if exact else f"at least {n_fields} fields"
            hint = ""
            if not rows:  # the first record: a header, or the other kind of file
                hint = header_hint(i)
                if exact and n_fields == 4 and len(parts) >= 6:
                    hint = " (a run's line has 6 fields: were the qrels and the run swapped?)"
                if not exact and n_fields == 6 and len(parts) == 4:
                    hint = " (a qrels line has 4 fields: were the run and the qrels swapped?)"
            raise ValueError(f"{path}: line {i}: expected {want}, got {len(parts)}: "
                             f"{line.decode('utf-8', 'replace').strip()!r}{hint}")
        rows.append(parts)
        lines.append(i)
    return [[r[f] for r in rows] for f in fields], lines, rows


def header_hint(line: int) -> str:
    return f" (if line {line} is a header, remove it or comment it out with '#')"


def number_error(path, line, what, must, tok, first_line):
    """The reader's message; the header hint on the first record when the token has no digit."""
    hint = header_hint(line) if line == first_line and not any(c.isdigit() for c in tok.decode("latin-1")) else ""
    return ValueError(f"{path}: line {line}: {what} must be {must}; got {tok.decode('utf-8', 'replace')!r}{hint}")


def parse_float(tok: bytes) -> float:
    """Python's float() without the digit grouping that C's strtod (trec_eval's) does not read."""
    if b"_" in tok:
        raise ValueError(tok)
    return float(tok)


def reference_floats(tokens, lines, path, what):
    for tok, line in zip(tokens, lines):
        try:
            parse_float(tok)
        except ValueError:
            raise number_error(path, line, what, "a finite number", tok, lines[0]) from None
    values = [float(t) for t in tokens]
    for v, tok, line in zip(values, tokens, lines):
        if not math.isfinite(v):
            raise number_error(path, line, what, "a finite number", tok, lines[0])
    return values


def reference_ints(tokens, lines, path, what):
    for tok, line in zip(tokens, lines):
        try:
            if b"_" in tok:
                raise ValueError(tok)
            v = int(tok)
        except ValueError:
            raise number_error(path, line, what, "an integer", tok, lines[0]) from None
        if not -2 ** 63 <= v < 2 ** 63:
            raise ValueError(f"{path}: line {line}: {what} must be an integer of 64 bits (-9223372036854775808 to "
                             f"9223372036854775807); got {tok.decode()!r}")
    return [int(t) for t in tokens]


def outcome(fn):
    try:
        return "ok", fn()
    except ValueError as e:
        return "error", str(e)


# ----------------------------------------------------------------------------- strategies
DIGITS = st.text("0123456789", min_size=0, max_size=25)


@st.composite
def decimals(draw):
    """Scores as written by hand or by programs: signs, points, exponents, long mantissas."""
    kind = draw(st.sampled_from(["parts", "repr", "fixed", "g", "e", "int", "special"]))
    if kind == "parts":
        point = draw(st.booleans())
        whole, frac = draw(DIGITS), draw(DIGITS) if point else ""
        if not whole and not frac:
            whole = "0"
        text = draw(st.sampled_from(["", "+", "-"])) + whole + ("." if point else "") + frac
        if draw(st.integers(0, 9)) == 0:
            sign = draw(st.sampled_from(["", "+", "-"]))
            text += draw(st.sampled_from(["e", "E"])) + sign + str(draw(st.integers(0, 40)))
        return text
    x = draw(st.floats(allow_nan=False, allow_infinity=False, min_value=-1e30, max_value=1e30))
    if kind == "repr":
        return repr(x)
    if kind == "fixed":
        return f"{x:.{draw(st.integers(0, 25))}f}"
    if kind == "g":
        return f"{x:g}"
    if kind == "e":
        return f"{x:e}"
    if kind == "int":
        return str(draw(st.integers(-10 ** 25, 10 ** 25)))
    return draw(st.sampled_from(["9007199254740992", "9007199254740993", "-9007199254740993.0", "0.1",
                                 "0.12345678901234567890123", "1_0", "1e-3", ".5", "5.", "+2", "-0", "-0.0",
                                 "00000000000000000001", "4503599627370497.5", "1" * 19, "1" * 20]))


BAD_SCORES = ["high", "nan", "inf", "-Infinity", "1.2.3", ".", "-", "+", "1e", "--1", "0x10", "1__0", "1_0", "1_0.5",
              "+1_000", "1e1_0"]
IDS = st.text("abcdefgh0123456789#._-", min_size=1, max_size=20).filter(lambda s: not s.startswith("#")) | \
    st.sampled_from(["é", "q1", "d#1", "DOC-00012345", "clueweb12-0000tw-00-00000"]) | \
    st.tuples(st.sampled_from("uvw"), st.sampled_from([7, 8, 9, 16, 17, 33, 64, 65, 200, 1500])).map(
        lambda t: t[0] * t[1])  # ids of every length class, long ones among short
SEPS = st.sampled_from([" ", "\t", "  ", " \t", "\x0b", "\x0c", "\r", "\t\t"])
ENDS = st.sampled_from(["\n", "\r\n", " \n", "\t\r\n", "\n"])


@st.composite
def run_files(draw, bad_lines: bool):
    """A run file's text: records (q, doc, score token) and the noise trec_eval skips."""
    n = draw(st.integers(0, 40))
    queries = draw(st.lists(IDS, min_size=1, max_size=4, unique=True))
    docs = draw(st.lists(IDS, min_size=1, max_size=12, unique=True))
    out, seen = [], set()
    simple = draw(st.sampled_from(["", "\n", "\r\n"]))  # one tab between fields, one line end: the fast path
    for _ in range(n):
        q, d = draw(st.sampled_from(queries)), draw(st.sampled_from(docs))
        if (q, d) in seen:
            continue
        seen.add((q, d))
        score = draw(st.sampled_from(BAD_SCORES)) if bad_lines and draw(st.integers(0, 30)) == 0 else draw(decimals())
        fields = [q, "Q0", d, str(draw(st.integers(0, 999))), score, draw(st.sampled_from(["t", "run_b", "x" * 9]))]
        if draw(st.integers(0, 8)) == 0:
            fields += ["extra"] * draw(st.integers(1, 2))
        if bad_lines and draw(st.integers(0, 30)) == 0:
            fields = fields[:draw(st.integers(1, 5))]
        if simple:
            out.append("\t".join(fields) + simple)
            continue
        lead = draw(st.sampled_from(["", "", " ", "\t "]))
        line = lead + "".join(f + draw(SEPS) for f in fields[:-1]) + fields[-1] + draw(ENDS)
        noise = draw(st.sampled_from(["", "", "", "\n", "# comment a b c\n", "   # x\r\n", " \t\n", "\r\n"]))
        out.append(noise + line)
    text = "".join(out)
    if text and draw(st.booleans()):
        text = text.rstrip("\n")
    return text.encode("utf-8")


# ----------------------------------------------------------------------------- tests
@settings(**SETTINGS)
@given(st.lists(decimals(), min_size=1, max_size=30))
@example(["1", "-0.5", "1e-3", ".5", "5.", "+2", "0.12345678901234567890123", "-0", "9007199254740993"])
@example(["2", "1_0"])  # Python's float() reads 10, trec_eval's strtod 1: refused
def test_decimal_parser_is_bit_identical_to_float(tokens):
    arr = np.array([t.encode() for t in tokens])
    values, ok = _numbers.parse_decimal(np, _numbers.columns(np, arr), np.char.str_len(arr), integer=False)
    for tok, v, good in zip(tokens, values.tolist(), ok.tolist()):
        if good:
            assert bits(v) == bits(float(tok)), tok
        plain = tok.lstrip("+-").replace(".", "", 1)
        if plain.isdigit() and len(plain) <= 15 and tok.count(".") <= 1 and tok[-1:] != "_":
            assert good, tok  # short plain decimals always take the fast path
    full = outcome(lambda: [bits(v) for v in _numbers.to_float(np, arr, np.arange(1, len(arr) + 1), "f", "x").tolist()])
    assert full == outcome(lambda: [bits(v) for v in reference_floats(arr.tolist(), range(1, len(arr) + 1), "f", "x")])


@settings(**SETTINGS)
@given(st.lists(st.integers(-10 ** 20, 10 ** 20).map(str) | st.sampled_from(["+5", "-0", "007", "+0", "1_0"]),
                min_size=1, max_size=30))
def test_integer_parser_equals_int(tokens):
    arr = np.array([t.encode() for t in tokens])
    values, ok = _numbers.parse_decimal(np, _numbers.columns(np, arr), np.char.str_len(arr), integer=True)
    for tok, v, good in zip(tokens, values.tolist(), ok.tolist()):
        if good:
            assert v == int(tok), tok


@pytest.mark.parametrize("chunk", [7, 64, 1 << 20])
@settings(**SETTINGS)
@given(text=run_files(bad_lines=False))
def test_tokenizer_equals_line_by_line_reference(monkeypatch, chunk, text):
    monkeypatch.setattr(_parse, "CHUNK", chunk)
    ref = outcome(lambda: reference_table(text, "r", 6, False, (0, 2, 4))[:2])
    got = outcome(lambda: _parse.parse_table(text, "r", 6, exact=False, fields=(0, 2, 4)))
    if ref[0] == "ok":
        cols, lines = got[1]
        assert [c.tolist() for c in cols] == ref[1][0] and lines.tolist() == ref[1][1]
    else:
        assert got == ref


@pytest.mark.parametrize("chunk", [5, 50, 1 << 20])
@settings(**SETTINGS)
@given(text=run_files(bad_lines=True))
def test_read_run_equals_reference(tmp_path, monkeypatch, chunk, text):
    monkeypatch.setattr(_parse, "CHUNK", chunk)
    path = tmp_path / "run"
    path.write_bytes(text)

    def reference():
        (qcol, dcol, scol), lines, rows = reference_table(text, str(path), 6, False, (0, 2, 4))
        scores = reference_floats(scol, lines, str(path), "the score (5th field)")
        entries = sorted(zip(qcol, dcol, scores), key=lambda e: e[1], reverse=True)
        entries.sort(key=lambda e: -e[2])
        entries.sort(key=lambda e: e[0])
        docs = list(dict.fromkeys(dcol))
        return (tuple(sorted(set(qcol))), [(q, d, bits(s)) for q, d, s in entries], docs,
                rows[-1][5] if rows else b"")

    def ours():
        run = read_run(path)
        ids = run.docs.array.tolist()
        entries = [(run.query_ids[q].encode(), ids[d], bits(s))
                   for q, d, s in zip(run.query.tolist(), run.doc.tolist(), run.score.tolist())]
        return (tuple(q.encode() for q in run.query_ids), entries, ids, run.tag.encode())

    assert outcome(ours) == outcome(reference)


@settings(**SETTINGS)
@given(st.lists(st.tuples(IDS, IDS, st.integers(-3, 3).map(str) | st.integers(-2 ** 65, 2 ** 65).map(str)
                          | st.sampled_from(["+1", "007", "1.5", "x", "rel", "1_0"])), max_size=30),
       st.sampled_from([" ", "\t", "  "]), st.booleans())
def test_read_qrels_equals_reference(tmp_path, rows, sep, crlf):
    rows = list({(q, d): r for q, d, r in rows}.items())  # one judgement per (query, doc)
    text = "".join(f"{q}{sep}0{sep}{d}{sep}{r}" + ("\r\n" if crlf else "\n") for (q, d), r in rows).encode()
    path = tmp_path / "qrels"
    path.write_bytes(text)

    def reference():
        reference_ints([r.encode() for _, r in rows], range(1, len(rows) + 1), str(path), "the relevance (4th field)")
        ids = list(dict.fromkeys(d for (q, d), r in rows))
        return sorted((q, ids.index(d), int(r)) for (q, d), r in rows), ids

    def ours():
        qrels = read_qrels(path)
        return ([(qrels.query_ids[q], d, r) for q, d, r in zip(qrels.query.tolist(), qrels.doc.tolist(),
                                                                qrels.rel.tolist())], qrels.docs.ids())

    assert outcome(ours) == outcome(reference)


def test_errors_keep_their_order_and_messages(tmp_path):
    """Field counts are checked over the whole file before any number; a NUL byte before both."""
    p = tmp_path / "run"
    p.write_bytes(b"q Q0 a 1 high t\nq Q0 b 2 1 t\nq Q0 c 3\n")
    with pytest.raises(ValueError, match="run: line 3: expected at least 6 fields, got 4: 'q Q0 c 3'"):
        read_run(p)
    p.write_bytes(b"q Q0 a 1 1e999 t\r\nq Q0 b 2 high t\r\n")
    with pytest.raises(ValueError, match="line 2: the score .* got 'high'"):  # astype fails: the first bad token
        read_run(p)
    p.write_bytes(b"q Q0 a 1 1 t\r\nq Q0 b 2 -inf t\r\n")
    with pytest.raises(ValueError, match="line 2: the score .* got '-inf'"):
        read_run(p)
    p.write_bytes(b"q Q0 a 1 1 t\nq Q0 b 2 x\x00 t\n\n")
    with pytest.raises(ValueError, match="run: line 2: a NUL byte"):
        read_run(p)
    p.write_bytes(b"q 0 a 1\nq 0 b 99999999999999999999\n")
    with pytest.raises(ValueError, match=r"run: line 2: the relevance \(4th field\) must be an integer of 64 bits "
                                         r"\(-9223372036854775808 to 9223372036854775807\); "
                                         r"got '99999999999999999999'$"):
        read_qrels(p)


def test_crlf_and_missing_final_newline(tmp_path):
    p = tmp_path / "run"
    p.write_bytes(b"q1\tQ0\td1\t1\t0.5\ttag1\r\nq1\tQ0\td2\t2\t0.25\ttag2\r\n# done\r\n")
    run = read_run(p)
    assert run.tag == "tag2" and run.docs.ids() == ["d1", "d2"] and run.score.tolist() == [0.5, 0.25]
    p.write_bytes(b"q 0 a 1\r\nq 0 b 2")
    assert read_qrels(p).rel.tolist() == [1, 2]


@pytest.mark.parametrize("hash_fn", [
    lambda np_, w: np.zeros(len(w), np.uint64),  # every id collides
    lambda np_, w: (w[:, 0] % np.uint64(3)) << np.uint64(62),  # a few groups of many ids
])
def test_factorize_exact_under_hash_collisions(monkeypatch, hash_fn):
    monkeypatch.setattr(_codes, "hash_words", hash_fn)
    rng = np.random.default_rng(0)
    for _ in range(50):
        arr = np.array([b"id-%d" % v for v in rng.integers(0, rng.integers(1, 30), rng.integers(1, 80))])
        first, inverse = _codes.factorize(np, arr)
        index: dict = {}
        codes = [index.setdefault(k, len(index)) for k in arr.tolist()]
        assert inverse.tolist() == codes and first.tolist() == [arr.tolist().index(k) for k in index]


def test_reads_a_pipe(tmp_path):
    """A named pipe (as ``<(zcat run.gz)`` gives) is read as it comes, not sized first."""
    import os
    import threading

    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    text = b"".join(b"q%d Q0 d%d 1 %d.25 tag\n" % (i % 3, i, i) for i in range(5000))
    writer = threading.Thread(target=lambda: fifo.write_bytes(text))
    writer.start()
    run = read_run(fifo)
    writer.join()
    assert len(run) == 5000 and run.tag == "tag" and sorted(run.score.tolist()) == [i + 0.25 for i in range(5000)]


LENGTHS = st.sampled_from([0, 1, 7, 8, 9, 15, 16, 17, 32, 33, 64, 65, 130, 600])
ID_BYTES = st.tuples(st.sampled_from(b"ab\xe9"), LENGTHS).map(lambda t: bytes([t[0]]) * t[1]) | \
    st.binary(min_size=1, max_size=20).filter(lambda b: b"\x00" not in b)


@pytest.mark.parametrize("hash_fn", [None, lambda np_, w: np.zeros(len(w), np.uint64)])
@settings(**SETTINGS)
@given(st.lists(ID_BYTES, max_size=40), st.lists(ID_BYTES, max_size=10), st.data())
def test_ids_of_every_length_class_equal_python(monkeypatch, hash_fn, keys, more, data):
    """An id column split by length class gives the codes, rows, runs and byte order of the plain
    Python lists, whatever the lengths mixed in it, and when every hash collides."""
    if hash_fn is not None:
        monkeypatch.setattr(_codes, "hash_words", hash_fn)
    ids, other = _codes.Ids.of(np, keys), _codes.Ids.of(np, more)
    assert all(w.shape[1] == _codes.word_class(-(-len(keys[r]) // 8)) for w, rows in ids.parts
               for r in (range(len(keys)) if rows is None else rows.tolist()))  # each id in its own class
    assert ids.tolist(np) == keys and len(ids) == len(keys)
    index: dict = {}
    codes = [index.setdefault(k, len(index)) for k in keys]
    first, inverse = ids.factorize(np)
    assert inverse.tolist() == codes and first.tolist() == [keys.index(k) for k in index]
    both = ids.concat(np, other)
    assert both.tolist(np) == keys + more
    pick = data.draw(st.lists(st.integers(0, max(len(keys) + len(more) - 1, 0)), max_size=12)) if keys + more else []
    assert both.take(np, pick).tolist(np) == [(keys + more)[i] for i in pick]
    assert [both.key(np, i) for i in range(len(both))] == keys + more
    assert both.run_heads(np).tolist() == [i for i, k in enumerate(keys + more) if i == 0 or (keys + more)[i - 1] != k]
    assert [(keys + more)[i] for i in both.byte_order(np).tolist()] == sorted(keys + more)
