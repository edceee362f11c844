"""GPU workload set: ours against the bare torch primitive of each workload, on one device.

Workloads (``--only`` picks some; full sizes below, ``--quick`` shrinks every size for a
CPU smoke test of the script):

* ``dense_topk``: dense 100k x 1k and 10k x 10k float32 scores (the data of
  bench_scores.py), keys ndcg@10 map@10 mrr@10 recall@10 precision@10 together, vs
  bare ``torch.topk(preds, k=10, dim=1)``.
* ``dense_whole``: 100k x 1k, whole-list keys ndcg map mrr auroc, vs
  ``torch.sort(preds, dim=1, descending=True, stable=True)`` of the same matrix.
* ``flat_shuffled``: 1e8 flat entries (100k queries x 1k, entries randomly permuted,
  ``indexes=``), the five @10 keys, vs one ``torch.sort(indexes, stable=True)``; with
  the extra peak memory of each over the inputs.
* ``embeddings``: N x N x 128 self-gallery (each item's own row excluded) for N = 200k
  and 1M, ``--emb-class-size`` items per class on average; keys cmc@1
  precision_capped@5 map@r r_precision map_hits@10 at default settings, vs a bare
  chunked ``x[c] @ x.T`` + ``topk(64)`` floor.
* ``torchmetrics``: 10k x 1k flat, 100 updates, ``RetrievalMAP(top_k=10)`` and
  ``RetrievalNormalizedDCG(top_k=10)``: torchmetrics vs ``lightning_retrieval`` (the
  runner of bench_lightning.py), both on the device.
* ``pml``: pytorch-metric-learning ``AccuracyCalculator`` with ``CustomKNN(CosineSimilarity())``
  on the device vs ours, N = 100k self-gallery, precision_at_1 / r_precision /
  mean_average_precision_at_r (ours: cmc@1, r_precision, map@r).

Every timing is the median of ``--repeat`` runs after one warm-up, each run bracketed
by ``torch.cuda.synchronize()`` on CUDA; peak memory (CUDA only) is
``torch.cuda.max_memory_allocated`` during one more run minus what was allocated
before it (the inputs). Prints one table (ratio = ours / reference) and writes JSON
with ``--json``.

Usage::

    .venv/bin/python benchmarks/bench_gpu.py --device cuda                  # everything (long: run parts with --only)
    .venv/bin/python benchmarks/bench_gpu.py --device cuda --only dense_topk,dense_whole,flat_shuffled
    .venv/bin/python benchmarks/bench_gpu.py --device cuda --only embeddings --emb-sizes 200000
    .venv/bin/python benchmarks/bench_gpu.py --quick                        # CPU smoke test, tiny sizes
"""
from __future__ import annotations

import argparse
import gc
import json
import os
import sys
from typing import Callable, Dict, List, Optional

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import bench_scores as bs  # noqa: E402  (data, device, timing and machine helpers)

import retrieval_core  # noqa: E402

WORKLOADS = ("dense_topk", "dense_whole", "flat_shuffled", "embeddings", "torchmetrics", "pml")
TOPK_KEYS = ["ndcg@10", "map@10", "mrr@10", "recall@10", "precision@10"]
WHOLE_KEYS = ["ndcg", "map", "mrr", "auroc"]
EMB_KEYS = ["cmc@1", "precision_capped@5", "map@r", "r_precision", "map_hits@10"]
EMB_FLOOR_K = 64
FULL = {"dense": [(100_000, 1_000), (10_000, 10_000)], "whole": (100_000, 1_000), "flat": (100_000, 1_000),
        "emb": [200_000, 1_000_000], "tm": (10_000, 1_000, 100), "pml": 100_000}
QUICK = {"dense": [(300, 100), (40, 500)], "whole": (300, 100), "flat": (500, 100),
         "emb": [1_500, 3_000], "tm": (200, 100, 4), "pml": 1_500}


