"""Readers, writers and dict conversions of retrieval_core.trec.files: round trips, the
shared vocabulary, trec_eval's order, and every bad input's message (file, line)."""
from __future__ import annotations

import random

import pytest
import torch

pytest.importorskip("numpy")

from retrieval_core.trec import (  # noqa: E402
    Vocabulary, align, qrels_from_dict, read_qrels, read_run, run_from_dict, write_qrels, write_run,
)
from retrieval_core.trec import _parse  # noqa: E402


def write(tmp_path, name, text):
    p = tmp_path / name
    p.write_text(text)
    return p


def random_run(rng, n_q=6, n_docs=40, ties=True):
    run = {}
    for q in range(n_q):
        docs = rng.sample(range(n_docs), rng.randint(1, 25))
        run[f"q{q}"] = {f"d{d}": float(rng.randint(0, 4)) if ties else rng.random() for d in docs}
    return run


def test_run_dict_round_trip_through_a_file(tmp_path):
    rng = random.Random(1)
    table = random_run(rng)
    p = tmp_path / "run"
    write_run(p, run_from_dict(table, tag="mine"))
    back = read_run(p)
    assert back.to_dict() == table and back.tag == "mine"


def test_qrels_dict_round_trip_through_a_file(tmp_path):
    table = {"b": {"x": 2, "y": -1}, "a": {"x": 0}}
    p = tmp_path / "qrels"
    write_qrels(p, table)
    q = read_qrels(p)
    assert q.to_dict() == table and q.query_ids == ("a", "b")
    assert q.judged.tolist() == [True, True, False] and q.n_relevant(0).tolist() == [1, 1]


def test_order_is_score_descending_then_docid_descending_in_byte_order():
    run = run_from_dict({"q": {"d10": 1.0, "d9": 1.0, "d2": 3.0, "Z": 1.0, "é": 1.0}})
    # byte order: "Z" < "d10" < "d9" < "é" (0xc3...); descending among the ties at 1.0
    assert [run.docs[i] for i in run.doc.tolist()] == ["d2", "é", "d9", "d10", "Z"]
    assert run.rank.tolist() == [1, 2, 3, 4, 5]


def test_rank_column_is_ignored(tmp_path):
    p = write(tmp_path, "run", "q Q0 a 1 0.1 t\nq Q0 b 2 0.7 t\n")
    run = read_run(p)
    assert [run.docs[i] for i in run.doc.tolist()] == ["b", "a"]


def test_queries_sorted_in_byte_order_as_trec_eval():
    run = run_from_dict({"10": {"a": 1.0}, "9": {"a": 1.0}, "1": {"a": 1.0}})
    assert run.query_ids == ("1", "10", "9")
    assert run.offsets.tolist() == [0, 1, 2, 3]


def test_shared_vocabulary_extends_and_keeps_indices():
    qrels = qrels_from_dict({"q": {"a": 1, "b": 0}})
    before = [qrels.docs[i] for i in qrels.doc.tolist()]
    run = run_from_dict({"q": {"c": 2.0, "a": 1.0}}, docs=qrels.docs)
    assert run.docs is qrels.docs and len(qrels.docs) == 3
    assert [qrels.docs[i] for i in qrels.doc.tolist()] == before
    assert run.doc.tolist() == [qrels.docs.index("c"), qrels.docs.index("a")]


def test_fast_and_line_by_line_paths_agree(tmp_path, monkeypatch):
    rng = random.Random(2)
    lines = [f"q{rng.randint(0, 9)} Q0 d{i} {i} {rng.randint(0, 5)}.5 t" for i in range(3000)]
    regular = write(tmp_path, "regular", "\n".join(lines) + "\n")
    irregular = write(tmp_path, "irregular", "\n".join(f"  {x}  extra junk\n\n# c" for x in lines))
    monkeypatch.setattr(_parse, "CHUNK", 1000)  # many chunks, each split at a line end
    a, b = read_run(regular), read_run(irregular)
    assert a.to_dict() == b.to_dict() and len(a) == 3000
    assert torch.equal(a.score, b.score) and [a.docs[i] for i in a.doc] == [b.docs[i] for i in b.doc]


