"""Qrels and runs from pandas DataFrames and from table files (parquet, CSV, TSV, JSON, JSONL),
as ranx and ir_measures hold them; ``Qrels.to_frame()`` / ``Run.to_frame()`` give them back.

Columns (query, doc, value) are named as ranx names them (``q_id``, ``doc_id``, ``score``, for qrels
and runs) or as ir_measures does (``query_id``, ``doc_id``, and ``relevance`` for qrels, ``score``
for runs): found by the query column's name (``columns=None``), or given (``columns="ranx"``,
``"ir_measures"``, or three names). The readers keep the TREC readers' rules: ids kept by length
class, the queries in byte order and a run in trec_eval's order, a document twice for a query
refused with its rows (``duplicates=True`` keeps it), relevance integers of 64 bits, finite scores;
an error names the source and the row (0-based, the DataFrame's ``iloc``). Ids are text; an integer
id column is read as its decimal digits (ranx refuses both, AssertionError). Needs pandas and
pyarrow: ``pip install 'retrieval-metrics[frames]'``.

Example:
    >>> import pandas as pd
    >>> qrels = qrels_from_frame(pd.DataFrame({"q_id": ["q1", "q1", "q2"], "doc_id": ["a", "b", "c"],
    ...                                        "score": [1, 0, 2]}))
    >>> run = run_from_frame(pd.DataFrame({"query_id": ["q1", "q1"], "doc_id": ["b", "a"], "score": [0.5, 0.9]}),
    ...                      docs=qrels.docs)
    >>> run.to_frame()
      q_id doc_id  score
    0   q1      a    0.9
    1   q1      b    0.5
    >>> qrels.to_frame("ir_measures").values.tolist()
    [['q1', 'a', 1], ['q1', 'b', 0], ['q2', 'c', 2]]
"""
from __future__ import annotations

import dataclasses
import gzip
import json
import os
from typing import Optional, Tuple

from retrieval_core import optional

from . import _codes, _parse
from ._parse import numpy
from .files import COLUMNS, PathLike, Qrels, Run, Vocabulary, _build_qrels, _build_run, column_names
from .files import read_qrels, read_run
from .write import write_qrels, write_run

__all__ = ["FORMATS", "file_format", "qrels_from_frame", "run_from_frame", "qrels_from_file", "run_from_file",
           "write_file"]

# a file's format by its name's suffix (after a final ``.gz``, which means gzip-compressed)
FORMATS = {".parquet": "parquet", ".parq": "parquet", ".csv": "csv", ".tsv": "tsv", ".json": "json",
           ".jsonl": "jsonl", ".ndjson": "jsonl", ".trec": "trec", ".txt": "trec"}
_INT64_MAX = (1 << 63) - 1


def _find_columns(present, columns, run: bool, source: str) -> Tuple:
    """The (query, doc, value) column names, checked present among ``present``."""
    present = list(present)
    value = "score" if run else "relevance"
    if columns is None:
        found = [c for c in COLUMNS if COLUMNS[c][run][0] in present]
        if len(found) != 1:
            raise ValueError(f"{source}: which columns? {'both' if found else 'neither'} 'q_id' (ranx) "
                             f"{'and' if found else 'nor'} 'query_id' (ir_measures) among {present}: pass "
                             f"columns=(query, doc, {value})")
        columns = found[0]
    names = column_names(columns, run)
    missing = [c for c in names if c not in present]
    if missing:
        raise ValueError(f"{source}: no column {missing[0]!r} (columns: {present}); name the columns with "
                         f"columns=(query, doc, {value})")
    return names


