"""Reading runs and qrels from DataFrames, parquet and CSV (retrieval_core.trec.frames) against ranx.

Makes a run of ``--rows`` entries (1000 per query, docids ``DOC-%08d`` from a 5M pool, float64
scores, rows in rank order) and a qrels of the same size (relevance 0..2) as DataFrames, writes
them as parquet and CSV to a temporary folder, and times in one process, each ``--repeat`` times
(median and best wall time):

* ours: ``run_from_frame`` / ``qrels_from_frame`` (the DataFrame), ``run_from_file`` /
  ``qrels_from_file`` (parquet, CSV), ``to_frame``;
* ranx 0.3.21: ``Run.from_df`` / ``Qrels.from_df`` on the same DataFrame with its id columns cast to
  object (ranx asserts object ids, and pandas 3 holds text as ``str``: the cast is timed apart), and
  for the files ``from_df`` on ``pandas.read_parquet`` / ``pandas.read_csv`` (ids as text) cast so
  (``ranx.Run.from_parquet`` is that without the cast, and fails on pandas 3; ranx reads no CSV).

Peak memory: the rise of the process's resident set above its level before the call (Linux: the
peak is reset through ``/proc/self/clear_refs`` before each call and read from ``VmHWM``). One
thread everywhere (torch, numba, pyarrow); ranx's kernels are compiled once beforehand.

Usage::

    OMP_NUM_THREADS=1 NUMBA_NUM_THREADS=1 flock /tmp/bench.lock .venv/bin/python benchmarks/bench_frames.py \\
        [--rows 1000000 --repeat 3]
"""
from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time

import numpy as np
import pandas as pd
import pyarrow as pa
import torch

from retrieval_core.trec import qrels_from_file, qrels_from_frame, run_from_file, run_from_frame

OBJECT_IDS = {"q_id": object, "doc_id": object}


def frames(n_rows: int, seed: int = 0):
    """A run and a qrels of ``n_rows`` rows each, 1000 per query, as ranx names the columns."""
    rng = np.random.default_rng(seed)
    per_q, n_q = 1000, max(n_rows // 1000, 1)
    docs = np.concatenate([rng.permutation(np.unique(rng.integers(0, 5_000_000, 2 * per_q))[:per_q])
                           for _ in range(n_q)])
    doc_ids = np.char.add("DOC-", np.char.zfill(docs.astype(str), 8)).astype(object)
    q_ids = np.repeat(np.arange(100, 100 + n_q).astype(str), per_q).astype(object)
    scores = np.concatenate([np.sort(rng.random(per_q))[::-1] * 20 for _ in range(n_q)])
    run = pd.DataFrame({"q_id": pd.Series(q_ids, dtype=str), "doc_id": pd.Series(doc_ids, dtype=str),
                        "score": scores})
    qrels = pd.DataFrame({"q_id": run["q_id"], "doc_id": run["doc_id"], "score": rng.integers(0, 3, len(run))})
    return run, qrels


def rss_kb(field: str) -> int:
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith(field))


def measure(fn, repeat: int):
    """Median and best wall seconds, and the largest rise of the resident set (MB) over the calls."""
    times, peaks = [], []
    for _ in range(repeat):
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")  # reset VmHWM (the peak resident set) to the current resident set
        before = rss_kb("VmRSS")
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
        peaks.append((rss_kb("VmHWM") - before) / 1024)
        del out
    return statistics.median(times), min(times), max(peaks)


def report(what: str, n: int, median: float, best: float, peak: float) -> None:
    print(f"{what:<52} median {median:6.2f} s (best {best:6.2f} s, {n / median / 1e6:5.2f} M rows/s), "
          f"peak +{peak:6.0f} MB", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--no-ranx", action="store_true", help="time ours only")
    args = ap.parse_args()
    torch.set_num_threads(1)
    pa.set_cpu_count(1)
    pa.set_io_thread_count(1)
    print(f"cpus: {os.cpu_count()}, load average: {os.getloadavg()[0]:.1f}; pandas {pd.__version__}, "
          f"pyarrow {pa.__version__}", flush=True)
    run_df, qrels_df = frames(args.rows)
    n = len(run_df)
    timings = []
    with tempfile.TemporaryDirectory() as tmp:
        paths = {}
        for name, df in (("run", run_df), ("qrels", qrels_df)):
            for suffix in ("parquet", "csv"):
                paths[name, suffix] = os.path.join(tmp, f"{name}.{suffix}")
                df.to_parquet(paths[name, suffix], index=False) if suffix == "parquet" else df.to_csv(
                    paths[name, suffix], index=False)
        ours = {"run": (run_from_frame, run_from_file), "qrels": (qrels_from_frame, qrels_from_file)}
        for name, df in (("run", run_df), ("qrels", qrels_df)):
            from_frame, from_file = ours[name]
            timings.append((f"ours  {name}_from_frame(DataFrame)", lambda f=from_frame, d=df: f(d)))
            for suffix in ("parquet", "csv"):
                timings.append((f"ours  {name}_from_file(.{suffix})", lambda f=from_file, p=paths[name, suffix]: f(p)))
            obj = from_frame(df)
            timings.append((f"ours  {type(obj).__name__}.to_frame()", obj.to_frame))
        if not args.no_ranx:
            timings += ranx_timings(run_df, qrels_df, paths)
        for what, fn in timings:
            report(what, n, *measure(fn, args.repeat))


def ranx_timings(run_df, qrels_df, paths):
    import ranx  # noqa: PLC0415 (only when ranx is compared)

    # numba compiles ranx's kernels for each width of the doc ids' numpy dtype (``<U12`` here): once
    # beforehand, on ids of the benchmark's widths
    tiny = run_df.head(2).astype(OBJECT_IDS)
    ranx.Run.from_df(tiny)
    ranx.Qrels.from_df(tiny.astype({"score": np.int64}))
    out = []
    for name, df, cls in (("run", run_df, ranx.Run), ("qrels", qrels_df, ranx.Qrels)):
        cast = df.astype(OBJECT_IDS)
        out.append((f"ranx  astype(object ids) of the DataFrame ({name})", lambda d=df: d.astype(OBJECT_IDS)))
        out.append((f"ranx  {cls.__name__}.from_df(DataFrame, object ids)", lambda c=cls, d=cast: c.from_df(d)))
        out.append((f"ranx  {cls.__name__}.from_df(read_parquet(.parquet) object ids)",
                    lambda c=cls, p=paths[name, "parquet"]: c.from_df(pd.read_parquet(p).astype(OBJECT_IDS))))
        out.append((f"ranx  {cls.__name__}.from_df(read_csv(.csv) object ids)",
                    lambda c=cls, p=paths[name, "csv"]: c.from_df(pd.read_csv(p, dtype={"q_id": str, "doc_id": str})
                                                                  .astype(OBJECT_IDS))))
    return out


if __name__ == "__main__":
    main()
