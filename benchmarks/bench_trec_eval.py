"""Speed of ``retrieval_core.trec.evaluate_trec`` (trec_eval's official set + ndcg_cut) on a
synthetic run, and of pytrec_eval on the same qrels and run (when installed), after reading.

Each query has ``--depth`` run entries (scores with ties) drawn from a pool of 2 x depth
documents, of which 200 are judged (rel 0..3, a tenth unjudged -1). The values of the two
are checked to agree (map, P_10, ndcg_cut_10, bpref) before timing.

With ``--all-trec``: ``-m all_trec`` (every trec_eval measure without preference files) against
pytrec_eval with every measure it supports (``pytrec_eval.supported_measures``), and the largest
difference over every output name both print (ours with ``iprec_rule="v9"``: pytrec_eval computes
``iprec_at_recall`` and ``11pt_avg`` as trec_eval 9 does; the same work as the default rule).

Usage::

    .venv/bin/python benchmarks/bench_trec_eval.py [--queries 1000 --depth 1000 --repeat 3] [--all-trec]
"""
from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

from retrieval_core.trec import evaluate_trec, qrels_from_dict, run_from_dict

MEASURES = ["official", "ndcg_cut"]


def make(n_q: int, depth: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    qrels, run = {}, {}
    for q in range(n_q):
        pool = [f"D{q}-{i}" for i in range(2 * depth)]
        judged = rng.choice(len(pool), 200, replace=False)
        rels = rng.choice([-1, 0, 0, 0, 0, 1, 1, 2, 3, 0], 200)
        qrels[str(q)] = {pool[j]: int(r) for j, r in zip(judged, rels)}
        ret = rng.choice(len(pool), depth, replace=False)
        scores = np.round(rng.random(depth), 3)  # ties
        run[str(q)] = {pool[j]: float(s) for j, s in zip(ret, scores)}
    return qrels, run


def timed(fn, repeat: int):
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return out, min(times), statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--queries", type=int, default=1000)
    ap.add_argument("--depth", type=int, default=1000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--all-trec", action="store_true", help="-m all_trec against pytrec_eval's full set")
    args = ap.parse_args()
    measures = ["all_trec"] if args.all_trec else MEASURES
    qrels_d, run_d = make(args.queries, args.depth)
    qrels = qrels_from_dict(qrels_d)
    run = run_from_dict(run_d, docs=qrels.docs)
    rule = "v9" if args.all_trec else "lround"  # pytrec_eval is trec_eval 9: its iprec_at_recall and 11pt_avg
    ev, best, med = timed(lambda: evaluate_trec(qrels, run, measures, iprec_rule=rule), args.repeat)
    n = args.queries * args.depth
    print(f"evaluate_trec ({', '.join(measures)}): {args.queries} queries x {args.depth}: best {best:.3f} s, "
          f"median {med:.3f} s ({n / best / 1e6:.2f} M entries/s)")
    try:
        import pytrec_eval
    except ImportError:
        return
    names = {"map", "P", "ndcg_cut", "bpref", "recip_rank", "Rprec", "iprec_at_recall", "gm_map", "num_ret",
             "num_rel", "num_rel_ret", "num_q"}
    if args.all_trec:
        names = set(pytrec_eval.supported_measures)
    evaluator = pytrec_eval.RelevanceEvaluator(qrels_d, names)
    theirs, best_p, med_p = timed(lambda: evaluator.evaluate(run_d), args.repeat)
    ours = ev.per_query()
    compared = ("map", "P_10", "ndcg_cut_10", "bpref")
    if args.all_trec:
        first_ours, first_theirs = next(iter(ours.values())), next(iter(theirs.values()))
        compared = sorted(m for m in set(first_ours) & set(first_theirs)
                          if isinstance(first_theirs[m], float) and isinstance(first_ours[m], float))
    worst = max(abs(ours[q][m] - theirs[q][m]) for q in theirs for m in compared)
    print(f"pytrec_eval ({len(names)} measures, dicts in): best {best_p:.3f} s, median {med_p:.3f} s; "
          f"largest difference over {len(compared)} output names: {worst:.2e}")


if __name__ == "__main__":
    main()
