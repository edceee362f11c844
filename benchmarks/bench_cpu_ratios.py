"""Issue 9's CPU targets as ratios ours / bare primitive, measured in one process.

Each repeat times the primitive and ours back to back (interleaved), and the ratio
of each pair is kept: the median of those ratios is robust to a shared, noisy
machine, where absolute times drift between repeats. With ``--threads 1`` the
clock is the thread's CPU time (``time.thread_time``: another process on the same
core does not count); otherwise wall time.

* dense: ``evaluate_scores`` of ndcg/map/mrr/precision/recall @10 on 10,000 x 1,000
  (bench_scores' data) against ``torch.topk(preds, k=10, dim=1)``;
* embeddings: ``evaluate_embeddings`` (default settings, bench_embeddings' data and
  keys) against faiss' ``IndexFlatIP.search`` at the depth ours needs;
* flat memory: bench_scores' ``--memory`` subprocesses (extra peak RSS / inputs).

Which code runs is the ``retrieval_core`` on the path: run it with another
checkout's ``core/`` first on ``PYTHONPATH`` to compare before and after.

    PYTHONPATH=core:. .venv/bin/python benchmarks/bench_cpu_ratios.py --threads 1
    PYTHONPATH=core:. .venv/bin/python benchmarks/bench_cpu_ratios.py --threads 2 --only dense
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

import bench_embeddings as be  # noqa: E402
import bench_scores as bs  # noqa: E402
import retrieval_core as rc  # noqa: E402


def ratios(primitive, ours, repeat: int, clock):
    """(median of ours/primitive over interleaved pairs, median primitive s, median ours s)."""
    primitive(), ours()  # warm-up
    a, b, r = [], [], []
    for _ in range(repeat):
        t = clock()
        primitive()
        ta = clock() - t
        t = clock()
        ours()
        tb = clock() - t
        a.append(ta), b.append(tb), r.append(tb / ta)
    return statistics.median(r), statistics.median(a), statistics.median(b)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--only", default="dense,embeddings,memory", help="comma-separated parts")
    ap.add_argument("--repeat", type=int, default=9, help="interleaved pairs for dense (embeddings: a third)")
    ap.add_argument("--sizes", default="20000,40000", help="embedding N")
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    clock = time.thread_time if args.threads == 1 else time.perf_counter
    parts = set(args.only.split(","))
    out = {"threads": args.threads, "clock": clock.__name__, "core": os.path.dirname(rc.__file__)}
    print(f"retrieval_core from {out['core']}; torch {torch.__version__}, {args.threads} thread(s), "
          f"clock {clock.__name__}")
    if "dense" in parts:
        preds, target = bs.make_data(10_000, 1_000, 0)
        r, a, b = ratios(lambda: torch.topk(preds, k=10, dim=1), lambda: rc.evaluate_scores(preds, target, bs.KEYS),
                         args.repeat, clock)
        out["dense"] = {"ratio": r, "topk_s": a, "ours_s": b}
        print(f"dense @10, 10k x 1k: ours / topk = {r:.2f} (medians: topk {a * 1e3:.1f} ms, ours {b * 1e3:.1f} ms)")
    if "embeddings" in parts:
        import faiss

        faiss.omp_set_num_threads(args.threads)
        for n in [int(v) for v in args.sizes.split(",") if v]:
            x, labels = be.make_data(n)
            k = be.floor_k(labels)
            index = faiss.IndexFlatIP(x.shape[1])
            index.add(x.numpy())
            r, a, b = ratios(lambda: index.search(x.numpy(), k), lambda: rc.evaluate_embeddings(x, labels, be.KEYS),
                             max(3, args.repeat // 3), clock)
            out[f"embeddings_{n}"] = {"ratio": r, "faiss_s": a, "ours_s": b, "k": k}
            print(f"embeddings {n} x {n} x 128: ours / faiss search(k={k}) = {r:.2f} "
                  f"(medians: faiss {a:.2f} s, ours {b:.2f} s)")
    if "memory" in parts:
        script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "bench_scores.py")
        for method in ("flat_shuffled", "flat_grouped", "dense"):
            line = subprocess.run([sys.executable, script, "--memory", method], capture_output=True, text=True,
                                  check=True).stdout.strip().splitlines()[-1]
            got = json.loads(line)
            share = got["extra_kb"] * 1024 / got["input_bytes"]
            out[f"memory_{method}"] = {"extra_mib": got["extra_kb"] / 1024, "inputs_mib": got["input_bytes"] / 2**20,
                                       "extra_share": share}
            print(f"memory {method}: extra peak {got['extra_kb'] / 1024:.1f} MiB = {100 * share:.0f}% of the inputs "
                  f"({got['input_bytes'] / 2**20:.1f} MiB)")
    print(json.dumps(out))


if __name__ == "__main__":
    main()
