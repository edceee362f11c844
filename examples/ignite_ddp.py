"""The evaluation of ``ignite_engine.py`` on 2 processes (``ignite.distributed``),
printing the same numbers as one process.

    python examples/ignite_ddp.py [--nproc 2] [--epochs 5] [--device auto|cpu|cuda] [--backend auto|gloo|nccl]

Device: ``auto`` (default) evaluates on the GPU when torch sees one, else on CPU.
Backend: ``auto`` takes NCCL when every process has a GPU of its own (2+ GPUs, at
least ``--nproc``), gloo otherwise (CPU, or processes sharing one GPU). On CPU the
run is exactly the CPU example: gloo, float32, the one-process values of training.
On a GPU each process embeds its digits on its GPU in float64 (so that different
batch shapes cannot move a ranking) and the one-process reference is the same
evaluation in this process on the GPU; under gloo the metric keeps its state on CPU
(gloo gathers CPU tensors), under NCCL on each process's GPU.

The model is trained once, in this process (``ignite_engine.train``). Each of the
``--nproc`` processes then evaluates its share of the test digits: a
``DistributedSampler`` splits them and, where the count does not divide, pads with
repeated digits. The evaluator's output carries each digit's dataset index as
``ids``, so ``EmbeddingMetrics`` gathers every process's embeddings (uneven sizes
allowed), drops the repeats and evaluates the whole test set on every rank.
"""
from __future__ import annotations

import argparse
import copy
import json
import math
import os
import socket
import sys
import tempfile
from typing import Dict

import torch
from torch import nn
from torch.utils.data import DataLoader, DistributedSampler

import ignite.distributed as idist
from ignite.engine import Engine

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ignite_engine import METRICS, Embedder, make_evaluator, train  # noqa: E402

from ignite_retrieval import EmbeddingMetrics  # noqa: E402


def pick_device(name: str) -> torch.device:
    """``auto``: the GPU when torch sees one, else CPU; ``cuda`` without a GPU is an error."""
    if name not in ("auto", "cpu", "cuda"):
        raise SystemExit(f"--device must be auto, cpu or cuda; got {name!r}")
    if name == "cuda" and not torch.cuda.is_available():
        raise SystemExit("--device cuda: torch.cuda.is_available() is False")
    if name == "auto":
        name = "cuda" if torch.cuda.is_available() else "cpu"
    return torch.device(name)


def pick_backend(name: str, device: torch.device, nproc: int) -> str:
    """``auto``: NCCL when every process gets a GPU of its own (2+ GPUs), else gloo."""
    if name not in ("auto", "gloo", "nccl"):
        raise SystemExit(f"--backend must be auto, gloo or nccl; got {name!r}")
    own_gpu = device.type == "cuda" and torch.cuda.device_count() >= max(2, nproc)
    if name == "nccl" and not own_gpu:
        raise SystemExit(f"--backend nccl needs a GPU per process: {nproc} processes, "
                         f"{torch.cuda.device_count() if device.type == 'cuda' else 0} GPUs in use")
    if name == "auto":
        name = "nccl" if own_gpu else "gloo"
    return name


def make_device_evaluator(model: nn.Module, device: torch.device, metric_device: torch.device) -> Engine:
    """The evaluator of ``ignite_engine.make_evaluator`` on ``device``, in float64; the
    metric keeps (and gathers) its state on ``metric_device``."""
    model = model.to(device=device, dtype=torch.float64)

    @torch.no_grad()
    def step(engine: Engine, batch) -> Dict[str, torch.Tensor]:
        model.eval()
        x, y, idx = (t.to(device, non_blocking=True) for t in batch)
        return {"embeddings": model(x.to(torch.float64)), "labels": y, "ids": idx}

    evaluator = Engine(step)
    EmbeddingMetrics(METRICS, device=metric_device).attach(evaluator, "retrieval")
    return evaluator


def _evaluate_rank(local_rank: int, state_dict, test_set, out_dir: str, device_type: str = "cpu",
                   backend: str = "gloo") -> None:
    rank, world = idist.get_rank(), idist.get_world_size()
    model = Embedder()
    model.load_state_dict(state_dict)
    sampler = DistributedSampler(test_set, num_replicas=world, rank=rank, shuffle=False)
    loader = DataLoader(test_set, batch_size=64, sampler=sampler)
    if device_type == "cpu":
        metrics = make_evaluator(model).run(loader).metrics
    else:
        device = torch.device("cuda", local_rank % torch.cuda.device_count())
        torch.cuda.set_device(device)
        metric_device = device if backend == "nccl" else torch.device("cpu")
        metrics = make_device_evaluator(model, device, metric_device).run(loader).metrics
    values = {k: metrics[k] for k in METRICS}
    # the parent prints every rank's line: ranks printing at once could interleave them
    with open(os.path.join(out_dir, f"rank{rank}.json"), "w") as f:
        json.dump({"values": values, "digits": len(sampler)}, f)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nproc", type=int, default=2)
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--device", default="auto", help="auto (GPU when present), cpu or cuda")
    parser.add_argument("--backend", default="auto", help="auto (NCCL with a GPU per process, else gloo), gloo or nccl")
    args = parser.parse_args()
    device = pick_device(args.device)
    backend = pick_backend(args.backend, device, args.nproc)

    model, test_set, one_process = train(args.epochs, log=False)  # trained on CPU
    print("1 process: " + " | ".join(f"{k} {one_process[k]:.4f}" for k in METRICS), flush=True)
    reference = one_process
    if device.type == "cuda":  # the same evaluation as the ranks', in one process
        loader = DataLoader(test_set, batch_size=64)
        reference = make_device_evaluator(copy.deepcopy(model), device, device).run(loader).metrics
        print(f"1 process on {device}: " + " | ".join(f"{k} {reference[k]:.4f}" for k in METRICS), flush=True)
    print(f"evaluation: {args.nproc} processes on {device.type}, backend {backend}", flush=True)
    with tempfile.TemporaryDirectory() as out_dir:
        with idist.Parallel(backend=backend, nproc_per_node=args.nproc, master_port=_free_port()) as parallel:
            parallel.run(_evaluate_rank, model.state_dict(), test_set, out_dir, device.type, backend)
        ranks = []
        for r in range(args.nproc):
            with open(os.path.join(out_dir, f"rank{r}.json")) as f:
                saved = json.load(f)
            shown = " | ".join(f"{k} {saved['values'][k]:.4f}" for k in METRICS)
            print(f"rank {r}/{args.nproc} ({saved['digits']} digits, {len(test_set)} in all): {shown}", flush=True)
            ranks.append(saved["values"])
    same = all(math.isclose(r[k], reference[k], abs_tol=1e-9) for r in ranks for k in METRICS)
    print(f"{args.nproc} processes give the one-process values: {same}", flush=True)
    if not same:
        sys.exit(1)


if __name__ == "__main__":
    main()
