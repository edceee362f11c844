"""Qrels and runs from and to DataFrames and table files (retrieval_core.trec.frames): round trips
through every format, the TREC readers' rules (order, duplicates, integers of 64 bits, finite
scores), and every bad input's exception and message (source, row)."""
from __future__ import annotations

import gzip
import json
import random
import re
import subprocess
import sys

import pytest

pd = pytest.importorskip("pandas")
pytest.importorskip("pyarrow")
np = pytest.importorskip("numpy")

from retrieval_core.trec import (  # noqa: E402
    Vocabulary, qrels_from_dict, qrels_from_file, qrels_from_frame, read_run, run_from_dict, run_from_file,
    run_from_frame, write_file,
)
from retrieval_core.trec.frames import FORMATS, file_format  # noqa: E402

SUFFIXES = ["parquet", "csv", "tsv", "json", "jsonl", "trec", "csv.gz", "tsv.gz", "json.gz", "jsonl.gz"]
EXTREME_SCORES = [0.1 + 0.2, 1e-320, -0.0, 1.7976931348623157e308, -2.5e-308, 1 / 3, 2.0 ** 60 + 1e3]
OBJECT_IDS = {"q_id": object, "doc_id": object}
INT64 = (-(1 << 63), (1 << 63) - 1)


def random_tables(seed: int):
    """A qrels and a run dict: unicode and numeric-looking ids, ties, extreme scores and relevances."""
    rng = random.Random(seed)
    docs = [f"d{i}" for i in range(30)] + ["é", "日本", "007", "7", "a,b", 'q"t', "NA", "-", "😀"]
    queries = ["q1", "q10", "q9", "é", "007", "z"]
    qrels = {q: {d: rng.choice([0, 1, 2, -1, *INT64]) for d in rng.sample(docs, rng.randint(1, 12))}
             for q in queries[:-1]}
    run = {q: {d: rng.choice(EXTREME_SCORES + [float(rng.randint(0, 3)), rng.random()])
               for d in rng.sample(docs, rng.randint(1, 20))} for q in queries[1:]}
    return qrels, run


@pytest.mark.parametrize("suffix", SUFFIXES)
def test_every_format_reads_back_what_it_wrote(tmp_path, suffix):
    for seed in range(3):
        qrels_d, run_d = random_tables(seed)
        qrels, run = qrels_from_dict(qrels_d), run_from_dict(run_d, tag="mine")
        for obj, read in ((qrels, qrels_from_file), (run, run_from_file)):
            path = tmp_path / f"{type(obj).__name__}{seed}.{suffix}"
            write_file(path, obj)
            back = read(path)
            assert back.to_dict() == obj.to_dict() and back.query_ids == obj.query_ids
            if isinstance(obj, type(run)):  # (a qrels' order within a query is its vocabulary's)
                assert [back.docs[i] for i in back.doc.tolist()] == [obj.docs[i] for i in obj.doc.tolist()]
                assert back.score.tolist() == obj.score.tolist()  # (-0.0 == 0.0: the order is checked above)
                assert back.tag == ("mine" if suffix == "trec" else "run")
            # file -> ours -> file: equal (a qrels' order within a query is its vocabulary's: the file it
            # wrote, read back, is in that order)
            first = path if isinstance(obj, type(run)) else tmp_path / f"first.{suffix}"
            if first != path:
                write_file(first, back)
                back = read(first)
            again = tmp_path / f"again.{suffix}"
            write_file(again, back)
            if not suffix.endswith(".gz"):  # (gzip's header holds a time)
                assert again.read_bytes() == first.read_bytes()


@pytest.mark.parametrize("columns", ["ranx", "ir_measures", ("qid", "docno", "label")])
def test_frames_read_back_what_they_gave(columns):
    qrels_d, run_d = random_tables(4)
    qrels, run = qrels_from_dict(qrels_d), run_from_dict(run_d)
    for obj, read in ((qrels, qrels_from_frame), (run, run_from_frame)):
        frame = obj.to_frame(columns)
        back = read(frame, columns=None if isinstance(columns, str) else columns)
        assert back.to_dict() == obj.to_dict()
        again = back.to_frame(columns)
        assert again.dtypes.equals(frame.dtypes)
        keys = list(frame.columns[:2])
        assert again.sort_values(keys, ignore_index=True).equals(frame.sort_values(keys, ignore_index=True))
    assert list(qrels.to_frame("ir_measures").columns) == ["query_id", "doc_id", "relevance"]
    assert list(run.to_frame("ir_measures").columns) == ["query_id", "doc_id", "score"]
    assert qrels.to_frame().dtypes.tolist()[2] == np.int64 and run.to_frame().dtypes.tolist()[2] == np.float64


