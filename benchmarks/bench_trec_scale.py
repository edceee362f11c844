"""map + ndcg@10 + mrr + recall@100 at once on Q queries x 100 run entries: ours against
ranx (one thread, numba compile excluded) and pytrec_eval, from loaded data and from files.

Each query retrieves 100 documents (distinct random float64 scores, no ties, so every
tool ranks alike; the run file is written in rank order, scores with all 17 digits, every
document id distinct: 10M ids at 100k queries) and has 10 judgements: 6 among the retrieved, 4 that the run missed
(rel 0, 1 or 2; R counts the missed ones). Timed, each ``--repeat`` times (best and
median printed):

* ranx ``evaluate`` of each measure alone and of the four at once (``threads=1``;
  ``NUMBA_NUM_THREADS=1`` is set before ranx is imported; one warm-up call on small
  data compiles first);
* pytrec_eval ``RelevanceEvaluator(qrels, {map, ndcg_cut.10, recip_rank, recall.100}).evaluate``
  plus the means;
* ours: ``evaluate_trec`` on the read ``Qrels``/``Run``; ``evaluate_scores(..., n_relevant=,
  ideal=)`` of the flat form grouped by query (each query's entries in random order),
  fully shuffled, and as dense ``[Q, 100]`` rows;
* from files (``--files``): read the qrels and the run in TREC format, then evaluate.

The values are checked to agree (largest difference printed) before anything is timed.
Ratios are against ranx's time for ONE measure (its median over the four measures).

Usage::

    OMP_NUM_THREADS=1 PYTHONPATH=core .venv/bin/python benchmarks/bench_trec_scale.py --queries 100000 --files
    OMP_NUM_THREADS=1 PYTHONPATH=core .venv/bin/python benchmarks/bench_trec_scale.py --queries 1000000 --ours-only
"""
from __future__ import annotations

import argparse
import os
import resource
import statistics
import tempfile
import time

