"""Plots of results: metric@k curves, ERC curves, per-category bars, confidence curves.

matplotlib is optional (``pip install retrieval-metrics[plot]``) and imported only
when a plot is drawn. Every function returns a ``matplotlib.figure.Figure`` built
directly on an Agg canvas: nothing goes through pyplot's global state, so figures
are never shown by accident nor kept alive by pyplot. Save one with
``fig.savefig("cmc.png")``. With ``ax=`` a function draws into that axes (for
example to put two models on one plot) and returns ``ax.figure``.

The data helpers (:func:`at_k_keys`, :func:`at_k_series`, :func:`erc_baselines`,
:func:`category_values`) need no matplotlib.

Example:
    >>> import torch
    >>> from retrieval_core import evaluate_embeddings
    >>> from retrieval_core.reporting import plot
    >>> x, labels = torch.randn(60, 8, generator=torch.Generator().manual_seed(0)), torch.arange(60) % 3
    >>> keys = plot.at_k_keys(["cmc", "precision"], 5)
    >>> keys[:3]
    ['cmc@1', 'cmc@2', 'cmc@3']
    >>> r = evaluate_embeddings(x, labels, keys)  # one search for every k
    >>> fig = plot.plot_at_k(r)
    >>> [line.get_label() for line in fig.axes[0].get_lines()]
    ['CMC', 'precision@k']

Shared helpers are in ``plot_axes``, the curve plots in ``plot_curves`` (re-exported here).
"""
from __future__ import annotations

import torch
from torch import Tensor
from typing import Dict, Iterable, List, Mapping, Optional, Sequence, Tuple, Union

from ..metrics.keys import parse_metrics
from .plot_curves import erc_baselines, plot_confidence, plot_curve, plot_erc
from .plot_axes import _AT_INT, _fit_values, _new_axes, _plain_text, _pretty

__all__ = [
    "at_k_keys",
    "at_k_series",
    "category_values",
    "erc_baselines",
    "plot_at_k",
    "plot_categories",
    "plot_confidence",
    "plot_curve",
    "plot_erc",
    "plot_values",
]


def at_k_keys(names: Union[str, Sequence[str]], k: Union[int, Iterable[int]]) -> List[str]:
    """The keys ``name@1 .. name@k`` (or ``name@i`` for each i of an iterable) of every
    name, checked: evaluate them in one call to draw :func:`plot_at_k` from one search.

    Example:
        >>> at_k_keys("recall", [1, 5, 10])
        ['recall@1', 'recall@5', 'recall@10']
    """
    names = [names] if isinstance(names, str) else list(names)
    if isinstance(k, bool):
        raise TypeError(f"k must be a positive int or a list of them; got {k!r}")
    ks = list(range(1, k + 1)) if isinstance(k, int) else list(k)
    if not ks or any(isinstance(i, bool) or not isinstance(i, int) or i <= 0 for i in ks):
        raise ValueError(f"k must be a positive int or a list of positive ints; got {k!r}")
    keys = [f"{n}@{i}" for n in names for i in ks]
    parse_metrics(keys)  # unknown names and forms fail here, with the registry's message
    return keys


def at_k_series(results: Mapping[str, Tensor], name: str
                ) -> Tuple[List[int], List[float], Optional[List[Tuple[float, float]]]]:
    """``(ks, values, intervals or None)`` of the keys ``name@<int>`` in ``results``, by k.

    Example:
        >>> r = {"cmc@2": torch.tensor(0.9), "cmc@1": torch.tensor(0.5), "map@r": torch.tensor(0.4)}
        >>> at_k_series(r, "cmc")
        ([1, 2], [0.5, 0.8999999761581421], None)
    """
    found = []
    for key in results:
        m = _AT_INT.match(key)
        if m and m.group(1) == name:
            found.append((int(m.group(2)), key))
    found.sort()
    ks = [k for k, _ in found]
    values = [float(results[key]) for _, key in found]
    ci = getattr(results, "ci", {}) or {}
    intervals = None
    if found and all(key in ci for _, key in found):
        intervals = [(float(ci[key][0]), float(ci[key][1])) for _, key in found]
    return ks, values, intervals


