"""The command line's argument parser: commands, options, help texts and their defaults."""
from __future__ import annotations

import argparse
import os
import textwrap
from typing import List, Optional, Sequence

from .. import validate
from .io import TENSOR_SUFFIXES, CommandError, is_tensor_file
from .trec import add_trec_parser
from ..reporting.pairs import CORRECTION_CHOICES
from ..version import __version__

__all__ = [
    "DEMO_METRICS", "EVAL_METRICS", "DATA_SUFFIXES", "PROG", "REPORT_FILES", "TEST_NAMES", "CommandError",
    "LABELS_HELP", "CI_RESAMPLES", "TEST_RESAMPLES", "build_parser", "parse_args",
]

DEMO_METRICS = [
    "cmc@1", "cmc@5", "precision_capped@5", "map_hits@5", "map@r", "r_precision", "mrr", "ndcg@10",
    "nmi", "ami", "pcf@0.5",
]
EVAL_METRICS = ["cmc@1", "cmc@5", "precision_capped@5", "map_hits@5", "map@r", "r_precision"]
DATA_SUFFIXES = TENSOR_SUFFIXES
PROG = "retrieval-metrics"
REPORT_FILES = ("report.md", "report.html", "results.json")  # and PNGs: what `report` writes
CI_RESAMPLES = 1000  # bootstrap intervals (--ci), as evaluate_embeddings' default
TEST_RESAMPLES = 10000  # paired tests (compare, report of saved runs), as retrieval_core.compare's default
TEST_NAMES = {"permutation": "sign-flip permutation test", "paired_t": "paired t-test",
              "bootstrap": "bootstrap of the mean difference"}


# ---------------------------------------------------------------------------------------------
# parsing


class _Parser(argparse.ArgumentParser):
    """argparse with one-line errors: ``retrieval-metrics <command>: error: ...`` (status 2)."""

    def error(self, message: str):  # noqa: D401 - argparse's hook
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


class _Formatter(argparse.RawDescriptionHelpFormatter):
    """Plain text help; each option's default after its help (none shown for None/False).
    Descriptions and epilogs keep their line breaks; reST's double backticks never show."""

    def _format_text(self, text):
        return super()._format_text(text.replace("``", "`"))

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


def _data_options(p: argparse.ArgumentParser, default_metrics: Sequence[str], positional: bool = True,
                  n_resamples_help: str = "bootstrap resamples of --ci") -> None:
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
                   help="macro: every value becomes the mean over classes of each class's mean (PML's "
                        "avg_of_avgs); all: the same macro means, plus one value per class (KEY/class=LABEL). "
                        "Both change the headline values, which are otherwise means over all queries")
    p.add_argument("--categories", metavar="FILE",
                   help="one category per query (.pt/.npy/.npz, or text with one label per line): adds "
                        "per-category values")
    p.add_argument("--ci", type=_float_level, metavar="LEVEL", help="interval level, e.g. 0.95 (bootstrap over "
                                                                   "queries)")
    p.add_argument("--ci-method", default="bootstrap", choices=["bootstrap", "beta"],
                   help="bootstrap over queries, or beta: the Beta(0.5 + hits, 0.5 + misses) credible "
                        "interval, for keys whose per-query values are 0/1")
    p.add_argument("--n-resamples", type=int, default=CI_RESAMPLES if positional else None,
                   help=n_resamples_help)  # report: None, resolved by what it does (see its help)
    p.add_argument("--seed", type=int, default=0, help="seed of the bootstrap")
    p.add_argument("--confidence", metavar="FILE", help="per-query confidences [Q] (higher = more confident) for "
                                                        "erc:/conf:/spearman:/kendall: keys")
    p.add_argument("--memory-budget", type=int, help="bytes of scratch per query chunk (default: the device's "
                                                     "share)")
    p.add_argument("--device", default="cpu", help="torch device to evaluate on (cpu, cuda, cuda:1, mps...)")
    p.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                   help="show a progress bar (default: only in an interactive terminal, not in CI)")


def _fill(*paragraphs: str) -> str:
    """Paragraphs wrapped to 79 columns, a blank line between them (the help's descriptions)."""
    return "\n\n".join(textwrap.fill(" ".join(p.split()), 79) for p in paragraphs)


