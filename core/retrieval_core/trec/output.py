"""trec_eval's output (``measure \\t query \\t value``, the measure padded with spaces) as a dict.

Example:
    >>> text = "num_ret               \\t301\\t500\\nmap                   \\tall\\t0.1785\\nrunid \\tall\\tSTANDARD\\n"
    >>> parse_trec_eval_output(text)
    {'301': {'num_ret': 500.0}, 'all': {'map': 0.1785, 'runid': 'STANDARD'}}
"""
from __future__ import annotations

import os
from typing import Dict, Union

__all__ = ["parse_trec_eval_output", "read_trec_eval_output"]

Values = Dict[str, Dict[str, Union[float, str]]]


def parse_trec_eval_output(text: str, name: str = "<string>") -> Values:
    """``{query: {measure: value}}`` (``"all"`` for the summary); values are floats, except
    those that are not numbers (``runid``, ``relstring``), kept as text. A measure given twice
    for one query, or a line without three tab-separated fields, raises (file, line)."""
    out: Values = {}
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        parts = line.split("\t")
        if len(parts) != 3 or not parts[0].strip() or not parts[1].strip():
            raise ValueError(f"{name}: line {number}: expected 'measure<TAB>query<TAB>value'; got {line!r}")
        measure, query, value = parts[0].strip(), parts[1].strip(), parts[2].strip()
        try:
            parsed: Union[float, str] = float(value)
        except ValueError:
            parsed = value
        row = out.setdefault(query, {})
        if measure in row:
            raise ValueError(f"{name}: line {number}: {measure!r} given twice for query {query!r}")
        row[measure] = parsed
    return out


def read_trec_eval_output(path: Union[str, "os.PathLike[str]"]) -> Values:
    """:func:`parse_trec_eval_output` of a file."""
    name = os.fspath(path)
    with open(name, encoding="utf-8") as f:
        return parse_trec_eval_output(f.read(), name)
