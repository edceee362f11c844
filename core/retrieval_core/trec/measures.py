"""Measure names of trec_eval, ir_measures and this library, parsed to one canonical key.

``parse_measures(names)`` returns ``(canonical key, trec_eval output name)`` pairs, the
output name being None where trec_eval has no such measure (``mrr@10``); an unsupported
name raises, listing every one of them (``split_measures`` returns them instead).

* trec_eval: ``map``, ``P_5`` / ``P.5`` / ``P.5,10`` / ``P`` (its default cutoffs), ``recall``,
  ``ndcg``, ``ndcg_cut``, ``map_cut``, ``success``, ``recip_rank``, ``Rprec``, ``bpref``,
  ``gm_map``, ``num_q``, ``num_ret``, ``num_rel``, ``num_rel_ret``, ``num_nonrel_judged_ret``,
  ``iprec_at_recall_0.10``, and the sets ``official`` and ``all_trec`` (also written ``-m official``).
  ``runid`` is the run's tag (:attr:`Run.tag`), not a measure: the sets leave it out and the
  name alone is refused.
* ir_measures: ``AP``, ``AP@10``, ``P@5``, ``R@100``, ``nDCG``, ``nDCG@10``,
  ``nDCG(dcg='exp-log2')@10``, ``RR``, ``RR@10``, ``Rprec``, ``Success@1``, ``Bpref``,
  ``NumQ``, ``NumRet``, ``NumRel``, ``NumRelRet``, ``IPrec@0.1``.
* ours: every key :func:`retrieval_core.parse_metrics` accepts, and the keys only
  :func:`retrieval_core.trec.evaluate_trec` computes: ``bpref``, ``gm_map``, ``num_q``, ``num_ret``, ``num_rel``,
  ``num_rel_ret``, ``num_nonrel_judged_ret``, ``iprec_at_recall@x``.

Example:
    >>> parse_measures(["P_5", "P@5", "precision@10", "recip_rank", "AP@10"])
    [('precision@5', 'P_5'), ('precision@10', 'P_10'), ('mrr', 'recip_rank'), ('map@10', 'map_cut_10')]
    >>> parse_measures("iprec_at_recall..1")
    [('iprec_at_recall@0.1', 'iprec_at_recall_0.10')]
    >>> split_measures(["ndcg_cut.5,10", "infAP", "ERR@20"])
    ([('ndcg@5', 'ndcg_cut_5'), ('ndcg@10', 'ndcg_cut_10')], ['infAP', 'ERR@20'])
"""
from __future__ import annotations

import re
from typing import Iterable, List, Optional, Tuple, Union

from retrieval_core import parse_metrics

__all__ = ["parse_measures", "split_measures", "CUTOFFS", "NEW_KEYS", "SETS"]

# trec_eval's default cutoffs (m_P.c, m_recall.c, m_ndcg_cut.c, m_map_cut.c, m_success.c, m_iprec_at_recall.c)
CUTOFFS = (5, 10, 15, 20, 30, 100, 200, 500, 1000)
SUCCESS_CUTOFFS = (1, 5, 10)
RECALL_LEVELS = tuple(i / 10 for i in range(11))

# trec_eval names of whole-list measures -> canonical key
PLAIN = {
    "map": "map", "ndcg": "ndcg", "recip_rank": "mrr", "Rprec": "r_precision", "bpref": "bpref",
    "gm_map": "gm_map", "num_q": "num_q", "num_ret": "num_ret", "num_rel": "num_rel",
    "num_rel_ret": "num_rel_ret", "num_nonrel_judged_ret": "num_nonrel_judged_ret",
}
# trec_eval measures with integer cutoffs: name -> (our key's name, default cutoffs)
CUT = {"P": ("precision", CUTOFFS), "recall": ("recall", CUTOFFS), "ndcg_cut": ("ndcg", CUTOFFS),
       "map_cut": ("map", CUTOFFS), "success": ("hit_rate", SUCCESS_CUTOFFS)}
# keys that evaluate_trec computes itself, not the core (docs/trec.md)
NEW_KEYS = ("bpref", "gm_map", "num_q", "num_ret", "num_rel", "num_rel_ret", "num_nonrel_judged_ret",
            "iprec_at_recall")
