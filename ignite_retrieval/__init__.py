"""ignite_retrieval: PyTorch-Ignite metrics on top of retrieval_core (adapters arrive with their issue)."""
