"""Time and peak memory of ``read_run`` / ``read_qrels`` on a file with one very long id (issue 26).

Writes a run of ``--lines`` lines (ids ``DOC-%08d``, 1000 per query) whose one document id is
``--long`` bytes long (a URL-like ``http://x/aaaa...``), or the qrels of the same shape with
``--qrels``, and reads it in a fresh process; prints the wall time of the read and the
process's peak RSS (``resource.getrusage``), and the same for the file without the long id.

Usage::

    .venv/bin/python benchmarks/bench_trec_long_ids.py --lines 200000 --long 20000 [--qrels]
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile

CHILD = """
import resource, sys, time
from retrieval_core.trec import read_qrels, read_run
t0 = time.perf_counter()
(read_qrels if sys.argv[2] == "qrels" else read_run)(sys.argv[1])
t = time.perf_counter() - t0
print(t, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
"""


def write(path: str, n_lines: int, long: int, qrels: bool) -> None:
    with open(path, "w") as f:
        for i in range(n_lines):
            doc = f"DOC-{i:08d}" if i != n_lines // 2 or not long else "http://x/" + "a" * (long - 9)
            q = 100 + i // 1000
            f.write(f"{q} 0 {doc} {i % 3}\n" if qrels else f"{q} Q0 {doc} {i % 1000 + 1} {1000 - i % 1000} t\n")


def measure(path: str, qrels: bool):
    out = subprocess.run([sys.executable, "-c", CHILD, path, "qrels" if qrels else "run"], check=True,
                         capture_output=True, text=True).stdout.split()
    return float(out[0]), float(out[1])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--lines", type=int, default=200_000)
    p.add_argument("--long", type=int, default=20_000, help="bytes of the one long id")
    p.add_argument("--qrels", action="store_true", help="a qrels file instead of a run")
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as d:
        for long in (0, args.long):
            path = os.path.join(d, "file")
            write(path, args.lines, long, args.qrels)
            t, rss = measure(path, args.qrels)
            what = f"one id of {long:,} bytes" if long else "no long id"
            print(f"{'qrels' if args.qrels else 'run'} {args.lines:,} lines ({os.path.getsize(path) / 1e6:.1f} MB), "
                  f"{what}: {t:.2f} s, peak RSS {rss:.0f} MB")


if __name__ == "__main__":
    main()
