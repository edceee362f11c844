"""Evaluate a run against qrels as trec_eval does: ``evaluate_trec(qrels, run, measures)``.

The run is aligned to the qrels (:func:`~retrieval_core.trec.align`: trec_eval's order,
``-M``, ``-c``, ``-l``); the ranking measures go through
:func:`retrieval_core.evaluate_ranked` with R and the ideal gains from the qrels (binary
relevance ``rel >= level`` for all but nDCG, whose gains are the judged positive rels, as
trec_eval's); ``bpref``, ``iprec_at_recall``, ``gm_map`` and the counts are computed here
(:mod:`retrieval_core.trec.kernels`). A query without a relevant document scores 0 and
counts in the mean (trec_eval divides by ``num_q``); in the summary the counts are sums
and ``gm_map`` the geometric mean.

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

import re
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple, Union

import torch
from torch import Tensor

from retrieval_core import MetricResults, aggregate, evaluate_ranked, parse_metrics

from .align import Aligned, align
from .files import Qrels, Run
from .kernels import IPREC_RULES, bpref, gm_map, iprec_at_recall
from .measures import parse_measures

__all__ = ["TrecEvaluation", "evaluate_trec", "COUNTS", "TREC_ORDER"]

COUNTS = ("num_q", "num_ret", "num_rel", "num_rel_ret", "num_nonrel_judged_ret")
# trec_eval's output order (its measure table), by base name
TREC_ORDER = ("num_q", "num_ret", "num_rel", "num_rel_ret", "map", "gm_map", "Rprec", "bpref", "recip_rank",
              "iprec_at_recall", "P", "recall", "ndcg", "ndcg_cut", "map_cut", "success", "num_nonrel_judged_ret")
SUMMARY_ONLY = ("num_q", "gm_map")
_NUMBER = re.compile(r"[0-9]+(?:\.[0-9]*)?")  # trec_eval prints them in the summary alone


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
    ``compare``), and intervals when ``ci`` was given."""

    query_ids: Tuple[str, ...]
    measures: Tuple[Tuple[str, str], ...]
    values: Tensor
    results: MetricResults
    tag: str

    def summary(self) -> Dict[str, float]:
        """``{output name: summary value}``."""
        return {name: float(self.results[key]) for key, name in self.measures}

    def per_query(self) -> Dict[str, Dict[str, float]]:
        """``{query id: {output name: value}}`` (the measures trec_eval prints per query)."""
        cols = [(j, name) for j, (_, name) in enumerate(self.measures) if name not in SUMMARY_ONLY]
        rows = self.values.tolist()
        return {q: {name: rows[i][j] for j, name in cols} for i, q in enumerate(self.query_ids)}

    def lines(self, per_query: bool = False, runid: bool = False) -> List[str]:
        """trec_eval's output lines (``-q``: ``per_query``; the ``runid`` line first in the
        summary when asked): ``measure<TAB>query<TAB>value``, the name padded to 22,
        4 decimals, the counts as integers."""
        out: List[str] = []
        if per_query:
            for q, row in self.per_query().items():
                out.extend(_line(name, q, v) for name, v in row.items())
        if runid:
            out.append(f"{'runid':<22}\tall\t{self.tag}")
        out.extend(_line(name, "all", v) for name, v in self.summary().items())
        return out


def _line(name: str, query: str, value: float) -> str:
    text = str(int(round(value))) if name in COUNTS else f"{value:.4f}"
    return f"{name:<22}\t{query}\t{text}"


