"""Tie modes on the score benchmark: ``evaluate_scores(..., ties=mode)`` against ``ties="stable"``.

Data: bench_scores' (``torch.rand`` float32 scores, ~1% relevant with gains 1-3),
keys ndcg@10, map@10, mrr@10, precision@10, recall@10, and, with ``--tied``, the
same gains with integer scores in 0..9 (nearly every row has a tie at the cut).
Modes are timed interleaved (stable, mode, stable, mode, ...) so that load on the
machine hits both alike; the report is each mode's median and its ratio to stable.

Usage::

    .venv/bin/python benchmarks/bench_ties.py [--queries 10000 --candidates 1000 --repeat 7 --flat --tied]
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_scores import KEYS, make_data  # noqa: E402

import retrieval_core  # noqa: E402

MODES = ("stable", "expected", "optimistic", "pessimistic")


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--queries", type=int, default=10_000)
    ap.add_argument("--candidates", type=int, default=1_000)
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--modes", nargs="+", default=list(MODES), choices=MODES)
    ap.add_argument("--flat", action="store_true", help="the flat form (indexes) instead of dense rows")
    ap.add_argument("--tied", action="store_true", help="integer scores 0..9: ties everywhere")
    ap.add_argument("--threads", type=int, default=0)
    args = ap.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    preds, target = make_data(args.queries, args.candidates, args.seed)
    if args.tied:
        preds = torch.floor(preds * 10)
    kwargs = {}
    if args.flat:
        kwargs["indexes"] = torch.arange(args.queries).repeat_interleave(args.candidates)
        preds, target = preds.reshape(-1), target.reshape(-1)

    def run(mode):
        return retrieval_core.evaluate_scores(preds, target, KEYS, ties=mode, **kwargs)

    for mode in args.modes:  # warm-up
        run(mode)
    times = {mode: [] for mode in args.modes}
    for _ in range(args.repeat):
        for mode in args.modes:
            t0 = time.perf_counter()
            run(mode)
            times[mode].append(time.perf_counter() - t0)
    base = statistics.median(times["stable"]) if "stable" in times else None
    print(f"{args.queries} x {args.candidates} {'flat' if args.flat else 'dense'}"
          f"{' tied' if args.tied else ''}, torch {torch.__version__}, {torch.get_num_threads()} threads, "
          f"median of {args.repeat}")
    for mode, ts in times.items():
        med = statistics.median(ts)
        ratio = f"  {med / base:.2f}x stable" if base else ""
        print(f"  {mode:12s} {med * 1e3:9.1f} ms{ratio}")


if __name__ == "__main__":
    main()
