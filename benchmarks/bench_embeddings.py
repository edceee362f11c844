"""Embedding-mode benchmark: ``retrieval_core.evaluate_embeddings`` against a bare faiss
``IndexFlatIP`` search floor and pytorch-metric-learning's ``AccuracyCalculator``.

Setup (defaults, from issue 3): N = 20,000 and 40,000 items, 128-d float32 embeddings of
500 classes (seeded class centres on the unit sphere + Gaussian noise, labels uniform,
rows L2-normalised); the query set is its own gallery with each item's own row excluded
(``gallery=None``; PML's ``reference=None``). Keys: cmc@1, cmc@5, cmc@10,
precision_capped@5, precision_capped@10, map_hits@5, map_hits@10, map@r, r_precision,
evaluated together in one call.

What each method runs:

* floor: ``faiss.IndexFlatIP`` search of all N items at the depth ours needs,
  k = (largest class count - 1) + 1 (max R plus the self match); the index is built
  outside the timing (its build time is reported separately); faiss uses as many
  OpenMP threads as torch has intra-op threads.
* ours: ``evaluate_embeddings(x, labels, KEYS, progress=False)`` (default settings:
  cosine, 256 MiB chunk budget).
* ours backend='faiss' (when this checkout has it): the same call with ``backend="faiss"``
  (faiss' flat index finds the candidate lists, ours ranks and scores them).
* PML: ``AccuracyCalculator(k="max_bin_count", include=("precision_at_1", "r_precision",
  "mean_average_precision_at_r")).get_accuracy(x, labels)``.

Usage::

    .venv/bin/python benchmarks/bench_embeddings.py --wait-idle 300   # full run (~10 min)
    .venv/bin/python benchmarks/bench_embeddings.py --quick           # small N, smoke test
    .venv/bin/python benchmarks/bench_embeddings.py --large           # + N = 200,000 in a fresh process (minutes)
    .venv/bin/python benchmarks/bench_embeddings.py --sizes '' --profile --profile-n 200000 --profile-queries 2000
                                                                      # step split of a sample of the 200k run

``--device cuda``: inputs on the GPU; the floor becomes bare torch (chunked ``x @ x.T`` and
``topk(k)`` on the GPU, :func:`torch_floor`) since faiss-cpu cannot search there; the
``backend='faiss'`` row is skipped; PML runs ``AccuracyCalculator(device=cuda,
knn_func=CustomKNN(CosineSimilarity()))``; timed regions are bracketed by
``torch.cuda.synchronize()`` and the memory subprocesses report
``torch.cuda.max_memory_allocated`` over what the inputs hold. ``--profile`` is CPU-only.

Timings run side by side in this process (median of repeats), with the timing helpers
of ``bench_scores.py`` (other-load column from /proc/stat, ``--wait-idle``). Peak memory
is measured per method and size in a fresh subprocess (``--memory METHOD --n N``) from
``/proc/self/status`` (VmHWM reset through ``/proc/self/clear_refs`` once the inputs exist).
"""
from __future__ import annotations

import argparse
import gc
import importlib.util
import json
import os
import resource
import subprocess
import sys
import time
from typing import Callable, Dict, List, Optional, Tuple

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_scores as bs  # noqa: E402  (timing / memory / machine helpers, shared house style)

import retrieval_core  # noqa: E402

KEYS = ["cmc@1", "cmc@5", "cmc@10", "precision_capped@5", "precision_capped@10",
        "map_hits@5", "map_hits@10", "map@r", "r_precision"]
PML_INCLUDE = ("precision_at_1", "r_precision", "mean_average_precision_at_r")
# PML key -> our key
PML_PAIRS = [("precision_at_1", "cmc@1"), ("r_precision", "r_precision"), ("mean_average_precision_at_r", "map@r")]
DIM = 128
CLASSES = 500
SIGMA = 0.14  # noise std per dimension around unit-norm centres: cmc@1 ~0.96, map@r ~0.5 at N = 20k
MEMORY_METHODS = ["floor", "ours", "ours_faiss", "pml"]
GIB = 2**30
MEMORY_TARGET_EXTRA = 0.5 * GIB  # issue: peak RSS <= inputs + 0.5 GB
LARGE_TARGET_TOTAL = 3 * GIB  # issue: 200k run peak RSS <= 3 GB


# --------------------------------------------------------------------------- data


def make_data(n: int, dim: int = DIM, classes: int = CLASSES, seed: int = 0, sigma: float = SIGMA):
    """L2-normalised float32 [n, dim] embeddings and int64 [n] labels (uniform over classes)."""
    g = torch.Generator().manual_seed(seed)
    centres = torch.nn.functional.normalize(torch.randn(classes, dim, generator=g), dim=1)
    labels = torch.randint(0, classes, (n,), generator=g)
    x = centres[labels]
    x.add_(torch.randn(n, dim, generator=g), alpha=sigma)
    return torch.nn.functional.normalize(x, dim=1), labels


