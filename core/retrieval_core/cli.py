"""Command line: ``retrieval-metrics demo | eval | report | compare``.

``eval`` reads embeddings and labels saved as .pt, .npy or .npz (``file.npz:name``
picks one array of an .npz; labels may also be class names, one per line in a text
file) and prints a table, or JSON with ``--json``; ``--output FILE`` keeps
everything (``MetricResults.to_dict()`` with the per-query values, and what
identifies the queries). ``report`` evaluates the same way, or reads ``eval
--output`` files (several side by side, with paired tests), and writes a folder with
report.md, results.json, PNG plots and report.html. ``compare A.json B.json`` tests
the difference of two ``eval --output`` files, query by query. ``demo`` evaluates
two embeddings of scikit-learn's digits (``--output DIR`` also writes their report).

Options may come before or after the files; ``--metrics`` takes keys separated
by spaces or commas; ``--output`` names what a command writes (``--out`` and
``--report`` are kept as its aliases). Errors print one line
(``retrieval-metrics <command>: error: ...``) and exit with status 2 (bad command
line) or 1 (bad data, or anything else that failed).
"""
from __future__ import annotations

import argparse
import inspect
import json
import os
import sys
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

import torch

from . import optional, validate
from .stats import comparison
from .stats.aggregate import MetricResults, _plain
from .cli_io import (TENSOR_SUFFIXES, encode_names, fingerprint, is_tensor_file, load_labels, load_tensor,
                     refuse_overwrite)
from .embeddings import evaluate_embeddings
from .metrics.registry import CONFIDENCE_KINDS, parse_metrics

DEMO_METRICS = [
    "cmc@1", "cmc@5", "precision_capped@5", "map_hits@5", "map@r", "r_precision", "mrr", "ndcg@10",
    "nmi", "ami", "pcf@0.5",
]
EVAL_METRICS = ["cmc@1", "cmc@5", "precision_capped@5", "map_hits@5", "map@r", "r_precision"]
DATA_SUFFIXES = TENSOR_SUFFIXES
PROG = "retrieval-metrics"
REPORT_FILES = ("report.md", "report.html", "results.json")  # and PNGs: what `report` writes
TEST_NAMES = {"permutation": "sign-flip permutation test", "paired_t": "paired t-test",
              "bootstrap": "bootstrap of the mean difference"}


class CommandError(Exception):
    """A bad command line found after parsing (exit status 2)."""


def _table(results: Dict[str, MetricResults], keys: Sequence[str]) -> str:
    """A text table: one row per key, one column per run; ``value [low, high]`` with intervals."""
    from .report import format_value, number_or_list

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


def _digits():
    try:
        from sklearn.datasets import load_digits
    except ImportError:
        raise ImportError(f"the demo uses scikit-learn's digits: {optional.install_hint('scikit-learn')}") from None
    digits = load_digits()
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


# ---------------------------------------------------------------------------------------------
# parsing


class _Parser(argparse.ArgumentParser):
    """argparse with one-line errors: ``retrieval-metrics <command>: error: ...`` (status 2)."""

    def error(self, message: str):  # noqa: D401 - argparse's hook
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


class _Formatter(argparse.RawDescriptionHelpFormatter):
    """Plain text help; each option's default after its help (none shown for None/False)."""

    def _get_help_string(self, action):
        text = action.help or ""
        default = action.default
        if not action.option_strings or default is None or default is False or default == argparse.SUPPRESS \
                or "default:" in text:
            return text
        if isinstance(default, (list, tuple)):
            default = " ".join(map(str, default))
        return f"{text} (default: {default})".strip()


def _metric_list(text: str) -> List[str]:
    return [k for k in text.split(",") if k]


def _float_level(text: str) -> float:
    try:
        level = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a level in (0, 1) such as 0.95; got {text!r}") from None
    if not 0 < level < 1:
        raise argparse.ArgumentTypeError(f"expected a level in (0, 1) such as 0.95; got {text!r}")
    return level