# trec_eval's measure sets (measures.c); runid left out (not a measure)
SETS = {
    "official": ("num_q", "num_ret", "num_rel", "num_rel_ret", "map", "gm_map", "Rprec", "bpref", "recip_rank",
                 "iprec_at_recall", "P"),
    "all_trec": ("num_q", "num_ret", "num_rel", "num_rel_ret", "map", "gm_map", "Rprec", "bpref", "recip_rank",
                 "iprec_at_recall", "P", "relstring", "recall", "unj", "rbp", "rbp_resid", "infAP", "gm_bpref",
                 "utility", "11pt_avg", "ndcg", "relative_P", "Rprec_mult", "success", "map_cut", "ndcg_cut",
                 "ndcg_rel", "Rndcg", "binG", "G", "set_P", "set_recall", "set_relative_P", "set_map", "set_F",
                 "num_nonrel_judged_ret"),
}
# ir_measures names -> trec_eval base name (cutoff forms go through the same table)
IR_MEASURES = {"AP": "map", "P": "P", "R": "recall", "nDCG": "ndcg", "RR": "recip_rank", "Rprec": "Rprec",
               "Success": "success", "Bpref": "bpref", "NumQ": "num_q", "NumRet": "num_ret", "NumRel": "num_rel",
               "NumRelRet": "num_rel_ret", "IPrec": "iprec_at_recall"}

_INT = re.compile(r"[0-9]+")
_FLOAT = re.compile(r"(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)")
_TREC = re.compile(r"(?P<base>[A-Za-z_]+?)(?:[._](?P<params>[0-9.,]+))?")
_IRM = re.compile(r"(?P<base>[A-Za-z]+)(?:\((?P<args>[^)]*)\))?(?:@(?P<cut>[0-9.]+))?")

Pair = Tuple[str, Optional[str]]


class Unsupported(ValueError):
    """A name no table here knows; ``reason`` says why when known."""


def _cutoff(text: str, name: str) -> int:
    if not _INT.fullmatch(text) or int(text) <= 0:
        raise Unsupported(f"{name!r}: a cutoff must be a positive integer; got {text!r}")
    return int(text)


def _level(text: str, name: str) -> float:
    if not _FLOAT.fullmatch(text) or not 0.0 <= float(text) <= 1.0:
        raise Unsupported(f"{name!r}: a recall level must be a number in [0, 1]; got {text!r}")
    return float(text)


def _iprec(x: float) -> Pair:
    return f"iprec_at_recall@{x:g}", f"iprec_at_recall_{x:.2f}"


def _trec(base: str, params: Optional[str], name: str) -> List[Pair]:
    """Pairs of a trec_eval base name with parameters ``params`` ("5", "5,10", ".10,.20"; None = defaults)."""
    if base in PLAIN:
        if params is not None:
            raise Unsupported(f"{name!r}: trec_eval's {base} takes no parameter")
        return [(PLAIN[base], base)]
    if base in CUT:
        ours, defaults = CUT[base]
        ks = defaults if params is None else [_cutoff(p, name) for p in params.split(",")]
        return [(f"{ours}@{k}", f"{base}_{k}") for k in ks]
    if base == "iprec_at_recall":
        xs = RECALL_LEVELS if params is None else [_level(p, name) for p in params.split(",")]
        return [_iprec(x) for x in xs]
    raise Unsupported(name)


def _from_trec(name: str) -> Optional[List[Pair]]:
    text = name[2:].strip() if name.startswith("-m") else name
    if text in SETS:
        out: List[Pair] = []
        for base in SETS[text]:
            out.extend(_trec(base, None, text))  # raises for the set's unsupported members
        return out
    if text in PLAIN or text in CUT or text == "iprec_at_recall":
        return _trec(text, None, name)
    m = _TREC.fullmatch(text)
    if m and (m["base"] in CUT or m["base"] == "iprec_at_recall" or m["base"] in PLAIN) and m["params"]:
        return _trec(m["base"], m["params"], name)
    return None


