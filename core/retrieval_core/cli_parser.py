"""The command line's argument parser: commands, options, help texts and their defaults."""
from __future__ import annotations

import argparse
import os
from typing import List, Optional, Sequence

from . import validate
from .cli_demo import demo_results
from .cli_io import TENSOR_SUFFIXES, CommandError, is_tensor_file
from .cli_trec import add_trec_parser
from .version import __version__

__all__ = [
    "DEMO_METRICS", "EVAL_METRICS", "DATA_SUFFIXES", "PROG", "REPORT_FILES", "TEST_NAMES", "CommandError",
    "LABELS_HELP", "build_parser", "parse_args",
]

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
    p_trec = add_trec_parser(sub, _Formatter)
    commands = {"demo": p_demo, "eval": p_eval, "report": p_report, "compare": p_cmp, "trec": p_trec}
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
