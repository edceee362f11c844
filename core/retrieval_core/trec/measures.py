"""Measure names of trec_eval, ir_measures and this library, parsed to one canonical key.

``parse_measures(names)`` returns ``(canonical key, trec_eval output name)`` pairs, the
output name being None where trec_eval has no such measure (``mrr@10``); an unsupported
name raises, listing every one of them (``split_measures`` returns them instead).

* trec_eval: ``map``, ``P_5`` / ``P.5`` / ``P.5,10`` / ``P`` (its default cutoffs), ``recall``,
  ``ndcg``, ``ndcg_cut``, ``map_cut``, ``success``, ``recip_rank``, ``Rprec``, ``bpref``,
  ``gm_map``, ``num_q``, ``num_ret``, ``num_rel``, ``num_rel_ret``, ``num_nonrel_judged_ret``,
  ``iprec_at_recall_0.10``, ``infAP``, ``gm_bpref``, ``binG``, ``G``, ``ideal_dcg``, ``ndcg_rel``, ``Rndcg``,
  ``rbp``, ``rbp_resid``, gain tables (``ndcg.1=3,2=9``: ``G``, ``dcg``, ``ideal_dcg``, ``ndcg``,
  ``ndcg_rel``, ``Rndcg``, ``rbp``) and ``p`` (``rbp.p=0.8``, ``rbp_resid.p=0.8``), and the sets
  ``official`` and ``all_trec`` (also written ``-m official``).
  ``runid`` is the run's tag (:attr:`Run.tag`), not a measure: the sets leave it out and the
  name alone is refused.
* ir_measures (its language: :mod:`retrieval_core.trec.ir_measures_names`): ``AP``, ``AP@10``,
  ``P@5``, ``R@100``, ``nDCG``, ``nDCG@10``, ``nDCG(dcg='exp-log2')@10``, ``RR``, ``RR@10``,
  ``Rprec``, ``Success@1``, ``Bpref``, ``NumQ``, ``NumRet``, ``NumRel``, ``NumRelRet``,
  ``IPrec@0.1``, ``Judged@10``, ``ERR@20``, ``Compat(p=0.8)``, ``RBP(p=0.8,rel=2)``, ``SetP``,
  ``SetR``, ``SetF``, ``SetAP``, ``infAP``; a measure's own ``rel=`` / ``judged_only=``
  (``P(rel=2)@5``) makes a key with options (:func:`with_options`).
* ours: every key :func:`retrieval_core.parse_metrics` accepts, and the keys only
  :func:`retrieval_core.trec.evaluate_trec` computes: ``bpref``, ``gm_map``, ``num_q``, ``num_ret``, ``num_rel``,
  ``num_rel_ret``, ``num_nonrel_judged_ret``, ``iprec_at_recall@x``.

Example:
    >>> parse_measures(["P_5", "P@5", "precision@10", "recip_rank", "AP@10"])
    [('precision@5', 'P_5'), ('precision@10', 'P_10'), ('mrr', 'recip_rank'), ('map@10', 'map_cut_10')]
    >>> parse_measures("iprec_at_recall..1")
    [('iprec_at_recall@0.1', 'iprec_at_recall_0.10')]
    >>> split_measures(["ndcg_cut.5,10", "prefs_simp", "alpha_nDCG@20", "INST"])
    ([('ndcg@5', 'ndcg_cut_5'), ('ndcg@10', 'ndcg_cut_10')], ['prefs_simp', 'alpha_nDCG@20', 'INST'])
    >>> parse_measures(["ndcg.1=3,2=9", "rbp.p=0.8", "infAP"])
    [('ndcg.1=3,2=9', 'ndcg_1=3,2=9'), ('rbp.p=0.8', 'rbp_p=0.8'), ('infAP', 'infAP')]
"""
from __future__ import annotations

import difflib
import re
from typing import Iterable, List, Optional, Tuple, Union

from retrieval_core import parse_metrics
from retrieval_core.metrics.spec import ALIASES, REGISTRY

