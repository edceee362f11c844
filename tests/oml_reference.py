# Reference copy of the retrieval metrics of Open Metric Learning (OML), for the
# anchor tests only (tests/core/test_embeddings_anchors.py). OML itself cannot be
# installed in the test environment (it depends on torchvision).
#
# Source: https://github.com/OML-Team/open-metric-learning
#   oml/functional/metrics.py: calc_retrieval_metrics, reduce_metrics,
#       take_unreduced_metrics_by_mask, calc_cmc, calc_precision, calc_map
#       (the OML 3.x version, whose calc_* functions take ragged ``gt_tops``
#       lists and ``n_gts``; map@k divides by the hits within k, as since OML 0.4.0)
#   oml/utils/misc.py: check_if_nonempty_positive_integers
#   oml/const.py: OVERALL_CATEGORIES_KEY
# Copyright (c) the OML-Team contributors. Licensed under the Apache License,
# Version 2.0 (http://www.apache.org/licenses/LICENSE-2.0). The functions below are
# copied verbatim; only the imports and the two helpers' placement (glue) differ
# from the original files. No changes to the code of the copied functions.
from collections import defaultdict
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np
import torch
from torch import BoolTensor, FloatTensor, LongTensor, Tensor, isin
from tqdm.auto import tqdm

# --- glue: oml/const.py
OVERALL_CATEGORIES_KEY = "OVERALL"

TMetricsDict = Dict[str, Any]
TCategories = Union[LongTensor, np.ndarray]


# --- glue: oml/utils/misc.py (verbatim)
def check_if_nonempty_positive_integers(var: Union[int, Sequence[int]], name: str) -> None:
    """
    Check whether ``var`` is a positive integer or a non-empty Iterable of positive integers.

    Args:
        var: A sequence.
        name: A name of the sequence in case of exception should be raised.

    """
    if isinstance(var, Sequence):
        if not len(var) > 0 or not all([isinstance(x, int) and (x > 0) for x in var]):
            raise ValueError(f"{name} is expected to be non-empty and contain positive integers, but got {var}")
    elif isinstance(var, int):
        if var <= 0:
            raise ValueError(f"{name} is expected to be a positive integer, but got {var}")
    else:
        raise ValueError(f"Unsupported argument type. Expected int or Iterable[int], but got {type(var)}")


# --- oml/functional/metrics.py (verbatim)
def calc_retrieval_metrics(
    retrieved_ids: Sequence[LongTensor],
    gt_ids: Sequence[LongTensor],
    query_categories: Optional[TCategories] = None,
    cmc_top_k: Tuple[int, ...] = (5,),
    precision_top_k: Tuple[int, ...] = (5,),
    map_top_k: Tuple[int, ...] = (5,),
    reduce: bool = True,
    verbose: bool = True,
) -> TMetricsDict:
    """
    Function to compute different retrieval metrics.

    Args:
        retrieved_ids: First gallery indices retrieved for every query with the size of ``n_query``.
            Every index is within the range ``(0, n_gallery - 1)``.
        gt_ids: Gallery indices relevant to every query with the size of ``n_query``.
            Every element is within the range ``(0, n_gallery - 1)``
        query_categories: Categories of queries with the size of ``n_query`` to compute metrics for each category.
        cmc_top_k: Values of ``k`` to calculate ``cmc@k`` (`Cumulative Matching Characteristic`)
        precision_top_k: Values of ``k`` to calculate ``precision@k``
        map_top_k: Values of ``k`` to calculate ``map@k`` (`Mean Average Precision`)
        reduce: If ``False`` return metrics for each query without averaging
        verbose: Set ``True`` to make the function verbose.

    Returns:
        Metrics dictionary.

    """
    assert len(retrieved_ids) == len(gt_ids)
    assert (query_categories is None) or (len(query_categories) == len(retrieved_ids))

    # let's mark every correctly retrieved item as True and vice versa
    gt_tops = tuple([isin(r, g).bool() for r, g in zip(retrieved_ids, gt_ids)])
    n_gts = [len(ids) for ids in gt_ids]

    metrics: TMetricsDict = defaultdict(dict)

    if cmc_top_k:
        cmc = calc_cmc(gt_tops, n_gts, cmc_top_k, verbose=verbose)
        metrics["cmc"] = dict(zip(cmc_top_k, cmc))

    if precision_top_k:
        precision = calc_precision(gt_tops, n_gts, precision_top_k, verbose=verbose)
        metrics["precision"] = dict(zip(precision_top_k, precision))

    if map_top_k:
        map_ = calc_map(gt_tops, n_gts, map_top_k, verbose=verbose)
        metrics["map"] = dict(zip(map_top_k, map_))

    if query_categories is not None:
        metrics_cat = {c: take_unreduced_metrics_by_mask(metrics, query_categories == c) for c in query_categories}
        metrics = {OVERALL_CATEGORIES_KEY: metrics, **metrics_cat}

    if reduce:
        metrics = reduce_metrics(metrics)

    return metrics


