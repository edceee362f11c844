"""Demo: two recommenders scored on the same generated catalogue, side by side.

Each of 2,000 users has 500 candidate items with graded relevance 0-3; model A
scores items with a little noise, model B with a lot. Both dense ``[Q, N]`` and
the flat ``(indexes, preds, target)`` form give the same numbers.

Run: ``.venv/bin/python examples/demo.py`` after ``make demo`` (``make demo`` itself runs
the command-line demo, ``retrieval-metrics demo``, on scikit-learn's digits).
"""
import argparse

import torch

import retrieval_core as rc

METRICS = [
    "hit_rate@1", "precision@10", "recall@10", "f1@10", "map@10", "map_hits@10", "map",
    "map@r", "r_precision", "mrr@10", "ndcg@10", "ndcg_exp@10", "fall_out@10", "auroc",
]


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0].replace("\n", " "))
    parser.add_argument("--users", type=int, default=2000, help="number of users (queries)")
    parser.add_argument("--items", type=int, default=500, help="candidate items per user")
    args = parser.parse_args(argv)
    g = torch.Generator().manual_seed(0)
    n_users, n_items = args.users, args.items
    relevant = torch.rand(n_users, n_items, generator=g) < 0.03
    target = relevant * torch.randint(1, 4, (n_users, n_items), generator=g)
    truth = target.float()
    models = {
        "A (low noise)": truth + 1.0 * torch.randn(n_users, n_items, generator=g),
        "B (high noise)": truth + 3.0 * torch.randn(n_users, n_items, generator=g),
    }
    results = {name: rc.evaluate_scores(scores, target, METRICS) for name, scores in models.items()}

    # The flat form of torchmetrics gives the same values.
    scores = models["A (low noise)"]
    indexes = torch.arange(n_users).repeat_interleave(n_items)
    flat = rc.evaluate_scores(scores.reshape(-1), target.reshape(-1), METRICS, indexes=indexes)
    assert all(torch.allclose(flat[k], results["A (low noise)"][k]) for k in METRICS)

    names = list(results)
    print(f"{n_users} users x {n_items} items, graded relevance 0-3")
    print(f"{'metric':<14}" + "".join(f"{n:>16}" for n in names))
    for key in METRICS:
        print(f"{key:<14}" + "".join(f"{results[n][key].item():>16.4f}" for n in names))
    skipped = results[names[0]].n_empty["ndcg@10"].item()
    print(f"({skipped} users with no relevant item are skipped, empty='skip')")


if __name__ == "__main__":
    main()
