"""Train a small embedding network on scikit-learn's digits with PyTorch-Ignite and
evaluate retrieval on the held-out digits after every epoch with
``ignite_retrieval.EmbeddingMetrics``.

    python examples/ignite_engine.py [--epochs 5]

The network maps the 64 pixels to a 32-d embedding (MLP 64 -> 64 -> 32). The loss is
softmax cross-entropy over a cosine classifier (NormFace: scaled cosine between the
embedding and one learned weight per class), a few lines below. The evaluator's
process function returns a dict with embeddings, labels and dataset indices; the
metric gathers them over the epoch and computes cmc@1, map@r and
precision_capped@5 with every test digit as a query against all the others.
Runs on CPU in a few seconds.
"""
from __future__ import annotations

import argparse
from typing import Dict, Tuple

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from ignite.engine import Engine, Events

from ignite_retrieval import EmbeddingMetrics

METRICS = ["cmc@1", "map@r", "precision_capped@5"]
SEED = 0


def load_digits_split() -> Tuple[TensorDataset, TensorDataset]:
    """Standardised digits, stratified split: 541 test digits (a prime count: a
    DistributedSampler pads it on any number of processes); test items carry their index."""
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    x, y = load_digits(return_X_y=True)
    x_train, x_test, y_train, y_test = train_test_split(x, y, test_size=541, stratify=y, random_state=SEED)
    mean, std = x_train.mean(0), x_train.std(0) + 1e-6
    as_x = lambda a: torch.tensor((a - mean) / std, dtype=torch.float32)
    train = TensorDataset(as_x(x_train), torch.tensor(y_train))
    test = TensorDataset(as_x(x_test), torch.tensor(y_test), torch.arange(len(y_test)))
    return train, test


class Embedder(nn.Module):
    def __init__(self, n_classes: int = 10, dim: int = 32, scale: float = 16.0) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, dim))
        self.classes = nn.Parameter(torch.randn(n_classes, dim))
        self.scale = scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)

    def loss(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """Cross-entropy over scaled cosines to the class weights (NormFace)."""
        cos = F.normalize(self(x), dim=1) @ F.normalize(self.classes, dim=1).T
        return F.cross_entropy(self.scale * cos, y)


def make_evaluator(model: nn.Module, **metric_options) -> Engine:
    """An evaluator whose output is a dict; EmbeddingMetrics reads the keys it knows."""

    @torch.no_grad()
    def step(engine: Engine, batch) -> Dict[str, torch.Tensor]:
        model.eval()
        x, y, idx = batch
        return {"embeddings": model(x), "labels": y, "ids": idx}

    evaluator = Engine(step)
    EmbeddingMetrics(METRICS, **metric_options).attach(evaluator, "retrieval")
    return evaluator


def train(epochs: int = 5, log: bool = True) -> Tuple[nn.Module, TensorDataset, Dict[str, float]]:
    """Train; after each epoch evaluate on the test digits (and print when ``log``).
    Returns the model, the test set and the last epoch's metrics."""
    torch.manual_seed(SEED)
    train_set, test_set = load_digits_split()
    model = Embedder()
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    generator = torch.Generator().manual_seed(SEED)
    train_loader = DataLoader(train_set, batch_size=64, shuffle=True, generator=generator)
    test_loader = DataLoader(test_set, batch_size=128)

    def step(engine: Engine, batch) -> float:
        model.train()
        x, y = batch
        optimizer.zero_grad()
        loss = model.loss(x, y)
        loss.backward()
        optimizer.step()
        return loss.item()

    trainer = Engine(step)
    evaluator = make_evaluator(model)
    last: Dict[str, float] = {}

    @trainer.on(Events.EPOCH_COMPLETED)
    def evaluate(engine: Engine) -> None:
        metrics = evaluator.run(test_loader).metrics
        last.clear()
        last.update({k: metrics[k] for k in METRICS})
        if log:
            values = " | ".join(f"{k} {metrics[k]:.4f}" for k in METRICS)
            print(f"epoch {engine.state.epoch}: loss {engine.state.output:.4f} | {values}", flush=True)

    trainer.run(train_loader, max_epochs=epochs)
    return model, test_set, last


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--epochs", type=int, default=5)
    args = parser.parse_args()
    train(args.epochs)


if __name__ == "__main__":
    main()
