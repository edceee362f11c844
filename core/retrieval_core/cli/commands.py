"""The commands eval, report and demo of the command line: evaluate, print, save and report runs."""
from __future__ import annotations

import inspect
import json
import sys
from pathlib import Path
from typing import Dict, List, Optional, Sequence

import torch

from .. import optional
from .compare import _paired_values, _read_run
from .demo import _digits, demo_results
from .io import encode_names, fingerprint, load_labels, load_tensor, refuse_overwrite
from .parser import CI_RESAMPLES, CommandError, PROG, REPORT_FILES, TEST_NAMES, TEST_RESAMPLES
from ..evaluation.embeddings import evaluate_embeddings
from ..metrics.neighbours import neighbour_agreement
from ..metrics.keys import CONFIDENCE_KINDS, parse_metrics
from ..reporting.pairs import correction_of, groups_table, pairs_table
from ..reporting.plot import at_k_keys
from ..reporting.report import format_p_value, format_value, number_or_list, text_table, write_report
from ..stats import comparison
from ..stats.allpairs import compare_all
from ..stats.results import MetricResults, plain

__all__ = ["print_results", "run_record", "cmd_eval", "MAX_CLASS_VIEW", "cmd_report", "cmd_demo"]


def _table(results: Dict[str, MetricResults], keys: Sequence[str]) -> str:
    """A text table: one row per key, one column per run; ``value [low, high]`` with intervals."""

    names = list(results)
    cells = {n: {k: format_value(number_or_list(results[n].get(k)), results[n].ci.get(k)) for k in keys}
             for n in names}
    first = max([len("metric")] + [len(k) for k in keys]) + 2
    widths = {n: max([len(n)] + [len(c) for c in cells[n].values()]) + 2 for n in names}
    lines = [f"{'metric':<{first}}" + "".join(f"{n:>{widths[n]}}" for n in names)]
    for key in keys:
        lines.append(f"{key:<{first}}" + "".join(f"{cells[n][key]:>{widths[n]}}" for n in names))
    counts = [results[n].n_queries for n in names]
    if all(c is not None for c in counts):
        lines.append(f"{'queries':<{first}}" + "".join(f"{int(c):>{widths[n]}}" for n, c in zip(names, counts)))
    return "\n".join(lines)


def _supports(name: str) -> bool:
    return name in inspect.signature(evaluate_embeddings).parameters


# ---------------------------------------------------------------------------------------------
# commands


def _device(text: str) -> torch.device:
    """``--device``: a torch device that works here, or a one-line error."""
    try:
        device = torch.device(text)
    except (RuntimeError, ValueError):
        raise CommandError(f"--device {text!r} is not a torch device (cpu, cuda, cuda:1, mps...)") from None
    try:
        torch.empty(1, device=device)
    except (AssertionError, RuntimeError) as err:  # e.g. "Torch not compiled with CUDA enabled"
        reason = (str(err).strip().splitlines() or [type(err).__name__])[0]
        raise CommandError(f"--device {text}: not available with this torch ({reason})") from None
    return device


def _check_confidence_keys(args) -> None:
    if args.confidence:
        return
    for key in args.metrics:
        if key.split(":")[0] in CONFIDENCE_KINDS and ":" in key:
            raise CommandError(f"{key} needs per-query confidences: pass --confidence FILE (one value per query, "
                               "higher = more confident)")


def _inputs(args) -> List[Optional[str]]:
    """Every file the evaluation reads (an output must never be one of them)."""
    return [args.query, args.query_labels, args.gallery, args.gallery_labels, args.query_ids, args.gallery_ids,
            args.categories, args.confidence]


