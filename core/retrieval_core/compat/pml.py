"""A drop-in for pytorch-metric-learning 2.x's ``AccuracyCalculator``, computed by the core.

Same constructor, ``get_accuracy`` signature, keys, value types and extension
protocol as ``pytorch_metric_learning.utils.accuracy_calculator.AccuracyCalculator``
(see docs/compat.md, "pytorch-metric-learning"). By default the neighbours are
found exactly by :func:`retrieval_core.evaluate_embeddings` (squared euclidean, the
order of PML's default faiss ``IndexFlatL2``), chunk by chunk on the embeddings'
device, and the built-in accuracies come from the core's kernels without a
``[Q, k]`` label matrix; ``knn_labels`` are built only for a subclass's own
``calculate_<name>`` methods, or when a ``knn_func`` of the user's is given.

Example:
    >>> import torch
    >>> x = torch.tensor([[0.0], [0.1], [5.0], [5.2], [2.0]])
    >>> labels = torch.tensor([0, 0, 1, 1, 1])
    >>> calc = AccuracyCalculator(include=("precision_at_1", "r_precision"), device=torch.device("cpu"))
    >>> calc.get_accuracy(x, labels)  # the query set is its own reference, self-matches removed
    {'precision_at_1': 0.8, 'r_precision': 0.8}

Under ``torch.distributed``, ``gather=True`` makes every rank return these values
of all ranks' rows together (docs/compat.md, "Several processes"); in one process
it is the plain call:

    >>> AccuracyCalculator(include=("precision_at_1",), device="cpu", gather=True).get_accuracy(x, labels)
    {'precision_at_1': 0.8}
"""
from __future__ import annotations

import logging
from typing import Dict, List

import torch
from torch import Tensor

from .. import distributed, evaluate_embeddings, optional
from .pml_dist import Shards, exchange_options
from .pml_knn import ExactKNN, equal_rows, label_match_counts, lone_queries, relevant_per_query
from .pml_values import KNN_METRICS, keys_for, knn_label_values, nan_accuracy, pml_reduce, pml_values

__all__ = ["AccuracyCalculator", "ExactKNN"]

LOGGER = logging.getLogger(__name__)
CLUSTER_METRICS = ("NMI", "AMI")


def _tensor(x, device, name: str) -> Tensor:
    """numpy arrays (as PML accepts them), lists and tensors, on ``device``."""
    if isinstance(x, Tensor):
        return x.to(device)
    if type(x).__module__ == "numpy" and hasattr(x, "__array__"):  # a numpy array (numpy itself is optional)
        return torch.as_tensor(x).to(device)
    if isinstance(x, (list, tuple)):
        return torch.as_tensor(x, device=device)
    raise TypeError(f"{name} must be a torch.Tensor or a numpy array; got {type(x).__name__}")


