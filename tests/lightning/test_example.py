"""examples/lightning_module.py: Trainer on CPU with 1 and with 2 processes (strategy="ddp")
logs the same EmbeddingMetrics values (DistributedSampler padding removed by ids)."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

import sklearn  # noqa: F401  (a test dependency)
import lightning  # noqa: F401  (a test dependency)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EXAMPLE = os.path.join(ROOT, "examples", "lightning_module.py")
TIMEOUT_S = 300


def run_example(devices: int, out) -> dict:
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONWARNINGS="ignore")
    try:
        proc = subprocess.run([sys.executable, EXAMPLE, "--devices", str(devices), "--epochs", "2", "--out", str(out)],
                              cwd=ROOT, env=env, capture_output=True, text=True, timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"the example with {devices} process(es) did not finish in {TIMEOUT_S} s\n{exc.stderr}")
    assert proc.returncode == 0, proc.stderr[-4000:]
    with open(out) as f:
        return json.load(f)


def test_one_and_two_processes_log_the_same_values(tmp_path):
    one = run_example(1, tmp_path / "one.json")["history"]
    two = run_example(2, tmp_path / "two.json")["history"]
    assert len(one) == len(two) == 2
    for a, b in zip(one, two):
        assert a["n_queries"] == b["n_queries"] == 357  # 2 x 179 rows gathered, the padding repeat dropped
        assert set(a) == set(b) and {"cmc@1", "map@r", "precision@5", "ndcg@10"} <= set(a)
        for key in a:
            assert a[key] == pytest.approx(b[key], abs=1e-12), key
    assert one[-1]["cmc@1"] > 0.9  # it learned something
