"""The ignite examples run (subprocess, bounded) and print what they promise."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import sklearn  # noqa: F401  (a test dependency)

ROOT = Path(__file__).resolve().parents[3]
METRIC = r"cmc@1 ([0-9.]+) \| map@r ([0-9.]+) \| precision_capped@5 ([0-9.]+)"


def _run(script, *args, timeout=150):
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    env.pop("MASTER_PORT", None)
    proc = subprocess.run([sys.executable, str(ROOT / "examples" / script), *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return proc.stdout


def test_engine_example_and_ddp_example_agree():
    out = _run("ignite_engine.py", "--epochs", "2")
    epochs = re.findall(r"^epoch (\d): loss [0-9.]+ \| " + METRIC + "$", out, flags=re.M)
    assert [e[0] for e in epochs] == ["1", "2"], out
    last = epochs[-1][1:]
    assert all(0.0 <= float(v) <= 1.0 for v in last)
    assert float(last[0]) > 0.9  # cmc@1 of a trained digits embedding

    out = _run("ignite_ddp.py", "--epochs", "2", "--device", "cpu")  # the CPU run compares with the engine's log
    assert "evaluation: 2 processes on cpu, backend gloo" in out
    one = re.findall(r"^1 process: " + METRIC + "$", out, flags=re.M)
    ranks = re.findall(r"^rank (\d)/2 \(271 digits, 541 in all\): " + METRIC + "$", out, flags=re.M)
    assert one == [last], out  # the same training, evaluated in one process
    assert sorted(r[0] for r in ranks) == ["0", "1"], out
    assert all(r[1:] == last for r in ranks), out
    assert "2 processes give the one-process values: True" in out


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device: torch.cuda.is_available() is False")
def test_ddp_example_on_the_gpu_gives_the_one_process_values():
    out = _run("ignite_ddp.py", "--epochs", "2", "--device", "cuda", timeout=300)
    backend = "nccl" if torch.cuda.device_count() >= 2 else "gloo"
    assert f"evaluation: 2 processes on cuda, backend {backend}" in out, out
    assert re.search(r"^1 process on cuda(:\d)?: " + METRIC + "$", out, flags=re.M), out
    assert len(re.findall(r"^rank (\d)/2 \(271 digits, 541 in all\): " + METRIC + "$", out, flags=re.M)) == 2, out
    assert "2 processes give the one-process values: True" in out


def test_ddp_example_refuses_what_the_machine_cannot_do():
    if not torch.cuda.is_available():
        with pytest.raises(AssertionError, match=r"--device cuda: torch.cuda.is_available\(\) is False"):
            _run("ignite_ddp.py", "--device", "cuda", timeout=60)
    if torch.cuda.device_count() < 2:
        with pytest.raises(AssertionError, match=r"--backend nccl needs a GPU per process"):
            _run("ignite_ddp.py", "--backend", "nccl", timeout=60)
    with pytest.raises(AssertionError, match=r"--device must be auto, cpu or cuda; got 'tpu'"):
        _run("ignite_ddp.py", "--device", "tpu", timeout=60)


def test_recommender_example_evaluates_every_epoch_in_both_frameworks():
    """examples/recommender_mf.py: TopKMetrics after every epoch in an ignite Engine and in a
    LightningModule; trained alike (one seed), they log the same values, and the ignite
    metric on the Lightning model's lists gives Lightning's logged values."""
    pytest.importorskip("lightning")
    out = _run("recommender_mf.py", "--epochs", "2", timeout=240)
    keys = ["ndcg@10", "recall@10", "map_capped@10", "coverage@10", "gini@10", "novelty@10", "personalization@10",
            "serendipity@10"]
    values = " \\| ".join(f"{re.escape(k)} ([0-9.]+)" for k in keys)
    ignite = re.findall(r"^ignite epoch (\d): loss [0-9.]+ \| " + values + "$", out, flags=re.M)
    lightning = re.findall(r"^lightning epoch (\d): " + values + "$", out, flags=re.M)
    assert [e[0] for e in ignite] == [e[0] for e in lightning] == ["1", "2"], out
    assert ignite == lightning, out
    assert float(ignite[1][1]) > float(ignite[0][1]) > 0  # ndcg@10 rises with training
    assert all(0.0 <= float(v) <= 1.0 for e in ignite for k, v in zip(keys, e[1:]) if k != "novelty@10")
    assert "ignite on the Lightning model gives the logged values: True" in out, out