from . import set_measures
from .gain_measures import GAIN_KEYS
from .gains import GAIN_MEASURES, P_MEASURES, parse_gain_params
from .ir_measures_names import ALIASES as IR_ALIASES
from .ir_measures_names import NOT_COMPUTED, SIGNATURES, IrMeasure, LanguageError, NotComputed, read_ir_measure

__all__ = ["parse_measures", "parse_one", "split_measures", "split_options", "with_options", "MeasureError",
           "Unsupported", "CUTOFFS", "NEW_KEYS", "SETS", "TREC_EVAL_MEASURES"]

# trec_eval's default cutoffs (m_P.c, m_recall.c, m_ndcg_cut.c, m_map_cut.c, m_success.c, m_iprec_at_recall.c)
CUTOFFS = (5, 10, 15, 20, 30, 100, 200, 500, 1000)
SUCCESS_CUTOFFS = (1, 5, 10)
RECALL_LEVELS = tuple(i / 10 for i in range(11))

# trec_eval names of whole-list measures -> canonical key: the metrics' specifications
# (Names.trec_eval), then the measures that evaluate_trec computes itself
PLAIN = {spec.names.trec_eval[0]: name for name, spec in REGISTRY.items() if spec.names.trec_eval[0]}
PLAIN.update({"bpref": "bpref", "gm_map": "gm_map", "num_q": "num_q", "num_ret": "num_ret", "num_rel": "num_rel",
              "num_rel_ret": "num_rel_ret", "num_nonrel_judged_ret": "num_nonrel_judged_ret"})
GAIN_ONLY = tuple(k for k in GAIN_KEYS if k not in ("dcg", "ndcg")) + ("gm_bpref",)
PLAIN.update({name: name for name in GAIN_ONLY})  # gain_measures.py; gm_bpref: bpref's geometric mean
# trec_eval measures with integer cutoffs: name -> (our key's name, default cutoffs)
CUT = {trec: (name, SUCCESS_CUTOFFS if trec == "success" else CUTOFFS)
       for name, spec in REGISTRY.items() for trec in spec.names.trec_eval[1:] if trec}
# keys that evaluate_trec computes itself, not the core (docs/trec.md)
NEW_KEYS = ("bpref", "gm_map", "num_q", "num_ret", "num_rel", "num_rel_ret", "num_nonrel_judged_ret",
            "iprec_at_recall")
NEW_KEYS += GAIN_ONLY
# trec_eval's measure sets (measures.c); runid left out (not a measure)
SETS = {
    "official": ("num_q", "num_ret", "num_rel", "num_rel_ret", "map", "gm_map", "Rprec", "bpref", "recip_rank",
                 "iprec_at_recall", "P"),
    "all_trec": ("num_q", "num_ret", "num_rel", "num_rel_ret", "map", "gm_map", "Rprec", "bpref", "recip_rank",
                 "iprec_at_recall", "P", "relstring", "recall", "unj", "rbp", "rbp_resid", "infAP", "gm_bpref",
                 "utility", "11pt_avg", "ndcg", "relative_P", "Rprec_mult", "success", "map_cut", "ndcg_cut",
                 "ndcg_rel", "Rndcg", "binG", "G", "set_P", "set_recall", "set_relative_P", "set_map", "set_F",
                 "num_nonrel_judged_ret"),
    "set": ("num_q", "num_ret", "num_rel", "num_rel_ret", "utility", "set_P", "set_recall", "set_relative_P",
            "set_map", "set_F"),
}
# every measure of trec_eval 10.0 (its measures.c table, in its output order), its sets, and the
# measures that take parameters (their init_meas reads them; the others ignore them)
TREC_EVAL_MEASURES = (
    "runid", "num_q", "num_ret", "num_rel", "num_rel_ret", "map", "gm_map", "Rprec", "bpref", "recip_rank",
    "iprec_at_recall", "P", "relstring", "recall", "infAP", "gm_bpref", "Rprec_mult", "utility", "11pt_avg", "binG",
    "G", "dcg", "ideal_dcg", "ndcg", "ndcg_rel", "Rndcg", "ndcg_cut", "map_cut", "relative_P", "success", "set_P",
    "set_relative_P", "set_recall", "set_map", "set_F", "num_nonrel_judged_ret", "prefs_num_prefs_poss",
    "prefs_num_prefs_ful", "prefs_num_prefs_ful_ret", "prefs_simp", "prefs_pair", "prefs_avgjg",
    "prefs_avgjg_Rnonrel", "prefs_simp_ret", "prefs_pair_ret", "prefs_avgjg_ret", "prefs_avgjg_Rnonrel_ret",
    "prefs_simp_imp", "prefs_pair_imp", "prefs_avgjg_imp", "map_avgjg", "P_avgjg", "Rprec_mult_avgjg", "yaap",
    "rbp", "rbp_resid", "unj")