class Runner:
    """Times ``(ours, reference)`` pairs and collects the rows of the table."""

    def __init__(self, repeat: int):
        self.repeat = repeat
        self.rows: List[dict] = []

    def measure(self, fn: Callable[[], object], repeat: Optional[int] = None, keep: bool = False):
        """(median s, runs, extra peak bytes or None, output if ``keep``)."""
        med, times, out = bs.timed(fn, repeat or self.repeat)
        if not keep:
            del out
            out = None
        gc.collect()
        peak = None
        if bs.DEVICE.type == "cuda":
            res, peak, _ = bs.cuda_peak(fn)
            del res
            torch.cuda.empty_cache()
        return med, times, peak, out

    def pair(self, workload: str, size: str, ours: Callable[[], object], ref_name: str,
             reference: Callable[[], object], input_bytes: int, repeat: Optional[int] = None,
             note: str = "") -> dict:
        r_med, r_times, r_peak, _ = self.measure(reference, repeat)
        o_med, o_times, o_peak, out = self.measure(ours, repeat, keep=True)
        row = {"workload": workload, "size": size, "reference": ref_name, "ours_s": o_med, "ours_runs": o_times,
               "reference_s": r_med, "reference_runs": r_times, "ratio": o_med / r_med,
               "ours_extra_peak_bytes": o_peak, "reference_extra_peak_bytes": r_peak,
               "input_bytes": input_bytes, "note": note}
        self.rows.append(row)
        print(f"  {workload} {size}: ours {bs.fmt_s(o_med)} s, {ref_name} {bs.fmt_s(r_med)} s, "
              f"ours / reference {bs.fmt_r(o_med / r_med)}{mib_note(o_peak, r_peak)} {note}", flush=True)
        row["_out"] = out
        return row


def mib(x: Optional[int]) -> str:
    return "-" if x is None else f"{x / 2**20:.0f}"


def mib_note(ours: Optional[int], ref: Optional[int]) -> str:
    return "" if ours is None else f"; extra peak MiB ours {mib(ours)}, reference {mib(ref)}"


def on_device(*tensors):
    return tuple(t.to(bs.DEVICE) for t in tensors)


def free() -> None:
    gc.collect()
    if bs.DEVICE.type == "cuda":
        torch.cuda.empty_cache()


# --------------------------------------------------------------------------- workloads


def dense_topk(run: Runner, sizes, seed: int) -> None:
    for q, n in sizes:
        preds, target = on_device(*bs.make_data(q, n, seed))
        run.pair("dense_topk", f"{q}x{n}", lambda: retrieval_core.evaluate_scores(preds, target, TOPK_KEYS),
                 "torch.topk(k=10)", lambda: torch.topk(preds, k=10, dim=1), bs.nbytes(preds, target))
        del preds, target
        free()


def dense_whole(run: Runner, size, seed: int) -> None:
    q, n = size
    preds, target = on_device(*bs.make_data(q, n, seed))
    run.pair("dense_whole", f"{q}x{n}", lambda: retrieval_core.evaluate_scores(preds, target, WHOLE_KEYS),
             "torch.sort(stable) of preds", lambda: torch.sort(preds, dim=1, descending=True, stable=True),
             bs.nbytes(preds, target))
    del preds, target
    free()


def flat_shuffled(run: Runner, size, seed: int) -> None:
    q, n = size
    preds, target = bs.make_data(q, n, seed)
    p, t, i = bs.flat_grouped(preds, target)
    perm = bs.shuffle_perm(p.numel(), seed)
    p, t, i = on_device(p[perm], t[perm], i[perm])
    del preds, target, perm
    gc.collect()
    run.pair("flat_shuffled", f"{q * n:.0e} entries ({q} queries)",
             lambda: retrieval_core.evaluate_scores(p, t, TOPK_KEYS, indexes=i),
             "torch.sort(indexes, stable)", lambda: torch.sort(i, stable=True), bs.nbytes(p, t, i))
    del p, t, i
    free()


