"""Embedding-set metrics: computed once per evaluation over a whole set, not per query.

* :func:`kmeans` (:mod:`.clustering`) -- Lloyd's algorithm with greedy k-means++
  seeding (as scikit-learn); :func:`clustering_scores` runs it with as many clusters
  as distinct labels and scores the clusters against the labels, as
  pytorch-metric-learning's ``AccuracyCalculator`` does for its ``NMI`` / ``AMI``.
* :func:`mutual_info_scores`, :func:`nmi`, :func:`ami` (:mod:`.mutual_info`) -- equal
  to scikit-learn's ``normalized_mutual_info_score`` / ``adjusted_mutual_info_score``
  (``average_method="arithmetic"``).
* :func:`pcf` (:mod:`.principal_components`) -- OML's principal components fraction.
* :func:`fnmr_at_fmr` and :func:`fnmr_at_fmr_streaming` (:mod:`.fnmr`) -- OML's FNMR
  at FMR; the streaming form finds the exact quantiles of a negative-pair set too
  large to hold by radix selection over several passes (:mod:`.radix_select`).

Everything runs on the input's device with torch alone; no Python loop touches
individual samples (loops run over clusters, passes or chunks).

Example:
    >>> import torch
    >>> from retrieval_core.set_metrics import nmi
    >>> float(nmi(torch.tensor([0, 0, 1, 1]), torch.tensor([1, 1, 0, 0])))
    1.0
"""
from __future__ import annotations

from .clustering import clustering_scores, kmeans
from .fnmr import fnmr_at_fmr, fnmr_at_fmr_streaming
from .mutual_info import ami, mutual_info_scores, nmi
from .principal_components import pcf

__all__ = [
    "kmeans",
    "mutual_info_scores",
    "nmi",
    "ami",
    "clustering_scores",
    "pcf",
    "fnmr_at_fmr",
    "fnmr_at_fmr_streaming",
]