TREC_EVAL_SETS = ("official", "set", "all_trec", "all_prefs", "prefs", "qrels_jg")
TAKES_PARAMETERS = ("iprec_at_recall", "P", "relstring", "recall", "Rprec_mult", "utility", "11pt_avg", "G", "dcg",
                    "ideal_dcg", "ndcg", "ndcg_rel", "Rndcg", "ndcg_cut", "map_cut", "relative_P", "success",
                    "set_F", "P_avgjg", "Rprec_mult_avgjg", "rbp", "rbp_resid", "unj")
# ir_measures' names computed here (its aliases included), and its other measures (refused with the reason):
# ir_measures_names.py reads its language
IR_MEASURES = tuple(SIGNATURES) + tuple(IR_ALIASES)
IR_MEASURES_OTHER = tuple(NOT_COMPUTED)

_CUT_TEXT = re.compile(r"\+?([0-9]+)(?:\.[0-9]*)?")  # trec_eval's atol reads "23.4" as 23, "+5" as 5
_DIGITS = re.compile(r"([0-9]+)")
_FLOAT = re.compile(r"\+?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")  # as C's atof: "1e-1", "+.5"
_OUTPUT = re.compile(r"(?P<base>P|recall|ndcg_cut|map_cut|success|iprec_at_recall|relative_P|unj|Rprec_mult)_"
                     r"(?P<params>[0-9.]+)")
INT64_MAX = 2**63 - 1

Pair = Tuple[str, Optional[str]]


class Unsupported(ValueError):
    """A name no table here computes; ``reason`` says why when known."""


class MeasureError(Unsupported):
    """A wrong name, not merely an unsupported one: nobody's measure (the message has a
    did-you-mean), or a known measure with malformed parameters (``P.5,5``, ``P.abc``, ``map.5``)."""


def _cutoff(text: str, name: str, *, trec: bool = False) -> int:
    """A positive cutoff that an int64 holds; ``trec``: read as trec_eval's ``atol`` reads it, a
    fractional part dropped (``23.4`` is 23, trec_eval's own test ``out.test.meas_params``)."""
    m = (_CUT_TEXT if trec else _DIGITS).fullmatch(text)
    digits = m[1].lstrip("0") if m else ""
    if not digits:
        raise MeasureError(f"{name!r}: a cutoff must be a positive integer; got {text!r}")
    if len(digits) > 19 or int(digits) > INT64_MAX:
        raise MeasureError(f"{name!r}: a cutoff must be at most 2**63 - 1; got {text}")
    return int(digits)


def _level(text: str, name: str) -> float:
    if not _FLOAT.fullmatch(text) or not 0.0 <= float(text) <= 1.0:
        raise MeasureError(f"{name!r}: a recall level must be a number in [0, 1]; got {text!r}")
    return float(text)


def _iprec(x: float) -> Pair:
    return f"iprec_at_recall@{x:g}", f"iprec_at_recall_{x:.2f}"


