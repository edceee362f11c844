"""The ``trec`` command: ``retrieval-metrics trec QRELS RUN [RUN ...]``, trec_eval's output.

One run prints trec_eval's lines (``measure<TAB>query<TAB>value``; ``-q`` per query too),
so that ``diff`` with trec_eval's output is empty for the measures supported here;
the known measures asked for that are not supported are named in one line on stderr.
``-m`` is read as trec_eval reads it: a measure takes the first parameters given for it,
``ndcg_cut.23.4`` is ndcg_cut_23; an unknown name (with a did-you-mean), ``P.5,5`` and
trec_eval's output names (``P_5``) are errors. Several runs, or ``--format`` with one,
print a table runs x measures (``--format markdown|latex|json``) where each cell
says which runs it beats: every run is compared with the first (the baseline) by a
paired test over the queries both runs have, Holm-corrected over the runs per measure,
at ``--alpha``; with ``--all-pairs`` every pair of runs is compared (as ranx's ``compare``),
the p-values adjusted over the pairs (``--correction holm|bonferroni|none``), or by
Tukey's HSD (``--correction tukey``: ranx's; ``tukey_paired``: on the two-way ANOVA,
which implies ``--all-pairs``), and the JSON table adds each pair's effect size and the
runs' letter groups.

Example:
    >>> expand_measures(["official"])[0][:4]
    ['num_q', 'num_ret', 'num_rel', 'num_rel_ret']
    >>> expand_measures(["map", "prefs_simp", "all_trec"])[1][:1]
    ['prefs_simp']
    >>> expand_measures(["official", "P.5", "P.10"])[0][-1]  # trec_eval: the first parameters given, anywhere
    'P.5'
    >>> measure_list("P.5,10,map,iprec_at_recall.1,.5,utility.2,-1,0")
    ['P.5,10', 'map', 'iprec_at_recall.1,.5', 'utility.2,-1,0']
    >>> measure_list("rbp.2=1,p=0.8,ndcg.1=3,-1=2,G")
    ['rbp.2=1,p=0.8', 'ndcg.1=3,-1=2', 'G']
    >>> measure_list("RBP(p=0.8,rel=2),P(rel=2)@5")
    ['RBP(p=0.8,rel=2)', 'P(rel=2)@5']
"""
from __future__ import annotations

import argparse
import json
import os
import re
import sys
from typing import Dict, List, Optional, Sequence, Tuple

import torch

from .. import compare_all, compare_many
from .io import CommandError
from ..trec import TrecEvaluation, evaluate_trec, read_qrels, read_run
from ..trec.align import DuplicateError
from ..trec.kernels import IPREC_RULES
from ..trec.zscores import ZScores, read_zscores
from ..trec.measures import SETS, TREC_EVAL_MEASURES, MeasureError, Unsupported, parse_one
from ..reporting.pairs import CORRECTION_CHOICES, correction_of, method_text, pair_records
from ..stats.allpairs import AllPairs
from ..stats.comparison import TESTS

__all__ = ["add_trec_parser", "cmd_trec", "expand_measures", "measure_list", "runs_table"]

DEFAULT = "official"
PROG = "retrieval-metrics trec"
INT64 = 2**63
FORMATS = ("markdown", "latex", "json")
LETTERS = "abcdefghijklmnopqrstuvwxyz"
TEST_TEXT = {"permutation": "permutation test", "paired_t": "t-test", "bootstrap": "bootstrap test"}


def first_parameters(names: Sequence[str]) -> Tuple[Dict[str, str], List[str]]:
    """trec_eval's rule for ``-m``: a measure takes the **first** parameter list given for it on
    the command line, wherever it is named (``-m P -m P.10`` and ``-m official -m P.10`` print
    ``P_10`` alone); returns ``({measure: parameters}, the names whose parameters are not used)``."""
    params: Dict[str, str] = {}
    unused: List[str] = []
    for name in names:
        base, dot, rest = name.partition(".")
        if dot and base in TREC_EVAL_MEASURES:
            if params.setdefault(base, rest) != rest:
                unused.append(name)
    return params, unused