def _evaluate(args, *, extra_keys: Sequence[str] = (), keep_per_query: bool = False,
              class_view: bool = False) -> MetricResults:
    args.metrics = args.metrics or args.default_metrics
    parse_metrics(args.metrics)  # unknown keys: the registry's error (with "did you mean")
    _check_confidence_keys(args)
    device = _device(args.device)
    if args.gallery and not args.gallery_labels:
        raise CommandError("--gallery needs --gallery-labels")
    tensors = {name: load_tensor(getattr(args, name)).to(device)
               for name in ("gallery", "query_ids", "gallery_ids") if getattr(args, name)}
    options = dict(distance=args.distance, empty=args.empty, reduce=args.reduce, ties=args.ties,
                   per_class=args.per_class, memory_budget=args.memory_budget, progress=args.progress)
    raw_labels = load_labels(args.query_labels)
    gallery_labels = load_labels(args.gallery_labels) if args.gallery_labels else None
    labels, gallery_labels = encode_names(raw_labels, gallery_labels)
    if gallery_labels is not None:
        tensors["gallery_labels"] = gallery_labels.to(device)
    query, labels = load_tensor(args.query).to(device), labels.to(device)
    args.fingerprint = fingerprint(raw_labels, tensors.get("query_ids"))  # identifies the queries, in order
    if args.categories:
        categories = load_labels(args.categories)
        options["categories"] = categories.to(device) if isinstance(categories, torch.Tensor) else categories
    elif class_view and args.per_class is None and _few_classes(labels):
        options["categories"] = labels  # the per-class view of the report; the main values stay over all queries
        args.class_view = "the query labels (a per-class view; main values over all queries)"
    wanted = {}
    if args.ci is not None:
        wanted.update(ci=args.ci, ci_method=args.ci_method, n_resamples=args.n_resamples, seed=args.seed)
    if args.confidence:
        wanted["confidence"] = load_tensor(args.confidence).to(device)
    if keep_per_query:
        wanted["keep_per_query"] = True
    keys = list(args.metrics) + [k for k in extra_keys if k not in args.metrics]
    results = evaluate_embeddings(query, labels, keys, **options, **tensors, **wanted)
    note = empty_note(results, keys, args.empty)
    if note:
        print(f"{PROG}: note: {args.query}: {note}", file=sys.stderr)
    return results


def empty_note(results: MetricResults, keys: Sequence[str], empty: str) -> Optional[str]:
    """What ``eval`` and ``report`` say on stderr when queries have no relevant item
    (R = 0: no gallery item other than the query itself shares its label), which
    the table alone shows only as ``–`` (every query) or not at all (some); None when
    every query has one. The exit status stays 0: ``--empty error`` makes it fail.

    Example:
        >>> x, labels = torch.eye(3), torch.tensor([0, 1, 2])
        >>> empty_note(evaluate_embeddings(x, labels, ["cmc@1"]), ["cmc@1"], "skip")
        'no query has a relevant item (no gallery item other than the query itself shares its label): every value is undefined (printed –, null in JSON); check the labels, or count such queries as 0 with --empty zero (--empty error fails instead)'
    """
    counts = [int(results.n_empty[m.key]) for m in parse_metrics(keys)
              if m.key in results.n_empty and m.spec.empty_means_no_relevant]
    if not counts or max(counts) == 0 or results.n_queries is None:
        return None
    n, k = int(results.n_queries), max(counts)
    if k == n:
        what = "no query has a relevant item"
        how = {"skip": "every value is undefined (printed –, null in JSON); check the labels, or count such "
                       "queries as 0 with --empty zero (--empty error fails instead)",
               "zero": "every value is 0 (--empty zero)", "one": "every value is 1 (--empty one)"}[empty]
    else:
        what = f"{k} of {n} queries have no relevant item"
        how = {"skip": "they are left out of every value (--empty skip; --empty zero counts them as 0)",
               "zero": "they count as 0 (--empty zero)", "one": "they count as 1 (--empty one)"}[empty]
    return f"{what} (no gallery item other than the query itself shares its label): {how}"


def _json_values(r: MetricResults) -> Dict[str, object]:
    """``{key: value}``, and ``"ci": {key: [low, high]}`` when intervals were asked for."""
    out: Dict[str, object] = {k: plain(v) for k, v in r.items()}
    if r.ci:
        out["ci"] = {k: [plain(low), plain(high)] for k, (low, high) in r.ci.items()}
    return out


def print_results(runs: Dict[str, MetricResults], keys: Sequence[str], as_json: bool = False,
                  single: bool = True) -> None:
    """Print ``{run name: results}`` as the CLI does: a table of ``keys`` (with the
    intervals and the number of queries), or JSON: ``{key: value}`` (one run's when
    ``single``, else ``{run: {...}}``) with ``"ci": {key: [low, high]}`` where intervals
    were asked for."""
    if as_json:
        values = {n: _json_values(r) for n, r in runs.items()}
        print(json.dumps(next(iter(values.values())) if single else values, indent=2))
    else:
        print(_table(runs, keys))


def _all_keys(results: MetricResults, requested: Sequence[str]) -> List[str]:
    """The requested keys first, then the per-class/per-category entries, in the results' order."""
    return list(requested) + [k for k in results if k not in requested]