def _ids(np, pd, series, source: str, where):
    """The ids of a column (``_codes.Ids``: each costs its own length), from its utf-8 bytes as arrow holds
    them (an integer column: its decimal digits; a categorical: its values)."""
    dtype = series.dtype
    integer = pd.api.types.is_integer_dtype(dtype)
    if len(series) and not (integer or dtype == object or pd.api.types.is_string_dtype(dtype)
                            or isinstance(dtype, pd.CategoricalDtype)):
        raise TypeError(f"{source}: column {series.name!r} is {dtype}: ids must be text (or integers, read as "
                        "their decimal digits)")
    pa = optional.pyarrow("pyarrow", "qrels or runs from a DataFrame")
    try:
        array = pa.array(series, from_pandas=True)
    except (pa.ArrowTypeError, pa.ArrowInvalid, UnicodeEncodeError):  # not all text, or not utf-8 (surrogates)
        return _ids_one_by_one(np, series, source, where)
    array = array.combine_chunks() if isinstance(array, pa.ChunkedArray) else array
    if array.null_count:
        i = int(np.flatnonzero(array.is_null().to_numpy(zero_copy_only=False))[0])
        raise ValueError(f"{source}: row {i}: no id in column {series.name!r} (got {_cell(series, i)!r})")
    if not (pa.types.is_string(array.type) or pa.types.is_large_string(array.type)):
        array = array.cast(pa.large_string())
    _, offsets, data = array.buffers()
    kind = np.int64 if pa.types.is_large_string(array.type) else np.int32
    ends = np.frombuffer(offsets, kind, len(array) + 1, array.offset * np.dtype(kind).itemsize).astype(np.int64)
    src = _parse.Source.of(b"" if data is None else data.to_pybytes(), source)
    nul = np.flatnonzero(np.frombuffer(src.data, np.uint8, ends[-1] - ends[0], ends[0]) == 0)
    if len(nul):
        i = int(np.searchsorted(ends, ends[0] + nul[0], side="right")) - 1
        raise ValueError(f"{where(i)}: ids must not hold a NUL byte (no TREC file can)")
    words = _parse.Words(np, src)
    words.add(ends[:-1], np.diff(ends))
    return words.result()


def _ids_one_by_one(np, series, source: str, where):
    """The ids of an object column that arrow does not take: text with lone surrogates (bytes that are
    not utf-8, read with surrogateescape), kept; anything else, refused with its row."""
    keys = []
    for i, v in enumerate(series.tolist()):
        if v is None or v != v:
            raise ValueError(f"{source}: row {i}: no id in column {series.name!r} (got {v!r})")
        if type(v) is not str:
            raise TypeError(f"{where(i)}: ids must be text; column {series.name!r} holds {type(v).__name__} {v!r}")
        if "\0" in v:
            raise ValueError(f"{where(i)}: ids must not hold a NUL byte (no TREC file can)")
        keys.append(v.encode("utf-8", "surrogateescape"))
    return _codes.Ids.of(np, keys)


def _cell(series, i: int):
    """Row ``i`` of a column, a numpy scalar as its Python value (for the messages)."""
    v = series.iloc[i]
    return v.item() if hasattr(v, "item") and hasattr(v, "dtype") else v


def _locator(source: str, qs, ds):
    return lambda i: f"{source}: row {i} (query {_cell(qs, i)!r}, doc {_cell(ds, i)!r})"


def _exact_int(v) -> Optional[int]:
    """``v`` as an int of 64 bits when it is one (an integral float included), else None."""
    if isinstance(v, bool) or not isinstance(v, (int, float)) and not hasattr(v, "__index__"):
        return None
    if isinstance(v, float) and not v.is_integer():
        return None
    v = int(v)
    return v if -_INT64_MAX - 1 <= v <= _INT64_MAX else None


