"""Every input is checked once per public call (issue 28): the checks are declared in one
register (retrieval_core.validate.counting) and counted here on every path of one process,
the adapters' update and compute included (the distributed paths:
tests/distributed/test_checks_once_distributed.py)."""
from __future__ import annotations

import inspect
from typing import Callable, Dict

import numpy as np
import pytest
import torch

import retrieval_core as rc
from retrieval_core import distributed as D
from retrieval_core import validate
from retrieval_core.validate.counting import CHECKS, count_checks

G = torch.Generator().manual_seed(3)
P, T = torch.rand(6, 8, generator=G), (torch.rand(6, 8, generator=G) < 0.4).long()
X, Y = torch.randn(24, 4, generator=G), torch.randint(0, 3, (24,), generator=G)
GAINS = torch.randint(0, 2, (6, 5), generator=G)
CATEGORIES = ["a", "b"] * 3
FLAT = dict(indexes=torch.arange(6).repeat_interleave(8))
TOPK, TOPK_TRUTH = P.topk(3, dim=1).indices, T.nonzero().T  # top-k lists of 6 users over 8 items
TWO_TOWER_TRUTH = torch.tensor([[0, 0, 2, 5], [1, 4, 0, 7]])  # (user, item) pairs
TWO_TOWER_SEEN = torch.zeros(6, 18, dtype=torch.bool).index_put_((torch.tensor([0, 3]), torch.tensor([2, 9])),
                                                                 torch.tensor(True))


# TREC: rels 0/1/2, a document judged in one query only, a retrieved unjudged one, a query
# without a run entry (complete=True), keys with (map, P_2, bpref) and without (mrr@10,
# ndcg@3 graded) a trec_eval name, each through its own path
TREC_QRELS = {"q1": {"a": 1, "b": 0, "c": 2}, "q2": {"x": 2, "y": 0}, "q3": {"z": 1}}
TREC_RUN = {"q1": {"a": 0.9, "b": 0.8, "d": 0.7, "c": 0.6}, "q2": {"y": 1.0, "x": 0.5}}
TREC_MEASURES = ["map", "P_2", "bpref", "mrr@10", "ndcg@3", "recall@2"]


def _trec_dicts():
    from retrieval_core.trec import evaluate_trec, qrels_from_dict, run_from_dict
    return evaluate_trec(qrels_from_dict(TREC_QRELS), run_from_dict(TREC_RUN, tag="r"), TREC_MEASURES, level=1,
                         complete=True, ci=0.9)


def _trec_files():
    import tempfile
    from pathlib import Path
    from retrieval_core.trec import evaluate_trec, read_qrels, read_run
    with tempfile.TemporaryDirectory() as folder:
        qrels, run = Path(folder) / "qrels", Path(folder) / "run"
        qrels.write_text("".join(f"{q} 0 {d} {r}\n" for q, docs in TREC_QRELS.items() for d, r in docs.items()))
        run.write_text("".join(f"{q} Q0 {d} {i + 1} {s} r\n" for q, docs in TREC_RUN.items()
                               for i, (d, s) in enumerate(docs.items())))
        return evaluate_trec(read_qrels(qrels), read_run(run), TREC_MEASURES, max_per_query=3)


def _ignite(cls_name: str, batch, *args, **options):
    import ignite_retrieval
    metric = getattr(ignite_retrieval, cls_name)(*args, **options)
    return lambda: metric.update(batch), metric.compute


def _lightning(cls_name: str, batch, *args, **options):
    import lightning_retrieval
    metric = getattr(lightning_retrieval, cls_name)(*args, **options)
    return lambda: metric.update(*batch), metric.compute