def run_record(r: MetricResults, args) -> Dict[str, object]:
    """What ``eval --output`` writes: ``MetricResults.to_dict()`` and ``"queries"``, what
    identifies them (their count, whether they have ids, and a fingerprint of their
    labels and ids in order), so that ``compare`` never pairs different queries."""
    record = r.to_dict()
    count = int(r.n_queries) if r.n_queries is not None else None
    record["queries"] = {"count": count, "fingerprint": args.fingerprint, "ids": bool(args.query_ids),
                         "labels": args.query_labels}
    return record


def cmd_eval(args) -> int:
    if args.output:
        refuse_overwrite([args.output], _inputs(args))
    r = _evaluate(args, keep_per_query=bool(args.output))
    if args.output:
        Path(args.output).write_text(json.dumps(run_record(r, args), allow_nan=False) + "\n", encoding="utf-8")
    print_results({args.query: r}, _all_keys(r, args.metrics), args.json, single=True)
    return 0


def _settings(args) -> Dict[str, object]:
    return {"query": args.query, "labels": args.query_labels, "gallery": args.gallery or "the queries (self excluded)",
            "distance": args.distance, "ties": args.ties, "empty": args.empty, "reduce": args.reduce,
            "per_class": args.per_class, "categories": args.categories or getattr(args, "class_view", None),
            "interval": None if args.ci is None else f"{args.ci} ({args.ci_method})", "confidence": args.confidence}


def _plots_available() -> bool:
    try:
        optional.require("matplotlib", feature="drawing the report's plots", package="matplotlib")
    except ImportError as err:
        print(f"{PROG}: note: tables only, no plots: {err}", file=sys.stderr)
        return False
    return True


MAX_CLASS_VIEW = 50  # report: a per-class table and plot by default up to this many classes


def _few_classes(labels: torch.Tensor) -> bool:
    return (labels.ndim == 1 and not labels.is_floating_point() and labels.numel() > 0
            and torch.unique(labels).numel() <= MAX_CLASS_VIEW)


def _report_outputs(out: str, inputs: Sequence[Optional[str]]) -> None:
    """Refuse a report folder whose files would overwrite one of the inputs."""
    folder = Path(out)
    written = [folder / name for name in REPORT_FILES]
    written += [Path(spec) for spec in inputs if spec and Path(spec).suffix == ".png"]
    refuse_overwrite([p for p in written if p.parent.resolve() == folder.resolve()], inputs)


def cmd_report(args) -> int:
    if all(path.endswith(".json") for path in args.inputs):
        return _report_runs(args)
    if len(args.inputs) != 2:
        raise CommandError("report takes EMB LABELS (two data files) or `eval --output` JSON files; got "
                           + " ".join(args.inputs))
    args.query, args.query_labels = args.inputs
    args.n_resamples = CI_RESAMPLES if args.n_resamples is None else args.n_resamples

    if args.max_k < 1:
        raise CommandError(f"--max-k must be a positive integer; got {args.max_k}")
    _report_outputs(args.output, _inputs(args))
    curve_keys = at_k_keys(args.curves, args.max_k) if args.curves else []
    r = _evaluate(args, extra_keys=curve_keys, class_view=True)
    by_class = not args.categories and args.per_class is None and any("/" in k for k in r)
    paths = write_report(r, args.output, metrics=args.metrics, title=args.title, settings=_settings(args),
                         plots=_plots_available(), category_name="class" if by_class else "category")
    print(_table({args.query: r}, args.metrics))
    print(f"report written to {paths['markdown'].parent}: " + ", ".join(sorted(p.name for p in paths.values())))
    return 0


def _run_names(paths: Sequence[str]) -> List[str]:
    """Short, distinct names of runs read from files: the file names without .json,
    the whole paths where two would be the same."""
    stems = [Path(p).stem for p in paths]
    return stems if len(set(stems)) == len(stems) else list(paths)