def reduce_metrics(metrics_to_reduce: TMetricsDict) -> TMetricsDict:
    output: TMetricsDict = {}

    for k, v in metrics_to_reduce.items():
        if isinstance(v, (Tensor, np.ndarray)):
            output[k] = v.mean()
        elif isinstance(v, (float, int)):
            output[k] = v
        else:
            output[k] = reduce_metrics(v)  # type: ignore

    return output


def take_unreduced_metrics_by_mask(metrics: TMetricsDict, mask: BoolTensor) -> TMetricsDict:
    output: TMetricsDict = {}

    for k, v in metrics.items():
        if isinstance(v, Tensor):
            output[k] = v[mask] if v.numel() > 1 else v
        elif isinstance(v, (float, int)):
            output[k] = v
        else:
            output[k] = take_unreduced_metrics_by_mask(v, mask)  # type: ignore

    return output


def calc_cmc(
    gt_tops: Sequence[BoolTensor], n_gts: List[int], top_k: Tuple[int, ...], verbose: bool = False
) -> List[FloatTensor]:
    """
    Function to compute Cumulative Matching Characteristics (CMC) at cutoffs ``top_k``.

    ``cmc@k`` for a given query equals to 1 if there is at least 1 instance related to this query in top ``k``
    gallery instances sorted by distances to the query, and 0 otherwise.
    The final ``cmc@k`` could be obtained by averaging the results calculated for each query.

    Args:
        gt_tops: Indicators that show if retrievied items are correct or not:
            ``gt_tops[i][j]`` is ``True`` if ``j``-th gallery item is related to the ``i``-th query item.
        n_gts: Number of existing ground truths for every query.
        top_k: Values of ``k`` to calculate ``cmc@k``.
        verbose: Set ``True`` to see progress bar.

    Returns:
        List of ``cmc@k`` tensors computed for every query.

    .. math::
        \\textrm{cmc}@k = \\begin{cases}
        1, & \\textrm{if top-}k \\textrm{ ranked gallery samples include an output relevant to the query}, \\\\
        0, & \\textrm{otherwise}.
        \\end{cases}

    Example:
        >>> gt_tops = [
        ...     BoolTensor([1, 0]),
        ...     BoolTensor([0, 1, 1]),
        ...     BoolTensor([0, 0]),
        ...     BoolTensor([])
        ... ]
        >>> n_gts = [2, 2, 1, 0]
        >>> calc_cmc(gt_tops, n_gts, top_k=(1, 2))
        [tensor([1., 0., 0., 1.]), tensor([1., 1., 0., 1.])]
    """
    check_if_nonempty_positive_integers(top_k, "top_k")

    def cmc_single(is_correct: BoolTensor, n_gt: int, k_: int) -> float:
        if n_gt == 0 and len(is_correct) == 0:
            return 1.0
        elif n_gt > 0 and len(is_correct) == 0:
            return 0.0
        else:
            value = float(is_correct[:k_].any())
            return value

    cmc = []
    for k in top_k:
        items = tqdm(zip(gt_tops, n_gts), desc=f"CMC@{k}", total=len(gt_tops)) if verbose else zip(gt_tops, n_gts)
        cmc.append(FloatTensor([cmc_single(gts, n_gt, k) for gts, n_gt in items]))

    return cmc


