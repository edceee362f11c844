"""Tie modes (``ties=``): "expected" against the mean over every order of tied
candidates (brute force), "optimistic"/"pessimistic" against the best/worst order,
anchors (scikit-learn, torchmetrics) on tied scores, hand toys, every input path.

The brute force scores every permutation of a small row's columns with the stable
mode (equal scores go by column, so each order of each tied group comes up equally
often among the permutations) and averages: it shares nothing with the closed forms
of retrieval_core.metrics.tie_kernels but the stable kernels, which the anchor tests check.
"""
from __future__ import annotations

import itertools
import math

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import retrieval_core as rc
from retrieval_core import sizing
from retrieval_core.metrics.spec import AT_K, AT_R, AT_X, REGISTRY

MODES = ("expected", "optimistic", "pessimistic")


def keys_for(n: int, k: int, mode: str = "expected"):
    """Every per-query key of the registry, at cutoff k, @r and whole list where it has them."""
    keys = []
    for name, spec in sorted(REGISTRY.items()):
        if not spec.per_query:
            continue
        forms = [(spec.plain, name)] if spec.plain else []
        forms += [(AT_K, f"{name}@{k}")] if AT_K in spec.cutoffs else []
        forms += [(AT_R, f"{name}@r")] if AT_R in spec.cutoffs and spec.plain != AT_R else []
        forms += [(AT_X, f"{name}@{p}") for p in (0.5, 0.8)] if AT_X in spec.cutoffs else []
        # the forms without a ties="expected" kernel (auroc@k, err) are refused: their own tests below
        keys += [key for form, key in forms if mode != "expected" or spec.has_expected(form)]
    return keys


def permuted_rows(preds: torch.Tensor, target: torch.Tensor):
    """Every column permutation of one row, stacked: ``[n!, n]`` scores and gains."""
    perms = torch.tensor(list(itertools.permutations(range(preds.numel()))))
    return preds[perms], target[perms]


def stable_per_permutation(preds, target, keys):
    p, t = permuted_rows(preds, target)
    r = rc.evaluate_scores(p, t, keys, reduce="none", empty="skip")
    return {key: r[key] for key in keys}


def same(a: float, b: float, tol: float = 1e-9) -> bool:
    return (math.isnan(a) and math.isnan(b)) or abs(a - b) <= tol


@st.composite
def tied_row(draw, max_n=6):
    n = draw(st.integers(1, max_n))
    levels = draw(st.integers(1, 3))
    scores = draw(st.lists(st.integers(0, levels - 1), min_size=n, max_size=n))
    graded = draw(st.booleans())
    gains = draw(st.lists(st.integers(0, 3 if graded else 1), min_size=n, max_size=n))
    k = draw(st.integers(1, n))
    return torch.tensor(scores, dtype=torch.float32), torch.tensor(gains, dtype=torch.float32), k


SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(tied_row())
def test_expected_is_the_mean_over_every_order_of_ties(row):
    preds, target, k = row
    keys = keys_for(preds.numel(), k)
    got = rc.evaluate_scores(preds[None], target[None], keys, ties="expected", reduce="none")
    per_perm = stable_per_permutation(preds, target, keys)
    for key in keys:
        values = per_perm[key]
        want = float("nan") if torch.isnan(values).all() else values.mean().item()
        assert same(got[key].item(), want), (key, got[key].item(), want)


# keys whose value cannot go down when a relevant candidate moves ahead of a less relevant one
# (fall_out: cannot go up); map_hits, wap and auroc@k divide by what the cut holds, so the
# relevant-first order need not be their best (checked against that order instead)
NOT_MONOTONE = ("map_hits", "wap", "auroc@")


def gain_first_order(preds, target, descending: bool):
    """The order (score desc, gain desc/asc, column asc) as a permutation of the columns."""
    by_gain = torch.sort(target, descending=descending, stable=True).indices
    by_score = torch.sort(preds[by_gain], descending=True, stable=True).indices
    return by_gain[by_score]