def _relevance(np, pd, series, source: str, where):
    """The relevance column as int64: integers of 64 bits (an integral float is its integer)."""
    dtype = series.dtype
    if pd.api.types.is_bool_dtype(dtype) or not (pd.api.types.is_numeric_dtype(dtype) or dtype == object):
        raise TypeError(f"{source}: the relevance must be integers; column {series.name!r} is {dtype}")
    if pd.api.types.is_integer_dtype(dtype) and not series.hasnans:
        values = series.to_numpy()
        over = np.flatnonzero(values > _INT64_MAX) if values.dtype == np.uint64 else []
    elif pd.api.types.is_float_dtype(dtype):
        values = series.to_numpy(np.float64, na_value=np.nan)
        # exact: an integral double in [-2**63, 2**63) is an int64 (both bounds are doubles)
        ok = np.isfinite(values) & (np.floor(values) == values) & (values >= -2.0 ** 63) & (values < 2.0 ** 63)
        over = np.flatnonzero(~ok)
    else:  # objects, or integers with missing values: one by one
        cells = series.tolist()
        ints = [_exact_int(v) for v in cells]
        over = [i for i, v in enumerate(ints) if v is None]
        values = np.array([0 if v is None else v for v in ints], np.int64)
    if len(over):
        i = int(over[0])
        raise ValueError(f"{where(i)}: the relevance must be an integer of 64 bits ({-_INT64_MAX - 1} to "
                         f"{_INT64_MAX}); got {_cell(series, i)!r}")
    return values.astype(np.int64)  # (a copy: never the frame's)


def _scores(np, pd, series, source: str, where):
    """The score column as float64, every score finite."""
    dtype = series.dtype
    numbers = ("integer", "floating", "mixed-integer-float", "empty")
    if pd.api.types.is_bool_dtype(dtype) or not (pd.api.types.is_numeric_dtype(dtype) or dtype == object):
        raise TypeError(f"{source}: scores must be numbers; column {series.name!r} is {dtype}")
    if dtype == object and pd.api.types.infer_dtype(series, skipna=True) not in numbers:
        i = next(i for i, v in enumerate(series.tolist())
                 if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float))))
        raise TypeError(f"{where(i)}: scores must be numbers; got {_cell(series, i)!r}")
    values = np.array(series.to_numpy(np.float64, na_value=np.nan), np.float64)  # (a copy: never the frame's)
    bad = ~np.isfinite(values)
    if bad.any():
        i = int(bad.argmax())
        raise ValueError(f"{where(i)}: scores must be finite numbers; got {_cell(series, i)!r}")
    return values


def _frame_columns(df, columns, run: bool, source: str):
    """The query, doc and value columns of a DataFrame (as Series), and where a row is."""
    if not hasattr(df, "columns") or not hasattr(df, "iloc"):
        raise TypeError(f"{source}: expected a pandas DataFrame; got {type(df).__name__}")
    q, d, v = _find_columns(df.columns, columns, run, source)
    twice = [c for c in (q, d, v) if (df.columns == c).sum() > 1]
    if twice:
        raise ValueError(f"{source}: column {twice[0]!r} appears twice")
    return df[q], df[d], df[v], _locator(source, df[q], df[d])


def qrels_from_frame(df, *, columns=None, docs: Optional[Vocabulary] = None, duplicates: bool = False,
                     name: str = "DataFrame") -> Qrels:
    """A :class:`~retrieval_core.trec.Qrels` from a pandas DataFrame of one judgement per row: query id,
    doc id (text, or integers read as their digits) and relevance (integers of 64 bits; an integral
    float is its integer), named by ``columns`` (``None``: ranx's ``q_id, doc_id, score`` or ir_measures'
    ``query_id, doc_id, relevance``, by the query column's name; ``"ranx"``, ``"ir_measures"``, or three
    names); other columns are ignored. ``docs``: a vocabulary to share (extended). A document judged
    twice for a query is refused (``duplicates=True`` keeps it, as :func:`read_qrels`). ``name`` names
    the frame in the errors."""
    np, pd = numpy(), optional.pandas("qrels_from_frame()")
    qs, ds, vs, where = _frame_columns(df, columns, False, name)
    rel = _relevance(np, pd, vs, name, where)
    qcol, dcol = _ids(np, pd, qs, name, where), _ids(np, pd, ds, name, where)
    return _build_qrels(np, qcol, dcol, rel, range(len(rel)), name, docs, duplicates, unit="rows")