def expand_measures(names: Sequence[str]) -> Tuple[List[str], List[str], bool]:
    """``(supported names, unsupported names, runid asked)``, read as trec_eval reads ``-m``: a set
    (``official``, ``all_trec``) is split into its members, a measure takes the first parameters
    given for it (:func:`first_parameters`). A wrong name (unknown, or malformed parameters such
    as ``P.5,5`` or trec_eval's output name ``P_5``) raises :class:`MeasureError`, naming them all."""
    params, _ = first_parameters(names)
    good: List[str] = []
    bad: List[str] = []
    wrong: List[str] = []
    runid = False
    for name in names:
        if name == "runid":
            runid = True
            continue
        members = list(SETS[name]) if name in SETS else [name]
        runid = runid or name in SETS
        for member in members:
            base = member.partition(".")[0]
            if base in params and base in TREC_EVAL_MEASURES:
                member = f"{base}.{params[base]}"
            try:
                parse_one(member, command_line=True)
            except MeasureError as err:
                wrong.append(str(err))
            except Unsupported:
                bad.append(member)
            else:
                good.append(member)
    if wrong:
        raise MeasureError("; ".join(dict.fromkeys(wrong)))
    return list(dict.fromkeys(good)), list(dict.fromkeys(bad)), runid


_PAIR = re.compile(r"[-+\w]+=[^()]*")  # a parameter pair (2=9, p=0.8), not a measure (ndcg.1=3, P(rel=2)@5)


def measure_list(text: str) -> List[str]:
    """Names separated by commas, a comma followed by a parameter (a number, or a ``name=value``
    pair) continuing the name before (``"P.5,10,map"`` -> ``["P.5,10", "map"]``, as trec_eval's
    ``-m P.5,10``)."""
    out: List[str] = []
    for part in _top_level_commas(text):
        if out and part and (part[0] in "0123456789.+" or part[:2].lstrip("-")[:1].isdigit()
                             or _PAIR.fullmatch(part)):  # a pair: 2=9, p=0.8
            out[-1] += "," + part
        elif part:
            out.append(part)
    return out


def _top_level_commas(text: str) -> List[str]:
    """``text`` split at the commas outside brackets (ir_measures' ``RBP(p=0.8,rel=2)`` stays whole)."""
    parts, depth, start = [], 0, 0
    for i, c in enumerate(text):
        depth += (c in "([{") - (c in ")]}")
        if c == "," and depth <= 0:
            parts.append(text[start:i])
            start = i + 1
    return parts + [text[start:]]


def add_trec_parser(sub, formatter) -> argparse.ArgumentParser:
    """The ``trec`` sub-command's parser (called by :func:`retrieval_core.cli.parser.build_parser`)."""
    p = sub.add_parser("trec", help="evaluate TREC runs against qrels, printing trec_eval's output",
                       description=__doc__.split("Example:")[0], formatter_class=formatter)
    p.add_argument("qrels", metavar="QRELS", help="qrels file (qid iter docid rel)")
    p.add_argument("runs", nargs="+", metavar="RUN", help="run file(s) (qid Q0 docid rank score tag)")
    p.add_argument("-m", dest="measures", action="append", type=measure_list, metavar="MEASURES",
                   help="measure names of trec_eval (map, P.5,10, ndcg_cut.10...), ir_measures (AP, nDCG@10...) "
                        "or this library, or a set (official, all_trec); repeat or separate by commas "
                        f"(default: {DEFAULT}, trec_eval's default)")
    p.add_argument("-q", dest="per_query", action="store_true", help="print each query's values too")
    p.add_argument("-c", dest="complete", action="store_true",
                   help="average over every qrels query, 0 where a run has none")
    p.add_argument("-M", dest="max_per_query", type=_count, metavar="N", help="keep the first N entries of each query")
    p.add_argument("-l", dest="level", type=_level, default=1, metavar="N", help="rel >= N is relevant")
    p.add_argument("-J", dest="judged_only", action="store_true",
                   help="remove the documents that are not judged (absent from the qrels, or a negative rel) from "
                        "each ranking before evaluation, as trec_eval -J")
    p.add_argument("-N", dest="num_docs", type=_number_of_docs, default=0, metavar="N",
                   help="number of documents in the collection (utility's d term; trec_eval's default 0)")
    p.add_argument("-R", dest="rel_format", type=_rel_format, default="qrels", metavar="FORMAT",
                   help="format of QRELS: qrels (trec_eval's prefs, qrels_prefs and qrels_jg are not supported)")
    p.add_argument("-Z", dest="zscores", metavar="FILE",
                   help="print each value as a z-score against the means and stddevs in FILE "
                        "(lines: qid measure mean stddev), the summary formed from them")
    p.add_argument("--iprec-rule", choices=IPREC_RULES, default="lround",
                   help="relevant documents needed at recall x in iprec_at_recall and 11pt_avg: lround(x R) as "
                        "trec_eval 10, or v9: floor(x R + 0.9) as trec_eval 9 and pytrec_eval")
    p.add_argument("--format", choices=FORMATS,
                   help="a table of the runs' summaries (several runs: markdown unless said; one run: trec_eval's "
                        "lines unless said)")
    p.add_argument("--alpha", type=float, default=0.05, help="level of the paired tests of several runs")
    p.add_argument("--seed", type=int, default=0, help="seed of the permutation tests")
    p.add_argument("--test", choices=TESTS, default="permutation",
                   help="the paired test of several runs (not used by Tukey's HSD)")
    p.add_argument("--all-pairs", action="store_true",
                   help="several runs: compare every pair of runs, not each run with the first")
    p.add_argument("--correction", choices=CORRECTION_CHOICES, default="holm",
                   help="multiple comparisons: adjust the paired tests' p-values (holm, bonferroni, none) or use "
                        "Tukey's HSD over all pairs (tukey: as ranx, runs as independent samples; tukey_paired: "
                        "two-way ANOVA over queries and runs)")
    return p


