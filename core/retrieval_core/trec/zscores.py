"""trec_eval's z-scores (``-Z FILE``): each per-query value printed as its deviation from a
reference mean, in standard deviations.

The file holds lines ``qid measure mean stddev`` (whitespace-separated; ``measure`` is the
name trec_eval prints, e.g. ``P_5``). As trec_eval 10 (convert_zscores.c), each per-query value
``v`` is converted after the measures are computed and before they are summarised:
``(v - mean) / stddev``; with a zero stddev, 0 where ``v == mean`` and ``MISSING`` otherwise;
``MISSING`` (trec_eval's MISSING_ZSCORE_VALUE, -1000000) where the file has no line for the
query and measure. The summary is then formed from the converted values as it is without
``-Z`` (:func:`~retrieval_core.trec.evaluate_trec`): the counts summed, the means, and for
``gm_map`` / ``gm_bpref`` (whose per-query value in trec_eval is ``log(max(AP, 1e-5))``: that
is what is converted) ``exp`` of the mean; ``num_q`` stays the number of queries and ``-c``'s
``num_rel`` the qrels' count, not being formed from per-query values in trec_eval either.

Reading: blank lines and ``#`` comment lines are skipped (as the qrels and run readers do);
a line without exactly four fields, a mean or stddev that is not a finite number, and a
query and measure given twice (trec_eval would keep either one) raise ``ValueError`` naming
the file and line.

Example:
    >>> zs = zscores_from_lines(["q1 P_5 0.5 0.25", "q1 map 0.3 0", "q2 P_5 0.4 0.1"])
    >>> values = torch.tensor([[0.75, 0.3], [0.2, 0.5]], dtype=torch.float64)
    >>> to_zscores(values, ("q1", "q2"), ("P_5", "map"), zs).tolist()
    [[1.0, 0.0], [-2.0, -1000000.0]]
"""
from __future__ import annotations

import math
import os
from dataclasses import dataclass
from typing import Dict, Iterable, Sequence, Tuple, Union

import torch
from torch import Tensor

from . import _numbers
from ._parse import numpy
from .exact import GM_FLOOR

__all__ = ["MISSING", "ZScores", "read_zscores", "to_zscores", "zscores_from_lines"]

MISSING = -1000000.0  # trec_eval's MISSING_ZSCORE_VALUE


@dataclass(frozen=True)
class ZScores:
    """``table``: ``{(query id, measure name): (mean, stddev)}``; ``source``: the file's name."""

    table: Dict[Tuple[str, str], Tuple[float, float]]
    source: str


def zscores_from_lines(lines: Iterable[Union[str, bytes]], source: str = "z-scores") -> ZScores:
    """The z-scores of ``qid measure mean stddev`` lines (module doc: the errors name ``source``
    and the line, counted from 1)."""
    np = numpy()
    records, means, stddevs, where = [], [], [], []
    for n, line in enumerate(lines, 1):
        raw = line if isinstance(line, bytes) else line.encode("utf-8", "surrogateescape")
        fields = raw.split()
        if not fields or fields[0].startswith(b"#"):
            continue
        if len(fields) != 4:
            text = raw.decode("utf-8", "replace").strip()
            raise ValueError(f"{source}: line {n}: expected 4 fields (qid measure mean stddev), got {len(fields)}: "
                             f"{text!r}")
        records.append(tuple(f.decode("utf-8", "surrogateescape") for f in fields[:2]))
        means.append(fields[2])
        stddevs.append(fields[3])
        where.append(n)
    if not records:
        raise ValueError(f"{source}: no z-scores (lines 'qid measure mean stddev'); trec_eval refuses an empty file")
    mean = _numbers.to_float(np, np.array(means, dtype=object), where, source, "the mean (3rd field)").tolist()
    sd = _numbers.to_float(np, np.array(stddevs, dtype=object), where, source, "the stddev (4th field)").tolist()
    table: Dict[Tuple[str, str], Tuple[float, float]] = {}
    for i, key in enumerate(records):
        if key in table:
            raise ValueError(f"{source}: line {where[i]}: query {key[0]!r}, measure {key[1]!r} given twice "
                             "(trec_eval would use either line)")
        table[key] = (mean[i], sd[i])
    return ZScores(table, source)


def read_zscores(path: Union[str, "os.PathLike[str]"]) -> ZScores:
    """Read a trec_eval z-score file (``-Z``; module doc)."""
    name = os.fspath(path)
    with open(name, "rb") as f:
        return zscores_from_lines(f.read().split(b"\n"), name)


def to_zscores(values: Tensor, query_ids: Sequence[str], names: Sequence[str], zscores: ZScores,
               logs: Sequence[int] = ()) -> Tensor:
    """``values [Q, M]`` (float64; row i query ``query_ids[i]``, column j measure ``names[j]``) as
    trec_eval's z-scores (module doc). ``logs``: columns that hold the per-query values of a
    geometric mean (``gm_map``'s AP), turned into ``log(max(v, 1e-5))`` first, as trec_eval holds them."""
    values = values.clone()
    for j in logs:  # the C library's log, as sequential_gm
        values[:, j] = torch.tensor([math.log(max(v, GM_FLOOR)) for v in values[:, j].tolist()], dtype=values.dtype)
    rows = {q: i for i, q in enumerate(query_ids)}
    cols = {name: j for j, name in enumerate(names)}
    mean = torch.zeros_like(values)
    stddev = torch.zeros_like(values)
    found = torch.zeros(values.shape, dtype=torch.bool)
    hits = [(rows[q], cols[m], mu, sd) for (q, m), (mu, sd) in zscores.table.items() if q in rows and m in cols]
    if hits:
        i, j, mu, sd = zip(*hits)
        i, j = torch.tensor(i, dtype=torch.int64), torch.tensor(j, dtype=torch.int64)
        mean[i, j] = torch.tensor(mu, dtype=values.dtype)
        stddev[i, j] = torch.tensor(sd, dtype=values.dtype)
        found[i, j] = True
    scaled = (values - mean) / torch.where(stddev != 0, stddev, 1.0)
    flat = torch.where(values == mean, 0.0, MISSING)  # a zero stddev
    return torch.where(found, torch.where(stddev != 0, scaled, flat), MISSING)
