"""MetricResults: the results of an evaluation ({key: value} with counts, intervals,
per-query values, curves), and their plain JSON form.
"""
from __future__ import annotations

import math
from typing import Any, Dict, Optional, Sequence, Tuple

import torch
from torch import Tensor

from ..metrics.direction import lower_is_better

__all__ = ["MetricResults", "plain"]


class MetricResults(dict):
    """``dict[str, Tensor]`` of results, with the bookkeeping of empty queries.

    Attributes:
        n_queries: number of queries evaluated (0-d int64 tensor).
        n_empty: per key, how many queries had the metric undefined (skipped
            under ``empty="skip"``, filled under ``"zero"``/``"one"``).
        ci: per reduced key, ``(low, high)`` 0-d tensors when an interval was asked.
        per_query: per key, the ``[Q]`` per-query values when they were kept.
        query_ids: ``[Q]`` ids (or None: positions) of the queries in ``per_query``.
        curves: per curve key (``"erc:cmc@1"``...), ``(x, y)`` tensors.
        neighbours: ``(positions or ids [Q, k], scores [Q, k])`` when asked.
    """

    def __init__(self, *args, n_queries: Optional[Tensor] = None, n_empty: Optional[Dict[str, Tensor]] = None):
        super().__init__(*args)
        self.n_queries = n_queries
        self.n_empty = n_empty or {}
        self.ci: Dict[str, Tuple[Tensor, Tensor]] = {}
        self.per_query: Dict[str, Tensor] = {}
        self.query_ids: Optional[Tensor] = None
        self.curves: Dict[str, Tuple[Tensor, Tensor]] = {}
        self.neighbours: Optional[Tuple[Tensor, Tensor]] = None

    def with_values(self, values) -> "MetricResults":
        """A MetricResults holding ``values`` (a mapping) with this one's bookkeeping:
        counts, intervals, per-query values and ids, curves and neighbours (the
        tensors shared, the dicts copied).

        Example:
            >>> r = MetricResults({"a": torch.tensor(1.0)}, n_queries=torch.tensor(3))
            >>> s = r.with_values({"b": torch.tensor(2.0)})
            >>> sorted(s), s.n_queries.item()
            (['b'], 3)
        """
        out = MetricResults(values)
        out.__dict__.update({k: dict(v) if isinstance(v, dict) else v for k, v in self.__dict__.items()})
        return out

    def reordered(self, first: Sequence[str]) -> "MetricResults":
        """The same results with the keys ``first`` first, in that order, then the others.

        Example:
            >>> r = MetricResults({"a": torch.tensor(1.0), "b": torch.tensor(2.0)})
            >>> list(r.reordered(["b"]))
            ['b', 'a']
        """
        values = {k: self[k] for k in first}
        values.update((k, v) for k, v in self.items() if k not in values)
        return self.with_values(values)

    def __reduce__(self):
        # rebuilt from a plain dict and its attributes: torch.load(weights_only=True)
        # accepts that once the class is an allowed global (registered at the end of this module)
        return (MetricResults, (dict(self),), dict(self.__dict__))

    def to_dict(self) -> Dict[str, Any]:
        """The results as plain JSON-ready Python: floats, ints, lists and None.

        Keys: ``values`` ({key: float, or a list for ``reduce="none"``}),
        ``n_queries`` (int or None), ``n_empty`` ({key: int}), ``ci`` ({key: [low,
        high]}), ``per_query`` ({key: [float]}), ``query_ids`` (list or None),
        ``curves`` ({key: {"x": [...], "y": [...]}}) and, when kept,
        ``neighbours`` (``{"ids": [[...]], "scores": [[...]]}``). NaN (an undefined
        value) becomes None (JSON ``null``); :meth:`from_dict` reads it back as NaN.

        Example:
            >>> import json, torch
            >>> r = MetricResults({"cmc@1": torch.tensor(0.5, dtype=torch.float64)},
            ...                   n_queries=torch.tensor(4), n_empty={"cmc@1": torch.tensor(0)})
            >>> json.dumps(r.to_dict()["values"]), r.to_dict()["n_queries"]
            ('{"cmc@1": 0.5}', 4)
            >>> MetricResults.from_dict(json.loads(json.dumps(r.to_dict())))["cmc@1"]
            tensor(0.5000, dtype=torch.float64)
        """
        out: Dict[str, Any] = {
            "values": {k: plain(v) for k, v in self.items()},
            "n_queries": None if self.n_queries is None else int(self.n_queries),
            "n_empty": {k: int(v) for k, v in self.n_empty.items()},
            "ci": {k: [plain(low), plain(high)] for k, (low, high) in self.ci.items()},
            "per_query": {k: plain(v) for k, v in self.per_query.items()},
            "query_ids": None if self.query_ids is None else plain(self.query_ids),
            "curves": {k: {"x": plain(x), "y": plain(y)} for k, (x, y) in self.curves.items()},
        }
        if self.neighbours is not None:
            ids, scores = self.neighbours
            out["neighbours"] = {"ids": plain(ids), "scores": plain(scores)}
        return out

    @classmethod
    def from_dict(cls, data: Dict[str, Any]) -> "MetricResults":
        """The inverse of :meth:`to_dict` (e.g. after ``json.load``): CPU tensors,
        float64 values (None back to NaN), int64 counts and ids."""
        if not isinstance(data, dict) or not isinstance(data.get("values"), dict):
            raise ValueError("MetricResults.from_dict expects the dict of MetricResults.to_dict(), "
                             "with a 'values' mapping")
        def part(name: str, read, default=None):
            """``read(data[name])``, or ``default`` when absent; any failure names the part."""
            if data.get(name) is None:
                return default
            try:
                return read(data[name])
            except (KeyError, IndexError, TypeError, ValueError, RuntimeError, AttributeError) as e:
                raise ValueError(f"MetricResults.from_dict: malformed {name!r} ({type(e).__name__}: {e}); "
                                 f"expected {_FORMS[name]}") from None

        out = cls(
            part("values", lambda d: {k: _tensor(v) for k, v in d.items()}),
            n_queries=part("n_queries", lambda d: torch.tensor(_int(d))),
            n_empty=part("n_empty", lambda d: {k: torch.tensor(_int(v)) for k, v in d.items()}, {}),
        )
        out.ci = part("ci", lambda d: {k: _pair(v) for k, v in d.items()}, {})
        out.per_query = part("per_query", lambda d: {k: _tensor(v) for k, v in d.items()}, {})
        out.query_ids = part("query_ids", lambda d: torch.tensor([_int(i) for i in _list(d)], dtype=torch.int64))
        out.curves = part("curves", lambda d: {k: (_tensor(c["x"]), _tensor(c["y"])) for k, c in d.items()}, {})
        out.neighbours = part("neighbours", lambda d: (torch.tensor(_ints(d["ids"]), dtype=torch.int64),
                                                       _tensor(d["scores"])))
        return out


    def worst(self, key: str, n: int = 10) -> Tuple[Tensor, Tensor]:
        """The ``n`` queries with the worst value of ``key``: ``(ids, values)``, worst
        first (the lowest; the highest for a key where lower is better: ``fall_out``,
        ``popularity``, ``fnmr``...), equal values in query order; skipped queries (NaN)
        are left out. ``ids`` are ``query_ids`` when the input had ids, else positions in
        ``per_query``. Needs the per-query values (``keep_per_query=True``; the adapters keep them).

        Example:
            >>> r = MetricResults()
            >>> r.per_query["mrr"] = torch.tensor([0.5, 0.2, float("nan"), 0.2, 1.0], dtype=torch.float64)
            >>> ids, values = r.worst("mrr", 3)
            >>> ids.tolist(), values.tolist()
            ([1, 3, 0], [0.2, 0.2, 0.5])
        """
        if key not in self.per_query:
            kept = sorted(self.per_query)
            raise KeyError(
                f"no per-query values of {key!r}; evaluate with keep_per_query=True (kept: {kept or 'none'})"
            )
        if isinstance(n, bool) or not isinstance(n, int) or n < 0:
            raise ValueError(f"n must be an int >= 0; got {n!r}")
        values = self.per_query[key]
        defined = (~torch.isnan(values)).nonzero().squeeze(1)
        order = torch.argsort(values[defined], stable=True, descending=lower_is_better(key))[:n]
        rows = defined[order]
        ids = rows if self.query_ids is None else self.query_ids.to(rows.device)[rows]
        return ids, values[rows]