def _looks_like_file(token: str) -> bool:
    return is_tensor_file(token) or token.endswith((".json", ".txt", ".csv", ".tsv")) or os.path.sep in token


def _join_metrics(argv: List[str]) -> List[str]:
    """``--metrics a b FILE`` -> ``--metrics=a,b FILE``: the keys end at the next option or at
    the first token that names a file, so options may come before or after the files."""
    out: List[str] = []
    i = 0
    while i < len(argv):
        token = argv[i]
        if token == "--metrics":
            keys = []
            i += 1
            while i < len(argv) and not argv[i].startswith("-") and not _looks_like_file(argv[i]):
                keys.append(argv[i])
                i += 1
            out.append("--metrics=" + ",".join(keys) if keys else "--metrics")
            continue
        out.append(token)
        i += 1
    return out


def _ties_choices() -> List[str]:
    choices = list(validate.TIES) + list(getattr(validate, "TIES_LATER", ()))
    return list(dict.fromkeys(choices))


LABELS_HELP = ("(.pt/.npy/.npz numbers, multi-hot [N, C], or class names: a text file with one name per line "
               "or a NumPy string array)")


def _data_options(p: argparse.ArgumentParser, default_metrics: Sequence[str], positional: bool = True) -> None:
    """The evaluation options shared by ``eval`` and ``report``."""
    if positional:
        p.add_argument("query", help="query embeddings [Q, D] (.pt, .npy, .npz or file.npz:NAME)")
        p.add_argument("query_labels", help="query labels [Q] " + LABELS_HELP)
    p.add_argument("--gallery", help="gallery embeddings [G, D]; without it the query set is the gallery, each "
                                     "query's own row excluded")
    p.add_argument("--gallery-labels", help="gallery labels [G] (required with --gallery), of the same kind as the "
                                            "query labels")
    p.add_argument("--query-ids", help="query ids [Q]: a gallery item with the query's id is never retrieved")
    p.add_argument("--gallery-ids", help="gallery ids [G]")
    p.add_argument("--metrics", type=_metric_list, default=None, metavar="KEYS",
                   help="metric keys, separated by spaces or commas (default: " + " ".join(default_metrics) + ")")
    p.set_defaults(default_metrics=list(default_metrics))
    p.add_argument("--distance", default="cosine",
                   choices=["cosine", "dot", "euclidean", "squared_euclidean", "hamming"],
                   help="distance between embeddings")
    p.add_argument("--empty", default="skip", choices=list(validate.EMPTY),
                   help="queries where a metric is undefined (no relevant item)")
    p.add_argument("--reduce", default="mean", choices=[r for r in validate.REDUCE if r != "none"],
                   help="reduction over queries")
    p.add_argument("--ties", default="stable", choices=_ties_choices(), help="order of equal scores")
    p.add_argument("--per-class", choices=["macro", "all"], default=None,
                   help="macro: average per class, then over classes; all: also one value per class")
    p.add_argument("--categories", metavar="FILE",
                   help="one category per query (.pt/.npy/.npz, or text with one label per line): adds "
                        "per-category values")
    p.add_argument("--ci", type=_float_level, metavar="LEVEL", help="interval level, e.g. 0.95 (bootstrap over "
                                                                   "queries)")
    p.add_argument("--ci-method", default="bootstrap", choices=["bootstrap", "beta"],
                   help="bootstrap over queries, or beta: the Beta(0.5 + hits, 0.5 + misses) credible "
                        "interval, for keys whose per-query values are 0/1")
    p.add_argument("--n-resamples", type=int, default=1000, help="bootstrap resamples for --ci")
    p.add_argument("--seed", type=int, default=0, help="seed of the bootstrap")
    p.add_argument("--confidence", metavar="FILE", help="per-query confidences [Q] (higher = more confident) for "
                                                        "erc:/conf:/spearman:/kendall: keys")
    p.add_argument("--memory-budget", type=int, help="bytes of scratch per query chunk (default: the device's "
                                                     "share)")
    p.add_argument("--device", default="cpu", help="torch device to evaluate on (cpu, cuda, cuda:1, mps...)")
    p.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                   help="show a progress bar (default: only in an interactive terminal, not in CI)")


