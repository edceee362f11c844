"""benchmarks/bench_distributed.py runs a small size end to end: one process and
2 processes (gathered and sharded gallery) give the same values, and the JSON holds
the timings and peaks."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "bench_distributed.py"


def test_small_run_prints_the_comparison_and_writes_json(tmp_path):
    out = tmp_path / "dist.json"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT / "core"), str(ROOT), os.environ.get("PYTHONPATH", "")]))
    for k in ("MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE"):
        env.pop(k, None)
    proc = subprocess.run([sys.executable, str(SCRIPT), "--n", "3000", "--repeat", "1", "--json", str(out)], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "2 processes, gathered" in proc.stdout and "2 processes, sharded" in proc.stdout
    data = json.loads(out.read_text())
    assert data["n"] == 3000 and data["world"] == 2
    for mode in ("gathered", "sharded"):
        m = data["modes"][mode]
        assert m["same_values"] is True, proc.stdout
        assert m["seconds"] > 0 and len(m["peaks"]) == 2 and len(m["cpu_per_rank"]) == 2
    assert data["shard_bytes"] == 1500 * 128 * 4