def _params(params: str, name: str, parse) -> list:
    """trec_eval's parameter list ``"5,10"``: parsed, refused when empty or repeated (as trec_eval)."""
    values = [parse(p, name) for p in params.split(",")]
    if len(set(values)) < len(values):
        raise MeasureError(f"{name!r}: a parameter is given twice (trec_eval: 'duplicate cutoffs detected')")
    return values


def _trec(base: str, params: Optional[str], name: str) -> List[Pair]:
    """Pairs of a trec_eval base name with parameters ``params`` ("5", "5,10", ".10,.20"; None = defaults)."""
    if params == "":
        raise MeasureError(f"{name!r}: no parameter after '.' (trec_eval: 'improper measure')")
    if base in SETS or base in TREC_EVAL_SETS:
        if params is not None:
            raise MeasureError(f"{name!r}: the set {base} takes no parameter")
        if base not in SETS:
            raise Unsupported(f"{name!r}: trec_eval's set {base} is not supported")
        out: List[Pair] = []
        for member in SETS[base]:
            out.extend(_trec(member, None, base))  # raises for the set's unsupported members
        return out
    if base in PLAIN and params is None:
        return [(PLAIN[base], base)]
    if base in GAIN_MEASURES + P_MEASURES:
        return [_gain_pair(base, params, name)]
    if base in CUT:
        ours, defaults = CUT[base]
        ks = defaults if params is None else sorted(_params(params, name, lambda p, n: _cutoff(p, n, trec=True)))
        return [(f"{ours}@{k}", f"{base}_{k}") for k in ks]
    if base == "iprec_at_recall":
        return [_iprec(x) for x in (RECALL_LEVELS if params is None else sorted(_params(params, name, _level)))]
    if base in set_measures.MEASURES:  # set_P, relative_P, Rprec_mult, 11pt_avg, utility, unj, relstring...
        try:
            return set_measures.pairs(base, params, name)
        except ValueError as err:
            raise MeasureError(str(err)) from None
    if params is not None and base not in TAKES_PARAMETERS:
        raise MeasureError(f"{name!r}: trec_eval's {base} takes no parameter (trec_eval ignores it; refused here)")
    if base in TREC_EVAL_MEASURES:
        raise Unsupported(name if params is None else f"{name!r}: trec_eval's {base} with parameters is not "
                                                      "supported")
    raise Unsupported(name)


def _gain_pair(base: str, params: str, name: str) -> Pair:
    """A measure with a gain table or p (``ndcg.1=3,2=9``, ``rbp.p=0.8``): key ``base.params``, printed
    ``base_params`` as trec_eval prints it."""
    try:
        parse_gain_params(base, params)
    except ValueError as err:
        raise MeasureError(f"{name!r}: {err}") from None
    return f"{base}.{params}", f"{base}_{params}"


def _from_trec(name: str, command_line: bool = False) -> Optional[List[Pair]]:
    """trec_eval's syntax: ``base.params`` (split at the first '.', as trec_eval), or, outside the
    command line, its output names (``P_5``, ``iprec_at_recall_0.10``)."""
    text = name[2:].strip() if name.startswith("-m") and not command_line else name
    base, dot, params = text.partition(".")
    if base in TREC_EVAL_MEASURES or base in TREC_EVAL_SETS or base in SETS:
        return _trec(base, params if dot else None, name)
    m = _OUTPUT.fullmatch(text)
    if m and command_line:
        raise MeasureError(f"{name!r} is trec_eval's output name: write {m['base']}.{m['params']} "
                           f"(trec_eval refuses {name} too)")
    if m:
        return _trec(m["base"], m["params"], name)
    return None


def with_options(key: str, rel: Optional[int] = None, judged_only: Optional[bool] = None) -> str:
    """``key`` with a measure's own relevance level and judged-only choice (ir_measures' ``rel=``,
    ``judged_only=``), which override ``evaluate_trec``'s ``level`` and ``judged_only`` for it.

    Example:
        >>> with_options("precision@5", rel=2), split_options("precision@5|rel=2|judged_only=True")
        ('precision@5|rel=2', ('precision@5', 2, True))
    """
    options = ([f"rel={rel}"] if rel is not None else []) + (
        [f"judged_only={judged_only}"] if judged_only is not None else [])
    return "|".join([key] + options)