def floor_k(labels: torch.Tensor) -> int:
    """Depth ours needs with the query set as gallery: max R (= largest class - 1) plus the self match."""
    return int(torch.bincount(labels).max())


# --------------------------------------------------------------------------- methods


def faiss_threads() -> int:
    import faiss

    faiss.omp_set_num_threads(torch.get_num_threads())
    return faiss.omp_get_max_threads()


def floor_build(x: torch.Tensor):
    import faiss

    index = faiss.IndexFlatIP(x.shape[1])
    index.add(x.numpy())
    return index


def floor_search(index, x: torch.Tensor, k: int):
    return index.search(x.numpy(), k)


# --memory-budget (MiB) for ours; None: the library default (256 MiB)
OURS_BUDGET: Optional[int] = None


def ours(x, labels, keys=KEYS):
    kw = {} if OURS_BUDGET is None else {"memory_budget": OURS_BUDGET * 2**20}
    return retrieval_core.evaluate_embeddings(x, labels, keys, progress=False, **kw)


def has_faiss_backend() -> bool:
    """Whether this checkout's evaluate_embeddings has the optional ``backend="faiss"``."""
    import inspect

    return "backend" in inspect.signature(retrieval_core.evaluate_embeddings).parameters


def ours_faiss(x, labels, keys=KEYS):
    """Ours with ``backend="faiss"``: faiss' flat index finds the candidates, ours ranks and scores them."""
    kw = {} if OURS_BUDGET is None else {"memory_budget": OURS_BUDGET * 2**20}
    return retrieval_core.evaluate_embeddings(x, labels, keys, progress=False, backend="faiss", **kw)


