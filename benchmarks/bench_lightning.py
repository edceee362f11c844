"""Drop-in benchmark: ``lightning_retrieval.RetrievalMAP`` / ``RetrievalNormalizedDCG``
against ``torchmetrics.retrieval``'s classes of the same name.

Setup (defaults, as benchmarks/bench_scores.py): 10,000 queries x 1,000 candidates
in the flat form (``indexes``, ``preds``, ``target``; 10M entries, grouped by
query), scores ``torch.rand`` float32 (seeded), about 1% relevant with gains 1-3.
``RetrievalMAP(top_k=10)`` gets the binary target as a bool tensor (torchmetrics
insists on binary values), ``RetrievalNormalizedDCG(top_k=10)`` the float32 gains.

One run of a method = build the metric, ``update`` in ``--updates`` batches of
whole queries (100 by default: 100 queries per batch, as a validation loop would),
``compute()``. Timings run side by side in this process (median of repeats); peak
memory is measured per method in a fresh subprocess (``--memory METHOD``) from
``/proc/self/status`` (VmHWM reset through ``/proc/self/clear_refs`` once the
inputs exist), the helpers of bench_scores.py.

Usage::

    .venv/bin/python benchmarks/bench_lightning.py [--queries 10000 --candidates 1000 --updates 100]
    .venv/bin/python benchmarks/bench_lightning.py --device cuda   # inputs and both metrics on the GPU

``--device cuda``: inputs on the GPU, each metric moved there (``.to("cuda")``), timed
regions bracketed by ``torch.cuda.synchronize()``, peak memory from
``torch.cuda.max_memory_allocated`` over what the inputs hold.
"""
from __future__ import annotations

import argparse
import gc
import json
import os
import resource
import subprocess
import sys
import time
from typing import Dict, List

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import bench_scores as bs  # noqa: E402  (data, timing, memory and machine helpers: the house style)

K = 10
METHODS = {  # name: (module, class)
    "tm_map": ("torchmetrics.retrieval", "RetrievalMAP"),
    "ours_map": ("lightning_retrieval", "RetrievalMAP"),
    "tm_ndcg": ("torchmetrics.retrieval", "RetrievalNormalizedDCG"),
    "ours_ndcg": ("lightning_retrieval", "RetrievalNormalizedDCG"),
}
LABELS = {
    "tm_map": "torchmetrics RetrievalMAP(top_k=10)",
    "ours_map": "lightning_retrieval RetrievalMAP(top_k=10)",
    "tm_ndcg": "torchmetrics RetrievalNormalizedDCG(top_k=10)",
    "ours_ndcg": "lightning_retrieval RetrievalNormalizedDCG(top_k=10)",
}


def make_inputs(n_queries: int, n_candidates: int, seed: int):
    """Flat grouped ``(indexes int64, preds float32, gains float32, relevant bool)``."""
    preds, target = (x.to(bs.DEVICE) for x in bs.make_data(n_queries, n_candidates, seed))
    p, t, i = bs.flat_grouped(preds, target)
    return i, p, t, t > 0


def run_method(method: str, inputs, n_queries: int, updates: int) -> float:
    """Build, update in ``updates`` batches of whole queries, compute; the value as a float."""
    import importlib

    module, cls = METHODS[method]
    metric = getattr(importlib.import_module(module), cls)(top_k=K).to(bs.DEVICE)
    indexes, preds, gains, relevant = inputs
    target = gains if method.endswith("ndcg") else relevant
    per = indexes.numel() // n_queries * max(1, -(-n_queries // updates))  # entries of whole queries per batch
    for start in range(0, preds.numel(), per):
        rows = slice(start, start + per)
        metric.update(preds[rows], target[rows], indexes=indexes[rows])
    return float(metric.compute())


def memory_child(method: str, args) -> None:
    """In a fresh process: inputs, warm-up on a tiny input, reset the peak, one run, one JSON line."""
    inputs = make_inputs(args.queries, args.candidates, args.seed)
    run_method(method, make_inputs(16, args.candidates, args.seed + 7), 16, 2)
    gc.collect()
    target = inputs[2] if method.endswith("ndcg") else inputs[3]
    if bs.DEVICE.type == "cuda":
        value, extra, seconds = bs.cuda_peak(lambda: run_method(method, inputs, args.queries, args.updates))
        print(json.dumps({"method": method, "input_bytes": bs.nbytes(inputs[0], inputs[1], target),
                          "extra_kb": extra / 1024, "peak_reset": True, "seconds": seconds, "value": value,
                          "memory": "cuda max_memory_allocated"}))
        return
    reset = bs._reset_peak()
    before = bs._status_kb()
    maxrss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t0 = time.perf_counter()
    value = run_method(method, inputs, args.queries, args.updates)
    seconds = time.perf_counter() - t0
    after = bs._status_kb()
    maxrss_after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    extra_kb = after["VmHWM"] - before["VmRSS"] if reset else maxrss_after - max(maxrss_before, before["VmRSS"])
    print(json.dumps({"method": method, "input_bytes": bs.nbytes(inputs[0], inputs[1], target),
                      "rss_inputs_kb": before["VmRSS"], "extra_kb": extra_kb, "peak_reset": reset,
                      "seconds": seconds, "value": value}))


