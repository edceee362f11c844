"""ir_measures' measure language: ``Measure``, ``Measure@cutoff``, ``Measure(param=value, ...)@cutoff``.

:func:`read_ir_measure` reads one name into an :class:`IrMeasure` (its measure, its
parameters checked against what that measure takes in ir_measures 0.4.3, and its
canonical spelling); :mod:`retrieval_core.trec.measures` maps it to this library's keys.
The values are Python literals (``2``, ``0.8``, ``True``, ``'exp-log2'``, ``{0: 1, 2: 3}``),
read with :func:`ast.literal_eval`; the ``@`` value sets the measure's cutoff (IPrec's recall
level). A wrong name raises :class:`LanguageError` (malformed parameters, a parameter the
measure does not take, a value of the wrong type, a required cutoff missing); a measure
ir_measures has that is not computed here raises :class:`NotComputed` with the reason.

Example:
    >>> m = read_ir_measure("P(rel=2)@5")
    >>> m.measure, m.params, m.spelling
    ('P', {'rel': 2, 'cutoff': 5}, 'P(rel=2)@5')
    >>> read_ir_measure("RBP(rel=2, p=0.5)").spelling
    'RBP(p=0.5,rel=2)'
    >>> read_ir_measure("map") is None   # not ir_measures' language
    True
    >>> read_ir_measure("P(rel=True)@5")
    Traceback (most recent call last):
    ...
    retrieval_core.trec.ir_measures_names.LanguageError: 'P(rel=True)@5': rel must be an integer; got True
"""
from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from typing import Dict, Optional, Tuple

__all__ = ["ALIASES", "IrMeasure", "LanguageError", "NOT_COMPUTED", "NotComputed", "SIGNATURES", "read_ir_measure"]


class LanguageError(ValueError):
    """A name that ir_measures would not read, or that names parameters its measure does not take."""


class NotComputed(ValueError):
    """A measure of ir_measures that is not computed here (the message says why)."""


_JUDGED = "judged_only"
# ir_measures 0.4.3's measures computed here: their parameters, the required ones first ('*'), in
# ir_measures' order (measures/*.py, SUPPORTED_PARAMS)
SIGNATURES: Dict[str, Tuple[str, ...]] = {
    "AP": ("cutoff", "rel", _JUDGED), "P": ("*cutoff", "rel", _JUDGED), "R": ("*cutoff", "rel", _JUDGED),
    "nDCG": ("cutoff", "dcg", "gains", _JUDGED), "RR": ("cutoff", "rel", _JUDGED), "Rprec": ("rel", _JUDGED),
    "Success": ("*cutoff", "rel", _JUDGED), "Bpref": ("rel",), "NumQ": (), "NumRel": ("rel",), "NumRet": ("rel",),
    "NumRelRet": ("rel",), "IPrec": ("*recall", "rel", _JUDGED), "Judged": ("cutoff",), "ERR": ("cutoff",),
    "Compat": ("p", "normalize"), "infAP": ("rel",), "RBP": ("cutoff", "p", "rel"),
    "SetP": ("rel", "relative", _JUDGED), "SetRelP": ("rel", "relative", _JUDGED), "SetR": ("rel",),
    "SetF": ("rel", "beta", _JUDGED), "SetAP": ("rel", _JUDGED),
}
# ir_measures' other names for them (its registry)
ALIASES = {"MAP": "AP", "Precision": "P", "Recall": "R", "NDCG": "nDCG", "MRR": "RR", "RPrec": "Rprec",
           "BPref": "Bpref"}
_SUBTOPICS = "needs subtopic (intent) judgements, which TREC qrels do not hold"
_CWL = "is a C/W/L measure of cwl_eval (graded gains scaled between min_rel and max_rel)"
# ir_measures' measures not computed here, and why
NOT_COMPUTED = {
    "alpha_nDCG": _SUBTOPICS, "α_nDCG": _SUBTOPICS, "alpha_DCG": _SUBTOPICS, "α_DCG": _SUBTOPICS,
    "ERR_IA": _SUBTOPICS, "nERR_IA": _SUBTOPICS, "AP_IA": _SUBTOPICS, "MAP_IA": _SUBTOPICS, "P_IA": _SUBTOPICS,
    "NRBP": _SUBTOPICS, "nNRBP": _SUBTOPICS, "StRecall": _SUBTOPICS, "STREC": _SUBTOPICS,
    "INST": _CWL, "INSQ": _CWL, "BPM": _CWL, "SDCG": _CWL, "NERR8": _CWL, "NERR9": _CWL, "NERR10": _CWL,
    "NERR11": _CWL, "Accuracy": "is a diagnostic of ir_measures' own (relevant before non-relevant pairs)",
}
_AT = {"IPrec": "recall"}  # the parameter '@' sets (cutoff unless named here)
_NAME = re.compile(r"(?P<measure>[^\W\d]\w*)(?:\((?P<args>.*)\))?(?:@(?P<at>[^@()]+))?", re.DOTALL)


