"""The layer contract of retrieval_core: which layer each module belongs to, bottom first.

A module may import modules of its own layer or of any layer below it, never one
above; imports form no cycle, and none is made inside a function (optional
dependencies go through :mod:`retrieval_core.optional`). ``tests/test_architecture.py``
checks this over the import graph of every module, so a new module must be listed
here (by its own name or a package prefix) before it passes.

A name matches a module when it is the module's dotted name below
``retrieval_core`` or a package prefix of it (``"search"`` covers
``search.frames``); the longest match wins. :data:`ALIASES` are the old flat
module paths, kept as re-exports only (no code): each sits in its target's layer.

Example:
    >>> layer_of("search.frames"), layer_of("distributed"), layer_of("parallel.collectives")
    ('search', 'parallel', 'collectives')
    >>> [name for name, _ in LAYERS].index("metrics") < [name for name, _ in LAYERS].index("stats")
    True
"""
from typing import Dict, Optional, Tuple

__all__ = ["LAYERS", "ALIASES", "layer_of"]

LAYERS: Tuple[Tuple[str, Tuple[str, ...]], ...] = (
    # leaves: configuration and helpers that know nothing of metrics
    ("base", ("version", "layers", "sizing", "optional", "agreement")),
    # torch.distributed collectives: what the adapters need to gather their states
    ("collectives", ("parallel", "parallel.collectives", "parallel.duplicates", "parallel.agree")),
    # the Ranking, its tie groups and its builders from scores (top-k selection)
    ("ranking", ("ranking",)),
    # k-NN building blocks of embedding mode: similarities, exact order, gains, exclusion
    ("search", ("search",)),
    # input checks (they know the vocabularies of the layers below: distances, gain limit)
    ("validate", ("validate",)),
    # per-query and tie-aware kernels, set-level metrics, the registry, applying keys
    ("metrics", ("metrics", "set_metrics")),
    # aggregation (MetricResults), intervals, comparisons, confidence, special functions
    ("stats", ("stats",)),
    # the public entry points of one process: scores and embeddings in, results out
    ("modes", ("ranked", "evaluate", "embedding_values", "embeddings")),
    # an embedding evaluation divided between ranks (shares, sharded gallery)
    ("parallel", ("parallel.shares", "parallel.sharded", "parallel.evaluation")),
    # what the adapters share: option checks and update/compute steps
    ("adapter_steps", ("steps", "adapter_steps")),
    # the package itself: its public API (retrieval_core.__all__)
    ("public", ("__init__",)),
    # applications built on the public API
    ("application", ("cli", "cli_io", "cli_parser", "cli_commands", "cli_compare", "cli_demo", "cli_trec", "report",
                     "plot", "plot_axes", "plot_curves", "compat", "trec")),
)

ALIASES: Dict[str, str] = {  # old flat path -> the module or package it re-exports (its layer)
    "build": "ranking",
    "kernels": "metrics.kernels",
    "ties": "metrics.tie_kernels",
    "registry": "metrics.registry",
    "set_level": "metrics.set_level",
    "aggregate": "stats.aggregate",
    "intervals": "stats.intervals",
    "comparison": "stats.comparison",
    "confidence": "stats.confidence",
    "special": "stats.special",
    "distributed": "parallel.evaluation",
}


def layer_of(name: str) -> Optional[str]:
    """The layer of module ``name`` (dotted, below ``retrieval_core``; ``"__init__"``: the
    package), or None when the contract does not list it."""
    name = ALIASES.get(name, name)
    best: Optional[Tuple[int, str]] = None
    for layer, prefixes in LAYERS:
        for prefix in prefixes:
            if name == prefix or name.startswith(prefix + "."):
                if best is None or len(prefix) > best[0]:
                    best = (len(prefix), layer)
    return None if best is None else best[1]
