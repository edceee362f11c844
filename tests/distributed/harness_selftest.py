"""Scenarios that exercise the harness itself (``test_harness.py``): values and
errors come back per rank; a rank that dies or hangs stops the group."""
from __future__ import annotations

import os
import sys
import time

import torch
import torch.distributed as dist

WORLDS = (2, 3)


def _identity(rank: int, world: int):
    total = torch.tensor([rank])
    dist.all_reduce(total)
    return {"rank": rank, "world": world, "dist": (dist.get_rank(), dist.get_world_size()), "sum": int(total)}


def _raises_on_rank_1(rank: int, world: int):
    if rank == 1:
        raise KeyError("raised on purpose on rank 1")
    return rank


def _crash_on_rank_1(rank: int, world: int):
    if rank == 1:
        print("rank 1 exits on purpose", file=sys.stderr, flush=True)
        os._exit(3)
    dist.barrier()  # waits for rank 1, which never comes


def _hang(rank: int, world: int):
    print(f"rank {rank} sleeps on purpose", file=sys.stderr, flush=True)
    time.sleep(3600)


SCENARIOS = {"identity": _identity, "raises_on_rank_1": _raises_on_rank_1}
CRASH = {"crash_on_rank_1": _crash_on_rank_1}
HANG = {"hang": _hang}
