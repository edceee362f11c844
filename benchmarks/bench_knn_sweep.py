"""Exact k-NN sweep: ``retrieval_core.evaluate_embeddings`` against faiss' flat search at the same depth.

Setup: N x 128 float32 clustered embeddings (``bench_pml.make_data``: 100 class centres +
gaussian noise, labels uniform), the query set as its own gallery (``gallery=None``: each
item's own row excluded). For each N, k and distance:

* ours: ``evaluate_embeddings(x, labels, ["precision@k", "recall@k"], distance=...)``
  (the keys need depth k: each query's first k ranked items, self excluded);
* faiss: ``IndexFlatIP`` on L2-normalised rows (cosine) or ``IndexFlatL2`` (squared
  euclidean), ``search(x, k + 1)`` (depth k plus the self match); index built outside
  the timing.

One process, 1 thread (``torch.set_num_threads``, ``faiss.omp_set_num_threads``), one
warm-up of each, then ``--repeat`` interleaved pairs (faiss and ours alternate which goes
first); the ratio is the median over pairs of ours / faiss. Extra memory of ours: peak RSS
over the RSS once the inputs exist, in a fresh subprocess (``/proc/self/status`` VmHWM,
reset through ``/proc/self/clear_refs``; ``--no-memory`` skips it).

Usage::

    OMP_NUM_THREADS=1 PYTHONPATH=core:. .venv/bin/python benchmarks/bench_knn_sweep.py \\
        [--sizes 20000,40000,100000 --ks 10,100,1000 --distances cosine,squared_euclidean --repeat 2 --json PATH]
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
    print(f"{'N':>7} {'k':>5} {'distance':>17} {'faiss_s':>8} {'ours_s':>8} {'ratio':>6} {'extra_MB':>8}", flush=True)
    for n in [int(s) for s in a.sizes.split(",") if s]:
        x, labels = make_data(n, 128, 100)
        for distance in a.distances.split(","):
            for k in [int(s) for s in a.ks.split(",") if s]:
                search = _faiss_search(x, k, distance)
                search()
                _ours(x, labels, k, distance)  # warm-ups
                t_f, t_o, ratios = [], [], []
                for i in range(a.repeat):
                    pair = {}
                    for name in (("faiss", "ours") if i % 2 == 0 else ("ours", "faiss")):
                        start = time.perf_counter()
                        search() if name == "faiss" else _ours(x, labels, k, distance)
                        pair[name] = time.perf_counter() - start
                    t_f.append(pair["faiss"])
                    t_o.append(pair["ours"])
                    ratios.append(pair["ours"] / pair["faiss"])
                extra = None if a.no_memory else measure_memory(n, k, distance)
                row = {"n": n, "k": k, "distance": distance, "faiss_s": round(statistics.median(t_f), 3),
                       "ours_s": round(statistics.median(t_o), 3), "ratio": round(statistics.median(ratios), 3),
                       "extra_mb": None if extra is None else round(extra, 1)}
                rows.append(row)
                print(f"{n:>7} {k:>5} {distance:>17} {row['faiss_s']:>8.3f} {row['ours_s']:>8.3f} "
                      f"{row['ratio']:>6.2f} {'-' if extra is None else f'{extra:8.1f}':>8}", flush=True)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