def _examples(*lines: str) -> str:
    """A help's epilog: ``examples:`` then one command per line."""
    return "examples:\n" + "\n".join(f"  {PROG} {line}" for line in lines)


DESCRIPTIONS = {
    "top": _fill("Retrieval and ranking metrics from the command line: evaluate embeddings saved as files, "
                 "write a report, compare two runs query by query, and evaluate TREC runs as trec_eval does.",
                 f"`{PROG} COMMAND --help` describes a command, its options and examples."),
    "demo": _fill("Evaluate two \"models\" of scikit-learn's digits side by side: the raw pixels (64-d) and a "
                  "random 16-d projection; each image is a query against all the others. Needs scikit-learn "
                  "(the demo extra)."),
    "eval": _fill("Evaluate query embeddings saved as .pt, .npy or .npz (FILE.npz:NAME picks one array) and "
                  "print the metrics. Without --gallery, each query is searched among the other queries.",
                  "--output writes the per-query values too, for `compare` and `report`."),
    "report": _fill("Write a report folder: report.md, results.json, PNG plots (with matplotlib) and report.html. "
                    "Either evaluate embeddings (report EMB LABELS ...), or read `eval --output` files (report "
                    "A.json [B.json ...]): several runs side by side, each tested against the first (run - base) "
                    "by a paired test over queries, with Holm-corrected p-values."),
    "compare": _fill("Compare two `eval --output` runs query by query: per metric key, both means, the mean "
                     "difference B - A (the second run minus the first, as `report` prints run - base), its "
                     "interval and a two-sided p-value.",
                     "Queries are paired by their unique query ids when both runs have them, else by position when "
                     "both runs record the same queries in the same order (the same fingerprint of the query "
                     "labels: the same classes, whether written as names or numbers); --by-position pairs them "
                     "by position regardless."),
    "trec": _fill("Evaluate TREC runs against qrels with trec_eval's options (-q -c -M -l -m) and print "
                  "trec_eval's lines (measure, query, value), so that diff with trec_eval's output is empty for "
                  "the measures supported here; a measure that is not supported is named on stderr.",
                  "Several runs print a table of runs x measures (--format markdown, latex or json): each run is "
                  "compared with the first by a paired test over the queries both have, Holm-corrected over the "
                  "runs, at --alpha; --all-pairs compares every pair of runs, --correction tukey (or "
                  "tukey_paired) by Tukey's HSD."),
}
EXAMPLES = {
    "top": _examples("demo", "eval emb.npy labels.npy --metrics cmc@1 map@r --output a.json",
                     "compare a.json b.json --test paired_t", "trec qrels.txt run.txt"),
    "demo": _examples("demo", "demo --metrics cmc@1 map@r --json",
                      "demo --output demo-report          # and the report: demo-report/report.html"),
    "eval": _examples("eval emb.npy labels.npy --metrics cmc@1 map@r --json",
                      "eval emb.pt names.txt --ci 0.95 --output run.json",
                      "eval q.npy q_labels.npy --gallery g.npy --gallery-labels g_labels.npy --distance euclidean"),
    "report": _examples("report emb.pt labels.npy --metrics cmc@1 map@r ndcg@10 --ci 0.95 --output report/",
                        "report a.json b.json c.json --output cmp/     # b and c tested against a",
                        "report a.json b.json c.json --output cmp/ --correction tukey   # and every pair"),
    "compare": _examples("compare a.json b.json", "compare a.json b.json --test paired_t --metrics map@r --json",
                         "compare a.json b.json --by-position      # the same queries in the same order"),
    "trec": _examples("trec qrels.txt run.txt", "trec -q -c -M1000 -l2 -m map -m P.5,10 -m nDCG@10 qrels.txt run.txt",
                      "trec -m map,ndcg_cut.10 qrels.txt base.run new.run --format latex",
                      "trec -m map qrels.txt a.run b.run c.run --all-pairs --test paired_t"),
}


