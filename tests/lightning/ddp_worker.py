"""Run every scenario of ``ddp_cases`` on 2 gloo processes; each rank saves its results.

Usage (from the repository root): ``python -m tests.lightning.ddp_worker OUT_DIR [SCENARIO ...]``.
Collectives time out after ``TIMEOUT_S`` (a hang then fails instead of waiting);
the test also runs this under a subprocess timeout.
"""
from __future__ import annotations

import datetime
import os
import socket
import sys
import traceback

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

TIMEOUT_S = 60


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _run(rank: int, world: int, port: int, out_dir: str, names) -> None:
    torch.set_num_threads(1)
    from tests.lightning.ddp_cases import apply, plain, scenarios

    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=TIMEOUT_S))
    results = {}
    try:
        for name, sc in scenarios().items():
            if names and name not in names:
                continue
            kwargs = {}
            if sc.local:
                kwargs["sync_on_compute"] = False
            if sc.with_group:
                kwargs["process_group"] = dist.new_group(list(range(world)))
            try:
                metric = sc.make(**kwargs)
                outs = apply(metric, sc.feeds[rank])
                results[name] = {"compute": plain(metric.compute())}
                if sc.record_forward:
                    results[name]["forward"] = plain(outs)
            except Exception:  # report and go on: every rank fails the same way, so none waits
                results[name] = {"error": traceback.format_exc()}
            dist.barrier()
    finally:
        torch.save(results, os.path.join(out_dir, f"rank{rank}.pt"))
        dist.destroy_process_group()


def main(argv) -> None:
    out_dir, names = argv[0], set(argv[1:])
    os.makedirs(out_dir, exist_ok=True)
    world = 2
    mp.spawn(_run, args=(world, _free_port(), out_dir, names), nprocs=world, join=True)


if __name__ == "__main__":
    main(sys.argv[1:])