def plain(value):
    """A tensor (or number) as a Python float/int or nested list, NaN as None."""
    if isinstance(value, Tensor):
        value = value.detach().cpu().tolist()
    if isinstance(value, list):
        return [plain(v) for v in value]
    if isinstance(value, float) and math.isnan(value):
        return None
    return value


_FORMS = {
    "values": "{key: number or list}", "n_queries": "an int", "n_empty": "{key: int}",
    "ci": "{key: [low, high]}", "per_query": "{key: [numbers]}", "query_ids": "a list of ints",
    "curves": '{key: {"x": [...], "y": [...]}}', "neighbours": '{"ids": [[...]], "scores": [[...]]}',
}


def _int(value) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"not an int: {value!r:.40}")
    return value


def _list(value) -> list:
    if not isinstance(value, list):
        raise TypeError(f"not a list: {value!r:.40}")
    return value


def _ints(value):
    """A nested list of ints, checked (a float id would be truncated by torch.tensor)."""
    return [_ints(v) for v in value] if isinstance(value, list) else _int(value)


def _pair(value) -> Tuple[Tensor, Tensor]:
    if not isinstance(value, (list, tuple)) or len(value) != 2:
        raise ValueError(f"not a [low, high] pair: {value!r:.40}")
    return _tensor(value[0]), _tensor(value[1])


def _tensor(value) -> Tensor:
    """The float64 tensor of a :func:`plain` value (None back to NaN)."""
    def nan(v):
        if isinstance(v, list):
            return [nan(x) for x in v]
        if v is None:
            return float("nan")
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise TypeError(f"not a number: {v!r:.40}")
        return v
    return torch.tensor(nan(value), dtype=torch.float64)


if hasattr(torch.serialization, "add_safe_globals"):  # torch >= 2.4: torch.load(weights_only=True) of results
    torch.serialization.add_safe_globals([MetricResults])
    try:  # results saved before the stats/ package name the class by its old module path
        torch.serialization.add_safe_globals([(MetricResults, "retrieval_core.aggregate.MetricResults")])
    except (TypeError, ValueError):  # torch 2.4 takes classes only
        pass