def test_a_frame_in_any_row_order_gives_trec_evals_order_and_byte_ordered_queries():
    _, run_d = random_tables(5)
    frame = run_from_dict(run_d).to_frame().sample(frac=1.0, random_state=0)
    run = run_from_frame(frame)
    expected = run_from_dict(run_d)
    assert run.query_ids == expected.query_ids and run.offsets.tolist() == expected.offsets.tolist()
    assert [run.docs[i] for i in run.doc.tolist()] == [expected.docs[i] for i in expected.doc.tolist()]
    assert list(run.query_ids) == sorted(run.query_ids, key=lambda s: s.encode())  # "z" < "é" (bytes)
    ties = run_from_frame(pd.DataFrame({"q_id": ["q"] * 4, "doc_id": ["d10", "d9", "Z", "é"], "score": [1.0] * 4}))
    assert [ties.docs[i] for i in ties.doc.tolist()] == ["é", "d9", "d10", "Z"]  # doc id descending, bytes


def test_a_frame_of_every_id_dtype():
    want = {"1": {"7": 2}, "12": {"8": 0}}
    for ids in (["1", "12"], pd.Categorical(["1", "12"]), np.array([1, 12]), pd.array([1, 12], dtype="Int64"),
                pd.array(["1", "12"], dtype="string[pyarrow]"), np.array(["1", "12"], dtype=object)):
        docs = pd.Series(["7", "8"], dtype=object) if isinstance(ids, np.ndarray) else [7, 8]
        df = pd.DataFrame({"q_id": ids, "doc_id": docs, "score": [2, 0]})
        assert qrels_from_frame(df).to_dict() == want, ids


def test_the_frame_is_not_shared():
    df = pd.DataFrame({"query_id": ["q", "q"], "doc_id": ["a", "b"], "score": [2.0, 1.0]})
    run = run_from_frame(df)
    df.loc[0, "score"] = 9.0
    assert run.score.tolist() == [2.0, 1.0] and run.score.numpy().flags.writeable


def test_a_shared_vocabulary_and_other_columns():
    qrels = qrels_from_frame(pd.DataFrame({"query_id": ["q"], "iteration": ["0"], "doc_id": ["b"],
                                           "relevance": [1]}))
    run = run_from_frame(pd.DataFrame({"query_id": ["q", "q"], "doc_id": ["a", "b"], "score": [1.0, 2.0],
                                       "rank": [2, 1]}), docs=qrels.docs)
    assert run.docs is qrels.docs and run.doc.tolist() == [0, 1] and qrels.docs.ids() == ["b", "a"]


def test_empty_frames_and_files(tmp_path):
    for read, value in ((qrels_from_frame, pd.Series([], dtype=np.int64)), (run_from_frame, [])):
        obj = read(pd.DataFrame({"q_id": pd.Series([], dtype=str), "doc_id": [], "score": value}))
        assert len(obj) == 0 and obj.query_ids == () and obj.to_dict() == {}
        assert obj.to_frame().shape == (0, 3)
    (tmp_path / "e.csv").write_text("q_id,doc_id,score\n")
    (tmp_path / "e.json").write_text("{}")
    for name in ("e.csv", "e.json"):
        assert len(qrels_from_file(tmp_path / name)) == 0 and len(run_from_file(tmp_path / name)) == 0


def test_duplicates_are_refused_with_their_rows_or_kept(tmp_path):
    df = pd.DataFrame({"q_id": ["q", "p", "q"], "doc_id": ["a", "a", "a"], "score": [1, 2, 0]})
    with pytest.raises(ValueError, match=r"^DataFrame: document 'a' appears twice for query 'q' \(rows 0 and 2\)"):
        qrels_from_frame(df)
    with pytest.raises(ValueError, match=r"^DataFrame: document 'a' appears twice for query 'q' \(rows 0 and 2\)"):
        run_from_frame(df.astype({"score": float}))
    kept = qrels_from_frame(df, duplicates=True)
    assert kept.duplicates and len(kept.to_frame()) == 3
    with pytest.raises(ValueError, match="holds a document twice"):
        kept.to_dict()
    (tmp_path / "dup.json").write_text('{"q": {"a": 1.5, "b": 1, "a": 2}}')
    with pytest.raises(ValueError, match=r"dup.json: document 'a' appears twice for query 'q' \(rows 0 and 2\)"):
        run_from_file(tmp_path / "dup.json")
    assert len(run_from_file(tmp_path / "dup.json", duplicates=True)) == 3


