"""retrieval_core.reporting.plot: figures rendered on Agg, checked for their axes, labels and data."""
from __future__ import annotations

import itertools
import math
import subprocess
import sys
import textwrap

import pytest
import torch

pytest.importorskip("matplotlib")  # in the test extra; the plot extra for users

import retrieval_core as rc  # noqa: E402
from retrieval_core.reporting import plot  # noqa: E402
from retrieval_core import MetricResults  # noqa: E402


@pytest.fixture()
def digits_like():
    g = torch.Generator().manual_seed(3)
    centres = torch.randn(4, 6, generator=g) * 2
    labels = torch.arange(80) % 4
    x = centres[labels] + torch.randn(80, 6, generator=g)
    return x, labels


def _render(fig):
    fig.canvas.draw()  # the Agg canvas renders without pyplot
    width, height = fig.canvas.get_width_height()
    assert width > 100 and height > 100


def test_at_k_keys_and_bad_input():
    assert plot.at_k_keys("cmc", 3) == ["cmc@1", "cmc@2", "cmc@3"]
    assert plot.at_k_keys(["recall", "precision"], [2, 4]) == ["recall@2", "recall@4", "precision@2", "precision@4"]
    with pytest.raises(ValueError, match=r"unknown metric 'recal'.*did you mean recall@1"):
        plot.at_k_keys("recal", 2)
    with pytest.raises(ValueError, match=r"k must be a positive int or a list of positive ints; got 0"):
        plot.at_k_keys("cmc", 0)
    with pytest.raises(TypeError, match=r"k must be a positive int"):
        plot.at_k_keys("cmc", True)


def test_plot_at_k_draws_the_values_of_one_evaluation(digits_like):
    x, labels = digits_like
    keys = plot.at_k_keys(["cmc", "recall"], 6)
    r = rc.evaluate_embeddings(x, labels, keys)
    fig = plot.plot_at_k(r, ["cmc", "recall"], title="toy")
    _render(fig)
    (ax,) = fig.axes
    lines = ax.get_lines()
    assert [line.get_label() for line in lines] == ["CMC", "recall@k"]
    for line, name in zip(lines, ["cmc", "recall"]):
        assert list(line.get_xdata()) == [1, 2, 3, 4, 5, 6]
        # each point equals the key evaluated on its own (the one-call evaluation changes nothing)
        alone = [rc.evaluate_embeddings(x, labels, [f"{name}@{k}"])[f"{name}@{k}"].item() for k in range(1, 7)]
        assert list(line.get_ydata()) == pytest.approx(alone)
    cmc = lines[0].get_ydata()
    assert all(a <= b + 1e-12 for a, b in zip(cmc, cmc[1:]))  # CMC never decreases with k
    assert ax.get_xlabel() == "k (number of retrieved items)"
    assert ax.get_title() == "toy"
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["CMC", "recall@k"]


def test_plot_at_k_default_names_and_interval_band():
    r = MetricResults({"cmc@1": torch.tensor(0.5), "cmc@2": torch.tensor(0.7), "cmc@3": torch.tensor(0.9),
                       "map@r": torch.tensor(0.3)})
    r.ci = {"cmc@1": (torch.tensor(0.4), torch.tensor(0.6)), "cmc@2": (torch.tensor(0.6), torch.tensor(0.8)),
            "cmc@3": (torch.tensor(0.85), torch.tensor(0.95))}
    fig = plot.plot_at_k(r)  # map@r has no integer cutoff: not a curve
    ax = fig.axes[0]
    assert [line.get_label() for line in ax.get_lines()] == ["CMC"]
    assert ax.get_ylabel() == "CMC" and ax.get_title() == "CMC curve (shaded: interval)"
    low, high = ax.get_ylim()
    assert low < 0.4 and 0.95 < high <= 1.01  # the axis holds the bands
    (band,) = ax.collections
    ys = band.get_paths()[0].vertices[:, 1]
    assert min(ys) == pytest.approx(0.4) and max(ys) == pytest.approx(0.95)
    with pytest.raises(ValueError, match=r"no key ndcg@<k> in the results"):
        plot.plot_at_k(r, ["ndcg"])
    with pytest.raises(ValueError, match=r"plot_at_k needs keys name@1, name@2"):
        plot.plot_at_k({"map@r": torch.tensor(0.3)})


