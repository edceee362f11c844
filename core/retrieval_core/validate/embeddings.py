"""Checks of embedding-mode inputs: embeddings, labels, query/gallery pairs, ids, per-class, and their values."""
from __future__ import annotations

from typing import Optional

import torch
from torch import Tensor

from .arrays import integral_labels
from .tensors import _contains, _shape, check_tensor
from .counting import check

__all__ = [
    "check_embeddings", "check_labels", "check_batch_like_earlier", "check_query_gallery", "check_pairs",
    "check_per_class", "check_embedding_values",
]

# -- embedding mode: structure ------------------------------------------------------------


@check
def check_embeddings(name: str, x, distance="cosine", *, batch: bool = False) -> Tensor:
    """``[items, dim]`` embeddings, not empty (``batch=True``: an adapter's
    ``[batch, dim]``, which may be empty); floating point, or integer/bool codes
    for hamming and callable distances. Returned detached: evaluation never needs
    the autograd graph (``net(x)`` outside ``torch.no_grad()`` is accepted).

    Example:
        >>> check_embeddings("embeddings", torch.rand(3), batch=True)
        Traceback (most recent call last):
        ...
        ValueError: embeddings must be 2-D [batch, dim]; got shape (3,)
    """
    check_tensor(name, x)
    if x.ndim != 2:
        raise ValueError(f"{name} must be 2-D [{'batch' if batch else 'items'}, dim]; got shape {_shape(x)}")
    if x.shape[0] == 0 and not batch:
        raise ValueError(f"{name} is empty; got shape {_shape(x)}")
    if x.is_complex() or (not x.is_floating_point() and distance != "hamming" and not callable(distance)):
        raise TypeError(
            f"{name} must be a floating-point tensor (integer or bool codes only with distance='hamming'); got {x.dtype}"
        )
    return x.detach()


@check
def check_labels(name: str, labels, n: int, custom: bool = False) -> Tensor:
    """One label per embedding: ``[n]`` integer classes or ``[n, C]`` multi-hot
    (bool or integer 0/1); anything with one entry per embedding when ``custom``
    (a relevance callable reads them). Returned as the evaluation reads them: float
    labels whose values are all whole numbers as int64 (one read of the data), and an
    integer or float ``[n, 1]`` column of classes as ``[n]`` (a bool ``[n, 1]`` stays a
    multi-hot matrix of one class); see :mod:`~retrieval_core.validate.arrays`.

    Example:
        >>> check_labels("labels", torch.tensor([[3.0], [1.0]]), 2)
        tensor([3, 1])
        >>> check_labels("labels", torch.tensor([0.0, 1.5]), 2)
        Traceback (most recent call last):
        ...
        ValueError: labels must be integer class labels; got 1.5 at position 1 (float labels are taken when every value is a whole number within int64)
    """
    check_tensor(name, labels)
    if labels.ndim == 0 or labels.shape[0] != n:
        raise ValueError(f"{name} must have one entry per embedding; got shape {_shape(labels)} for {n} embeddings")
    if custom:
        return labels
    if labels.ndim > 2:
        raise ValueError(f"{name} must be 1-D class labels or 2-D multi-hot [N, classes]; got shape {_shape(labels)}")
    if labels.ndim == 2 and labels.shape[1] == 1 and labels.dtype != torch.bool:  # a column of classes
        labels = labels.reshape(-1)
    if labels.ndim == 1 and (labels.is_complex() or labels.dtype == torch.bool):
        raise TypeError(f"{name} must be integer class labels; got {labels.dtype}")
    if labels.ndim == 2 and labels.is_complex():
        raise TypeError(f"{name} as multi-hot [N, classes] must be bool or 0/1 numbers; got {labels.dtype}")
    return integral_labels(name, labels, multi_hot=labels.ndim == 2)


@check
def check_batch_like_earlier(embeddings: Tensor, labels: Tensor, dim: Optional[int], label_shape: Optional[tuple]) -> None:
    """An adapter's batch against the earlier ones (``dim``: their embedding
    dimension, ``label_shape``: their labels' shape past the batch dimension, ``()``
    for class labels, ``(C,)`` for multi-hot; None before the first batch): the
    states are concatenated at compute, which needs both to stay the same.

    Example:
        >>> check_batch_like_earlier(torch.rand(2, 5), torch.tensor([0, 1]), 3, ())
        Traceback (most recent call last):
        ...
        ValueError: embeddings of every batch must have the same dimension; got 5 after 3
    """
    if dim is not None and embeddings.shape[1] != dim:
        raise ValueError(f"embeddings of every batch must have the same dimension; got {embeddings.shape[1]} after {dim}")
    now = _shape(labels)[1:]
    if label_shape is not None and now != tuple(label_shape):
        raise ValueError(
            f"labels of every batch must have the same shape past the batch dimension; got {now} after "
            f"{tuple(label_shape)} ({_label_form(now)} after {_label_form(tuple(label_shape))})"
        )


def _label_form(trailing: tuple) -> str:
    if trailing == ():
        return "1-D class labels"
    if len(trailing) == 1:
        return f"multi-hot labels of {trailing[0]} classes"
    return f"labels of shape [batch, {', '.join(map(str, trailing))}]"


