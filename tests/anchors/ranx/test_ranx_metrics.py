"""Anchor tests against ranx's metrics (``ranx.evaluate``), on the cases of
``tests.references.GRADED_CASES`` (shared with the trec_eval cross-checks): random
continuous scores without ties, integer graded gains 0..3 with about 25% relevant, and
queries with no relevant candidate (R = 0).

R = 0: ranx reports 0 for such a query; our metrics are undefined there. So ranx equals
ours under ``empty="zero"`` on every query, and ours under ``empty="skip"`` on the
queries with R > 0 (``check_against_anchor``).
"""
from __future__ import annotations

import warnings

import pytest
import torch

from tests.references import check_against_anchor, graded_case, qid, to_trec

KS = (1, 3, 10, 50)
ATOL = 1e-6


RANX_KEYS = {
    "map": "map",
    "mrr": "mrr",
    "ndcg": "ndcg",
    "ndcg_burges": "ndcg_exp",
    "r-precision": "r_precision",
    **{f"map@{k}": f"map@{k}" for k in KS},
    **{f"precision@{k}": f"precision@{k}" for k in KS},
    **{f"recall@{k}": f"recall@{k}" for k in KS},
    **{f"mrr@{k}": f"mrr@{k}" for k in KS},
    **{f"ndcg@{k}": f"ndcg@{k}" for k in KS},
    **{f"ndcg_burges@{k}": f"ndcg_exp@{k}" for k in KS},
    **{f"f1@{k}": f"f1@{k}" for k in KS},
    **{f"hit_rate@{k}": f"hit_rate@{k}" for k in KS},
    **{f"dcg@{k}": f"dcg@{k}" for k in KS},
    **{f"dcg_burges@{k}": f"dcg_exp@{k}" for k in KS},
}
# ranx compiles every metric with numba on first use (about a minute, cached
# afterwards): one evaluate call per dataset, on few datasets.
RANX_DATASETS = ("q7_n5", "q50_n30", "q50_n200")


@pytest.fixture(scope="module")
def ranx_results():
    import ranx
    out = {}
    for name in RANX_DATASETS:
        preds, target, _ = graded_case(name)
        qrels, run = to_trec(preds, target)
        qrels, run = ranx.Qrels(qrels), ranx.Run(run)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # numba type-safety warnings
            res = ranx.evaluate(qrels, run, list(RANX_KEYS), return_mean=False, save_results_in_run=False)
        ids = list(run.get_query_ids())
        assert ids == [qid(i) for i in range(preds.shape[0])]
        out[name] = {m: torch.as_tensor(res[m], dtype=torch.float64) for m in RANX_KEYS}
    return out


@pytest.mark.parametrize("name", RANX_DATASETS)
def test_ranx_per_query(ranx_results, name):
    preds, target, n_relevant = graded_case(name)
    failures = []
    for metric, key in RANX_KEYS.items():
        try:
            check_against_anchor(ranx_results[name][metric], preds, target, key, n_relevant)
        except AssertionError as e:  # collect all, report together
            failures.append(f"ranx {metric} vs ours {key}: {e}")
    assert not failures, "\n".join(failures)


def test_ranx_f1_is_harmonic_mean_of_ranx_precision_and_recall(ranx_results):
    """Our f1@k = 2 hits / (k + R) is the harmonic mean of precision@k (÷ k) and recall@k."""
    res = ranx_results["q50_n30"]
    for k in KS:
        p, r = res[f"precision@{k}"], res[f"recall@{k}"]
        f1 = torch.where(p + r > 0, 2 * p * r / (p + r).clamp(min=1e-300), torch.zeros_like(p))
        torch.testing.assert_close(res[f"f1@{k}"], f1, atol=ATOL, rtol=0)
