"""Evaluate saved embeddings across processes, the work divided between them.

    torchrun --nproc_per_node 2 examples/torchrun_eval.py EMB LABELS [--gallery G --gallery-labels GL]
        [--query-ids QI --gallery-ids GI] [--metrics cmc@1 map@r ...] [--distance cosine]
        [--shard-gallery] [--json]
    python examples/torchrun_eval.py EMB LABELS ...   # one process: the same table

Files as the CLI (``retrieval-metrics eval``) reads them: ``.pt``, ``.npy`` or
``.npz[:name]``. Each process reads only its contiguous share of the rows (memory
mapped where the format allows: ``.npy``, and ``.pt`` saved by torch >= 2.1) and
calls ``retrieval_core.distributed.evaluate_embeddings_across_ranks``: each process evaluates
its own queries; with ``--shard-gallery`` the gallery rows stay with the process
that read them and only query chunks and candidate lists travel. Rank 0 prints
the table of ``retrieval-metrics eval`` (or JSON with ``--json``); every rank
holds the same results.
"""
from __future__ import annotations

import argparse
import os
import sys
from typing import Optional

import torch
import torch.distributed as dist

from retrieval_core import distributed as rd
from retrieval_core.cli import EVAL_METRICS, load_tensor, print_results


def load_rows(spec: str, rank: int, world: int) -> torch.Tensor:
    """This rank's contiguous share of the rows of a saved tensor (rank r of n gets
    rows ``[N r / n, N (r + 1) / n)``), reading no more than it needs where it can."""
    path = spec.partition(":")[0] if spec.count(":") == 1 else spec
    data = None
    if path.endswith(".npy"):
        import numpy as np

        data = np.load(path, mmap_mode="r")
    elif path.endswith(".pt"):
        try:
            data = torch.load(path, map_location="cpu", weights_only=True, mmap=True)
        except RuntimeError:  # an old-format file cannot be mapped: read whole
            data = None
        if not isinstance(data, torch.Tensor):
            data = None  # load_tensor says what the file holds
    if data is None:
        data = load_tensor(spec)
    n = data.shape[0]
    part = data[n * rank // world: n * (rank + 1) // world]
    if isinstance(part, torch.Tensor):
        return part.clone()
    import numpy as np

    return torch.tensor(np.asarray(part))  # a copy: torch warns about a read-only (memory-mapped) array


def main(argv: Optional[list] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("query", help="query embeddings [Q, D]")
    parser.add_argument("query_labels", help="query labels [Q] (or multi-hot [Q, C])")
    parser.add_argument("--gallery", help="gallery embeddings [G, D] (default: the query set, self excluded)")
    parser.add_argument("--gallery-labels")
    parser.add_argument("--query-ids")
    parser.add_argument("--gallery-ids")
    parser.add_argument("--distance", default="cosine")
    parser.add_argument("--memory-budget", type=int, help="bytes of scratch per query chunk")
    parser.add_argument("--metrics", nargs="+", default=EVAL_METRICS, help="metric keys, e.g. cmc@1 map@r")
    parser.add_argument("--shard-gallery", action="store_true", help="keep each gallery row on the rank that read it")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    args = parser.parse_args(argv)

    distributed = "WORLD_SIZE" in os.environ and int(os.environ["WORLD_SIZE"]) > 1
    if distributed:
        dist.init_process_group("gloo")  # CPU tensors; use nccl with CUDA tensors
    try:
        rank, world = rd.rank_of(), rd.world_size()
        torch.set_num_threads(max(1, (os.cpu_count() or 1) // world))
        inputs = {name: load_rows(getattr(args, name), rank, world)
                  for name in ("query", "query_labels", "gallery", "gallery_labels", "query_ids", "gallery_ids")
                  if getattr(args, name)}
        results = rd.evaluate_embeddings_across_ranks(
            inputs.pop("query"), inputs.pop("query_labels"), args.metrics, distance=args.distance,
            memory_budget=args.memory_budget, shard_gallery=args.shard_gallery, **inputs)
        if rank == 0:
            print_results({args.query: results}, args.metrics, as_json=args.json)
    finally:
        if distributed:
            dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