CALLS: Dict[str, Callable[[], object]] = {
    "scores": lambda: rc.evaluate_scores(P, T, ["mrr@3", "ndcg@5", "map@r"]),
    "scores_options": lambda: rc.evaluate_scores(P, T, ["mrr@3", "erc:cmc@1"], ci=0.9, n_resamples=20,
                                                 categories=CATEGORIES, confidence=torch.rand(6, generator=G),
                                                 keep_per_query=True, ties="expected"),
    "scores_exclude": lambda: rc.evaluate_scores(P, T, ["mrr@3", "map@r"], exclude=TWO_TOWER_TRUTH, ties="expected"),
    "scores_numpy": lambda: rc.evaluate_scores(P.numpy(), T.numpy(), ["mrr@3"], mask=np.ones((6, 8), bool)),
    "scores_flat": lambda: rc.evaluate_scores(P.reshape(-1), T.reshape(-1), ["mrr@3", "map"], **FLAT),
    "scores_n_relevant": lambda: rc.evaluate_scores(P, T, ["recall@3", "ndcg@3"], n_relevant=T.sum(1) + 2,
                                                    ci=0.9, n_resamples=20),
    "scores_flat_numpy": lambda: rc.evaluate_scores(P.reshape(-1).numpy(), T.reshape(-1).numpy(), ["mrr@3"],
                                                    indexes=FLAT["indexes"].numpy(), categories=np.array(["a"] * 48),
                                                    confidence=np.repeat(np.arange(6.0), 8)),
    "scores_flat_n_relevant": lambda: rc.evaluate_scores(P.reshape(-1), T.reshape(-1), ["recall@3", "map"],
                                                         n_relevant=T.sum(1) + 1, **FLAT),
    "ranked": lambda: rc.evaluate_ranked(GAINS, ["ndcg@3", "map"], n_relevant=(GAINS > 0).sum(1) + 1,
                                         categories=CATEGORIES, ci=0.8, n_resamples=20),
    "ranked_numpy": lambda: rc.evaluate_ranked(GAINS.numpy(), ["mrr", "recall@3"], mask=np.ones((6, 5), bool),
                                               n_relevant=((GAINS > 0).sum(1) + 1).numpy(),
                                               categories=np.array(CATEGORIES), keep_per_query=True),
    "ranked_flat": lambda: rc.evaluate_ranked(GAINS.reshape(-1), ["mrr", "ndcg"],
                                              indexes=torch.arange(6).repeat_interleave(5)),
    "score_values_flat_numpy": lambda: rc.score_values(P.reshape(-1).numpy(), T.reshape(-1).numpy(), ["ndcg@3"],
                                                       indexes=FLAT["indexes"].numpy()),
    "trec_dicts": lambda: _trec_dicts(),
    "trec_files": lambda: _trec_files(),
    "score_values": lambda: rc.score_values(P, T, ["mrr@3"]),
    "embeddings": lambda: rc.evaluate_embeddings(X, Y, ["cmc@1", "map@r", "nmi"], return_neighbours=2),
    "embeddings_gallery": lambda: rc.evaluate_embeddings(
        X[:6], Y[:6], ["cmc@1"], gallery=X, gallery_labels=Y, query_ids=torch.arange(6), gallery_ids=torch.arange(24),
        categories=Y[:6], confidence=torch.rand(6, generator=G), ci=0.9, n_resamples=20),
    "embeddings_per_class": lambda: rc.evaluate_embeddings(X, Y, ["cmc@1"], per_class="all", ci=0.9, n_resamples=20),
    "embeddings_numpy": lambda: rc.evaluate_embeddings(X.numpy(), Y.numpy(), ["cmc@1"]),
    "embeddings_two_tower": lambda: rc.evaluate_embeddings(
        X[:6], None, ["ndcg@3", "map@r"], gallery=X[6:], distance="dot", relevance=TWO_TOWER_TRUTH,
        exclude=TWO_TOWER_SEEN.to_sparse_csr()),
    "embeddings_exclude": lambda: rc.evaluate_embeddings(X, Y, ["cmc@1", "map@r"], exclude=TWO_TOWER_TRUTH),
    "across_ranks": lambda: D.evaluate_embeddings_across_ranks(X, Y, ["cmc@1"], shard_gallery=True),
    "split": lambda: D.evaluate_split(X, Y, ["cmc@1", "nmi"], per_class="macro"),
    "topk": lambda: rc.evaluate_topk(TOPK, TOPK_TRUTH, ["ndcg@3", "map_capped@2", "novelty@3", "coverage@3",
                                                        "serendipity@3"],
                                     item_popularity=torch.arange(1, 9), item_categories=torch.arange(8) % 3,
                                     history=torch.tensor([[0, 1, 2], [5, 6, 7]]), categories=CATEGORIES, ci=0.9,
                                     n_resamples=20),
    "topk_sparse_numpy": lambda: rc.evaluate_topk(TOPK.numpy(), T.double().to_sparse_csr(), ["recall@3", "gini@2"],
                                                  keep_per_query=True),
    "aggregate": lambda: rc.aggregate(torch.rand(4, 2, dtype=torch.float64), ["a", "b"], ci=0.9, n_resamples=20),
}

