"""The entry points of one process: scores (``scores``: ``evaluate_scores``), rankings
(``ranked``: ``evaluate_ranked``) and embeddings (``embeddings``: ``evaluate_embeddings``,
with the values of ``embedding_values``) in, results out; and the framework-neutral
accumulator under the adapters (``accumulator``: state, update, sync across ranks,
compute). The public names are ``retrieval_core``'s."""
