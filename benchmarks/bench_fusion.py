"""Fusion speed: retrieval_core.fusion.fuse against ranx.fuse, in one process, one thread.

Writes ``--runs`` synthetic TREC runs (``--queries`` queries x ``--docs`` entries each, docids
drawn per query from a pool of ``2 x --docs``, so the runs overlap partly; continuous scores) to a
temporary folder, reads each with ``read_run`` (its own vocabulary, as runs read separately) and with
``ranx.Run.from_file``, then times ``fuse`` and ``ranx.fuse`` on the loaded runs (reading is not timed)
for each ``--methods`` entry (``method:norm``), ``--repeat`` times, alternating ours and ranx's; the
report is the median and the ratio. ranx's numba kernels are compiled (and cached) by one untimed call
on a small case first. Run it with one thread and under the benchmark lock::

    OMP_NUM_THREADS=1 NUMBA_NUM_THREADS=1 flock /tmp/bench.lock .venv/bin/python benchmarks/bench_fusion.py \\
        [--runs 5 --queries 10000 --docs 100 --repeat 3 --methods rrf:none wsum:min-max sum:zmuv]
"""
from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
import warnings

import numpy as np
import torch

from retrieval_core.fusion import fuse
from retrieval_core.trec import read_run


def make_run(path: str, n_q: int, per_q: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    docs = np.argsort(rng.random((n_q, 2 * per_q)), axis=1)[:, :per_q]
    scores = np.sort(rng.random((n_q, per_q)) * 10, axis=1)[:, ::-1]
    with open(path, "w") as f:
        for q in range(n_q):
            f.write("".join(f"q{q}\tQ0\td{q}_{d}\t{r + 1}\t{s:.6f}\tr{seed}\n"
                            for r, (d, s) in enumerate(zip(docs[q], scores[q]))))


def _ranx_fuse(ranx, runs, method, norm):
    params = {"weights": [1 / len(runs)] * len(runs)} if method == "wsum" else {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return ranx.fuse(runs, norm=norm, method=method, params=params)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--queries", type=int, default=10_000)
    ap.add_argument("--docs", type=int, default=100)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--methods", nargs="+", default=["rrf:none", "wsum:min-max", "sum:zmuv"])
    args = ap.parse_args()
    torch.set_num_threads(1)
    import ranx
    tmp = tempfile.mkdtemp()
    paths = [os.path.join(tmp, f"run{i}") for i in range(args.runs)]
    for i, p in enumerate(paths):
        make_run(p, args.queries, args.docs, i)
    ours = [read_run(p) for p in paths]
    theirs = [ranx.Run.from_file(p, kind="trec") for p in paths]
    small = [ranx.Run({"q": {"a": 1.0, "b": 0.5}}) for _ in range(2)]
    for spec in args.methods:  # compile ranx's kernels (cached by numba) before timing
        method, norm = spec.split(":")
        _ranx_fuse(ranx, small, method, None if norm == "none" else norm)
    print(f"{args.runs} runs x {args.queries} queries x {args.docs} docs, torch threads "
          f"{torch.get_num_threads()}, NUMBA_NUM_THREADS={os.environ.get('NUMBA_NUM_THREADS')}")
    for spec in args.methods:
        method, norm = spec.split(":")
        norm = None if norm == "none" else norm
        t_ours, t_ranx = [], []
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            fused = fuse(ours, method=method, norm=norm)
            t_ours.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            _ranx_fuse(ranx, theirs, method, norm)
            t_ranx.append(time.perf_counter() - t0)
        a, b = statistics.median(t_ours), statistics.median(t_ranx)
        print(f"{spec:14s} ours {a:8.3f} s  ranx {b:8.3f} s  ranx/ours {b / a:6.2f}  ({len(fused)} fused entries)")


if __name__ == "__main__":
    main()