def split_options(key: str) -> Tuple[str, Optional[int], Optional[bool]]:
    """``(key, rel, judged_only)`` of a key made by :func:`with_options` (None: not given)."""
    base, *options = key.split("|")
    found = dict(o.partition("=")[::2] for o in options)
    judged = found.get("judged_only")
    return base, int(found["rel"]) if "rel" in found else None, None if judged is None else judged == "True"


def _from_ir_measures(name: str) -> Optional[List[Pair]]:
    """ir_measures' language (:mod:`retrieval_core.trec.ir_measures_names`): a measure with its own
    ``rel=`` / ``judged_only=`` is a key with options (:func:`with_options`) printed under its
    ir_measures spelling (``P(rel=2)@5``)."""
    try:
        m = read_ir_measure(name)
    except LanguageError as err:
        raise MeasureError(str(err)) from None
    except NotComputed as err:
        raise Unsupported(str(err)) from None
    if m is None:
        return None
    pairs = _ir_pairs(m, name)
    rel, judged = m.params.get("rel"), m.params.get("judged_only")
    if rel is None and judged is None:
        return pairs
    return [(with_options(key, rel, judged), m.spelling) for key, _ in pairs]


def _ir_cut(m: IrMeasure, name: str, base: str) -> List[Pair]:
    """ir_measures' measure with an optional cutoff, as trec_eval's ``base`` or ``base``_cut."""
    cut = m.params.get("cutoff")
    return _trec(base + ("_cut" if base in ("map", "ndcg") else ""), str(cut), name) if cut else _trec(base, None, name)


def _ir_pairs(m: IrMeasure, name: str) -> List[Pair]:
    """The pairs of an ir_measures measure, its ``rel`` / ``judged_only`` left to the caller."""
    p, cut = m.params, m.params.get("cutoff")
    simple = {"Rprec": "Rprec", "Bpref": "bpref", "NumQ": "num_q", "NumRel": "num_rel", "NumRelRet": "num_rel_ret",
              "infAP": "infAP", "SetR": "set_recall", "SetAP": "set_map"}
    if m.measure in simple:
        return _trec(simple[m.measure], None, name)
    if m.measure in ("P", "R", "Success"):
        return _trec({"P": "P", "R": "recall", "Success": "success"}[m.measure], str(cut), name)
    if m.measure == "AP":
        return _ir_cut(m, name, "map")
    if m.measure == "nDCG":
        return _ir_ndcg(m, name)
    if m.measure == "RR":
        return [(f"mrr@{cut}", None)] if cut else _trec("recip_rank", None, name)
    if m.measure == "NumRet":
        return _trec("num_rel_ret" if "rel" in p else "num_ret", None, name)
    if m.measure == "IPrec":
        return [_iprec(float(p["recall"]))]
    if m.measure in ("SetP", "SetRelP"):
        return _trec("set_relative_P" if p.get("relative", m.measure == "SetRelP") else "set_P", None, name)
    if m.measure == "SetF":
        beta = float(p.get("beta", 1.0))
        return _trec("set_F", None if beta == 1.0 else repr(beta), name)
    if m.measure == "Judged":
        return [(f"judged@{cut}" if cut else "judged", m.spelling)]
    if m.measure == "ERR":
        return [(f"gdeval_err@{cut}" if cut else "gdeval_err", m.spelling)]
    if m.measure == "Compat":
        kind = "compat" if p.get("normalize", True) else "compat_unnormalized"
        return [(f"{kind}@{float(p.get('p', 0.95))!r}", m.spelling)]
    return _ir_rbp(m, name)


