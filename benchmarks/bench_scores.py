"""Score-mode benchmark: ``retrieval_core.evaluate_scores`` against a bare ``torch.topk``
floor, torchmetrics, pytorch-ignite (rec_sys), ranx and pytrec_eval.

Setup (defaults): 10,000 queries x 1,000 candidates, scores ``torch.rand`` float32
(seeded), about 1% relevant candidates with integer gains 1-3 (float32 target),
keys ndcg@10, map@10, mrr@10, precision@10, recall@10 evaluated together.

Usage::

    .venv/bin/python benchmarks/bench_scores.py [--queries 10000 --candidates 1000 --repeat 5 --quick]
    .venv/bin/python benchmarks/bench_scores.py --device cuda --queries 100000   # on a GPU

Timings run side by side in this process (median of repeats). Peak memory is
measured per method in a fresh subprocess (``--memory METHOD``) from
``/proc/self/status`` (VmHWM reset through ``/proc/self/clear_refs`` after the
inputs exist; ``ru_maxrss`` as fallback).

``--device cuda`` runs ours, the topk floor, torchmetrics and ignite on the GPU
(inputs built on CPU with the same seeds, then moved): every timed region is
bracketed by ``torch.cuda.synchronize()``, and the peak-memory subprocesses report
``torch.cuda.max_memory_allocated`` over what the inputs hold. ranx and pytrec_eval
stay on CPU (Python dicts).

Only the standard library, torch and the benchmarked packages are needed
(psutil is not used). Missing optional packages are reported and skipped.
"""
from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
from typing import Callable, Dict, List, Optional, Tuple

import torch

import retrieval_core

KEYS = ["ndcg@10", "map@10", "mrr@10", "precision@10", "recall@10"]
# Extra keys (untimed) for the agreement checks with the other libraries.
EXTRA_KEYS = ["map_hits@10", "mrr", "hit_rate@10", "ndcg_exp@10"]
K = 10
RELEVANT_FRACTION = 0.01
MEMORY_METHODS = ["floor", "dense", "flat_grouped", "flat_shuffled", "tm_ndcg"]
RANX_MAX_CONVERSION_S = 120.0


# --------------------------------------------------------------------------- data


def make_data(n_queries: int, n_candidates: int, seed: int) -> Tuple[torch.Tensor, torch.Tensor]:
    """Scores U[0, 1) float32 and gains: 0, or 1/2/3 (uniform) with probability 1%."""
    g = torch.Generator().manual_seed(seed)
    preds = torch.rand(n_queries, n_candidates, generator=g)
    u = torch.rand(n_queries, n_candidates, generator=g)
    # u < 0.01 -> floor(u * 300) + 1 is uniform on {1, 2, 3}
    target = torch.where(u < RELEVANT_FRACTION, torch.floor(u * (3 / RELEVANT_FRACTION)) + 1, 0.0)
    del u
    return preds, target.to(torch.float32)


def flat_grouped(preds, target):
    q, n = preds.shape
    return preds.view(-1), target.view(-1), torch.arange(q, device=preds.device).repeat_interleave(n)


def shuffle_perm(numel: int, seed: int) -> torch.Tensor:
    return torch.randperm(numel, generator=torch.Generator().manual_seed(seed + 1))


def query_perm(n_queries: int, seed: int) -> torch.Tensor:
    return torch.randperm(n_queries, generator=torch.Generator().manual_seed(seed + 2))


def nbytes(*ts: torch.Tensor) -> int:
    return sum(t.numel() * t.element_size() for t in ts)


# --------------------------------------------------------------------------- device

DEVICE = torch.device("cpu")  # set by set_device(); the other benchmarks share it


def add_device_arg(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--device", choices=("cpu", "cuda"), default="cpu",
                    help="where inputs live and ours runs (cuda: synchronised timings, CUDA peak memory)")


def set_device(name: str) -> torch.device:
    """Select the benchmark device; a clear exit when CUDA is asked for and absent."""
    global DEVICE
    if name == "cuda" and not torch.cuda.is_available():
        raise SystemExit("--device cuda: torch.cuda.is_available() is False (no GPU or a CPU-only torch)")
    DEVICE = torch.device(name)
    return DEVICE


def sync() -> None:
    """Wait for the device's queued work (CUDA kernels run asynchronously); no-op on CPU."""
    if DEVICE.type == "cuda":
        torch.cuda.synchronize(DEVICE)