def test_erc_baselines_against_brute_force():
    g = torch.Generator().manual_seed(1)
    errors = torch.rand(6, generator=g, dtype=torch.float64)
    kept, oracle, random = plot.erc_baselines(errors)
    n = errors.numel()
    assert kept.tolist() == pytest.approx([j / n for j in range(1, n + 1)])
    for j in range(1, n + 1):
        # oracle: the best mean error of any j kept queries
        best = min(sum(errors[list(s)].tolist()) / j for s in itertools.combinations(range(n), j))
        assert oracle[j - 1].item() == pytest.approx(best)
        # random: the mean error of the first j over every order of the queries
        orders = list(itertools.permutations(range(n)))
        expected = sum(errors[list(p[:j])].sum().item() / j for p in orders) / len(orders)
        assert random[j - 1].item() == pytest.approx(expected)
    # NaN (undefined queries) are left out
    kept, oracle, _ = plot.erc_baselines(torch.tensor([float("nan"), 1.0, 0.0]))
    assert kept.tolist() == [0.5, 1.0] and oracle.tolist() == [0.0, 0.5]
    with pytest.raises(ValueError, match=r"at least one defined"):
        plot.erc_baselines(torch.tensor([float("nan")]))


def _erc(values, confidence):
    """The ERC of the issue, written out: errors ordered by confidence, running mean."""
    order = sorted(range(len(values)), key=lambda i: -confidence[i])
    errors = [1 - values[i] for i in order]
    n = len(values)
    return [j / n for j in range(1, n + 1)], [sum(errors[:j]) / j for j in range(1, n + 1)]


def test_plot_erc_curve_oracle_and_random():
    values = [1.0, 0.0, 1.0, 1.0, 0.0, 1.0]
    confidence = [0.9, 0.2, 0.8, 0.4, 0.6, 0.1]
    kept, error = _erc(values, confidence)
    r = MetricResults({"cmc@1": torch.tensor(4 / 6), "erc:cmc@1": torch.tensor(sum(error) / 6)})
    r.curves["erc:cmc@1"] = (torch.tensor(kept), torch.tensor(error))
    r.per_query["cmc@1"] = torch.tensor(values)
    fig = plot.plot_erc(r, "erc:cmc@1", label="model")
    _render(fig)
    ax = fig.axes[0]
    model, oracle, random = ax.get_lines()
    assert list(model.get_xdata()) == pytest.approx(kept) and list(model.get_ydata()) == pytest.approx(error)
    assert list(oracle.get_ydata()) == pytest.approx([0, 0, 0, 0, 1 / 5, 2 / 6])  # the two errors last
    assert list(random.get_ydata()) == pytest.approx([2 / 6, 2 / 6])
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert legend[0] == f"model (AUERC {sum(error) / 6:.3f})"
    assert legend[1].startswith("oracle (AUERC") and legend[2] == f"random (AUERC {2 / 6:.3f})"
    assert ax.get_xlabel() == "fraction of queries kept (most confident first)"
    assert ax.get_ylabel() == "error = 1 − cmc@1" and ax.get_title() == "error versus reject: cmc@1"
    # without per-query values: no oracle, the random line at the curve's last point
    r.per_query.clear()
    lines = plot.plot_erc(r, "cmc@1").axes[0].get_lines()
    assert len(lines) == 2 and list(lines[1].get_ydata()) == pytest.approx([error[-1]] * 2)
    with pytest.raises(ValueError, match=r"no curve 'erc:map@r' \(curves: erc:cmc@1\)"):
        plot.plot_erc(r, "map@r")


def test_plot_confidence_curve():
    r = MetricResults({"conf:cmc@1": torch.tensor(0.8)})
    t, v = [0.0, 0.25, 0.5, 0.75, 1.0], [0.6, 0.7, 0.8, 0.9, float("nan")]
    r.curves["conf:cmc@1"] = (torch.tensor(t), torch.tensor(v))
    ax = plot.plot_confidence(r, "cmc@1").axes[0]
    (line,) = ax.get_lines()
    assert list(line.get_xdata()) == pytest.approx(t)
    assert list(line.get_ydata())[:4] == pytest.approx(v[:4]) and math.isnan(line.get_ydata()[4])
    assert ax.get_xlabel() == "confidence threshold t"
    assert ax.get_ylabel() == "cmc@1 of queries with confidence ≥ t"