def plot_at_k(results: Mapping[str, Tensor], names: Optional[Sequence[str]] = None, *, ax=None,
              title: Optional[str] = None, label: Optional[str] = None):
    """metric@k over k (CMC, recall@k, precision@k...): one line per name, from the
    keys ``name@1, name@2, ...`` of one evaluation (see :func:`at_k_keys`), with a
    shaded band where ``results.ci`` holds their intervals.

    Args:
        results: a ``MetricResults`` (or dict) holding ``name@k`` keys.
        names: metric names (``"cmc"``, ``"recall"``...); None: every name with at
            least two integer cutoffs in ``results``.
        ax: draw into this matplotlib axes instead of a new figure.
        title: the figure title (default: from the names).
        label: prefix of each line's legend entry (e.g. the model's name).
    """
    if names is None:
        counts: Dict[str, int] = {}
        for key in results:
            m = _AT_INT.match(key)
            if m:
                counts[m.group(1)] = counts.get(m.group(1), 0) + 1
        names = [n for n, c in counts.items() if c >= 2]
    names = [names] if isinstance(names, str) else list(names)
    if not names:
        raise ValueError("plot_at_k needs keys name@1, name@2, ... in the results; build them with "
                         "plot.at_k_keys(['cmc'], 10) and evaluate them in one call")
    fig, ax = _new_axes(ax, "plot_at_k()")
    banded = False
    for name in names:
        ks, values, intervals = at_k_series(results, name)
        if not ks:
            raise ValueError(f"no key {name}@<k> in the results (keys: {', '.join(results)})")
        text = _pretty(name) if label is None else f"{label}: {_pretty(name)}"
        (line,) = ax.plot(ks, values, marker="o" if len(ks) <= 30 else None, markersize=3, label=text)
        if intervals is not None:
            ax.fill_between(ks, [lo for lo, _ in intervals], [hi for _, hi in intervals], alpha=0.2,
                            color=line.get_color(), linewidth=0)
            banded = True
        if len(ks) <= 12:
            ax.set_xticks(ks)
    ax.set_xlabel("k (number of retrieved items)")
    ax.set_ylabel("value" if len(names) > 1 else _pretty(names[0]))
    _fit_values(ax)
    ax.grid(True, alpha=0.3)
    ax.legend(loc="best")
    ax.set_title((title or (f"{_pretty(names[0])} curve" if len(names) == 1 else "metrics at cutoff k"))
                 + (" (shaded: interval)" if banded else ""))
    return _plain_text(fig)


def category_values(results: Mapping[str, Tensor], key: str, kind: Optional[str] = None
                    ) -> Tuple[str, List[str], List[float], Optional[List[Tuple[float, float]]]]:
    """``(kind, labels, values, intervals or None)`` of the per-category
    (``"key/<label>"``) or per-class (``"key/class=<label>"``) entries of ``key``.

    ``kind``: ``"category"``, ``"class"`` or None (per-class when present, else per-category).

    Example:
        >>> r = {"map@r": 0.5, "map@r/class=0": 0.4, "map@r/class=1": 0.6}
        >>> category_values(r, "map@r")
        ('class', ['0', '1'], [0.4, 0.6], None)
    """
    if kind not in (None, "category", "class"):
        raise ValueError(f"kind must be 'category', 'class' or None; got {kind!r}")
    prefix = f"{key}/"
    by_class = [k for k in results if k.startswith(prefix + "class=")]
    by_category = [k for k in results if k.startswith(prefix) and not k.startswith(prefix + "class=")]
    if kind is None:
        kind = "class" if by_class else "category"
    keys = by_class if kind == "class" else by_category
    if not keys:
        raise ValueError(f"the results hold no per-{kind} entries of {key!r} (expected keys like "
                         f"'{key}/{'class=' if kind == 'class' else ''}<label>'): pass "
                         f"{'per_class=' + repr('all') if kind == 'class' else 'categories='} when evaluating")
    start = len(prefix) + (len("class=") if kind == "class" else 0)
    labels = [k[start:] for k in keys]
    values = [float(results[k]) for k in keys]
    ci = getattr(results, "ci", {}) or {}
    intervals = [(float(ci[k][0]), float(ci[k][1])) for k in keys] if all(k in ci for k in keys) else None
    return kind, labels, values, intervals


