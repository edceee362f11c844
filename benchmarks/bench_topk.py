"""``evaluate_topk`` against torch_geometric's ``LinkPred*`` metrics on the same top-k lists, in one
process, one thread: nine keys (precision, recall, f1, map_capped (PyG's MAP), ndcg, mrr, hit_rate,
coverage, popularity at k), ``--users`` x ``--items``, about ``--pairs`` (user, item) truth pairs,
distinct items in each list. The two are run alternately ``--repeat`` times; the report is the
medians and their ratio, after checking that the values agree (to 1e-6 relative)::

    OMP_NUM_THREADS=1 PYTHONPATH=core:. flock /tmp/bench.lock .venv/bin/python benchmarks/bench_topk.py \\
        [--users 100000 --items 50000 --k 20 --pairs 1000000 --repeat 5]
"""
from __future__ import annotations

import argparse
import statistics
import time

import torch

import retrieval_core as rc

NAMES = ("precision", "recall", "f1", "map_capped", "ndcg", "mrr", "hit_rate", "coverage", "popularity")


def make(users: int, items: int, k: int, pairs: int, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    width = max(items // 200, 1)  # distinct items per list: a permutation of 200 blocks, one item in each
    topk = torch.argsort(torch.rand(users, 200, generator=g), dim=1)[:, :k] * width
    topk = topk + torch.randint(0, width, (users, 1), generator=g)
    truth = torch.stack([torch.randint(0, users, (pairs,), generator=g),
                         torch.randint(0, items, (pairs,), generator=g)]).unique(dim=1)
    popularity = torch.randint(0, 100, (items,), generator=g)
    return topk, truth, popularity


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--users", type=int, default=100_000)
    ap.add_argument("--items", type=int, default=50_000)
    ap.add_argument("--k", type=int, default=20)
    ap.add_argument("--pairs", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    torch.set_num_threads(1)
    from torch_geometric import metrics as M

    topk, truth, popularity = make(args.users, args.items, args.k, args.pairs)
    keys = [f"{name}@{args.k}" for name in NAMES]

    def ours():
        r = rc.evaluate_topk(topk, truth, keys, n_items=args.items, item_popularity=popularity)
        return [float(r[key]) for key in keys]

    def pyg():
        k = args.k
        metrics = [M.LinkPredPrecision(k), M.LinkPredRecall(k), M.LinkPredF1(k), M.LinkPredMAP(k),
                   M.LinkPredNDCG(k), M.LinkPredMRR(k), M.LinkPredHitRatio(k), M.LinkPredCoverage(k, args.items),
                   M.LinkPredAveragePopularity(k, popularity)]
        for m in metrics:
            m.update(topk, truth)
        return [float(m.compute()) for m in metrics]

    a, b = ours(), pyg()
    worst = max(abs(x - y) / max(abs(y), 1e-12) for x, y in zip(a, b))
    times = {"ours": [], "pyg": []}
    for _ in range(args.repeat):
        for name, fn in (("ours", ours), ("pyg", pyg)):
            t0 = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - t0)
    med = {name: statistics.median(t) for name, t in times.items()}
    print(f"{args.users} users x {args.items} items, k = {args.k}, {truth.shape[1]} truth pairs, nine keys, 1 thread")
    print(f"ours {med['ours']:.3f} s  torch_geometric {med['pyg']:.3f} s  pyg/ours {med['pyg'] / med['ours']:.2f}  "
          f"(largest relative difference of the values {worst:.1e})")


if __name__ == "__main__":
    main()
