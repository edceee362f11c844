"""Exact k-NN sweep: ``retrieval_core.evaluate_embeddings`` against faiss' flat search at the same depth.

Setup: N x 128 float32 clustered embeddings (``bench_pml.make_data``: 100 class centres +
gaussian noise, labels uniform), the query set as its own gallery (``gallery=None``: each
item's own row excluded). For each N, k and distance:

* ours: ``evaluate_embeddings(x, labels, ["precision@k", "recall@k"], distance=...)``
  (the keys need depth k: each query's first k ranked items, self excluded);
* faiss: ``IndexFlatIP`` on L2-normalised rows (cosine) or ``IndexFlatL2`` (squared
  euclidean), ``search(x, k + 1)`` (depth k plus the self match); index built outside
  the timing.

* bare: torch's own primitives with no exactness, the floor of any torch-based search:
  the float32 product in chunks of 2,048 queries into one reused buffer (``addmm`` with
  ``-|g|^2``, ``2 q`` for squared euclidean; ``mm`` of normalised rows for cosine) and
  ``topk(k + 1)`` of each chunk (``--bare`` adds it; ``bare/faiss`` then shows how much of
  faiss' time torch's BLAS and top-k alone take).

One process, 1 thread (``torch.set_num_threads``, ``faiss.omp_set_num_threads``), one
warm-up of each, then ``--repeat`` interleaved pairs (faiss and ours alternate which goes
first); the ratio is the median over pairs of ours / faiss. Extra memory of ours: peak RSS
over the RSS once the inputs exist, in a fresh subprocess (``/proc/self/status`` VmHWM,
reset through ``/proc/self/clear_refs``; ``--no-memory`` skips it).

Usage::

    OMP_NUM_THREADS=1 PYTHONPATH=core:. .venv/bin/python benchmarks/bench_knn_sweep.py \\
        [--sizes 20000,40000,100000 --ks 10,100,1000 --distances cosine,squared_euclidean --repeat 2 --bare --json PATH]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_pml import make_data  # noqa: E402

FAISS_INDEX = {"cosine": "IndexFlatIP", "squared_euclidean": "IndexFlatL2"}


def _keys(k: int):
    return [f"precision@{k}", f"recall@{k}"]


def _ours(x, labels, k, distance):
    import retrieval_core
    return retrieval_core.evaluate_embeddings(x, labels, _keys(k), distance=distance, progress=False)


def _faiss_search(x, k, distance):
    import faiss
    import numpy as np
    xs = x.numpy()
    if distance == "cosine":
        xs = xs / np.linalg.norm(xs, axis=1, keepdims=True)
    xs = np.ascontiguousarray(xs, dtype=np.float32)
    index = getattr(faiss, FAISS_INDEX[distance])(xs.shape[1])
    index.add(xs)
    return lambda: index.search(xs, min(k + 1, xs.shape[0]))


def _bare_search(x, k, distance, rows=2048):
    """Chunked float32 product and ``topk(k + 1)``: no exact order, no metric."""
    g = torch.nn.functional.normalize(x, dim=1) if distance == "cosine" else x
    q = g if distance == "cosine" else 2.0 * x
    neg_sq = None if distance == "cosine" else -(x * x).sum(1)
    buffer = torch.empty(min(rows, x.shape[0]), x.shape[0])
    depth = min(k + 1, x.shape[0])

    def search():
        for start in range(0, x.shape[0], rows):
            part = q[start:start + rows]
            out = buffer[: part.shape[0]]
            if neg_sq is None:
                torch.mm(part, g.T, out=out)
            else:
                torch.addmm(neg_sq, part, g.T, out=out)
            out.topk(depth, dim=1)
    return search


def _status_kb(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise KeyError(field)


def memory_child(n: int, k: int, distance: str) -> None:
    torch.set_num_threads(1)
    x, labels = make_data(n, 128, 100)
    _ours(x[:64], labels[:64], min(k, 63), distance)  # imports and one-time buffers of the library
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")  # resets VmHWM to the current RSS
    before = _status_kb("VmRSS")
    _ours(x, labels, k, distance)
    print(json.dumps({"extra_mb": (_status_kb("VmHWM") - before) / 1024}))


def measure_memory(n, k, distance):
    env = dict(os.environ, OMP_NUM_THREADS="1")
    out = subprocess.run([sys.executable, os.path.abspath(__file__), "--memory-child", f"{n},{k},{distance}"],
                         capture_output=True, text=True, env=env, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])["extra_mb"]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", default="20000,40000,100000")
    p.add_argument("--ks", default="10,100,1000")
    p.add_argument("--distances", default="cosine,squared_euclidean")
    p.add_argument("--repeat", type=int, default=2)
    p.add_argument("--no-memory", action="store_true")
    p.add_argument("--bare", action="store_true", help="also time torch's bare product + topk (see above)")
    p.add_argument("--json", default=None)
    p.add_argument("--memory-child", default=None, help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a.memory_child:
        n, k, distance = a.memory_child.split(",")
        memory_child(int(n), int(k), distance)
        return 0
    import faiss
    torch.set_num_threads(1)
    faiss.omp_set_num_threads(1)
    rows = []
    bare_head = f" {'bare_s':>7} {'bare/faiss':>10}" if a.bare else ""
    print(f"{'N':>7} {'k':>5} {'distance':>17} {'faiss_s':>8} {'ours_s':>8} {'ratio':>6} {'extra_MB':>8}{bare_head}",
          flush=True)
    for n in [int(s) for s in a.sizes.split(",") if s]:
        x, labels = make_data(n, 128, 100)
        for distance in a.distances.split(","):
            for k in [int(s) for s in a.ks.split(",") if s]:
                runs = {"faiss": _faiss_search(x, k, distance), "ours": lambda: _ours(x, labels, k, distance)}
                if a.bare:
                    runs["bare"] = _bare_search(x, k, distance)
                for run in runs.values():
                    run()  # warm-ups
                times = {name: [] for name in runs}
                for i in range(a.repeat):  # the order rotates, so that none always goes first
                    names = list(runs)[i % len(runs):] + list(runs)[:i % len(runs)]
                    for name in names:
                        start = time.perf_counter()
                        runs[name]()
                        times[name].append(time.perf_counter() - start)
                t_f, t_o = times["faiss"], times["ours"]
                ratios = [o / f for o, f in zip(t_o, t_f)]
                extra = None if a.no_memory else measure_memory(n, k, distance)
                row = {"n": n, "k": k, "distance": distance, "faiss_s": round(statistics.median(t_f), 3),
                       "ours_s": round(statistics.median(t_o), 3), "ratio": round(statistics.median(ratios), 3),
                       "extra_mb": None if extra is None else round(extra, 1)}
                bare = ""
                if a.bare:
                    row["bare_s"] = round(statistics.median(times["bare"]), 3)
                    row["bare_ratio"] = round(statistics.median([b / f for b, f in zip(times["bare"], t_f)]), 3)
                    bare = f" {row['bare_s']:>7.3f} {row['bare_ratio']:>10.2f}"
                rows.append(row)
                print(f"{n:>7} {k:>5} {distance:>17} {row['faiss_s']:>8.3f} {row['ours_s']:>8.3f} "
                      f"{row['ratio']:>6.2f} {'-' if extra is None else f'{extra:8.1f}':>8}{bare}", flush=True)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