def build_parser() -> argparse.ArgumentParser:
    """The parser of every command (``build_parser().format_help()`` is the ``--help`` text)."""
    parser = _Parser(prog=PROG, description=__doc__, formatter_class=_Formatter)
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND", parser_class=_Parser)
    p_demo = sub.add_parser("demo", help="evaluate two embeddings of scikit-learn's digits",
                            description=demo_results.__doc__, formatter_class=_Formatter)
    p_demo.add_argument("--metrics", type=_metric_list, default=list(DEMO_METRICS), metavar="KEYS",
                        help="metric keys, separated by spaces or commas")
    p_demo.add_argument("--output", "--report", metavar="DIR", help="also write the report of the demo into DIR "
                                                                   "(--report: the same)")
    p_demo.add_argument("--json", action="store_true", help="print JSON instead of a table")

    p_eval = sub.add_parser("eval", help="evaluate embeddings and labels saved as .pt/.npy/.npz",
                            description="Evaluate embeddings saved as .pt/.npy/.npz and print the metrics.",
                            formatter_class=_Formatter)
    _data_options(p_eval, EVAL_METRICS)
    p_eval.add_argument("--json", action="store_true", help="print the values as JSON instead of a table")
    p_eval.add_argument("--output", metavar="FILE", help="write MetricResults.to_dict() as JSON, with the "
                                                         "per-query values and what identifies the queries (for "
                                                         "compare and report)")

    p_report = sub.add_parser("report", help="evaluate (or read eval --output files) and write report.md, "
                                             "results.json, plots and report.html",
                              description="Write a report folder: report.md, results.json, PNG plots (with "
                                          "matplotlib) and report.html. Either evaluate embeddings (report EMB "
                                          "LABELS ...), or read `eval --output` files (report A.json [B.json ...]): "
                                          "several runs side by side, each compared with the first by a paired "
                                          "test over queries (Holm-corrected p-values).",
                              formatter_class=_Formatter)
    p_report.add_argument("inputs", nargs="+", metavar="FILE",
                          help="EMB LABELS (query embeddings and labels " + LABELS_HELP + "), or one or more "
                               "`eval --output` JSON files")
    _data_options(p_report, EVAL_METRICS, positional=False)
    p_report.add_argument("--output", "--out", required=True, metavar="DIR", dest="output",
                          help="folder of the report (created if needed; --out: the same)")
    p_report.add_argument("--title", default="Retrieval report", help="title of the report")
    p_report.add_argument("--curves", type=_metric_list, default=["cmc", "precision"], metavar="NAMES",
                          help="names drawn over k (name@1..name@K, evaluated in the same pass)")
    p_report.add_argument("--max-k", type=int, default=10, help="largest k of the curves")
    _test_options(p_report, n_resamples=None)

    p_cmp = sub.add_parser("compare", help="paired test of two `eval --output` files (same queries)",
                           description="Compare two runs query by query: mean difference A - B, its interval "
                                       "and a two-sided p-value per metric key.",
                           formatter_class=_Formatter)
    p_cmp.add_argument("a", help="results of system A (eval --output A.json)")
    p_cmp.add_argument("b", help="results of system B (eval --output B.json)")
    p_cmp.add_argument("--metrics", type=_metric_list, default=None, metavar="KEYS",
                       help="keys to compare (default: every key with per-query values in both)")
    _test_options(p_cmp, n_resamples=10000)
    p_cmp.add_argument("--ci", type=_float_level, default=0.95, metavar="LEVEL", help="interval level")
    p_cmp.add_argument("--json", action="store_true", help="print JSON instead of a table")
    commands = {"demo": p_demo, "eval": p_eval, "report": p_report, "compare": p_cmp}
    parser.commands = commands  # type: ignore[attr-defined]
    return parser


