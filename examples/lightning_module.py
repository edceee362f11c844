"""A LightningModule that learns embeddings of scikit-learn's digits and logs
``EmbeddingMetrics`` in validation.

Run on one or two CPU processes; the logged values are the same::

    .venv/bin/python examples/lightning_module.py --devices 1
    .venv/bin/python examples/lightning_module.py --devices 2   # strategy="ddp", gloo

On GPUs: ``--accelerator gpu`` (``auto``, the default, takes the GPU when torch sees
at least ``--devices`` of them, else CPU); 2+ GPUs run DDP over NCCL, CPU processes
over gloo (the Lightning defaults for each accelerator)::

    .venv/bin/python examples/lightning_module.py --accelerator gpu --devices 2   # NCCL

Why they agree:

* validation: every sample comes with its index as ``ids``; DistributedSampler
  pads the 357 validation samples to 2 x 179 by repeating one, and
  ``EmbeddingMetrics`` drops repeated ids after gathering, so each rank's
  ``compute()`` sees exactly the 357 samples, in id order;
* training is set up to be the same computation on both: a per-sample loss
  (cross-entropy of a linear head on the embedding); the module makes its own
  DistributedSampler (``use_distributed_sampler=False``) with the same seed on 1
  or 2 processes, so each epoch's permutation is the same and the 2 x 16 samples
  of a step are the 32 of the one-process step; DDP averages the gradients;
  float64 weights (``precision="64-true"``) so that the different summation order
  does not move a ranking.

Writes the validation values of every epoch to ``--output`` (JSON) from rank 0.
"""
from __future__ import annotations

import argparse
import json
import os
import sys

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset, DistributedSampler

import lightning as L

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # run from a checkout

from lightning_retrieval import EmbeddingMetrics  # noqa: E402

KEYS = ["cmc@1", "map@r", "precision@5", "ndcg@10"]
N_TRAIN = 1440  # divisible by the global batch (32): no padding in training
GLOBAL_BATCH = 32


class Digits(Dataset):
    """(image [64] float, label, sample index) of sklearn's digits, in a fixed random order."""

    def __init__(self, part: str, seed: int = 0):
        from sklearn.datasets import load_digits

        data = load_digits()
        order = torch.randperm(len(data.target), generator=torch.Generator().manual_seed(seed))
        rows = order[:N_TRAIN] if part == "train" else order[N_TRAIN:]
        self.x = torch.as_tensor(data.data, dtype=torch.float64)[rows] / 16.0
        self.y = torch.as_tensor(data.target, dtype=torch.int64)[rows]
        self.ids = rows  # the sample's index in the whole data set

    def __len__(self) -> int:
        return len(self.y)

    def __getitem__(self, i):
        return self.x[i], self.y[i], self.ids[i]


class DigitEmbedder(L.LightningModule):
    def __init__(self, dim: int = 16, lr: float = 0.05, seed: int = 0):
        super().__init__()
        self.save_hyperparameters()
        self.net = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, dim))
        self.head = nn.Linear(dim, 10)
        # the gallery is the validation set itself; an item never retrieves itself
        self.val_metrics = EmbeddingMetrics(KEYS, distance="cosine")
        self.history = []

    def forward(self, x):
        return self.net(x)

    def training_step(self, batch, batch_idx):
        x, y, _ = batch
        loss = nn.functional.cross_entropy(self.head(self(x)), y)
        self.log("train/loss", loss)
        return loss

    def validation_step(self, batch, batch_idx):
        x, y, ids = batch
        self.val_metrics.update(self(x), y, ids=ids)

    def on_validation_epoch_end(self):
        values = self.val_metrics.compute()  # gathered over ranks, repeats dropped by id
        # already the same on every rank: no sync_dist needed (Lightning's hint about it does not apply)
        self.log_dict({f"val/{k}": v for k, v in values.items()})
        self.history.append({"epoch": self.current_epoch, "n_queries": int(values.n_queries),
                             **{k: float(v) for k, v in values.items()}})
        self.val_metrics.reset()

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=self.hparams.lr, momentum=0.9)

    def _loader(self, part: str, shuffle: bool) -> DataLoader:
        world = self.trainer.world_size
        data = Digits(part, self.hparams.seed)
        sampler = DistributedSampler(data, num_replicas=world, rank=self.global_rank, shuffle=shuffle,
                                     seed=self.hparams.seed)  # pads to a multiple of world (validation: 357)
        return DataLoader(data, batch_size=GLOBAL_BATCH // world, sampler=sampler)

    def train_dataloader(self):
        return self._loader("train", shuffle=True)

    def val_dataloader(self):
        return self._loader("val", shuffle=False)


def pick_accelerator(name: str, devices: int) -> str:
    """``auto``: ``"gpu"`` when torch sees at least ``devices`` GPUs, else ``"cpu"``."""
    if name not in ("auto", "cpu", "gpu", "cuda"):
        raise SystemExit(f"--accelerator must be auto, cpu or gpu; got {name!r}")
    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if name in ("gpu", "cuda") and gpus < devices:
        raise SystemExit(f"--accelerator gpu with --devices {devices}: torch sees {gpus} GPU(s)")
    if name == "auto":
        return "gpu" if gpus >= devices else "cpu"
    return "gpu" if name == "cuda" else name


def main(argv=None) -> list:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0].replace("\n", " "))
    ap.add_argument("--accelerator", "--device", default="auto",
                    help="auto (GPU when at least --devices of them are present), cpu or gpu")
    ap.add_argument("--devices", type=int, default=1)
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--output", "--out", dest="out",
                    help="write the validation values of every epoch here (JSON; --out: the same)")
    args = ap.parse_args(argv)
    if GLOBAL_BATCH % args.devices:
        raise SystemExit(f"--devices must divide the global batch of {GLOBAL_BATCH}")
    accelerator = pick_accelerator(args.accelerator, args.devices)
    if accelerator == "gpu":  # deterministic cuBLAS (deterministic=True below needs it)
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")

    torch.set_num_threads(1)
    L.seed_everything(args.seed, verbose=False)
    model = DigitEmbedder(seed=args.seed)
    trainer = L.Trainer(
        accelerator=accelerator, devices=args.devices, strategy="ddp" if args.devices > 1 else "auto",
        max_epochs=args.epochs, precision="64-true", use_distributed_sampler=False, num_sanity_val_steps=0,
        logger=False, enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
        # CPU: fully deterministic; GPU: warn where an op has no deterministic CUDA kernel
        deterministic=True if accelerator == "cpu" else "warn",
    )
    trainer.fit(model)
    if trainer.is_global_zero:
        print(f"accelerator {accelerator}, {args.devices} device(s)"
              + (f", DDP backend {trainer.strategy.process_group_backend}" if args.devices > 1 else ""))
        for row in model.history:
            print(" ".join(f"{k}={v:.6f}" if isinstance(v, float) else f"{k}={v}" for k, v in row.items()))
        if args.out:
            with open(args.out, "w") as f:
                json.dump({"accelerator": accelerator, "devices": args.devices, "history": model.history}, f, indent=1)
    return model.history


if __name__ == "__main__":
    main()
