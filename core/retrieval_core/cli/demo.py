"""The demo of the command line: two embeddings of scikit-learn's digits, evaluated."""
from __future__ import annotations

from typing import Dict, Sequence

import torch

from .. import optional
from ..evaluation.embeddings import evaluate_embeddings
from ..stats.aggregate import MetricResults

__all__ = ["demo_results", "demo"]


def _digits():
    try:
        datasets = optional.require("sklearn.datasets", feature="the demo", package="scikit-learn")
    except ImportError:
        raise ImportError(f"the demo uses scikit-learn's digits: {optional.install_hint('scikit-learn')}") from None
    digits = datasets.load_digits()
    x = torch.tensor(digits.data, dtype=torch.float32)
    labels = torch.tensor(digits.target)
    projection = torch.randn(x.shape[1], 16, generator=torch.Generator().manual_seed(0))
    return {"raw pixels (64-d)": x, "random projection (16-d)": x @ projection}, labels


def demo_results(metrics: Sequence[str], **options) -> Dict[str, MetricResults]:
    """Two "models" of scikit-learn's digits, side by side: raw pixels and a random
    16-d projection; each image is a query against all the others."""
    models, labels = _digits()
    return {name: evaluate_embeddings(emb, labels, metrics, **options) for name, emb in models.items()}


def demo(metrics: Sequence[str]) -> Dict[str, Dict[str, float]]:
    """:func:`demo_results` as plain floats."""
    return {name: {k: float(v) for k, v in r.items()} for name, r in demo_results(metrics).items()}
