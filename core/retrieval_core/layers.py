"""The layer contract of retrieval_core: which layer each module belongs to, bottom first.

A module may import modules of its own layer or of any layer below it, never one
above; imports form no cycle, and none is made inside a function (optional
dependencies go through :mod:`retrieval_core.optional`). ``tests/test_architecture.py``
checks this over the import graph of every module, so a new module must be listed
here (by its own name or a package prefix) before it passes.

A name matches a module when it is the module's dotted name below
``retrieval_core`` or a package prefix of it (``"search"`` covers
``search.frames``); the longest match wins, so a package may span layers
(``distributed.collectives`` sits below ``distributed.evaluation``).

Example:
    >>> layer_of("search.frames"), layer_of("distributed"), layer_of("distributed.collectives")
    ('search', 'distributed', 'collectives')
    >>> [name for name, _ in LAYERS].index("metrics") < [name for name, _ in LAYERS].index("stats")
    True
"""
from typing import Optional, Tuple

__all__ = ["LAYERS", "layer_of"]

LAYERS: Tuple[Tuple[str, Tuple[str, ...]], ...] = (
    # leaves: configuration and helpers that know nothing of metrics
    ("base", ("version", "layers", "sizing", "optional")),
    # torch.distributed collectives and option agreement: what the adapters need to gather their states
    ("collectives", ("distributed.collectives", "distributed.duplicates", "distributed.agreement",
                     "distributed.agree")),
    # the Ranking, its tie groups and its builders from scores (top-k selection)
    ("ranking", ("ranking",)),
    # k-NN building blocks of embedding mode: similarities, exact order, gains, exclusion
    ("search", ("search",)),
    # input checks (they know the vocabularies of the layers below: distances, gain limit)
    ("validate", ("validate",)),
    # per-query and tie-aware kernels, set-level metrics, the specifications, keys, applying keys
    ("metrics", ("metrics", "set_metrics")),
    # each input form checked once (validate's checks, keys parsed) into the canonical object the evaluations take
    ("inputs", ("inputs",)),
    # aggregation (MetricResults), intervals, comparisons, confidence, special functions
    ("stats", ("stats",)),
    # the public entry points of one process: scores, rankings and embeddings in, results out
    ("evaluation", ("evaluation",)),
    # an embedding evaluation divided between ranks (shares, sharded gallery) and the package's face
    ("distributed", ("distributed",)),
    # the framework-neutral accumulator under the adapters: state, update, sync across ranks, compute
    ("accumulator", ("evaluation.accumulator",)),
    # the package itself: its public API (retrieval_core.__all__)
    ("public", ("__init__",)),
    # applications built on the public API
    ("application", ("cli", "reporting", "compat", "trec", "fusion")),
)


def layer_of(name: str) -> Optional[str]:
    """The layer of module ``name`` (dotted, below ``retrieval_core``; ``"__init__"``: the
    package), or None when the contract does not list it."""
    best: Optional[Tuple[int, str]] = None
    for layer, prefixes in LAYERS:
        for prefix in prefixes:
            if name == prefix or name.startswith(prefix + "."):
                if best is None or len(prefix) > best[0]:
                    best = (len(prefix), layer)
    return None if best is None else best[1]
