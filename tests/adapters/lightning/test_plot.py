"""``.plot()`` of the torchmetrics metrics: torchmetrics' convention ``plot(val=None, ax=None) -> (fig, ax)``,
drawn on Agg, checked for the plotted data."""
from __future__ import annotations

import pytest
import torch

pytest.importorskip("matplotlib")

import lightning_retrieval as lr  # noqa: E402
from retrieval_core import optional  # noqa: E402


def _ranking_metric():
    m = lr.RankingMetrics(["mrr@3", "precision@1", "ndcg@3"])
    m.update(torch.tensor([[0.9, 0.2, 0.5], [0.1, 0.8, 0.3]]), torch.tensor([[1, 0, 0], [0, 0, 1]]))
    return m


def test_plot_without_value_plots_compute():
    m = _ranking_metric()
    fig, ax = m.plot()
    assert ax in fig.axes
    (points,) = ax.get_lines()
    want = m.compute()
    assert list(points.get_ydata()) == pytest.approx([want[k].item() for k in ("mrr@3", "precision@1", "ndcg@3")])
    assert [t.get_text() for t in ax.get_xticklabels()] == ["mrr@3", "precision@1", "ndcg@3"]
    assert ax.get_title() == "RankingMetrics"
    fig.canvas.draw()


def test_plot_of_several_steps_into_a_given_axes():
    m = _ranking_metric()
    values = []
    for step in range(3):
        m.reset()
        m.update(torch.tensor([[0.9, 0.2, 0.5 + step / 2]]), torch.tensor([[0, 0, 1]]))
        values.append(m.compute())
    ax = optional.figure("test").add_subplot()
    fig, ax2 = m.plot(values, ax=ax)
    assert ax2 is ax and fig is ax.figure
    lines = {line.get_label(): line for line in ax.get_lines()}
    assert set(lines) == {"mrr@3", "precision@1", "ndcg@3"}
    assert list(lines["precision@1"].get_ydata()) == pytest.approx([v["precision@1"].item() for v in values])
    assert list(lines["precision@1"].get_xdata()) == [0, 1, 2] and ax.get_xlabel() == "step"


def test_dropin_plot_uses_its_bounds_and_direction():
    preds = torch.tensor([0.9, 0.2, 0.5, 0.1, 0.8, 0.3])
    target = torch.tensor([1, 0, 0, 0, 0, 1])
    indexes = torch.tensor([0, 0, 0, 1, 1, 1])
    m = lr.RetrievalMAP()
    m.update(preds, target, indexes)
    fig, ax = m.plot()
    assert list(ax.get_lines()[0].get_ydata()) == pytest.approx([m.compute().item()])
    low, high = ax.get_ylim()
    assert low < 0.0 and high > 1.0  # plot_lower_bound/plot_upper_bound of the drop-ins
    assert ax.get_ylabel() == "value (higher is better)" and ax.get_title() == "RetrievalMAP"
    curve = lr.RetrievalPrecisionRecallCurve(max_k=3)
    curve.update(preds, target, indexes)
    fig, ax = curve.plot()
    precision, recall, _ = curve.compute()
    (line,) = ax.get_lines()
    assert list(line.get_xdata()) == pytest.approx(recall.tolist())
    assert list(line.get_ydata()) == pytest.approx(precision.tolist())
    assert ax.get_xlabel() == "recall@k" and ax.get_ylabel() == "precision@k"


def test_plot_names_matplotlib_when_missing(monkeypatch):
    import sys

    for name in ("matplotlib", "matplotlib.figure", "matplotlib.backends.backend_agg"):
        monkeypatch.setitem(sys.modules, name, None)
    with pytest.raises(ImportError, match=r"^plot\(\) needs matplotlib: pip install 'retrieval-metrics\[plot\]'$"):
        _ranking_metric().plot()
