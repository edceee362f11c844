"""Two-tower full-sort evaluation (issue 30): ``evaluate_embeddings(users, None, KEYS, gallery=items,
distance="dot", relevance=test_pairs, exclude=history_pairs)`` against a plain torch loop
(``u[chunk] @ v.T``, the history scattered to -inf, ``topk(20)``, the nine metrics written out
in torch), in one process.

Data (seeded): U users and I items, 64-d float32 Gaussian embeddings; each user has
``--history`` (20) random items seen in training (excluded) and ``--test`` (5) random test
items (relevant; the seen ones among them are excluded from R as well, in both methods).
Keys (nine, k = 20): ndcg, recall, precision, map, mrr, hit_rate, f1, precision_capped, map_hits.
The torch loop walks chunks of the same number of users as ours (the rows of a 256 MiB
budget) and its values are compared with ours (max abs difference printed; random floats:
no ties, so any correct top-k agrees).

Command (1 thread, serialised with the other benchmarks of the machine)::

    OMP_NUM_THREADS=1 PYTHONPATH=core:. flock /tmp/bench.lock .venv/bin/python benchmarks/bench_two_tower.py \\
        --users 100000 --items 50000 --repeats 3 --threads 1

Prints, per method, the median wall time of ``--repeats`` runs (alternating the methods) and
the ratios to ours. A third method, ``pyg``: the same top-k loop (scores, history -inf,
``topk(20)``) feeding torch_geometric's ``LinkPredMetricCollection`` (precision, recall, f1,
MAP, NDCG, MRR, hit ratio at 20; its MAP divides by min(R, k), which is R here: R <= 5 < 20)
chunk by chunk, the test pairs less the seen ones as its ``edge_label_index``; its means are
compared with ours (skipped when torch_geometric is not installed).

Peak memory (``--memory``, each method in a fresh subprocess, after the timings or alone with
``--no-time``): the inputs are built and the method warmed up on 64 users, then the peak RSS
is reset (``/proc/self/clear_refs``) and the method run once; "extra" is VmHWM after the run
less VmRSS before it, i.e. the memory beyond the inputs (the per-user outputs included:
``[U, 9]`` float64 values). Against ``sizing.CPU_MEMORY_BUDGET`` (256 MiB of scratch per query
chunk). For the memory alone at large sizes::

    OMP_NUM_THREADS=1 PYTHONPATH=core:. flock /tmp/bench.lock .venv/bin/python benchmarks/bench_two_tower.py \
        --users 250000 --items 100000 --no-time --memory --methods ours
"""
from __future__ import annotations

import argparse
import gc
import json
import os
import resource
import statistics
import subprocess
import sys
import time

import torch

import retrieval_core as rc
from retrieval_core import sizing

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_scores as bs  # noqa: E402  (the memory helpers: peak RSS from /proc, the house style)

K = 20
KEYS = [f"{name}@{K}" for name in ("ndcg", "recall", "precision", "map", "mrr", "hit_rate", "f1", "precision_capped",
                                   "map_hits")]