@SETTINGS
@given(tied_row())
def test_optimistic_and_pessimistic_are_the_best_and_worst_orders(row):
    preds, target, k = row
    keys = keys_for(preds.numel(), k, "optimistic")
    per_perm = stable_per_permutation(preds, target, keys)
    for mode in ("optimistic", "pessimistic"):
        got = rc.evaluate_scores(preds[None], target[None], keys, ties=mode, reduce="none")
        order = gain_first_order(preds, target, descending=mode == "optimistic")
        # the same order given as distinct scores, ranked by the stable mode
        ranked = torch.arange(preds.numel(), 0, -1, dtype=torch.float32)
        explicit = torch.empty_like(ranked).scatter_(0, order, ranked)
        direct = rc.evaluate_scores(explicit[None], target[None], keys, reduce="none")
        for key in keys:
            assert same(got[key].item(), direct[key].item()), (mode, key)
            if key.startswith(NOT_MONOTONE):
                continue
            values = per_perm[key]
            if torch.isnan(values).all():
                assert math.isnan(got[key].item())
                continue
            best = mode == "optimistic"
            if key.startswith("fall_out"):
                best = not best
            want = values.max() if best else values.min()
            assert same(got[key].item(), want.item()), (mode, key, got[key].item(), want.item())


@SETTINGS
@given(tied_row(max_n=7), st.randoms(use_true_random=False))
def test_expected_does_not_depend_on_the_column_order(row, rnd):
    preds, target, k = row
    keys = keys_for(preds.numel(), k)
    perm = list(range(preds.numel()))
    rnd.shuffle(perm)
    a = rc.evaluate_scores(preds[None], target[None], keys, ties="expected", reduce="none")
    b = rc.evaluate_scores(preds[perm][None], target[perm][None], keys, ties="expected", reduce="none")
    for key in keys:
        assert same(a[key].item(), b[key].item(), 1e-12), key


def test_hand_toys():
    # scores [2, 1, 1, 1, 0], gains [0, 1, 0, 0, 1]: one relevant candidate in a group of three at ranks 2-4
    preds = torch.tensor([[2.0, 1.0, 1.0, 1.0, 0.0]])
    target = torch.tensor([[0.0, 1.0, 0.0, 0.0, 1.0]])
    r = rc.evaluate_scores(preds, target, ["mrr", "hit_rate@2", "precision@3", "map", "auroc", "ndcg@2", "map_hits@2",
                                           "recall@2", "fall_out@2", "dcg@3"], ties="expected")
    assert r["mrr"].item() == pytest.approx((1 / 2 + 1 / 3 + 1 / 4) / 3 + 0)  # first hit is the group's
    assert r["hit_rate@2"].item() == pytest.approx(1 / 3)
    assert r["precision@3"].item() == pytest.approx((2 / 3) / 3)
    # AP: the group's hit at rank 2, 3 or 4 (P = 1/2, 1/3, 1/4), the other at rank 5 (P = 2/5)
    assert r["map"].item() == pytest.approx(((1 / 2 + 1 / 3 + 1 / 4) / 3 + 2 / 5) / 2)
    # (relevant, non-relevant) pairs in order: the last candidate wins none, the grouped one loses to
    # rank 1 and ties with its two group mates (half each): 1 of 2 * 3 pairs
    assert r["auroc"].item() == pytest.approx(1 / 6)
    ideal2 = 1.0 + 1 / math.log2(3)
    assert r["ndcg@2"].item() == pytest.approx((1 / 3) / math.log2(3) / ideal2)
    assert r["map_hits@2"].item() == pytest.approx(1 / 3 * (1 / 2))  # hit at rank 2 only: P@2 / 1
    assert r["recall@2"].item() == pytest.approx((1 / 3) / 2)
    assert r["fall_out@2"].item() == pytest.approx((2 - 1 / 3) / 3)
    assert r["dcg@3"].item() == pytest.approx((1 / 3) / math.log2(3) + (1 / 3) / 2)
    opt = rc.evaluate_scores(preds, target, ["mrr", "map"], ties="optimistic")
    pes = rc.evaluate_scores(preds, target, ["mrr", "map"], ties="pessimistic")
    assert opt["mrr"].item() == 0.5 and pes["mrr"].item() == 0.25
    assert opt["map"].item() == pytest.approx((1 / 2 + 2 / 5) / 2)
    assert pes["map"].item() == pytest.approx((1 / 4 + 2 / 5) / 2)


