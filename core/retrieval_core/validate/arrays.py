"""NumPy arrays in, tensors out, and labels read as a user means them: the entry points
(``evaluate_embeddings``, ``evaluate_scores``, ``score_values``, ``evaluate_ranked``, the
distributed ``evaluate_embeddings``) and the adapters' ``update`` call these before the
structure checks.

* :func:`as_tensors`: NumPy arrays become tensors (``torch.as_tensor``: NumPy's dtype
  kept) on the device of the call's tensor arguments, so that a NumPy array goes with
  CUDA embeddings; on ``device`` (an adapter's) or the CPU when no argument is a tensor.
  Lists and other sequences are not converted (the checks refuse them as before).
* :func:`integral_labels`: class labels of a float dtype whose values are all whole
  numbers become int64 (``3.0`` is class 3); any other value is refused, naming the
  first one.
* ``[N, 1]`` class labels (integer or whole float) are a column of classes and read as
  ``[N]`` (:func:`~retrieval_core.validate.check_labels`); a bool ``[N, 1]`` stays a
  multi-hot matrix of one class.

Example:
    >>> import numpy as np
    >>> x, labels = as_tensors(x=torch.zeros(2, 3, dtype=torch.float64), labels=np.array([1.0, 2.0]))
    >>> labels
    tensor([1., 2.], dtype=torch.float64)
    >>> integral_labels("labels", labels).tolist()
    [1, 2]
    >>> integral_labels("labels", torch.tensor([1.0, 2.5]))
    Traceback (most recent call last):
    ...
    ValueError: labels must be integer class labels; got 2.5 at position 1 (float labels are taken when every value is a whole number within int64)
"""
from __future__ import annotations

import sys
from typing import List, Optional

import torch
from torch import Tensor

__all__ = ["is_numpy_array", "as_tensor", "tensor_device", "as_tensors", "as_categories", "embedding_arrays",
           "integral_labels"]

# NumPy dtype kinds that torch holds: bool, signed, unsigned, float, complex
_NUMERIC_KINDS = "biufc"


def is_numpy_array(value) -> bool:
    """Whether ``value`` is a ``numpy.ndarray`` (without importing NumPy: an array exists
    only once NumPy is imported)."""
    np = sys.modules.get("numpy")
    return np is not None and isinstance(value, np.ndarray)


def as_tensor(name: str, value, device: Optional[torch.device] = None):
    """``value`` as a tensor on ``device`` (None: the CPU) when it is a NumPy array of
    numbers; anything else unchanged. Read-only and non-native byte order arrays are
    copied first (torch takes neither as they are).

    Example:
        >>> import numpy as np
        >>> as_tensor("query", np.array(["a", "b"]))
        Traceback (most recent call last):
        ...
        TypeError: query must be a NumPy array of numbers or bools; got NumPy dtype <U1
    """
    if not is_numpy_array(value):
        return value
    if value.dtype.kind not in _NUMERIC_KINDS:
        raise TypeError(f"{name} must be a NumPy array of numbers or bools; got NumPy dtype {value.dtype}")
    if not value.dtype.isnative:
        value = value.astype(value.dtype.newbyteorder("="))
    if not value.flags.writeable:
        value = value.copy()
    return torch.as_tensor(value, device=device)


def tensor_device(*values, default: Optional[torch.device] = None) -> Optional[torch.device]:
    """The device of the first tensor among ``values``; ``default`` when none is a tensor."""
    return next((v.device for v in values if isinstance(v, Tensor)), default)


def as_tensors(*, device: Optional[torch.device] = None, **given) -> List:
    """The ``given`` arguments, in order, NumPy arrays converted by :func:`as_tensor` on
    the device of the first tensor among them (``device``, else the CPU, when none is).

    Example:
        >>> import numpy as np
        >>> [type(v).__name__ for v in as_tensors(preds=np.ones((1, 2)), target=[[1, 0]], mask=None)]
        ['Tensor', 'list', 'NoneType']
    """
    target = tensor_device(*given.values(), default=device)
    return [as_tensor(name, value, target) for name, value in given.items()]


def as_categories(categories, device: Optional[torch.device] = None):
    """Categories as the core takes them: a NumPy array of integers or bools becomes a
    tensor, one of other values (strings...) a list of labels; anything else unchanged."""
    if not is_numpy_array(categories):
        return categories
    if categories.dtype.kind in _NUMERIC_KINDS:
        return as_tensor("categories", categories, device)
    return categories.tolist()


def embedding_arrays(query, query_labels, gallery, gallery_labels, query_ids, gallery_ids, confidence,
                     categories) -> List:
    """The arguments of ``evaluate_embeddings`` (one process or across ranks), in this
    order, NumPy arrays as tensors on ``query``'s device (:func:`as_tensors`,
    :func:`as_categories`)."""
    converted = as_tensors(query=query, query_labels=query_labels, gallery=gallery, gallery_labels=gallery_labels,
                           query_ids=query_ids, gallery_ids=gallery_ids, confidence=confidence)
    return converted + [as_categories(categories, tensor_device(converted[0]))]


def integral_labels(name: str, labels: Tensor, multi_hot: bool = False) -> Tensor:
    """Float ``labels`` as int64 when every value is a whole number within int64's range
    (``multi_hot``: 0 or 1), read once; any other tensor unchanged. The first other value
    (a fraction, NaN, inf, past int64) is refused with its position.

    Example:
        >>> integral_labels("labels", torch.tensor([[1.0, 0.5]]), multi_hot=True)
        Traceback (most recent call last):
        ...
        ValueError: labels as multi-hot [N, classes] must hold only 0 and 1; got 0.5 at position (0, 1)
    """
    if not labels.is_floating_point():
        return labels
    x = labels.to(torch.float64)
    if multi_hot:
        good = (x == 0) | (x == 1)
    else:
        good = torch.isfinite(x) & (x == x.trunc()) & (x >= -2.0**63) & (x < 2.0**63)
    if not bool(good.all()):
        where = tuple(int(i) for i in (~good).nonzero()[0])
        at = where[0] if len(where) == 1 else where
        if multi_hot:
            raise ValueError(f"{name} as multi-hot [N, classes] must hold only 0 and 1; got {x[where].item()!r} at "
                             f"position {at}")
        raise ValueError(f"{name} must be integer class labels; got {x[where].item()!r} at position {at} (float "
                         "labels are taken when every value is a whole number within int64)")
    return x.to(torch.int64)