def device_line() -> str:
    """The device, and the block sizes the package picks for it (when it has sizing.py)."""
    if DEVICE.type == "cuda":
        props = torch.cuda.get_device_properties(DEVICE)
        free, total = torch.cuda.mem_get_info(DEVICE)
        line = (f"device cuda: {props.name}, {total / 2**30:.1f} GiB ({free / 2**30:.1f} free), "
                f"CUDA {torch.version.cuda}")
    else:
        line = "device cpu"
    try:
        from retrieval_core import sizing

        line += "; sizes: " + ", ".join(f"{k} {v}" for k, v in sizing.summary(DEVICE).items() if k != "device")
    except ImportError:
        pass
    return line


def cuda_peak(run: Callable[[], object]) -> Tuple[object, int, float]:
    """Run once on the CUDA device: (output, bytes allocated above what was allocated
    before the run, seconds). The inputs are allocated before, so they are not counted."""
    sync()
    torch.cuda.reset_peak_memory_stats(DEVICE)
    before = torch.cuda.memory_allocated(DEVICE)
    t0 = time.perf_counter()
    out = run()
    sync()
    seconds = time.perf_counter() - t0
    return out, torch.cuda.max_memory_allocated(DEVICE) - before, seconds


# --------------------------------------------------------------------------- timing