def test_last_line_without_newline_and_empty_file(tmp_path):
    assert len(read_run(write(tmp_path, "r", "q Q0 a 1 1 t\nq Q0 b 2 0 u"))) == 2
    for text in ("q Q0 a 1 1 t\nq Q0 b 2 0 u", "q Q0 a 1 1 t\nq Q0 b 2 0 u\n# end\n\n", "q Q0 b 2 0 u x y\n# c",
                 "q Q0 b 2 0 u\n"):
        assert read_run(write(tmp_path, "r2", text)).tag == "u", text
    empty = read_run(write(tmp_path, "e", "# nothing\n\n"))
    assert len(empty) == 0 and empty.query_ids == () and empty.offsets.tolist() == [0]


@pytest.mark.parametrize("text, message", [
    ("q Q0 a 1 0.5 t\nq Q0 b 2 0.4\n", "run: line 2: expected at least 6 fields, got 5"),
    ("q Q0 a 1 0.5 t\n\nq Q0 b 2 high t\n", "run: line 3: the score (5th field) must be a finite number; got 'high'"),
    ("q Q0 a 1 nan t\n", "run: line 1: the score (5th field) must be a finite number; got 'nan'"),
    ("q Q0 a 1 0.5 t\nq Q0 b 2 0.4 t\nq Q0 a 3 0.1 t\n", "document 'a' appears twice for query 'q' (lines 1 and 3)"),
    ("q Q0 a 1 0.5 t\x00\n", "run: line 1: a NUL byte"),
    # a short line then a long one: as many fields as two regular lines, the columns must not shift
    ("q Q0 a 1 0.5\nq Q0 b 2 0.4 t extra\n", "run: line 1: expected at least 6 fields, got 5"),
])
def test_bad_run_files(tmp_path, text, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        read_run(write(tmp_path, "run", text))


@pytest.mark.parametrize("text, message", [
    ("q 0 a 1\nq 0 b 1 extra\n", "qrels: line 2: expected 4 fields, got 5"),
    ("q 0 a 1\nq 0 b\n", "qrels: line 2: expected 4 fields, got 3"),
    ("# c\nq 0 a 1.5\n", "qrels: line 2: the relevance (4th field) must be an integer; got '1.5'"),
    ("q 0 a 1\nq 0 a 0\n", "document 'a' appears twice for query 'q' (lines 1 and 2)"),
    ("q 0 a\nq 0 b 1 x\n", "qrels: line 1: expected 4 fields, got 3"),
])

def test_bad_qrels_files(tmp_path, text, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        read_qrels(write(tmp_path, "qrels", text))


def test_bad_dicts():
    with pytest.raises(ValueError, match="relevance must be an integer; got 0.5"):
        qrels_from_dict({"q": {"a": 0.5}})
    with pytest.raises(ValueError, match="scores must be finite; got inf"):
        run_from_dict({"q": {"a": float("inf")}})
    with pytest.raises(TypeError, match=r"must be a dict \{qid: \{docid: value\}\}"):
        run_from_dict([("q", "a", 1.0)])
    with pytest.raises(TypeError, match="doc ids must be str"):
        qrels_from_dict({"q": {1: 1}})


def test_write_run_from_topk_tensors(tmp_path):
    idx = torch.tensor([[3, 1, -1], [0, 2, 1]])
    scores = torch.tensor([[0.5, 0.5, 9.0], [0.1, 0.3, 0.2]], dtype=torch.float32)
    p = tmp_path / "run"
    write_run(p, idx, scores, query_ids=["a", "b"], doc_ids=["w", "x", "y", "z"], tag="t")
    lines = p.read_text().splitlines()
    # -1 is padding; ties (z, x at 0.5) written docid descending; ranks 1.. per query
    assert lines == ["a Q0 z 1 0.5 t", "a Q0 x 2 0.5 t", "b Q0 y 1 0.30000001192092896 t",
                     "b Q0 x 2 0.20000000298023224 t", "b Q0 w 3 0.10000000149011612 t"]
    assert read_run(p).score.tolist() == [0.5, 0.5] + scores[1].double().sort(descending=True).values.tolist()


def test_write_run_refuses_bad_input(tmp_path):
    with pytest.raises(ValueError, match=r"must both be \[Q, k\]"):
        write_run(tmp_path / "r", torch.tensor([[1, 2]]), torch.tensor([1.0, 2.0]))
    with pytest.raises(ValueError, match="non-empty, without whitespace or NUL .*; got 'a b'"):
        write_run(tmp_path / "r", torch.tensor([[1]]), torch.tensor([[1.0]]), query_ids=["a b"])
    with pytest.raises(ValueError, match="2 query ids for 1 rows"):
        write_run(tmp_path / "r", torch.tensor([[1]]), torch.tensor([[1.0]]), query_ids=["a", "b"])


def test_vocabulary():
    v = Vocabulary(["a", "b"])
    assert v.add(b"a") == 0 and v.add(b"c") == 2 and v.ids() == ["a", "b", "c"]
    with pytest.raises(KeyError):
        v.index("zz")


def test_align_against_pytrec_eval_counts_and_precision_with_ties():
    pytrec_eval = pytest.importorskip("pytrec_eval")
    rng = random.Random(3)
    run = random_run(rng, n_q=8)
    qrels = {q: {f"d{d}": rng.choice([0, 0, 1, 2, -1]) for d in rng.sample(range(40), 15)} for q in list(run)[:-1]}
    qrels["only_qrels"] = {"d1": 1}
    ev = pytrec_eval.RelevanceEvaluator(qrels, {"num_ret", "num_rel", "num_rel_ret", "P.5", "success.1"})
    ref = ev.evaluate(run)
    q = qrels_from_dict(qrels)
    al = align(run_from_dict(run, docs=q.docs), q)
    assert list(al.query_ids) == sorted(ref)
    top5 = [al.relevant[al.offsets[i]:al.offsets[i] + 5].sum().item() / 5 for i in range(len(al.query_ids))]
    first = [al.relevant[al.offsets[i]].item() if al.num_ret[i] else 0 for i in range(len(al.query_ids))]
    for i, qid in enumerate(al.query_ids):
        assert ref[qid]["num_ret"] == al.num_ret[i].item()
        assert ref[qid]["num_rel"] == al.n_relevant[i].item()
        assert ref[qid]["num_rel_ret"] == al.num_rel_ret[i].item()
        assert ref[qid]["P_5"] == pytest.approx(top5[i])
        assert ref[qid]["success_1"] == first[i]


@pytest.mark.parametrize("layout", ["score_order_ties_ascending", "shuffled", "blocks_out_of_query_order"])
def test_order_with_many_ties_equals_python_sorting(tmp_path, layout):
    rng = random.Random(4)
    table = random_run(rng, n_q=5, n_docs=300)
    rows = [(q, d, s) for q, docs in table.items() for d, s in docs.items()]
    if layout == "shuffled":
        rng.shuffle(rows)
    elif layout == "blocks_out_of_query_order":  # each query's entries together, in score order
        rows.sort(key=lambda r: (-int(r[0][1:]), -r[2], r[1]))
    else:  # already in score order, the ties in the wrong (ascending) docid order: only ties move
        rows.sort(key=lambda r: (r[0], -r[2], r[1]))
    p = write(tmp_path, "run", "".join(f"{q} Q0 {d} 0 {s} t\n" for q, d, s in rows))
    run = read_run(p)
    for qi, qid in enumerate(run.query_ids):
        expect = sorted(((d, s) for q, d, s in rows if q == qid), key=lambda r: r[0].encode(), reverse=True)
        expect.sort(key=lambda r: r[1], reverse=True)
        lo, hi = run.offsets[qi].item(), run.offsets[qi + 1].item()
        assert [(run.docs[i], s) for i, s in zip(run.doc[lo:hi].tolist(), run.score[lo:hi].tolist())] == expect


@pytest.mark.parametrize("text, simple", [
    (b"a b\nc d\n", True), (b"a\tb\nc\x0bd\n", True), (b"  a\tb \r\n c  d\n", False), (b"a b\r\nc d\r\n", True),
    (b"a b\r\nc d\n", False), (b"a b c\nd e f\n", False), (b"a b\rc\nd e\rf\n", False), (b"a\rb\r\nc d\r\n", True),
    (b"a\nb c d\n", False), (b"a b c\nd\n", False), (b"a b\n\nc d\n", False), (b"a b\nc\x1fd\n", False),
    (b"a b\n#c d\n", False), (b"#a b\nc d\n", False), (b"a b\nc #d\n", True),
])
def test_simple_chunk_detection(text, simple):
    """The fast path takes only lines of exactly two fields, one whitespace byte after each, no
    comment; every other chunk takes the general path, with the same columns as bytes.split."""
    import numpy as np
    buf = np.frombuffer(text, np.uint8)
    scratch = _parse._Scratch(np, len(text))
    assert (_parse._simple(np, buf, _parse._whitespace(np, buf, scratch), scratch, 2) is not None) is simple
    lines = [(i, line.split()) for i, line in enumerate(text.split(b"\n")[:-1], 1)]
    lines = [(i, parts) for i, parts in lines if parts and not parts[0].startswith(b"#")]
    if all(len(parts) == 2 for _, parts in lines):
        cols, numbers = _parse.parse_table(text, "t", 2, exact=True, fields=(0, 1))
        assert [c.tolist() for c in cols] == [[p[f] for _, p in lines] for f in (0, 1)]
        assert numbers.tolist() == [i for i, _ in lines]
    else:
        with pytest.raises(ValueError, match="t: line [0-9]+: expected 2 fields"):
            _parse.parse_table(text, "t", 2, exact=True, fields=(0, 1))


def test_missing_numpy_names_the_extra(tmp_path, monkeypatch):
    import sys

    p = write(tmp_path, "qrels", "q 0 a 1\n")
    monkeypatch.setitem(sys.modules, "numpy", None)  # import numpy now fails
    with pytest.raises(ImportError, match=r"needs numpy: pip install 'retrieval-metrics\[cli\]'"):
        read_qrels(p)


def test_align_edge_cases():
    empty_run, empty_qrels = run_from_dict({}), qrels_from_dict({})
    qrels = qrels_from_dict({"q": {"a": 1}})
    run = run_from_dict({"other": {"a": 1.0}})
    cases = [(empty_run, empty_qrels, True, 0), (run, empty_qrels, False, 0), (empty_run, qrels, False, 0),
             (empty_run, qrels, True, 1), (run, qrels, False, 0), (run, qrels, True, 1)]
    for r, q, complete, n in cases:
        al = align(r, q, complete=complete)
        assert len(al.query_ids) == n and al.num_ret.sum().item() == 0 and al.ideal_dense().shape[0] == n
        assert al.n_relevant.tolist() == [1] * n
    with pytest.raises(ValueError, match="max_per_query must be a non-negative int"):
        align(run, qrels, max_per_query=-1)
    with pytest.raises(TypeError, match="level must be an int"):
        align(run, qrels, level=1.5)


@pytest.mark.parametrize("name, text, reader, message", [
    ("run", "q Q0 a 1 0.5 t\nq Q0 b 2 1_0 t\n", read_run, "run: line 2: the score (5th field) must be a finite number; "
     "got '1_0'"),
    ("qrels", "q 0 a 1\nq 0 b 1_0\n", read_qrels, "qrels: line 2: the relevance (4th field) must be an integer; "
     "got '1_0'"),
    ("qrels", "q 0 a 1\nq 0 b 99999999999999999999\n", read_qrels, "qrels: line 2: the relevance (4th field) must be "
     "an integer of 64 bits (-9223372036854775808 to 9223372036854775807); got '99999999999999999999'"),
    ("qrels", "q 0 b -9223372036854775809\n", read_qrels, "qrels: line 1: the relevance (4th field) must be "
     "an integer of 64 bits (-9223372036854775808 to 9223372036854775807); got '-9223372036854775809'"),
    # hints: a header line (the first record, its number a word), qrels and run swapped
    ("run", "qid Q0 docno rank score tag\nq Q0 a 1 2.5 t\n", read_run, "run: line 1: the score (5th field) must be "
     "a finite number; got 'score' (if line 1 is a header, remove it or comment it out with '#')"),
    ("qrels", "# judged\n\nquery iter doc rel\nq 0 a 1\n", read_qrels, "qrels: line 3: the relevance (4th field) "
     "must be an integer; got 'rel' (if line 3 is a header, remove it or comment it out with '#')"),
    ("qrels", "qid docno rel\nq 0 a 1\n", read_qrels, "qrels: line 1: expected 4 fields, got 3: 'qid docno rel' "
     "(if line 1 is a header, remove it or comment it out with '#')"),
    ("qrels", "q Q0 a 1 2.5 t\n", read_qrels, "qrels: line 1: expected 4 fields, got 6: 'q Q0 a 1 2.5 t' (a run's "
     "line has 6 fields: were the qrels and the run swapped?)"),
    ("run", "# x\nq 0 a 1\nq 0 b 0\n", read_run, "run: line 2: expected at least 6 fields, got 4: 'q 0 a 1' (a qrels "
     "line has 4 fields: were the run and the qrels swapped?)"),
    ("run", "q Q0 a 1 2.5 t\nq 0 b 1\n", read_run, "run: line 2: expected at least 6 fields, got 4: 'q 0 b 1'"),
    ("run", "q Q0 a 1 2.5 t\nq Q0 b 2 high t\n", read_run, "run: line 2: the score (5th field) must be a finite "
     "number; got 'high'"),  # no hint past the first record
])
def test_malformed_numbers_and_hints_name_the_file_and_line(tmp_path, name, text, reader, message):
    import re

    want = f"^{re.escape(str(tmp_path / name))}: {re.escape(message.split(': ', 1)[1])}$"
    with pytest.raises(ValueError, match=want):
        reader(write(tmp_path, name, text))


def _read_both(tmp_path, queries, ids):
    """The qrels and run of those ids, read, and the peak of numpy's allocations meanwhile (tracemalloc)."""
    import tracemalloc

    n = len(ids)
    run_path = write(tmp_path, "run", "".join(f"{q} Q0 {d} 1 {n - i} t\n"
                                              for i, (q, d) in enumerate(zip(queries, ids))))
    qrels_path = write(tmp_path, "qrels", "".join(f"{q} 0 {d} 1\n" for q, d in zip(queries, ids)))
    tracemalloc.start()
    try:
        qrels, run = read_qrels(qrels_path), read_run(run_path)
        return qrels, run, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize("column", ["doc", "query"])
def test_a_long_id_costs_its_own_length(tmp_path, column):
    """The readers padded every id to its column's longest (one 20 kB id in 200k lines: 15.9 GB):
    one id of 60 kB among 3000 short ones adds a small multiple of its length to the peak memory
    (numpy's allocations, tracemalloc), not 3000 x 60 kB."""
    long = "http://x/" + "a" * 60_000
    n = 3000
    ids = [f"d{i}" for i in range(n)]
    queries = [f"q{i // 100}" for i in range(n)]
    *_, peak_short = _read_both(tmp_path, queries, ids)
    (ids if column == "doc" else queries)[n // 2] = long
    qrels, run, peak = _read_both(tmp_path, queries, ids)
    assert peak < peak_short + 20 * len(long), (peak, peak_short)  # (padded: 180 MB a column)
    assert len(run.docs) == n and run.docs.ids() == ids and qrels.docs.ids() == ids
    assert set(run.query_ids) == set(queries) and run.to_dict() == {q: {d: float(n - i) for i, (q2, d) in
                                                                        enumerate(zip(queries, ids)) if q2 == q}
                                                                    for q in set(queries)}
    al = align(run, qrels)  # separate vocabularies: the run's ids found in the qrels'
    assert al.relevant.all() and len(al.relevant) == n


def test_a_long_score_costs_its_own_length(tmp_path):
    """Scores of the slow spellings (17 digits, exponents) were padded to the longest of them: one
    score written with 60,000 digits adds a small multiple of its length, and reads exactly."""
    import tracemalloc

    n = 3000
    scores = [repr(1 / (i + 3)) for i in range(n)]

    def peak_of(scores):
        p = write(tmp_path, "run", "".join(f"q Q0 d{i} 1 {s} t\n" for i, s in enumerate(scores)))
        tracemalloc.start()
        try:
            return read_run(p), tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()

    _, peak_short = peak_of(scores)
    scores[n // 2] = "0." + "0" * 60_000 + "1"  # 1e-60001: 0.0
    scores[7] = "2." + "0" * 200 + "1e-1"
    run, peak = peak_of(scores)
    assert peak < peak_short + 20 * 60_000, (peak, peak_short)  # (padded: 3000 x 60 kB)
    assert sorted(run.score.tolist()) == sorted(float(s) for s in scores)
    write(tmp_path, "run", "".join(f"q Q0 d{i} 1 {s} t\n" for i, s in enumerate(scores[:-1] + ["1_" + "0" * 99])))
    with pytest.raises(ValueError, match=f"run: line {n}: the score .* got '1_000"):
        read_run(tmp_path / "run")
