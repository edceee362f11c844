"""Reports of results: markdown tables, a JSON file, PNG plots and one self-contained HTML page.

:func:`write_report` takes one ``MetricResults`` or several side by side
(``{"model A": results_a, "model B": results_b}``) and writes into a folder:

- ``report.md``: the metrics (with their intervals when ``ci`` was asked), the
  number of queries, the empty queries per key, and the per-class or
  per-category views;
- ``results.json``: ``{"title", "settings", "runs": {name: MetricResults.to_dict()}}``
  (read a run back with ``MetricResults.from_dict``);
- the PNG plots (metric@k curves, per-class bars, ERC and confidence curves,
  whichever the results hold), when matplotlib is installed;
- ``report.html``: the same tables with the plots inline (base64), one file to share.

Example:
    >>> import json, tempfile, torch
    >>> from retrieval_core import evaluate_embeddings
    >>> x, labels = torch.randn(40, 4, generator=torch.Generator().manual_seed(0)), torch.arange(40) % 2
    >>> r = evaluate_embeddings(x, labels, ["cmc@1", "map@r"])
    >>> with tempfile.TemporaryDirectory() as out:
    ...     paths = write_report(r, out, plots=False)
    ...     sorted(p.name for p in paths.values())
    ...     json.load(open(paths["json"]))["runs"]["results"]["n_queries"]
    ['report.html', 'report.md', 'results.json']
    40
"""
from __future__ import annotations

import base64
import html
import io
import json
import os
import re
from pathlib import Path
from typing import Dict, List, Mapping, Optional, Sequence, Tuple, Union

from ..stats.aggregate import MetricResults
from . import plot

__all__ = ["write_report", "markdown_report", "html_report", "report_figures", "format_value", "format_p_value",
           "md_text", "text_table"]

Runs = Mapping[str, MetricResults]
_AT_INT = re.compile(r"^[A-Za-z_]+@[0-9]+$")


def _runs(results: Union[MetricResults, Runs]) -> Dict[str, MetricResults]:
    if isinstance(results, MetricResults):
        return {"results": results}
    if not isinstance(results, Mapping) or not results or not all(isinstance(r, Mapping) for r in results.values()):
        raise TypeError("a report takes one MetricResults or a non-empty {name: MetricResults} mapping")
    return {str(k): v for k, v in results.items()}


def format_value(value, interval=None, digits: int = 4) -> str:
    """``"0.8123"``, ``"0.8123 [0.7900, 0.8300]"`` with an interval, ``"–"`` for NaN/None.

    Example:
        >>> format_value(0.81234, (0.79, 0.83))
        '0.8123 [0.7900, 0.8300]'
        >>> format_value(float("nan"))
        '–'
    """
    if value is None:
        return "–"
    try:
        v = float(value)
    except (TypeError, ValueError):  # reduce="none": a list of values
        return f"({len(value)} values)" if hasattr(value, "__len__") else str(value)
    if v != v:
        return "–"
    text = f"{v:.{digits}f}"
    if interval is not None:
        text += f" [{float(interval[0]):.{digits}f}, {float(interval[1]):.{digits}f}]"
    return text


P_VALUE_FLOOR = 1e-16  # below it a double's p-value says only "tiny": 1 - p rounds to 1


def format_p_value(p: float) -> str:
    """A p-value as printed: 4 significant digits (scientific when small), and
    ``"< 1e-16"`` below 1e-16, where a paired t-test's tail may underflow to 0:
    a p-value is never shown as a bare 0.

    Example:
        >>> format_p_value(0.0123456), format_p_value(3.2e-9), format_p_value(0.0)
        ('0.01235', '3.2e-09', '< 1e-16')
    """
    p = float(p)
    if p != p:
        return "–"
    return f"{p:.4g}" if p >= P_VALUE_FLOOR else f"< {P_VALUE_FLOOR:g}"


