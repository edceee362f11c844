"""OML's ``calc_retrieval_metrics`` against ``retrieval_core.compat.oml``'s, from precomputed ids.

Setup (defaults, issue 20): Q = 100,000 queries, each with its top-100 retrieved
gallery ids (a ``[Q, 100]`` int64 tensor, passed as a list of ``Q`` rows, as OML's
``RetrievalResults`` holds them) out of a gallery of 50,000 items, and 1 to 20
ground-truth ids per query (a list of ``Q`` tensors); cutoffs ``cmc@(1, 5, 10)``,
``precision@(5, 10)``, ``map@(5, 10, 100)``, reduced (``reduce=True``), CPU.

What is measured (``torch.set_num_threads(--threads)``, default 1; one untimed
warm-up call of ours; median of ``--repeat`` timed calls, OML's timed once per
repeat too): both functions on the same inputs, their results compared (equal
within 1e-6), and the ratio OML / ours printed.

OML is not a dependency: it loads from OML's source tree (``OML_REPO_DIR``, see
docs/compat_oml.md, "OML's own tests") or an installed ``oml``.

Usage::

    OML_REPO_DIR=/tmp/oml_repo .venv/bin/python benchmarks/bench_oml.py
    OML_REPO_DIR=/tmp/oml_repo .venv/bin/python benchmarks/bench_oml.py --queries 10000 --repeat 1  # quick
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "core"), str(ROOT / "tests" / "anchors" / "oml")]

from oml_env import load_oml_metrics  # noqa: E402

from retrieval_core.compat import oml as ours  # noqa: E402

ARGS = dict(cmc_top_k=(1, 5, 10), precision_top_k=(5, 10), map_top_k=(5, 10, 100), reduce=True, verbose=False)


def make_inputs(n_queries: int, depth: int, gallery: int, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    n_gt = torch.randint(1, 21, (n_queries,), generator=g)
    gt_all = torch.randint(0, gallery, (n_queries, 20), generator=g)
    gt_ids = [row[:n] for row, n in zip(gt_all, n_gt.tolist())]
    retrieved = torch.randint(0, gallery, (n_queries, depth), generator=g)
    # plant some hits: a query's first ground-truth id at a random rank of its list
    rank = torch.randint(0, depth, (n_queries,), generator=g)
    plant = torch.rand(n_queries, generator=g) < 0.7
    retrieved[plant, rank[plant]] = gt_all[plant, 0]
    return list(retrieved), gt_ids


def timed(fn, *args, **kwargs):
    start = time.perf_counter()
    out = fn(*args, **kwargs)
    return time.perf_counter() - start, out


def close(a, b) -> bool:
    if isinstance(b, dict):
        return list(a) == list(b) and all(close(a[k], b[k]) for k in b)
    return torch.allclose(a, b, atol=1e-6, equal_nan=True)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--queries", type=int, default=100_000)
    p.add_argument("--depth", type=int, default=100)
    p.add_argument("--gallery", type=int, default=50_000)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--repeat", type=int, default=3)
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    oml, why = load_oml_metrics()
    if oml is None:
        sys.exit(f"OML is not available: {why}")
    retrieved, gt_ids = make_inputs(a.queries, a.depth, a.gallery)
    ours.calc_retrieval_metrics(retrieved[:1000], gt_ids[:1000], **ARGS)  # warm-up
    t_ours, t_oml = [], []
    for _ in range(a.repeat):
        t, got = timed(ours.calc_retrieval_metrics, retrieved, gt_ids, **ARGS)
        t_ours.append(t)
        t, want = timed(oml.calc_retrieval_metrics, retrieved, gt_ids, **ARGS)
        t_oml.append(t)
        assert close(got, want), (got, want)
    mo, mm = statistics.median(t_ours), statistics.median(t_oml)
    print(f"Q={a.queries} x top-{a.depth}, threads={a.threads}, torch {torch.__version__}: "
          f"OML {mm:.3f} s, ours {mo:.3f} s, ratio OML/ours {mm / mo:.1f}x (results equal)")


if __name__ == "__main__":
    main()
