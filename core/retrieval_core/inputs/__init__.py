"""The inputs layer: each input form becomes canonical, checked tensors in one place.

``embeddings``: :func:`embedding_inputs` (query/gallery embeddings, labels, ids,
categories, confidence, options) gives an :class:`EmbeddingInputs` that the
evaluations of one process and across ranks take down without checking again.
The checks themselves are :mod:`retrieval_core.validate`'s (declared and counted
there, :mod:`retrieval_core.validate.counting`).
"""
from .embeddings import EmbeddingInputs, embedding_inputs, embedding_options  # noqa: F401