def calc_precision(
    gt_tops: Sequence[BoolTensor], n_gts: List[int], top_k: Tuple[int, ...], verbose: bool = False
) -> List[FloatTensor]:
    """
    Function to compute Precision at cutoffs ``top_k``.

    ``precision@k`` for a given query is a fraction of the relevant gallery instances among the top ``k`` instances
    sorted by distances from the query to the gallery.
    The final ``precision@k`` could be obtained by averaging the results calculated for each query.

    Args:
        gt_tops: Indicators that show if retrievied items are correct or not:
            ``gt_tops[i][j]`` is ``True`` if ``j``-th gallery item is related to the ``i``-th query item.
        n_gts: Number of existing ground truth for every query.
        top_k: Values of ``k`` to calculate ``precision@k``.
        verbose: Set ``True`` to see progress bar.

    Returns:
        List of ``precision@k`` tensors computed for every query.

    Given a list :math:`g=[g_1, \\ldots, g_k]` of ground truth top :math:`k` closest elements from the gallery to
    a given query (:math:`g_i` is 1 if :math:`i`-th element from the gallery is relevant to the query and 0 otherwise),
    and the total number of relevant elements from the gallery :math:`n`, the :math:`\\textrm{precision}@k`
    for the query is defined as

    .. math::
        \\textrm{precision}@k = \\frac{1}{\\min{\\left(k, n\\right)}}\\sum\\limits_{i = 1}^k g_i

    It's worth mentioning that OML version of :math:`\\textrm{precision}@k` differs from the commonly used by
    the denominator of the fraction. The OML version takes into account the total amount of relevant elements in
    the gallery, so it will not penalize the ideal model if :math:`n < k`.

    For instance, let :math:`n = 3` and :math:`g = [1, 1, 1, 0, 0]`. Then by using the common definition of
    :math:`\\textrm{precision}@k` we get

    .. math::
        \\begin{align}
            \\textrm{precision}@1 &= \\frac{1}{1}, \\textrm{precision}@2 = \\frac{2}{2},
            \\textrm{precision}@3 = \\frac{3}{3}, \\\\
            \\textrm{precision}@4 &= \\frac{3}{4}, \\textrm{precision}@5 = \\frac{3}{5},
            \\textrm{precision}@6 = \\frac{3}{6} \\\\
        \\end{align}

    But with OML definition of :math:`\\textrm{precision}@k` we get


    .. math::
        \\begin{align}
            \\textrm{precision}@1 &= \\frac{1}{1}, \\textrm{precision}@2 = \\frac{2}{2},
            \\textrm{precision}@3 = \\frac{3}{3} \\\\
            \\textrm{precision}@4 &= \\frac{3}{3}, \\textrm{precision}@5 = \\frac{3}{3},
            \\textrm{precision}@6 = \\frac{3}{3} \\\\
        \\end{align}

    See:
        `Evaluation measures (information retrieval). Precision@k`_


        .. _`Evaluation measures (information retrieval). Precision@k`:
            https://en.wikipedia.org/wiki/Evaluation_measures_(information_retrieval)#Precision_at_k

    Example:

        >>> gt_tops = [
        ...     BoolTensor([1, 0]),
        ...     BoolTensor([0, 1, 1]),
        ...     BoolTensor([0, 0]),
        ...     BoolTensor([])
        ... ]
        >>> n_gts = [2, 3, 5, 2]
        >>> calc_precision(gt_tops, n_gts, top_k=(1, 2))
        [tensor([1., 0., 0., 0.]), tensor([0.5000, 0.5000, 0.0000, 0.0000])]

    """
    check_if_nonempty_positive_integers(top_k, "top_k")

    def precision_single(is_correct: BoolTensor, n_gt: int, k_: int) -> float:
        if n_gt == 0 and len(is_correct) == 0:
            return 1.0
        elif n_gt > 0 and len(is_correct) == 0:
            return 0.0
        else:
            k_ = min(k_, len(is_correct))
            value = torch.cumsum(is_correct, dim=0)[k_ - 1] / min(n_gt, k_)
            return float(value)

    precision = []
    for k in top_k:
        items = tqdm(zip(gt_tops, n_gts), desc=f"Precision@{k}", total=len(n_gts)) if verbose else zip(gt_tops, n_gts)
        precision.append(FloatTensor([precision_single(gts, n_gt, k) for gts, n_gt in items]))

    return precision