_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _busy_seconds() -> Optional[float]:
    """CPU seconds all processes of the machine have been busy (from /proc/stat)."""
    try:
        with open("/proc/stat") as f:
            fields = [int(x) for x in f.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    # user nice system idle iowait irq softirq steal ...: busy = all but idle and iowait
    return (sum(fields[:8]) - fields[3] - fields[4]) / _TICK


def _own_seconds() -> float:
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


LAST_LOAD: Optional[float] = None  # other processes' CPU use during the last timed() runs, in cores


def _timed_once(fn, repeat, warmup):
    out = None
    for _ in range(warmup):
        out = fn()
    times = []
    busy0, own0, w0 = _busy_seconds(), _own_seconds(), time.perf_counter()
    for _ in range(repeat):
        gc.collect()
        sync()
        t0 = time.perf_counter()
        out = fn()
        sync()  # CUDA: the kernels fn queued are part of its time
        times.append(time.perf_counter() - t0)
    busy1, own1, wall = _busy_seconds(), _own_seconds(), time.perf_counter() - w0
    load = None if busy0 is None or wall < 0.05 else max(0.0, (busy1 - busy0) - (own1 - own0)) / wall
    return statistics.median(times), times, out, load


# Set by main(): seconds to wait for an idle machine before each method (0: don't).
WAIT_IDLE = 0.0
BUSY_LOAD = 0.1  # cores of other processes' CPU above which a measurement is retried
RETRIES = 3


def timed(fn: Callable[[], object], repeat: int, warmup: int = 1) -> Tuple[float, List[float], object]:
    """Median wall time of ``repeat`` runs after ``warmup`` runs. Sets LAST_LOAD: the CPU
    (in cores) that *other* processes used during the timed runs; on a 2-core machine
    any of it slows torch's 2-thread kernels a lot (threads wait for a busy core).
    With WAIT_IDLE, waits for an idle machine first and retries a contended measurement."""
    global LAST_LOAD
    for attempt in range(RETRIES if WAIT_IDLE > 0 else 1):
        if WAIT_IDLE > 0:
            wait_idle(WAIT_IDLE, calm=2)
        med, times, out, load = _timed_once(fn, repeat, warmup)
        if load is None or load <= BUSY_LOAD:
            break
        print(f"    (other processes used {load:.2f} cores during the runs; "
              f"{'retrying' if attempt + 1 < RETRIES and WAIT_IDLE > 0 else 'keeping it'})", flush=True)
    LAST_LOAD = load
    return med, times, out


def other_load(seconds: float = 1.0) -> Optional[float]:
    """CPU cores used by other processes over the next ``seconds``."""
    busy0, own0, w0 = _busy_seconds(), _own_seconds(), time.perf_counter()
    time.sleep(seconds)
    busy1, own1 = _busy_seconds(), _own_seconds()
    if busy0 is None:
        return None
    return max(0.0, (busy1 - busy0) - (own1 - own0)) / (time.perf_counter() - w0)


def wait_idle(timeout: float, threshold: float = 0.1, calm: int = 5) -> bool:
    """Wait until other processes used < ``threshold`` cores for ``calm`` seconds in a row."""
    deadline, quiet = time.perf_counter() + timeout, 0
    while time.perf_counter() < deadline:
        load = other_load(1.0)
        if load is None:
            return False
        quiet = quiet + 1 if load < threshold else 0
        if quiet >= calm:
            return True
    return False


def fmt_s(x: Optional[float]) -> str:
    if x is None:
        return "-"
    return f"{x:.3f}" if x < 100 else f"{x:.1f}"


def fmt_r(x: Optional[float]) -> str:
    if x is None:
        return "-"
    return f"{x:.2f}x" if x < 100 else f"{x:.0f}x"


def have(module: str) -> bool:
    try:
        __import__(module)
        return True
    except Exception:
        return False


# --------------------------------------------------------------------------- methods


def ours_dense(preds, target, keys=KEYS):
    return retrieval_core.evaluate_scores(preds, target, keys)


def ours_flat(p, t, i, keys=KEYS):
    return retrieval_core.evaluate_scores(p, t, keys, indexes=i)


def topk_floor(preds, target=None):
    return torch.topk(preds, k=K, dim=1)


TM_CLASSES = {
    "ndcg@10": "RetrievalNormalizedDCG",
    "map_hits@10": "RetrievalMAP",  # torchmetrics MAP(top_k) divides by hits@k, not R
    "mrr@10": "RetrievalMRR",
    "precision@10": "RetrievalPrecision",
    "recall@10": "RetrievalRecall",
}


def tm_metric(key: str, p, t_graded, t_binary, i) -> float:
    """One torchmetrics class: construct, update on the whole flat input, compute."""
    import torchmetrics.retrieval as R

    cls = getattr(R, TM_CLASSES[key])
    metric = cls(top_k=K, empty_target_action="skip").to(p.device)
    # NDCG takes graded gains; the others insist on a binary target.
    metric.update(p, t_graded if key.startswith("ndcg") else t_binary, indexes=i)
    return float(metric.compute())


def ignite_metric(name: str, preds, target) -> float:
    from ignite.metrics.rec_sys import NDCG, HitRate

    cls = HitRate if name == "HitRate" else NDCG  # NDCG: exp gain (default)
    metric = cls(top_k=[K], device=preds.device)
    metric.update((preds, target))
    return float(metric.compute()[0])


def to_trec_dicts(preds, target, keep_top: Optional[int] = None):
    """{q: {doc: score}} run and {q: {doc: gain}} qrels. Queries without a relevant
    candidate are left out of both (ranx requires equal query sets; ours and the
    others skip such queries). ``keep_top`` truncates the run per query."""
    q, n = preds.shape
    docs = [f"d{j}" for j in range(n)]
    qids = [f"q{i}" for i in range(q)]
    has_rel = (target > 0).any(1).tolist()
    qrels: Dict[str, Dict[str, int]] = {}
    nz = (target > 0).nonzero().tolist()
    gains = target[target > 0].to(torch.int64).tolist()
    for (r, c), gval in zip(nz, gains):
        qrels.setdefault(qids[r], {})[docs[c]] = gval
    run: Dict[str, Dict[str, float]] = {}
    if keep_top is None:
        rows = preds.to(torch.float64).tolist()
        for r, row in enumerate(rows):
            if has_rel[r]:
                run[qids[r]] = dict(zip(docs, row))
    else:
        vals, idx = torch.topk(preds, k=min(keep_top, n), dim=1)
        for r, (vrow, irow) in enumerate(zip(vals.to(torch.float64).tolist(), idx.tolist())):
            if has_rel[r]:
                run[qids[r]] = {docs[c]: v for c, v in zip(irow, vrow)}
    return qrels, run


# --------------------------------------------------------------------------- memory


def _status_kb() -> Dict[str, int]:
    out = {}
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(("VmRSS:", "VmHWM:")):
                name, value = line.split(":")
                out[name] = int(value.split()[0])
    return out


def _reset_peak() -> bool:
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def memory_child(method: str, n_queries: int, n_candidates: int, seed: int) -> None:
    """Runs in a fresh process: build inputs, warm up on a tiny input, reset the peak,
    run the method once, print one JSON line."""
    preds, target = (t.to(DEVICE) for t in make_data(n_queries, n_candidates, seed))
    small = tuple(t.to(DEVICE) for t in make_data(16, n_candidates, seed + 7))
    if method == "floor":
        inputs = (preds,)
        run = lambda a: topk_floor(a[0])  # noqa: E731
        warm = (small[0],)
    elif method == "dense":
        inputs = (preds, target)
        run = lambda a: ours_dense(*a)  # noqa: E731
        warm = small
    elif method in ("flat_grouped", "flat_shuffled", "tm_ndcg"):
        p, t, i = flat_grouped(preds, target)
        if method == "flat_shuffled":
            perm = shuffle_perm(p.numel(), seed).to(DEVICE)
            p, t, i = p[perm], t[perm], i[perm]
            del perm
        del preds, target
        inputs = (p, t, i)
        warm = flat_grouped(*small)
        if method == "tm_ndcg":
            run = lambda a: tm_metric("ndcg@10", a[0], a[1], None, a[2])  # noqa: E731
        else:
            run = lambda a: ours_flat(*a)  # noqa: E731
    else:
        raise SystemExit(f"unknown memory method {method!r}; one of {MEMORY_METHODS}")
    run(warm)
    del warm, small
    gc.collect()
    if DEVICE.type == "cuda":
        out, extra, seconds = cuda_peak(lambda: run(inputs))
        del out
        print(json.dumps({"method": method, "input_bytes": nbytes(*inputs), "extra_kb": extra / 1024,
                          "peak_reset": True, "seconds": seconds, "memory": "cuda max_memory_allocated"}))
        return
    reset = _reset_peak()
    before = _status_kb()
    maxrss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t0 = time.perf_counter()
    out = run(inputs)
    seconds = time.perf_counter() - t0
    after = _status_kb()
    maxrss_after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    if reset:
        extra_kb = after["VmHWM"] - before["VmRSS"]
    else:  # ru_maxrss is only meaningful if the input build did not peak higher
        extra_kb = maxrss_after - max(maxrss_before, before["VmRSS"])
    del out
    print(
        json.dumps(
            {
                "method": method,
                "input_bytes": nbytes(*inputs),
                "rss_inputs_kb": before["VmRSS"],
                "peak_kb": after["VmHWM"] if reset else maxrss_after,
                "extra_kb": extra_kb,
                "peak_reset": reset,
                "seconds": seconds,
            }
        )
    )


def measure_memory(args) -> List[dict]:
    rows = []
    for method in MEMORY_METHODS:
        if method == "tm_ndcg" and not have("torchmetrics"):
            continue
        cmd = [
            sys.executable,
            os.path.abspath(__file__),
            "--memory",
            method,
            "--queries",
            str(args.queries),
            "--candidates",
            str(args.candidates),
            "--seed",
            str(args.seed),
            "--threads",
            str(args.threads),
            "--device",
            DEVICE.type,
        ]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        line = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
        if proc.returncode != 0 or not line:
            print(f"memory {method}: failed (rc {proc.returncode})\n{proc.stderr[-2000:]}", flush=True)
            continue
        rows.append(json.loads(line[-1]))
    return rows


# --------------------------------------------------------------------------- profile


def time_steps(steps: List[Tuple[str, Callable[[], object]]], repeat: int) -> List[Tuple[str, float]]:
    """Median time of each named step; a step whose private API moved reports NaN."""
    out = []
    for name, fn in steps:
        try:
            med, _, _ = timed(fn, repeat)
            out.append((name, med))
        except Exception as exc:  # private API may move while core/ is edited
            out.append((f"{name} (failed: {type(exc).__name__})", float("nan")))
    return out


def profile_dense(preds, target, repeat: int) -> List[Tuple[str, float]]:
    """Rough split of ours dense into its steps (private helpers; best effort)."""
    from retrieval_core import rank_dense, ranking_values, score_values, validate
    from retrieval_core.ranking import dense, topk
    from retrieval_core import parse_metrics

    keys = parse_metrics(KEYS)
    steps: List[Tuple[str, Callable[[], object]]] = [
        ("check_scores + check_values (sum of preds, aminmax of target)", lambda: (validate.check_scores(preds, target), validate.check_values(preds, target))),
        ("score_values (ranking + kernels, all blocks)", lambda: score_values(preds, target, keys)),
    ]
    if hasattr(topk, "stable_top"):
        steps.append(("  stable_top(preds, 10) (topk 11 + tie checks), whole matrix in blocks",
                      lambda: [topk.stable_top(preds[r], K) for r in topk.row_blocks(*preds.shape)]))
    steps.append(("  _top_values(target, 10) (ideal gains), in blocks",
                  lambda: [topk._top_values(target[r], K) for r in topk.row_blocks(*preds.shape)]))
    if hasattr(dense, "count_relevant"):
        steps.append(("  count_relevant (bool copy + packed byte sums), in blocks",
                      lambda: [dense.count_relevant(target[r]) for r in topk.row_blocks(*preds.shape)]))
    ranking = rank_dense(preds, target, K, need_ideal=True)
    steps.append(("  ranking_values (5 kernels on [Q, 10])", lambda: ranking_values(ranking, keys)))
    qv = score_values(preds, target, keys)
    steps.append(("aggregate (mean over queries)", lambda: retrieval_core.aggregate(qv.values, qv.keys)))
    return time_steps(steps, repeat)


def profile_shuffled(p, t, i, repeat: int) -> List[Tuple[str, float]]:
    """Rough split of ours flat shuffled: grouping (sort + gather) vs ranking the grouped blocks."""
    from retrieval_core import group_flat, rank_dense
    from retrieval_core.ranking.groups import iter_flat_blocks

    low = i.min()
    keys32 = (i - low).to(torch.int32)
    _, perm = torch.sort(keys32, stable=True)
    groups, (gp, gt) = group_flat(i, p, t)
    steps: List[Tuple[str, Callable[[], object]]] = [
        ("group_flat(indexes, preds, target) (all of the grouping)", lambda: group_flat(i, p, t)),
        ("  checks: sorted? / run count (2 passes over indexes)",
         lambda: (bool((i[1:] >= i[:-1]).all()), int((i[1:] != i[:-1]).sum()))),
        ("  keys: (indexes - min).to(int32)", lambda: (i - i.min()).to(torch.int32)),
        ("  torch.sort(int32 keys, stable=True)", lambda: torch.sort(keys32, stable=True)),
        ("  preds/target.index_select(0, perm) (random gathers)", lambda: (p.index_select(0, perm), t.index_select(0, perm))),
        ("ranking + kernels of the grouped blocks", lambda: [rank_dense(a, b, K, need_ideal=True)
                                                            for _, a, b, _m in iter_flat_blocks(groups, gp, gt)]),
    ]
    return time_steps(steps, repeat)


# --------------------------------------------------------------------------- main


def machine_line() -> str:
    cpu = "?"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return (
        f"{platform.system()} {platform.machine()}, CPU {cpu}, {os.cpu_count()} cores, "
        f"torch {torch.__version__} ({torch.get_num_threads()} threads), Python {platform.python_version()}"
    )


def code_version() -> str:
    """Commit of the checkout and whether core/ differs from it (others edit core/ concurrently)."""
    here = os.path.dirname(os.path.abspath(__file__))
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=here, capture_output=True, text=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--", "../core"], cwd=here, capture_output=True, text=True).stdout.strip()
    except OSError:
        return "unknown (no git)"
    return f"{head or '?'}{' + uncommitted changes in core/' if dirty else ''}"


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--queries", type=int, default=10_000)
    ap.add_argument("--candidates", type=int, default=1_000)
    ap.add_argument("--repeat", type=int, default=5, help="repeats of the fast methods (median)")
    ap.add_argument("--slow-repeat", type=int, default=3,
                    help="repeats of torchmetrics, ranx and pytrec_eval (seconds each)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--quick", action="store_true",
                    help="torchmetrics NDCG only, once; no ranx/pytrec_eval")
    ap.add_argument("--no-memory", action="store_true", help="skip the peak-memory subprocesses")
    ap.add_argument("--profile", action="store_true", help="split ours dense into its steps")
    ap.add_argument("--json", metavar="PATH", help="also write the results as JSON")
    ap.add_argument("--wait-idle", type=float, default=0.0, metavar="SECONDS",
                    help="before each method wait up to SECONDS until no other process uses the CPU, and "
                         f"retry (up to {RETRIES} times) a measurement during which others used > {BUSY_LOAD} cores")
    ap.add_argument("--threads", type=int, default=0, help="torch.set_num_threads (default: torch's choice)")
    add_device_arg(ap)
    ap.add_argument("--memory", metavar="METHOD", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)

    if args.threads > 0:
        torch.set_num_threads(args.threads)
    set_device(args.device)
    if args.memory:
        memory_child(args.memory, args.queries, args.candidates, args.seed)
        return

    slow_repeat = 1 if args.quick else args.slow_repeat
    if args.wait_idle > 0:
        global WAIT_IDLE
        WAIT_IDLE = args.wait_idle
        idle = wait_idle(args.wait_idle)
        print(f"(waited for an idle machine: {'ok' if idle else 'timed out, still busy'})", flush=True)
    Q, N = args.queries, args.candidates
    print(f"# bench_scores: {Q} queries x {N} candidates, keys {', '.join(KEYS)}", flush=True)
    print(f"machine: {machine_line()}", flush=True)
    print(device_line(), flush=True)
    print(f"command: {' '.join([os.path.relpath(sys.executable)] + sys.argv)}", flush=True)
    print(f"code: {code_version()}", flush=True)
    print(f"load average at start: {open('/proc/loadavg').read().split()[:3]}", flush=True)

    preds, target = (t.to(DEVICE) for t in make_data(Q, N, args.seed))
    n_rel = int((target > 0).sum())
    n_empty = int((~(target > 0).any(1)).sum())
    print(f"relevant entries: {n_rel} ({n_rel / target.numel():.3%}); queries without a relevant: {n_empty}", flush=True)
    fp, ft, fi = flat_grouped(preds, target)
    perm = shuffle_perm(fp.numel(), seed=args.seed).to(DEVICE)
    sp, st, si = fp[perm], ft[perm], fi[perm]
    del perm
    qperm = query_perm(Q, args.seed).to(DEVICE)
    qp, qt = preds[qperm].reshape(-1), target[qperm].reshape(-1)
    qi = qperm.repeat_interleave(N)
    del qperm

    rows: List[dict] = []  # method, form, seconds, times, note

    def add(method, form, med, times, note="", load=None):
        load = LAST_LOAD if load is None and times else load
        rows.append({"method": method, "form": form, "seconds": med, "times": times, "note": note, "other_load": load})
        ld = "-" if load is None else f"{load:.2f}"
        print(f"  {method:<44} {fmt_s(med):>9} s   other load {ld:>4}  (runs: {', '.join(fmt_s(t) for t in times)}) {note}",
              flush=True)

    values: Dict[str, Dict[str, float]] = {}
    print("\n## timing", flush=True)

    med, ts, _ = timed(lambda: topk_floor(preds), args.repeat)
    add("floor: torch.topk(preds, 10, dim=1)", "dense", med, ts)
    med, ts, r = timed(lambda: ours_dense(preds, target), args.repeat)
    add("ours dense", "dense", med, ts)
    values["ours"] = {k: float(v) for k, v in r.items() if k in KEYS}
    r = retrieval_core.evaluate_scores(preds, target, EXTRA_KEYS)
    values["ours"].update({k: float(r[k]) for k in EXTRA_KEYS})
    med, ts, r = timed(lambda: ours_flat(fp, ft, fi), args.repeat)
    add("ours flat grouped", "flat", med, ts)
    values["ours flat grouped"] = {k: float(r[k]) for k in KEYS}
    med, ts, r = timed(lambda: ours_flat(sp, st, si), args.repeat)
    add("ours flat shuffled (entries permuted)", "flat", med, ts)
    values["ours flat shuffled"] = {k: float(r[k]) for k in KEYS}
    med, ts, r = timed(lambda: ours_flat(qp, qt, qi), args.repeat)
    add("ours flat, query order permuted (contiguous)", "flat", med, ts)
    values["ours flat query-permuted"] = {k: float(r[k]) for k in KEYS}

    # torchmetrics: one class per key, update + compute on the grouped flat form.
    if have("torchmetrics"):
        fb = ft > 0
        tm_keys = ["ndcg@10"] if args.quick else list(TM_CLASSES)
        total, tm_vals = 0.0, {}
        tm_runs: List[List[float]] = []
        wp, wt, wi = flat_grouped(preds[:16], target[:16])
        tm_metric("ndcg@10", wp, wt, None, wi)  # warm-up on a tiny input (lazy imports)
        for key in tm_keys:
            med, ts, v = timed(lambda: tm_metric(key, fp, ft, fb, fi), slow_repeat, warmup=0)
            add(f"torchmetrics {TM_CLASSES[key]}(top_k=10)", "flat", med, ts)
            tm_vals[key] = v
            total += med
            tm_runs.append(ts)
        if len(tm_keys) > 1:
            add(f"torchmetrics, sum of the {len(tm_keys)} classes", "flat", total, [sum(x) for x in zip(*tm_runs)])
        values["torchmetrics"] = tm_vals
        del fb
    else:
        print("  torchmetrics: not installed, skipped")

    # ignite rec_sys on the dense matrix.
    if have("ignite.metrics.rec_sys"):
        ig = {}
        ig_total = 0.0
        for name in ("HitRate", "NDCG"):
            med, ts, v = timed(lambda: ignite_metric(name, preds, target), args.repeat)
            label = "HitRate(top_k=[10])" if name == "HitRate" else "NDCG(top_k=[10]) (exp gain)"
            add(f"ignite {label}", "dense", med, ts)
            ig[name] = v
            ig_total += med
        add("ignite, HitRate + NDCG", "dense", ig_total, [])
        values["ignite"] = ig
    else:
        print("  ignite.metrics.rec_sys: not available, skipped")

    conversions: List[Tuple[str, float, str]] = []
    trec = None
    if not args.quick and (have("ranx") or have("pytrec_eval")):
        t0 = time.perf_counter()
        trec = to_trec_dicts(preds.cpu(), target.cpu())
        conv = time.perf_counter() - t0
        conversions.append(("tensors -> python dicts (full run, 10M entries)" if Q * N == 10**7 else
                            "tensors -> python dicts (full run)", conv, ""))
        print(f"  (untimed) tensors -> dicts: {conv:.1f} s", flush=True)

    ranx_metrics = ["ndcg@10", "map@10", "mrr@10", "precision@10", "recall@10"]
    if trec is not None and have("ranx"):
        import ranx

        qrels_d, run_d = trec
        note = ""
        t0 = time.perf_counter()
        qrels = ranx.Qrels(qrels_d)
        run = ranx.Run(run_d)
        conv = time.perf_counter() - t0
        if conv > RANX_MAX_CONVERSION_S:
            note = f"(full-run conversion took {conv:.0f} s > {RANX_MAX_CONVERSION_S:.0f} s: run truncated to top 100 per query; @10 metrics unchanged)"
            q100, r100 = to_trec_dicts(preds.cpu(), target.cpu(), keep_top=100)
            t0 = time.perf_counter()
            qrels, run = ranx.Qrels(q100), ranx.Run(r100)
            conv = time.perf_counter() - t0
        conversions.append(("ranx Qrels(...) + Run(...) from dicts (incl. numba compile on first use)", conv, note))
        print(f"  (untimed) ranx Qrels+Run: {conv:.1f} s {note}", flush=True)
        # warm: numba compiles on the first evaluate
        med, ts, v = timed(lambda: ranx.evaluate(qrels, run, ranx_metrics), slow_repeat, warmup=1)
        add("ranx.evaluate (5 metrics, warm)", "trec dicts", med, ts, note)
        values["ranx"] = {k: float(v[k]) for k in ranx_metrics}
        del qrels, run

    pytrec_measures = {"ndcg_cut.10", "map_cut.10", "recip_rank", "P.10", "recall.10"}
    if trec is not None and have("pytrec_eval"):
        import pytrec_eval

        qrels_d, run_d = trec
        t0 = time.perf_counter()
        evaluator = pytrec_eval.RelevanceEvaluator(qrels_d, pytrec_measures)
        conv = time.perf_counter() - t0
        conversions.append(("pytrec_eval RelevanceEvaluator(qrels, measures)", conv, ""))

        def pytrec_run():
            per_query = evaluator.evaluate(run_d)
            names = ["ndcg_cut_10", "map_cut_10", "recip_rank", "P_10", "recall_10"]
            n = len(per_query)
            return {m: sum(q[m] for q in per_query.values()) / n for m in names}

        med, ts, v = timed(pytrec_run, slow_repeat, warmup=0)
        add("pytrec_eval evaluate(run) + mean (5 measures)", "trec dicts", med, ts, "(recip_rank: whole list)")
        values["pytrec_eval"] = v
    trec = None
    gc.collect()

    # ------------------------------------------------------------------ tables
    floor = next(r["seconds"] for r in rows if r["method"].startswith("floor"))
    ref = {
        "dense": next(r["seconds"] for r in rows if r["method"] == "ours dense"),
        "flat": next(r["seconds"] for r in rows if r["method"] == "ours flat grouped"),
        "trec dicts": next(r["seconds"] for r in rows if r["method"] == "ours dense"),
    }
    ref_name = {"dense": "ours dense", "flat": "ours flat grouped", "trec dicts": "ours dense"}
    print(f"\n## timing table (median; fast methods x{args.repeat}, slow x{slow_repeat})\n")
    print("| method | input form | median s | x topk floor | x ours (same form) | other load |")
    print("|---|---|---:|---:|---:|---:|")
    for r in rows:
        rel = r["seconds"] / ref[r["form"]]
        ld = "-" if r["other_load"] is None else f"{r['other_load']:.2f}"
        print(f"| {r['method']} | {r['form']} | {fmt_s(r['seconds'])} | {fmt_r(r['seconds'] / floor)} | "
              f"{fmt_r(rel)} vs {ref_name[r['form']]} | {ld} |")
    print("\n(other load: CPU cores used by other processes during the timed runs, from /proc/stat;"
          " above ~0.1 on a 2-core machine the 2-thread torch timings are not trustworthy)")
    loaded = [r["method"] for r in rows if (r["other_load"] or 0) > 0.1]
    if loaded:
        print(f"WARNING: other processes were busy during: {', '.join(loaded)}")
    if conversions:
        print("\nconversions (not in the timings above):\n")
        print("| step | seconds | note |")
        print("|---|---:|---|")
        for name, s, note in conversions:
            print(f"| {name} | {fmt_s(s)} | {note} |")

    # ------------------------------------------------------------------ agreement
    print("\n## agreement of values (mean over queries)\n")
    ours = values["ours"]
    checks = []
    for name in ("ours flat grouped", "ours flat shuffled", "ours flat query-permuted"):
        diff = max(abs(values[name][k] - ours[k]) for k in KEYS)
        checks.append((f"{name} vs ours dense", "all 5 keys", "", "", diff))
    tm = values.get("torchmetrics", {})
    for key, v in tm.items():
        note = " (ours map_hits@10: torchmetrics MAP(top_k) divides by hits@k)" if key == "map_hits@10" else ""
        checks.append((f"torchmetrics {TM_CLASSES[key]}", key + note, ours[key], v, abs(ours[key] - v)))
    if "map_hits@10" in tm:
        checks.append(("torchmetrics RetrievalMAP vs ours map@10 (not comparable)", "map@10", ours["map@10"],
                       tm["map_hits@10"], abs(ours["map@10"] - tm["map_hits@10"])))
    ig = values.get("ignite", {})
    if ig:
        checks.append(("ignite HitRate", "hit_rate@10", ours["hit_rate@10"], ig["HitRate"],
                       abs(ours["hit_rate@10"] - ig["HitRate"])))
        checks.append(("ignite NDCG (exp gain)", "ndcg_exp@10", ours["ndcg_exp@10"], ig["NDCG"],
                       abs(ours["ndcg_exp@10"] - ig["NDCG"])))
    for key, v in values.get("ranx", {}).items():
        checks.append(("ranx", key, ours[key], v, abs(ours[key] - v)))
    pt = values.get("pytrec_eval", {})
    pairs = [("ndcg_cut_10", "ndcg@10"), ("map_cut_10", "map@10"), ("recip_rank", "mrr"),
             ("recip_rank", "mrr@10"), ("P_10", "precision@10"), ("recall_10", "recall@10")]
    for m, key in pairs:
        if m in pt:
            checks.append((f"pytrec_eval {m}", key, ours[key], pt[m], abs(ours[key] - pt[m])))
    print("| other | our key | ours | other value | abs diff |")
    print("|---|---|---:|---:|---:|")
    for who, key, a, b, d in checks:
        a_s = f"{a:.8f}" if isinstance(a, float) else a
        b_s = f"{b:.8f}" if isinstance(b, float) else b
        print(f"| {who} | {key} | {a_s} | {b_s} | {d:.2e} |")

    # ------------------------------------------------------------------ memory
    mem_rows: List[dict] = []
    if not args.no_memory:
        how = ("torch.cuda.max_memory_allocated - allocated after inputs" if DEVICE.type == "cuda"
               else "VmHWM - VmRSS after inputs")
        print(f"\n## peak memory (fresh subprocess per method; extra = {how})\n", flush=True)
        mem_rows = measure_memory(args)
        print("| method | inputs MiB | extra peak MiB | (inputs + extra) / inputs | extra / inputs | <= inputs + 25% |")
        print("|---|---:|---:|---:|---:|---|")
        names = {"floor": "floor: torch.topk", "dense": "ours dense", "flat_grouped": "ours flat grouped",
                 "flat_shuffled": "ours flat shuffled", "tm_ndcg": "torchmetrics RetrievalNormalizedDCG"}
        for m in mem_rows:
            inp = m["input_bytes"] / 2**20
            extra = m["extra_kb"] / 1024
            print(f"| {names.get(m['method'], m['method'])} | {inp:.1f} | {extra:.1f} | {(inp + extra) / inp:.2f} | "
                  f"{extra / inp:.1%} | {'yes' if extra <= 0.25 * inp else 'no'} |")
        if mem_rows and not all(m["peak_reset"] for m in mem_rows):
            print("(VmHWM could not be reset; extra peak taken from ru_maxrss)")

    prof = []
    if args.profile:
        print("\n## profile of ours dense and ours flat shuffled (median of repeats; indented steps are parts)\n")
        prof = profile_dense(preds, target, args.repeat)
        prof += [("--- ours flat shuffled ---", float("nan"))] + profile_shuffled(sp, st, si, args.repeat)
        print("| step | median s |")
        print("|---|---:|")
        for name, sec in prof:
            print(f"| {name} | {'' if sec != sec else f'{sec:.3f}'} |")

    # ------------------------------------------------------------------ targets
    get = {r["method"]: r["seconds"] for r in rows}
    print("\n## targets (from the issue)\n")
    dense_ratio = get["ours dense"] / floor
    print(f"- dense, all five keys <= 2x bare topk: {dense_ratio:.2f}x -> {'met' if dense_ratio <= 2 else 'NOT met'}")
    g = get["ours flat grouped"]
    print(f"- flat grouped <= 0.15 s: {g:.3f} s -> {'met' if g <= 0.15 else 'NOT met'}")
    s = get["ours flat shuffled (entries permuted)"]
    print(f"- flat shuffled <= 1 s: {s:.3f} s -> {'met' if s <= 1 else 'NOT met'}")
    ours_mem = [m for m in mem_rows if m["method"] in ("dense", "flat_grouped", "flat_shuffled")]
    for m in ours_mem:
        ok = m["extra_kb"] * 1024 <= 0.25 * m["input_bytes"]
        print(f"- peak memory <= inputs + 25%, {m['method']}: +{m['extra_kb'] * 1024 / m['input_bytes']:.1%} -> "
              f"{'met' if ok else 'NOT met'}")

    if args.json:
        with open(args.json, "w") as f:
            json.dump({"machine": machine_line(), "device": device_line(), "queries": Q, "candidates": N, "rows": rows,
                       "conversions": conversions, "values": values, "memory": mem_rows,
                       "profile": prof}, f, indent=1)


if __name__ == "__main__":
    main()