os.environ.setdefault("NUMBA_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import torch  # noqa: E402

from retrieval_core import evaluate_scores  # noqa: E402
from retrieval_core.trec import evaluate_trec, read_qrels, read_run  # noqa: E402

DEPTH, JUDGED, MISSED = 100, 10, 4
OURS = ["map", "ndcg@10", "mrr", "recall@100"]
TREC = ["map", "ndcg_cut_10", "recip_rank", "recall_100"]
RANX = ["map", "ndcg@10", "mrr", "recall@100"]
PYTREC = {"map", "ndcg_cut.10", "recip_rank", "recall.100"}


def make(n_q: int, seed: int = 0):
    """Tensors of the run (query-major, rank order unknown) and of the qrels."""
    g = torch.Generator().manual_seed(seed)
    scores = torch.rand(n_q, DEPTH, generator=g, dtype=torch.float64)
    # judged: 6 retrieved positions and 4 missed documents (numbered DEPTH..DEPTH+3)
    pos = torch.rand(n_q, DEPTH, generator=g).argsort(1)[:, :JUDGED - MISSED]
    docs = torch.cat([pos, DEPTH + torch.arange(MISSED).expand(n_q, MISSED)], 1)
    rel = torch.randint(0, 3, (n_q, JUDGED), generator=g)
    gains = torch.zeros(n_q, DEPTH + MISSED, dtype=torch.float64).scatter_(1, docs, rel.double())
    return scores, gains, docs, rel


def write_files(folder: str, scores, docs, rel):
    n_q = scores.shape[0]
    qrels_path, run_path = os.path.join(folder, "qrels"), os.path.join(folder, "run")
    with open(qrels_path, "w") as f:
        for start in range(0, n_q, 10000):
            d, r = docs[start:start + 10000].tolist(), rel[start:start + 10000].tolist()
            f.write("".join(f"q{start + i} 0 d{i + start}_{dj} {rj}\n" for i in range(len(d))
                            for dj, rj in zip(d[i], r[i])))
    with open(run_path, "w") as f:  # in rank order, as retrieval systems write runs
        for start in range(0, n_q, 10000):
            s, o = scores[start:start + 10000].sort(1, descending=True)
            s, o = s.tolist(), o.tolist()
            f.write("".join(f"q{start + i} Q0 d{start + i}_{j} {r + 1} {v!r} bench\n" for i in range(len(s))
                            for r, (j, v) in enumerate(zip(o[i], s[i]))))
    return qrels_path, run_path


def timed(fn, repeat: int):
    times, out = [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return out, min(times), statistics.median(times)


def flat_inputs(scores, gains, rel, seed: int = 1):
    """The flat form grouped by query (random order within each) and fully shuffled, with
    R and the ideal gains of each query."""
    n_q = scores.shape[0]
    g = torch.Generator().manual_seed(seed)
    within = torch.rand(n_q, DEPTH, generator=g).argsort(1)
    preds = scores.gather(1, within).reshape(-1)
    target = gains[:, :DEPTH].gather(1, within).reshape(-1)
    ids = torch.arange(n_q).repeat_interleave(DEPTH)
    perm = torch.randperm(ids.numel(), generator=g)
    n_relevant = (rel > 0).sum(1)
    ideal = rel.double()
    return (preds, target, ids), (preds[perm], target[perm], ids[perm]), n_relevant, ideal


def report(name: str, best: float, med: float, one: float) -> None:
    ratio = f"{med / one:.2f}x ranx's one measure" if one else ""
    print(f"{name:<62} best {best:8.3f} s  median {med:8.3f} s  {ratio}", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--queries", type=int, default=100_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--files", action="store_true", help="also time reading the TREC files")
    ap.add_argument("--ours-only", action="store_true", help="no ranx, no pytrec_eval (e.g. at 1M queries)")
    args = ap.parse_args()
    torch.set_num_threads(1)
    scores, gains, docs, rel = make(args.queries)
    grouped, shuffled, n_relevant, ideal = flat_inputs(scores, gains, rel)
    files = args.files or not args.ours_only  # ranx and pytrec_eval take their dicts from the read files
    flat = evaluate_scores(grouped[0], grouped[1], OURS, indexes=grouped[2], n_relevant=n_relevant, ideal=ideal,
                           empty="zero")  # trec_eval counts a query without relevant documents as 0
    if files:
        folder = tempfile.mkdtemp()
        t0 = time.perf_counter()
        qrels_path, run_path = write_files(folder, scores, docs, rel)
        print(f"{args.queries} queries x {DEPTH}: files written in {time.perf_counter() - t0:.1f} s", flush=True)
        qrels = read_qrels(qrels_path)
        run = read_run(run_path, docs=qrels.docs)
        ev = evaluate_trec(qrels, run, TREC)
        want = {k: ev.summary()[t] for k, t in zip(OURS, TREC)}
    else:
        want = {k: v.item() for k, v in evaluate_scores(scores, gains[:, :DEPTH], OURS, n_relevant=n_relevant,
                                                         ideal=ideal, empty="zero").items()}
    print("ours: flat evaluate_scores vs evaluate_trec (or dense without files), largest difference: "
          f"{max(abs(flat[k].item() - want[k]) for k in OURS):.1e}", flush=True)
    one = 0.0
    if not args.ours_only:
        import ranx  # after NUMBA_NUM_THREADS

        small_q = dict(list(qrels.to_dict().items())[:50])
        small_r = {q: d for q, d in run.to_dict().items() if q in small_q}
        ranx.evaluate(ranx.Qrels(small_q), ranx.Run(small_r), RANX, threads=1)  # compile
        rq, rr = ranx.Qrels(qrels.to_dict()), ranx.Run(run.to_dict())
        theirs = ranx.evaluate(rq, rr, RANX, threads=1, save_results_in_run=False)
        print("ranx vs ours, largest difference: "
              f"{max(abs(theirs[m] - want[o]) for m, o in zip(RANX, OURS)):.1e}", flush=True)
        singles = []
        for m in RANX:
            _, best, med = timed(lambda: ranx.evaluate(rq, rr, m, threads=1, save_results_in_run=False), args.repeat)
            singles.append(med)
            report(f"ranx evaluate {m}", best, med, 0.0)
        one = statistics.median(singles)
        _, best, med = timed(lambda: ranx.evaluate(rq, rr, RANX, threads=1, save_results_in_run=False), args.repeat)
        report("ranx evaluate, the four at once", best, med, one)
        import pytrec_eval

        qd, rd = qrels.to_dict(), run.to_dict()
        evaluator = pytrec_eval.RelevanceEvaluator(qd, PYTREC)

        def pytrec():
            per = evaluator.evaluate(rd)
            return {m: statistics.fmean(v[m] for v in per.values()) for m in ("map", "ndcg_cut_10")}

        p, best, med = timed(pytrec, args.repeat)
        print(f"pytrec_eval vs ours (map): {abs(p['map'] - want['map']):.1e}", flush=True)
        report("pytrec_eval evaluate (dicts in), the four", best, med, one)
        print(f"peak RSS so far (with ranx's and pytrec_eval's data): "
              f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20:.1f} GiB", flush=True)
    if files:
        _, best, med = timed(lambda: evaluate_trec(qrels, run, TREC), args.repeat)
        report("ours evaluate_trec (read Qrels/Run), the four", best, med, one)
    for name, (p, t, i) in (("grouped by query", grouped), ("fully shuffled", shuffled)):
        _, best, med = timed(lambda: evaluate_scores(p, t, OURS, indexes=i, n_relevant=n_relevant, ideal=ideal),
                             args.repeat)
        report(f"ours evaluate_scores, flat {name}, the four", best, med, one)
    dense_t = gains[:, :DEPTH]
    _, best, med = timed(lambda: evaluate_scores(scores, dense_t, OURS, n_relevant=n_relevant, ideal=ideal),
                         args.repeat)
    report("ours evaluate_scores, dense [Q, 100], the four", best, med, one)
    print(f"peak RSS: {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20:.1f} GiB", flush=True)
    if not args.files:
        return

    def ours_files():
        q = read_qrels(qrels_path)
        return evaluate_trec(q, read_run(run_path, docs=q.docs), TREC)

    _, best, med = timed(ours_files, args.repeat)
    report("ours from files: read_qrels + read_run + evaluate_trec", best, med, one)
    if args.ours_only:
        return

    def ranx_files():
        q = ranx.Qrels.from_file(qrels_path, kind="trec")
        return ranx.evaluate(q, ranx.Run.from_file(run_path, kind="trec"), RANX, threads=1,
                             save_results_in_run=False)

    _, best, med = timed(ranx_files, args.repeat)
    report("ranx from files: Qrels/Run.from_file + evaluate", best, med, one)

    def pytrec_files():
        with open(qrels_path) as fq, open(run_path) as fr:
            q, r = pytrec_eval.parse_qrel(fq), pytrec_eval.parse_run(fr)
        return pytrec_eval.RelevanceEvaluator(q, PYTREC).evaluate(r)

    _, best, med = timed(pytrec_files, args.repeat)
    report("pytrec_eval from files: parse_qrel/parse_run + evaluate", best, med, one)


if __name__ == "__main__":
    main()
