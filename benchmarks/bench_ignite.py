"""ignite drop-ins: ``ignite_retrieval.NDCG`` / ``HitRate`` against pytorch-ignite's own
``ignite.metrics.rec_sys.NDCG`` / ``HitRate``, as an evaluator uses them.

Setup (defaults): 10 batches of 1,000 users x 1,000 items, scores ``torch.rand``
float32, ~1% relevant items with integer gains 1-3 (float32 target; the data of
bench_scores.py, one seed per batch), ``top_k=[1, 5, 10]``. One timed pass =
``reset()``, ``update((y_pred, y))`` for each batch, ``compute()``: the work of one
evaluation epoch. Also timed: ``RankingMetrics`` with both metric families in one
metric (one ranking per batch), in full and compact mode.

Usage::

    .venv/bin/python benchmarks/bench_ignite.py [--batches 10 --users 1000 --items 1000
        --top-k 1,5,10 --repeat 5 --wait-idle 300 --threads N --json PATH --device cpu|cuda]

``--device cuda``: batches on the GPU, every metric built with ``device=cuda``, timed
regions bracketed by ``torch.cuda.synchronize()``.

Medians of ``--repeat`` passes after one warm-up pass, side by side in this process.
"other load" is the CPU (in cores) that other processes used during the timed
passes; on a 2-core machine anything above ~0.1 distorts torch's 2-thread kernels
(see BENCHMARKS.md); ``--wait-idle`` waits for a quiet machine and retries.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Callable, Dict, List

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_scores as bs  # noqa: E402  (data, timing with load measurement, machine line)

import ignite.metrics.rec_sys as ignite_rec_sys  # noqa: E402

import ignite_retrieval  # noqa: E402


def make_batches(n_batches: int, users: int, items: int, seed: int, device="cpu"):
    return [tuple(t.to(device) for t in bs.make_data(users, items, seed + i)) for i in range(n_batches)]


def epoch(metric, batches) -> Callable[[], object]:
    def run():
        metric.reset()
        for batch in batches:
            metric.update(batch)
        return metric.compute()
    return run


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--batches", type=int, default=10)
    ap.add_argument("--users", type=int, default=1000)
    ap.add_argument("--items", type=int, default=1000)
    ap.add_argument("--top-k", default="1,5,10")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--wait-idle", type=float, default=0.0, metavar="SECONDS")
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--json", metavar="PATH")
    bs.add_device_arg(ap)
    ap.add_argument("--quick", action="store_true", help="2 batches of 100 x 100, one repeat: a smoke test")
    args = ap.parse_args(argv)
    if args.quick:
        args.batches, args.users, args.items, args.repeat = 2, 100, 100, 1
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    device = bs.set_device(args.device)
    if args.wait_idle > 0:
        bs.WAIT_IDLE = args.wait_idle
        idle = bs.wait_idle(args.wait_idle)
        print(f"(waited for an idle machine: {'ok' if idle else 'timed out, still busy'})", flush=True)
    top_k = [int(k) for k in args.top_k.split(",")]
    print(f"# bench_ignite: {args.batches} batches of {args.users} x {args.items}, top_k={top_k}", flush=True)
    print(f"machine: {bs.machine_line()}", flush=True)
    print(bs.device_line(), flush=True)
    print(f"command: {' '.join([os.path.relpath(sys.executable)] + sys.argv)}", flush=True)
    print(f"code: {bs.code_version()}", flush=True)

    batches = make_batches(args.batches, args.users, args.items, args.seed, device)
    keys_ndcg = [f"ndcg_exp@{k}" for k in top_k]
    keys_hit = [f"hit_rate@{k}" for k in top_k]
    methods: Dict[str, Callable[[], object]] = {
        "ignite NDCG": epoch(ignite_rec_sys.NDCG(top_k=top_k, device=device), batches),
        "ours NDCG": epoch(ignite_retrieval.NDCG(top_k=top_k, device=device), batches),
        "ignite HitRate": epoch(ignite_rec_sys.HitRate(top_k=top_k, device=device), batches),
        "ours HitRate": epoch(ignite_retrieval.HitRate(top_k=top_k, device=device), batches),
        "ours RankingMetrics (NDCG + HitRate keys)": epoch(
            ignite_retrieval.RankingMetrics(keys_ndcg + keys_hit, device=device), batches),
        "ours RankingMetrics compact": epoch(
            ignite_retrieval.RankingMetrics(keys_ndcg + keys_hit, compact=True, device=device), batches),
    }
    rows: List[dict] = []
    outputs: Dict[str, object] = {}
    for name, fn in methods.items():
        med, times, out = bs.timed(fn, args.repeat)
        outputs[name] = out
        rows.append({"method": name, "median_s": med, "times_s": times, "other_load": bs.LAST_LOAD})
        print(f"  {name:45s} median {bs.fmt_s(med)} s   (other load {bs.LAST_LOAD if bs.LAST_LOAD is None else round(bs.LAST_LOAD, 2)})", flush=True)

    med = {r["method"]: r["median_s"] for r in rows}
    print("\n| method | median s | ignite / ours |\n|---|---:|---:|")
    for family in ("NDCG", "HitRate"):
        theirs, ours = med[f"ignite {family}"], med[f"ours {family}"]
        print(f"| ignite {family}(top_k={top_k}) | {bs.fmt_s(theirs)} | |")
        print(f"| **ours {family}(top_k={top_k})** | **{bs.fmt_s(ours)}** | **{bs.fmt_r(theirs / ours)}** |")
    both = med["ignite NDCG"] + med["ignite HitRate"]
    for name in ("ours RankingMetrics (NDCG + HitRate keys)", "ours RankingMetrics compact"):
        print(f"| {name} vs ignite NDCG + HitRate ({bs.fmt_s(both)} s) | {bs.fmt_s(med[name])} | {bs.fmt_r(both / med[name])} |")

    print("\nvalues (ours vs ignite, max abs diff over top_k):")
    agreement = {}
    for family in ("NDCG", "HitRate"):
        ours, theirs = outputs[f"ours {family}"], outputs[f"ignite {family}"]
        diff = max(abs(a - b) for a, b in zip(ours, theirs))
        agreement[family] = diff
        print(f"  {family}: ours {[round(v, 8) for v in ours]}  ignite {[round(v, 8) for v in theirs]}  max diff {diff:.2e}")
    combined = outputs["ours RankingMetrics (NDCG + HitRate keys)"]
    compact = outputs["ours RankingMetrics compact"]
    same = all(abs(combined[a] - v) < 1e-12 for a, v in zip(keys_ndcg + keys_hit, list(outputs["ours NDCG"]) + list(outputs["ours HitRate"])))
    same_compact = all(abs(combined[k] - compact[k]) < 1e-12 for k in combined)
    print(f"  RankingMetrics = drop-ins: {same}; compact = full: {same_compact}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": bs.device_line(), "rows": rows, "agreement": agreement, "top_k": top_k, "args": vars(args)}, f, indent=1)


if __name__ == "__main__":
    main()