ADAPTERS = {
    "ignite_ranking": lambda: _ignite("RankingMetrics", (P, T), ["mrr@3", "ndcg"]),
    "ignite_embeddings": lambda: _ignite("EmbeddingMetrics", (X, Y), ["cmc@1", "map@r"]),
    "lightning_ranking": lambda: _lightning("RankingMetrics", (P, T), ["mrr@3", "ndcg"]),
    "lightning_embeddings": lambda: _lightning("EmbeddingMetrics", (X, Y), ["cmc@1", "map@r"], per_class="macro"),
    "lightning_flat": lambda: _lightning("RetrievalMAP", (P.reshape(-1), T.reshape(-1), FLAT["indexes"])),
    "ignite_topk": lambda: _ignite("TopKMetrics", {"topk": TOPK, "truth": TOPK_TRUTH, "user_ids": torch.arange(6),
                                                   "history": TOPK_TRUTH}, ["recall@3", "coverage@3"], n_items=8),
    "lightning_topk": lambda: _lightning("TopKMetrics", (TOPK, T.to_sparse()), ["ndcg@3", "gini@2"], n_items=8),
}


def _once(counts) -> None:
    assert counts, "no check ran"
    assert all(n == 1 for n in counts.values()), {k: n for k, n in counts.items() if n != 1}


@pytest.mark.parametrize("name", list(CALLS))
def test_a_public_call_checks_each_input_once(name):
    with count_checks() as counts:
        CALLS[name]()
    _once(counts)


@pytest.mark.parametrize("name", list(ADAPTERS))
def test_an_adapter_checks_each_input_once_per_update_and_per_compute(name):
    update, compute = ADAPTERS[name]()
    for _ in range(2):
        with count_checks() as counts:
            update()
        _once(counts)
    with count_checks() as counts:
        compute()
    _once(counts)


def test_the_embedding_checks_run_once_on_every_embedding_path():
    """The one check sequence (inputs.embedding_inputs): the same checks, once, from each entry point."""
    seen = []
    for call in (lambda: rc.evaluate_embeddings(X, Y, ["cmc@1"]), lambda: D.evaluate_split(X, Y, ["cmc@1"]),
                 lambda: D.evaluate_embeddings_across_ranks(X, Y, ["cmc@1"])):
        with count_checks() as counts:
            call()
        seen.append(dict(counts))
    assert seen[0] == seen[1] == seen[2]
    assert {"check_embeddings(query)", "check_labels(query_labels)", "check_embedding_values"} <= set(seen[0])


# the checks each input form's call makes (inputs/: one sequence per form), each once; the
# evaluations also check the per-query values they aggregate (check_representable); dense
# rows on the CPU check their values inside the ranking loop (check_values only on an error)
AGGREGATED = {"check_representable"}
EXPECTED = {
    "scores": {"check_score_options", "check_stats_options", "check_scores", "check_per_query_keys",
               "check_tie_keys"} | AGGREGATED,
    "scores_exclude": {"check_score_options", "check_stats_options", "check_scores", "check_per_query_keys",
                       "check_tie_keys", "check_user_items(exclude)"} | AGGREGATED,
    "scores_flat": {"check_score_options", "check_stats_options", "check_scores", "check_values",
                    "check_per_query_keys", "check_tie_keys"} | AGGREGATED,
    "scores_flat_n_relevant": {"check_score_options", "check_scores", "check_values", "check_per_query_keys",
                               "check_stats_options"} | AGGREGATED,
    "ranked_numpy": {"check_score_options", "check_per_query_keys", "check_stats_options"} | AGGREGATED,
    "score_values_flat_numpy": {"check_ties(stable)", "check_per_query_keys", "check_tie_keys", "check_scores"},
    "topk": {"check_score_options", "check_stats_options", "check_topk", "check_user_items(truth)",
             "check_item_data", "check_topk_keys", "check_categories", "check_user_items(history)"} | AGGREGATED,
    "topk_sparse_numpy": {"check_score_options", "check_stats_options", "check_topk", "check_user_items(truth)",
                          "check_item_data", "check_topk_keys"} | AGGREGATED,
    "trec_dicts": {"check_relevance_level", "check_per_query_keys", "check_choice(empty)", "check_choice(reduce)",
                   "check_ci_options", "check_keep_per_query", "check_representable"},
}


