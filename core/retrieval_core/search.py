"""Exact k-NN building blocks for embedding mode: similarities, gains, exclusion.

Every function works on one query chunk against the whole gallery (``[c, G]``),
so the evaluator never holds a ``[Q, G]`` matrix. Distances become similarities
(closer = larger); ties are left to the stable Ranking builder.
"""
from __future__ import annotations

from typing import Callable, Optional, Tuple, Union

import torch
from torch import Tensor

from . import optional

DISTANCES = ("cosine", "dot", "euclidean", "squared_euclidean", "hamming")
Distance = Union[str, Callable[[Tensor, Tensor], Tensor]]
Relevance = Callable[[Tensor, Tensor], Tensor]


def prepare(x: Tensor, distance: Distance) -> Tensor:
    """Embeddings in the form the similarity of ``distance`` multiplies.

    cosine: rows scaled to unit norm; hamming: binary codes as +-1 floats;
    others: float32 (or float64 when given).

    Example:
        >>> prepare(torch.tensor([[0, 1, 1]]), "hamming").tolist()
        [[-1.0, 1.0, 1.0]]
    """
    if callable(distance):
        return x
    x = x.to(torch.float64 if x.dtype == torch.float64 else torch.float32)
    if distance == "cosine":
        return torch.nn.functional.normalize(x, dim=1)
    if distance == "hamming":
        return torch.where(x > 0, 1.0, -1.0).to(x.dtype)
    return x


def similarity(q: Tensor, g: Tensor, distance: Distance, g_sq_norm: Optional[Tensor] = None) -> Tensor:
    """``[c, G]`` similarity of prepared queries and gallery (larger = closer).

    euclidean and squared_euclidean rank by ``2 q.g - |g|^2``, which orders the
    gallery exactly as ``-|q - g|^2`` does for each query (``|q|^2`` is constant
    per row); hamming gives ``D - 2 * hamming`` (integers, exact in float32).
    """
    if callable(distance):
        d = distance(q, g)
        if not isinstance(d, Tensor) or d.shape != (q.shape[0], g.shape[0]):
            got = tuple(d.shape) if isinstance(d, Tensor) else type(d).__name__
            raise ValueError(f"a distance callable must return [queries, gallery] = {(q.shape[0], g.shape[0])}; got {got}")
        if d.is_floating_point() and not bool(torch.isfinite(d).all()):
            raise ValueError("a distance callable returned NaN or inf; distances must be finite")
        # integer distances become float64 (exact below 2**53) so exclusion can write -inf
        return -(d if d.is_floating_point() else d.to(torch.float64))
    s = _matmul(q, g)
    if distance in ("euclidean", "squared_euclidean"):
        s = 2.0 * s - (g_sq_norm if g_sq_norm is not None else (g * g).sum(1))
    return s


# Rows of one similarity product. BLAS gives a row the same values in any product
# of at least this many rows (matrix-vector kernels round differently), so chunks
# are padded to it: values do not depend on the chunk size.
MIN_ROWS = 16


def _matmul(q: Tensor, g: Tensor) -> Tensor:
    """``q @ g.T`` whose values do not depend on the chunk: at least MIN_ROWS rows, and
    float64 products rounded to float32 (float64 BLAS gives identical columns values
    that differ in the last bit, which would break ties that are exact)."""
    n = q.shape[0]
    if n < MIN_ROWS:
        q = torch.cat([q, q.new_zeros(MIN_ROWS - n, q.shape[1])])
    s = q @ g.T
    if s.dtype == torch.float64:
        s = s.to(torch.float32)
    return s[:n]


def distances(q: Tensor, g: Tensor, distance: Distance) -> Tensor:
    """``[c, G]`` distances of prepared embeddings, in the named distance's own units
    (cosine: 1 - cos, dot: -dot, euclidean: L2, hamming: differing bits)."""
    if callable(distance):
        return distance(q, g)
    if distance in ("euclidean", "squared_euclidean"):
        d2 = ((q * q).sum(1, keepdim=True) - 2.0 * (q @ g.T) + (g * g).sum(1)).clamp(min=0)
        return d2.sqrt() if distance == "euclidean" else d2
    s = q @ g.T
    if distance == "cosine":
        return 1.0 - s
    if distance == "hamming":
        return (q.shape[1] - s) / 2.0
    return -s


