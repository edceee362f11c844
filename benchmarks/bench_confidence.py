"""What the confidence keys cost: ``rank_correlation`` against scipy, and the keys
(with and without bootstrap intervals) against the plain evaluation.

Setup (defaults, issue 11): n = 100,000 pairs for ``rank_correlation`` (float64,
heavily tied second variable, as a per-query metric is); Q = 10,000 dense queries
of N = 100 candidates for the keys (``cmc@1``, ``map@r`` and ``erc:cmc@1``,
``conf:map@r``, ``spearman:map@r``, ``kendall:map@r``), 200 bootstrap resamples.

What is measured (``torch.set_num_threads(--threads)``, one untimed warm-up call,
median of ``--repeat`` timed calls):

* spearman / kendall: ``retrieval_core.rank_correlation`` and
  ``scipy.stats.spearmanr`` / ``kendalltau`` on the same arrays (the ratio ours /
  scipy; both O(n log n)-ish, neither builds an n x n matrix);
* keys: ``evaluate_scores`` with the plain keys, with the confidence keys added,
  and with ``ci=0.95`` (``--resamples``) on top.

Usage::

    .venv/bin/python benchmarks/bench_confidence.py
    .venv/bin/python benchmarks/bench_confidence.py --pairs 20000 --queries 2000 --repeat 3   # quick check
"""
from __future__ import annotations

import argparse
import statistics
import time

import torch

import retrieval_core as rc


def median_time(fn, repeat: int) -> float:
    fn()  # warm-up
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pairs", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=10_000)
    parser.add_argument("--candidates", type=int, default=100)
    parser.add_argument("--resamples", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    g = torch.Generator().manual_seed(0)

    x = torch.rand(args.pairs, generator=g, dtype=torch.float64)
    y = ((torch.rand(args.pairs, generator=g, dtype=torch.float64) + x) * 10).floor()
    try:
        from scipy import stats
    except ImportError:  # pragma: no cover - scipy is in the test extra
        stats = None
    print(f"rank_correlation, n = {args.pairs}")
    for method in ("spearman", "kendall"):
        ours = median_time(lambda: rc.rank_correlation(x, y, method), args.repeat)
        line = f"  {method:8s} ours {ours * 1e3:8.1f} ms"
        if stats is not None:
            ref_fn = stats.spearmanr if method == "spearman" else stats.kendalltau
            xn, yn = x.numpy(), y.numpy()
            ref = median_time(lambda: ref_fn(xn, yn), args.repeat)
            line += f"   scipy {ref * 1e3:8.1f} ms   ratio {ours / ref:5.2f}"
        print(line)

    preds = torch.rand(args.queries, args.candidates, generator=g)
    target = torch.rand(args.queries, args.candidates, generator=g) < 0.05
    confidence = torch.rand(args.queries, generator=g)
    plain = ["cmc@1", "map@r"]
    keys = plain + ["erc:cmc@1", "conf:map@r", "spearman:map@r", "kendall:map@r"]
    base = median_time(lambda: rc.evaluate_scores(preds, target, plain), args.repeat)
    with_keys = median_time(lambda: rc.evaluate_scores(preds, target, keys, confidence=confidence), args.repeat)
    with_ci = median_time(lambda: rc.evaluate_scores(preds, target, keys, confidence=confidence, ci=0.95,
                                                     n_resamples=args.resamples), max(1, args.repeat // 2))
    print(f"evaluate_scores, Q = {args.queries}, N = {args.candidates}")
    print(f"  plain keys                  {base * 1e3:8.1f} ms")
    print(f"  + confidence keys           {with_keys * 1e3:8.1f} ms   (+{(with_keys - base) * 1e3:.1f} ms)")
    print(f"  + ci ({args.resamples} resamples)       {with_ci * 1e3:8.1f} ms")


if __name__ == "__main__":
    main()