def measure_memory(args) -> List[dict]:
    rows = []
    for method in METHODS:
        cmd = [sys.executable, os.path.abspath(__file__), "--memory", method, "--queries", str(args.queries),
               "--candidates", str(args.candidates), "--updates", str(args.updates), "--seed", str(args.seed),
               "--threads", str(args.threads), "--device", bs.DEVICE.type]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        line = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
        if proc.returncode != 0 or not line:
            print(f"memory {method}: failed (rc {proc.returncode})\n{proc.stderr[-2000:]}", flush=True)
            continue
        rows.append(json.loads(line[-1]))
    return rows


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--queries", type=int, default=10_000)
    ap.add_argument("--candidates", type=int, default=1_000)
    ap.add_argument("--updates", type=int, default=100, help="update calls (batches of whole queries)")
    ap.add_argument("--repeat", type=int, default=5, help="repeats of ours (median)")
    ap.add_argument("--slow-repeat", type=int, default=3, help="repeats of torchmetrics (seconds each)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--no-memory", action="store_true", help="skip the peak-memory subprocesses")
    ap.add_argument("--wait-idle", type=float, default=0.0, metavar="SECONDS",
                    help="wait up to SECONDS for an idle machine before each method (see bench_scores.py)")
    ap.add_argument("--threads", type=int, default=0, help="torch.set_num_threads (default: torch's choice)")
    ap.add_argument("--json", metavar="PATH", help="also write the results as JSON")
    bs.add_device_arg(ap)
    ap.add_argument("--quick", action="store_true", help="200 x 100 in 4 updates, one repeat: a smoke test")
    ap.add_argument("--memory", metavar="METHOD", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.quick and not args.memory:
        args.queries, args.candidates, args.updates, args.repeat, args.slow_repeat = 200, 100, 4, 1, 1
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    bs.set_device(args.device)
    if args.memory:
        memory_child(args.memory, args)
        return
    if args.wait_idle > 0:
        bs.WAIT_IDLE = args.wait_idle

    Q, N = args.queries, args.candidates
    print(f"# bench_lightning: {Q} queries x {N} candidates (flat, grouped), {args.updates} updates, top_k={K}",
          flush=True)
    print(f"machine: {bs.machine_line()}", flush=True)
    print(bs.device_line(), flush=True)
    print(f"command: {' '.join([os.path.relpath(sys.executable)] + sys.argv)}", flush=True)
    print(f"code: {bs.code_version()}", flush=True)
    import torchmetrics

    print(f"torchmetrics {torchmetrics.__version__}", flush=True)
    inputs = make_inputs(Q, N, args.seed)
    run_method("tm_map", make_inputs(16, N, args.seed + 7), 16, 2)  # lazy imports
    run_method("ours_map", make_inputs(16, N, args.seed + 7), 16, 2)

    print("\n## timing (build + updates + compute)", flush=True)
    times: Dict[str, float] = {}
    values: Dict[str, float] = {}
    loads: Dict[str, float] = {}
    for method in METHODS:
        repeat = args.slow_repeat if method.startswith("tm") else args.repeat
        med, runs, value = bs.timed(lambda: run_method(method, inputs, Q, args.updates), repeat,
                                    warmup=0 if method.startswith("tm") else 1)
        times[method], values[method], loads[method] = med, value, bs.LAST_LOAD
        ld = "-" if bs.LAST_LOAD is None else f"{bs.LAST_LOAD:.2f}"
        print(f"  {LABELS[method]:<52} {bs.fmt_s(med):>8} s  other load {ld}  "
              f"(runs: {', '.join(bs.fmt_s(t) for t in runs)})  value {value:.8f}", flush=True)

    mem = {} if args.no_memory else {m["method"]: m for m in measure_memory(args)}

    print("\n## results\n")
    print("| metric | torchmetrics s | ours s | speed-up | torchmetrics extra peak MiB | ours extra peak MiB "
          "| inputs MiB | torchmetrics value | ours value | abs diff |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    checks = []
    for name, tm, ours in (("RetrievalMAP(top_k=10)", "tm_map", "ours_map"),
                           ("RetrievalNormalizedDCG(top_k=10)", "tm_ndcg", "ours_ndcg")):
        speed = times[tm] / times[ours]
        diff = abs(values[tm] - values[ours])
        m_tm, m_ours = mem.get(tm), mem.get(ours)
        mib = lambda m, key="extra_kb": "-" if m is None else f"{m[key] / 1024:.1f}"  # noqa: E731
        inp = "-" if m_ours is None else f"{m_ours['input_bytes'] / 2**20:.1f}"
        print(f"| {name} | {bs.fmt_s(times[tm])} | {bs.fmt_s(times[ours])} | {bs.fmt_r(speed)} | {mib(m_tm)} | "
              f"{mib(m_ours)} | {inp} | {values[tm]:.8f} | {values[ours]:.8f} | {diff:.2e} |")
        checks.append((name, speed, diff, m_tm, m_ours))
    busy = [LABELS[m] for m, ld in loads.items() if (ld or 0) > bs.BUSY_LOAD]
    if busy:
        print(f"\nWARNING: other processes were busy during: {', '.join(busy)}")
    if mem and not all(m["peak_reset"] for m in mem.values()):
        print("(VmHWM could not be reset; extra peak taken from ru_maxrss)")

    print("\n## targets (from the issue)\n")
    for name, speed, diff, m_tm, m_ours in checks:
        print(f"- {name}: >= 10x faster: {speed:.1f}x -> {'met' if speed >= 10 else 'NOT met'}")
        if m_tm and m_ours:
            lower = m_ours["extra_kb"] < m_tm["extra_kb"]
            print(f"- {name}: lower peak memory: {m_ours['extra_kb'] / 1024:.1f} vs {m_tm['extra_kb'] / 1024:.1f} MiB "
                  f"-> {'met' if lower else 'NOT met'}")
        print(f"- {name}: same value: |diff| = {diff:.1e} -> {'met' if diff <= 1e-5 else 'NOT met'} (float32 tolerance)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"machine": bs.machine_line(), "device": bs.device_line(), "queries": Q, "candidates": N, "updates": args.updates,
                       "times": times, "values": values, "other_load": loads, "memory": list(mem.values())}, f, indent=1)


if __name__ == "__main__":
    main()
