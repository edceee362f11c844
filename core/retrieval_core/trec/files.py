"""TREC qrels and runs: readers, writers, and ranx/ir_measures-style dicts, as tensors with id maps.

* qrels: ``qid iter docid rel`` (exactly four fields; ``iter`` ignored; ``rel`` an
  integer, negative = in the pool but unjudged, as trec_eval reads it);
* runs: ``qid Q0 docid rank score tag`` (at least six fields, the rest ignored; the
  rank column is ignored: the order is score descending, ties broken by docid
  descending in byte order, exactly as trec_eval sorts; the tag kept is the last
  line's, as trec_eval does).

``#`` comment lines and blank lines are skipped. Query ids are sorted in byte order
(trec_eval's order). Documents live in a :class:`Vocabulary` that a qrels and a run
can share (``read_run(path, docs=qrels.docs)``), so a doc index means the same
document in both. Reading needs numpy (``pip install 'retrieval-metrics[cli]'``).

Example:
    >>> import os, tempfile
    >>> d = tempfile.mkdtemp()
    >>> _ = open(os.path.join(d, "qrels"), "w").write("q1 0 a 1\\nq1 0 b 0\\nq2 0 c 2\\n")
    >>> _ = open(os.path.join(d, "run"), "w").write("q1 Q0 b 1 0.5 x\\nq1 Q0 a 2 0.9 x\\nq2 Q0 c 1 3 x\\n")
    >>> qrels = read_qrels(os.path.join(d, "qrels"))
    >>> run = read_run(os.path.join(d, "run"), docs=qrels.docs)
    >>> run.query_ids, [run.docs[i] for i in run.doc.tolist()], run.score.tolist(), run.tag
    (('q1', 'q2'), ['a', 'b', 'c'], [0.9, 0.5, 3.0], 'x')
    >>> qrels.n_relevant().tolist(), run_from_dict(run.to_dict()).to_dict() == run.to_dict()
    ([1, 1], True)
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Dict, List, Mapping, Optional, Sequence, Tuple, Union

import torch
from torch import Tensor

from retrieval_core import optional

from . import _codes, _numbers, _parse
from ._parse import numpy

__all__ = ["Vocabulary", "Qrels", "Run", "read_qrels", "read_run", "qrels_from_dict", "run_from_dict"]

PathLike = Union[str, "os.PathLike[str]"]


class Vocabulary:
    """Document ids (utf-8 bytes) and their indices; append-only, so indices never change. Each id
    costs its own length (``_codes.Ids``), however long the longest.

    Example:
        >>> v = Vocabulary(["d1", "d2"])
        >>> len(v), v[1], v.index("d2"), v.get("zz"), v.add(b"d3"), v.ids()
        (2, 'd2', 1, -1, 2, ['d1', 'd2', 'd3'])
    """

    def __init__(self, ids: Sequence[str] = ()):
        np = numpy()
        self._ids = _codes.Ids.of(np, [])  # the ids, index order
        self._positions: Optional[Dict[bytes, int]] = None
        if len(ids):
            self.extend([i.encode("utf-8", "surrogateescape") for i in ids])

    def _codes(self, keys, add: bool):
        np = numpy()
        keys = _codes.Ids.of(np, keys)
        n0 = len(self._ids)
        both = self._ids.concat(np, keys) if n0 else keys
        first, inv = both.factorize(np)
        # groups are numbered by first appearance and the ids here are distinct and come first: the
        # first n0 groups are those ids, in index order, and the new ids' groups follow in order
        codes = inv[n0:]
        if not add:
            return np.where(codes < n0, codes, -1)
        if len(first) > n0:
            added = both.take(np, first[n0:])
            self._ids = self._ids.concat(np, added) if n0 else added
            self._positions = None
        return codes

    def extend(self, keys):
        """Indices of the ids ``keys`` (a numpy bytes array, a sequence of bytes, or ``take``'s
        column), the new ones appended."""
        return self._codes(keys, add=True)

    def find(self, keys):
        """Indices of the ids ``keys`` (as for :meth:`extend`), -1 for those absent."""
        return self._codes(keys, add=False)

    def take(self, index) -> "_codes.Ids":
        """The ids at ``index`` (indices), as a column that :meth:`extend` and :meth:`find` take."""
        return self._ids.take(numpy(), index)

    def byte_order(self):
        """The indices sorted by their ids in byte order (unsigned, as C's strcmp)."""
        return self._ids.byte_order(numpy())

    @property
    def array(self):
        """The ids as a numpy bytes array, index order (padded to the longest id: for small vocabularies)."""
        return self._ids.array(numpy())

    def add(self, key: bytes) -> int:
        """Index of ``key`` (bytes), added at the end when new."""
        return int(self.extend([key])[0])

    @property
    def positions(self) -> Dict[bytes, int]:
        """``{id bytes: index}`` (built on first use)."""
        if self._positions is None:
            self._positions = {k: i for i, k in enumerate(self._ids.tolist(numpy()))}
        return self._positions

    def key(self, i: int) -> bytes:
        return self._ids.key(numpy(), i)

    def __len__(self) -> int:
        return len(self._ids)

    def __getitem__(self, i: int) -> str:
        return self.key(i).decode("utf-8", "surrogateescape")

    def index(self, doc_id: str) -> int:
        """Index of ``doc_id``; KeyError when absent."""
        return self.positions[doc_id.encode("utf-8", "surrogateescape")]

    def get(self, doc_id: str) -> int:
        """Index of ``doc_id``, or -1 when absent."""
        return self.positions.get(doc_id.encode("utf-8", "surrogateescape"), -1)

    def ids(self) -> List[str]:
        """Every id, in index order."""
        return [k.decode("utf-8", "surrogateescape") for k in self._ids.tolist(numpy())]


def _query_codes(np, qcol):
    """Query ids sorted in byte order (trec_eval's strcmp order) and each record's index among them."""
    n = len(qcol)
    if n == 0:
        return (), np.zeros(0, np.int64)
    heads = qcol.run_heads(np)  # runs of one query
    col = qcol.take(np, heads) if len(heads) < n else qcol
    first, inv = col.factorize(np)
    keys = col.take(np, first).tolist(np)
    order = sorted(range(len(keys)), key=keys.__getitem__)
    new = np.empty(len(keys), np.int64)
    new[order] = np.arange(len(keys))
    run_lengths = np.diff(np.append(heads, n))
    return tuple(keys[i].decode("utf-8", "surrogateescape") for i in order), np.repeat(new[inv], run_lengths)


def _check_duplicates(np, q, d, n_docs: int, lines, path: str, docs: Vocabulary, query_ids, *, order=False,
                      allow=False, unit="lines"):
    """Refuse a document twice for a query (``allow``: keep it); returns ``(the order by (query, doc)
    when ``order``, whether a duplicate was kept)``. ``lines``: each record's line (or row: ``unit``)."""
    key = q * max(n_docs, 1) + d
    by_key, ks = _codes.sort_order(np, key) if order else (None, np.sort(key))
    if len(ks) > 1 and (ks[1:] == ks[:-1]).any():
        if allow:
            return by_key, True
        by_key = np.argsort(key, kind="stable")
        ks = key[by_key]
        dup = np.flatnonzero(ks[1:] == ks[:-1])
        a, b = by_key[dup[0]], by_key[dup[0] + 1]
        where = f"{unit} {int(lines[a])} and {int(lines[b])}" if lines is not None else "twice"
        raise ValueError(f"{path}: document {docs[int(d[a])]!r} appears twice for query "
                         f"{query_ids[int(q[a])]!r} ({where}); trec_eval refuses duplicates too")
    return by_key, False


def _no_duplicates(obj, what: str) -> None:
    if obj.duplicates:
        raise ValueError(f"this {what} holds a document twice for a query (read with duplicates=True): a dict "
                         "{qid: {docid: value}} cannot hold both")


def _nested(query_ids, docs: "Vocabulary", query: Tensor, doc: Tensor, values: Tensor) -> Dict[str, Dict[str, object]]:
    """``{qid: {docid: value}}``: the dicts of ranx, ir_measures and pytrec_eval."""
    out: Dict[str, Dict[str, object]] = {q: {} for q in query_ids}
    for q, d, v in zip(query.tolist(), doc.tolist(), values.tolist()):
        out[query_ids[q]][docs[d]] = v
    return out


# a DataFrame's (query, doc, value) column names: ranx's (``Qrels.from_df``, ``to_dataframe``) and
# ir_measures' (its ``Qrel`` and ``ScoredDoc`` fields), as (qrels, run)
COLUMNS = {"ranx": (("q_id", "doc_id", "score"), ("q_id", "doc_id", "score")),
           "ir_measures": (("query_id", "doc_id", "relevance"), ("query_id", "doc_id", "score"))}


def column_names(columns, run: bool) -> Tuple:
    """The (query, doc, value) column names that ``columns`` means: ``"ranx"``, ``"ir_measures"``, or
    three distinct names.

    Example:
        >>> column_names("ir_measures", run=False), column_names(("qid", "docno", "label"), run=False)
        (('query_id', 'doc_id', 'relevance'), ('qid', 'docno', 'label'))
    """
    if isinstance(columns, str):
        if columns not in COLUMNS:
            raise ValueError(f"columns={columns!r}: 'ranx', 'ir_measures' or three column names (query, doc, "
                             f"{'score' if run else 'relevance'})")
        return COLUMNS[columns][run]
    names = tuple(columns)
    if len(names) != 3 or len(set(names)) != 3:
        raise ValueError(f"columns={columns!r}: three distinct column names (query, doc, "
                         f"{'score' if run else 'relevance'}) or 'ranx' or 'ir_measures'")
    return names


def _text_column(np, pd, pa, keys, index):
    """The ids ``keys[index]`` (``keys``: utf-8 bytes) as a column of text as pandas holds it by default
    (``str`` in pandas 3, object before: arrow's ``to_pandas`` follows pandas' default), decoded once per
    distinct id by arrow; object, decoded with surrogateescape, when an id is not utf-8."""
    try:
        text = pa.array(keys, pa.binary()).cast(pa.string())  # (validates the utf-8)
    except pa.ArrowInvalid:
        names = np.array([k.decode("utf-8", "surrogateescape") for k in keys] + [None], dtype=object)[:-1]
        return pd.Series(names[index], dtype=object)
    return text.take(pa.array(index)).to_pandas()


def _frame(obj, values: Tensor, columns, run: bool):
    """``obj`` (a Qrels or a Run) as a DataFrame of one row per record, in its order."""
    feature = f"{type(obj).__name__}.to_frame()"
    np, pd, pa = numpy(), optional.pandas(feature), optional.pyarrow("pyarrow", feature)
    names = column_names(columns, run)
    used, inverse = np.unique(obj.doc.numpy(), return_inverse=True)
    query_keys = [q.encode("utf-8", "surrogateescape") for q in obj.query_ids]
    return pd.DataFrame({names[0]: _text_column(np, pd, pa, query_keys, obj.query.numpy()),
                         names[1]: _text_column(np, pd, pa, obj.docs.take(used).tolist(np), inverse.reshape(-1)),
                         names[2]: values.numpy().copy()})


@dataclass(frozen=True, eq=False)
class Qrels:
    """Judgements, sorted by query: ``query`` (index into ``query_ids``), ``doc`` (index into
    ``docs``), ``rel`` (int64; < 0: in the pool but unjudged). All tensors are CPU int64."""

    query_ids: Tuple[str, ...]
    docs: Vocabulary
    query: Tensor
    doc: Tensor
    rel: Tensor
    duplicates: bool = False  # read with duplicates=True and one was kept: align() refuses those it evaluates

    def __len__(self) -> int:
        return int(self.rel.numel())

    @property
    def judged(self) -> Tensor:
        """Judgements with rel >= 0 (a negative rel is in the pool but unjudged)."""
        return self.rel >= 0

    def n_relevant(self, level: int = 1) -> Tensor:
        """R per query: judgements with rel >= ``level`` (trec_eval ``-l``; never a negative rel)."""
        hit = (self.rel >= level) & self.judged
        return torch.zeros(len(self.query_ids), dtype=torch.int64).index_add_(0, self.query, hit.long())

    def to_dict(self) -> Dict[str, Dict[str, int]]:
        """``{qid: {docid: rel}}`` (ranx / ir_measures / pytrec_eval qrels)."""
        _no_duplicates(self, "qrels")
        return _nested(self.query_ids, self.docs, self.query, self.doc, self.rel)

    def to_frame(self, columns="ranx"):
        """A pandas DataFrame of the judgements, one row each in this order: query id, doc id (text) and
        relevance (int64), named as ranx names them (``q_id``, ``doc_id``, ``score``), as ir_measures does
        (``columns="ir_measures"``: ``query_id``, ``doc_id``, ``relevance``) or by three names. Needs pandas
        (``pip install 'retrieval-metrics[frames]'``)."""
        return _frame(self, self.rel, columns, run=False)


@dataclass(frozen=True, eq=False)
class Run:
    """Ranked results in trec_eval's order (query, then score descending, then docid descending):
    ``query`` (index into ``query_ids``), ``doc`` (index into ``docs``), ``score`` float64;
    ``offsets[i]:offsets[i + 1]`` are query i's entries, first ranked first."""

    query_ids: Tuple[str, ...]
    docs: Vocabulary
    query: Tensor
    doc: Tensor
    score: Tensor
    offsets: Tensor
    tag: str
    duplicates: bool = False  # read with duplicates=True and one was kept: align() refuses those it evaluates

    def __len__(self) -> int:
        return int(self.score.numel())

    @property
    def rank(self) -> Tensor:
        """1-based rank of every entry within its query."""
        return torch.arange(len(self), dtype=torch.int64) - self.offsets[self.query] + 1

    def to_dict(self) -> Dict[str, Dict[str, float]]:
        """``{qid: {docid: score}}`` (ranx / ir_measures / pytrec_eval run)."""
        _no_duplicates(self, "run")
        return _nested(self.query_ids, self.docs, self.query, self.doc, self.score)

    def to_frame(self, columns="ranx"):
        """A pandas DataFrame of the entries, one row each in trec_eval's order: query id, doc id (text)
        and score (float64), named as ranx names them (``q_id``, ``doc_id``, ``score``), as ir_measures
        does (``columns="ir_measures"``: ``query_id``, ``doc_id``, ``score``) or by three names. Needs
        pandas (``pip install 'retrieval-metrics[frames]'``)."""
        return _frame(self, self.score, columns, run=True)


def _build_qrels(np, qcol, dcol, rel, lines, path: str, docs: Optional[Vocabulary], allow=False,
                 unit="lines") -> Qrels:
    """The :class:`Qrels` of id columns (``_codes.Ids``) and ``rel`` (int64); ``lines``: each record's
    line (or row: ``unit``), for the errors."""
    docs = Vocabulary() if docs is None else docs
    query_ids, q = _query_codes(np, qcol)
    d = docs.extend(dcol)
    order, dup = _check_duplicates(np, q, d, len(docs), lines, path, docs, query_ids, order=True, allow=allow,
                                   unit=unit)
    t = lambda a: torch.from_numpy(np.ascontiguousarray(a[order], dtype=np.int64))  # noqa: E731
    return Qrels(query_ids, docs, t(q), t(d), t(rel), dup)


def _trec_order(np, q, d, score, docs: Vocabulary):
    """Entries reordered as trec_eval ranks them: query, score descending, docid descending (bytes).

    Runs are usually written in that order, or with each query's entries together in score order:
    then nothing is sorted, or only the queries' blocks move. Otherwise one sort by score, then a
    stable one by query; only the entries tied on both are then reordered by their docids.
    """
    n = len(q)
    if n < 2:
        return q, d, score
    same_q = q[1:] == q[:-1]
    falling = (~same_q | (score[1:] <= score[:-1])).all()  # within each block of a query
    heads = np.flatnonzero(np.concatenate([[True], ~same_q]))
    n_queries = int(q.max()) + 1
    if falling and len(heads) <= n_queries and (np.bincount(q[heads], minlength=n_queries) <= 1).all():
        hq = q[heads]
        if not (hq[1:] > hq[:-1]).all():  # one block per query, not in query order: move the blocks
            by_q = np.argsort(hq)
            lengths = np.diff(np.append(heads, n))[by_q]
            perm = np.repeat(heads[by_q] - (np.cumsum(lengths) - lengths), lengths) + np.arange(n)
            q, d, score = q[perm], d[perm], score[perm]
    else:
        order = np.argsort(-score)  # the order among equal scores does not matter: ties are sorted below
        qk = q[order]
        order = order[np.argsort(qk.astype(np.uint16) if n_queries <= 1 << 16 else qk, kind="stable")]
        d, score = d[order], score[order]
        q = np.repeat(np.arange(n_queries), np.bincount(q, minlength=n_queries))
    same_q = q[1:] == q[:-1]
    tie = same_q & (score[1:] == score[:-1])  # entry i + 1 is tied with entry i
    if not tie.any():
        return q, d, score
    member = np.zeros(n, bool)
    member[1:] |= tie
    member[:-1] |= tie
    pos = np.flatnonzero(member)
    group = np.cumsum(~np.concatenate([[False], tie])[pos])  # a new group where not tied to the previous
    tied_docs = sorted(set(d[pos].tolist()), key=docs.key)
    ordinal = {doc: i for i, doc in enumerate(tied_docs)}
    rank = np.array([ordinal[x] for x in d[pos].tolist()], dtype=np.int64)
    # groups are contiguous and share query and score value: the entries move inside each group (the
    # scores too, which differ only by a zero's sign)
    moved = pos[np.lexsort((-rank, group))]
    d, score = d.copy(), score.copy()
    d[pos], score[pos] = d[moved], score[moved]
    return q, d, score


def _build_run(np, qcol, dcol, score, lines, path: str, tag: str, docs: Optional[Vocabulary], allow=False,
               unit="lines") -> Run:
    """The :class:`Run` of id columns and finite float64 scores, ranked as trec_eval ranks it (as
    :func:`_build_qrels`)."""
    docs = Vocabulary() if docs is None else docs
    query_ids, q = _query_codes(np, qcol)
    d = docs.extend(dcol)
    _, dup = _check_duplicates(np, q, d, len(docs), lines, path, docs, query_ids, allow=allow, unit=unit)
    q, d, score = _trec_order(np, q, d, score, docs)
    offsets = np.zeros(len(query_ids) + 1, np.int64)
    np.cumsum(np.bincount(q, minlength=len(query_ids)), out=offsets[1:])
    t = lambda a, dt: torch.from_numpy(np.ascontiguousarray(a, dtype=dt))  # noqa: E731
    return Run(query_ids, docs, t(q, np.int64), t(d, np.int64), t(score, np.float64), t(offsets, np.int64), tag,
               dup)


def _read_table(path: PathLike, n_fields: int, *, exact: bool, number: int, integer: bool, what: str):
    """Query and doc ids (``_codes.Ids`` columns), the number column, the line numbers and the last record's
    sixth field (a run's tag) of a TREC file, its name; its bytes are let go on return."""
    np = numpy()
    src = _parse.Source.read(os.fspath(path))
    qcol, dcol, ncol = _parse.Words(np, src), _parse.Words(np, src), _numbers.Numbers(np, src, integer=integer)
    lines, last = _parse.scan(np, src, n_fields, exact=exact, columns=[(0, qcol), (2, dcol), (number, ncol)])
    values = ncol.result(lines, src.name, what, _parse.header_hint(int(lines[0])) if len(lines) else "")
    tag = _parse.last_field(src, last, 5) if n_fields > 5 else None
    return qcol.result(), dcol.result(), values, lines, tag, src.name


def read_qrels(path: PathLike, *, docs: Optional[Vocabulary] = None, duplicates: bool = False) -> Qrels:
    """Read a TREC qrels file (``qid iter docid rel``); ``docs``: a vocabulary to share (extended).
    A document judged twice for a query is refused; ``duplicates=True`` keeps it, as trec_eval reads
    the file, and :func:`~retrieval_core.trec.align` refuses it in a query it evaluates."""
    qcol, dcol, rel, lines, _, name = _read_table(path, 4, exact=True, number=3, integer=True,
                                                  what="the relevance (4th field)")
    return _build_qrels(numpy(), qcol, dcol, rel, lines, name, docs, duplicates)


def read_run(path: PathLike, *, docs: Optional[Vocabulary] = None, duplicates: bool = False) -> Run:
    """Read a TREC run file (``qid Q0 docid rank score tag``); ``docs``: a vocabulary to share
    (e.g. ``qrels.docs``; extended with the run's new documents). The tag is the last line's, as
    trec_eval keeps it. A document given twice for a query is refused; ``duplicates=True`` keeps
    it, as trec_eval reads the file, and :func:`~retrieval_core.trec.align` refuses it where
    trec_eval does: both entries among the evaluated ones (a qrels query's, within ``-M``)."""
    qcol, dcol, score, lines, tag, name = _read_table(path, 6, exact=False, number=4, integer=False,
                                                      what="the score (5th field)")
    tag = "" if tag is None else tag.decode("utf-8", "surrogateescape")
    return _build_run(numpy(), qcol, dcol, score, lines, name, tag, docs, duplicates)


def _dict_columns(d: Mapping, what: str):
    if not isinstance(d, Mapping):
        raise TypeError(f"{what} must be a dict {{qid: {{docid: value}}}}; got {type(d).__name__}")
    qcol, dcol, vals = [], [], []
    for qid, docs in d.items():
        if not isinstance(qid, str) or not isinstance(docs, Mapping):
            raise TypeError(f"{what}: each entry must be qid (str) -> {{docid (str): value}}; got "
                            f"{qid!r} -> {type(docs).__name__}")
        qb = qid.encode("utf-8", "surrogateescape")
        for doc, v in docs.items():
            if not isinstance(doc, str):
                raise TypeError(f"{what}: query {qid!r}: doc ids must be str; got {doc!r}")
            if "\0" in doc or "\0" in qid:
                raise ValueError(f"{what}: query {qid!r}, doc {doc!r}: ids must not hold a NUL byte (no TREC file "
                                 "can, and the id would lose it)")
            qcol.append(qb)
            dcol.append(doc.encode("utf-8", "surrogateescape"))
            vals.append(v)
    return qcol, dcol, vals


_INT64 = (-(1 << 63), (1 << 63) - 1)


def qrels_from_dict(qrels: Mapping[str, Mapping[str, int]], *, docs: Optional[Vocabulary] = None) -> Qrels:
    """A :class:`Qrels` from ``{qid: {docid: rel}}`` (integer relevance, in int64's range)."""
    np = numpy()
    qcol, dcol, vals = _dict_columns(qrels, "qrels")
    for (q, dd, v) in zip(qcol, dcol, vals):
        where = f"qrels: query {q.decode('utf-8', 'replace')!r}, doc {dd.decode('utf-8', 'replace')!r}"
        try:
            integral = not isinstance(v, bool) and float(v).is_integer()
        except OverflowError:  # an int beyond a float's range
            integral = True
        if not integral:
            raise ValueError(f"{where}: relevance must be an integer; got {v!r}")
        if not _INT64[0] <= int(v) <= _INT64[1]:
            raise ValueError(f"{where}: relevance must fit in 64 bits ({_INT64[0]} to {_INT64[1]}); got {v!r}")
    rel = np.array([int(v) for v in vals], dtype=np.int64)
    return _build_qrels(np, _codes.Ids.of(np, qcol), _codes.Ids.of(np, dcol), rel, None, "qrels", docs)


def run_from_dict(run: Mapping[str, Mapping[str, float]], *, tag: str = "run",
                  docs: Optional[Vocabulary] = None) -> Run:
    """A :class:`Run` from ``{qid: {docid: score}}``, ranked as trec_eval ranks it."""
    np = numpy()
    qcol, dcol, vals = _dict_columns(run, "run")
    score = np.array(vals, dtype=np.float64) if vals else np.zeros(0, np.float64)
    if not np.isfinite(score).all():
        i = int(np.flatnonzero(~np.isfinite(score))[0])
        raise ValueError(f"run: query {qcol[i].decode('utf-8', 'replace')!r}, doc "
                         f"{dcol[i].decode('utf-8', 'replace')!r}: scores must be finite; got {vals[i]!r}")
    qcol, dcol = _codes.Ids.of(np, qcol), _codes.Ids.of(np, dcol)
    return _build_run(np, qcol, dcol, score, None, "run", tag, docs)
