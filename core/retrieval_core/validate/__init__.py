"""The input checks of score and embedding mode, once (``arrays``, ``tensors``, ``values``,
``options``, ``embeddings``, ``stats``): the core's entry points
(``evaluate_scores``, ``score_values``, ``evaluate_embeddings``) and the adapters'
``RankingMetrics``/``EmbeddingMetrics`` (ignite and torchmetrics/Lightning) call
these, so a bad input gets the same exception and message from each face (an
adapter may name its inputs differently, e.g. ignite's ``y_pred``/``y``, and ignite
puts the metric's name in front).

* NumPy arrays become tensors first, on the device of the call's tensors
  (:func:`as_tensors`, :func:`as_categories`); float labels of whole numbers become
  int64 (:func:`integral_labels`, called by :func:`check_labels`).
* Structure (types, shapes, dtypes, devices) is cheap and checked wherever input
  arrives, per batch in the adapters: :func:`check_scores`, :func:`check_score_batch`,
  :func:`check_rows`, :func:`check_embeddings`, :func:`check_labels`,
  :func:`check_batch_like_earlier`, :func:`check_query_gallery`, ...
* Options are checked where they are given (constructors, entry points):
  :func:`check_score_options`, :func:`check_embedding_options`, ...
* Values (NaN, inf, negative gains, codes) are read from the data: once per
  evaluation, never per batch. In score mode an adapter keeps :func:`value_flags`
  of each batch as a summed state and calls :func:`raise_value_flags` at compute;
  :func:`check_values` does both at once. :func:`check_embedding_values` reads the
  embeddings and labels once, at evaluation.

Example:
    >>> import torch
    >>> check_scores(torch.rand(2, 3), torch.ones(2, 4))
    Traceback (most recent call last):
    ...
    ValueError: preds and target must be 2-D [queries, candidates] of the same shape, or 1-D with indexes=; got (2, 3) and (2, 4)
"""
from .arrays import (  # noqa: F401
    as_categories, as_tensor, as_tensors, embedding_arrays, integral_labels, is_numpy_array, tensor_device,
)
from .tensors import (  # noqa: F401
    check_categories, check_compact_inputs, check_rows, check_same_device,
    check_device_available, check_score_batch, check_scores, check_tensor, widen_unsigned,
)
from .pairs import PAIRS_FORM, check_truth_mode, check_user_items  # noqa: F401
from .values import (  # noqa: F401
    check_representable, check_values, gain_max_flag, raise_value_flags, score_flag, sign_flag, value_flags,
    value_flags_and_max,
)
from .options import (  # noqa: F401
    BACKENDS, EMPTY, PER_CLASS, REDUCE, TIES, check_backend, check_choice, check_compact_keys,
    check_embedding_options, check_embedding_ties, check_memory_budget, check_per_query_keys,
    check_return_neighbours, check_score_options, check_seed, check_tie_keys, check_ties,
)
from .embeddings import (  # noqa: F401
    check_batch_like_earlier, check_embedding_values, check_embeddings, check_labels, check_pairs,
    check_per_class, check_query_gallery,
)
from .stats import (  # noqa: F401
    CI_METHODS, N_RESAMPLES, check_ci_keys, check_ci_options, check_confidence, check_confidence_range,
    check_confidence_values,
    check_correlation_inputs, check_keep_per_query, check_level, check_resampling,
    check_stats_options,
)