def test_relevance_of_64_bits(tmp_path):
    for values in ([INT64[0], INT64[1], -1], pd.Series([INT64[0], INT64[1], -1], dtype=object),
                   pd.array([INT64[0], INT64[1], -1], dtype="Int64")):
        ok = qrels_from_frame(pd.DataFrame({"q_id": ["q"] * 3, "doc_id": list("abc"), "score": values}))
        assert ok.rel.tolist() == [INT64[0], INT64[1], -1]
    assert qrels_from_frame(pd.DataFrame({"q_id": ["q"], "doc_id": ["a"], "score": [2.0]})).rel.tolist() == [2]
    bad = [(np.array([1 << 63], dtype=np.uint64), "9223372036854775808"),
           (pd.Series([1 << 64], dtype=object), "18446744073709551616"),
           ([2.0 ** 63], "9.223372036854776e\\+18"), ([1.5], "1.5"), ([float("nan")], "nan"),
           (pd.array([None], dtype="Int64"), "<NA>"), (pd.Series(["1"], dtype=object), "'1'"),
           (pd.Series([True], dtype=object), "True")]
    for values, shown in bad:
        df = pd.DataFrame({"q_id": ["q"], "doc_id": ["a"], "score": values})
        with pytest.raises(ValueError, match=rf"^DataFrame: row 0 \(query 'q', doc 'a'\): the relevance must be an "
                                             rf"integer of 64 bits \(-9223372036854775808 to 9223372036854775807\); "
                                             rf"got {shown}$"):
            qrels_from_frame(df)
    (tmp_path / "q.csv").write_text("q_id,doc_id,score\nq,a,9223372036854775807\nq,b,9223372036854775808\n")
    with pytest.raises(ValueError, match=r"q.csv: row 1 \(query 'q', doc 'b'\): the relevance must be an integer of "
                                         r"64 bits; got '9223372036854775808'$"):
        qrels_from_file(tmp_path / "q.csv")
    for text in ("1.0", "", " 1", "1_0"):
        (tmp_path / "q.csv").write_text(f"q_id,doc_id,score\nq,a,1\nq,b,{text}\n")
        with pytest.raises(ValueError, match=rf"row 1 \(query 'q', doc 'b'\): the relevance .* got '{text}'$"):
            qrels_from_file(tmp_path / "q.csv")


def test_wrong_dtypes_are_type_errors():
    base = {"q_id": ["q"], "doc_id": ["a"]}
    for values in ([True], ["high"]):
        with pytest.raises(TypeError, match=r"^DataFrame: the relevance must be integers; column 'score' is "
                                            r"(bool|str)$"):
            qrels_from_frame(pd.DataFrame({**base, "score": values}))
        with pytest.raises(TypeError, match=r"^DataFrame: scores must be numbers; column 'score' is (bool|str)$"):
            run_from_frame(pd.DataFrame({**base, "score": values}))
    with pytest.raises(TypeError, match=r"^DataFrame: the relevance must be integers; column 'score' is bool$"):
        qrels_from_frame(pd.DataFrame({"q_id": [], "doc_id": [], "score": pd.Series([], dtype=bool)}))
    with pytest.raises(TypeError, match=r"^DataFrame: row 1 \(query 'q', doc 'b'\): scores must be numbers; got '2'$"):
        run_from_frame(pd.DataFrame({"q_id": ["q", "q"], "doc_id": ["a", "b"],
                                     "score": pd.Series([1.0, "2"], dtype=object)}))
    for ids, kind in (([1.0], "float64"), ([True], "bool")):
        with pytest.raises(TypeError, match=rf"^DataFrame: column 'q_id' is {kind}: ids must be text \(or integers"):
            qrels_from_frame(pd.DataFrame({"q_id": ids, "doc_id": ["a"], "score": [1]}))
    with pytest.raises(TypeError, match=r"^DataFrame: row 1 \(query 'q', doc 5\): ids must be text; column 'doc_id' "
                                        r"holds int 5$"):
        qrels_from_frame(pd.DataFrame({"q_id": ["q", "q"], "doc_id": pd.Series(["a", 5], dtype=object),
                                       "score": [1, 2]}))
    with pytest.raises(TypeError, match=r"^DataFrame: expected a pandas DataFrame; got dict$"):
        qrels_from_frame({"q_id": ["q"]})