def test_all_tied_whole_row_is_the_prior():
    # every candidate tied: precision@k is R / n, AUROC is 1/2, hit_rate@1 is R / n
    target = torch.tensor([[1, 0, 0, 1, 0, 0, 0, 1]])
    preds = torch.zeros(1, 8)
    r = rc.evaluate_scores(preds, target, ["precision@3", "auroc", "hit_rate@1", "r_precision"], ties="expected")
    assert r["precision@3"].item() == pytest.approx(3 / 8)
    assert r["auroc"].item() == pytest.approx(0.5)
    assert r["hit_rate@1"].item() == pytest.approx(3 / 8)
    assert r["r_precision"].item() == pytest.approx(3 / 8)


def many_ties(generator, q=40, n=30, levels=4, graded=True):
    preds = torch.randint(0, levels, (q, n), generator=generator).float()
    hi = 4 if graded else 2
    target = torch.randint(0, hi, (q, n), generator=generator).float()
    target[0] = 0
    return preds, target


def test_auroc_equals_sklearn_with_ties(generator):
    skm = pytest.importorskip("sklearn.metrics")
    preds, target = many_ties(generator, graded=False)
    got = rc.evaluate_scores(preds, target, ["auroc"], ties="expected", reduce="none")["auroc"]
    for i in range(preds.shape[0]):
        y = target[i].numpy()
        if 0 < y.sum() < y.size:
            assert got[i].item() == pytest.approx(skm.roc_auc_score(y, preds[i].numpy()), abs=1e-12)
        else:
            assert math.isnan(got[i].item())


@pytest.mark.parametrize("k", [1, 3, 10, None])
def test_ndcg_equals_sklearn_and_torchmetrics_with_ties(generator, k):
    skm = pytest.importorskip("sklearn.metrics")
    tmf = pytest.importorskip("torchmetrics.functional.retrieval")
    preds, target = many_ties(generator)
    key = "ndcg" if k is None else f"ndcg@{k}"
    got = rc.evaluate_scores(preds, target, [key], ties="expected", reduce="none")[key]
    for i in range(1, preds.shape[0]):
        if target[i].sum() == 0:
            continue
        want = skm.ndcg_score(target[i:i + 1].numpy(), preds[i:i + 1].numpy(), k=k, ignore_ties=False)
        assert got[i].item() == pytest.approx(want, abs=1e-9)
        tm = tmf.retrieval_normalized_dcg(preds[i].double(), target[i].long(), top_k=k)
        assert got[i].item() == pytest.approx(tm.item(), abs=1e-6)


def test_stable_is_not_the_anchor_on_ties(generator):
    """The anchor comparison above can fail: stable tie order differs from sklearn here."""
    skm = pytest.importorskip("sklearn.metrics")
    preds, target = many_ties(generator, graded=False)
    stable = rc.evaluate_scores(preds, target, ["auroc"], reduce="none")["auroc"]
    rows = [i for i in range(preds.shape[0]) if 0 < target[i].sum() < target.shape[1]]
    diffs = [abs(stable[i].item() - skm.roc_auc_score(target[i].numpy(), preds[i].numpy())) for i in rows]
    assert max(diffs) > 1e-3


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("sync_free", [False, True])
def test_flat_and_masked_inputs_agree_with_dense(generator, mode, sync_free):
    preds, target = many_ties(generator, q=12, n=9)
    keys = [k for k in keys_for(9, 4, mode) if not k.startswith("auroc@")]
    with sizing.force_sync_free(sync_free):
        dense = rc.evaluate_scores(preds, target, keys, ties=mode, reduce="none")
        # flat form, entries shuffled: under "expected" the entry order does not matter; under the
        # gain orders, ties of equal gain go by appearance, which the shuffle changes: same values
        # (equal gains are interchangeable)
        perm = torch.randperm(preds.numel(), generator=generator)
        idx = torch.arange(12).repeat_interleave(9)
        flat = rc.evaluate_scores(preds.reshape(-1)[perm], target.reshape(-1)[perm], keys, indexes=idx[perm],
                                  ties=mode, reduce="none")
        # padded dense rows: three extra masked columns with the top score
        pad = torch.cat([preds, torch.full((12, 3), 9.0)], 1)
        padt = torch.cat([target, torch.ones(12, 3)], 1)
        mask = torch.cat([torch.ones(12, 9, dtype=torch.bool), torch.zeros(12, 3, dtype=torch.bool)], 1)
        masked = rc.evaluate_scores(pad, padt, keys, mask=mask, ties=mode, reduce="none")
    for key in keys:
        torch.testing.assert_close(flat[key], dense[key], equal_nan=True, rtol=0, atol=1e-12, msg=key)
        torch.testing.assert_close(masked[key], dense[key], equal_nan=True, rtol=0, atol=1e-12, msg=key)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("distance", ["cosine", "dot", "hamming"])
