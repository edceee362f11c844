"""PML drop-in: ``retrieval_core.compat.pml.AccuracyCalculator`` against
pytorch-metric-learning's own ``AccuracyCalculator`` (its default: faiss
``IndexFlatL2`` k-NN, its numpy/torch metric code), same calls, same data.

Setup (defaults): ``--n`` 20,000 embeddings of dimension 128 (float32, gaussian around
100 class centres, labels uniform), the query set as its own reference (PML's
``get_accuracy(x, labels)``), the five k-NN accuracies (NMI/AMI excluded: k-means is
not the subject), ``k="max_bin_count"`` (R never exceeds k: the exact MAP@R); ``--with-clustering`` adds NMI and
AMI (PML: faiss k-means, 20 iterations; ours: the core's seeded k-means, so the two
NMI/AMI values are printed, not compared: they differ by the clustering found). Both on
the CPU with ``--threads`` threads (default 1: the machine is shared). Medians of
``--repeat`` timed calls after one warm-up; values checked equal (to 1e-6) first.

Usage::

    OMP_NUM_THREADS=1 PYTHONPATH=core:. .venv/bin/python benchmarks/bench_pml.py \\
        [--n 20000 --dim 128 --classes 100 --k max_bin_count|None|INT --repeat 3 --threads 1 --json PATH
         --with-clustering]

``--k None`` is PML's default (every reference item: a [Q, Q] neighbour matrix in PML).
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time

import torch

NAMES = ("precision_at_1", "r_precision", "mean_average_precision_at_r", "mean_average_precision",
         "mean_reciprocal_rank")
CLUSTER_NAMES = ("NMI", "AMI")


def make_data(n: int, dim: int, classes: int, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    labels = torch.randint(0, classes, (n,), generator=g)
    centres = torch.randn(classes, dim, generator=g)
    return centres[labels] + 1.5 * torch.randn(n, dim, generator=g), labels


def timed(fn, repeat: int):
    fn()  # warm-up
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times), out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, default=20000)
    p.add_argument("--dim", type=int, default=128)
    p.add_argument("--classes", type=int, default=100)
    p.add_argument("--k", default="max_bin_count")
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--json", default=None)
    p.add_argument("--with-clustering", action="store_true", help="include NMI and AMI (values not compared)")
    a = p.parse_args(argv)
    torch.set_num_threads(a.threads)
    try:
        import faiss
        faiss.omp_set_num_threads(a.threads)
    except ImportError:
        print("faiss is not installed: PML's default knn_func needs it", file=sys.stderr)
        return 2
    from pytorch_metric_learning.utils import accuracy_calculator as pml

    from retrieval_core.compat.pml import AccuracyCalculator

    k = None if a.k == "None" else (a.k if a.k == "max_bin_count" else int(a.k))
    x, labels = make_data(a.n, a.dim, a.classes)
    cpu = torch.device("cpu")
    include = NAMES + (CLUSTER_NAMES if a.with_clustering else ())
    theirs = pml.AccuracyCalculator(include=include, k=k, device=cpu)
    ours = AccuracyCalculator(include=include, k=k, device=cpu)
    t_pml, v_pml = timed(lambda: theirs.get_accuracy(x, labels), a.repeat)
    t_ours, v_ours = timed(lambda: ours.get_accuracy(x, labels), a.repeat)
    diff = max(abs(v_pml[n] - v_ours[n]) for n in NAMES)
    row = {"n": a.n, "dim": a.dim, "classes": a.classes, "k": a.k, "threads": a.threads,
           "pml_s": round(t_pml, 3), "ours_s": round(t_ours, 3), "ratio_pml_over_ours": round(t_pml / t_ours, 2),
           "max_abs_diff": diff, "with_clustering": a.with_clustering, "torch": torch.__version__}
    print(json.dumps(row))
    for n in include:
        print(f"  {n:30s} pml {v_pml[n]:.6f}  ours {v_ours[n]:.6f}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(row, f, indent=1)
    return 0 if diff < 1e-4 else 1


if __name__ == "__main__":
    sys.exit(main())