def test_scores_must_be_finite(tmp_path):
    for value in (float("nan"), float("inf"), -float("inf"), None):
        df = pd.DataFrame({"q_id": ["q", "q"], "doc_id": ["a", "b"], "score": pd.Series([1.0, value], dtype=object)})
        with pytest.raises(ValueError, match=rf"^DataFrame: row 1 \(query 'q', doc 'b'\): scores must be finite "
                                             rf"numbers; got {value!r}$"):
            run_from_frame(df.astype({"score": float}) if value is not None else df)
    (tmp_path / "r.tsv").write_text("query_id\tdoc_id\tscore\nq\ta\t1\nq\tb\tnan\n")
    with pytest.raises(ValueError, match=r"r.tsv: row 1 \(query 'q', doc 'b'\): scores must be finite numbers; "
                                         r"got nan$"):
        run_from_file(tmp_path / "r.tsv")
    (tmp_path / "r.tsv").write_text("query_id\tdoc_id\tscore\nq\ta\t1\nq\tb\thigh\n")
    with pytest.raises(ValueError, match=r"r.tsv: row 1 \(query 'q', doc 'b'\): scores must be numbers; got 'high'$"):
        run_from_file(tmp_path / "r.tsv")


def test_missing_ids_and_nul_bytes():
    for ids in (["q", None], ["q", float("nan")], pd.array(["q", None], dtype="string")):
        df = pd.DataFrame({"q_id": ids, "doc_id": ["a", "b"], "score": [1, 1]})
        with pytest.raises(ValueError, match=r"^DataFrame: row 1: no id in column 'q_id' \(got (None|nan|<NA>)\)$"):
            qrels_from_frame(df)
    with pytest.raises(ValueError, match=r"^DataFrame: row 0 \(query 'q', doc 'a\\x00b'\): ids must not hold a NUL"):
        qrels_from_frame(pd.DataFrame({"q_id": ["q"], "doc_id": ["a\0b"], "score": [1]}))


def test_columns_are_found_or_named():
    df = pd.DataFrame({"qid": ["q"], "docno": ["a"], "label": [1]})
    with pytest.raises(ValueError, match=r"^DataFrame: which columns\? neither 'q_id' \(ranx\) nor 'query_id' "
                                         r"\(ir_measures\) among \['qid', 'docno', 'label'\]: pass "
                                         r"columns=\(query, doc, relevance\)$"):
        qrels_from_frame(df)
    assert qrels_from_frame(df, columns=("qid", "docno", "label")).to_dict() == {"q": {"a": 1}}
    with pytest.raises(ValueError, match=r"^DataFrame: which columns\? both 'q_id'"):
        qrels_from_frame(df.assign(q_id="q", query_id="q"))
    with pytest.raises(ValueError, match=r"^DataFrame: no column 'relevance' \(columns: \['query_id', 'doc_id', "
                                         r"'score'\]\); name the columns with columns=\(query, doc, relevance\)$"):
        qrels_from_frame(pd.DataFrame({"query_id": ["q"], "doc_id": ["a"], "score": [1]}))
    for bad in ("trec", ("a", "b"), ("a", "a", "b")):
        with pytest.raises(ValueError, match=r"^columns="):
            qrels_from_frame(df, columns=bad)


def test_csv_ids_stay_text(tmp_path):
    (tmp_path / "q.csv").write_text('q_id,doc_id,score,extra\n007,00,1,x\n7,"a,b",2,y\n007,NA,0,z\n007,,3,w\n')
    qrels = qrels_from_file(tmp_path / "q.csv")
    assert qrels.to_dict() == {"007": {"00": 1, "NA": 0, "": 3}, "7": {"a,b": 2}}
    (tmp_path / "r.jsonl").write_text('{"query_id": 7, "doc_id": "a", "score": 1}\n'
                                      '{"query_id": 12, "doc_id": "b", "score": 2.5}\n')
    assert run_from_file(tmp_path / "r.jsonl").to_dict() == {"12": {"b": 2.5}, "7": {"a": 1.0}}