def make_data(n_users: int, n_items: int, dims: int, history: int, test: int, seed: int):
    g = torch.Generator().manual_seed(seed)
    users = torch.randn(n_users, dims, generator=g)
    items = torch.randn(n_items, dims, generator=g)

    def pairs(per_user):
        u = torch.arange(n_users).repeat_interleave(per_user)
        i = torch.randint(0, n_items, (n_users * per_user,), generator=g)
        key = (u * n_items + i).unique()  # distinct pairs, sorted by user then item (as unique(dim=1))
        return torch.stack([key // n_items, key % n_items])

    return users, items, pairs(history), pairs(test)


def ours(users, items, truth, seen, reduce="none"):
    r = rc.evaluate_embeddings(users, None, KEYS, gallery=items, distance="dot", relevance=truth, exclude=seen,
                               reduce=reduce, progress=False)
    return torch.stack([r[k] for k in KEYS], -1)


def _csr(pairs, n_users):
    offsets = torch.zeros(n_users + 1, dtype=torch.int64)
    offsets[1:] = torch.cumsum(torch.bincount(pairs[0], minlength=n_users), 0)
    return offsets, pairs[1]  # pairs sorted by user (make_data sorts them)


def _chunk_rows(offsets, start, stop):
    """The chunk-local row of each of the chunk's pairs (CSR ``offsets``)."""
    return torch.repeat_interleave(torch.arange(stop - start), offsets[start + 1:stop + 1] - offsets[start:stop])


def _masked_topk(users, items, s_off, s_items, start, stop):
    """The plain top-k of one chunk: scores, the chunk's history -inf, ``topk(K)``."""
    scores = users[start:stop] @ items.T
    seen_rows = _chunk_rows(s_off, start, stop)
    scores[seen_rows, s_items[int(s_off[start]):int(s_off[stop])]] = float("-inf")
    return scores.topk(K, dim=1).indices, seen_rows


def torch_loop(users, items, truth, seen, rows: int):
    """The plain loop: per chunk of users, scores, history -inf, top-20, hits and the nine metrics."""
    n_users, n_items = users.shape[0], items.shape[0]
    t_off, t_items = _csr(truth, n_users)
    s_off, s_items = _csr(seen, n_users)
    discount = 1.0 / torch.log2(torch.arange(2, K + 2, dtype=torch.float64))
    ranks = torch.arange(1, K + 1, dtype=torch.float64)
    out = torch.empty(n_users, len(KEYS), dtype=torch.float64)
    for start in range(0, n_users, rows):
        stop = min(start + rows, n_users)
        c = stop - start
        top, seen_rows = _masked_topk(users, items, s_off, s_items, start, stop)
        relevant = torch.zeros(c, n_items, dtype=torch.bool)
        relevant[_chunk_rows(t_off, start, stop), t_items[int(t_off[start]):int(t_off[stop])]] = True
        relevant[seen_rows, s_items[int(s_off[start]):int(s_off[stop])]] = False  # excluded: not in R
        n_rel = relevant.sum(1).to(torch.float64)
        hits = relevant.gather(1, top).to(torch.float64)
        n_hits = hits.sum(1)
        cum = hits.cumsum(1)
        ideal = (ranks.unsqueeze(0) <= n_rel.unsqueeze(1)).to(torch.float64) @ discount
        first = torch.where(hits.any(1), hits.argmax(1).to(torch.float64) + 1, torch.inf)
        ap_sum = (cum / ranks * hits).sum(1)
        out[start:stop] = torch.stack([
            (hits @ discount) / ideal, n_hits / n_rel, n_hits / K, ap_sum / n_rel, 1.0 / first,
            (n_hits > 0).to(torch.float64), 2 * n_hits / (K + n_rel), n_hits / torch.clamp(n_rel, max=K),
            torch.where(n_hits > 0, ap_sum / n_hits, 0.0)], 1)
    return out.masked_fill(torch.isinf(out) | torch.isnan(out), float("nan"))  # R = 0: undefined


# torch_geometric's LinkPred* metrics and the columns of KEYS they match (its MAP divides by min(R, k): R here)
PYG_KEYS = {"LinkPredPrecision": "precision", "LinkPredRecall": "recall", "LinkPredF1": "f1", "LinkPredMAP": "map",
            "LinkPredNDCG": "ndcg", "LinkPredMRR": "mrr", "LinkPredHitRatio": "hit_rate"}


def have_pyg() -> bool:
    try:
        import torch_geometric.metrics  # noqa: F401
    except ImportError:
        return False
    return True


def pyg_loop(users, items, truth, seen, rows: int):
    """The same top-k loop, torch_geometric's metrics fed each chunk's top-k and its test pairs
    less the seen ones (R counts no excluded item, as ours): ``{key: mean}``."""
    from torch_geometric import metrics as M

    n_users, n_items = users.shape[0], items.shape[0]
    collection = M.LinkPredMetricCollection([getattr(M, name)(K) for name in PYG_KEYS])
    kept = ~torch.isin(truth[0] * n_items + truth[1], seen[0] * n_items + seen[1])
    t_off, t_items = _csr(truth[:, kept], n_users)
    s_off, s_items = _csr(seen, n_users)
    for start in range(0, n_users, rows):
        stop = min(start + rows, n_users)
        top, _ = _masked_topk(users, items, s_off, s_items, start, stop)
        lo, hi = int(t_off[start]), int(t_off[stop])
        collection.update(top, torch.stack([_chunk_rows(t_off, start, stop), t_items[lo:hi]]))
    return {f"{PYG_KEYS[name.split('@')[0]]}@{K}": float(v) for name, v in collection.compute().items()}


METHODS = ("ours", "loop", "pyg")


def run_method(method, users, items, truth, seen, rows, reduce="none"):
    if method == "ours":
        return ours(users, items, truth, seen, reduce)
    if method == "loop":
        return torch_loop(users, items, truth, seen, rows)
    return pyg_loop(users, items, truth, seen, rows)


# --------------------------------------------------------------------------- memory


def memory_child(args) -> None:
    """Runs in a fresh process: build the inputs, warm the method up on 64 users, reset the
    peak, run the method once (ours: reduce="mean", the per-user values [U, 9] held inside;
    the loops: their per-user outputs), print one JSON line."""
    method = args.memory_child
    users, items, seen, truth = make_data(args.users, args.items, args.dims, args.history, args.test, args.seed)
    rows = sizing.chunk_rows(args.items, False, sizing.CPU_MEMORY_BUDGET, ranked=K)
    small = make_data(64, args.items, args.dims, args.history, args.test, args.seed + 1)
    run_method(method, small[0], small[1], small[3], small[2], rows, "mean")
    del small
    gc.collect()
    reset = bs._reset_peak()
    before = bs._status_kb()
    maxrss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t0 = time.perf_counter()
    out = run_method(method, users, items, truth, seen, rows, "mean")
    seconds = time.perf_counter() - t0
    after = bs._status_kb()
    maxrss_after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    extra_kb = after["VmHWM"] - before["VmRSS"] if reset else maxrss_after - max(maxrss_before, before["VmRSS"])
    del out
    inputs = sum(t.numel() * t.element_size() for t in (users, items, seen, truth))
    print(json.dumps({"method": method, "users": args.users, "items": args.items, "input_bytes": inputs,
                      "rss_inputs_kb": before["VmRSS"], "peak_kb": after["VmHWM"] if reset else maxrss_after,
                      "extra_kb": extra_kb, "peak_reset": reset, "seconds": seconds, "rows": rows,
                      "threads": torch.get_num_threads()}))


def measure_memory(args, methods) -> None:
    budget = sizing.CPU_MEMORY_BUDGET
    print(f"\npeak memory (fresh subprocess per method; extra = VmHWM after the run - VmRSS after the inputs; "
          f"budget {budget / 2**20:.0f} MiB of chunk scratch; per-user values [U, 9] float64 = "
          f"{args.users * len(KEYS) * 8 / 2**20:.1f} MiB)", flush=True)
    for method in methods:
        cmd = [sys.executable, os.path.abspath(__file__), "--memory-child", method]
        for name in ("users", "items", "dims", "history", "test", "seed", "threads"):
            cmd += [f"--{name}", str(getattr(args, name))]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        line = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
        if proc.returncode != 0 or not line:
            print(f"memory {method}: failed (rc {proc.returncode})\n{proc.stderr[-2000:]}", flush=True)
            continue
        m = json.loads(line[-1])
        print(f"{method:>5}: extra {m['extra_kb'] / 1024:8.1f} MiB  (inputs {m['input_bytes'] / 2**20:.1f} MiB, "
              f"RSS with inputs {m['rss_inputs_kb'] / 1024:.1f} MiB, peak {m['peak_kb'] / 1024:.1f} MiB, "
              f"{m['seconds']:.1f} s, {m['rows']} users per chunk, peak reset: {m['peak_reset']})", flush=True)


# --------------------------------------------------------------------------- timing


def time_methods(args, methods) -> None:
    users, items, seen, truth = make_data(args.users, args.items, args.dims, args.history, args.test, args.seed)
    rows = sizing.chunk_rows(args.items, False, sizing.CPU_MEMORY_BUDGET, ranked=K)
    print(f"{args.users} users x {args.items} items x {args.dims} dims, k={K}, {seen.shape[1]} history pairs "
          f"(excluded), {truth.shape[1]} test pairs, {len(KEYS)} keys, {torch.get_num_threads()} thread(s), "
          f"{rows} users per chunk", flush=True)
    times = {m: [] for m in methods}
    out = {}
    for _ in range(args.repeats):
        for m in methods:
            t = time.perf_counter()
            out[m] = run_method(m, users, items, truth, seen, rows)
            times[m].append(time.perf_counter() - t)
    for name, ts in times.items():
        print(f"{name:>5}: median {statistics.median(ts):.2f} s  (runs: {', '.join(f'{x:.2f}' for x in ts)})")
    if "ours" not in times:
        return
    mine = statistics.median(times["ours"])
    for name in methods[1:]:
        print(f"ratio {name} / ours: {statistics.median(times[name]) / mine:.2f}")
    if "loop" in out:
        a, b = out["ours"], out["loop"]
        diff = (a - b).abs().nan_to_num(0.0).max().item()
        print(f"max |ours - loop| = {diff:.3g}; same undefined users: {bool((a.isnan() == b.isnan()).all())}")
    if "pyg" in out:
        means = out["ours"].nanmean(0)
        worst = max(abs(means[KEYS.index(key)].item() - v) for key, v in out["pyg"].items())
        print(f"max |ours - torch_geometric| over the means of {len(out['pyg'])} shared keys = {worst:.3g}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--users", type=int, default=100_000)
    ap.add_argument("--items", type=int, default=50_000)
    ap.add_argument("--dims", type=int, default=64)
    ap.add_argument("--history", type=int, default=20)
    ap.add_argument("--test", type=int, default=5)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--methods", default=",".join(METHODS), help="comma-separated, of: " + ", ".join(METHODS))
    ap.add_argument("--memory", action="store_true", help="peak memory of each method in a fresh subprocess")
    ap.add_argument("--no-time", action="store_true", help="skip the timings (with --memory: memory alone)")
    ap.add_argument("--memory-child", choices=METHODS, help=argparse.SUPPRESS)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    if args.memory_child:
        memory_child(args)
        return
    methods = [m for m in args.methods.split(",") if m]
    unknown = sorted(set(methods) - set(METHODS))
    if unknown:
        raise SystemExit(f"unknown methods {unknown}; of {METHODS}")
    if "pyg" in methods and not have_pyg():
        print("torch_geometric is not installed: pyg skipped")
        methods.remove("pyg")
    if not args.no_time:
        time_methods(args, methods)
    if args.memory:
        measure_memory(args, methods)


if __name__ == "__main__":
    main()