@dataclass(frozen=True)
class IrMeasure:
    """One ir_measures name read: the ``measure`` (aliases resolved), its ``params`` (the ``@``
    value under its parameter's name) and its ``spelling`` (ir_measures' ``repr``, parameters sorted)."""

    measure: str
    params: Dict[str, object]
    spelling: str


def read_ir_measure(name: str) -> Optional[IrMeasure]:
    """The measure ``name`` spells in ir_measures' language, or None when it names none of
    ir_measures' measures (module doc for the errors)."""
    m = _NAME.fullmatch(name.strip())
    if not m:
        return None
    measure = ALIASES.get(m["measure"], m["measure"])
    if measure in NOT_COMPUTED:
        raise NotComputed(f"{name!r}: ir_measures' {m['measure']} is not computed here: it {NOT_COMPUTED[measure]}")
    if measure not in SIGNATURES:
        return None
    params = _arguments(name, m["args"]) if m["args"] is not None else {}
    at_name = _AT.get(measure, "cutoff")
    if m["at"] is not None:
        if at_name in params:
            raise LanguageError(f"{name!r}: the {at_name} is given twice (as {at_name}= and after '@')")
        params[at_name] = _literal(name, m["at"].strip())
    _check(name, m["measure"], measure, params)
    return IrMeasure(measure, params, _spelling(m["measure"], params, at_name))


def _split(name: str, args: str) -> list:
    """``args`` split at the commas outside brackets and quotes."""
    parts, depth, quote, start = [], 0, "", 0
    for i, c in enumerate(args):
        if quote:
            quote = "" if c == quote else quote
        elif c in "'\"":
            quote = c
        elif c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        elif c == "," and depth == 0:
            parts.append(args[start:i])
            start = i + 1
    if quote or depth:
        raise LanguageError(f"{name!r}: unbalanced brackets or quotes in the parameters")
    return parts + [args[start:]]


def _arguments(name: str, args: str) -> Dict[str, object]:
    """``k1=v1, k2=v2`` as a dict (an empty list is no parameter)."""
    out: Dict[str, object] = {}
    if not args.strip():
        return out
    for part in _split(name, args):
        key, eq, value = part.partition("=")
        key = key.strip()
        if not eq or not key.isidentifier() or not value.strip():
            raise LanguageError(f"{name!r}: parameters are written name=value, separated by commas; got "
                                f"{part.strip()!r}")
        if key in out:
            raise LanguageError(f"{name!r}: the parameter {key} is given twice")
        out[key] = _literal(name, value.strip())
    return out


def _literal(name: str, text: str) -> object:
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        raise LanguageError(f"{name!r}: a parameter's value must be a number, True/False, a quoted string or "
                            f"a dict; got {text!r}") from None


def _number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


# what each parameter's value must be: (test, the words of the message)
_KINDS = {
    "cutoff": (lambda v: isinstance(v, int) and not isinstance(v, bool) and v > 0, "a positive integer"),
    "rel": (lambda v: isinstance(v, int) and not isinstance(v, bool) and -2**63 <= v < 2**63, "an integer"),
    _JUDGED: (lambda v: isinstance(v, bool), "True or False"),
    "normalize": (lambda v: isinstance(v, bool), "True or False"),
    "relative": (lambda v: isinstance(v, bool), "True or False"),
    "dcg": (lambda v: v in ("log2", "exp-log2"), "'log2' or 'exp-log2'"),
    "gains": (lambda v: isinstance(v, dict) and all(isinstance(k, int) and not isinstance(k, bool) and _number(g)
                                                    for k, g in v.items()), "a dict of integer levels to gains"),
    "p": (lambda v: _number(v) and 0.0 < v <= 1.0, "a number in (0, 1]"),
    "beta": (lambda v: _number(v) and v >= 0.0 and v != float("inf"), "a number >= 0"),
    "recall": (lambda v: _number(v) and 0.0 <= v <= 1.0, "a number in [0, 1]"),
}


def _check(name: str, written: str, measure: str, params: Dict[str, object]) -> None:
    """Each parameter is one the measure takes, of the right kind; the required ones given."""
    takes = [p.lstrip("*") for p in SIGNATURES[measure]]
    for key, value in params.items():
        if key not in takes:
            them = f"it takes {', '.join(takes)}" if takes else "it takes none"
            raise LanguageError(f"{name!r}: ir_measures' {written} takes no parameter {key} ({them})")
        ok, words = _KINDS[key]
        if not ok(value):
            label = "a recall level" if key == "recall" else key
            raise LanguageError(f"{name!r}: {label} must be {words}; got {value!r}")
    for p in SIGNATURES[measure]:
        if p.startswith("*") and p[1:] not in params:
            example = "@0.1" if p == "*recall" else "@10"
            raise LanguageError(f"{name!r}: ir_measures' {written} needs a {p[1:]}, e.g. {written}{example}")


def _spelling(written: str, params: Dict[str, object], at_name: str) -> str:
    inner = ",".join(f"{k}={params[k]!r}" for k in sorted(params) if k != at_name)
    text = written + (f"({inner})" if inner else "")
    return text + (f"@{params[at_name]}" if at_name in params else "")