def _test_options(p: argparse.ArgumentParser, n_resamples: Optional[int]) -> None:
    """The paired test's options (``compare``; ``report`` of several runs)."""
    p.add_argument("--test", default="permutation", choices=list(TEST_NAMES),
                   help="sign-flip permutation test, paired t-test, or bootstrap of the mean difference")
    if n_resamples is not None:  # report has its own --n-resamples (the intervals'), used for both
        p.add_argument("--n-resamples", type=int, default=n_resamples,
                       help="resamples of the permutation/bootstrap test")
        p.add_argument("--seed", type=int, default=0, help="seed of the resampling")
    p.add_argument("--by-position", action="store_true",
                   help="pair queries by position when the runs record no unique query ids and their query "
                        "fingerprints differ or are missing (you assert both list the same queries in order)")


def _version() -> str:
    from . import __version__

    return __version__


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    """Parse a command line; options may come before or after the positional files."""
    parser = build_parser()
    argv = list(argv)
    if argv and argv[0] in parser.commands:  # type: ignore[attr-defined]
        args = parser.commands[argv[0]].parse_intermixed_args(_join_metrics(argv[1:]))  # type: ignore[attr-defined]
        args.command = argv[0]
        return args
    return parser.parse_args(argv)  # --help, or an error naming the commands


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
    return evaluate_embeddings(query, labels, keys, **options, **tensors, **wanted)


def _json_values(r: MetricResults) -> Dict[str, object]:
    """``{key: value}``, and ``"ci": {key: [low, high]}`` when intervals were asked for."""
    out: Dict[str, object] = {k: _plain(v) for k, v in r.items()}
    if r.ci:
        out["ci"] = {k: [_plain(low), _plain(high)] for k, (low, high) in r.ci.items()}
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
    from .plot import at_k_keys
    from .report import write_report

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
    from .report import write_report

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
            result = comparison.compare_many(values, baseline=base, test=args.test, n_resamples=args.n_resamples,
                                  seed=args.seed)
            rows += [[key, name, f"{c.mean_difference:+.4f}", f"[{c.ci[0]:+.4f}, {c.ci[1]:+.4f}]", f"{c.p_value:.4g}",
                      str(c.n)] for name, c in result.items()]
        if rows:
            tables.append((f"Paired tests against {base} ({TEST_NAMES[args.test]} over queries, Holm-corrected "
                           "p-values)", ["metric", "run", "run - base", "95% interval", "p-value", "n"], rows))
    settings = {"runs": ", ".join(args.inputs), "pairing": "by query id, else by position with equal query "
                "fingerprints" + (" (--by-position: by position)" if args.by_position else "")}
    paths = write_report(runs, args.output, metrics=metrics, title=args.title, settings=settings,
                         plots=_plots_available(), tables=tables)
    print(_table(runs, metrics))
    for heading, header, rows in tables:
        print(f"\n{heading}")
        print("\n".join("  ".join(row) for row in rows))
    print(f"report written to {paths['markdown'].parent}: " + ", ".join(sorted(p.name for p in paths.values())))
    return 0


def neighbour_agreement(x: torch.Tensor, labels: torch.Tensor, k: int = 10) -> torch.Tensor:
    """The demo's per-query confidence in [0, 1]: the share of the ``k`` nearest other rows
    (cosine) whose label equals the label of the nearest one: a query whose neighbours
    agree is likely to have a correct first result.

    Example:
        >>> x = torch.tensor([[1.0, 0.0], [0.9, 0.1], [0.8, 0.2], [0.0, 1.0]])
        >>> neighbour_agreement(x, torch.tensor([0, 0, 1, 1]), k=2).tolist()
        [0.5, 0.5, 1.0, 0.5]
    """
    unit = torch.nn.functional.normalize(x.double(), dim=1)
    sim = unit @ unit.T
    sim.fill_diagonal_(float("-inf"))
    nearest = labels[sim.topk(min(k, x.shape[0] - 1), dim=1).indices]
    return (nearest == nearest[:, :1]).double().mean(1)


