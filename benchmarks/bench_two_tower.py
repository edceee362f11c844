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

Prints, per method, the median wall time of ``--repeats`` runs (alternating ours and the loop)
and the ratio loop / ours.
"""
from __future__ import annotations

import argparse
import statistics
import time

import torch

import retrieval_core as rc
from retrieval_core import sizing

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
        return torch.stack([u, i]).unique(dim=1)  # distinct pairs

    return users, items, pairs(history), pairs(test)


def ours(users, items, truth, seen):
    r = rc.evaluate_embeddings(users, None, KEYS, gallery=items, distance="dot", relevance=truth, exclude=seen,
                               reduce="none", progress=False)
    return torch.stack([r[k] for k in KEYS], 1)


def _csr(pairs, n_users):
    offsets = torch.zeros(n_users + 1, dtype=torch.int64)
    offsets[1:] = torch.cumsum(torch.bincount(pairs[0], minlength=n_users), 0)
    return offsets, pairs[1]  # pairs sorted by user (unique(dim=1) sorts them)


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
        scores = users[start:stop] @ items.T
        lo, hi = int(s_off[start]), int(s_off[stop])
        seen_rows = torch.repeat_interleave(torch.arange(c), s_off[start + 1:stop + 1] - s_off[start:stop])
        scores[seen_rows, s_items[lo:hi]] = float("-inf")
        top = scores.topk(K, dim=1).indices
        lo, hi = int(t_off[start]), int(t_off[stop])
        test_rows = torch.repeat_interleave(torch.arange(c), t_off[start + 1:stop + 1] - t_off[start:stop])
        relevant = torch.zeros(c, n_items, dtype=torch.bool)
        relevant[test_rows, t_items[lo:hi]] = True
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
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    users, items, seen, truth = make_data(args.users, args.items, args.dims, args.history, args.test, args.seed)
    rows = sizing.chunk_rows(args.items, False, sizing.CPU_MEMORY_BUDGET, ranked=K)
    print(f"{args.users} users x {args.items} items x {args.dims} dims, k={K}, {seen.shape[1]} history pairs "
          f"(excluded), {truth.shape[1]} test pairs, {len(KEYS)} keys, {torch.get_num_threads()} thread(s), "
          f"{rows} users per chunk")
    times = {"ours": [], "torch loop": []}
    a = b = None
    for _ in range(args.repeats):
        t = time.perf_counter()
        a = ours(users, items, truth, seen)
        times["ours"].append(time.perf_counter() - t)
        t = time.perf_counter()
        b = torch_loop(users, items, truth, seen, rows)
        times["torch loop"].append(time.perf_counter() - t)
    diff = (a - b).abs().nan_to_num(0.0).max().item()
    same_nan = bool((a.isnan() == b.isnan()).all())
    for name, ts in times.items():
        print(f"{name:>11}: median {statistics.median(ts):.2f} s  (runs: {', '.join(f'{x:.2f}' for x in ts)})")
    print(f"ratio torch loop / ours: {statistics.median(times['torch loop']) / statistics.median(times['ours']):.2f}")
    print(f"max |ours - loop| = {diff:.3g}; same undefined users: {same_nan}")


if __name__ == "__main__":
    main()