def _level(text: str) -> int:
    """``-l``: ASCII digits that an int64 holds, not negative (trec_eval's ``atol`` would read ``2x`` and
    ``1_0`` as 2 and 1, a full-width digit as 0, and clamp a larger number; below 0 trec_eval counts
    the documents outside the qrels as relevant, its map going beyond 1)."""
    digits = text.strip()
    digits = digits[1:] if digits[:1] == "+" else digits
    if not (digits.isascii() and digits.isdigit()) or len(digits) > 19 or int(digits) >= INT64:
        raise argparse.ArgumentTypeError(f"expected an integer from 0 to 2**63 - 1; got {text!r}")
    return int(digits)


def _number_of_docs(text: str) -> int:
    """``-N``: an integer that a C long holds (trec_eval reads it with ``atol``; junk is refused here)."""
    digits = text.strip()
    body = digits[1:] if digits[:1] in "+-" else digits
    if not (body.isascii() and body.isdigit()) or len(body) > 19 or not -INT64 <= int(digits) < INT64:
        raise argparse.ArgumentTypeError(f"expected an integer from -2**63 to 2**63 - 1; got {text!r}")
    return int(digits)


def _rel_format(text: str) -> str:
    """``-R``: trec_eval's rel_info formats; only ``qrels`` is read here."""
    if text in ("prefs", "qrels_prefs", "qrels_jg"):
        raise argparse.ArgumentTypeError(f"trec_eval's rel_info_format {text!r} (preference judgements) is not "
                                         "supported: only 'qrels'")
    if text != "qrels":
        raise argparse.ArgumentTypeError(f"unknown rel_info_format {text!r} (trec_eval's are qrels, prefs, "
                                         "qrels_prefs, qrels_jg; only qrels is supported)")
    return text


def _count(text: str) -> int:
    """``-M``: a non-negative integer; beyond int64 it keeps every entry, as trec_eval's clamped ``atol``."""
    if not (text.isascii() and text.isdigit()):
        raise argparse.ArgumentTypeError(f"expected a non-negative integer; got {text!r}")
    return min(int(text) if len(text) < 30 else INT64, INT64 - 1)


def _write(text: str) -> None:
    """``text`` on stdout as the bytes read (ids are decoded with surrogateescape): trec_eval
    prints a Latin-1 query id as it read it, whatever the terminal's encoding."""
    sys.stdout.flush()
    buffer = getattr(sys.stdout, "buffer", None)
    if buffer is None:  # a text-only stream (tests, notebooks)
        sys.stdout.write(text)
    else:
        buffer.write(text.encode("utf-8", "surrogateescape"))
        buffer.flush()


def _evaluate(qrels, path: str, good: List[str], args: argparse.Namespace,
              zscores: Optional[ZScores] = None) -> TrecEvaluation:
    run = read_run(path, docs=qrels.docs, duplicates=True)  # trec_eval refuses only the duplicates it evaluates
    try:
        return evaluate_trec(qrels, run, good, level=args.level, max_per_query=args.max_per_query,
                             complete=args.complete, iprec_rule=args.iprec_rule, num_docs=args.num_docs,
                             judged_only=args.judged_only, zscores=zscores)
    except DuplicateError as err:
        raise DuplicateError(f"{args.qrels if err.source == 'qrels' else path}: {err}") from None


