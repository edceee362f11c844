"""benchmarks/bench_gpu.py runs its smoke sizes on CPU and writes its table and JSON."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "bench_gpu.py"


def _run(*args, timeout=300):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT / "core"), str(ROOT), os.environ.get("PYTHONPATH", "")]))
    return subprocess.run([sys.executable, str(SCRIPT), *args], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=timeout)


def test_quick_run_on_cpu_prints_the_table_and_writes_json(tmp_path):
    out = tmp_path / "gpu.json"
    proc = _run("--quick", "--only", "dense_topk,dense_whole,flat_shuffled", "--json", str(out))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "| workload | size | reference |" in proc.stdout
    data = json.loads(out.read_text())
    assert [r["workload"] for r in data["rows"]] == ["dense_topk", "dense_topk", "dense_whole", "flat_shuffled"]
    assert all(r["ours_s"] > 0 and r["reference_s"] > 0 and r["ours_extra_peak_bytes"] is None for r in data["rows"])
    assert data["device"].startswith("device cpu; sizes: free_memory None, memory_budget 268435456")


def test_bad_options_are_clear_errors():
    proc = _run("--only", "dense,flat")
    assert proc.returncode != 0 and "--only: unknown workload(s) dense, flat; choose from" in proc.stderr
    if not torch.cuda.is_available():
        proc = _run("--device", "cuda")
        assert proc.returncode != 0 and "--device cuda: torch.cuda.is_available() is False" in proc.stderr