def test_file_errors_name_the_file(tmp_path):
    (tmp_path / "bad.json").write_text('{"q": {"a": 1}')
    with pytest.raises(ValueError, match=r"bad.json: Expecting ',' delimiter"):
        qrels_from_file(tmp_path / "bad.json")
    (tmp_path / "list.json").write_text('[["q", "a", 1]]')
    with pytest.raises(TypeError, match=r"list.json: expected a JSON object \{qid: \{docid: relevance\}\}; got list"):
        qrels_from_file(tmp_path / "list.json")
    (tmp_path / "flat.json").write_text('{"q": 1}')
    with pytest.raises(TypeError, match=r"flat.json: query 'q': expected an object \{docid: score\}; got 1$"):
        run_from_file(tmp_path / "flat.json")
    (tmp_path / "mixed.jsonl").write_text('{"q_id": "q", "doc_id": "a", "score": 1}\n'
                                          '{"q_id": "q", "doc_id": 5, "score": 1}\n')
    with pytest.raises(ValueError, match=r"mixed.jsonl: JSON parse error: Column\(/doc_id\) changed from string to "
                                         r"number"):
        run_from_file(tmp_path / "mixed.jsonl")
    (tmp_path / "short.csv").write_text("q_id,doc_id,score\nq,a\n")
    with pytest.raises(ValueError, match=r"short.csv: CSV parse error: Expected 3 columns, got 2"):
        run_from_file(tmp_path / "short.csv")
    with pytest.raises(FileNotFoundError):
        run_from_file(tmp_path / "absent.parquet")


def test_formats_from_names():
    assert file_format("a/b.PARQUET") == ("parquet", False) and file_format("r.ndjson.gz") == ("jsonl", True)
    assert file_format("r.txt") == ("trec", False) and set(FORMATS.values()) == {"parquet", "csv", "tsv", "json",
                                                                                  "jsonl", "trec"}
    with pytest.raises(ValueError, match=r"^run.dat: unknown format of a file named \*.dat: name it .*pass format="):
        file_format("run.dat")
    with pytest.raises(ValueError, match=r"ranx's .lz4 files are lz4-compressed CBOR"):
        file_format("run.lz4")
    with pytest.raises(ValueError, match=r"^run.parquet.gz: a gzip-compressed parquet file is not read"):
        file_format("run.parquet.gz")
    with pytest.raises(ValueError, match=r"^format='xls': one of"):
        file_format("run.csv", "xls")


def test_format_argument_and_trec_tag(tmp_path):
    run = run_from_dict({"q": {"a": 1.0}}, tag="sys1")
    write_file(tmp_path / "run.dat", run, format="tsv")
    assert run_from_file(tmp_path / "run.dat", format="tsv", tag="x").tag == "x"
    write_file(tmp_path / "run.txt", run)
    assert read_run(tmp_path / "run.txt").tag == "sys1" and run_from_file(tmp_path / "run.txt", tag="y").tag == "y"
    write_file(tmp_path / "run.json.gz", run)
    with gzip.open(tmp_path / "run.json.gz", "rt") as f:
        assert json.load(f) == {"q": {"a": 1.0}}
    with pytest.raises(TypeError, match=r"^write_file: expected a Qrels or a Run; got dict$"):
        write_file(tmp_path / "x.csv", {"q": {"a": 1}})


def test_missing_pandas_or_pyarrow_names_the_extra(monkeypatch, tmp_path):
    run = run_from_dict({"q": {"a": 1.0}})
    write_file(tmp_path / "r.parquet", run)
    monkeypatch.setitem(sys.modules, "pyarrow.parquet", None)
    with pytest.raises(ImportError, match=rf"^reading {tmp_path}/r.parquet needs pyarrow: "
                                          r"pip install 'retrieval-metrics\[frames\]'$"):
        run_from_file(tmp_path / "r.parquet")
    monkeypatch.setitem(sys.modules, "pandas", None)
    for call, name in ((lambda: run_from_frame(None), "run_from_frame()"), (run.to_frame, "Run.to_frame()"),
                       (lambda: qrels_from_dict({}).to_frame(), "Qrels.to_frame()")):
        with pytest.raises(ImportError, match=rf"^{re.escape(name)} needs pandas: "
                                              r"pip install 'retrieval-metrics\[frames\]'$"):
            call()


