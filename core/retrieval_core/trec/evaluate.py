"""Evaluate a run against qrels as trec_eval does: ``evaluate_trec(qrels, run, measures)``.

The run is aligned to the qrels (:func:`~retrieval_core.trec.align`: trec_eval's order,
``-M``, ``-c``, ``-l``). Every measure printed under a trec_eval name (map, P, recall,
ndcg, ndcg_cut, map_cut, Rprec, recip_rank, success, bpref, dcg, gm_map, the counts) is
computed with trec_eval's arithmetic (:mod:`retrieval_core.trec.exact`): the same terms,
added in the same order, so that each per-query value is trec_eval's double; the summary
adds the queries' values one after the other in trec_eval's query order and divides by
``num_q`` (a pairwise sum may print another fourth decimal). ``iprec_at_recall`` comes
from :mod:`retrieval_core.trec.kernels` (maxima of exact quotients); the other keys
(``mrr@10``, ``ndcg_exp``...) go through :func:`retrieval_core.evaluate_ranked` with R and
the ideal gains from the qrels (binary relevance ``rel >= level``; the judged positive
rels as the gains of the DCG family, as trec_eval's nDCG). A query without a relevant
document scores 0 and counts in the mean; in the summary the counts are sums (``-c``:
``num_rel`` counts every qrels judgement with rel > 0, as trec_eval) and ``gm_map`` the
geometric mean.

Example:
    >>> from retrieval_core.trec import qrels_from_dict, run_from_dict
    >>> qrels = qrels_from_dict({"q1": {"a": 1, "b": 0, "c": 1}, "q2": {"x": 2}})
    >>> run = run_from_dict({"q1": {"a": 0.9, "b": 0.8, "d": 0.7, "c": 0.6}, "q2": {"y": 1.0, "x": 0.5}}, tag="r1")
    >>> ev = evaluate_trec(qrels, run, ["map", "P_2", "bpref", "num_rel_ret"])
    >>> {k: round(v, 4) for k, v in ev.summary().items()}
    {'num_rel_ret': 3.0, 'map': 0.625, 'bpref': 0.75, 'P_2': 0.5}
    >>> [line.split("\\t") for line in ev.lines(per_query=True)[:2]]
    [['num_rel_ret           ', 'q1', '2'], ['map                   ', 'q1', '0.7500']]
    >>> round(ev.results["map"].item(), 4), ev.results.per_query["map"].tolist()
    (0.625, [0.75, 0.5])
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, field, replace
from typing import Dict, List, Optional, Sequence, Tuple, Union

import torch
from torch import Tensor

from retrieval_core import MetricResults, aggregate
from retrieval_core.evaluation.ranked import ranked_values
from retrieval_core.inputs.ranked import ranked_keys

from .align import Aligned, align
from .files import Qrels, Run
from .exact import is_exact, length_groups, sequential_gm, sequential_mean, trec_values
from .kernels import IPREC_RULES, iprec_at_recall
from .gain_measures import gain_values, is_gain_key
from .ir_measures_kernels import is_ir_measures_key, ir_measures_value
from .measures import TREC_EVAL_MEASURES, parse_measures, split_options
from .set_measures import is_key as is_set_key, set_values
from .zscores import ZScores, to_zscores

__all__ = ["TrecEvaluation", "evaluate_trec", "COUNTS", "TREC_ORDER"]

COUNTS = ("num_q", "num_ret", "num_rel", "num_rel_ret", "num_nonrel_judged_ret")
# trec_eval's output order (its measure table), by base name
TREC_ORDER = tuple(name for name in TREC_EVAL_MEASURES if name != "runid")
SUMMARY_ONLY = ("num_q", "gm_map", "gm_bpref")
# qrels and run entries evaluated at once (whole queries): passes over 10M+ entries run from memory,
# not cache (-m all_trec, 100k queries x 100 x 300 entries: 25.5 s whole, 8.6 s in blocks of ~2k
# queries; BENCHMARKS.md); a query's values do not depend on the others
BLOCK_ENTRIES = 1 << 19
GEOMETRIC = {"gm_map": "map", "gm_bpref": "bpref"}  # summary: the geometric mean of these per-query values
_NUMBER = re.compile(r"-?[0-9]+(?:\.[0-9]*)?")  # trec_eval prints them in the summary alone


def _base(trec: str) -> str:
    for base in sorted(TREC_ORDER, key=len, reverse=True):
        if trec == base or trec.startswith(base + "_"):
            return base
    return trec


@dataclass(frozen=True, eq=False)
class TrecEvaluation:
    """What :func:`evaluate_trec` returns: ``values[Q, M]`` per query (float64) for the
    ``measures`` ``(key, output name)`` in trec_eval's output order, the ``query_ids``,
    the run's ``tag``, and ``results``: a :class:`~retrieval_core.MetricResults` of the
    summary (counts summed, ``gm_map`` geometric) with the per-query values kept (for
    ``compare``), and intervals when ``ci`` was given. ``texts``: the measures printed as
    a string per query and not summarised (``relstring``: ``{output name: [Q] strings}``,
    their ``values`` NaN). ``zscored``: the values are z-scores (``zscores=``; printed as trec_eval
    ``-Z`` prints them: the name after a ``Z``, every value with 4 decimals)."""

    query_ids: Tuple[str, ...]
    measures: Tuple[Tuple[str, str], ...]
    values: Tensor
    results: MetricResults
    tag: str
    texts: Dict[str, Tuple[str, ...]] = field(default_factory=dict)
    zscored: bool = False

    def summary(self) -> Dict[str, float]:
        """``{output name: summary value}`` (``relstring`` has none)."""
        return {name: float(self.results[key]) for key, name in self.measures if name not in self.texts}

    def per_query(self) -> Dict[str, Dict[str, Union[float, str]]]:
        """``{query id: {output name: value}}`` (the measures trec_eval prints per query; a
        ``relstring`` is its string)."""
        cols = [(j, name) for j, (_, name) in enumerate(self.measures) if name not in SUMMARY_ONLY]
        rows: List[list] = self.values.tolist()
        for j, name in cols:
            for row, text in zip(rows, self.texts.get(name, ())):
                row[j] = text
        return {q: {name: rows[i][j] for j, name in cols} for i, q in enumerate(self.query_ids)}

    def lines(self, per_query: bool = False, runid: bool = False) -> List[str]:
        """trec_eval's output lines (``-q``: ``per_query``; the ``runid`` line first in the
        summary when asked): ``measure<TAB>query<TAB>value``, the name padded to 22,
        4 decimals, the counts as integers."""
        out: List[str] = []
        counts = {name for key, name in self.measures if split_options(key)[0] in COUNTS}
        if per_query:
            for q, row in self.per_query().items():
                out.extend(_line(name, q, v, name in counts, self.zscored) for name, v in row.items())
        if runid:
            out.append(f"{'runid':<22}\tall\t{self.tag}")
        out.extend(_line(name, "all", v, name in counts, self.zscored) for name, v in self.summary().items())
        return out


def _line(name: str, query: str, value: Union[float, str], count: bool, zscored: bool = False) -> str:
    """One line; ``zscored`` (trec_eval -Z): ``Z`` before the name (relstring's excepted), the
    counts with 4 decimals too."""
    if isinstance(value, str):  # relstring
        return f"{name:<22}\t{query}\t'{value}'"
    if count and not zscored:
        text = str(int(round(value)))
    else:
        text = f"{value:.4f}" if math.isfinite(value) else _c_text(value)
    return f"{'Z' if zscored else ''}{name:<22}\t{query}\t{text}"


def _c_text(value: float) -> str:
    """C's ``%6.4f`` of an infinity or a NaN (its sign shown: ``-nan`` for 0.0 / 0)."""
    text = "nan" if math.isnan(value) else "inf"
    return f"{'-' + text if math.copysign(1.0, value) < 0 else text:>6}"


def _rows(flat: Tensor, offsets: Tensor, rows: Tensor) -> Tuple[Tensor, Tensor]:
    """The segments ``offsets[i]:offsets[i + 1]`` of ``flat`` for ``rows`` as a ``[len(rows), longest]``
    block padded with 0, and the mask of its entries."""
    lens = (offsets[1:] - offsets[:-1])[rows]
    width = int(lens.max()) if len(rows) else 0
    valid = torch.arange(width).unsqueeze(0) < lens.unsqueeze(1)
    out = torch.zeros(len(rows), width, dtype=flat.dtype)
    out[valid] = flat[(offsets[rows].unsqueeze(1) + torch.arange(width).unsqueeze(0))[valid]]
    return out, valid


def _ordered(pairs: Sequence[Tuple[str, Optional[str]]]) -> List[Tuple[str, str]]:
    """trec_eval's order: by measure (its table), a measure's parameters ascending."""
    named = [(k, n if n is not None else k) for k, n in pairs]
    rank = {b: i for i, b in enumerate(TREC_ORDER)}

    def key(pair):
        base = _base(pair[1])
        param = pair[1][len(base) + 1:]
        return rank.get(base, len(TREC_ORDER)), float(param) if _NUMBER.fullmatch(param) else 0.0

    return sorted(named, key=key)  # stable: measures without a trec_eval name keep their order


def evaluate_trec(qrels: Qrels, run: Run, measures: Union[str, Sequence[str]] = "official", *, level: int = 1,
                  max_per_query: Optional[int] = None, complete: bool = False, ci: Optional[float] = None,
                  seed: int = 0, iprec_rule: str = "lround", num_docs: int = 0,
                  judged_only: bool = False, zscores: Optional[ZScores] = None) -> TrecEvaluation:
    """Evaluate ``run`` against ``qrels`` with trec_eval's semantics (module doc).

    Args:
        qrels, run: from :func:`read_qrels` / :func:`read_run` (or the ``*_from_dict`` helpers).
        measures: names of trec_eval, ir_measures or this library, or a set (``"official"``,
            trec_eval's default); an unsupported name raises, listing every one
            (:func:`~retrieval_core.trec.split_measures` tells them apart beforehand).
        level: ``rel >= level`` is relevant (trec_eval ``-l``).
        max_per_query: keep each query's first entries (``-M``).
        complete: every qrels query counts, 0 where the run has none (``-c``).
        ci, seed: a confidence level for bootstrap intervals of the means (``results.ci``).
        iprec_rule: the relevant documents needed at recall x (iprec_at_recall, 11pt_avg):
            ``"lround"``, ``lround(x R)`` as trec_eval 10; ``"v9"``, ``floor(x R + 0.9)`` as
            trec_eval 9 and pytrec_eval.
        num_docs: the documents in the collection (trec_eval ``-N``; ``utility``'s d term).
        judged_only: the entries not judged are removed before evaluation (``-J``, :func:`align`).

    A measure's own relevance level or judged-only choice (ir_measures' ``P(rel=2)@5``,
    ``AP(judged_only=True)``) overrides ``level`` / ``judged_only`` for it: the measures are
    evaluated in groups of one setting each, into one table in trec_eval's order.
        zscores: each per-query value as its z-score against these means and stddevs
            (:func:`~retrieval_core.trec.zscores.read_zscores`; trec_eval ``-Z``), the summary
            formed from them.
    """
    if iprec_rule not in IPREC_RULES:
        raise ValueError(f"iprec_rule must be one of {list(IPREC_RULES)} (trec_eval 10, trec_eval 9); "
                         f"got {iprec_rule!r}")
    pairs = _ordered(parse_measures(measures))
    keys = [k for k, _ in pairs]
    options = dict(level=level, judged_only=judged_only, max_per_query=max_per_query, complete=complete,
                   iprec_rule=iprec_rule, num_docs=num_docs)
    size = max(1, BLOCK_ENTRIES * len(qrels.query_ids) // max(len(qrels) + len(run), 1))  # queries a block
    blocks = [got for qb, rb in _blocks(qrels, run, size)
              if (got := _block_values(qb, rb, keys, **options)) is not None]
    if not blocks:
        raise ValueError(f"the run has none of the qrels' {len(qrels.query_ids)} queries (trec_eval evaluates "
                         "the queries both have; complete=True, -c, counts every qrels query)")
    query_ids = tuple(q for b in blocks for q in b[0])
    values = torch.cat([b[1] for b in blocks])
    texts = {k: [t for b in blocks for t in b[2][k]] for k in blocks[0][2]}
    numeric = [j for j, k in enumerate(keys) if k not in texts]
    keys = [keys[j] for j in numeric]
    if zscores is not None:  # trec_eval -Z: after the measures, before the summary
        values[:, numeric] = to_zscores(values[:, numeric], query_ids, [pairs[j][1] for j in numeric], zscores,
                                        logs=[i for i, k in enumerate(keys) if split_options(k)[0] in GEOMETRIC])
    finite = torch.where(torch.isinf(values[:, numeric]), torch.nan, values[:, numeric])  # G, ndcg_rel: C's inf
    res = aggregate(finite, keys, empty="zero", keep_per_query=True, ci=ci, seed=seed)
    summary = _summary(values[:, numeric], keys, zscored=zscores is not None)
    if "num_rel" in keys and complete:  # trec_eval -c: every qrels judgement with rel > 0, whatever -l
        summary["num_rel"] = (qrels.rel > 0).sum().to(torch.float64)
    out = res.with_values(summary)
    for k in keys:  # an interval of the mean is not one of a sum or of a geometric mean
        if split_options(k)[0] in COUNTS or split_options(k)[0] in GEOMETRIC:
            out.ci.pop(k, None)
    names = dict(pairs)
    return TrecEvaluation(query_ids, tuple(pairs), values, out, run.tag,
                          {names[k]: tuple(v) for k, v in texts.items()}, zscores is not None)


def _blocks(qrels: Qrels, run: Run, size: int):
    """``(qrels, run)`` restricted to ``size`` qrels queries at a time, in trec_eval's query order: each
    block's arrays stay small enough for the cache (a query's values do not depend on the others)."""
    n = len(qrels.query_ids)
    if n <= size:
        yield qrels, run
        return
    bounds = torch.searchsorted(qrels.query, torch.arange(0, n + size, size).clamp(max=n)).tolist()
    position = {q: i for i, q in enumerate(run.query_ids)}
    for a, (lo, hi) in zip(range(0, n, size), zip(bounds, bounds[1:])):
        ids = qrels.query_ids[a:a + size]
        qb = replace(qrels, query_ids=ids, query=qrels.query[lo:hi] - a, doc=qrels.doc[lo:hi], rel=qrels.rel[lo:hi])
        found = [position[q] for q in ids if q in position]
        first, last = (min(found), max(found) + 1) if found else (0, 0)  # queries between: not in qrels, not evaluated
        o = run.offsets
        rb = replace(run, query_ids=run.query_ids[first:last], query=run.query[o[first]:o[last]] - first,
                     doc=run.doc[o[first]:o[last]], score=run.score[o[first]:o[last]],
                     offsets=o[first:last + 1] - o[first])
        yield qb, rb


def _block_values(qrels: Qrels, run: Run, keys: Sequence[str], *, level: int, judged_only: bool,
                  max_per_query: Optional[int], complete: bool, iprec_rule: str, num_docs: int):
    """``(query ids, values [Q, len(keys)], {key: [Q] strings})`` of one block; None when it
    evaluates no query. The keys with their own options are evaluated in groups of one setting."""
    cols: Dict[str, Tensor] = {}
    texts: Dict[str, List[str]] = {}
    for (lv, jo), group in _option_groups(keys, level, judged_only).items():
        al = align(run, qrels, level=lv, max_per_query=max_per_query, complete=complete, judged_only=jo)
        if len(al.query_ids) == 0:
            return None
        got, got_texts = _columns(qrels, run, al, list(dict.fromkeys(group.values())), iprec_rule, num_docs,
                                  max_per_query, complete, jo)
        cols.update({k: got[b] for k, b in group.items()})
        texts.update({k: got_texts[b] for k, b in group.items() if b in got_texts})
    q = len(al.query_ids)
    values = torch.stack([cols[k] for k in keys], 1) if keys else torch.zeros(q, 0, dtype=torch.float64)
    return al.query_ids, values, texts


def _summary(values: Tensor, keys: Sequence[str], zscored: bool) -> Dict[str, Tensor]:
    """``{key: summary}`` of ``values [Q, len(keys)]`` as trec_eval forms it: the queries added one
    after the other, then / num_q; the counts summed (``num_q``: Q); ``gm_map`` and ``gm_bpref`` the
    geometric mean of the APs, or (``zscored``: their columns hold the z-scores of the logs) ``exp``
    of the mean."""
    means = sequential_mean(values)  # trec_eval's order: query after query, then / num_q
    summary = {k: means[j] for j, k in enumerate(keys)}
    for j, k in enumerate(keys):
        base = split_options(k)[0]
        if base == "num_q":
            summary[k] = torch.tensor(float(values.shape[0]), dtype=torch.float64)
        elif base in COUNTS:
            summary[k] = torch.cumsum(values[:, j], 0)[-1]
        elif base in GEOMETRIC:
            gm = math.exp(float(means[j])) if zscored else sequential_gm(values[:, j])
            summary[k] = torch.tensor(gm, dtype=torch.float64)
    return summary


def _option_groups(keys: Sequence[str], level: int, judged_only: bool) -> Dict[Tuple[int, bool], Dict[str, str]]:
    """The keys by the evaluation each needs, ``(level, judged_only)`` (a key's own ``rel=`` /
    ``judged_only=`` over the call's), as ``{key: key without options}`` (no key: the call's setting alone)."""
    groups: Dict[Tuple[int, bool], Dict[str, str]] = {}
    for k in keys:
        base, rel, judged = split_options(k)
        groups.setdefault((level if rel is None else rel, judged_only if judged is None else judged), {})[k] = base
    return groups or {(level, judged_only): {}}


def _columns(qrels: Qrels, run: Run, al: Aligned, keys: Sequence[str], iprec_rule: str, num_docs: int,
             max_per_query: Optional[int], complete: bool,
             judged_only: bool = False) -> Tuple[Dict[str, Tensor], Dict[str, List[str]]]:
    """``({key: [Q] values}, {key: [Q] strings})``: each key by the module that computes it."""
    cols: Dict[str, Tensor] = {}
    exact = [k for k in keys if is_exact(k)] + [v for k, v in GEOMETRIC.items() if k in keys and v not in keys]
    cols.update(trec_values(al, exact, _judged_nonrel(qrels, al) if "bpref" in exact else None))
    placeholder = complete and max_per_query != 0  # trec_eval -c: a lacking query "retrieves" one document
    cols.update(gain_values(al, qrels, [k for k in keys if is_gain_key(k)], placeholder=placeholder))
    levels = [float(k.partition("@")[2]) for k in keys if k.startswith("iprec_at_recall@")]
    mine = [k for k in keys if is_set_key(k)]
    # a query the run lacks (complete): trec_eval's one made-up document, none under -M0, and -J removes it
    in_run = set(run.query_ids) if (levels or mine) and complete else set(al.query_ids)
    missing = torch.tensor([qid not in in_run for qid in al.query_ids], dtype=torch.bool)
    bogus_docs = 0 if judged_only else min(1, 1 if max_per_query is None else max_per_query)
    if levels:
        retrieved = torch.where(missing, bogus_docs, al.offsets[1:] - al.offsets[:-1])
        got = iprec_at_recall(al.relevant, al.offsets, al.n_relevant, levels, rule=iprec_rule, retrieved=retrieved)
        cols.update({f"iprec_at_recall@{x:g}": got[:, i] for i, x in enumerate(levels)})
    cols.update({k: ir_measures_value(al, k) for k in keys if is_ir_measures_key(k)})
    texts: Dict[str, List[str]] = {}
    if mine:
        got, texts = set_values(al, mine, missing=missing, bogus_docs=bogus_docs, num_docs=num_docs, rule=iprec_rule)
        cols.update(got)
    rest = [k for k in keys if k not in cols and k not in GEOMETRIC and not is_set_key(k)]
    if rest:
        cols.update(_ranked(al, rest))
    cols.update({k: cols[v] for k, v in GEOMETRIC.items() if k in keys})
    return cols, texts


def _ranked(al: Aligned, keys: Sequence[str]) -> Dict[str, Tensor]:
    """The keys without a trec_eval name, as :func:`retrieval_core.evaluate_ranked` computes
    them (``empty="zero"``): binary relevance, but the judged positive rels as the gains of
    the DCG family (as nDCG's). The keys are checked once (:func:`ranked_keys`), then each
    group of queries gives its values unchecked again (``ranked_values``). Queries go in
    groups of like lengths (of list and ideal), so that padding at most doubles the entries
    whatever the longest list."""
    specs = ranked_keys(keys)
    graded = tuple(m for m in specs if m.spec.trec_gains)
    binary = tuple(m for m in specs if not m.spec.trec_gains)
    cols = {k: torch.zeros(len(al.query_ids), dtype=torch.float64) for k in keys}
    ideal_lens = al.ideal_offsets[1:] - al.ideal_offsets[:-1]
    for rows in length_groups(torch.maximum(al.num_ret, ideal_lens if graded else torch.zeros_like(ideal_lens))):
        relevant, valid = _rows(al.relevant, al.offsets, rows)
        got = []
        if binary:
            got.append((binary, ranked_values(relevant.to(torch.float64), binary, n_relevant=al.n_relevant[rows],
                                              mask=valid)[0]))
        if graded:
            gain, _ = _rows(al.gain, al.offsets, rows)
            ideal, _ = _rows(al.ideal, al.ideal_offsets, rows)
            got.append((graded, ranked_values(gain, graded, n_relevant=(ideal > 0).sum(1), ideal=ideal,
                                              mask=valid)[0]))
        for part, values in got:  # empty="zero": an undefined value counts 0
            for m, v in zip(part, values.masked_fill(torch.isnan(values), 0.0).unbind(1)):
                cols[m.key][rows] = v
    return cols


def _judged_nonrel(qrels: Qrels, al: Aligned) -> Tensor:
    """Per evaluated query, its judged non-relevant documents in the qrels (0 <= rel < level)."""
    pos = {qid: i for i, qid in enumerate(al.query_ids)}
    to_eval = torch.tensor([pos.get(qid, -1) for qid in qrels.query_ids], dtype=torch.int64)
    eq = to_eval[qrels.query] if len(qrels.query_ids) else qrels.query
    keep = (eq >= 0) & (qrels.rel >= 0) & (qrels.rel < al.level)
    return torch.zeros(len(al.query_ids), dtype=torch.int64).index_add_(0, eq[keep], torch.ones_like(eq[keep]))