def gains(query_labels: Tensor, gallery_labels: Tensor, relevance: Optional[Relevance] = None) -> Tensor:
    """``[c, G]`` gains: equal label (1-D labels, bool), number of shared labels
    (multi-hot ``[N, C]``), or ``relevance(query_labels, gallery_labels)``.

    Example:
        >>> gains(torch.tensor([1, 2]), torch.tensor([2, 1, 1])).tolist()
        [[False, True, True], [True, False, False]]
    """
    if relevance is not None:
        out = relevance(query_labels, gallery_labels)
        shape = (query_labels.shape[0], gallery_labels.shape[0])
        if not isinstance(out, Tensor) or out.shape != shape:
            got = tuple(out.shape) if isinstance(out, Tensor) else type(out).__name__
            raise ValueError(f"a relevance callable must return gains [queries, gallery] = {shape}; got {got}")
        if out.dtype != torch.bool:
            low = out.min()
            if bool(torch.isnan(low)) or bool(low < 0) or (out.is_floating_point() and not bool(torch.isfinite(out).all())):
                raise ValueError(f"relevance gains must be finite and >= 0; got a minimum of {low.item()}")
        return out
    if query_labels.ndim == 1:
        return query_labels.unsqueeze(1) == gallery_labels.unsqueeze(0)
    return query_labels.to(torch.float32) @ gallery_labels.to(torch.float32).T


def eligible(query_ids: Optional[Tensor], gallery_ids: Optional[Tensor]) -> Optional[Tensor]:
    """``[c, G]`` True where the gallery item may be retrieved (its id differs from the query's)."""
    if query_ids is None:
        return None
    return query_ids.unsqueeze(1) != gallery_ids.unsqueeze(0)


def _codes(*columns: Tensor) -> Tensor:
    """One int64 code per row of equal-length key columns (equal rows, equal codes)."""
    code = torch.zeros_like(columns[0], dtype=torch.int64)
    for col in columns:
        values, inverse = torch.unique(col, return_inverse=True)
        code = code * values.numel() + inverse
    return code


def count_equal(query_keys: Tuple[Tensor, ...], gallery_keys: Tuple[Tensor, ...]) -> Tensor:
    """``[Q]`` how many gallery rows equal each query row, keys given as columns.

    Example:
        >>> count_equal((torch.tensor([1, 2, 9]),), (torch.tensor([2, 1, 1]),)).tolist()
        [2, 1, 0]
    """
    n_gallery = gallery_keys[0].shape[0]
    codes = _codes(*(torch.cat([g.to(torch.int64), q.to(torch.int64)]) for q, g in zip(query_keys, gallery_keys)))
    distinct, inverse = torch.unique(codes, return_inverse=True)
    counts = torch.bincount(inverse[:n_gallery], minlength=distinct.numel())
    return counts[inverse[n_gallery:]]


def label_counts(
    query_labels: Tensor, gallery_labels: Tensor, query_ids: Optional[Tensor], gallery_ids: Optional[Tensor]
) -> "tuple[Tensor, Tensor]":
    """(R, candidates) per query for 1-D labels, exactly, without a ``[Q, G]`` matrix:
    gallery items sharing the label (and eligible), and eligible gallery items."""
    n_relevant = count_equal((query_labels,), (gallery_labels,))
    n_candidates = torch.full_like(n_relevant, gallery_labels.shape[0])
    if query_ids is not None:
        n_relevant = n_relevant - count_equal((query_ids, query_labels), (gallery_ids, gallery_labels))
        n_candidates = n_candidates - count_equal((query_ids,), (gallery_ids,))
    return n_relevant, n_candidates


class Exclusion:
    """The (row, column) pairs of a query chunk whose gallery id equals the query's id.

    Example:
        >>> ex = Exclusion(torch.tensor([7, 8]), torch.tensor([8, 7, 8]))
        >>> [t.tolist() for t in ex.pairs(slice(0, 2))]
        [[0, 1, 1], [1, 0, 2]]
    """

    def __init__(self, query_ids: Tensor, gallery_ids: Tensor):
        self.query_ids = query_ids
        self.sorted_ids, self.order = torch.sort(gallery_ids, stable=True)

    def pairs(self, part: slice) -> "tuple[Tensor, Tensor]":
        q = self.query_ids[part]
        lo = torch.searchsorted(self.sorted_ids, q)
        counts = torch.searchsorted(self.sorted_ids, q, right=True) - lo
        rows = torch.repeat_interleave(torch.arange(q.shape[0], device=q.device), counts)
        first = torch.repeat_interleave(lo - (torch.cumsum(counts, 0) - counts), counts)
        cols = self.order[first + torch.arange(rows.shape[0], device=q.device)]
        return rows, cols


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