def _ir_ndcg(m: IrMeasure, name: str) -> List[Pair]:
    """nDCG: trec_eval's ``ndcg`` / ``ndcg_cut`` (``dcg='log2'``, its default), a gain table as
    trec_eval's ``ndcg.0=1,2=3``, and ``dcg='exp-log2'`` as this library's ``ndcg_exp``."""
    cut = m.params.get("cutoff")
    if m.params.get("dcg") == "exp-log2":
        if "gains" in m.params:
            raise Unsupported(f"{name!r}: nDCG with both dcg='exp-log2' and gains= is not supported")
        return [(f"ndcg_exp@{cut}" if cut else "ndcg_exp", None)]
    if "gains" in m.params:
        if cut:
            raise Unsupported(f"{name!r}: nDCG with gains= and a cutoff: trec_eval's ndcg_cut takes no gain table")
        return _trec("ndcg", ",".join(f"{k}={g}" for k, g in sorted(m.params["gains"].items())), name)
    return _ir_cut(m, name, "ndcg")


def _ir_rbp(m: IrMeasure, name: str) -> List[Pair]:
    """RBP: with ``rel=``, binary gains at that level (ir_measures' cwl_eval provider): this
    library's ``rbp@p``; without, graded gains (ir_measures computes none): trec_eval's
    ``rbp.p=``. ir_measures' default persistence is 0.8 (trec_eval's 0.9)."""
    p = float(m.params.get("p", 0.8))
    if "cutoff" in m.params:
        raise Unsupported(f"{name!r}: RBP with a cutoff is computed by no provider of ir_measures, nor here")
    if "rel" not in m.params:
        return _trec("rbp", f"p={p!r}", name)
    if p >= 1.0:
        raise MeasureError(f"{name!r}: RBP's p must be below 1 here (rbp@p: (1 - p) sum p^(i-1) rel_i)")
    return [(f"rbp@{p!r}", None)]


_TREC_NAME = {ours: trec for trec, (ours, _) in CUT.items()}
_PLAIN_NAME = {v: k for k, v in PLAIN.items()}


def _from_ours(name: str) -> Optional[List[Pair]]:
    base, sep, arg = name.partition("@")
    if base in set_measures.MEASURES:  # their keys: relative_P@5, utility@2.0,-1.0,0.0,0.0
        return _trec(base, arg if sep else None, name)
    if base in NEW_KEYS and not (sep and base in REGISTRY):  # rbp@0.8: this library's rbp, not trec_eval's
        if base == "iprec_at_recall":
            if not sep:
                raise MeasureError(f"{name!r}: iprec_at_recall needs a recall level, e.g. iprec_at_recall@0.1")
            return [_iprec(_level(arg, name))]
        if sep:
            raise MeasureError(f"{name!r}: {base} takes no cutoff")
        return [(base, base)]
    try:
        (key,) = parse_metrics([name])
    except ValueError as err:
        inner = base.rpartition(":")[2]  # erc:ndcg@10 -> ndcg
        if inner in REGISTRY or inner in ALIASES:
            raise MeasureError(f"{name!r}: {err}") from None  # our metric, a wrong cutoff
        return None
    cutoff = key.cutoff
    if key.confidence is None and key.spec.per_query:
        spec = key.spec.name
        name = spec + (f"@{arg}" if sep else "")  # an alias (cmc@1) under its canonical name (hit_rate@1)
        if cutoff is None and not sep and spec in _PLAIN_NAME:
            return [(name, _PLAIN_NAME[spec])]
        if spec == "r_precision":
            return [(name, "Rprec")]
        if isinstance(cutoff, int) and spec in _TREC_NAME:
            return [(name, f"{_TREC_NAME[spec]}_{cutoff}")]
    return [(name, None)]


def _did_you_mean(name: str) -> str:
    """``" Did you mean ndcg_cut.10?"`` when the name before its parameters is close to a known one."""
    base = re.split(r"[.@(]", name, maxsplit=1)[0]
    known = list(TREC_EVAL_MEASURES) + list(TREC_EVAL_SETS) + list(IR_MEASURES) + list(IR_MEASURES_OTHER)
    known += list(REGISTRY) + list(ALIASES) + list(NEW_KEYS)
    close = difflib.get_close_matches(base, list(dict.fromkeys(known)), n=3, cutoff=0.6)
    rest = name[len(base):]
    return f" Did you mean {' or '.join(c + rest for c in close)}?" if close else ""


