"""One framework-neutral accumulator: state, update, sync across ranks, compute.

What an adapter (ignite, torchmetrics, a plain loop) needs, and all it needs of the
core besides ``retrieval_core``'s public names:

* :class:`ScoreAccumulator` (dense scores), :class:`EmbeddingAccumulator` (embeddings
  and labels), :class:`FlatAccumulator` (torchmetrics' flat ``indexes`` form),
  :class:`TopkAccumulator` (top-k recommendation lists with sparse truth): built
  from the metric keys and options (checked once, here), they give a new state
  (``new_state()``, or ``state_spec()`` for torchmetrics' ``add_state``), check each
  batch once and append it (``update(state, ...)``), gather every rank's state
  (``sync(state, options)``, for frameworks that do not sync states themselves) and
  compute a ``MetricResults`` (``compute(state)``).
* Sync helpers for frameworks that sync their own states: :func:`gather_per_rank`
  (a ``dist_sync_fn`` for uneven and empty ranks), :func:`agree` (compare options
  between ranks first), :func:`options_digest` (a state that tells metrics of other
  options apart) and :class:`AttributeState` (a state kept in a metric's attributes).

A plain-loop adapter (docs/architecture.md, "Adding an adapter"):

Example:
    >>> import torch
    >>> acc = ScoreAccumulator(["mrr@3", "hit_rate@1"])
    >>> state = acc.new_state()
    >>> for preds, target in [(torch.tensor([[0.9, 0.2, 0.5]]), torch.tensor([[1, 0, 0]])),
    ...                       (torch.tensor([[0.1, 0.8, 0.3]]), torch.tensor([[0, 0, 1]]))]:
    ...     _ = acc.update(state, preds, target)
    >>> synced = acc.sync(state, acc.agreed_options())
    >>> {k: v.item() for k, v in acc.compute(synced.state, processes=synced.processes).items()}
    {'mrr@3': 0.75, 'hit_rate@1': 0.5}
"""
from ...distributed.collectives import gather_per_rank
from .embeddings import EmbeddingAccumulator
from .flat import FlatAccumulator, auroc_values, recall_at_fixed_precision
from .scores import ScoreAccumulator
from .topk import TopkAccumulator
from .state import Accumulator, AttributeState, Synced, agree, options_digest

__all__ = ["Accumulator", "AttributeState", "EmbeddingAccumulator", "FlatAccumulator", "ScoreAccumulator", "Synced",
           "TopkAccumulator", "agree", "auroc_values", "gather_per_rank", "options_digest", "recall_at_fixed_precision"]
