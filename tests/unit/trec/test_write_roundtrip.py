"""write_run and write_qrels never write what would read back differently (issue 26, item 5): a
bad id, a repeated document or query, a NaN score each raise a ValueError naming it; whatever
they write reads back equal (random runs and qrels, hypothesis)."""
from __future__ import annotations

import math
import struct

import pytest
import torch

np = pytest.importorskip("numpy")

from hypothesis import HealthCheck, example, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from retrieval_core.trec import (  # noqa: E402
    Qrels, Run, Vocabulary, qrels_from_dict, read_qrels, read_run, run_from_dict, write_qrels, write_run,
)

SETTINGS = dict(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
BLANKS = set(b" \t\n\v\f\r\0")  # what the reader splits on (C's isspace), and NUL, which it refuses


def readable(field: str, first: bool = False) -> bool:
    """The reference rule: a field reads back whole from a TREC line."""
    raw = field.encode("utf-8", "surrogateescape")
    return bool(raw) and not BLANKS & set(raw) and not (first and raw.startswith(b"#"))


def one(tmp_path):
    """A path not written yet, and one row of two documents."""
    return tmp_path / "out", torch.tensor([[0, 1]]), torch.tensor([[2.0, 1.0]])


@pytest.mark.parametrize("kw, message", [
    (dict(query_ids=["a b"]), r"query id .* without whitespace or NUL .*; got 'a b'"),
    (dict(query_ids=[""]), r"query id .* non-empty.*; got ''"),
    (dict(query_ids=["q\t1"]), r"got 'q\\t1'"),
    (dict(query_ids=["#q"]), r"query id .* must not start with '#' \(the line would read as a comment\); got '#q'"),
    (dict(doc_ids=["doc 1", "d2"]), r"doc id .* without whitespace.*; got 'doc 1'"),
    (dict(doc_ids=["", "d2"]), r"doc id .* non-empty.*; got ''"),
    (dict(doc_ids=["d\x001", "d2"]), r"doc id .*NUL.*; got 'd\\x001'"),
    (dict(doc_ids=["d1\u2028", "d\v"]), r"doc id .*; got 'd\\x0b'"),
    (dict(tag="my run"), r"tag .* without whitespace.*; got 'my run'"),
    (dict(doc_ids=["d1"]), r"doc index 1 \(row 0\) has no name: doc_ids holds 1"),
])
def test_write_run_refuses_what_would_not_read_back(tmp_path, kw, message):
    path, idx, scores = one(tmp_path)
    with pytest.raises(ValueError, match=message):
        write_run(path, idx, scores, **kw)
    assert not path.exists()  # refused before anything is written


def test_write_run_refuses_repeats_and_non_finite_scores(tmp_path):
    path = tmp_path / "run"
    with pytest.raises(ValueError, match=r"row 1 \(query 'b'\) holds document 'x' twice \(columns 0 and 2\); a run "
                                         "holds a document once per query"):
        write_run(path, torch.tensor([[0, 1, -1], [1, 0, 1]]), torch.rand(2, 3), query_ids=["a", "b"],
                  doc_ids=["w", "x"])
    with pytest.raises(ValueError, match=r"query id 'a' is given for rows 0 and 2; a run holds one ranking per query"):
        write_run(path, torch.tensor([[0], [1], [2]]), torch.rand(3, 1), query_ids=["a", "b", "a"])
    for bad in (math.nan, math.inf, -math.inf):
        with pytest.raises(ValueError, match=r"row 0 \(query '0'\), document '1': the score must be finite; got "):
            write_run(path, torch.tensor([[0, 1, 2]]), torch.tensor([[1.0, bad, 0.5]]))
    write_run(path, torch.tensor([[0, -1]]), torch.tensor([[1.0, math.nan]]))  # padding: its score unused
    assert path.read_text() == "0 Q0 0 1 1.0 run\n"
    assert not (tmp_path / "never").exists()


def test_a_run_or_qrels_object_is_checked_too(tmp_path):
    run = run_from_dict({"q": {"a b": 1.0, "c": 2.0}})  # fine in memory, not in a file
    with pytest.raises(ValueError, match="doc id .*; got 'a b'"):
        write_run(tmp_path / "run", run)
    with pytest.raises(ValueError, match="query id .* start with '#'"):
        write_qrels(tmp_path / "qrels", {"#1": {"a": 1}})
    with pytest.raises(ValueError, match="doc id .*; got 'x\\\\ny'"):
        write_qrels(tmp_path / "qrels", qrels_from_dict({"q": {"x\ny": 1}}))
    docs = Vocabulary(["a", "b"])
    z = torch.zeros(2, dtype=torch.int64)
    twice = Run(("q",), docs, z, z, torch.tensor([1.0, 0.5], dtype=torch.float64), torch.tensor([0, 2]), "t")
    with pytest.raises(ValueError, match="write_run: a document appears twice for one query"):
        write_run(tmp_path / "run", twice)
    nan = Run(("q",), docs, z, torch.tensor([0, 1]), torch.tensor([1.0, math.nan], dtype=torch.float64),
              torch.tensor([0, 2]), "t")
    with pytest.raises(ValueError, match="write_run: scores must be finite"):
        write_run(tmp_path / "run", nan)
    with pytest.raises(ValueError, match="write_qrels: a query id appears twice in query_ids"):
        write_qrels(tmp_path / "qrels", Qrels(("q", "q"), docs, torch.tensor([0, 1]), torch.tensor([0, 1]), z))
    with pytest.raises(ValueError, match=r"run: query 'q', doc 'a\\x00': ids must not hold a NUL byte"):
        run_from_dict({"q": {"a\0": 1.0}})  # (a trailing NUL was dropped: 'a' written)
    with pytest.raises(ValueError, match=r"qrels: query 'q', doc 'a': relevance must fit in 64 bits \(-92233"):
        write_qrels(tmp_path / "qrels", {"q": {"a": 2 ** 63}})
    assert not (tmp_path / "run").exists() and not (tmp_path / "qrels").exists()


# ids from an alphabet with every kind of trouble: whitespace (C's and Unicode's), NUL, '#', non-ASCII
ALPHABET = "ab#é\u2028\xa0\x1c \t\n\r\x0b\x0c\x00"
IDS = st.text(ALPHABET, max_size=4) | st.text("abc", min_size=1, max_size=3) | \
    st.integers(1, 300).map(lambda n: "u" * n)  # long ids: several length classes
SCORES = st.floats(width=64) | st.sampled_from([0.0, -0.0, 5e-324, 1e300, 0.1, 1 / 3])


def bits(x: float) -> bytes:
    return struct.pack("<d", x)


@settings(**SETTINGS)
@given(st.dictionaries(IDS, st.dictionaries(IDS, SCORES, max_size=6), max_size=5), IDS)
@example({"a": {"a\0": 0.0}}, "")  # (a numpy bytes array drops a trailing NUL)
@example({"q": {"d": 1.0}, "#q": {"d": 2.0}, "r": {"a b": 1.0}}, "t")
def test_written_runs_read_back_equal(tmp_path, table, tag):
    path = tmp_path / "run"
    ok = (all(readable(q, first=True) and all(readable(d) and math.isfinite(s) for d, s in docs.items())
              for q, docs in table.items() if docs) and (readable(tag) or not tag))
    try:
        run = run_from_dict(table, tag=tag)
        write_run(path, run)
    except ValueError:
        assert not ok
        return
    assert ok
    back = read_run(path)
    assert back.query_ids == run.query_ids and back.tag == ((tag or "run") if len(run) else "")  # (no line, no tag)
    entries = lambda r: [(r.query_ids[q], r.docs[d], bits(s))  # noqa: E731
                         for q, d, s in zip(r.query.tolist(), r.doc.tolist(), r.score.tolist())]
    assert entries(back) == entries(run) and back.offsets.tolist() == run.offsets.tolist()


@settings(**SETTINGS)
@given(st.lists(st.tuples(IDS, st.lists(st.tuples(st.integers(-1, 5), SCORES), max_size=4)), min_size=1, max_size=4),
       st.lists(IDS, min_size=6, max_size=6))
def test_written_topk_tensors_read_back_equal(tmp_path, rows, names):
    k = max(len(r) for _, r in rows)
    idx = torch.full((len(rows), k), -1)
    scores = torch.zeros(len(rows), k, dtype=torch.float64)
    for i, (_, r) in enumerate(rows):
        for j, (d, s) in enumerate(r):
            idx[i, j], scores[i, j] = d, s
    qids = [q for q, _ in rows]
    used = [[(names[d], s) for d, s in r if d >= 0] for _, r in rows]
    ok = (len(set(qids)) == len(qids) and all(readable(q, first=True) for q in qids)
          and all(readable(n) and math.isfinite(s) for u in used for n, s in u)
          and all(len({n for n, _ in u}) == len(u) for u in used))
    path = tmp_path / "run"
    try:
        write_run(path, idx, scores, query_ids=qids, doc_ids=names)
    except ValueError:
        assert not ok
        return
    assert ok
    back = read_run(path).to_dict()
    assert back == {q: dict(u) for q, u in zip(qids, used) if u}  # a row of padding only has no line


@settings(**SETTINGS)
@given(st.dictionaries(IDS, st.dictionaries(IDS, st.integers(-3, 3) | st.integers(-2 ** 64, 2 ** 64), max_size=5),
                       max_size=5))
def test_written_qrels_read_back_equal(tmp_path, table):
    path = tmp_path / "qrels"
    ok = all(readable(q, first=True) and all(readable(d) and -2 ** 63 <= r < 2 ** 63 for d, r in docs.items())
             for q, docs in table.items() if docs)
    try:
        write_qrels(path, table)
    except ValueError:
        assert not ok
        return
    assert ok
    assert read_qrels(path).to_dict() == {q: docs for q, docs in table.items() if docs}