def cmd_demo(args) -> int:
    parse_metrics(args.metrics)
    if not args.output:
        runs = demo_results(args.metrics)
        print_results(runs, args.metrics, args.json, single=False)
        return 0
    from .plot import at_k_keys
    from .report import write_report

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


Run = Tuple[MetricResults, Dict[str, object]]  # results, and what identifies their queries


def _read_run(path: str) -> Run:
    """An ``eval --output`` file: its results and its ``"queries"`` record ({} if none)."""
    if not os.path.exists(path):
        raise FileNotFoundError(f"no such file: {path}")
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        where = f"{err.msg} at line {err.lineno}" if isinstance(err, json.JSONDecodeError) else "not UTF-8 text"
        raise ValueError(f"{path} is not JSON ({where}); expected an `eval --output` file") from None
    try:
        results = MetricResults.from_dict(data)
    except (ValueError, TypeError, KeyError, IndexError) as err:
        raise ValueError(f"{path} is not an `eval --output` file ({' '.join(str(err).split())})") from None
    queries = data.get("queries") if isinstance(data.get("queries"), dict) else {}
    return results, queries


def _unique_ids(r: MetricResults) -> Optional[List]:
    if r.query_ids is None:
        return None
    ids = r.query_ids.tolist()
    return ids if len(set(ids)) == len(ids) else None  # sequence ids shared by queries identify none of them


def _pairing(a: Run, b: Run, path_a: str, path_b: str, by_position: bool = False) -> Optional[torch.Tensor]:
    """Positions of B's queries in A's order (None: the same order). Pairs by unique query
    ids when both runs have them; else by position, only when both runs hold the same
    queries in the same order (equal fingerprints) or ``by_position`` says so; else refuses."""
    (ra, qa), (rb, qb) = a, b
    n_a = next(iter(ra.per_query.values())).shape[0] if ra.per_query else 0
    n_b = next(iter(rb.per_query.values())).shape[0] if rb.per_query else 0
    ids_a, ids_b = _unique_ids(ra), _unique_ids(rb)
    if ids_a is not None and ids_b is not None:
        if sorted(ids_a, key=repr) != sorted(ids_b, key=repr):
            raise ValueError(f"{path_a} and {path_b} hold different query ids: a paired comparison needs the "
                             "same queries")
        if ids_a == ids_b:
            return None
        where = {q: i for i, q in enumerate(ids_b)}
        return torch.tensor([where[q] for q in ids_a])
    if n_a != n_b:
        raise ValueError(f"{path_a} has {n_a} queries and {path_b} has {n_b}: a paired comparison needs the "
                         "same queries")
    if by_position:
        return None
    fa, fb = qa.get("fingerprint"), qb.get("fingerprint")
    if fa is None or fb is None:
        missing = path_a if fa is None else path_b
        raise ValueError(f"cannot pair the queries: {missing} records neither unique query ids nor a fingerprint "
                         f"of its queries (written by an older version?); run `{PROG} eval ... --output` again, "
                         "or pass --by-position if both list the same queries in the same order")
    if fa != fb:
        raise ValueError(f"cannot pair the queries of {path_a} and {path_b}: their labels (and ids) differ query "
                         "by query, so they hold different queries or the same in another order; evaluate both "
                         "with --query-ids FILE (one unique id per query) to pair them by id")
    return None


