"""lightning_retrieval: torchmetrics/Lightning metrics on top of retrieval_core (adapters arrive with their issue)."""
