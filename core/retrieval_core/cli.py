"""Command line: ``retrieval-metrics demo`` and ``retrieval-metrics eval FILES...``.

``eval`` reads embeddings and labels saved as .pt, .npy or .npz (``file.npz:name``
picks one array of an .npz) and prints a table, or JSON with ``--json``.
"""
from __future__ import annotations

import argparse
import json
import sys
from typing import Dict, List, Optional, Sequence

import torch

from .embeddings import evaluate_embeddings

DEMO_METRICS = [
    "cmc@1", "cmc@5", "precision_capped@5", "map_hits@5", "map@r", "r_precision", "mrr", "ndcg@10",
    "nmi", "ami", "pcf@0.5",
]
EVAL_METRICS = ["cmc@1", "cmc@5", "precision_capped@5", "map_hits@5", "map@r", "r_precision"]


def load_tensor(spec: str) -> torch.Tensor:
    """A tensor from ``x.pt``, ``x.npy``, ``x.npz`` (one array) or ``x.npz:name``."""
    path, _, name = spec.partition(":") if spec.count(":") == 1 and not spec.startswith(":") else (spec, "", "")
    if path.endswith(".pt"):
        obj = torch.load(path, map_location="cpu", weights_only=True)
        if not isinstance(obj, torch.Tensor):
            raise ValueError(f"{path} must hold one tensor; got {type(obj).__name__}")
        return obj
    if path.endswith((".npy", ".npz")):
        try:
            import numpy as np
        except ImportError:
            raise ImportError(f"reading {path} needs numpy: pip install numpy") from None
        data = np.load(path)
        if path.endswith(".npz"):
            if not name:
                if len(data.files) != 1:
                    raise ValueError(f"{path} holds {data.files}; pick one as {path}:NAME")
                name = data.files[0]
            if name not in data.files:
                raise ValueError(f"{path} has no array {name!r}; it holds {data.files}")
            data = data[name]
        return torch.from_numpy(np.ascontiguousarray(data))
    raise ValueError(f"cannot read {spec!r}: expected a .pt, .npy or .npz file")


def _table(results: Dict[str, Dict[str, float]], metrics: Sequence[str]) -> str:
    names = list(results)
    width = max(12, *(len(n) + 2 for n in names))
    lines = [f"{'metric':<20}" + "".join(f"{n:>{width}}" for n in names)]
    for key in metrics:
        lines.append(f"{key:<20}" + "".join(f"{results[n][key]:>{width}.4f}" for n in names))
    return "\n".join(lines)


def _floats(r) -> Dict[str, float]:
    return {k: float(v) for k, v in r.items()}


def demo(metrics: Sequence[str]) -> Dict[str, Dict[str, float]]:
    """Two "models" of scikit-learn's digits, side by side: raw pixels and a random
    16-d projection; each image is a query against all the others."""
    try:
        from sklearn.datasets import load_digits
    except ImportError:
        raise ImportError("the demo uses scikit-learn's digits: pip install scikit-learn") from None
    digits = load_digits()
    x = torch.tensor(digits.data, dtype=torch.float32)
    labels = torch.tensor(digits.target)
    projection = torch.randn(x.shape[1], 16, generator=torch.Generator().manual_seed(0))
    models = {"raw pixels (64-d)": x, "random projection (16-d)": x @ projection}
    return {name: _floats(evaluate_embeddings(emb, labels, metrics)) for name, emb in models.items()}


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="retrieval-metrics", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p_demo = sub.add_parser("demo", help="evaluate two embeddings of scikit-learn's digits")
    p_eval = sub.add_parser("eval", help="evaluate embeddings and labels saved as .pt/.npy/.npz")
    p_eval.add_argument("query", help="query embeddings [Q, D]")
    p_eval.add_argument("query_labels", help="query labels [Q] (or multi-hot [Q, C])")
    p_eval.add_argument("--gallery", help="gallery embeddings [G, D] (default: the query set, self excluded)")
    p_eval.add_argument("--gallery-labels")
    p_eval.add_argument("--query-ids")
    p_eval.add_argument("--gallery-ids")
    p_eval.add_argument("--distance", default="cosine")
    p_eval.add_argument("--memory-budget", type=int, help="bytes of scratch per query chunk")
    p_eval.add_argument("--progress", action="store_true")
    for p, default in ((p_demo, DEMO_METRICS), (p_eval, EVAL_METRICS)):
        p.add_argument("--metrics", nargs="+", default=default, help="metric keys, e.g. cmc@1 map@r")
        p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    args = parser.parse_args(argv)

    if args.command == "demo":
        results = demo(args.metrics)
    else:
        opt = {name: load_tensor(getattr(args, name)) for name in ("gallery", "gallery_labels", "query_ids", "gallery_ids")
               if getattr(args, name)}
        r = evaluate_embeddings(load_tensor(args.query), load_tensor(args.query_labels), args.metrics,
                                distance=args.distance, memory_budget=args.memory_budget, progress=args.progress, **opt)
        results = {args.query: _floats(r)}
    if args.json:
        print(json.dumps(results if args.command == "demo" else results[args.query], indent=2))
    else:
        print(_table(results, args.metrics))
    return 0


if __name__ == "__main__":
    sys.exit(main())