def parse_one(name: str, *, command_line: bool = False) -> List[Pair]:
    """The pairs of one name (a set gives its members'). Raises :class:`MeasureError` for a wrong
    name (unknown, with a did-you-mean; malformed parameters) and :class:`Unsupported` for a known
    measure not computed here. ``command_line``: trec_eval's ``-m`` syntax only, as trec_eval
    reads it (its output names such as ``P_5`` refused).

    Example:
        >>> parse_one("ndcg_cut.10,20,23.4")
        [('ndcg@10', 'ndcg_cut_10'), ('ndcg@20', 'ndcg_cut_20'), ('ndcg@23', 'ndcg_cut_23')]
        >>> parse_one("ndgc_cut.10")
        Traceback (most recent call last):
        ...
        retrieval_core.trec.measures.MeasureError: unknown measure name 'ndgc_cut.10'. Did you mean ndcg_cut.10?
        >>> parse_one("P_5", command_line=True)
        Traceback (most recent call last):
        ...
        retrieval_core.trec.measures.MeasureError: 'P_5' is trec_eval's output name: write P.5 (trec_eval refuses P_5 too)
    """
    if not isinstance(name, str):
        raise TypeError(f"measure names are strings; got {name!r} of type {type(name).__name__}")
    if name == "runid" or name == "-m runid":
        raise Unsupported("'runid' is the run's tag (Run.tag), not a measure")
    pairs = _from_trec(name, command_line)
    for parse in (_from_ir_measures, _from_ours):
        if pairs is None:
            pairs = parse(name)
    if pairs is None:
        raise MeasureError(f"unknown measure name {name!r}.{_did_you_mean(name)}")
    return pairs


def split_measures(names: Union[str, Iterable[str]]) -> Tuple[List[Pair], List[str]]:
    """``(supported pairs, unsupported names)``; pairs deduplicated by key, first occurrence kept.

    A set (``official``, ``all_trec``) with unsupported members is unsupported as a whole,
    listed as ``"all_trec (infAP, ...)"``.
    """
    names = [names] if isinstance(names, str) else list(names)
    pairs: List[Pair] = []
    bad: List[str] = []
    seen = set()
    for name in names:
        try:
            got = parse_one(name)
        except Unsupported:
            bad.append(_set_detail(name) or name)
            continue
        for key, trec in got:
            if key not in seen:
                seen.add(key)
                pairs.append((key, trec))
    return pairs, bad


def _supported(member: str) -> bool:
    try:
        parse_one(member)
    except Unsupported:
        return False
    return True


def _set_detail(name: str) -> Optional[str]:
    text = name[2:].strip() if isinstance(name, str) and name.startswith("-m") else name
    if text not in SETS:
        return None
    missing = [b for b in SETS[text] if not _supported(b)]
    return f"{name} (unsupported: {', '.join(missing)})"


def parse_measures(names: Union[str, Iterable[str]]) -> List[Pair]:
    """``[(canonical key, trec_eval output name or None)]`` for every name; a ValueError listing
    every unsupported or wrong name (with the reason where one is known)."""
    names_list = [names] if isinstance(names, str) else list(names)
    reasons = []
    for name in names_list:
        try:
            parse_one(name)
        except Unsupported as err:
            detail = _set_detail(name)
            reasons.append(detail or (name if str(err) == name else f"{name} ({err})"))
    if reasons:
        raise ValueError(f"unsupported measure names: {'; '.join(reasons)}. Supported: trec_eval's "
                         f"{', '.join(list(PLAIN) + list(CUT))}, iprec_at_recall, sets {', '.join(SETS)}; "
                         f"ir_measures' {', '.join(IR_MEASURES)}; and this library's keys")
    return split_measures(names_list)[0]