def _sub(sub, name: str, help: str) -> argparse.ArgumentParser:
    return sub.add_parser(name, help=help, description=DESCRIPTIONS[name], epilog=EXAMPLES[name],
                          formatter_class=_Formatter)


def build_parser() -> argparse.ArgumentParser:
    """The parser of every command (``build_parser().format_help()`` is the ``--help`` text)."""
    parser = _Parser(prog=PROG, description=DESCRIPTIONS["top"], epilog=EXAMPLES["top"], formatter_class=_Formatter)
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND", parser_class=_Parser)
    p_demo = _sub(sub, "demo", "evaluate two embeddings of scikit-learn's digits")
    p_demo.add_argument("--metrics", type=_metric_list, default=list(DEMO_METRICS), metavar="KEYS",
                        help="metric keys, separated by spaces or commas")
    p_demo.add_argument("--output", "--report", metavar="DIR", help="also write the report of the demo into DIR "
                                                                   "(--report: the same)")
    p_demo.add_argument("--json", action="store_true", help="print JSON instead of a table")

    p_eval = _sub(sub, "eval", "evaluate embeddings and labels saved as .pt/.npy/.npz")
    _data_options(p_eval, EVAL_METRICS)
    p_eval.add_argument("--json", action="store_true", help="print the values as JSON instead of a table")
    p_eval.add_argument("--output", metavar="FILE", help="write MetricResults.to_dict() as JSON, with the "
                                                         "per-query values and what identifies the queries (for "
                                                         "compare and report)")

    p_report = _sub(sub, "report", "evaluate (or read eval --output files) and write report.md, results.json, "
                                   "plots and report.html")
    p_report.add_argument("inputs", nargs="+", metavar="FILE",
                          help="EMB LABELS (query embeddings and labels " + LABELS_HELP + "), or one or more "
                               "`eval --output` JSON files")
    _data_options(p_report, EVAL_METRICS, positional=False,
                  n_resamples_help=f"resamples of the bootstrap intervals of --ci (default: {CI_RESAMPLES}) and, "
                                   "with eval --output files, of the paired tests (default: "
                                   f"{TEST_RESAMPLES}, as compare)")
    p_report.add_argument("--output", "--out", required=True, metavar="DIR", dest="output",
                          help="folder of the report (created if needed; --out: the same)")
    p_report.add_argument("--title", default="Retrieval report", help="title of the report")
    p_report.add_argument("--curves", type=_metric_list, default=["cmc", "precision"], metavar="NAMES",
                          help="names drawn over k (name@1..name@K, evaluated in the same pass)")
    p_report.add_argument("--max-k", type=int, default=10, help="largest k of the curves")
    _test_options(p_report, n_resamples=None)  # --n-resamples and --seed: the data options'
    p_report.add_argument("--all-pairs", action="store_true",
                          help="eval --output files: also compare every pair of runs (a table of the pairs with "
                               "their effect sizes, and the runs' letter groups)")
    p_report.add_argument("--correction", choices=CORRECTION_CHOICES, default="holm",
                          help="the all-pairs table's multiple comparisons (implies --all-pairs unless holm): "
                               "holm, bonferroni or none adjust the --test p-values over the pairs; tukey (as "
                               "ranx) and tukey_paired (two-way ANOVA) use Tukey's HSD")
    p_report.add_argument("--alpha", type=_float_level, default=0.05,
                          help="level at which two runs are separable in the all-pairs table")


    p_cmp = _sub(sub, "compare", "paired test of two `eval --output` files (same queries)")
    p_cmp.add_argument("a", help="results of system A (eval --output A.json)")
    p_cmp.add_argument("b", help="results of system B (eval --output B.json)")
    p_cmp.add_argument("--metrics", type=_metric_list, default=None, metavar="KEYS",
                       help="keys to compare (default: every key with per-query values in both)")
    _test_options(p_cmp, n_resamples=TEST_RESAMPLES)
    p_cmp.add_argument("--ci", type=_float_level, default=0.95, metavar="LEVEL", help="interval level")
    p_cmp.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p_trec = add_trec_parser(sub, _Formatter)
    p_trec.description, p_trec.epilog = DESCRIPTIONS["trec"], EXAMPLES["trec"]
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