def run_from_frame(df, *, columns=None, tag: str = "run", docs: Optional[Vocabulary] = None,
                   duplicates: bool = False, name: str = "DataFrame") -> Run:
    """A :class:`~retrieval_core.trec.Run` from a pandas DataFrame of one entry per row: query id, doc id
    (as :func:`qrels_from_frame`) and score (finite numbers, read as float64), ranked as trec_eval ranks
    them (score descending, then doc id descending); ``columns`` as :func:`qrels_from_frame` (ir_measures'
    names: ``query_id, doc_id, score``). A document twice for a query is refused (``duplicates=True``
    keeps it, as :func:`read_run`)."""
    np, pd = numpy(), optional.pandas("run_from_frame()")
    qs, ds, vs, where = _frame_columns(df, columns, True, name)
    score = _scores(np, pd, vs, name, where)
    qcol, dcol = _ids(np, pd, qs, name, where), _ids(np, pd, ds, name, where)
    return _build_run(np, qcol, dcol, score, range(len(score)), name, tag, docs, duplicates, unit="rows")


def file_format(path: PathLike, format: Optional[str] = None) -> Tuple[str, bool]:
    """``(format, gzip-compressed)`` of a file: ``format``, or found from the name's suffix (``FORMATS``;
    a final ``.gz`` is gzip).

    Example:
        >>> file_format("run.parquet"), file_format("qrels.tsv.gz"), file_format("x.dat", "csv")
        (('parquet', False), ('tsv', True), ('csv', False))
    """
    name = os.fspath(path)
    gz = name.lower().endswith(".gz")
    suffix = os.path.splitext(name[:-3] if gz else name)[1].lower()
    kinds = sorted(set(FORMATS.values()))
    if format is None:
        format = FORMATS.get(suffix)
        if format is None:
            hint = (" (ranx's .lz4 files are lz4-compressed CBOR: read it with ranx, then run_from_dict(run.to_dict()))"
                    if suffix == ".lz4" else "")
            raise ValueError(f"{name}: unknown format of a file named *{suffix}{'.gz' if gz else ''}: name it "
                             f"{', '.join(sorted(FORMATS))} (or with .gz) or pass format= one of {kinds}{hint}")
    elif format not in kinds:
        raise ValueError(f"format={format!r}: one of {kinds}")
    if gz and format in ("parquet", "trec"):
        raise ValueError(f"{name}: a gzip-compressed {format} file is not read or written here: decompress it "
                         "(parquet compresses inside the file)")
    return format, gz


def _bisect_bad(pc, pa, column, kind) -> int:
    """The first row of a text column that pyarrow cannot cast to ``kind`` (one is known to fail)."""
    lo, hi = 0, len(column)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        try:
            pc.cast(column.slice(lo, mid - lo), kind)
            lo = mid
        except pa.ArrowInvalid:
            hi = mid
    return lo


def _text_values(pa, pc, column, run: bool, where):
    """A CSV's value column (read as text) as numbers, parsed as pyarrow parses them: int64 for the
    relevance (``1.0`` is refused, as in a TREC file), float64 for scores."""
    kind = pa.float64() if run else pa.int64()
    try:
        return pc.cast(column, kind).to_numpy()
    except pa.ArrowInvalid:
        i = _bisect_bad(pc, pa, column, kind)
        what = "scores must be numbers" if run else "the relevance must be an integer of 64 bits"
        raise ValueError(f"{where(i)}: {what}; got {column[i].as_py()!r}") from None


def _read_csv(path: str, fmt: str, columns, run: bool, feature: str):
    """A CSV or TSV file's (query, doc, value) columns as a DataFrame, every cell read as text first."""
    pa, pd = optional.pyarrow("pyarrow", feature), optional.pandas(feature)
    pcsv, pc = optional.pyarrow("pyarrow.csv", feature), optional.pyarrow("pyarrow.compute", feature)
    wanted = column_names(columns, run) if columns is not None else {n for c in COLUMNS.values() for n in c[run]}
    # (a quoted cell may hold a line end: pyarrow must not split the file into blocks at every one)
    parse = pcsv.ParseOptions(delimiter="\t" if fmt == "tsv" else ",", newlines_in_values=True)
    table = pcsv.read_csv(path, parse_options=parse,
                          convert_options=pcsv.ConvertOptions(column_types={n: pa.string() for n in wanted}))
    q, d, v = _find_columns(table.column_names, columns, run, path)
    qs, ds = table.column(q).to_pandas(), table.column(d).to_pandas()
    values = _text_values(pa, pc, table.column(v), run, _locator(path, qs, ds))
    return pd.DataFrame({q: qs, d: ds, v: values}), (q, d, v)