def _paired_values(a: Run, b: Run, key: str, path_a: str, path_b: str, by_position: bool) -> torch.Tensor:
    """B's per-query values of ``key`` in A's query order."""
    order = _pairing(a, b, path_a, path_b, by_position)
    values = b[0].per_query[key]
    return values if order is None else values[order]


def cmd_compare(args) -> int:
    a, b = _read_run(args.a), _read_run(args.b)
    for path, (r, _) in ((args.a, a), (args.b, b)):
        if not r.per_query:
            raise ValueError(f"{path} holds no per-query values: write it with `{PROG} eval ... --output {path}`")
    keys = args.metrics or [k for k in a[0].per_query if k in b[0].per_query]
    if not keys:
        raise ValueError(f"{args.a} and {args.b} have no metric key with per-query values in common")
    for key in keys:
        for path, (r, _) in ((args.a, a), (args.b, b)):
            if key not in r.per_query:
                raise ValueError(f"{path} has no per-query values of {key!r}; it has {', '.join(r.per_query)}")
    rows = {}
    for key in keys:
        va, vb = a[0].per_query[key], _paired_values(a, b, key, args.a, args.b, args.by_position)
        c = comparison.compare(va, vb, test=args.test, n_resamples=args.n_resamples, seed=args.seed, ci=args.ci)
        rows[key] = {"a": float(torch.nanmean(va.double())), "b": float(torch.nanmean(vb.double())),
                     "mean_difference": float(c.mean_difference), "ci": [float(c.ci[0]), float(c.ci[1])],
                     "p_value": float(c.p_value), "n": int(c.n), "test": c.test}
    if args.json:
        print(json.dumps({"a": args.a, "b": args.b, "level": args.ci, "metrics": rows}, indent=2))
        return 0
    level = f"{args.ci:.0%} interval"
    header = ["metric", "A", "B", "A - B", level, "p-value", "n"]
    table = [header] + [[k, f"{v['a']:.4f}", f"{v['b']:.4f}", f"{v['mean_difference']:+.4f}",
                         f"[{v['ci'][0]:+.4f}, {v['ci'][1]:+.4f}]", f"{v['p_value']:.4g}", str(v["n"])]
                        for k, v in rows.items()]
    widths = [max(len(row[i]) for row in table) + 2 for i in range(len(header))]
    print(f"A: {args.a}\nB: {args.b}\n{TEST_NAMES[args.test]} over queries")
    for row in table:
        print(f"{row[0]:<{widths[0]}}" + "".join(f"{c:>{w}}" for c, w in zip(row[1:], widths[1:])))
    return 0


COMMANDS = {"demo": cmd_demo, "eval": cmd_eval, "report": cmd_report, "compare": cmd_compare}


def main(argv: Optional[List[str]] = None) -> int:
    """Run a command; returns the exit status. Every error prints one line
    (``retrieval-metrics <command>: error: ...``) and no traceback: status 2 for a bad
    command line, 1 for anything else.

    Set ``RETRIEVAL_METRICS_TRACEBACK=1`` to see the traceback of an error.
    """
    args = parse_args(sys.argv[1:] if argv is None else argv)
    try:
        return COMMANDS[args.command](args)
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # the reader stopped early (`| head`): not an error of ours
        # what Python's docs advise: stdout onto devnull, so that the flush at exit is quiet
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except Exception as err:  # noqa: BLE001 - a command line shows one line, whatever failed
        if os.environ.get("RETRIEVAL_METRICS_TRACEBACK"):
            raise
        message = " ".join(str(err).split()) or type(err).__name__
        if isinstance(err, KeyError):
            message = f"missing {message}"
        elif not isinstance(err, (CommandError, ValueError, TypeError, ImportError, OSError)):
            message = f"{type(err).__name__}: {message}"  # unexpected: say what kind
        print(f"{PROG} {args.command}: error: {message}", file=sys.stderr)
        return 2 if isinstance(err, CommandError) else 1


if __name__ == "__main__":
    sys.exit(main())