def test_embeddings_with_duplicates_equal_score_mode(generator, mode, distance):
    keys = ["map@r", "mrr", "ndcg@3", "hit_rate@2", "precision@4", "map_hits@3", "r_precision", "auroc"]
    if distance == "hamming":
        x = torch.randint(0, 2, (24, 5), generator=generator).float()
        scores = -((x[:, None] != x[None]).sum(-1)).float()
    else:
        x = torch.randn(5, 4, generator=generator)[torch.randint(0, 5, (24,), generator=generator)]
        y = torch.nn.functional.normalize(x) if distance == "cosine" else x
        scores = y @ y.T
    labels = torch.randint(0, 3, (24,), generator=generator)
    got = rc.evaluate_embeddings(x, labels, keys, distance=distance, ties=mode, reduce="none")
    mask = ~torch.eye(24, dtype=torch.bool)
    want = rc.evaluate_scores(scores, labels[:, None] == labels[None], keys, mask=mask, ties=mode, reduce="none")
    for key in keys:
        torch.testing.assert_close(got[key], want[key], equal_nan=True, rtol=0, atol=1e-12, msg=key)


def test_expected_differs_from_stable_only_with_ties(generator):
    preds = torch.rand(20, 15, generator=generator)  # no ties
    target = torch.randint(0, 3, (20, 15), generator=generator)
    keys = [k for k in keys_for(15, 5) if k != "auroc@5"]
    for mode in MODES:
        a = rc.evaluate_scores(preds, target, keys, ties=mode, reduce="none")
        b = rc.evaluate_scores(preds, target, keys, reduce="none")
        for key in keys:
            torch.testing.assert_close(a[key], b[key], equal_nan=True, rtol=0, atol=1e-12, msg=(mode, key))


def test_adapters_pass_ties_through(generator):
    ig = pytest.importorskip("ignite_retrieval")
    lt = pytest.importorskip("lightning_retrieval")
    preds, target = many_ties(generator, q=10, n=8)
    keys = ["ndcg@3", "map@r", "mrr", "auroc"]
    for mode in MODES:
        want = rc.evaluate_scores(preds, target, keys, ties=mode)
        m = ig.RankingMetrics(keys, ties=mode)
        m.update({"y_pred": preds[:4], "y": target[:4]})
        m.update({"y_pred": preds[4:], "y": target[4:]})
        got_ig = m.compute()
        n = lt.RankingMetrics(keys, ties=mode)
        n.update(preds[:6], target[:6])
        n.update(preds[6:], target[6:])
        got_lt = n.compute()
        for key in keys:
            assert got_ig[key] == pytest.approx(want[key].item(), abs=1e-12)
            assert got_lt[key].item() == pytest.approx(want[key].item(), abs=1e-12)