def _from_ir_measures(name: str) -> Optional[List[Pair]]:
    m = _IRM.fullmatch(name)
    if not m or m["base"] not in IR_MEASURES:
        return None
    base, args, cut = IR_MEASURES[m["base"]], (m["args"] or "").replace(" ", ""), m["cut"]
    exp = False
    if args:
        if base == "ndcg" and args in ("dcg='exp-log2'", 'dcg="exp-log2"'):
            exp = True
        elif base == "ndcg" and args in ("dcg='log2'", 'dcg="log2"'):
            pass
        else:
            raise Unsupported(f"{name!r}: parameters ({args}) are not supported (the relevance level is "
                              "one setting of the evaluation, level=)")
    if base == "map" and cut:
        return [(f"map@{_cutoff(cut, name)}", f"map_cut_{int(cut)}")]
    if base == "ndcg":
        key = "ndcg_exp" if exp else "ndcg"
        if cut:
            k = _cutoff(cut, name)
            return [(f"{key}@{k}", None if exp else f"ndcg_cut_{k}")]
        return [(key, None if exp else "ndcg")]
    if base == "recip_rank" and cut:
        return [(f"mrr@{_cutoff(cut, name)}", None)]
    if base == "iprec_at_recall":
        if not cut:
            raise Unsupported(f"{name!r}: IPrec needs a recall level, e.g. IPrec@0.1")
        return [_iprec(_level(cut, name))]
    if base in CUT:
        if not cut:
            raise Unsupported(f"{name!r}: ir_measures' {m['base']} needs a cutoff, e.g. {m['base']}@10")
        return _trec(base, cut, name)
    if cut:
        raise Unsupported(f"{name!r}: {m['base']} takes no cutoff")
    return _trec(base, None, name)


_TREC_NAME = {"precision": "P", "recall": "recall", "ndcg": "ndcg_cut", "map": "map_cut", "hit_rate": "success"}
_PLAIN_NAME = {v: k for k, v in PLAIN.items()}


def _from_ours(name: str) -> Optional[List[Pair]]:
    base, sep, arg = name.partition("@")
    if base in NEW_KEYS:
        if base == "iprec_at_recall":
            if not sep:
                raise Unsupported(f"{name!r}: iprec_at_recall needs a recall level, e.g. iprec_at_recall@0.1")
            return [_iprec(_level(arg, name))]
        if sep:
            raise Unsupported(f"{name!r}: {base} takes no cutoff")
        return [(base, base)]
    try:
        (key,) = parse_metrics([name])
    except ValueError:
        return None
    cutoff = key.cutoff
    if key.confidence is None and key.spec.per_query:
        spec = key.spec.name
        name = spec + (f"@{arg}" if sep else "")  # an alias (cmc@1) under its canonical name (hit_rate@1)
        if cutoff is None and spec in _PLAIN_NAME:
            return [(name, _PLAIN_NAME[spec])]
        if spec == "r_precision":
            return [(name, "Rprec")]
        if isinstance(cutoff, int) and spec in _TREC_NAME:
            return [(name, f"{_TREC_NAME[spec]}_{cutoff}")]
    return [(name, None)]


def _one(name: str) -> List[Pair]:
    if not isinstance(name, str):
        raise TypeError(f"measure names are strings; got {name!r} of type {type(name).__name__}")
    if name == "runid" or name == "-m runid":
        raise Unsupported("'runid' is the run's tag (Run.tag), not a measure")
    for parse in (_from_trec, _from_ir_measures, _from_ours):
        pairs = parse(name)
        if pairs is not None:
            return pairs
    raise Unsupported(name)


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
            got = _one(name)
        except Unsupported:
            bad.append(_set_detail(name) or name)
            continue
        for key, trec in got:
            if key not in seen:
                seen.add(key)
                pairs.append((key, trec))
    return pairs, bad


def _set_detail(name: str) -> Optional[str]:
    text = name[2:].strip() if isinstance(name, str) and name.startswith("-m") else name
    if text not in SETS:
        return None
    missing = [b for b in SETS[text] if _from_trec(b) is None]
    return f"{name} (unsupported: {', '.join(missing)})"


def parse_measures(names: Union[str, Iterable[str]]) -> List[Pair]:
    """``[(canonical key, trec_eval output name or None)]`` for every name; a ValueError listing
    every unsupported name (with the reason where one is known)."""
    names_list = [names] if isinstance(names, str) else list(names)
    reasons = []
    for name in names_list:
        try:
            _one(name)
        except Unsupported as err:
            detail = _set_detail(name)
            reasons.append(detail or (name if str(err) == name else f"{name} ({err})"))
    if reasons:
        raise ValueError(f"unsupported measure names: {'; '.join(reasons)}. Supported: trec_eval's "
                         f"{', '.join(list(PLAIN) + list(CUT))}, iprec_at_recall, sets {', '.join(SETS)}; "
                         f"ir_measures' {', '.join(IR_MEASURES)}; and this library's keys")
    return split_measures(names_list)[0]