def cmd_trec(args: argparse.Namespace) -> int:
    """Run the command (see the module doc)."""
    names = [n for group in (args.measures or [[DEFAULT]]) for n in group]
    try:
        good, bad, runid = expand_measures(names)
    except MeasureError as err:
        raise CommandError(f"-m: {err}") from None
    for name in first_parameters(names)[1]:
        print(f"{PROG}: {name} not used: trec_eval takes the first parameters given for a measure",
              file=sys.stderr)
    if bad:
        print(f"{PROG}: unsupported measures, not printed: {', '.join(bad)}", file=sys.stderr)
    if not good and not (runid and len(args.runs) == 1):
        raise ValueError("none of the measures asked for is supported")
    if not 0 < args.alpha < 1:
        raise ValueError(f"--alpha must be in (0, 1); got {args.alpha}")
    table = args.format is not None or len(args.runs) > 1
    if table and args.per_query:
        raise CommandError("-q prints one run's lines per query as trec_eval does; a table (--format, or several "
                           "runs) holds the summaries: drop -q or --format")
    if table and not good:
        raise CommandError("-m runid alone prints the run's tag, not a table: drop --format")
    qrels = read_qrels(args.qrels, duplicates=True)
    if not good:  # -m runid alone: the run's tag
        _write(f"{'runid':<22}\tall\t{read_run(args.runs[0], docs=qrels.docs, duplicates=True).tag}\n")
        return 0
    zscores = read_zscores(args.zscores) if getattr(args, "zscores", None) else None
    evals = [_evaluate(qrels, path, good, args, zscores) for path in args.runs]
    if not table:
        _write("".join(line + "\n" for line in evals[0].lines(per_query=args.per_query, runid=runid)))
        return 0
    names = _run_names(args.runs)
    _write(runs_table(dict(zip(names, evals)), fmt=args.format or "markdown", alpha=args.alpha, seed=args.seed,
                      test=args.test, correction=correction_of(args.correction), all_pairs=args.all_pairs) + "\n")
    return 0


def _is_count(measure: str) -> bool:
    """trec_eval's counts and ir_measures' (``NumRet(rel=2)``): summed, printed as integers, not tested."""
    return measure.startswith(("num_", "NumQ", "NumRet", "NumRel"))


def _run_names(paths: Sequence[str]) -> List[str]:
    names = [os.path.basename(p) for p in paths]
    if len(set(names)) < len(names):
        names = list(paths) if len(set(paths)) == len(paths) else [f"{p}#{i + 1}" for i, p in enumerate(paths)]
    return names


def _aligned(evals: Dict[str, TrecEvaluation], j: int) -> Dict[str, torch.Tensor]:
    """Each run's values of measure ``j`` over the queries every run has, in the first run's order."""
    base = next(iter(evals.values()))
    common = set(base.query_ids)
    for ev in evals.values():
        common &= set(ev.query_ids)
    order = [q for q in base.query_ids if q in common]
    out = {}
    for name, ev in evals.items():
        pos = {q: i for i, q in enumerate(ev.query_ids)}
        out[name] = ev.values[torch.tensor([pos[q] for q in order], dtype=torch.long), j]
    return out


def _tests(evals: Dict[str, TrecEvaluation], alpha: float, seed: int, test: str = "permutation",
           correction: Optional[str] = "holm") -> Dict[str, Dict[str, Dict[str, float]]]:
    """``{measure: {run: {"p_value", "mean_difference", "n"}}}`` of each run against the first."""
    names = list(evals)
    out: Dict[str, Dict[str, Dict[str, float]]] = {}
    for j, (_, measure) in enumerate(evals[names[0]].measures):
        systems = _aligned(evals, j)
        if _is_count(measure) or measure in evals[names[0]].texts or systems[names[0]].numel() < 2:
            continue  # counts: no test; relstring: a string
        got = compare_many(systems, baseline=names[0], seed=seed, test=test, correction=correction)
        out[measure] = {name: {"p_value": c.p_value, "mean_difference": c.mean_difference, "n": c.n,
                               "significant": bool(c.p_value < alpha)} for name, c in got.items()}
    return out


def _all_pairs(evals: Dict[str, TrecEvaluation], alpha: float, seed: int, test: str,
               correction: Optional[str]) -> Dict[str, AllPairs]:
    """``{measure: AllPairs}`` of every pair of runs (the queries every run has)."""
    out: Dict[str, AllPairs] = {}
    names = list(evals)
    for j, (_, measure) in enumerate(evals[names[0]].measures):
        systems = _aligned(evals, j)
        if measure.startswith("num_") or measure in evals[names[0]].texts or systems[names[0]].numel() < 2:
            continue  # counts: no test; relstring: a string
        out[measure] = compare_all(systems, method=correction, test=test, alpha=alpha, seed=seed)
    return out