def calc_map(
    gt_tops: Sequence[BoolTensor], n_gts: List[int], top_k: Tuple[int, ...], verbose: bool = False
) -> List[FloatTensor]:
    """
    Function to compute Mean Average Precision (MAP) at cutoffs ``top_k``.

    ``map@k`` for a given query is the average value of the ``precision`` considered as a function of the ``recall``.
    The final ``map@k`` could be obtained by averaging the results calculated for each query.

    Args:
        gt_tops: Indicators that show if retrievied items are correct or not:
            ``gt_tops[i][j]`` is ``True`` if ``j``-th gallery item is related to the ``i``-th query item.
        n_gts: Number of existing ground truth for every query.
        top_k: Values of ``k`` to calculate ``map@k``.
        verbose: Set ``True`` to see progress bar.

    Returns:
        List of ``map@k`` tensors computed for every query.

    Given a list :math:`g=[g_1, \\ldots, g_k]` of ground truth top :math:`k` closest elements from the gallery to
    a given query (:math:`g_i` is 1 if :math:`i`-th element from the gallery is relevant to the query and 0 otherwise),
    and the total number of relevant elements from the gallery :math:`n`, the :math:`\\textrm{map}@k`
    for the query is defined as

    .. math::
        \\begin{split}
        \\textrm{map}@k &=
        \\frac{1}{n_k}\\sum\\limits_{i = 1}^k
        \\frac{n_i}{i} \\times \\textrm{rel}(i)
        \\end{split}

    where :math:`\\textrm{rel}(i)` is 1 if :math:`i`-th element from the top :math:`i` closest
    elements from the gallery to the query is relevant to the query, and 0 otherwise;
    and :math:`n_i = \\sum\\limits_{j = 1}^{i}g_j`, which is the number of the relevant predictions
    among the first :math:`i` outputs.

    See:

        `Evaluation measures (information retrieval). Mean Average Precision`_

        `Mean Average Precision (MAP) For Recommender Systems`_

    .. _`Evaluation measures (information retrieval). Mean Average Precision`:
        https://en.wikipedia.org/wiki/Evaluation_measures_(information_retrieval)#Mean_average_precision

    .. _`Mean Average Precision (MAP) For Recommender Systems`:
        https://sdsawtelle.github.io/blog/output/mean-average-precision-MAP-for-recommender-systems.html

    Example:
        >>> gt_tops = [
        ...    BoolTensor([1, 0]),
        ...    BoolTensor([0, 1]),
        ...    BoolTensor([0, 0, 0, 0]),
        ...    BoolTensor([])
        ... ]
        >>> n_gts = [1, 1, 2, 0]
        >>> calc_map(gt_tops, n_gts, top_k=(1, 2))
        [tensor([1., 0., 0., 1.]), tensor([1.0000, 0.5000, 0.0000, 1.0000])]
    """
    check_if_nonempty_positive_integers(top_k, "top_k")

    def map_single(is_correct: BoolTensor, n_gt: int, k_: int) -> float:
        if n_gt == 0 and len(is_correct) == 0:
            return 1.0
        elif n_gt > 0 and len(is_correct) == 0:
            return 0.0
        else:
            k_ = min(k_, len(is_correct))
            correct_preds = torch.cumsum(is_correct, dim=0).float()
            positions = torch.arange(1, k_ + 1).to(correct_preds.device)
            n_k = correct_preds[k_ - 1].clone()
            n_k[n_k < 1] = torch.inf  # hack to avoid zero division
            value = torch.sum((correct_preds[:k_] / positions) * is_correct[:k_], dim=0) / n_k
            return float(value)

    map_ = []
    for k in top_k:
        items = tqdm(zip(gt_tops, n_gts), total=len(gt_tops), desc=f"MAP@{k}") if verbose else zip(gt_tops, n_gts)
        map_.append(FloatTensor([map_single(is_correct, n_gt, k) for is_correct, n_gt in items]))

    return map_


__all__ = ["calc_retrieval_metrics", "calc_cmc", "calc_precision", "calc_map", "reduce_metrics"]