def embeddings(run: Runner, sizes, class_size: int, repeat: int, seed: int) -> None:
    import bench_embeddings as be

    for n in sizes:
        classes = max(2, n // class_size)
        x, labels = on_device(*be.make_data(n, classes=classes, seed=seed))
        max_r = int(torch.bincount(labels).max()) - 1
        rows = be.torch_floor_rows(n)
        run.pair("embeddings", f"{n}x{n}x{be.DIM} ({classes} classes, max R {max_r})",
                 lambda: retrieval_core.evaluate_embeddings(x, labels, EMB_KEYS),
                 f"x[c] @ x.T + topk({EMB_FLOOR_K}), {rows}-row chunks",
                 lambda: be.torch_floor(x, x, min(EMB_FLOOR_K, n), rows), bs.nbytes(x, labels), repeat=repeat)
        del x, labels
        free()


def torchmetrics_pair(run: Runner, size, seed: int) -> Dict[str, float]:
    import bench_lightning as bl

    q, n, updates = size
    inputs = bl.make_inputs(q, n, seed)
    small = bl.make_inputs(16, n, seed + 7)
    diffs = {}
    for tm, ours, name in (("tm_map", "ours_map", "RetrievalMAP(top_k=10)"),
                           ("tm_ndcg", "ours_ndcg", "RetrievalNormalizedDCG(top_k=10)")):
        bl.run_method(tm, small, 16, 2)  # lazy imports
        bl.run_method(ours, small, 16, 2)
        row = run.pair("torchmetrics", f"{q}x{n} flat, {updates} updates, {name}",
                       lambda: bl.run_method(ours, inputs, q, updates), f"torchmetrics {name}",
                       lambda: bl.run_method(tm, inputs, q, updates), bs.nbytes(*inputs))
        theirs = bl.run_method(tm, inputs, q, updates)
        diffs[name] = abs(row["_out"] - theirs)
        print(f"    value: ours {row['_out']:.8f}, torchmetrics {theirs:.8f}, |diff| {diffs[name]:.1e}", flush=True)
    del inputs
    free()
    return diffs


def pml_pair(run: Runner, n: int, class_size: int, seed: int) -> Dict[str, float]:
    import bench_embeddings as be

    x, labels = on_device(*be.make_data(n, classes=max(2, n // class_size), seed=seed))
    calc = be.pml_calculator(n)  # CustomKNN(CosineSimilarity()) on the device
    row = run.pair("pml", f"{n}x{n}x{be.DIM}", lambda: retrieval_core.evaluate_embeddings(x, labels, [k for _, k in be.PML_PAIRS]),
                   "PML AccuracyCalculator(CustomKNN)", lambda: calc.get_accuracy(x, labels), bs.nbytes(x, labels))
    theirs = calc.get_accuracy(x, labels)
    diffs = {}
    for pk, ok in be.PML_PAIRS:
        diffs[ok] = abs(float(row["_out"][ok]) - float(theirs[pk]))
        print(f"    {ok}: ours {float(row['_out'][ok]):.8f}, PML {pk} {float(theirs[pk]):.8f}, |diff| {diffs[ok]:.1e}",
              flush=True)
    del x, labels
    free()
    return diffs


# --------------------------------------------------------------------------- main


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    bs.add_device_arg(ap)
    ap.add_argument("--only", default=",".join(WORKLOADS), help=f"comma-separated workloads of {', '.join(WORKLOADS)}")
    ap.add_argument("--quick", action="store_true", help="tiny sizes, one repeat: a smoke test (runs on CPU)")
    ap.add_argument("--repeat", type=int, default=5, help="timed runs per method (median), after one warm-up")
    ap.add_argument("--emb-repeat", type=int, default=3, help="timed runs of the embedding workloads")
    ap.add_argument("--emb-sizes", help="comma-separated N of the embedding workload (default 200000,1000000)")
    ap.add_argument("--emb-class-size", type=int, default=50, help="mean items per class in the embedding data")
    ap.add_argument("--pml-n", type=int, help="N of the PML workload (default 100000)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", metavar="PATH", help="also write the results as JSON")
    args = ap.parse_args(argv)
    bs.set_device(args.device)
    only = [w for w in args.only.split(",") if w]
    unknown = [w for w in only if w not in WORKLOADS]
    if unknown:
        raise SystemExit(f"--only: unknown workload(s) {', '.join(unknown)}; choose from {', '.join(WORKLOADS)}")
    sizes = dict(QUICK if args.quick else FULL)
    if args.emb_sizes:
        sizes["emb"] = [int(s) for s in args.emb_sizes.split(",") if s.strip()]
    if args.pml_n:
        sizes["pml"] = args.pml_n
    repeat = 1 if args.quick else args.repeat
    emb_repeat = 1 if args.quick else args.emb_repeat

    print(f"# bench_gpu: {', '.join(only)}{' (quick sizes)' if args.quick else ''}", flush=True)
    print(f"machine: {bs.machine_line()}", flush=True)
    print(bs.device_line(), flush=True)
    print(f"command: {' '.join([os.path.relpath(sys.executable)] + sys.argv)}", flush=True)
    print(f"code: {bs.code_version()}", flush=True)
    if bs.DEVICE.type == "cpu" and not args.quick:
        print("(device cpu: full GPU sizes on a CPU take long; --quick for a smoke test)", flush=True)

    run = Runner(repeat)
    agreement: Dict[str, Dict[str, float]] = {}
    for workload in only:
        print(f"\n## {workload}", flush=True)
        if workload == "dense_topk":
            dense_topk(run, sizes["dense"], args.seed)
        elif workload == "dense_whole":
            dense_whole(run, sizes["whole"], args.seed)
        elif workload == "flat_shuffled":
            flat_shuffled(run, sizes["flat"], args.seed)
        elif workload == "embeddings":
            embeddings(run, sizes["emb"], args.emb_class_size, emb_repeat, args.seed)
        elif workload == "torchmetrics":
            if bs.have("torchmetrics") and bs.have("lightning_retrieval"):
                agreement["torchmetrics"] = torchmetrics_pair(run, sizes["tm"], args.seed)
            else:
                print("  torchmetrics or lightning_retrieval not importable: skipped", flush=True)
        elif workload == "pml":
            if bs.have("pytorch_metric_learning"):
                agreement["pml"] = pml_pair(run, sizes["pml"], args.emb_class_size, args.seed)
            else:
                print("  pytorch-metric-learning not installed: skipped", flush=True)

    print(f"\n## table (device {bs.DEVICE}; median of {repeat} runs, embeddings {emb_repeat}; "
          "ratio = ours / reference)\n")
    print("| workload | size | reference | reference s | ours s | ours / reference | inputs MiB "
          "| ours extra peak MiB | reference extra peak MiB |")
    print("|---|---|---|---:|---:|---:|---:|---:|---:|")
    for r in run.rows:
        print(f"| {r['workload']} | {r['size']} | {r['reference']} | {bs.fmt_s(r['reference_s'])} | "
              f"{bs.fmt_s(r['ours_s'])} | {bs.fmt_r(r['ratio'])} | {mib(r['input_bytes'])} | "
              f"{mib(r['ours_extra_peak_bytes'])} | {mib(r['reference_extra_peak_bytes'])} |")
    if bs.DEVICE.type != "cuda":
        print("\n(peak memory is measured on CUDA only; bench_scores.py and bench_embeddings.py measure CPU RSS)")
    if agreement:
        print("\nvalue agreement (|ours - other|): " + "; ".join(
            f"{w}: " + ", ".join(f"{k} {v:.1e}" for k, v in d.items()) for w, d in agreement.items()))
    if args.json:
        rows = [{k: v for k, v in r.items() if k != "_out"} for r in run.rows]
        with open(args.json, "w") as f:
            json.dump({"machine": bs.machine_line(), "device": bs.device_line(), "code": bs.code_version(),
                       "quick": args.quick, "repeat": repeat, "rows": rows, "agreement": agreement}, f, indent=1)


if __name__ == "__main__":
    main()
