"""Work across torch.distributed ranks: collectives at the bottom, distributed evaluation on top.

``collectives``, ``duplicates`` and ``agree`` need nothing of the metrics (the
adapters gather their states with them); ``shares``, ``sharded`` and
``evaluation`` divide an embedding evaluation between the ranks.
"""