@check
def check_query_gallery(query: Tensor, query_labels: Tensor, gallery: Tensor, gallery_labels: Tensor, custom: bool) -> None:
    """A separate gallery matches the queries: embedding dimension, label form and
    number of multi-hot classes (any labels when ``custom``).

    Example:
        >>> check_query_gallery(torch.rand(2, 3), torch.tensor([0, 1]), torch.rand(2, 3), torch.ones(2, 4), False)
        Traceback (most recent call last):
        ...
        ValueError: query_labels and gallery_labels must both be 1-D or both multi-hot; got shapes (2,) and (2, 4)
    """
    if gallery.shape[1] != query.shape[1]:
        raise ValueError(f"query and gallery must have the same dimension; got {query.shape[1]} and {gallery.shape[1]}")
    if custom:
        return
    if query_labels.ndim != gallery_labels.ndim:
        raise ValueError(
            "query_labels and gallery_labels must both be 1-D or both multi-hot; "
            f"got shapes {_shape(query_labels)} and {_shape(gallery_labels)}"
        )
    if query_labels.ndim == 2 and query_labels.shape[1] != gallery_labels.shape[1]:
        raise ValueError(
            f"multi-hot labels must have the same number of classes; got {query_labels.shape[1]} and {gallery_labels.shape[1]}"
        )


@check
def check_pairs(gallery, gallery_labels, query_ids, gallery_ids) -> None:
    """What goes together in ``evaluate_embeddings``: gallery with its labels;
    ids on both sides (a self-gallery takes only ``query_ids``).

    Example:
        >>> check_pairs(torch.rand(2, 3), None, None, None)
        Traceback (most recent call last):
        ...
        ValueError: gallery and gallery_labels go together: give both or neither
    """
    if (gallery is None) != (gallery_labels is None):
        raise ValueError("gallery and gallery_labels go together: give both or neither")
    if gallery is None and gallery_ids is not None:
        raise ValueError("gallery_ids needs a gallery; with gallery=None the query_ids serve both sides")
    if gallery is not None and (query_ids is None) != (gallery_ids is None):
        raise ValueError("query_ids and gallery_ids go together: give both or neither")


@check
def check_per_class(per_class, labels: Tensor, custom: bool = False) -> None:
    """``per_class`` groups the queries by equal label: ``[N]`` values or ``[N, C]``
    rows (multi-hot, or any labels of a ``relevance`` callable, ``custom``), real and
    without NaN.

    Example:
        >>> check_per_class("macro", torch.zeros(2, 3, 1), True)
        Traceback (most recent call last):
        ...
        ValueError: per_class groups the queries by equal label, [N] values or [N, C] rows; got query labels of shape (2, 3, 1)
    """
    if per_class is None:
        return
    if labels.ndim > 2 or (labels.ndim == 2 and labels.shape[1] == 0):
        raise ValueError("per_class groups the queries by equal label, [N] values or [N, C] rows; "
                         f"got query labels of shape {_shape(labels)}")
    if labels.is_complex():
        raise TypeError(f"per_class groups the queries by equal label and needs real labels; got {labels.dtype}")
    if labels.is_floating_point() and bool(torch.isnan(labels).any()):
        raise ValueError("per_class groups the queries by equal label; NaN labels equal nothing, not even "
                         "themselves: give every query a label without NaN")


# -- embedding mode: values (read from the data, once per evaluation) -----------------------


def _all_finite(x: Tensor) -> bool:
    """Whether every entry of floating ``x`` is finite, in one pass and without a temporary of
    ``x``'s size (``torch.isfinite`` builds ``|x|`` and masks): the smallest and the largest
    entries are both finite exactly when every entry is (``aminmax`` propagates NaN, and an
    infinity is the largest or the smallest entry)."""
    if x.numel() == 0:
        return True
    low, high = torch.aminmax(x)
    return bool(torch.isfinite(low) & torch.isfinite(high))


@check
def check_embedding_values(
    query: Tensor, query_labels: Tensor, gallery: Optional[Tensor] = None, gallery_labels: Optional[Tensor] = None,
    *, distance="cosine", custom: bool = False,
) -> None:
    """Finite embeddings, binary codes for hamming, 0/1 multi-hot labels
    (``gallery=None``: the query set is its own gallery).

    Example:
        >>> check_embedding_values(torch.tensor([[0.0, float("nan")]]), torch.tensor([0]))
        Traceback (most recent call last):
        ...
        ValueError: query embeddings contain NaN or inf
    """
    sides = [("query", query, "query_labels", query_labels)]
    if gallery is not None:
        sides.append(("gallery", gallery, "gallery_labels", gallery_labels))
    for name, x, _, _ in sides:
        if x.is_floating_point() and not _all_finite(x):
            raise ValueError(f"{_contains(name + ' embeddings')} NaN or inf")
    if distance == "hamming":
        for name, x, _, _ in sides:
            if not (bool(((x == 0) | (x == 1)).all()) or bool(((x == -1) | (x == 1)).all())):
                raise ValueError(f"distance='hamming' needs binary codes in {{0, 1}} or {{-1, 1}}; {name} has other values")
    if not custom and query_labels.ndim == 2:
        for _, _, name, labels in sides:
            if labels.dtype != torch.bool and not bool(((labels == 0) | (labels == 1)).all()):
                raise ValueError(f"{name} as multi-hot [N, classes] must hold only 0 and 1")