def test_unsupported_combinations_raise():
    p, t = torch.zeros(2, 4), torch.tensor([[1, 0, 0, 1], [0, 1, 0, 0]])
    with pytest.raises(NotImplementedError, match=r"auroc@2 has no closed form under ties='expected'"):
        rc.evaluate_scores(p, t, ["auroc@2"], ties="expected")
    with pytest.raises(ValueError, match=r"ties must be one of 'stable', 'expected', 'optimistic', 'pessimistic'"):
        rc.evaluate_scores(p, t, ["mrr"], ties="random")
    x, labels = torch.randn(6, 3), torch.tensor([0, 1, 0, 1, 0, 1])
    with pytest.raises(NotImplementedError, match=r"ties='pessimistic' needs backend='torch'; got backend='faiss'"):
        rc.evaluate_embeddings(x, labels, ["mrr"], distance="euclidean", ties="pessimistic", backend="faiss")


DROPIN_TIE_CASES = [
    ("RetrievalNormalizedDCG", {}), ("RetrievalNormalizedDCG", {"top_k": 3}), ("RetrievalAUROC", {}),
]


@pytest.mark.parametrize("name,kwargs", DROPIN_TIE_CASES)
def test_lightning_dropins_average_ties_as_torchmetrics(generator, name, kwargs):
    lr = pytest.importorskip("lightning_retrieval")
    tmr = pytest.importorskip("torchmetrics.retrieval")
    preds, target = many_ties(generator, q=30, n=12, graded=name != "RetrievalAUROC")
    target[0, 0] = 1  # no empty query (torchmetrics and we treat those differently for AUROC)
    target[:, -1] = 0
    idx = torch.arange(30).repeat_interleave(12)
    ours, theirs = getattr(lr, name)(**kwargs), getattr(tmr, name)(**kwargs)
    for m in (ours, theirs):
        m.update(preds.reshape(-1), target.reshape(-1).long(), idx)
    assert ours.compute().item() == pytest.approx(theirs.compute().item(), abs=1e-5)
    stable = rc.evaluate_scores(preds, target, ["auroc" if name == "RetrievalAUROC" else "ndcg@3"])
    expected = rc.evaluate_scores(preds, target, ["auroc" if name == "RetrievalAUROC" else "ndcg@3"],
                                  ties="expected")
    assert stable.popitem()[1].item() != pytest.approx(expected.popitem()[1].item(), abs=1e-4)  # ties matter here


def test_adapters_reject_auroc_at_k_under_expected_at_construction():
    ig = pytest.importorskip("ignite_retrieval")
    lt = pytest.importorskip("lightning_retrieval")
    for make in (ig.RankingMetrics, lt.RankingMetrics):
        with pytest.raises(NotImplementedError, match=r"auroc@5 has no closed form under ties='expected'"):
            make(["auroc@5"], ties="expected")


@pytest.mark.parametrize("mode", MODES)
def test_embedding_adapters_pass_ties_through(generator, mode):
    ig = pytest.importorskip("ignite_retrieval")
    lt = pytest.importorskip("lightning_retrieval")
    x = torch.randn(4, 3, generator=generator)[torch.randint(0, 4, (20,), generator=generator)]  # duplicates
    labels = torch.randint(0, 3, (20,), generator=generator)
    keys = ["map@r", "mrr", "ndcg@3"]
    want = rc.evaluate_embeddings(x, labels, keys, ties=mode)
    stable = rc.evaluate_embeddings(x, labels, keys)
    assert any(abs(want[k].item() - stable[k].item()) > 1e-6 for k in keys)  # the mode matters on this input
    m = ig.EmbeddingMetrics(keys, ties=mode)
    m.update({"embeddings": x[:8], "labels": labels[:8]})
    m.update({"embeddings": x[8:], "labels": labels[8:]})
    n = lt.EmbeddingMetrics(keys, ties=mode)
    n.update(x[:8], labels[:8])
    n.update(x[8:], labels[8:])
    got_ig, got_lt = m.compute(), n.compute()
    for key in keys:
        assert got_ig[key] == pytest.approx(want[key].item(), abs=1e-12)
        assert got_lt[key].item() == pytest.approx(want[key].item(), abs=1e-12)


