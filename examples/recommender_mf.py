"""Train a small matrix-factorisation recommender on generated interactions and evaluate
it after every epoch with ``TopKMetrics``, in PyTorch-Ignite and in Lightning.

    python examples/recommender_mf.py [--epochs 3] [--framework both|ignite|lightning]

The interactions are generated from hidden user and item factors with a popularity
bias; each user's interactions are split into training items (the history, excluded
from the recommendations) and held-out items (the truth). The model is a dot product of
learned user and item embeddings trained with the BPR loss (a seen item scored above a
sampled one). Every epoch each user gets the top 10 unseen items and the metrics
compare the lists with the held-out items: accuracy (ndcg@10, recall@10,
map_capped@10) and beyond accuracy (coverage@10, gini@10, novelty@10,
personalization@10, serendipity@10; an item's genre is its strongest hidden factor).
The lists go to the metric a batch of users at a time, with the users' ids, their
held-out items and their history as (row, item) pairs. Trained from one seed, the
two frameworks log the same values every epoch.

* ignite: an evaluator ``Engine`` whose step returns ``{"topk", "truth", "history",
  "user_ids"}``, with ``ignite_retrieval.TopKMetrics`` attached, run after every
  training epoch.
* Lightning: a ``LightningModule`` whose ``validation_step`` updates
  ``lightning_retrieval.TopKMetrics`` and whose ``on_validation_epoch_end`` logs
  ``compute()``.

At the end the Lightning model's lists are also evaluated by the ignite metric: the two
frameworks give the same values. Pure torch on the CPU, a few seconds.
"""
from __future__ import annotations

import argparse
from typing import Dict, List, Tuple

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

N_USERS, N_ITEMS, DIM, K, SEED = 300, 200, 16, 10, 0
METRICS = ["ndcg@10", "recall@10", "map_capped@10", "coverage@10", "gini@10", "novelty@10", "personalization@10",
           "serendipity@10"]


