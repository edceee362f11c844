"""The optional faiss backend of embedding mode (GPU/CPU flat index), through retrieval_core.optional."""
from __future__ import annotations

import torch
from torch import Tensor

from .. import optional

__all__ = ["FaissSearch"]


class FaissSearch:
    """Candidate lists from faiss' exact flat index (CPU, float32): the optional
    ``backend="faiss"`` of embedding mode.

    Each row's candidates come back ordered by gallery index, so the stable
    builder ranks equal scores by the lower index, as the torch backend does. A
    tie that straddles the last candidate faiss returns cannot be seen, and faiss
    rounds differently from torch: values equal the torch backend's except
    between candidates within float rounding of each other.
    """

    def __init__(self, gallery: Tensor, distance: str):
        faiss = optional.faiss()
        self.l2 = distance in ("euclidean", "squared_euclidean")
        g = gallery.to(torch.float32).contiguous().numpy()
        self.index = faiss.IndexFlatL2(g.shape[1]) if self.l2 else faiss.IndexFlatIP(g.shape[1])
        self.index.add(g)

    def top(self, q: Tensor, k: int) -> "tuple[Tensor, Tensor]":
        """``(scores [c, k], gallery indices [c, k])``, each row in increasing gallery index."""
        d, i = self.index.search(q.to(torch.float32).contiguous().numpy(), k)
        scores, idx = torch.from_numpy(d), torch.from_numpy(i)
        if self.l2:
            scores = -scores
        idx, order = idx.sort(dim=1)
        return scores.gather(1, order), idx