def _beats(evals, alpha, seed, test, correction, all_pairs) -> Tuple[Dict[Tuple[str, str], List[str]], dict]:
    """``({(run, measure): letters of the runs it beats}, the JSON's test records)``."""
    names = list(evals)
    beats: Dict[Tuple[str, str], List[str]] = {}
    if all_pairs:
        pairs = _all_pairs(evals, alpha, seed, test, correction)
        for measure, result in pairs.items():
            for name, losers in result.better.items():
                if losers:
                    beats[(name, measure)] = [LETTERS[names.index(n)] for n in losers]
        return beats, {"tests": {m: pair_records(r) for m, r in pairs.items()},
                       "groups": {m: r.groups for m, r in pairs.items()}}
    tests = _tests(evals, alpha, seed, test, correction)
    for measure, by_run in tests.items():
        for name, t in by_run.items():
            if t["significant"]:
                winner, loser = (name, names[0]) if t["mean_difference"] > 0 else (names[0], name)
                beats.setdefault((winner, measure), []).append(LETTERS[names.index(loser)])
    return beats, {"tests": tests}


def _note(alpha: float, test: str, correction: Optional[str], all_pairs: bool) -> str:
    if not all_pairs:
        how = {"holm": "Holm-corrected", "bonferroni": "Bonferroni-corrected", None: "not corrected"}[correction]
        return (f"x^a: better than run (a) by a paired {TEST_TEXT[test]} against the baseline (a), {how} over the "
                f"runs, p < {alpha}")
    return f"x^b: better than run (b) over every pair of runs by {method_text(correction, test)}, p < {alpha}"


def runs_table(evals: Dict[str, TrecEvaluation], *, fmt: str = "markdown", alpha: float = 0.05,
               seed: int = 0, test: str = "permutation", correction: Optional[str] = "holm",
               all_pairs: bool = False) -> str:
    """The table of several runs' summaries; a cell lists the letters of the runs it beats
    (paired ``test`` against the first run, p-values adjusted by ``correction``, at ``alpha``;
    ``all_pairs``: every pair of runs, by :func:`~retrieval_core.stats.allpairs.compare_all`
    with ``method=correction``; Tukey's methods imply it)."""
    names = list(evals)
    if len(names) > len(LETTERS):
        raise ValueError(f"at most {len(LETTERS)} runs in one table; got {len(names)}")
    all_pairs = all_pairs or correction in ("tukey", "tukey_paired")
    beats, records = (_beats(evals, alpha, seed, test, correction, all_pairs) if len(names) > 1
                      else ({}, {"tests": {}}))  # one run: its summary, nothing to test
    measures = [m for _, m in evals[names[0]].measures if m not in evals[names[0]].texts]
    values = {name: ev.summary() for name, ev in evals.items()}
    if fmt == "json":
        head = {"runs": names, "baseline": names[0], "alpha": alpha, "measures": measures, "values": values}
        if all_pairs:
            used = None if correction in ("tukey", "tukey_paired") else test
            head = {"runs": names, "comparison": "all pairs", "method": correction, "test": used, "alpha": alpha,
                    "measures": measures, "values": values}
        return json.dumps({**head, **records,
                           "beats": {n: {m: beats.get((n, m), []) for m in measures} for n in names}}, indent=2)
    rows = []
    for i, name in enumerate(names):
        cells = []
        for m in measures:
            v = values[name][m]
            text = str(int(round(v))) if _is_count(m) else f"{v:.4f}"
            mark = "".join(sorted(beats.get((name, m), [])))
            cells.append(text + (f"^{mark}" if mark and fmt == "markdown" else
                                 f"$^{{{mark}}}$" if mark else ""))
        rows.append([f"({LETTERS[i]}) {name}"] + cells)
    header = ["run"] + measures
    note = _note(alpha, test, correction, all_pairs)
    if fmt == "latex":
        esc = [h.replace("_", r"\_") for h in header]
        lines = [r"\begin{tabular}{l" + "r" * len(measures) + "}", " & ".join(esc) + r" \\", r"\hline"]
        lines += [" & ".join(c.replace("_", r"\_") for c in row) + r" \\" for row in rows]
        return "\n".join(lines + [r"\end{tabular}"] + (["% " + note] if len(names) > 1 else []))
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines + (["", note] if len(names) > 1 else []))
