"""The evaluation of ``ignite_engine.py`` on 2 processes (``ignite.distributed``,
gloo on CPU), printing the same numbers as one process.

    python examples/ignite_ddp.py [--nproc 2] [--epochs 5]

The model is trained once, in this process (``ignite_engine.train``). Each of the
``--nproc`` processes then evaluates its share of the test digits: a
``DistributedSampler`` splits them and, where the count does not divide, pads with
repeated digits. The evaluator's output carries each digit's dataset index as
``ids``, so ``EmbeddingMetrics`` gathers every process's embeddings (uneven sizes
allowed), drops the repeats and evaluates the whole test set on every rank.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import socket
import sys
import tempfile

from torch.utils.data import DataLoader, DistributedSampler

import ignite.distributed as idist

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ignite_engine import METRICS, Embedder, make_evaluator, train  # noqa: E402


def _evaluate_rank(local_rank: int, state_dict, test_set, out_dir: str) -> None:
    rank, world = idist.get_rank(), idist.get_world_size()
    model = Embedder()
    model.load_state_dict(state_dict)
    sampler = DistributedSampler(test_set, num_replicas=world, rank=rank, shuffle=False)
    loader = DataLoader(test_set, batch_size=64, sampler=sampler)
    metrics = make_evaluator(model).run(loader).metrics
    values = {k: metrics[k] for k in METRICS}
    shown = " | ".join(f"{k} {values[k]:.4f}" for k in METRICS)
    print(f"rank {rank}/{world} ({len(sampler)} digits, {len(test_set)} in all): {shown}", flush=True)
    with open(os.path.join(out_dir, f"rank{rank}.json"), "w") as f:
        json.dump(values, f)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nproc", type=int, default=2)
    parser.add_argument("--epochs", type=int, default=5)
    args = parser.parse_args()

    model, test_set, one_process = train(args.epochs, log=False)
    print("1 process: " + " | ".join(f"{k} {one_process[k]:.4f}" for k in METRICS), flush=True)
    with tempfile.TemporaryDirectory() as out_dir:
        with idist.Parallel(backend="gloo", nproc_per_node=args.nproc, master_port=_free_port()) as parallel:
            parallel.run(_evaluate_rank, model.state_dict(), test_set, out_dir)
        ranks = [json.load(open(os.path.join(out_dir, f"rank{r}.json"))) for r in range(args.nproc)]
    same = all(math.isclose(r[k], one_process[k], abs_tol=1e-9) for r in ranks for k in METRICS)
    print(f"{args.nproc} processes give the one-process values: {same}", flush=True)
    if not same:
        sys.exit(1)


if __name__ == "__main__":
    main()