def test_plot_categories_points_and_intervals(digits_like):
    x, labels = digits_like
    r = rc.evaluate_embeddings(x, labels, ["map@r"], per_class="all")
    ax = plot.plot_categories(r, "map@r").axes[0]
    points = ax.containers[0].lines[0]
    assert list(points.get_xdata()) == [0, 1, 2, 3]
    assert list(points.get_ydata()) == pytest.approx([r[f"map@r/class={c}"].item() for c in range(4)])
    assert [t.get_text() for t in ax.get_xticklabels()] == ["0", "1", "2", "3"]
    assert ax.get_xlabel() == "class" and ax.get_title() == "map@r per class"
    overall = [line for line in ax.get_lines() if line.get_linestyle() == "--"]
    assert len(overall) == 1 and list(overall[0].get_ydata()) == pytest.approx([r["map@r"].item()] * 2)
    # per-category entries with intervals: error bars from results.ci
    r2 = MetricResults({"cmc@1": torch.tensor(0.5), "cmc@1/a": torch.tensor(0.4), "cmc@1/b": torch.tensor(0.6)})
    r2.ci = {"cmc@1/a": (torch.tensor(0.3), torch.tensor(0.5)), "cmc@1/b": (torch.tensor(0.55), torch.tensor(0.7))}
    ax = plot.plot_categories(r2, "cmc@1", label_name="digit").axes[0]
    assert ax.get_xlabel() == "digit" and ax.get_title() == "cmc@1 per digit"
    (bars,) = ax.containers[0].lines[2]
    spans = sorted((float(min(s[:, 1])), float(max(s[:, 1]))) for s in bars.get_segments())
    assert [v for span in spans for v in span] == pytest.approx([0.3, 0.5, 0.55, 0.7])
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert "cmc@1 per digit (error bar: interval)" in legend and "all queries: 0.500" in legend
    ax = plot.plot_categories(r2, "cmc@1", style="bars").axes[0]
    assert [p.get_height() for p in ax.patches] == pytest.approx([0.4, 0.6]) and ax.get_ylim()[0] == 0
    with pytest.raises(ValueError, match=r"style must be 'points' or 'bars'; got 'pie'"):
        plot.plot_categories(r2, "cmc@1", style="pie")
    with pytest.raises(ValueError, match=r"no per-class entries of 'cmc@1'.*per_class='all'"):
        plot.plot_categories(r2, "cmc@1", kind="class")


def test_plot_values_single_and_steps():
    fig, ax = plot.plot_values({"ndcg@10": torch.tensor(0.7), "mrr": torch.tensor(0.5)}, name="m",
                               lower_bound=0.0, upper_bound=1.0, higher_is_better=True)
    (line,) = ax.get_lines()
    assert list(line.get_ydata()) == pytest.approx([0.7, 0.5])
    assert ax.get_ylabel() == "value (higher is better)" and ax.get_ylim()[0] < 0 < 1 < ax.get_ylim()[1]
    steps = [{"mrr": torch.tensor(0.1)}, {"mrr": torch.tensor(0.3)}, {"mrr": torch.tensor(0.2)}]
    fig, ax = plot.plot_values(steps)
    (line,) = ax.get_lines()
    assert list(line.get_xdata()) == [0, 1, 2] and list(line.get_ydata()) == pytest.approx([0.1, 0.3, 0.2])
    assert ax.get_xlabel() == "step"


def test_ax_argument_draws_into_the_given_axes():
    r = MetricResults({"cmc@1": torch.tensor(0.5), "cmc@2": torch.tensor(0.7)})
    fig = plot.plot_at_k(r, label="A")
    again = plot.plot_at_k(MetricResults({"cmc@1": torch.tensor(0.6), "cmc@2": torch.tensor(0.8)}),
                           ax=fig.axes[0], label="B")
    assert again is fig and [line.get_label() for line in fig.axes[0].get_lines()] == ["A: CMC", "B: CMC"]


def test_no_pyplot_state_and_png(tmp_path):
    code = textwrap.dedent(f"""
        import sys, torch
        from retrieval_core.reporting import plot
        fig = plot.plot_at_k({{"cmc@1": torch.tensor(0.5), "cmc@2": torch.tensor(0.7)}})
        fig.savefig({str(tmp_path / 'cmc.png')!r})
        assert "matplotlib.pyplot" not in sys.modules, "pyplot was imported"
    """)
    subprocess.run([sys.executable, "-c", code], check=True)
    png = (tmp_path / "cmc.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n"


def test_missing_matplotlib_message(monkeypatch):
    for name in ("matplotlib", "matplotlib.figure", "matplotlib.backends.backend_agg"):
        monkeypatch.setitem(sys.modules, name, None)
    with pytest.raises(ImportError, match=r"^plot_at_k\(\) needs matplotlib: pip install 'retrieval-metrics\[plot\]'$"):
        plot.plot_at_k({"cmc@1": torch.tensor(0.5), "cmc@2": torch.tensor(0.7)})
