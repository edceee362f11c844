"""The command line ``retrieval-metrics`` (:func:`main`; ``python -m retrieval_core.cli`` runs it too).

``main`` dispatches to the commands (``commands``: eval, report, demo; ``compare``;
``trec``); ``parser`` builds the command line, ``io`` reads tensors and labels,
``demo`` evaluates scikit-learn's digits.
"""
from .commands import cmd_demo, cmd_eval, cmd_report, print_results, run_record
from .compare import cmd_compare
from .demo import demo_results
from .io import load_labels, load_tensor
from .entry import COMMANDS, main
from .parser import DEMO_METRICS, EVAL_METRICS, PROG, CommandError, build_parser, parse_args
from .trec import cmd_trec

__all__ = [
    "COMMANDS", "main", "parse_args", "build_parser", "CommandError", "PROG", "DEMO_METRICS", "EVAL_METRICS",
    "load_tensor", "load_labels", "print_results", "run_record", "demo_results",
    "cmd_eval", "cmd_report", "cmd_demo", "cmd_compare", "cmd_trec",
]