class AccuracyCalculator:
    """pytorch-metric-learning's ``AccuracyCalculator`` (2.x API), on the core.

    Args:
        include, exclude: tuples/lists of metric names (the ``calculate_<name>``
            methods, subclasses' included); empty ``include``: all of them.
        avg_of_avgs: average the per-label averages; ``return_per_class``: return
            them as a list (sorted labels). Mutually exclusive.
        k: neighbours per query: None (every reference item), a positive int, or
            ``"max_bin_count"`` (the largest label count, so R never exceeds k).
        label_comparison_fn: ``f(x, y) -> bool tensor`` broadcast as PML calls it
            (default: equality of labels, rows for ``[N, D]`` labels).
        device: where the evaluation runs (default: CUDA when available).
        knn_func: PML's protocol ``(query, k, reference, ref_includes_query) ->
            (distances, indices)``; default :class:`ExactKNN` (exact, no faiss).
        kmeans_func: ``(embeddings, n_clusters) -> cluster ids`` for NMI/AMI; default
            None: the core's k-means (``nmi``/``ami`` keys).
        gather: several processes (an initialised ``torch.distributed`` group of
            more than one rank; docs/compat.md, "Several processes"). None
            (default): PML's behaviour, each rank's values of its own tensors, no
            collective. True: every rank must call ``get_accuracy`` with its shard
            (uneven, or empty ``[0, D]``); every rank returns the values of one
            process on every rank's rows concatenated in rank order, the search
            divided between ranks. False: each rank's own values, but every rank
            must call, and the ranks' options are compared (so a rank gathering
            while another does not is an error on both, not a hang).
        group: the process group (default: the whole world).
    """

    def __init__(self, include=(), exclude=(), avg_of_avgs=False, return_per_class=False, k=None,
                 label_comparison_fn=None, device=None, knn_func=None, kmeans_func=None, gather=None, group=None):
        self.function_keyword = "calculate_"
        names = [x for x in dir(self) if x.startswith(self.function_keyword)]
        self.original_function_dict = {x[len(self.function_keyword):]: getattr(self, x) for x in names}
        self.check_primary_metrics(include, exclude)
        self.original_function_dict = self.get_function_dict(include, exclude)
        self.curr_function_dict = self.get_function_dict()
        if avg_of_avgs and return_per_class:
            raise ValueError("avg_of_avgs and return_per_class are mutually exclusive")
        self.avg_of_avgs, self.return_per_class = avg_of_avgs, return_per_class
        if device is None:
            device = "cuda" if torch.cuda.is_available() else "cpu"
        self.device = torch.device(device)
        self.knn_func = ExactKNN() if knn_func is None else knn_func
        self.kmeans_func = kmeans_func
        if isinstance(k, bool) or not ((isinstance(k, int) and k > 0) or k is None or k == "max_bin_count"):
            raise ValueError("k must be an integer greater than 0, or None, or 'max_bin_count'")
        self.k = k
        self.label_comparison_fn = label_comparison_fn or equal_rows
        if label_comparison_fn and any(x in self.requires_clustering() for x in self.get_curr_metrics()):
            raise NotImplementedError("Unsupported: clustering + custom label comparison")
        if gather is not None and not isinstance(gather, bool):
            raise TypeError(f"gather must be None, True or False; got {gather!r}")
        self.gather, self.group = gather, group
        self._computed: Dict[str, object] = {}

    # ------------------------------------------------------------------ PML's protocol
    def get_function_dict(self, include=(), exclude=()):
        include = list(self.original_function_dict) if len(include) == 0 else include
        return {k: v for k, v in self.original_function_dict.items() if k in include and k not in exclude}

    def get_curr_metrics(self) -> List[str]:
        return list(self.curr_function_dict)

    def requires_clustering(self) -> List[str]:
        return list(CLUSTER_METRICS)

    def requires_knn(self) -> List[str]:
        return list(KNN_METRICS)

    def check_primary_metrics(self, include=(), exclude=()):
        primary = list(self.original_function_dict)
        for names in (include, exclude):
            if not isinstance(names, (tuple, list)):
                raise TypeError(f"Arguments must be of type tuple, not {type(names)}.")
            if not set(names).issubset(primary):
                raise ValueError(f"Primary metrics must be one or more of: {primary}.")

    def description(self) -> str:
        return "avg_of_avgs" if self.avg_of_avgs else ""

    def determine_k(self, bin_counts, num_reference_embeddings, ref_includes_query):
        """PML's k: the largest label count, the reference size, or ``self.k`` (with
        PML's warning when R may exceed it for ``r_precision`` / ``map@R``)."""
        self_count = int(ref_includes_query)
        max_bin_count = int(torch.max(bin_counts)) if len(bin_counts) else 0
        if self.k == "max_bin_count":
            return max_bin_count - self_count
        if self.k is None:
            return num_reference_embeddings - self_count
        if self.k < max_bin_count:
            at_r = set(self.get_curr_metrics()) & {"r_precision", "mean_average_precision_at_r"}
            if at_r:
                LOGGER.warning(
                    "You are computing %s, but the value for k (%d) is less than the max bin count (%d), so their "
                    "R is cut at k (PML's values). To fix this, set k='max_bin_count'. If you're looking for "
                    "MAP@%d instead of MAP@R, use 'mean_average_precision'.", sorted(at_r), self.k, max_bin_count,
                    self.k)
        return self.k

    def get_cluster_labels(self, query, query_labels, **kwargs):
        n_clusters = len(torch.unique(query_labels.flatten()))
        if self.kmeans_func is None:
            kmeans = optional.require("sklearn.cluster", feature="cluster labels for a custom NMI/AMI without "
                                      "kmeans_func", package="scikit-learn").KMeans
            return torch.as_tensor(kmeans(n_clusters, n_init=1, random_state=0).fit_predict(query.cpu().numpy()))
        return self.kmeans_func(query, n_clusters)

    # ------------------------------------------------------------------ the metrics
    def _mutual_info(self, name, query_labels, cluster_labels):
        if name in self._computed:
            return self._computed[name]
        scores = optional.require("sklearn.metrics", feature="NMI/AMI of custom cluster labels", package="scikit-learn")
        score = scores.normalized_mutual_info_score if name == "NMI" else scores.adjusted_mutual_info_score
        return float(score(*(torch.as_tensor(x).cpu().numpy() for x in (query_labels, cluster_labels))))

    def calculate_NMI(self, query_labels, cluster_labels=None, **kwargs):
        return self._mutual_info("NMI", query_labels, cluster_labels)

    def calculate_AMI(self, query_labels, cluster_labels=None, **kwargs):
        return self._mutual_info("AMI", query_labels, cluster_labels)

    def _knn_metric(self, name, kwargs):
        if name in self._computed:
            return self._computed[name]
        return knn_label_values(name, kwargs["knn_labels"], kwargs["query_labels"], kwargs["not_lone_query_mask"],
                                kwargs["ref_includes_query"], kwargs["label_counts"], self.label_comparison_fn,
                                self.avg_of_avgs, self.return_per_class)

    def calculate_precision_at_1(self, **kwargs):
        return self._knn_metric("precision_at_1", kwargs)

    def calculate_mean_average_precision_at_r(self, **kwargs):
        return self._knn_metric("mean_average_precision_at_r", kwargs)

    def calculate_mean_average_precision(self, **kwargs):
        return self._knn_metric("mean_average_precision", kwargs)

    def calculate_mean_reciprocal_rank(self, **kwargs):
        return self._knn_metric("mean_reciprocal_rank", kwargs)

    def calculate_r_precision(self, **kwargs):
        return self._knn_metric("r_precision", kwargs)

    def _get_accuracy(self, function_dict, **kwargs):
        return {k: v(**kwargs) for k, v in function_dict.items()}

    # ------------------------------------------------------------------ get_accuracy
    def _builtin(self, name: str) -> bool:
        """True when ``name`` is ours, not a subclass's override."""
        method = "calculate_" + name
        return getattr(type(self), method, None) is getattr(AccuracyCalculator, method, object())

    def get_accuracy(self, query, query_labels, reference=None, reference_labels=None, ref_includes_query=False,
                     include=(), exclude=()):
        """PML's accuracies of ``query`` against ``reference`` (None: the query set itself,
        self-matches removed): ``{name: float}`` (lists with ``return_per_class``).
        With ``gather=True`` on several processes: the values of every rank's rows together."""
        self.curr_function_dict = self.get_function_dict(include, exclude)
        prepare = lambda: self._prepare(query, query_labels, reference, reference_labels,  # noqa: E731
                                        ref_includes_query)
        if self.gather is None or distributed.world_size(self.group) == 1:
            return self._accuracy(*prepare())
        options = {"gather": self.gather, "metrics": self.get_curr_metrics(), "k": self.k,
                   "avg_of_avgs": self.avg_of_avgs, "return_per_class": self.return_per_class,
                   "reference": reference is not None, "ref_includes_query": bool(ref_includes_query),
                   "label_comparison_fn": self.label_comparison_fn, "knn_func": type(self.knn_func).__name__,
                   "kmeans_func": self.kmeans_func is not None, "calculator": type(self).__name__}
        if not self.gather:  # each rank its own values, once the ranks agree on that
            exchange_options(lambda: None, options, self.group)
            return self._accuracy(*prepare())
        query, reference, _, _, raw_q, raw_r, riq = exchange_options(prepare, options, self.group)
        own = reference is query and riq  # the query set is its own reference
        shards = Shards(query, raw_q, None if own else reference, raw_r, riq, self.group)
        raw_q, raw_r = shards.raw_q, shards.raw_r
        labels = raw_q.to(torch.float32), raw_r.to(torch.float32)
        if shards.divisible and self._divisible():
            return self._accuracy(query, reference, *labels, raw_q, raw_r, riq, shards)
        query, reference = shards.embeddings()
        return self._accuracy(query, reference, *labels, raw_q, raw_r, riq)

    def _prepare(self, query, query_labels, reference, reference_labels, ref_includes_query):
        """The inputs as tensors on ``self.device``, checked as PML checks them:
        ``(query, reference, query_labels, reference_labels, raw_q, raw_r, riq)``
        (float32 embeddings and labels, the labels as given, ``ref_includes_query``)."""
        if reference is None:
            reference, reference_labels, ref_includes_query = query, query_labels, True
        elif reference_labels is None:
            raise ValueError("reference_labels are needed with a reference set")
        same = reference is query
        query, reference = (_tensor(x, self.device, n).to(torch.float32) for x, n in
                            ((query, "query"), (reference, "reference")))
        reference = query if same else reference
        raw_q, raw_r = (_tensor(x, self.device, n) for x, n in
                        ((query_labels, "query_labels"), (reference_labels, "reference_labels")))
        for name, x in (("query", query), ("reference", reference)):
            if x.ndim != 2:
                raise ValueError(f"{name} must be 2-D [N, D] embeddings; got shape {tuple(x.shape)}")
        if len(query) != len(raw_q) or len(reference) != len(raw_r):
            raise ValueError("embeddings and labels must have the same length")
        query_labels, reference_labels = raw_q.to(torch.float32), raw_r.to(torch.float32)
        # allclose(a, a) is False exactly when `a` holds a NaN (inf equals inf): the cheap test when they are one
        same_q = (lambda: not bool(torch.isnan(query).any())) if same else \
            (lambda: torch.allclose(query, reference[:len(query)]))
        if ref_includes_query and not (len(reference) >= len(query) and same_q()
                                       and torch.allclose(query_labels, reference_labels[:len(query)])):
            raise ValueError(
                "When ref_includes_query is True, the first len(query) elements of reference must be equal to query.\n"
                "Likewise, the first len(query_labels) elements of reference_labels must be equal to query_labels.\n")
        return query, reference, query_labels, reference_labels, raw_q, raw_r, bool(ref_includes_query)

    def _accuracy(self, query, reference, query_labels, reference_labels, raw_q, raw_r, riq, shards=None):
        """The accuracies of the prepared inputs (``shards``: the search divided between ranks)."""
        kwargs = {"query": query, "reference": reference, "query_labels": query_labels,
                  "reference_labels": reference_labels, "ref_includes_query": riq,
                  "label_comparison_fn": self.label_comparison_fn}
        try:
            self._computed = {}
            self._evaluate(kwargs, raw_q, raw_r, shards)
            return self._get_accuracy(self.curr_function_dict, **kwargs)
        finally:
            self._computed = {}

    def _plan(self):
        """``(knn metrics, those the core computes, cluster metrics, clusters by the core)``."""
        names = self.get_curr_metrics()
        ours = isinstance(self.knn_func, ExactKNN)
        knn_names = [n for n in names if n in self.requires_knn() or (n in KNN_METRICS and self._builtin(n))]
        fast = [n for n in knn_names if ours and n in KNN_METRICS and self._builtin(n)]
        clusters = [n for n in names if n in self.requires_clustering()]
        core_clusters = self.kmeans_func is None and \
            type(self).get_cluster_labels is AccuracyCalculator.get_cluster_labels and \
            all(n in CLUSTER_METRICS and self._builtin(n) for n in clusters)
        return knn_names, fast, clusters, core_clusters

    def _divisible(self) -> bool:
        """Whether every metric asked for comes from the core's search (no embeddings
        needed whole on one rank)."""
        knn_names, fast, clusters, core_clusters = self._plan()
        return len(fast) == len(knn_names) and (not clusters or core_clusters) and \
            all(n in KNN_METRICS or n in CLUSTER_METRICS for n in self.get_curr_metrics())

    def _evaluate(self, kwargs, raw_q: Tensor, raw_r: Tensor, shards=None) -> None:
        """Fill ``kwargs`` (knn and cluster entries that the metrics need) and
        ``self._computed`` (built-in metrics computed by the core)."""
        query, reference = kwargs["query"], kwargs["reference"]
        riq = bool(kwargs["ref_includes_query"])
        ours = isinstance(self.knn_func, ExactKNN)
        knn_names, fast, clusters, core_clusters = self._plan()
        if knn_names:
            need_labels = len(fast) < len(knn_names)
            label_counts = label_match_counts(kwargs["query_labels"], kwargs["reference_labels"],
                                              self.label_comparison_fn)
            lone, keep = lone_queries(kwargs["query_labels"], label_counts, riq, self.label_comparison_fn)
            n_candidates = len(kwargs["reference_labels"]) - int(riq)
            if n_candidates < 1:
                raise ValueError("the reference set holds no item other than the query itself: no neighbours")
            k = self.determine_k(label_counts[1], len(kwargs["reference_labels"]), riq)
            k = max(1, min(int(k), n_candidates))  # PML asks faiss for more than exist (-1 indices)
            if not bool(keep.any()):
                LOGGER.warning("None of the query labels are in the reference set.")
            kwargs.update(label_counts=label_counts, lone_query_labels=lone, not_lone_query_mask=keep)
            if ours:
                LOGGER.info("running exact k-nn with k=%d", k)
                self._knn_fast(kwargs, fast, k, need_labels, raw_q, raw_r, keep, shards)
            else:
                distances, indices = self.knn_func(query, k, reference, riq)
                kwargs.update(knn_labels=kwargs["reference_labels"][indices], knn_distances=distances)
        if clusters:
            if core_clusters:
                # 1-D integer labels: the flat unique gives the same sorted codes as dim=0, much faster
                flat = raw_q.ndim == 1 and not raw_q.is_floating_point() and not raw_q.is_complex()
                codes = torch.unique(raw_q, return_inverse=True)[1] if flat else \
                    torch.unique(raw_q, dim=0, return_inverse=True)[1]
                found = evaluate_embeddings(query, codes, [n.lower() for n in clusters]) if shards is None else \
                    shards.set_values(codes, [n.lower() for n in clusters])
                self._computed.update({n: float(found[n.lower()]) for n in clusters})
            else:
                kwargs["cluster_labels"] = self.get_cluster_labels(**kwargs)

    def _knn_fast(self, kwargs, fast, k, need_labels, raw_q, raw_r, keep, shards=None) -> None:
        """One exact search: the built-in metrics ``fast`` from the core's keys, and
        ``knn_labels`` / ``knn_distances`` when a subclass's metric needs them."""
        query, reference, riq = kwargs["query"], kwargs["reference"], bool(kwargs["ref_includes_query"])
        relevant = None
        if self.label_comparison_fn is equal_rows:  # exact classes of the given labels (not their float copies)
            common = torch.promote_types(raw_q.dtype, raw_r.dtype)
            codes = torch.unique(torch.cat([raw_q.to(common), raw_r.to(common)]), dim=0, return_inverse=True)[1]
            labels, relevance = (codes[:len(raw_q)], codes[len(raw_q):]), None
            counts = torch.bincount(labels[1], minlength=int(codes.max()) + 1)
            relevant = counts[labels[0]] - int(riq)
            groups = labels[0]
        else:
            compare = self.label_comparison_fn
            labels = (kwargs["query_labels"], kwargs["reference_labels"])
            relevance = lambda q, g: compare(q.unsqueeze(1), g.unsqueeze(0)).to(torch.float64)  # noqa: E731
            relevant = relevant_per_query(labels[0], kwargs["label_counts"], riq)
            groups = labels[0]
        truncated = bool((relevant[keep] > k).any()) if fast else False
        keys = sorted({key for n in fast for key in keys_for(n, k, truncated)}) or ["cmc@1"]
        if shards is None:
            results, index, distances = self.knn_func.search(query, k if need_labels else 0, reference, riq,
                                                             labels=labels, keys=keys, relevance=relevance)
        else:  # divided between ranks: built-in metrics only, no neighbours wanted
            results = shards.search(keys, labels, relevance, self.knn_func.distance, self.knn_func.memory_budget)
        if need_labels:
            kwargs.update(knn_labels=kwargs["reference_labels"][index], knn_distances=distances)
        if not fast:
            return
        if not bool(keep.any()):
            self._computed.update({n: nan_accuracy(kwargs["label_counts"][0], self.return_per_class) for n in fast})
            return
        values = {key: results[key][keep] for key in keys}
        for n in fast:
            per_query = pml_values(n, values, relevant[keep], k)
            self._computed[n] = pml_reduce(per_query, groups[keep], self.avg_of_avgs, self.return_per_class)
