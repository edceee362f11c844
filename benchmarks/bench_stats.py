"""What an interval costs: ``evaluate_scores(..., ci=0.95)`` against the same call
without it, and ``compare`` of two systems.

Setup (defaults, issue 12): Q = 10,000 dense queries of N = 100 candidates
(float32 scores, binary gains, 1-10 relevant each), keys ndcg@10, map@r, mrr@10,
hit_rate@5, recall@20; 1,000 bootstrap resamples (``n_resamples``), seed 0.

What is measured (``torch.set_num_threads(--threads)``, one untimed warm-up call,
median of ``--repeat`` timed calls, each pair interleaved so that load on a shared
machine hits both alike):

* plain: ``evaluate_scores(preds, target, keys)``;
* bootstrap: the same with ``ci=0.95`` (percentile bootstrap, 1,000 resamples);
* beta: ``ci=0.95, ci_method="beta"`` on ``hit_rate@5`` alone, against plain on it;
* compare: ``compare(a, b)`` of two systems' ``[Q]`` per-query ndcg@10 values with
  each test (10,000 sign flips or resamples).

The extra time of an interval is the median over repeats of (with - without), in
wall time and in CPU time of the process (the latter moves less when other work
shares the cores).

Usage::

    .venv/bin/python benchmarks/bench_stats.py                 # Q = 10,000, 1,000 resamples
    .venv/bin/python benchmarks/bench_stats.py --queries 2000 --repeat 3   # quick check
"""
from __future__ import annotations

import argparse
import statistics
import time

import torch

import retrieval_core
from retrieval_core import compare, evaluate_scores

KEYS = ["ndcg@10", "map@r", "mrr@10", "hit_rate@5", "recall@20"]


def make_data(n_queries: int, n_candidates: int, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    preds = torch.rand(n_queries, n_candidates, generator=g)
    n_relevant = torch.randint(1, 11, (n_queries, 1), generator=g)
    order = torch.rand(n_queries, n_candidates, generator=g).argsort(1)
    target = order < n_relevant
    return preds, target


def timed(fn, clock=time.perf_counter) -> float:
    start = clock()
    fn()
    return clock() - start


def paired(without, with_, repeat: int):
    """Median wall times of both, the median of the per-repeat differences, and the same
    difference in CPU time of this process (less sensitive to other work on the machine)."""
    without(), with_()  # warm-up
    a, b, ca, cb = [], [], [], []
    for _ in range(repeat):
        a.append(timed(without))
        b.append(timed(with_))
        ca.append(timed(without, time.process_time))
        cb.append(timed(with_, time.process_time))
    return (statistics.median(a), statistics.median(b), statistics.median(y - x for x, y in zip(a, b)),
            statistics.median(y - x for x, y in zip(ca, cb)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queries", type=int, default=10_000)
    parser.add_argument("--candidates", type=int, default=100)
    parser.add_argument("--resamples", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=9)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    preds, target = make_data(args.queries, args.candidates)
    print(f"retrieval_core {retrieval_core.__version__}, torch {torch.__version__}, threads {args.threads}, "
          f"Q = {args.queries}, N = {args.candidates}, resamples = {args.resamples}, repeat = {args.repeat}")

    plain, boot, extra, cpu = paired(lambda: evaluate_scores(preds, target, KEYS),
                                lambda: evaluate_scores(preds, target, KEYS, ci=0.95, n_resamples=args.resamples),
                                args.repeat)
    print(f"bootstrap ({len(KEYS)} keys): plain {plain:.3f} s, ci=0.95 {boot:.3f} s, extra {extra:.3f} s wall, "
          f"{cpu:.3f} s CPU (medians)")
    plain, beta, extra, cpu = paired(lambda: evaluate_scores(preds, target, ["hit_rate@5"]),
                                lambda: evaluate_scores(preds, target, ["hit_rate@5"], ci=0.95, ci_method="beta"),
                                args.repeat)
    print(f"beta (hit_rate@5): plain {plain:.3f} s, ci=0.95 {beta:.3f} s, extra {extra:.4f} s wall, "
          f"{cpu:.4f} s CPU (medians)")

    a = evaluate_scores(preds, target, ["ndcg@10"], reduce="none")["ndcg@10"]
    b = evaluate_scores(preds + 0.05 * torch.rand(preds.shape, generator=torch.Generator().manual_seed(1)),
                        target, ["ndcg@10"], reduce="none")["ndcg@10"]
    for test in ("paired_t", "permutation", "bootstrap"):
        times = [timed(lambda: compare(a, b, test=test)) for _ in range(max(1, args.repeat // 3))]
        print(f"compare {test} (Q = {args.queries}, 10,000 resamples): {statistics.median(times):.3f} s (median)")


if __name__ == "__main__":
    main()
