"""Distributed embedding evaluation: 1 process with 1 thread against W processes
with 1 thread each (``retrieval_core.distributed.evaluate_embeddings_across_ranks``, gloo on CPU).

Setup (defaults, issue 10): N = 40,000 items, 128-d float32 embeddings of 500
classes (the data of ``bench_embeddings.py``), the query set its own gallery
(``gallery=None``), keys cmc@1, cmc@5, precision_capped@5, map_hits@5, map@r,
r_precision. The parent writes the data to a temporary ``.npy``/``.pt``; every
process reads only its contiguous share of the rows (memory mapped).

What is measured (each process: ``torch.set_num_threads(1)``, a fresh process per run):

* one: ``retrieval_core.evaluate_embeddings`` of all N items in one process;
* W ranks, gathered: ``distributed.evaluate_embeddings_across_ranks`` (``shard_gallery=False``):
  the items gathered to every rank, each rank evaluating its N/W queries;
* W ranks, sharded: ``shard_gallery=True``: each rank keeps its N/W gallery rows.

CPU time of each process is reported too: on a machine shared with other work
the wall-time ratio depends on the free cores, the CPU split does not.

Wall time: the slowest rank's, from a barrier to the end of the call (median of
``--repeat``; one untimed warm-up call first in every process). Peak memory:
VmHWM over the RSS before the call (the rank's share of the inputs is loaded;
``/proc/self/clear_refs`` resets the peak), per rank and
mode, next to the expected size of the shard (N/W x D x 4 bytes) and of one query
chunk of scores (rows x shard x 24 bytes, from ``--memory-budget``). The results of
every mode are compared with the one-process result (bit for bit).

Usage::

    .venv/bin/python benchmarks/bench_distributed.py                     # N = 40,000, W = 2
    .venv/bin/python benchmarks/bench_distributed.py --n 10000 --repeat 1  # quick check
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from typing import Dict, List, Optional

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from bench_embeddings import make_data  # noqa: E402  (the same data as the embedding benchmark)
import bench_scores as bs  # noqa: E402  (the memory helpers: peak RSS from /proc)

KEYS = ["cmc@1", "cmc@5", "precision_capped@5", "map_hits@5", "map@r", "r_precision"]
MIB = 2**20


def _measured(fn):
    """(result, wall seconds, peak bytes over the RSS before the call, CPU seconds of this process)."""
    bs._reset_peak()
    before = bs._status_kb()["VmRSS"]
    start, cpu = time.perf_counter(), time.process_time()
    result = fn()
    seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
    return result, seconds, (bs._status_kb()["VmHWM"] - before) * 1024, cpu


def _load_share(data_dir: str, rank: int, world: int):
    import numpy as np

    x = np.load(os.path.join(data_dir, "x.npy"), mmap_mode="r")
    labels = torch.load(os.path.join(data_dir, "labels.pt"), weights_only=True, mmap=True)
    n = x.shape[0]
    part = slice(n * rank // world, n * (rank + 1) // world)
    return torch.from_numpy(np.array(x[part])), labels[part].clone()


def _plain(r) -> Dict[str, float]:
    return {k: float(v) for k, v in r.items()}


def child_one(args) -> None:
    import retrieval_core

    torch.set_num_threads(1)
    x, labels = _load_share(args.data, 0, 1)
    retrieval_core.evaluate_embeddings(x[:500], labels[:500], KEYS)  # warm-up: first-call costs untimed
    runs = [_measured(lambda: retrieval_core.evaluate_embeddings(x, labels, KEYS, memory_budget=args.memory_budget))
            for _ in range(args.repeat)]
    print(json.dumps({"seconds": [r[1] for r in runs], "cpu": [r[3] for r in runs], "peak": max(r[2] for r in runs),
                      "values": _plain(runs[0][0])}))


def child_rank(args) -> None:
    import torch.distributed as dist

    from retrieval_core import distributed as rd

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{args.port}", rank=args.rank,
                            world_size=args.world, timeout=datetime.timedelta(seconds=1800))
    try:
        x, labels = _load_share(args.data, args.rank, args.world)
        out = {"rank": args.rank, "rows": x.shape[0]}
        for shard in (False, True):  # warm-up: first-call costs (BLAS, gloo buffers) untimed
            rd.evaluate_embeddings_across_ranks(x[:250], labels[:250], KEYS, shard_gallery=shard)
        for mode, shard in (("gathered", False), ("sharded", True)):
            seconds, peaks, cpus = [], [], []
            for _ in range(args.repeat):
                dist.barrier()
                r, s, p, c = _measured(lambda: rd.evaluate_embeddings_across_ranks(x, labels, KEYS, shard_gallery=shard,
                                                                        memory_budget=args.memory_budget))
                seconds.append(s)
                peaks.append(p)
                cpus.append(c)
            out[mode] = {"seconds": seconds, "cpu": cpus, "peak": max(peaks), "values": _plain(r)}
        print(json.dumps(out))
    finally:
        dist.destroy_process_group()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _child(args, *extra: str) -> subprocess.Popen:
    cmd = [sys.executable, os.path.abspath(__file__), "--data", args.data, "--repeat", str(args.repeat)]
    if args.memory_budget:
        cmd += ["--memory-budget", str(args.memory_budget)]
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    return subprocess.Popen(cmd + list(extra), stdout=subprocess.PIPE, text=True, env=env)


def _median(xs: List[float]) -> float:
    xs = sorted(xs)
    return (xs[(len(xs) - 1) // 2] + xs[len(xs) // 2]) / 2


def main(argv: Optional[List[str]] = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=40_000)
    ap.add_argument("--world", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--memory-budget", type=int, default=None, help="bytes of scratch per query chunk")
    ap.add_argument("--json", help="also write the results to this file")
    # internal: the child processes
    ap.add_argument("--role", choices=["one", "rank"])
    ap.add_argument("--data")
    ap.add_argument("--rank", type=int)
    ap.add_argument("--port", type=int)
    args = ap.parse_args(argv)
    if args.role == "one":
        return child_one(args)
    if args.role == "rank":
        return child_rank(args)

    import numpy as np

    from retrieval_core.evaluation.embeddings import DEFAULT_MEMORY_BUDGET

    with tempfile.TemporaryDirectory(prefix="bench-distributed-") as tmp:
        x, labels = make_data(args.n)
        np.save(os.path.join(tmp, "x.npy"), x.numpy())
        torch.save(labels, os.path.join(tmp, "labels.pt"))
        dim = x.shape[1]
        del x
        args.data = tmp
        proc = _child(args, "--role", "one")
        one = json.loads(proc.communicate()[0])
        port = _free_port()
        procs = [_child(args, "--role", "rank", "--rank", str(r), "--world", str(args.world), "--port", str(port))
                 for r in range(args.world)]
        ranks = sorted((json.loads(p.communicate()[0]) for p in procs), key=lambda o: o["rank"])
    if any(p.returncode for p in [proc, *procs]):
        raise SystemExit("a child process failed")

    budget = args.memory_budget or DEFAULT_MEMORY_BUDGET
    shard_rows = max(r["rows"] for r in ranks)
    chunk_rows = max(1, budget // (24 * shard_rows))
    t_one, cpu_one = _median(one["seconds"]), _median(one["cpu"])
    report = {"n": args.n, "world": args.world, "dim": dim, "keys": KEYS, "one_seconds": t_one,
              "one_peak": one["peak"], "modes": {}}
    print(f"N = {args.n}, D = {dim}, keys {', '.join(KEYS)}; 1 thread per process; "
          f"torch {torch.__version__}, {os.cpu_count()} CPUs (shared machine: timings are noisy)")
    print(f"1 process:               {t_one:8.2f} s   CPU {cpu_one:6.2f} s   peak +{one['peak'] / MIB:7.1f} MiB")
    for mode in ("gathered", "sharded"):
        # a barrier starts every repeat together: the slowest rank's time is the wall time
        t = _median([max(r[mode]["seconds"][i] for r in ranks) for i in range(args.repeat)])
        same = all(r[mode]["values"] == one["values"] for r in ranks)
        peaks = [r[mode]["peak"] for r in ranks]
        cpus = [_median(r[mode]["cpu"]) for r in ranks]
        report["modes"][mode] = {"seconds": t, "ratio": t / t_one, "cpu_per_rank": cpus, "peaks": peaks,
                                 "same_values": same}
        print(f"{args.world} processes, {mode:8s}: {t:8.2f} s   ratio {t / t_one:5.2f}x   CPU per rank "
              + ", ".join(f"{c:.2f}" for c in cpus) + " s   peak per rank "
              + ", ".join(f"+{p / MIB:.1f}" for p in peaks) + f" MiB   same values as 1 process: {same}")
    shard_bytes = shard_rows * dim * 4
    chunk_bytes = chunk_rows * shard_rows * 24
    whole = args.n * dim * 4
    print(f"sharded, expected per rank: shard {shard_bytes / MIB:.1f} MiB + one chunk of {chunk_rows} queries "
          f"x {shard_rows} items x 24 B = {chunk_bytes / MIB:.1f} MiB (whole gallery: {whole / MIB:.1f} MiB)")
    report.update(shard_bytes=shard_bytes, chunk_bytes=chunk_bytes)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=2)


if __name__ == "__main__":
    main()
