"""The inputs layer: each input form becomes canonical, checked tensors in one place.

``embeddings``: :func:`embedding_inputs` (query/gallery embeddings, labels, ids,
categories, confidence, options) gives an :class:`EmbeddingInputs` that the
evaluations of one process and across ranks take down without checking again.
``scores``: ``score_inputs`` (dense or flat scores, R given or not) gives a
``ScoreInputs``; ``score_value_inputs`` checks ``score_values``' structure;
``accumulated_score_options`` and ``score_batch_inputs`` are the score accumulator's.
``ranked``: ``ranked_inputs`` (ranked lists) gives a ``RankedInputs``; ``ranked_keys``
checks the keys of ranked lists (also the TREC keys without a trec_eval name).
``topk``: ``topk_inputs`` (top-k item id lists, truth pairs or a sparse tensor, item data)
gives a ``TopkInputs``; ``topk_ranking`` turns a block of its users into a Ranking.
``pairs``: ``user_items`` ((user, item) pairs or a sparse ``[U, I]`` tensor: relevance pairs
and ``exclude=``) gives a ``UserItems``, a sorted per-user CSR that chunks of users read.
NumPy arrays become tensors through :func:`retrieval_core.validate.arrays.as_tensors`
in each of them.
The checks themselves are :mod:`retrieval_core.validate`'s (declared and counted
there, :mod:`retrieval_core.validate.counting`).
"""
from .embeddings import EmbeddingInputs, embedding_inputs, embedding_options  # noqa: F401