class _Pairs(list):
    """A JSON object's (key, value) pairs in order, a key given twice kept twice."""


def _read_json(path: str, gz: bool, run: bool, feature: str):
    """A JSON file ``{qid: {docid: value}}`` (ranx's) as a DataFrame, entries in the file's order (a key
    given twice is kept, for the duplicate check)."""
    pd = optional.pandas(feature)
    with (gzip.open(path, "rt", encoding="utf-8") if gz else open(path, encoding="utf-8")) as f:
        try:
            top = json.load(f, object_pairs_hook=_Pairs)
        except json.JSONDecodeError as err:
            raise ValueError(f"{path}: {err}") from None
    value = "score" if run else "relevance"
    if not isinstance(top, _Pairs):
        raise TypeError(f"{path}: expected a JSON object {{qid: {{docid: {value}}}}}; got {type(top).__name__}")
    qcol, dcol, vals = [], [], []
    for qid, entries in top:
        if not isinstance(entries, _Pairs):
            raise TypeError(f"{path}: query {qid!r}: expected an object {{docid: {value}}}; got {entries!r}")
        qcol += [qid] * len(entries)
        dcol += [doc for doc, _ in entries]
        vals += [v for _, v in entries]
    names = ("query", "doc", value)
    return pd.DataFrame({"query": pd.Series(qcol, dtype=object), "doc": pd.Series(dcol, dtype=object),
                         value: pd.Series(vals, dtype=object)}), names


def _read_table(path: PathLike, format, columns, run: bool, feature: str):
    """A table file as a DataFrame and its (query, doc, value) column names."""
    path = os.fspath(path)
    fmt, gz = file_format(path, format)
    if fmt == "json":
        return _read_json(path, gz, run, feature)
    pa = optional.pyarrow("pyarrow", feature)
    try:
        if fmt in ("csv", "tsv"):
            return _read_csv(path, fmt, columns, run, feature)
        if fmt == "parquet":
            pq = optional.pyarrow("pyarrow.parquet", feature)
            names = _find_columns(pq.read_schema(path).names, columns, run, path)
            table = pq.read_table(path, columns=list(names))
        else:
            table = optional.pyarrow("pyarrow.json", feature).read_json(path)
            names = _find_columns(table.column_names, columns, run, path)
    except pa.ArrowInvalid as err:  # pyarrow's parse errors, without the file's name
        raise ValueError(f"{path}: {err}") from err
    return table.select(list(names)).to_pandas(), names


def qrels_from_file(path: PathLike, *, format: Optional[str] = None, columns=None,
                    docs: Optional[Vocabulary] = None, duplicates: bool = False) -> Qrels:
    """A :class:`~retrieval_core.trec.Qrels` from a file: parquet, CSV, TSV, JSONL (one judgement per row,
    columns as :func:`qrels_from_frame` finds them), JSON (ranx's ``{qid: {docid: rel}}``) or TREC
    (:func:`read_qrels`); the format from the name's suffix (``FORMATS``, ``.gz``: gzip-compressed) or
    ``format=``. A CSV's relevance is read as integers (``1.0`` is refused, as in a TREC file), its ids
    as text (``007`` stays ``007``). Errors name the file and the row (0-based, after the header)."""
    fmt, _ = file_format(path, format)
    if fmt == "trec":
        return read_qrels(path, docs=docs, duplicates=duplicates)
    df, names = _read_table(path, format, columns, False, f"reading {os.fspath(path)}")
    return qrels_from_frame(df, columns=names, docs=docs, duplicates=duplicates, name=os.fspath(path))