@pytest.mark.parametrize("name", list(EXPECTED))
def test_each_input_form_makes_its_checks(name):
    """The dense, flat, R-given, ranked (NumPy), score_values and TREC paths: the checks of
    their inputs/ sequence, no other, each once."""
    with count_checks() as counts:
        CALLS[name]()
    assert dict(counts) == {c: 1 for c in EXPECTED[name]}


def test_the_trec_paths_check_as_one_another():
    """A TREC evaluation from dicts and one from files make the same checks, once each (the
    keys without a trec_eval name checked once, not once per group of queries)."""
    seen = []
    for name in ("trec_dicts", "trec_files"):
        with count_checks() as counts:
            CALLS[name]()
        seen.append(dict(counts))
    assert set(seen[0]) == set(seen[1]) and all(n == 1 for counts in seen for n in counts.values())


def test_a_check_made_twice_is_caught(monkeypatch):
    """The counter sees a check that a sequence makes twice (what the tests above would
    report): here inputs.ranked's key checks, run twice."""
    from retrieval_core.inputs import ranked
    once = ranked.ranked_keys
    monkeypatch.setattr(ranked, "ranked_keys", lambda metrics: (once(metrics), once(metrics))[1])
    with count_checks() as counts:
        CALLS["ranked"]()
    with pytest.raises(AssertionError, match="check_per_query_keys"):
        _once(counts)


def test_n_relevant_checks_empty_and_reduce_once():
    with count_checks() as counts:
        CALLS["scores_n_relevant"]()
    assert counts["check_score_options"] == 1 and "check_choice(empty)" not in counts


def test_every_check_of_validate_is_declared():
    """A ``check_*`` function of the validate package is in the register (so it is counted)."""
    for name in validate.__dict__:
        value = getattr(validate, name)
        if name.startswith("check_") and inspect.isfunction(value):
            assert CHECKS.get(name) is value, name


def test_a_check_inside_a_check_is_part_of_it():
    with count_checks() as counts:
        validate.check_score_options(ties="stable", empty="skip", reduce="mean")
    assert dict(counts) == {"check_score_options": 1}  # check_ties, check_choice: inside it


def test_counting_nests_and_ends():
    with count_checks() as outer:
        validate.check_ties("stable")
        with count_checks() as inner:
            validate.check_ties("expected")
    validate.check_ties("stable")
    assert outer["check_ties(stable)"] == 1 and outer["check_ties(expected)"] == 1 and dict(inner) == {
        "check_ties(expected)": 1}


def test_one_default_of_n_resamples():
    """N_RESAMPLES is the default of every signature that takes n_resamples (but the paired tests')."""
    from retrieval_core.evaluation.accumulator import EmbeddingAccumulator, ScoreAccumulator
    import ignite_retrieval
    import lightning_retrieval
    for f in (rc.evaluate_scores, rc.evaluate_embeddings, rc.evaluate_ranked, rc.aggregate, D.evaluate_split,
              D.evaluate_embeddings_across_ranks, ScoreAccumulator, EmbeddingAccumulator,
              ignite_retrieval.RankingMetrics, ignite_retrieval.EmbeddingMetrics,
              lightning_retrieval.RankingMetrics, lightning_retrieval.EmbeddingMetrics):
        assert inspect.signature(f).parameters["n_resamples"].default is rc.N_RESAMPLES, f