@pytest.mark.parametrize("mode", MODES)
def test_flat_queries_of_many_sizes_equal_each_query_alone(generator, mode):
    """Queries of different sizes go to blocks of different depths (@r: each block's largest R),
    joined into one Ranking: every query's value is its value evaluated alone."""
    sizes = torch.randint(1, 40, (25,), generator=generator)
    idx = torch.arange(25).repeat_interleave(sizes)
    preds = torch.randint(0, 3, (idx.numel(),), generator=generator).float()
    sparse = torch.rand(idx.numel(), generator=generator) < 0.4
    target = torch.randint(0, 3, (idx.numel(),), generator=generator).float() * sparse
    keys = ["map@r", "ndcg@r", "precision@r", "r_precision", "recall@r", "mrr@5", "hit_rate@3", "map_hits@4", "wap@4",
            "ndcg_exp@6", "dcg_exp@6"]
    got = rc.evaluate_scores(preds, target, keys, indexes=idx, ties=mode, reduce="none")
    for q in range(25):
        sel = idx == q
        alone = rc.evaluate_scores(preds[sel][None], target[sel][None], keys, ties=mode, reduce="none")
        for key in keys:
            assert same(got[key][q].item(), alone[key][0].item(), 1e-12), (q, key)


def test_joined_rankings_keep_each_parts_ties_at_the_cut():
    """Ranking.cat pads a shallower part: its tie past the cut stays with its last real rank."""
    from retrieval_core import rank_dense
    from retrieval_core import ranking_values
    from retrieval_core.ranking import Ranking
    from retrieval_core import parse_metrics

    keys = parse_metrics(["precision@2", "mrr@2", "map_hits@2", "ndcg_exp@2", "hit_rate@1"])
    a = rank_dense(torch.tensor([[1.0, 1.0, 1.0, 0.0]]), torch.tensor([[0, 0, 1, 1]]), 2, need_ideal=True,
                   ties="expected")
    b = rank_dense(torch.tensor([[2.0, 1.0, 1.0, 1.0, 0.0]]), torch.tensor([[0, 1, 0, 0, 1]]), 3,
                   need_ideal=True, ties="expected")
    joined = ranking_values(Ranking.cat([a, b]), keys)
    torch.testing.assert_close(joined, torch.cat([ranking_values(a, keys), ranking_values(b, keys)]))
    assert joined[0, 0].item() == pytest.approx((1 / 3) / 2 * 2)  # two of three tied ranks inside, one relevant


def test_distributed_checks_of_tie_modes():
    """What every process checks before a multi-process evaluation (tests/distributed runs them)."""
    from retrieval_core.distributed.evaluation import _check_shard_options
    from retrieval_core.inputs.embeddings import _check_options, embedding_options
    from retrieval_core import parse_metrics

    def check(keys, options, shard_gallery):
        checked = _check_options(parse_metrics(keys), options)  # the options of the inputs layer's one sequence
        _check_shard_options(parse_metrics(keys), checked, shard_gallery)

    options = embedding_options(ties="expected")
    check(["mrr", "map@r"], options, shard_gallery=False)
    with pytest.raises(NotImplementedError, match=r"ties='expected' is not available with shard_gallery=True"):
        check(["mrr@5"], options, shard_gallery=True)  # (whole-list keys cannot be sharded)
    with pytest.raises(NotImplementedError, match=r"auroc@3 has no closed form"):
        check(["auroc@3"], options, shard_gallery=False)
    check(["mrr@5"], dict(options, ties="stable"), shard_gallery=True)


