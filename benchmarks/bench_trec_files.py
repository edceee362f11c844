"""Parse speed of TREC runs and qrels (retrieval_core.trec): lines per second.

Writes a synthetic run (1000 entries per query, docids ``DOC-%08d`` from a 5M pool,
6-decimal scores, tab-separated, in rank order as retrieval systems write them) to a
temporary folder and times ``read_run`` on it, with ``--shuffled`` also on a copy
whose lines are shuffled (the full sort path), and ``read_qrels`` on a qrels of the
same size. Each size is timed ``--repeat`` times; the report is the best and the
median (the machine may be shared). ``--pandas`` also times pandas.read_csv
(sep=r"\\s+", engine="c") plus factorizing the id columns, for comparison.

Usage::

    .venv/bin/python benchmarks/bench_trec_files.py [--lines 1000000 10000000 --repeat 3 --shuffled --pandas]
"""
from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time

import numpy as np

from retrieval_core.trec import read_qrels, read_run


def distinct_docs(rng, n: int):
    """``n`` distinct document numbers from the pool, in random order."""
    return rng.permutation(np.unique(rng.integers(0, 5_000_000, 2 * n))[:n])


def make_run(path: str, n_lines: int, seed: int = 0, shuffled: bool = False) -> None:
    rng = np.random.default_rng(seed)
    per_q = 1000
    n_q = max(n_lines // per_q, 1)
    with open(path, "w") as f:
        for start in range(0, n_q, 100):
            rows = []
            for q in range(start, min(start + 100, n_q)):
                docs = distinct_docs(rng, per_q)
                scores = np.sort(rng.random(per_q))[::-1] * 20
                rows.extend(f"{q + 100}\tQ0\tDOC-{d:08d}\t{r + 1}\t{s:.6f}\tbench\n"
                            for r, (d, s) in enumerate(zip(docs.tolist(), scores.tolist())))
            if shuffled:
                rng.shuffle(rows)
            f.write("".join(rows))


def make_qrels(path: str, n_lines: int, seed: int = 1) -> None:
    rng = np.random.default_rng(seed)
    per_q = 1000
    with open(path, "w") as f:
        for q in range(max(n_lines // per_q, 1)):
            docs = distinct_docs(rng, per_q)
            rels = rng.integers(0, 3, per_q)
            f.write("".join(f"{q + 100} 0 DOC-{d:08d} {r}\n" for d, r in zip(docs.tolist(), rels.tolist())))


def timed(fn, repeat: int):
    """Best and median wall time, and the best process CPU time (what load on the machine does not inflate)."""
    times, cpu = [], []
    for _ in range(repeat):
        t0, c0 = time.perf_counter(), time.process_time()
        out = fn()
        times.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
        del out
    return min(times), statistics.median(times), min(cpu)


def pandas_parse(path: str):
    import pandas as pd

    df = pd.read_csv(path, sep=r"\s+", header=None, engine="c", dtype={0: str, 2: str, 5: str})
    return pd.factorize(df[0])[0], pd.factorize(df[2])[0], df[4].to_numpy(np.float64)


def report(what: str, n: int, best: float, median: float, cpu: float) -> None:
    print(f"{what:<26} {n:>10,} lines  wall best {best:6.2f} s ({n / best / 1e6:5.2f} M lines/s), "
          f"median {median:6.2f} s ({n / median / 1e6:5.2f} M/s); cpu {cpu:6.2f} s ({n / cpu / 1e6:5.2f} M/s)",
          flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lines", type=int, nargs="+", default=[1_000_000, 10_000_000])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--shuffled", action="store_true")
    ap.add_argument("--pandas", action="store_true")
    args = ap.parse_args()
    print(f"cpus: {os.cpu_count()}, load average: {os.getloadavg()[0]:.1f} (other processes share the cores "
          "when it exceeds the count: wall times then grow, cpu times much less)")
    with tempfile.TemporaryDirectory() as tmp:
        for n in args.lines:
            run_path, qrels_path = os.path.join(tmp, f"run{n}"), os.path.join(tmp, f"qrels{n}")
            make_run(run_path, n)
            report("read_run", n, *timed(lambda: read_run(run_path), args.repeat))
            if args.shuffled:
                shuffled = os.path.join(tmp, f"shuffled{n}")
                make_run(shuffled, n, shuffled=True)
                report("read_run (shuffled lines)", n, *timed(lambda: read_run(shuffled), args.repeat))
                os.remove(shuffled)
            make_qrels(qrels_path, n)
            report("read_qrels", n, *timed(lambda: read_qrels(qrels_path), args.repeat))
            if args.pandas:
                report("pandas read_csv+factorize", n, *timed(lambda: pandas_parse(run_path), args.repeat))
            os.remove(run_path)
            os.remove(qrels_path)


if __name__ == "__main__":
    main()
