"""Run every case of ``scenarios.py`` on ``n`` processes (gloo, ``idist.Parallel``)
and write each rank's results to ``OUT/rank{r}.json``.

    python -m tests.distributed.worker N PORT OUT

The process group has a 60 s timeout; the caller also bounds the whole run.
"""
from __future__ import annotations

import json
import os
import sys
from datetime import timedelta

import ignite.distributed as idist


def _rank_main(local_rank: int, out_dir: str) -> None:
    from tests.distributed.scenarios import run_cases

    rank, world = idist.get_rank(), idist.get_world_size()
    results = run_cases(rank, world)
    results["_world"] = world
    with open(os.path.join(out_dir, f"rank{rank}.json"), "w") as f:
        json.dump(results, f)


def main(argv) -> None:
    n, port, out_dir = int(argv[0]), int(argv[1]), argv[2]
    with idist.Parallel(backend="gloo", nproc_per_node=n, master_port=port, timeout=timedelta(seconds=60)) as parallel:
        parallel.run(_rank_main, out_dir)


if __name__ == "__main__":
    main(sys.argv[1:])
