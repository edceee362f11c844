"""Command line: ``retrieval-metrics demo | eval | report | compare | trec`` (the entry point ``main``;
parser in ``cli.parser``, commands in ``cli.commands``, ``cli.compare``, ``cli.demo``, ``cli.trec``, files in
``cli.io``). ``trec QRELS RUN [RUN ...]`` prints trec_eval's output (``cli.trec``).

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

import os
import sys
from typing import List, Optional

from .commands import cmd_demo, cmd_eval, cmd_report
from .compare import cmd_compare
from .parser import PROG, CommandError, parse_args
from .trec import cmd_trec

__all__ = ["COMMANDS", "main"]

COMMANDS = {"demo": cmd_demo, "eval": cmd_eval, "report": cmd_report, "compare": cmd_compare, "trec": cmd_trec}


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
        elif isinstance(err, OSError) and err.filename is not None:  # one wording in every command
            message = _os_message(err)
        elif not isinstance(err, (CommandError, ValueError, TypeError, ImportError, OSError)):
            message = f"{type(err).__name__}: {message}"  # unexpected: say what kind
        print(f"{PROG} {args.command}: error: {message}", file=sys.stderr)
        return 2 if isinstance(err, CommandError) else 1


def _os_message(err: OSError) -> str:
    """``no such file: PATH`` (the wording of every command), ``is a directory: PATH``..."""
    if isinstance(err, FileNotFoundError):
        return f"no such file: {err.filename}"
    reason = (err.strerror or type(err).__name__).lower()
    return f"{reason}: {err.filename}"
