"""The entry points of one process: scores (``scores``: ``evaluate_scores``), rankings
(``ranked``: ``evaluate_ranked``) and embeddings (``embeddings``: ``evaluate_embeddings``,
with the values of ``embedding_values``) in, results out; and the adapters' update and
compute steps (``adapter_steps``, ``steps``). The public names are ``retrieval_core``'s."""