def run_from_file(path: PathLike, *, format: Optional[str] = None, columns=None, tag: Optional[str] = None,
                  docs: Optional[Vocabulary] = None, duplicates: bool = False) -> Run:
    """A :class:`~retrieval_core.trec.Run` from a file, as :func:`qrels_from_file` reads it (ranx's JSON:
    ``{qid: {docid: score}}``; a CSV's scores as float64), ranked as trec_eval ranks it. ``tag``: the
    run's name (default: a TREC file's own, else ``"run"``)."""
    fmt, _ = file_format(path, format)
    if fmt == "trec":
        run = read_run(path, docs=docs, duplicates=duplicates)
        return run if tag is None else dataclasses.replace(run, tag=tag)
    df, names = _read_table(path, format, columns, True, f"reading {os.fspath(path)}")
    return run_from_frame(df, columns=names, tag="run" if tag is None else tag, docs=docs, duplicates=duplicates,
                          name=os.fspath(path))


def _write_jsonl(f, frame) -> None:
    q, d, v = (json.dumps(c) for c in frame.columns)
    rows = zip(frame.iloc[:, 0].tolist(), frame.iloc[:, 1].tolist(), frame.iloc[:, 2].tolist())
    # a float's repr is the shortest text that reads back to it (as JSON too); ids as json.dumps writes them
    f.writelines(f"{{{q}: {json.dumps(a)}, {d}: {json.dumps(b)}, {v}: {c!r}}}\n" for a, b, c in rows)


def write_file(path: PathLike, obj, *, format: Optional[str] = None, columns="ranx") -> None:
    """Write a :class:`~retrieval_core.trec.Qrels` or :class:`~retrieval_core.trec.Run` to ``path`` in the
    format of its name (or ``format=``), as :func:`qrels_from_file` / :func:`run_from_file` read it back
    equal: a table of one row per record (``obj.to_frame(columns)``: parquet; CSV, TSV with a header;
    JSONL), ranx's JSON dict (``to_dict()``: refuses a document twice for a query) or TREC
    (:func:`write_qrels` / :func:`write_run`); ``.gz``: gzip-compressed.

    Example:
        >>> import os, tempfile
        >>> from retrieval_core.trec import qrels_from_dict, run_from_dict
        >>> folder = tempfile.mkdtemp()
        >>> write_file(os.path.join(folder, "run.parquet"), run_from_dict({"q1": {"a": 0.9, "b": 0.5}}))
        >>> write_file(os.path.join(folder, "qrels.csv.gz"), qrels_from_dict({"q1": {"a": 1}}), columns="ir_measures")
        >>> qrels = qrels_from_file(os.path.join(folder, "qrels.csv.gz"))
        >>> run_from_file(os.path.join(folder, "run.parquet"), tag="bm25", docs=qrels.docs).to_dict()
        {'q1': {'a': 0.9, 'b': 0.5}}
    """
    if not isinstance(obj, (Qrels, Run)):
        raise TypeError(f"write_file: expected a Qrels or a Run; got {type(obj).__name__}")
    name = os.fspath(path)
    fmt, gz = file_format(name, format)
    if fmt == "trec":
        return (write_run if isinstance(obj, Run) else write_qrels)(name, obj)
    opener = (lambda: gzip.open(name, "wt", encoding="utf-8")) if gz else (lambda: open(name, "w", encoding="utf-8"))
    if fmt == "json":
        table = obj.to_dict()
        with opener() as f:
            json.dump(table, f)
        return None
    frame = obj.to_frame(columns)
    if fmt == "parquet":
        optional.pyarrow("pyarrow.parquet", f"writing {name}")
        frame.to_parquet(name, index=False)
    elif fmt == "jsonl":
        with opener() as f:
            _write_jsonl(f, frame)
    else:  # pandas writes a float as its repr, the shortest text that reads back to it
        frame.to_csv(name, sep="\t" if fmt == "tsv" else ",", index=False, compression="gzip" if gz else None)
    return None