def test_hand_toy_graded():
    # scores [1, 1, 0], gains [2, 0, 1]: the top two tie; in one order the gain-2 candidate leads
    preds, target = torch.tensor([[1.0, 1.0, 0.0]]), torch.tensor([[2.0, 0.0, 1.0]])
    keys = ["acg@1", "wap@1", "wap@2", "f1@1", "ndcg_exp@2", "dcg_exp@2", "precision_capped@1",
            "precision_adaptive@4", "map_hits@2", "ndcg@1"]
    r = rc.evaluate_scores(preds, target, keys, ties="expected")
    assert r["acg@1"].item() == pytest.approx(1.0)  # mean gain of the tied pair
    assert r["wap@1"].item() == pytest.approx((2.0 + 0.0) / 2)  # acg@1 = 2 with a hit, else 0
    assert r["wap@2"].item() == pytest.approx((2.0 + 1.0) / 2)  # hit at rank 1 (acg 2) or rank 2 (acg 1)
    assert r["f1@1"].item() == pytest.approx(2 * 0.5 / (1 + 2))
    exp_dcg = 1.5 + 1.5 / math.log2(3)  # mean of 2^2 - 1 and 2^0 - 1 at ranks 1 and 2
    assert r["dcg_exp@2"].item() == pytest.approx(exp_dcg)
    assert r["ndcg_exp@2"].item() == pytest.approx(exp_dcg / (3.0 + 1.0 / math.log2(3)))
    assert r["precision_capped@1"].item() == pytest.approx(0.5)
    assert r["precision_adaptive@4"].item() == pytest.approx(2 / 3)
    assert r["map_hits@2"].item() == pytest.approx((1.0 + 0.5) / 2)  # one hit, at rank 1 or 2
    assert r["ndcg@1"].item() == pytest.approx(1.0 / 2.0)


@pytest.mark.parametrize("dtype", [torch.int64, torch.uint8, torch.int32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("mode", MODES)
def test_score_dtypes(generator, dtype, mode):
    """Integer and half-precision scores tie exactly as their float32 values do."""
    preds, target = many_ties(generator, q=15, n=11, levels=5)
    keys = ["ndcg@4", "map@r", "mrr@3", "map_hits@4", "hit_rate@2", "auroc"]
    want = rc.evaluate_scores(preds, target, keys, ties=mode, reduce="none")
    got = rc.evaluate_scores(preds.to(dtype), target, keys, ties=mode, reduce="none")
    mask = torch.rand(15, 11, generator=generator) < 0.8
    want_m = rc.evaluate_scores(preds, target, keys, mask=mask, ties=mode, reduce="none")
    got_m = rc.evaluate_scores(preds.to(dtype), target, keys, mask=mask, ties=mode, reduce="none")
    for key in keys:
        torch.testing.assert_close(got[key], want[key], equal_nan=True, rtol=0, atol=1e-12, msg=key)
        torch.testing.assert_close(got_m[key], want_m[key], equal_nan=True, rtol=0, atol=1e-12, msg=key)


@pytest.mark.parametrize("distance", ["euclidean", "squared_euclidean"])
@pytest.mark.parametrize("mode", MODES)
def test_euclidean_tie_modes_equal_score_mode_on_the_negated_distances(generator, distance, mode):
    """Small integer coordinates: every squared distance is an exact integer in float64,
    so the tied groups are known; embedding mode under each tie mode equals score mode
    on the negated distances (same order, same groups), and "expected" averages the
    stable values over orders (it differs from "stable" here)."""
    gallery = torch.randint(-2, 3, (40, 3), generator=generator).float()
    gallery = torch.cat([gallery, gallery[:10]])  # duplicates: exact ties
    query = torch.randint(-2, 3, (25, 3), generator=generator).float()
    g_labels = torch.randint(0, 3, (50,), generator=generator)
    q_labels = torch.randint(0, 3, (25,), generator=generator)
    keys = ["cmc@1", "precision@5", "map@r", "ndcg@10", "mrr", "auroc"]
    got = rc.evaluate_embeddings(query, q_labels, keys, gallery=gallery, gallery_labels=g_labels,
                                 distance=distance, ties=mode, reduce="none")
    sq = ((query.double().unsqueeze(1) - gallery.double().unsqueeze(0)) ** 2).sum(-1)
    scores = -(sq.sqrt() if distance == "euclidean" else sq)
    gains = (q_labels.unsqueeze(1) == g_labels.unsqueeze(0)).long()
    want = rc.evaluate_scores(scores, gains, keys, ties=mode, reduce="none")
    for k in keys:
        torch.testing.assert_close(got[k], want[k], equal_nan=True, rtol=0, atol=1e-12)
    if mode == "expected":
        stable = rc.evaluate_scores(scores, gains, ["map@r"], ties="stable", reduce="none")["map@r"]
        assert not torch.allclose(stable, got["map@r"], equal_nan=True)