def _dense(al: Aligned, flags: Sequence[Tensor]) -> Tuple[List[Tensor], Tensor]:
    """Per-entry tensors as padded ``[Q, D]`` rows in rank order, and the validity mask."""
    q = len(al.query_ids)
    d = int(al.num_ret.max()) if q else 0
    row, col = al.query, al.rank - 1
    valid = torch.zeros(q, d, dtype=torch.bool)
    valid[row, col] = True
    out = []
    for f in flags:
        t = torch.zeros(q, d, dtype=f.dtype)
        t[row, col] = f
        out.append(t)
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
                  seed: int = 0, iprec_rule: str = "lround") -> TrecEvaluation:
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
        iprec_rule: the relevant documents needed at recall x: ``"lround"``, ``lround(x R)`` as
            trec_eval 10; ``"v9"``, ``floor(x R + 0.9)`` as trec_eval 9 and pytrec_eval.
    """
    if iprec_rule not in IPREC_RULES:
        raise ValueError(f"iprec_rule must be one of {list(IPREC_RULES)} (trec_eval 10, trec_eval 9); "
                         f"got {iprec_rule!r}")
    pairs = _ordered(parse_measures(measures))
    al = align(run, qrels, level=level, max_per_query=max_per_query, complete=complete)
    q = len(al.query_ids)
    if q == 0:
        raise ValueError(f"the run has none of the qrels' {len(qrels.query_ids)} queries (trec_eval evaluates the "
                         "queries both have; complete=True, -c, counts every qrels query)")
    (relevant, gain, judged), valid = _dense(al, [al.relevant, al.gain, al.judged])
    r = al.n_relevant
    cols: Dict[str, Tensor] = {}
    core = [k for k, _ in pairs if k.partition("@")[0] not in ("bpref", "gm_map", "iprec_at_recall", *COUNTS)]
    needs_map = any(k == "gm_map" for k, _ in pairs) and "map" not in core
    core += ["map"] if needs_map else []
    specs = parse_metrics(core) if core else ()  # none: only bpref, iprec_at_recall or the counts
    graded = [m.key for m in specs if m.spec.needs_ideal]
    binary = [m.key for m in specs if not m.spec.needs_ideal]
    if binary:
        cols.update(evaluate_ranked(relevant.to(torch.float64), binary, n_relevant=r, mask=valid, empty="zero",
                                    reduce="none"))
    if graded:
        ideal = al.ideal_dense()
        cols.update(evaluate_ranked(gain, graded, n_relevant=(ideal > 0).sum(1), ideal=ideal, mask=valid,
                                    empty="zero", reduce="none"))
    counts = {"num_q": torch.ones(q, dtype=torch.float64), "num_ret": al.num_ret, "num_rel": r,
              "num_rel_ret": al.num_rel_ret, "num_nonrel_judged_ret": al.num_nonrel_judged_ret}
    cols.update({k: v.to(torch.float64) for k, v in counts.items()})
    if any(k == "bpref" for k, _ in pairs):
        cols["bpref"] = bpref(relevant, judged & ~relevant, r, _judged_nonrel(qrels, al))
    levels = [float(k.partition("@")[2]) for k, _ in pairs if k.startswith("iprec_at_recall@")]
    if levels:
        got = iprec_at_recall(relevant, r, levels, rule=iprec_rule)
        cols.update({f"iprec_at_recall@{x:g}": got[:, i] for i, x in enumerate(levels)})
    if "gm_map" in [k for k, _ in pairs]:
        cols["gm_map"] = cols["map"]
    keys = [k for k, _ in pairs]
    values = torch.stack([cols[k] for k in keys], 1) if keys else torch.zeros(q, 0, dtype=torch.float64)
    res = aggregate(values, keys, empty="zero", keep_per_query=True, ci=ci, seed=seed)
    summary = {k: res[k] for k in keys}
    for k in keys:
        if k in COUNTS:
            summary[k] = cols[k].sum()
        elif k == "gm_map":
            summary[k] = gm_map(cols[k])
    out = res.with_values(summary)
    for k in keys:  # an interval of the mean is not one of a sum or of a geometric mean
        if k in COUNTS or k == "gm_map":
            out.ci.pop(k, None)
    return TrecEvaluation(al.query_ids, tuple(pairs), values, out, run.tag)


def _judged_nonrel(qrels: Qrels, al: Aligned) -> Tensor:
    """Per evaluated query, its judged non-relevant documents in the qrels (0 <= rel < level)."""
    pos = {qid: i for i, qid in enumerate(al.query_ids)}
    to_eval = torch.tensor([pos.get(qid, -1) for qid in qrels.query_ids], dtype=torch.int64)
    eq = to_eval[qrels.query] if len(qrels.query_ids) else qrels.query
    keep = (eq >= 0) & (qrels.rel >= 0) & (qrels.rel < al.level)
    return torch.zeros(len(al.query_ids), dtype=torch.int64).index_add_(0, eq[keep], torch.ones_like(eq[keep]))