def test_importing_the_package_imports_neither_pandas_nor_pyarrow():
    code = ("import sys, retrieval_core, retrieval_core.trec, retrieval_core.trec.frames; "
            "print(sorted(m for m in ('pandas', 'pyarrow') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_vocabulary_of_a_file_is_shared(tmp_path):
    docs = Vocabulary(["z"])
    write_file(tmp_path / "q.parquet", qrels_from_dict({"q": {"a": 1}}))
    qrels = qrels_from_file(tmp_path / "q.parquet", docs=docs)
    assert qrels.docs is docs and docs.ids() == ["z", "a"] and qrels.doc.tolist() == [1]


def test_sliced_chunked_and_non_utf8_id_columns(tmp_path):
    qrels_d, _ = random_tables(6)
    frame = qrels_from_dict(qrels_d).to_frame()
    halves = pd.concat([frame.iloc[:5], frame.iloc[5:]], ignore_index=True)  # arrow-backed: two chunks
    assert qrels_from_frame(halves).to_dict() == qrels_d
    part = frame.iloc[3:]  # an arrow slice: offsets from row 3
    assert qrels_from_frame(part).to_dict() == qrels_from_frame(part.astype(OBJECT_IDS)).to_dict()
    assert len(qrels_from_frame(part)) == len(frame) - 3
    # a Latin-1 byte read with surrogateescape (a TREC file's id): kept, and written back as that byte
    latin = pd.DataFrame({"q_id": pd.Series(["q\udce9", "q"], dtype=object), "doc_id": ["d", "d"], "score": [1, 2]})
    qrels = qrels_from_frame(latin)
    assert qrels.query_ids == ("q", "q\udce9") and qrels.to_frame()["q_id"].tolist() == ["q", "q\udce9"]
    write_file(tmp_path / "latin.trec", qrels)
    assert (tmp_path / "latin.trec").read_bytes() == b"q 0 d 2\nq\xe9 0 d 1\n"


def test_long_ids_keep_their_own_length():
    long_id = "x" * 5000
    df = pd.DataFrame({"q_id": ["q"] * 3, "doc_id": ["a", long_id, "bb"], "score": [1.0, 3.0, 2.0]})
    run = run_from_frame(df)
    assert [run.docs[i] for i in run.doc.tolist()] == [long_id, "bb", "a"]
    assert sorted(words.shape[1] for words, _ in run.docs._ids.parts) == [1, 1024]  # (5000 bytes: 1024 words)


@pytest.mark.parametrize("suffix", ["parquet", "csv", "tsv", "json", "jsonl", "csv.gz"])
def test_ids_with_separators_quotes_and_line_ends_read_back(tmp_path, suffix):
    ids = ["a\nb", "c\r\nd", " sp ", "tab\there", 'q"t', "a,b", "#x", "", "\\"]
    run = run_from_dict({q: {d: float(i) for i, d in enumerate(ids)} for q in ids[::-1]})
    write_file(tmp_path / f"run.{suffix}", run)
    back = run_from_file(tmp_path / f"run.{suffix}")
    assert back.to_dict() == run.to_dict() and back.query_ids == run.query_ids


def test_a_column_given_twice_is_refused():
    df = pd.DataFrame([["q", "a", 1, 2]], columns=["q_id", "doc_id", "score", "score"])
    with pytest.raises(ValueError, match=r"^DataFrame: column 'score' appears twice$"):
        qrels_from_frame(df)


def test_quoted_line_ends_past_pyarrows_first_block(tmp_path):
    # pyarrow reads a CSV in blocks of 1 MB: without newlines_in_values, a quoted line end in a later
    # block is an ArrowInvalid ("CSV parser got out of sync with chunker")
    n = 150_000
    pd.DataFrame({"q_id": ["q"] * n, "doc_id": [f"a\nb{i}" for i in range(n)], "score": np.arange(n, dtype=float)}
                 ).to_csv(tmp_path / "run.csv", index=False)
    run = run_from_file(tmp_path / "run.csv")
    assert len(run) == n and run.docs[int(run.doc[0])] == f"a\nb{n - 1}"