def torch_floor_rows(n_gallery: int) -> int:
    """Query rows per chunk of :func:`torch_floor`: float32 scores plus topk scratch
    (8 bytes per pair) within ours' default memory budget on the device."""
    try:
        from retrieval_core import sizing

        budget = sizing.memory_budget(bs.DEVICE)
    except ImportError:  # a checkout before sizing.py
        budget = 256 * 2**20
    return max(1, budget // (8 * max(1, n_gallery)))


def torch_floor(q: torch.Tensor, g: torch.Tensor, k: int, rows: Optional[int] = None):
    """Bare torch exact k-NN floor: chunked ``q[c] @ g.T`` and ``topk(k)`` per chunk (no
    normalisation, no exclusion, no labels); the top-k indices of every query."""
    rows = rows or torch_floor_rows(g.shape[0])
    return torch.cat([(q[s:s + rows] @ g.T).topk(k, dim=1).indices for s in range(0, q.shape[0], rows)])


def pml_calculator(n: Optional[int] = None, include=PML_INCLUDE):
    """PML's calculator: its default k-NN (faiss when importable) on CPU; on CUDA (faiss-cpu
    cannot search there) ``CustomKNN(CosineSimilarity())`` on the device, in query batches of
    :func:`torch_floor_rows` rows for ``n`` items (whole matrix when ``n`` is None)."""
    from pytorch_metric_learning.utils.accuracy_calculator import AccuracyCalculator

    if bs.DEVICE.type == "cuda" or n is not None:
        from pytorch_metric_learning.distances import CosineSimilarity
        from pytorch_metric_learning.utils.inference import CustomKNN

        knn = CustomKNN(CosineSimilarity(), batch_size=None if n is None else torch_floor_rows(n))
        return AccuracyCalculator(k="max_bin_count", include=include, device=bs.DEVICE, knn_func=knn)
    return AccuracyCalculator(k="max_bin_count", include=include)


def pml_knn_note(calc) -> str:
    """Which k-NN the calculator runs (PML defaults to faiss when it is importable)."""
    knn = calc.knn_func
    init = getattr(knn, "index_init_fn", None)
    init_name = getattr(init, "__name__", repr(init))
    try:
        import faiss

        gpus = faiss.get_num_gpus()
    except Exception:
        gpus = None
    return (f"{type(knn).__module__}.{type(knn).__name__} (index {init_name}, built and searched inside get_accuracy; "
            f"faiss GPUs: {gpus}, device {calc.device})")


def oml_status() -> str:
    if importlib.util.find_spec("oml") is not None:
        return "OML is importable but has no runner in this benchmark yet: skipped"
    return ("OML (open-metric-learning) skipped: not installed, and not installable in this venv "
            "(it requires torchvision, which is not in the CPU torch 2.13 venv; no pip installs for benchmarks)")


# --------------------------------------------------------------------------- memory


def memory_child(method: str, n: int, seed: int) -> None:
    """Fresh process: build inputs, warm up on a tiny input, reset the peak mark, run once,
    print one JSON line. ``total_peak_kb`` is the whole process's VmHWM after the reset."""
    x, labels = (t.to(bs.DEVICE) for t in make_data(n, seed=seed))
    small_x, small_l = (t.to(bs.DEVICE) for t in make_data(2000, seed=seed + 7))
    note = ""
    if method == "floor" and bs.DEVICE.type == "cuda":
        k = floor_k(labels)
        torch_floor(small_x, small_x, floor_k(small_l))
        run = lambda: torch_floor(x, x, k)  # noqa: E731
    elif method == "floor":
        faiss_threads()
        k = floor_k(labels)
        floor_search(floor_build(small_x), small_x, floor_k(small_l))
        index = floor_build(x)  # outside the measurement, like outside the timing
        note = f"index (a copy of x, {x.numel() * 4 / 2**20:.1f} MiB) built before the reset: counted with the inputs"
        run = lambda: floor_search(index, x, k)  # noqa: E731
    elif method == "ours":
        ours(small_x, small_l)
        run = lambda: ours(x, labels)  # noqa: E731
    elif method == "ours_faiss":
        faiss_threads()
        ours_faiss(small_x, small_l)
        run = lambda: ours_faiss(x, labels)  # noqa: E731
    elif method == "pml":
        faiss_threads()
        calc = pml_calculator(n if bs.DEVICE.type == "cuda" else None)
        calc.get_accuracy(small_x, small_l)
        run = lambda: calc.get_accuracy(x, labels)  # noqa: E731
    else:
        raise SystemExit(f"unknown memory method {method!r}; one of {MEMORY_METHODS}")
    del small_x, small_l
    gc.collect()
    if bs.DEVICE.type == "cuda":
        inputs_bytes = torch.cuda.memory_allocated(bs.DEVICE)
        out, extra, seconds = bs.cuda_peak(run)
        values = {k: float(v) for k, v in out.items()} if isinstance(out, dict) else {}
        print(json.dumps({
            "method": method if not method.startswith("ours") or OURS_BUDGET is None else f"{method} (memory_budget={OURS_BUDGET} MiB)",
            "n": n, "input_bytes": bs.nbytes(x, labels), "rss_inputs_kb": inputs_bytes / 1024,
            "total_peak_kb": (inputs_bytes + extra) / 1024, "extra_kb": extra / 1024,
            "lifetime_maxrss_kb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, "peak_reset": True,
            "seconds": seconds, "threads": torch.get_num_threads(), "values": values,
            "note": "CUDA memory: torch.cuda.memory_allocated / max_memory_allocated (RSS columns hold CUDA bytes)",
        }))
        return
    reset = bs._reset_peak()
    before = bs._status_kb()
    maxrss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t0 = time.perf_counter()
    out = run()
    seconds = time.perf_counter() - t0
    after = bs._status_kb()
    maxrss_after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    if reset:
        extra_kb = after["VmHWM"] - before["VmRSS"]
    else:
        extra_kb = maxrss_after - max(maxrss_before, before["VmRSS"])
    values = {}
    if method in ("ours", "ours_faiss"):
        values = {k: float(v) for k, v in out.items()}
    elif method == "pml":
        values = {k: float(v) for k, v in out.items()}
    del out
    print(json.dumps({
        "method": method if not method.startswith("ours") or OURS_BUDGET is None else f"{method} (memory_budget={OURS_BUDGET} MiB)",
        "n": n, "input_bytes": bs.nbytes(x, labels), "rss_inputs_kb": before["VmRSS"],
        "total_peak_kb": after["VmHWM"] if reset else maxrss_after, "extra_kb": extra_kb,
        "lifetime_maxrss_kb": maxrss_after, "peak_reset": reset, "seconds": seconds,
        "threads": torch.get_num_threads(), "values": values, "note": note,
    }))


def run_child(method: str, n: int, seed: int, threads: int) -> Optional[dict]:
    cmd = [sys.executable, os.path.abspath(__file__), "--memory", method, "--n", str(n), "--seed", str(seed),
           "--device", bs.DEVICE.type]
    if threads > 0:
        cmd += ["--threads", str(threads)]
    if OURS_BUDGET is not None:
        cmd += ["--memory-budget", str(OURS_BUDGET)]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    line = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if proc.returncode != 0 or not line:
        print(f"memory {method} N={n}: failed (rc {proc.returncode})\n{proc.stderr[-2000:]}", flush=True)
        return None
    return json.loads(line[-1])


# --------------------------------------------------------------------------- profile


def profile_ours(x: torch.Tensor, labels: torch.Tensor, repeat: int,
                 n_queries: Optional[int] = None) -> List[Tuple[str, float]]:
    """Split of one ``evaluate_embeddings`` call into its steps, by re-running the chunk loop of
    ``embeddings.embedding_values`` with a timer around each step (private API; best effort).
    Medians over ``repeat`` passes of the per-step totals. ``n_queries``: only the chunks of
    the first ``n_queries`` queries (against the whole gallery), for a sample of a large run."""
    from retrieval_core import ranking_values, search
    from retrieval_core.evaluation import embedding_values, embeddings
    from retrieval_core.ranking import dense
    from retrieval_core.metrics.keys import depth_needed, parse_metrics

    keys = parse_metrics(KEYS)
    depth, at_r, whole = depth_needed(keys)
    need_ideal = any(m.spec.needs_ideal for m in keys)
    ids = torch.arange(x.shape[0])
    totals: Dict[str, List[float]] = {}
    top_name = "  of which stable_top (topk d+1 + tie checks)"
    original_top = dense.stable_top
    for _ in range(repeat):
        t: Dict[str, float] = {}

        def tick(name, t0):
            t[name] = t.get(name, 0.0) + time.perf_counter() - t0

        def timed_top(scores, d):  # rank_binary looks stable_top up in its module at each call
            t0 = time.perf_counter()
            out = original_top(scores, d)
            tick(top_name, t0)
            return out

        gc.collect()
        t_all = time.perf_counter()
        t0 = time.perf_counter()
        q = search.prepare(x, "cosine")
        tick("prepare (normalize rows)", t0)
        t0 = time.perf_counter()
        n_rel, n_cand = search.label_counts(labels, labels, ids, ids)
        exclusion = search.Exclusion(ids, ids)
        tick("label_counts + Exclusion (R per query, self ids)", t0)
        rows = embedding_values._chunk_rows(x.shape[0], at_r or whole, embeddings.DEFAULT_MEMORY_BUDGET)
        nq = x.shape[0] if n_queries is None else min(n_queries, x.shape[0])
        values = torch.empty(nq, len(keys), dtype=torch.float64)
        n_chunks = 0
        dense.stable_top = timed_top
        try:
            for start in range(0, nq, rows):
                n_chunks += 1
                part = slice(start, min(start + rows, nq))
                t0 = time.perf_counter()
                scores = search.similarity(q[part], q, "cosine")
                tick("similarity q @ g.T (matmul), per chunk", t0)
                t0 = time.perf_counter()
                scores.index_put_(exclusion.pairs(part), torch.tensor(float("-inf")))
                tick("exclude self (Exclusion.pairs + index_put -inf)", t0)
                lab = labels[part].unsqueeze(1)
                t0 = time.perf_counter()
                ranking = dense.rank_binary(scores, depth, lambda i: labels[i] == lab, n_rel[part], n_cand[part],
                                            at_r=at_r, need_ideal=need_ideal)
                tick("rank_binary (depth = max(10, chunk's max R))", t0)
                t0 = time.perf_counter()
                values[part] = ranking_values(ranking, keys)
                tick("ranking_values (9 kernels on [c, d])", t0)
                del scores, ranking
        finally:
            dense.stable_top = original_top
        t0 = time.perf_counter()
        retrieval_core.aggregate(values, [m.key for m in keys])
        tick("aggregate (mean over queries)", t0)
        t["sum of the steps (re-run of the chunk loop)"] = time.perf_counter() - t_all
        for k, v in t.items():
            totals.setdefault(k, []).append(v)
    order = ["prepare (normalize rows)", "label_counts + Exclusion (R per query, self ids)",
             "similarity q @ g.T (matmul), per chunk", "exclude self (Exclusion.pairs + index_put -inf)",
             "rank_binary (depth = max(10, chunk's max R))", top_name, "ranking_values (9 kernels on [c, d])",
             "aggregate (mean over queries)", "sum of the steps (re-run of the chunk loop)"]
    out = [(f"queries {nq} of {x.shape[0]}: {n_chunks} chunks of {rows} rows (largest k {depth}, at_r {at_r}, "
            f"max R {int(n_rel.max())})",
            float("nan"))]
    out += [(k, sorted(totals[k])[len(totals[k]) // 2]) for k in order if k in totals]
    return out


# --------------------------------------------------------------------------- main


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="20000,40000", help="comma-separated N (items = queries = gallery); '' for none")
    ap.add_argument("--repeat", type=int, default=3, help="timed repeats per method (median), after one warm-up")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--quick", action="store_true", help="N = 2000,5000, one repeat: a smoke test")
    ap.add_argument("--no-memory", action="store_true", help="skip the peak-memory subprocesses")
    ap.add_argument("--profile", action="store_true", help="split ours into its steps (+ torch.profiler)")
    ap.add_argument("--profile-n", type=int, default=0, help="N for --profile (default: the first of --sizes)")
    ap.add_argument("--profile-queries", type=int, default=0,
                    help="--profile only the first Q queries against all N (a sample of a large run)")
    ap.add_argument("--large", action="store_true",
                    help="also run N = --large-n in fresh subprocesses (wall time + peak RSS); takes minutes")
    ap.add_argument("--large-only", action="store_true", help="only the --large part")
    ap.add_argument("--large-n", type=int, default=200_000)
    ap.add_argument("--large-methods", default="ours,floor", help=f"methods for --large, of {MEMORY_METHODS}")
    ap.add_argument("--json", metavar="PATH", help="also write the results as JSON")
    ap.add_argument("--wait-idle", type=float, default=0.0, metavar="SECONDS",
                    help="before each method wait up to SECONDS until no other process uses the CPU, and "
                         f"retry (up to {bs.RETRIES} times) a measurement during which others used > {bs.BUSY_LOAD} cores")
    ap.add_argument("--threads", type=int, default=0, help="torch.set_num_threads (default: torch's choice)")
    ap.add_argument("--memory-budget", type=int, metavar="MIB",
                    help="memory_budget of ours in MiB (default: the library's 256 MiB)")
    bs.add_device_arg(ap)
    ap.add_argument("--memory", metavar="METHOD", help=argparse.SUPPRESS)
    ap.add_argument("--n", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)

    if args.threads > 0:
        torch.set_num_threads(args.threads)
    cuda = bs.set_device(args.device).type == "cuda"
    if cuda and args.profile:
        raise SystemExit("--profile splits the CPU run (private helpers, CPU profiler); run it with --device cpu")
    if args.memory_budget:
        global OURS_BUDGET
        OURS_BUDGET = args.memory_budget
    if args.memory:
        memory_child(args.memory, args.n, args.seed)
        return
    sizes = [2000, 5000] if args.quick else [int(s) for s in args.sizes.split(",") if s.strip()]
    repeat = 1 if args.quick else args.repeat
    if args.large_only:
        args.large, sizes = True, []
    if args.wait_idle > 0:
        bs.WAIT_IDLE = args.wait_idle
        idle = bs.wait_idle(args.wait_idle)
        print(f"(waited for an idle machine: {'ok' if idle else 'timed out, still busy'})", flush=True)

    have_faiss = bs.have("faiss") and not cuda  # faiss-cpu: the CPU floor and backend='faiss' only
    have_pml = bs.have("pytorch_metric_learning")
    print(f"# bench_embeddings: N = {', '.join(map(str, sizes)) or '-'} ({DIM}-d, {CLASSES} classes, sigma {SIGMA}), "
          f"self-gallery; keys {', '.join(KEYS)}", flush=True)
    print(f"machine: {bs.machine_line()}", flush=True)
    print(bs.device_line(), flush=True)
    print(f"command: {' '.join([os.path.relpath(sys.executable)] + sys.argv)}", flush=True)
    print(f"code: {bs.code_version()}", flush=True)
    print(f"load average at start: {open('/proc/loadavg').read().split()[:3]}", flush=True)
    if cuda:
        print("floor on cuda: bare torch, chunked x @ x.T + topk(k) (faiss-cpu has no GPU search)", flush=True)
    elif have_faiss:
        import faiss

        print(f"faiss {faiss.__version__}, OpenMP threads set to {faiss_threads()} (= torch threads)", flush=True)
    else:
        print("faiss: not installed; floor skipped", flush=True)
    calc = None
    if have_pml:
        import pytorch_metric_learning

        calc = pml_calculator()
        print(f"pytorch-metric-learning {pytorch_metric_learning.__version__}: k-NN = {pml_knn_note(calc)}", flush=True)
    else:
        print("pytorch-metric-learning: not installed; skipped", flush=True)
    print(oml_status(), flush=True)

    results: Dict[int, dict] = {}
    for n in sizes:
        x, labels = (t.to(bs.DEVICE) for t in make_data(n, seed=args.seed))
        k = floor_k(labels)
        counts = torch.bincount(labels, minlength=CLASSES)
        info = {"n": n, "input_bytes": bs.nbytes(x, labels), "largest_class": k, "smallest_class": int(counts.min()),
                "mean_class": n / CLASSES, "floor_k": k}
        print(f"\n## N = {n}: inputs {info['input_bytes'] / 2**20:.1f} MiB; class sizes {info['smallest_class']}.."
              f"{k} (mean {n / CLASSES:.0f}); floor k = {k}", flush=True)
        rows: List[dict] = []

        def add(rid, method, med, times, note="", load="last"):
            load = bs.LAST_LOAD if load == "last" else load
            rows.append({"id": rid, "method": method, "seconds": med, "times": times, "note": note, "other_load": load})
            ld = "-" if load is None else f"{load:.2f}"
            print(f"  {method:<40} {bs.fmt_s(med):>9} s   other load {ld:>4}  "
                  f"(runs: {', '.join(bs.fmt_s(t) for t in times)}) {note}", flush=True)

        values: Dict[str, Dict[str, float]] = {}
        if have_faiss:
            med, ts, index = bs.timed(lambda: floor_build(x), repeat)
            add("build", "faiss IndexFlatIP build (add), untimed part of floor", med, ts)
            med, ts, _ = bs.timed(lambda: floor_search(index, x, k), repeat)
            add("floor", f"floor: faiss IndexFlatIP.search(k={k})", med, ts)
            del index
        if cuda:
            med, ts, _ = bs.timed(lambda: torch_floor(x, x, k), repeat)
            add("floor", f"floor: torch x[chunk] @ x.T + topk({k}), {torch_floor_rows(n)}-row chunks", med, ts)
        med, ts, r = bs.timed(lambda: ours(x, labels), repeat)
        budget_note = "" if OURS_BUDGET is None else f", memory_budget={OURS_BUDGET} MiB"
        add("ours", f"ours: evaluate_embeddings (default backend='torch'{budget_note})", med, ts)
        values["ours"] = {key: float(v) for key, v in r.items()}
        if have_faiss and has_faiss_backend():
            med, ts, r = bs.timed(lambda: ours_faiss(x, labels), repeat)
            add("ours_faiss", f"ours: evaluate_embeddings(backend='faiss'{budget_note})", med, ts,
                "(faiss IndexFlatIP finds the candidates)")
            values["ours_faiss"] = {key: float(v) for key, v in r.items()}
        if calc is not None:
            calc_n = pml_calculator(n) if cuda else calc
            med, ts, r = bs.timed(lambda: calc_n.get_accuracy(x, labels), repeat)
            add("pml", "PML AccuracyCalculator.get_accuracy", med, ts,
                "(k-NN: CustomKNN(CosineSimilarity()) on cuda)" if cuda else "(k-NN: faiss IndexFlatL2, build inside)")
            values["pml"] = {key: float(v) for key, v in r.items()}
        info["rows"], info["values"] = rows, values
        results[n] = info
        del x, labels
        gc.collect()

    # ------------------------------------------------------------------ tables
    for n, info in results.items():
        get = {r["id"]: r["seconds"] for r in info["rows"]}
        floor, build, our = get.get("floor"), get.get("build"), get["ours"]
        print(f"\n## timing table, N = {n} (median of {repeat}; floor k = {info['floor_k']})\n")
        print("| method | median s | x floor (search) | x ours | other load |")
        print("|---|---:|---:|---:|---:|")
        for r in info["rows"]:
            ld = "-" if r["other_load"] is None else f"{r['other_load']:.2f}"
            xf = "-" if floor is None else bs.fmt_r(r["seconds"] / floor)
            print(f"| {r['method']} | {bs.fmt_s(r['seconds'])} | {xf} | {bs.fmt_r(r['seconds'] / our)} | {ld} |")
        if floor is not None:
            with_build = "" if build is None else f"; ours / (build + search) = {our / (build + floor):.2f}x"
            print(f"\nours / floor (search only) = {our / floor:.2f}x{with_build}")
        if floor is not None and "ours_faiss" in get:
            print(f"ours backend='faiss' / floor = {get['ours_faiss'] / floor:.2f}x")
        if "pml" in get:
            print(f"PML / ours = {get['pml'] / our:.2f}x" +
                  (f"; PML / ours backend='faiss' = {get['pml'] / get['ours_faiss']:.2f}x" if "ours_faiss" in get else ""))
        loaded = [r["method"] for r in info["rows"] if (r["other_load"] or 0) > bs.BUSY_LOAD]
        if loaded:
            print(f"WARNING: other processes were busy during: {', '.join(loaded)}")

    if results:
        print("\n## agreement of values\n")
        print("| N | PML key | our key | ours | PML | abs diff |")
        print("|---:|---|---|---:|---:|---:|")
    for n, info in results.items():
        v = info["values"]
        for pk, ok in PML_PAIRS:
            if "pml" in v:
                a, b = v["ours"][ok], v["pml"][pk]
                print(f"| {n} | {pk} | {ok} | {a:.8f} | {b:.8f} | {abs(a - b):.2e} |")
    for n, info in results.items():
        v = info["values"]
        if "ours_faiss" in v:
            diff = max(abs(v["ours"][k] - v["ours_faiss"][k]) for k in KEYS)
            print(f"| {n} | ours backend='faiss' | all {len(KEYS)} keys (max) | | | {diff:.2e} |")
    for n, info in results.items():
        print(f"ours, N = {n}: " + ", ".join(f"{k} {v:.4f}" for k, v in info["values"]["ours"].items()))

    # ------------------------------------------------------------------ memory
    mem_rows: List[dict] = []
    if not args.no_memory and sizes:
        print("\n## peak memory (fresh subprocess per method and N; extra = VmHWM - VmRSS once the inputs exist)\n",
              flush=True)
        for n in sizes:
            for method in MEMORY_METHODS:
                if ((method == "ours_faiss" and not have_faiss) or (method == "floor" and not (have_faiss or cuda))
                        or (method == "pml" and not have_pml) or (method == "ours_faiss" and not has_faiss_backend())):
                    continue
                m = run_child(method, n, args.seed, args.threads)
                if m:
                    mem_rows.append(m)
        print("| N | method | inputs MiB | RSS with inputs MiB | extra peak MiB | total peak MiB | "
              "(inputs + extra) / inputs | <= inputs + 0.5 GiB |")
        print("|---:|---|---:|---:|---:|---:|---:|---|")
        for m in mem_rows:
            inp, extra = m["input_bytes"] / 2**20, m["extra_kb"] / 1024
            print(f"| {m['n']} | {m['method']} | {inp:.1f} | {m['rss_inputs_kb'] / 1024:.0f} | {extra:.1f} | "
                  f"{m['total_peak_kb'] / 1024:.0f} | {(inp + extra) / inp:.1f} | "
                  f"{'yes' if m['extra_kb'] * 1024 <= MEMORY_TARGET_EXTRA else 'no'} |")
        notes = {m["note"] for m in mem_rows if m["note"]}
        for note in notes:
            print(f"(floor: {note})")
        if mem_rows and not all(m["peak_reset"] for m in mem_rows):
            print("(VmHWM could not be reset; extra peak taken from ru_maxrss)")

    # ------------------------------------------------------------------ profile
    prof: List[Tuple[str, float, Optional[float]]] = []  # (step, median s, other load)
    if args.profile:
        from retrieval_core.evaluation import embedding_values, embeddings

        n = args.profile_n or (sizes[0] if sizes else 20_000)
        x, labels = make_data(n, seed=args.seed)
        nq = min(args.profile_queries or n, n)
        ids = torch.arange(n)
        rows0 = embedding_values._chunk_rows(n, True, embeddings.DEFAULT_MEMORY_BUDGET)
        print(f"\n## profile of ours, N = {n}, the first {nq} queries against all N "
              f"(step totals over their chunks, median of {repeat})\n", flush=True)

        def ours_part(**kw):  # the first nq queries of the self-gallery run, same exclusion
            if nq == n:
                return retrieval_core.evaluate_embeddings(x, labels, KEYS, **kw)
            return retrieval_core.evaluate_embeddings(x[:nq], labels[:nq], KEYS, gallery=x, gallery_labels=labels,
                                                      query_ids=ids[:nq], gallery_ids=ids, **kw)

        try:
            _, _, steps = bs.timed(lambda: profile_ours(x, labels, repeat, nq), 1, warmup=0)
            prof = [(name, sec, bs.LAST_LOAD) for name, sec in steps]
        except Exception as exc:  # private API may move while core/ is edited
            prof = [(f"profile failed: {type(exc).__name__}: {exc}", float("nan"), None)]
        med, _, _ = bs.timed(lambda: ours_part(), repeat)
        prof.append((f"whole evaluate_embeddings (default memory_budget 256 MiB: {rows0}-row chunks)", med, bs.LAST_LOAD))
        for budget in (64, 1024, 4096):  # chunk size sensitivity (rows = budget / (128 B x N) for @r keys)
            rows = embedding_values._chunk_rows(n, True, budget * 2**20)
            med, _, _ = bs.timed(lambda: ours_part(memory_budget=budget * 2**20), repeat)
            prof.append((f"whole evaluate_embeddings, memory_budget={budget} MiB ({rows}-row chunks)", med, bs.LAST_LOAD))
        q = torch.nn.functional.normalize(x, dim=1)

        def chunked_matmul(rows):  # each chunk's product is dropped before the next, as in ours
            for i in range(0, nq, rows):
                q[i:min(i + rows, nq)] @ q.T

        for rows in sorted({rows0, 16, 128, 1024}):  # matmul alone, no selection: efficiency vs chunk height
            if rows * n * 4 <= 2**30:
                med, _, _ = bs.timed(lambda: chunked_matmul(rows), repeat)
                prof.append((f"bare torch matmul x[chunk] @ x.T, all chunks of {rows} rows", med, bs.LAST_LOAD))
        k = floor_k(labels)
        s = q[:rows0] @ q.T

        def repeated_topk():
            for _ in range(0, nq, rows0):
                s.topk(k)

        med, _, _ = bs.timed(repeated_topk, repeat)
        prof.append((f"bare torch.topk({k}) of a [{rows0}, N] chunk x {-(-nq // rows0)} chunks", med, bs.LAST_LOAD))
        if have_faiss:
            index = floor_build(x)
            med, _, _ = bs.timed(lambda: floor_search(index, x[:nq], k), repeat)
            prof.append((f"floor: faiss IndexFlatIP.search(k={k}) of the same {nq} queries", med, bs.LAST_LOAD))
            del index
        del q, s
        print("| step | median s | other load |")
        print("|---|---:|---:|")
        for name, sec, load in prof:
            print(f"| {name} | {'' if sec != sec else f'{sec:.3f}'} | {'-' if load is None else f'{load:.2f}'} |")
        print("\ntorch.profiler, one call, top ops by self CPU time:\n")
        if bs.WAIT_IDLE > 0:
            bs.wait_idle(bs.WAIT_IDLE, calm=2)
        from torch.profiler import ProfilerActivity, profile

        with profile(activities=[ProfilerActivity.CPU]) as tp:
            ours_part()
        print(tp.key_averages().table(sort_by="self_cpu_time_total", row_limit=12))
        del x, labels

    # ------------------------------------------------------------------ large
    large_rows: List[dict] = []
    if args.large and args.large_methods.strip(","):
        n = args.large_n
        print(f"\n## large run: N = {n} ({DIM}-d, {CLASSES} classes), one call per method in a fresh subprocess\n",
              flush=True)
        for method in [m for m in args.large_methods.split(",") if m]:
            if bs.WAIT_IDLE > 0:
                bs.wait_idle(bs.WAIT_IDLE, calm=2)
            busy0, w0 = bs._busy_seconds(), time.perf_counter()
            ru0 = resource.getrusage(resource.RUSAGE_CHILDREN)
            m = run_child(method, n, args.seed, args.threads)
            ru1 = resource.getrusage(resource.RUSAGE_CHILDREN)
            wall = time.perf_counter() - w0
            if m is None:
                continue
            child_cpu = (ru1.ru_utime + ru1.ru_stime) - (ru0.ru_utime + ru0.ru_stime)
            busy1 = bs._busy_seconds()
            m["other_load"] = None if busy0 is None else max(0.0, (busy1 - busy0) - child_cpu) / wall
            large_rows.append(m)
            print(f"  {method}: {m['seconds']:.1f} s, total peak RSS {m['total_peak_kb'] / 2**20:.2f} GiB "
                  f"(inputs {m['input_bytes'] / 2**20:.0f} MiB, extra {m['extra_kb'] / 1024:.0f} MiB), "
                  f"other load {m['other_load']:.2f}", flush=True)
        print("\n| N | method | seconds | inputs MiB | extra peak MiB | total peak RSS GiB | <= 3 GB total | other load |")
        print("|---:|---|---:|---:|---:|---:|---|---:|")
        for m in large_rows:
            print(f"| {m['n']} | {m['method']} | {m['seconds']:.1f} | {m['input_bytes'] / 2**20:.0f} | "
                  f"{m['extra_kb'] / 1024:.0f} | {m['total_peak_kb'] / 2**20:.2f} | "
                  f"{'yes' if m['total_peak_kb'] * 1024 <= LARGE_TARGET_TOTAL else 'no'} | {m['other_load']:.2f} |")
        for m in large_rows:
            if m["values"]:
                print(f"{m['method']} values: " + ", ".join(f"{k} {v:.4f}" for k, v in m["values"].items()))

    # ------------------------------------------------------------------ targets
    print("\n## targets (from the issue)\n")
    for n, info in results.items():
        get = {r["id"]: r["seconds"] for r in info["rows"]}
        floor = get.get("floor")
        for rid, label in (("ours", "default backend"), ("ours_faiss", "backend='faiss'")):
            if floor is not None and rid in get:
                ratio = get[rid] / floor
                print(f"- N = {n}: total <= 1.2x faiss search ({label}): {ratio:.2f}x ({get[rid]:.3f} s vs "
                      f"{floor:.3f} s) -> {'met' if ratio <= 1.2 else 'NOT met'}")
    for m in mem_rows:
        if m["method"].startswith("ours"):
            ok = m["extra_kb"] * 1024 <= MEMORY_TARGET_EXTRA
            print(f"- N = {m['n']}: peak RSS <= inputs + 0.5 GiB ({m['method']}): extra {m['extra_kb'] / 1024:.0f} MiB -> "
                  f"{'met' if ok else 'NOT met'}")
    for m in large_rows:
        if m["method"].startswith("ours"):
            ok = m["total_peak_kb"] * 1024 <= LARGE_TARGET_TOTAL
            print(f"- N = {m['n']}: peak RSS <= 3 GB ({m['method']}): {m['total_peak_kb'] / 2**20:.2f} GiB total in "
                  f"{m['seconds']:.1f} s -> {'met' if ok else 'NOT met'}")

    if args.json:
        with open(args.json, "w") as f:
            json.dump({"machine": bs.machine_line(), "device": bs.device_line(), "code": bs.code_version(), "keys": KEYS,
                       "results": {str(n): v for n, v in results.items()}, "memory": mem_rows,
                       "profile": prof, "large": large_rows}, f, indent=1)


if __name__ == "__main__":
    main()