def plot_categories(results: Mapping[str, Tensor], key: str, *, kind: Optional[str] = None, ax=None,
                    title: Optional[str] = None, label_name: Optional[str] = None, style: str = "points"):
    """``key`` per category or per class (see :func:`category_values`), with the
    interval of each as an error bar when ``results.ci`` holds them, and the value
    over all queries as a dashed line.

    ``style="points"`` (default): one point per label, the value axis fitted to the
    points so that close values stay apart; ``"bars"``: bars from 0. ``label_name``
    names the labels (default ``kind``: "class" or "category"), e.g. ``"digit"``.

    Example:
        >>> r = {"map@r": torch.tensor(0.5), "map@r/a": torch.tensor(0.4), "map@r/b": torch.tensor(0.6)}
        >>> ax = plot_categories(r, "map@r", label_name="group").axes[0]
        >>> ax.get_title(), [t.get_text() for t in ax.get_xticklabels()]
        ('map@r per group', ['a', 'b'])
    """
    if style not in ("points", "bars"):
        raise ValueError(f"style must be 'points' or 'bars'; got {style!r}")
    kind, labels, values, intervals = category_values(results, key, kind)
    label_name = label_name or kind
    fig, ax = _new_axes(ax, "plot_categories()", figsize=(max(6.4, 0.35 * len(labels) + 2), 4.4))
    positions = list(range(len(labels)))
    yerr = None
    if intervals is not None:
        yerr = [[max(v - lo, 0.0) for v, (lo, _) in zip(values, intervals)],
                [max(hi - v, 0.0) for v, (_, hi) in zip(values, intervals)]]
    text = f"{key} per {label_name}" + (" (error bar: interval)" if yerr else "")
    if style == "bars":
        ax.bar(positions, values, yerr=yerr, capsize=4 if yerr else 0, color="tab:blue", alpha=0.8, label=text)
    else:
        ax.errorbar(positions, values, yerr=yerr, fmt="o", capsize=4 if yerr else 0, color="tab:blue", label=text)
    if key in results:
        overall = float(results[key])
        ax.axhline(overall, color="tab:red", linestyle="--", label=f"all queries: {overall:.3f}")
    ax.set_xticks(positions)
    ax.set_xticklabels(labels, rotation=0 if len(labels) <= 12 else 90, parse_math=False)
    ax.set_xlim(-0.5, len(labels) - 0.5)
    ax.set_xlabel(label_name)
    ax.set_ylabel(key)
    ax.grid(True, axis="y", alpha=0.3)
    ax.legend(loc="best", framealpha=0.9)
    ax.set_title(title or f"{key} per {label_name}")
    return _plain_text(fig)


def _as_series(val) -> Dict[str, Tensor]:
    if isinstance(val, Mapping):
        return {str(k): torch.as_tensor(v).detach().cpu().double().reshape(-1) for k, v in val.items()}
    t = torch.as_tensor(val).detach().cpu().double().reshape(-1)
    return {"": t} if t.numel() == 1 else {str(i): t[i:i + 1] for i in range(t.numel())}


def plot_values(val, *, ax=None, name: Optional[str] = None, lower_bound: Optional[float] = None,
                upper_bound: Optional[float] = None, higher_is_better: Optional[bool] = None):
    """Values of a metric as torchmetrics plots them: ``(figure, axes)``.

    ``val`` is one result (a 0-d/1-d tensor or a ``{key: tensor}`` dict): one point
    per key, labelled with its value; or a sequence of results (e.g. one per epoch):
    one line per key over the step. ``lower_bound``/``upper_bound`` fix the value
    axis; ``higher_is_better`` adds an arrow to the axis label.

    Example:
        >>> fig, ax = plot_values({"ndcg@10": torch.tensor(0.7), "mrr": torch.tensor(0.5)}, name="ranking")
        >>> ax.get_title(), [t.get_text() for t in ax.get_xticklabels()]
        ('ranking', ['ndcg@10', 'mrr'])
    """
    fig, ax = _new_axes(ax, "plot()")
    multi = isinstance(val, (list, tuple)) and len(val) > 0 and not isinstance(val[0], (int, float))
    if multi:
        steps = [_as_series(v) for v in val]
        keys = list(steps[0])
        for key in keys:
            ys = [float(s[key][0]) if key in s else float("nan") for s in steps]
            ax.plot(range(len(steps)), ys, marker="o", markersize=3, label=key or name or "value")
        ax.set_xlabel("step")
        ax.set_xticks(range(len(steps)))
        if len(keys) > 1 or keys[0]:
            ax.legend(loc="best")
    else:
        series = _as_series(val)
        keys = list(series)
        ys = [float(series[k][0]) for k in keys]
        positions = list(range(len(keys)))
        ax.plot(positions, ys, linestyle="none", marker="o", markersize=8)
        for x, y in zip(positions, ys):
            ax.annotate(f"{y:.4f}", (x, y), textcoords="offset points", xytext=(0, 8), ha="center")
        ax.set_xticks(positions)
        ax.set_xticklabels([k or (name or "value") for k in keys], rotation=0 if len(keys) <= 8 else 90,
                           parse_math=False)
        ax.set_xlim(-0.5, len(keys) - 0.5)
    if lower_bound is not None or upper_bound is not None:
        lo, hi = ax.get_ylim()
        low = lo if lower_bound is None else lower_bound
        high = hi if upper_bound is None else upper_bound
        pad = 0.05 * (high - low)
        ax.set_ylim(lo if lower_bound is None else low - pad, hi if upper_bound is None else high + pad)
    arrow = "" if higher_is_better is None else (" (higher is better)" if higher_is_better else " (lower is better)")
    ax.set_ylabel(f"value{arrow}")
    ax.grid(True, alpha=0.3)
    if name:
        ax.set_title(name)
    return _plain_text(fig), ax