def text_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A terminal table: the header, then the rows; the first column left-aligned, the others right-aligned.

    Example:
        >>> print(text_table(["metric", "p-value"], [["map@r", "0.01"]]))
        metric  p-value
        map@r      0.01
    """
    table = [list(header)] + [list(r) for r in rows]
    widths = [max(len(r[i]) for r in table) for i in range(len(header))]
    return "\n".join("  ".join([r[0].ljust(widths[0])] + [c.rjust(w) for c, w in zip(r[1:], widths[1:])]).rstrip()
                     for r in table)


def _split(keys: Sequence[str]) -> Tuple[List[str], Dict[str, Dict[str, List[str]]]]:
    """(main keys, {view: {main key: [labels]}}) with views "class" and "category"."""
    main = [k for k in keys if "/" not in k]
    views: Dict[str, Dict[str, List[str]]] = {"class": {}, "category": {}}
    for k in keys:
        if "/" not in k:
            continue
        base, label = k.split("/", 1)
        if label.startswith("class="):
            views["class"].setdefault(base, []).append(label[len("class="):])
        else:
            views["category"].setdefault(base, []).append(label)
    return main, views


def _main_keys(runs: Dict[str, MetricResults], metrics: Optional[Sequence[str]]) -> List[str]:
    if metrics is not None:
        return list(metrics)
    keys: List[str] = []
    for r in runs.values():
        keys.extend(k for k in _split(list(r))[0] if k not in keys)
    return keys


def _cell(r: MetricResults, key: str) -> str:
    if key not in r:
        return "–"
    return format_value(number_or_list(r[key]), r.ci.get(key))


def number_or_list(v):
    """A 0-d tensor as a float, a larger one as a (nested) list; anything else as it is."""
    try:
        return float(v)
    except (TypeError, ValueError, RuntimeError):
        return v.tolist() if hasattr(v, "tolist") else v


def _tables(runs: Dict[str, MetricResults], metrics: Optional[Sequence[str]], category_name: str
            ) -> List[Tuple[str, List[str], List[List[str]]]]:
    """[(heading, header, rows)] shared by the markdown and the HTML report."""
    names = list(runs)
    keys = _main_keys(runs, metrics)
    any_ci = any(r.ci for r in runs.values())
    tables = []
    heading = "Metrics" + (" (value [interval])" if any_ci else "")
    rows = [[k] + [_cell(runs[n], k) for n in names] for k in keys]
    tables.append((heading, ["metric"] + names, rows))
    counts = [["queries"] + [str(int(runs[n].n_queries)) if runs[n].n_queries is not None else "–" for n in names]]
    for k in keys:
        if any(k in runs[n].n_empty for n in names):
            counts.append([f"empty queries: {k}"] + [str(int(runs[n].n_empty[k])) if k in runs[n].n_empty else "–"
                                                     for n in names])
    tables.append(("Queries (empty: the metric is undefined, e.g. no relevant item)", ["count"] + names, counts))
    for name in names:
        r = runs[name]
        _, views = _split(list(r))
        for view, by_key in views.items():
            shown = [k for k in keys if k in by_key]
            if not shown:
                continue
            labels: List[str] = []
            for k in shown:
                labels.extend(lab for lab in by_key[k] if lab not in labels)
            prefix = "class=" if view == "class" else ""
            title = "class" if view == "class" else category_name
            rows = [[lab] + [_cell(r, f"{k}/{prefix}{lab}") for k in shown] for lab in labels]
            where = f": {name}" if len(names) > 1 or name != "results" else ""
            tables.append((f"Per {title}{where}", [title] + shown, rows))
    return tables


# read as markup by Markdown (or its math extensions) wherever they stand; "_" only at a
# word's edge (CommonMark ignores it inside words such as map_hits); "<", ">" and "&" are
# escaped as HTML, which viewers render
_MD_SPECIAL = re.compile(r"[\\`*\[\]|~$]|(?<![A-Za-z0-9])_|_(?![A-Za-z0-9])")
_MD_NUMBERS = re.compile(r"[-+0-9.,\s\[\]–eE]*")


def md_text(text) -> str:
    """``text`` as literal Markdown: it shows as written, never as markup or HTML; line
    breaks become spaces.

    Example:
        >>> md_text("<b>_a_ map_hits</b> [x](y) $x$")
        '&lt;b&gt;\\\\_a\\\\_ map_hits&lt;/b&gt; \\\\[x\\\\](y) \\\\$x\\\\$'
    """
    text = html.escape(" ".join(str(text).split()), quote=False)
    if _MD_NUMBERS.fullmatch(text):  # a value or an interval, "0.8123 [0.7900, 0.8300]": no markup possible
        return text
    return _MD_SPECIAL.sub(lambda m: "\\" + m.group(0), text)


def _md_table(header: List[str], rows: List[List[str]]) -> str:
    esc = [[md_text(c) for c in row] for row in [header] + rows]
    lines = ["| " + " | ".join(esc[0]) + " |", "|" + "|".join(["---"] + ["---:"] * (len(header) - 1)) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in esc[1:]]
    return "\n".join(lines)


def _settings_lines(settings: Optional[Mapping]) -> List[str]:
    return [f"- {k}: {v}" for k, v in (settings or {}).items() if v is not None]


Table = Tuple[str, List[str], List[List[str]]]  # (heading, header, rows)


def markdown_report(results: Union[MetricResults, Runs], *, metrics: Optional[Sequence[str]] = None,
                    title: str = "Retrieval report", settings: Optional[Mapping] = None,
                    images: Sequence[Tuple[str, str]] = (), category_name: str = "category",
                    tables: Sequence[Table] = ()) -> str:
    """The report as markdown: settings, tables (then the extra ``tables``), then
    ``images`` ``[(file name, caption)]``. Every text from the data (title, names,
    categories, settings) is escaped: it shows as written and never as markup."""
    runs = _runs(results)
    parts = [f"# {md_text(title)}", ""]
    parts += [f"- {md_text(line[2:])}" for line in _settings_lines(settings)] + ([""] if settings else [])
    for heading, header, rows in list(_tables(runs, metrics, category_name)) + list(tables):
        parts += [f"## {md_text(heading)}", "", _md_table(header, rows), ""]
    if images:
        parts += ["## Plots", ""]
        for file, caption in images:
            parts += [f"![{md_text(caption)}]({file})", ""]  # file: a slug of [A-Za-z0-9_]
    return "\n".join(parts)


def html_report(results: Union[MetricResults, Runs], *, metrics: Optional[Sequence[str]] = None,
                title: str = "Retrieval report", settings: Optional[Mapping] = None,
                images: Sequence[Tuple[str, bytes]] = (), category_name: str = "category",
                tables: Sequence[Table] = ()) -> str:
    """The report as one HTML page (the extra ``tables`` after the others), ``images``
    ``[(caption, png bytes)]`` inline as base64."""
    runs = _runs(results)
    e = html.escape
    out = ["<!DOCTYPE html>", "<html><head><meta charset=\"utf-8\">", f"<title>{e(title)}</title>",
           "<style>body{font-family:sans-serif;max-width:1100px;margin:2em auto;padding:0 1em}"
           "table{border-collapse:collapse;margin:0.5em 0 1.5em}td,th{border:1px solid #ccc;padding:3px 8px}"
           "td{text-align:right;font-variant-numeric:tabular-nums}td:first-child{text-align:left}"
           "img{max-width:100%;display:block;margin:0.5em 0 1.5em}</style>", "</head><body>", f"<h1>{e(title)}</h1>"]
    lines = _settings_lines(settings)
    if lines:
        out.append("<ul>" + "".join(f"<li>{e(x[2:])}</li>" for x in lines) + "</ul>")
    for heading, header, rows in list(_tables(runs, metrics, category_name)) + list(tables):
        out.append(f"<h2>{e(heading)}</h2><table><tr>" + "".join(f"<th>{e(h)}</th>" for h in header) + "</tr>")
        out += ["<tr>" + "".join(f"<td>{e(c)}</td>" for c in row) + "</tr>" for row in rows]
        out.append("</table>")
    if images:
        out.append("<h2>Plots</h2>")
        for caption, png in images:
            data = base64.b64encode(png).decode("ascii")
            out.append(f"<figure><img alt=\"{e(caption)}\" src=\"data:image/png;base64,{data}\">"
                       f"<figcaption>{e(caption)}</figcaption></figure>")
    out.append("</body></html>")
    return "\n".join(out)


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "_", text).strip("_").lower() or "x"


def report_figures(results: Union[MetricResults, Runs], *, metrics: Optional[Sequence[str]] = None,
                   category_keys: Optional[Sequence[str]] = None, max_category_plots: int = 2,
                   category_name: str = "category") -> List[Tuple[str, str, object]]:
    """``[(file name, caption, Figure)]`` of every plot the results allow (needs matplotlib):
    metric@k curves (all runs on one plot per metric), per-class/per-category bars of the
    first ``max_category_plots`` keys of each run (or of ``category_keys``), ERC and confidence curves."""

    runs = _runs(results)
    figures: List[Tuple[str, str, object]] = []
    names: List[str] = []
    for r in runs.values():
        per_name: Dict[str, int] = {}
        for k in r:
            if _AT_INT.match(k):
                per_name[k.split("@")[0]] = per_name.get(k.split("@")[0], 0) + 1
        names.extend(n for n, c in per_name.items() if c >= 2 and n not in names)
    for name in names:
        fig = None
        for run, r in runs.items():
            if len(plot.at_k_series(r, name)[0]) >= 2:
                label = run if len(runs) > 1 else None
                fig = plot.plot_at_k(r, [name], ax=None if fig is None else fig.axes[0], label=label)
        figures.append((f"{_slug(name)}_at_k.png", f"{plot._pretty(name)} over k", fig))
    keys = _main_keys(runs, metrics)
    for run, r in runs.items():
        _, views = _split(list(r))
        suffix = f" ({run})" if len(runs) > 1 else ""
        for view in ("class", "category"):
            chosen = keys if category_keys is None else list(category_keys)
            for key in [k for k in chosen if k in views[view]][:max_category_plots]:
                label = "class" if view == "class" else category_name
                fig = plot.plot_categories(r, key, kind=view, label_name=label, title=f"{key} per {label}{suffix}")
                figures.append((f"{_slug(run)}_{_slug(key)}_per_{view}.png", f"{key} per {label}{suffix}", fig))
        for curve in r.curves:
            if curve.startswith("erc:"):
                fig = plot.plot_erc(r, curve, title=f"error versus reject: {curve[4:]}{suffix}")
                figures.append((f"{_slug(run)}_{_slug(curve)}.png", f"ERC of {curve[4:]}{suffix}", fig))
            elif curve.startswith("conf:"):
                fig = plot.plot_confidence(r, curve, title=f"{curve[5:]} against confidence{suffix}")
                figures.append((f"{_slug(run)}_{_slug(curve)}.png", f"{curve[5:]} against confidence{suffix}", fig))
    return figures


def _write(path: Path, data: Union[str, bytes]) -> Path:
    """Write a file of the report, never through a link: a link in the folder could point
    anywhere, and a report must not write outside its folder."""
    if path.is_symlink():
        raise ValueError(f"refusing to write {path}: it is a symbolic link (to {os.readlink(path)}); "
                         "remove it or choose another folder")
    if path.exists() and not path.is_file():
        raise ValueError(f"refusing to write {path}: it exists and is not a file")
    if isinstance(data, bytes):
        path.write_bytes(data)
    else:
        path.write_text(data, encoding="utf-8")
    return path


def write_report(results: Union[MetricResults, Runs], out: Union[str, Path], *,
                 metrics: Optional[Sequence[str]] = None, title: str = "Retrieval report",
                 settings: Optional[Mapping] = None, plots: bool = True, category_name: str = "category",
                 category_keys: Optional[Sequence[str]] = None, tables: Sequence[Table] = ()) -> Dict[str, Path]:
    """Write ``report.md``, ``results.json``, the PNG plots and ``report.html`` into ``out``
    (created if needed). ``metrics``: the keys of the main table (default: every key
    without a ``/``); ``settings``: lines listed under the title (data, distance...);
    ``plots``: draw the PNGs (needs matplotlib; False: tables only); ``category_name``:
    what the per-category labels are (e.g. "digit"); ``category_keys``: the keys drawn
    per category/class (default: the first two of ``metrics``); ``tables``: extra
    ``(heading, header, rows)`` tables after the others (e.g. paired tests). No file is
    written through a symbolic link.

    Returns ``{"markdown", "json", "html", <png names>...: path}``.
    """
    runs = _runs(results)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    paths: Dict[str, Path] = {}
    pngs: List[Tuple[str, str, bytes]] = []
    if plots:
        for file, caption, fig in report_figures(runs, metrics=metrics, category_name=category_name,
                                                 category_keys=category_keys):
            buffer = io.BytesIO()
            fig.savefig(buffer, format="png", dpi=100)
            png = buffer.getvalue()
            paths[file] = _write(out / file, png)
            pngs.append((file, caption, png))
    common = dict(metrics=metrics, title=title, settings=settings, category_name=category_name, tables=tables)
    _write(out / "report.md", markdown_report(runs, images=[(f, c) for f, c, _ in pngs], **common) + "\n")
    payload = {"title": title, "settings": dict(settings or {}), "runs": {n: r.to_dict() for n, r in runs.items()}}
    text = json.dumps(payload, indent=1, allow_nan=False, default=str)
    _write(out / "results.json", text + "\n")
    _write(out / "report.html", html_report(runs, images=[(c, p) for _, c, p in pngs], **common) + "\n")
    paths.update(markdown=out / "report.md", json=out / "results.json", html=out / "report.html")
    return paths
