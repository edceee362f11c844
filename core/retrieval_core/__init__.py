"""retrieval_core: ranking and retrieval metrics computed on the tensors' own device.

Example:
    >>> import torch, retrieval_core
    >>> preds = torch.tensor([[0.9, 0.2, 0.5], [0.1, 0.8, 0.3]])
    >>> target = torch.tensor([[1, 0, 0], [0, 0, 1]])
    >>> r = retrieval_core.evaluate_scores(preds, target, ["ndcg@3", "hit_rate@1"])
    >>> sorted(r)
    ['hit_rate@1', 'ndcg@3']
"""
if __name__ != "retrieval_core":  # one module identity: never a second copy under another name
    raise ImportError(
        f"this package is imported as 'retrieval_core', not {__name__!r}; install the project "
        "(pip install -e .) and `import retrieval_core`"
    )
from .stats.aggregate import MetricResults, aggregate, reduce_values
from .ranking.dense import rank_dense
from .ranking.flat import rank_flat
from .ranking.groups import group_flat
from .stats.comparison import Comparison, compare, compare_many
from .stats.allpairs import AllPairs, compare_all
from .stats.correlation import rank_correlation
from .evaluation.embeddings import evaluate_embeddings
from .evaluation.scores import QueryValues, evaluate_scores, score_values
from .ranking import Ranking
from .evaluation.ranked import evaluate_ranked
from .evaluation.topk import evaluate_topk
from .metrics.keys import MetricKey, known_metrics, metric_key, parse_metrics, ranking_values
from .metrics.spec import ALIASES, REGISTRY
from .validate.stats import N_RESAMPLES

__all__ = [
    "N_RESAMPLES",
    "ALIASES",
    "AllPairs",
    "Comparison",
    "REGISTRY",
    "MetricKey",
    "MetricResults",
    "QueryValues",
    "Ranking",
    "aggregate",
    "compare",
    "compare_all",
    "compare_many",
    "evaluate_embeddings",
    "evaluate_ranked",
    "evaluate_scores",
    "evaluate_topk",
    "group_flat",
    "known_metrics",
    "metric_key",
    "parse_metrics",
    "rank_dense",
    "rank_correlation",
    "rank_flat",
    "ranking_values",
    "reduce_values",
    "score_values",
]

from .version import __version__  # noqa: E402  (one source: pyproject.toml)