def _report_runs(args) -> int:
    """``report A.json B.json ...``: the saved runs side by side; with two or more, each
    run against the first by a paired test per key (Holm-corrected over the runs)."""

    _report_outputs(args.output, args.inputs)
    names = _run_names(args.inputs)
    records = {name: _read_run(path) for name, path in zip(names, args.inputs)}
    runs = {name: r for name, (r, _) in records.items()}
    wanted = args.metrics or [k for k in runs[names[0]] if "/" not in k]
    metrics = [k for k in wanted if all(k in r for r in runs.values())]
    if not metrics:
        raise ValueError(f"the runs have no metric key in common among {', '.join(wanted)}")
    tables = []
    if len(runs) > 1:
        base = names[0]
        paired = [k for k in metrics if all(k in r.per_query for r in runs.values())]
        rows = []
        for key in paired:
            values = {name: _paired_values(records[base], records[name], key, args.inputs[0], path, args.by_position)
                      for name, path in zip(names, args.inputs)}
            resamples = TEST_RESAMPLES if args.n_resamples is None else args.n_resamples
            result = comparison.compare_many(values, baseline=base, test=args.test, seed=args.seed,
                                             n_resamples=resamples)
            rows += [[key, name, f"{c.mean_difference:+.4f}", f"[{c.ci[0]:+.4f}, {c.ci[1]:+.4f}]",
                      format_p_value(c.p_value), str(c.n)] for name, c in result.items()]
        if rows:
            tables.append((f"Paired tests against {base} ({TEST_NAMES[args.test]} over queries, Holm-corrected "
                           "p-values)", ["metric", "run", "run - base", "95% interval", "p-value", "n"], rows))
        if args.all_pairs or args.correction != "holm":
            tables += _all_pairs_tables(args, records, names, paired)
    settings = {"runs": ", ".join(args.inputs), "pairing": "by query id, else by position with equal query "
                "fingerprints" + (" (--by-position: by position)" if args.by_position else "")}
    paths = write_report(runs, args.output, metrics=metrics, title=args.title, settings=settings,
                         plots=_plots_available(), tables=tables)
    print(_table(runs, metrics))
    for heading, header, rows in tables:
        print(f"\n{heading}")
        print(text_table(header, rows))
    print(f"report written to {paths['markdown'].parent}: " + ", ".join(sorted(p.name for p in paths.values())))
    return 0


def _all_pairs_tables(args, records, names: List[str], keys: List[str]) -> list:
    """``report --all-pairs``: every pair of runs per key (the queries in the first run's order)."""
    base, path = names[0], dict(zip(names, args.inputs))
    by_key = {}
    for key in keys:
        values = {name: _paired_values(records[base], records[name], key, path[base], path[name], args.by_position)
                  for name in names}
        by_key[key] = compare_all(values, method=correction_of(args.correction), test=args.test, alpha=args.alpha,
                                  seed=args.seed, n_resamples=TEST_RESAMPLES if args.n_resamples is None
                                  else args.n_resamples)
    return [pairs_table(by_key), groups_table(by_key)] if by_key else []


def cmd_demo(args) -> int:
    parse_metrics(args.metrics)
    if not args.output:
        runs = demo_results(args.metrics)
        print_results(runs, args.metrics, args.json, single=False)
        return 0

    models, labels = _digits()
    shown = list(args.metrics)
    confidence = _supports("confidence") and "cmc@1" in shown
    if confidence:  # how well the nearest-neighbour similarity predicts a correct first result
        shown += [k for k in ("erc:cmc@1", "conf:cmc@1", "spearman:cmc@1") if k not in shown]
    keys = shown + [k for k in at_k_keys(["cmc", "precision"], 10) if k not in shown]
    options: Dict[str, object] = dict(categories=labels)
    if _supports("ci"):
        options.update(ci=0.95)
    if _supports("keep_per_query"):
        options.update(keep_per_query=True)
    runs = {}
    for name, emb in models.items():
        extra = {"confidence": neighbour_agreement(emb, labels)} if confidence else {}
        runs[name] = evaluate_embeddings(emb, labels, keys, **options, **extra)
    settings = {"data": "scikit-learn's digits: 1797 images of 10 digits; each image is a query against all others",
                "distance": "cosine",
                "interval": "95% bootstrap over queries, per metric" if "ci" in options else None,
                "confidence": "share of the 10 nearest neighbours with the label of the nearest one"
                if confidence else None}
    paths = write_report(runs, args.output, metrics=shown, title="Digits: raw pixels vs a random projection",
                         settings=settings, plots=_plots_available(), category_name="digit",
                         category_keys=["cmc@1", "map@r"])
    print_results(runs, shown, args.json, single=False)
    if not args.json:
        print(f"\nreport of the demo: {paths['html'].resolve()}\n(with report.md, results.json and "
              f"{sum(p.suffix == '.png' for p in paths.values())} PNG plots in {paths['html'].parent.resolve()})")
    return 0
