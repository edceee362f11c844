"""Plots of curves: the error-versus-reject curve (with its baselines), the confidence curve, any curve."""
from __future__ import annotations

from typing import Optional, Tuple

import torch
from torch import Tensor

from .plot_axes import _float_list, _new_axes, _plain_text

__all__ = ["erc_baselines", "plot_erc", "plot_confidence", "plot_curve"]


def erc_baselines(errors: Tensor) -> Tuple[Tensor, Tensor, Tensor]:
    """``(kept_fraction, oracle, random)`` of per-query errors ``[Q]`` (NaN skipped):
    the oracle rejects the largest errors first (errors sorted ascending, running
    mean); a random order keeps the mean error at every kept fraction.

    Example:
        >>> kept, oracle, random = erc_baselines(torch.tensor([1.0, 0.0, 1.0, 0.0]))
        >>> kept.tolist(), oracle.tolist(), random.tolist()
        ([0.25, 0.5, 0.75, 1.0], [0.0, 0.0, 0.3333333333333333, 0.5], [0.5, 0.5, 0.5, 0.5])
    """
    e = torch.as_tensor(errors).detach().cpu().double().reshape(-1)
    e = e[~torch.isnan(e)]
    n = e.numel()
    if n == 0:
        raise ValueError("erc_baselines needs at least one defined (non-NaN) per-query error")
    j = torch.arange(1, n + 1, dtype=torch.float64)
    oracle = e.sort().values.cumsum(0) / j
    return j / n, oracle, torch.full((n,), float(e.mean()), dtype=torch.float64)


def _curve(results, prefix: str, key: str) -> Tuple[str, str, Tensor, Tensor]:
    base = key.split(":", 1)[1] if key.startswith(prefix) else key
    name = f"{prefix}{base}"
    curves = getattr(results, "curves", {}) or {}
    if name not in curves:
        have = ", ".join(curves) or "none"
        raise ValueError(f"the results hold no curve {name!r} (curves: {have}); evaluate the key {name!r} "
                         "with confidence=...")
    x, y = curves[name]
    return name, base, torch.as_tensor(x).detach().cpu().double(), torch.as_tensor(y).detach().cpu().double()


def plot_erc(results, key: str, *, ax=None, title: Optional[str] = None, label: Optional[str] = None,
             baselines: bool = True):
    """The error-versus-reject curve of ``key`` (``"erc:cmc@1"`` or ``"cmc@1"``): the
    mean error 1 − value of the most confident queries against the fraction kept,
    from ``results.curves["erc:<key>"]``, with the oracle (the largest errors rejected
    first; needs ``results.per_query[key]``) and the random baseline (the mean
    error). The legend gives each curve's area (AUERC, lower is better).

    Example:
        >>> from retrieval_core import MetricResults
        >>> r = MetricResults({"erc:cmc@1": torch.tensor(0.25)})
        >>> r.curves["erc:cmc@1"] = (torch.tensor([0.5, 1.0]), torch.tensor([0.0, 0.5]))
        >>> r.per_query["cmc@1"] = torch.tensor([1.0, 0.0])
        >>> ax = plot_erc(r, "cmc@1").axes[0]
        >>> [line.get_label() for line in ax.get_lines()]
        ['confidence order (AUERC 0.250)', 'oracle (AUERC 0.250)', 'random (AUERC 0.500)']
    """
    name, base, kept, error = _curve(results, "erc:", key)
    fig, ax = _new_axes(ax, "plot_erc()")
    auerc = float(results[name]) if name in results else float(error.mean())
    ax.plot(kept.tolist(), error.tolist(), label=f"{label or 'confidence order'} (AUERC {auerc:.3f})", linewidth=2)
    if baselines:
        per_query = getattr(results, "per_query", {}) or {}
        if base in per_query:
            x, oracle, random = erc_baselines(1 - torch.as_tensor(per_query[base]).detach().cpu().double())
            ax.plot(x.tolist(), oracle.tolist(), linestyle="--", color="tab:green",
                    label=f"oracle (AUERC {float(oracle.mean()):.3f})")
            mean_error = float(random[0])
        else:
            mean_error = float(error[-1])
        ax.plot([0.0, 1.0], [mean_error, mean_error], linestyle=":", color="tab:gray",
                label=f"random (AUERC {mean_error:.3f})")
    ax.set_xlabel("fraction of queries kept (most confident first)")
    ax.set_ylabel(f"error = 1 − {base}")
    ax.set_xlim(0, 1.0)
    ax.grid(True, alpha=0.3)
    ax.legend(loc="best")
    ax.set_title(title or f"error versus reject: {base}")
    return _plain_text(fig)


def plot_confidence(results, key: str, *, ax=None, title: Optional[str] = None, label: Optional[str] = None):
    """``key`` over the queries whose confidence is at least t, against the threshold t,
    from ``results.curves["conf:<key>"]`` (``key`` may carry the ``conf:`` prefix)."""
    _, base, thresholds, values = _curve(results, "conf:", key)
    fig, ax = _new_axes(ax, "plot_confidence()")
    ax.plot(thresholds.tolist(), values.tolist(), marker="o", markersize=3, label=label or base)
    ax.set_xlabel("confidence threshold t")
    ax.set_ylabel(f"{base} of queries with confidence ≥ t")
    ax.set_xlim(0, 1)
    ax.grid(True, alpha=0.3)
    if label is not None:
        ax.legend(loc="best")
    ax.set_title(title or f"{base} against confidence")
    return _plain_text(fig)


def plot_curve(x, y, *, xlabel: str, ylabel: str, ax=None, title: Optional[str] = None, label: Optional[str] = None):
    """A plain line of ``y`` over ``x`` with axis labels (used for curves computed elsewhere)."""
    fig, ax = _new_axes(ax, "plot_curve()")
    ax.plot(_float_list(x), _float_list(y), marker="o", markersize=3, label=label)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.grid(True, alpha=0.3)
    if label is not None:
        ax.legend(loc="best")
    if title:
        ax.set_title(title)
    return _plain_text(fig)
