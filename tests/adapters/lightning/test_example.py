"""examples/lightning_module.py: Trainer on CPU with 1 and with 2 processes (strategy="ddp")
logs the same EmbeddingMetrics values (DistributedSampler padding removed by ids)."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import torch

import sklearn  # noqa: F401  (a test dependency)
import lightning  # noqa: F401  (a test dependency)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
EXAMPLE = os.path.join(ROOT, "examples", "lightning_module.py")
TIMEOUT_S = 300


def run_example(devices: int, out, accelerator: str = "cpu") -> dict:
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONWARNINGS="ignore")
    try:
        proc = subprocess.run([sys.executable, EXAMPLE, "--accelerator", accelerator, "--devices", str(devices),
                               "--epochs", "2", "--out", str(out)],
                              cwd=ROOT, env=env, capture_output=True, text=True, timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"the example with {devices} process(es) did not finish in {TIMEOUT_S} s\n{exc.stderr}")
    assert proc.returncode == 0, proc.stderr[-4000:]
    with open(out) as f:
        return json.load(f)


def test_one_and_two_processes_log_the_same_values(tmp_path):
    one_run, two_run = run_example(1, tmp_path / "one.json"), run_example(2, tmp_path / "two.json")
    assert one_run["accelerator"] == two_run["accelerator"] == "cpu"
    one, two = one_run["history"], two_run["history"]
    assert len(one) == len(two) == 2
    for a, b in zip(one, two):
        assert a["n_queries"] == b["n_queries"] == 357  # 2 x 179 rows gathered, the padding repeat dropped
        assert set(a) == set(b) and {"cmc@1", "map@r", "precision@5", "ndcg@10"} <= set(a)
        for key in a:
            assert a[key] == pytest.approx(b[key], abs=1e-12), key
    assert one[-1]["cmc@1"] > 0.9  # it learned something



GPUS = torch.cuda.device_count() if torch.cuda.is_available() else 0


@pytest.mark.skipif(GPUS < 1, reason="no CUDA device: torch.cuda.is_available() is False")
def test_gpu_run_learns_and_stays_close_to_cpu(tmp_path):
    gpu = run_example(1, tmp_path / "gpu.json", "gpu")
    cpu = run_example(1, tmp_path / "cpu.json", "cpu")["history"]
    assert gpu["accelerator"] == "gpu" and len(gpu["history"]) == len(cpu) == 2
    for a, b in zip(gpu["history"], cpu):
        assert a["n_queries"] == b["n_queries"] == 357
        for key in ("cmc@1", "map@r", "precision@5", "ndcg@10"):  # float64 on both: a flipped rank at most
            assert a[key] == pytest.approx(b[key], abs=0.01), key
    assert gpu["history"][-1]["cmc@1"] > 0.9


@pytest.mark.skipif(GPUS < 2, reason=f"DDP over NCCL needs 2 CUDA devices; torch sees {GPUS}")
def test_one_and_two_gpus_log_the_same_values(tmp_path):
    one = run_example(1, tmp_path / "one.json", "gpu")["history"]
    two = run_example(2, tmp_path / "two.json", "gpu")["history"]
    for a, b in zip(one, two):
        assert a["n_queries"] == b["n_queries"] == 357
        for key in a:
            assert a[key] == pytest.approx(b[key], abs=1e-12), key


def test_asking_for_more_gpus_than_present_is_a_clear_error():
    devices = 1
    while devices <= GPUS:  # more than present, and a divisor of the global batch (32)
        devices *= 2
    proc = subprocess.run([sys.executable, EXAMPLE, "--accelerator", "gpu", "--devices", str(devices)], cwd=ROOT,
                          capture_output=True, text=True, timeout=TIMEOUT_S)
    assert proc.returncode != 0
    assert f"--accelerator gpu with --devices {devices}: torch sees {GPUS} GPU(s)" in proc.stderr