def make_interactions(seed: int = SEED) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(train, test, genres)``: ``[2, E]`` (user, item) pairs and ``[N_ITEMS]`` item genres
    (each item's strongest hidden factor). Each user interacts with the 20 items of highest
    (hidden affinity + popularity + noise); 15 train, 5 test. Every item has at least one
    training interaction (novelty reads each listed item's popularity)."""
    g = torch.Generator().manual_seed(seed)
    factors = torch.randn(4, N_ITEMS, generator=g)
    affinity = torch.randn(N_USERS, 4, generator=g) @ factors
    popularity = torch.linspace(1.5, 0.0, N_ITEMS)
    items = (affinity + popularity + torch.randn(N_USERS, N_ITEMS, generator=g)).topk(20, dim=1).indices
    order = torch.rand(N_USERS, 20, generator=g).argsort(dim=1)
    items = items.gather(1, order)
    users = torch.arange(N_USERS).unsqueeze(1)
    train = torch.stack([users.expand(-1, 15).reshape(-1), items[:, :15].reshape(-1)])
    test = torch.stack([users.expand(-1, 5).reshape(-1), items[:, 15:].reshape(-1)])
    unseen = torch.ones(N_ITEMS, dtype=torch.bool)
    unseen[train[1]] = False
    extra = unseen.nonzero().squeeze(1)  # one training interaction for each item nobody trained on
    train = torch.cat([train, torch.stack([extra % N_USERS, extra])], dim=1)
    keep = ~torch.isin(test[0] * N_ITEMS + test[1], train[0] * N_ITEMS + train[1])
    return train, test[:, keep], factors.argmax(0)


class MF(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.users, self.items = nn.Embedding(N_USERS, DIM), nn.Embedding(N_ITEMS, DIM)
        nn.init.normal_(self.users.weight, std=0.1)
        nn.init.normal_(self.items.weight, std=0.1)

    def bpr_loss(self, users: torch.Tensor, items: torch.Tensor) -> torch.Tensor:
        """BPR: each seen item scored above a uniformly sampled item (a few negatives seen by chance)."""
        negatives = torch.randint(0, N_ITEMS, items.shape)
        u = self.users(users)
        diff = (u * self.items(items)).sum(1) - (u * self.items(negatives)).sum(1)
        return -nn.functional.logsigmoid(diff).mean() + 1e-4 * u.pow(2).sum(1).mean()

    @torch.no_grad()
    def recommend(self, users: torch.Tensor, seen: torch.Tensor) -> torch.Tensor:
        """``[B, K]`` the top-K items of ``users``, their ``seen`` ``[2, H]`` (row, item) pairs excluded."""
        scores = self.users(users) @ self.items.weight.T
        scores[seen[0], seen[1]] = float("-inf")
        return scores.topk(K, dim=1).indices


def rows_of(pairs: torch.Tensor, users: torch.Tensor) -> torch.Tensor:
    """The pairs of ``users`` as ``[2, E]`` (row in ``users``, item) pairs."""
    row = torch.full((N_USERS,), -1)
    row[users] = torch.arange(users.numel())
    mine = row[pairs[0]] >= 0
    return torch.stack([row[pairs[0][mine]], pairs[1][mine]])


def eval_batch(model: MF, users: torch.Tensor, train: torch.Tensor, test: torch.Tensor) -> Dict[str, torch.Tensor]:
    """What a metric's update takes for a batch of users."""
    history = rows_of(train, users)
    return {"topk": model.recommend(users, history), "truth": rows_of(test, users), "history": history,
            "user_ids": users}


def metric_options(train: torch.Tensor) -> dict:
    """The catalogue: its size, each item's popularity (training interactions) and genre."""
    _, _, genres = make_interactions()
    return dict(n_items=N_ITEMS, item_popularity=torch.bincount(train[1], minlength=N_ITEMS).double(),
                item_categories=genres)


def line(values: Dict[str, float]) -> str:
    return " | ".join(f"{k} {float(values[k]):.4f}" for k in METRICS)


def run_ignite(epochs: int, train: torch.Tensor, test: torch.Tensor) -> List[Dict[str, float]]:
    from ignite.engine import Engine, Events

    from ignite_retrieval import TopKMetrics

    torch.manual_seed(SEED)
    model = MF()
    optimizer = torch.optim.Adam(model.parameters(), lr=0.02)

    def train_step(engine, batch):
        optimizer.zero_grad()
        loss = model.bpr_loss(*batch)
        loss.backward()
        optimizer.step()
        return loss.item()

    trainer = Engine(train_step)
    evaluator = Engine(lambda engine, batch: eval_batch(model, batch[0], train, test))
    TopKMetrics(METRICS, **metric_options(train)).attach(evaluator, "topk")
    users = DataLoader(TensorDataset(torch.arange(N_USERS)), batch_size=64)
    history: List[Dict[str, float]] = []

    @trainer.on(Events.EPOCH_COMPLETED)
    def evaluate(engine):
        metrics = evaluator.run(users).metrics
        history.append({k: metrics[k] for k in METRICS})
        print(f"ignite epoch {engine.state.epoch}: loss {engine.state.output:.4f} | {line(metrics)}")

    trainer.run(DataLoader(TensorDataset(*train), batch_size=256, shuffle=True), max_epochs=epochs)
    return history


def run_lightning(epochs: int, train: torch.Tensor, test: torch.Tensor):
    import lightning as L

    from lightning_retrieval import TopKMetrics

    class Recommender(L.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.model = MF()
            self.metrics = TopKMetrics(METRICS, **metric_options(train))
            self.history: List[Dict[str, float]] = []

        def training_step(self, batch, batch_idx):
            return self.model.bpr_loss(*batch)

        def validation_step(self, batch, batch_idx):
            inputs = eval_batch(self.model, batch[0], train, test)
            self.metrics.update(inputs["topk"], inputs["truth"], history=inputs["history"],
                                user_ids=inputs["user_ids"])

        def on_validation_epoch_end(self):
            values = self.metrics.compute()
            self.log_dict(values)
            self.metrics.reset()
            if not self.trainer.sanity_checking:
                self.history.append({k: float(v) for k, v in values.items()})
                print(f"lightning epoch {self.current_epoch + 1}: {line(values)}")

        def configure_optimizers(self):
            return torch.optim.Adam(self.parameters(), lr=0.02)

    torch.manual_seed(SEED)
    module = Recommender()
    trainer = L.Trainer(max_epochs=epochs, accelerator="cpu", devices=1, logger=False, enable_checkpointing=False,
                        enable_progress_bar=False, enable_model_summary=False, num_sanity_val_steps=0)
    trainer.fit(module, DataLoader(TensorDataset(*train), batch_size=256, shuffle=True),
                DataLoader(TensorDataset(torch.arange(N_USERS)), batch_size=64))
    return module


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--framework", choices=["both", "ignite", "lightning"], default="both")
    args = parser.parse_args()
    train, test, _ = make_interactions()
    print(f"{N_USERS} users, {N_ITEMS} items: {train.shape[1]} training and {test.shape[1]} held-out interactions")
    if args.framework in ("both", "ignite"):
        run_ignite(args.epochs, train, test)
    if args.framework in ("both", "lightning"):
        module = run_lightning(args.epochs, train, test)
        from ignite_retrieval import TopKMetrics

        metric = TopKMetrics(METRICS, **metric_options(train))
        for start in range(0, N_USERS, 64):
            metric.update(eval_batch(module.model, torch.arange(start, min(start + 64, N_USERS)), train, test))
        same = metric.compute() == module.history[-1]
        print(f"ignite on the Lightning model gives the logged values: {same}")


if __name__ == "__main__":
    main()
