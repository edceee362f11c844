"""The recommender entry points under the sync-free policy (``sizing.sync_free``, issue 30):
evaluate_topk (every key, pairs and sparse truth, item data), evaluate_scores and
evaluate_embeddings with ``exclude=``, sample_negatives and evaluate_sampled, and the
top-k accumulator read the device a constant number of times per call, and give the
values of the CPU policy.

The harness is tests/unit/test_sizing_sync_free.py's: the policy forced on CPU, small
blocks, host reads counted at 1x and 16x the input. Sampling is the one loop whose
rounds depend on the data (the draws): there the reads are one per round, on top of a
constant.
"""
from __future__ import annotations

import warnings
import pytest
import torch
from torch import Tensor

import retrieval_core as rc
from retrieval_core import sizing
from retrieval_core.evaluation import negatives
from retrieval_core.evaluation.accumulator import EmbeddingAccumulator
from retrieval_core.evaluation.accumulator.topk import TopkAccumulator
from retrieval_core.inputs.pairs import UserItems, user_items
from retrieval_core.inputs.topk import topk_inputs, topk_ranking
from retrieval_core.metrics.kernels import discount_sums
from retrieval_core.metrics.items import exposure_counts
from retrieval_core.metrics.keys import ranking_values
from tests.unit.test_sizing_sync_free import (  # noqa: F401 (small_blocks: a fixture)
    HostReads, assert_values_equal, both_policies, clusters, cuda_synchronisations, small_blocks, tied_dense,
)

I, K = 40, 10
ACCURACY = ["precision@3", "recall@10", "f1@5", "ndcg@10", "ndcg@r", "ndcg", "map@r", "mrr@10", "map_capped@5",
            "hit_rate@2", "ndcg_exp@4", "r_precision"]
BEYOND = ["coverage@10", "gini@10", "entropy@5", "personalization@10", "popularity@10", "novelty@5",
          "diversity@10", "tail@10", "serendipity@10"]


def distinct_pairs(users: int, items: int, n: int, g: torch.Generator) -> Tensor:
    return torch.unique(torch.stack([torch.randint(0, users, (n,), generator=g),
                                     torch.randint(0, items, (n,), generator=g)]), dim=1)


def recommender_data(users: int, seed: int, device="cpu"):
    """Top-10 lists of a 40-item catalogue (every fifth one short), truth pairs with graded
    gains (some users without any), history pairs, item popularity, categories, embeddings."""
    g = torch.Generator().manual_seed(seed)
    topk = torch.stack([torch.randperm(I, generator=g)[:K] for _ in range(users)])
    topk[1::5, 7:] = -1
    truth = distinct_pairs(users, I, 3 * users, g)
    gains = torch.randint(1, 4, (truth.shape[1],), generator=g).double()
    history = distinct_pairs(users, I, 4 * users, g)
    popularity = torch.randint(1, 6, (I,), generator=g).double()
    categories = torch.randint(0, 4, (I,), generator=g)
    embeddings = torch.randn(I, 4, generator=g)
    return [x.to(device) for x in (topk, truth, gains, history, popularity, categories, embeddings)]


def sparse(pairs: Tensor, gains: Tensor, shape, layout: str) -> Tensor:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # sparse CSR is in beta
        t = torch.sparse_coo_tensor(pairs, gains, shape).coalesce()
        return t.to_sparse_csr() if layout == "csr" else t


def topk_case(truth_form: str, keys, item_data: str = "categories", reduce: str = "mean"):
    def make(scale: int, device="cpu"):
        topk, truth, gains, history, popularity, categories, embeddings = recommender_data(8 * scale, scale, device)
        if truth_form != "pairs":
            truth = sparse(truth, gains, (topk.shape[0], I), truth_form)
        data = dict(item_categories=categories) if item_data == "categories" else dict(item_embeddings=embeddings)
        return lambda: rc.evaluate_topk(topk, truth, keys, n_items=I, item_popularity=popularity, history=history,
                                        reduce=reduce, **data)
    return make


def scores_case(keys, reduce: str = "mean"):
    def make(scale: int, device="cpu"):
        preds, target, _ = (x.to(device) for x in tied_dense(8 * scale, I, seed=scale))
        history = recommender_data(8 * scale, scale, device)[3]
        return lambda: rc.evaluate_scores(preds, target, keys, exclude=history, reduce=reduce)
    return make


def embeddings_case(relevance: str, keys, distance: str = "dot", reduce: str = "mean"):
    """Tied embeddings (clusters with duplicates): ties cross the cut, re-ranked after the loop."""
    def make(scale: int, device="cpu"):
        x, labels = (t.to(device) for t in clusters(16 * scale, seed=scale))
        u = x.shape[0]
        _, truth, gains, history, *_ = recommender_data(u, scale, device)
        if relevance == "labels":  # the gallery is the queries: history ids below u
            seen = distinct_pairs(u, u, 2 * u, torch.Generator().manual_seed(scale)).to(device)
            return lambda: rc.evaluate_embeddings(x, labels, keys, exclude=seen, distance=distance, reduce=reduce)
        items = clusters(I, seed=scale + 100)[0].to(device)
        truth = truth if relevance == "pairs" else sparse(truth, gains, (u, I), "coo")
        return lambda: rc.evaluate_embeddings(x, None, keys, gallery=items, relevance=truth, exclude=history,
                                              distance=distance, reduce=reduce)
    return make


def sampling_case(**options):
    def make(scale: int, device="cpu"):
        _, truth, _, history, popularity, *_ = recommender_data(8 * scale, scale, device)
        kw = dict(options)
        if kw.pop("popular", False):
            kw["popularity"] = popularity
        if kw.pop("history", False):
            kw["exclude"] = history
        return lambda: rc.sample_negatives(truth, I, 5, n_users=8 * scale, seed=scale, **kw)
    return make


def sampled_case(keys, correction=None):
    def make(scale: int, device="cpu"):
        u = 8 * scale
        g = torch.Generator().manual_seed(scale)
        truth = recommender_data(u, scale)[1]
        if correction is not None:  # one positive per user
            truth = torch.stack([torch.arange(u), torch.randint(0, I, (u,), generator=g)])
        pos = torch.randint(0, 5, (truth.shape[1],), generator=g).double()
        neg = torch.randint(0, 5, (u, 6), generator=g).double()
        truth, pos, neg = truth.to(device), pos.to(device), neg.to(device)
        return lambda: rc.evaluate_sampled(pos, neg, truth, keys, n_items=I, correction=correction)
    return make


# Every case and its host reads per call at 1x (the most allowed): the input checks (pairs
# checked and sorted into a CSR: a bincount and its copy to the host, the most items of a
# user read from that copy; lists, item data, values), the largest R, the rows re-ranked
# after the loop, the beyond-accuracy keys' own (tail items, history categories, entropy's
# non-zero counts). Before, evaluate_topk read 3 (binary truth: the largest count of each
# ideal's discount sums, a test past 2^20 ranks, a cutoff copied to the device) to 5 times
# per block of users (graded truth: the block's truth range, its counts, the ideal gains
# kept), exclude= once per block re-ranked, sample_negatives 7 times per round. The caps below
# count two later changes (session 36's merge): a pair check reads once whether the pairs are
# already sorted (then not sorted again), and the set-level keys count the recommended items
# alone (a bincount or torch.unique: no tensor of the catalogue's size): constants, not per block.
CASES = {
    "topk pairs": (topk_case("pairs", ACCURACY + BEYOND), 33),
    "topk pairs accuracy": (topk_case("pairs", ACCURACY), 19),
    "topk sparse graded": (topk_case("coo", ACCURACY + BEYOND), 39),
    "topk csr graded embeddings": (topk_case("csr", ACCURACY + BEYOND, "embeddings"), 37),
    "scores exclude top-k": (scores_case(["ndcg@10", "map@10", "mrr@10", "precision@10", "recall@10"]), 10),
    "scores exclude @r": (scores_case(["map@r", "r_precision", "ndcg@r"]), 11),
    "scores exclude whole list": (scores_case(["map", "ndcg", "auroc"]), 8),
    "embeddings labels exclude": (embeddings_case("labels", ["cmc@1", "map@r", "ndcg@5"]), 11),
    "two-tower exclude": (embeddings_case("pairs", ["recall@5", "map@r", "ndcg@5"]), 20),
    "two-tower exclude whole list": (embeddings_case("pairs", ["map", "ndcg"]), 17),
    "two-tower graded exclude": (embeddings_case("coo", ["recall@5", "map@r", "ndcg@5"]), 25),
    "two-tower exclude euclidean": (embeddings_case("pairs", ["recall@5", "map@r", "ndcg@5"], "euclidean"), 20),
    "sample_negatives": (sampling_case(), 9),
    "sample_negatives without replacement": (sampling_case(replace=False), 9),
    "sample_negatives popularity history": (sampling_case(popular=True, history=True), 20),
    "sample_negatives popularity history without replacement": (
        sampling_case(popular=True, history=True, replace=False), 21),
    "evaluate_sampled": (sampled_case(["ndcg@3", "hit_rate@2", "map"]), 11),
    "evaluate_sampled mle": (sampled_case(["ndcg@3", "hit_rate@2"], "mle"), 11),
}


@pytest.fixture
def draws(monkeypatch):
    """The number of rounds of sample_negatives (its calls of ``_draw``)."""
    calls = []
    real = negatives._draw

    def counted(*args, **kwargs):
        calls.append(args[0])
        return real(*args, **kwargs)

    monkeypatch.setattr(negatives, "_draw", counted)
    return calls


@pytest.mark.parametrize("case", list(CASES))
def test_host_reads_do_not_grow_with_the_input(case, monkeypatch, small_blocks, draws):
    make, most = CASES[case]
    reads = HostReads(monkeypatch)
    with sizing.force_sync_free(True):
        small = reads.count(make(1))
        rounds = len(draws)
        large = reads.count(make(16))
    assert len(draws) == 2 * rounds, "one sampling round at each scale: the reads compare"
    assert small == large, f"{case}: {small} host reads for 1x, {large} for 16x"
    assert sum(small.values()) <= most, f"{case}: {small}"


def many_rounds(users: int, seed: int, allowed: int = 3, n_items: int = 400):
    """User 0 may take only ``allowed`` of the ``n_items``, the others nearly all: the first
    round's width (from the mean allowed share) leaves user 0 more rounds."""
    g = torch.Generator().manual_seed(seed)
    truth = distinct_pairs(users, n_items, 2 * users, g)
    truth = truth[:, truth[0] > 0]
    heavy = torch.stack([torch.zeros(n_items - allowed, dtype=torch.int64), torch.arange(allowed, n_items)])
    return torch.cat([truth, heavy], 1)


@pytest.mark.parametrize("replace", [True, False])
@pytest.mark.parametrize("popular", [False, True])
def test_sampling_reads_once_per_round(replace, popular, monkeypatch, draws):
    """The rounds depend on the draws; each reads the device once (the users left)."""
    reads = HostReads(monkeypatch)
    popularity = torch.arange(1, 401, dtype=torch.float64) if popular else None
    counted = []
    with sizing.force_sync_free(True):
        for users, n, allowed in ((8, 2, 400), (8, 1, 1), (128, 2, 2)):
            truth = many_rounds(users, users + n, allowed)
            before = len(draws)
            got = reads.count(lambda: rc.sample_negatives(truth, 400, n, n_users=users, popularity=popularity,
                                                          replace=replace, seed=1))
            counted.append((sum(got.values()), len(draws) - before))
    assert max(r for _, r in counted) >= 3, counted  # several rounds, of different numbers
    assert len({r for _, r in counted}) > 1, counted
    assert len({total - rounds for total, rounds in counted}) == 1, f"(reads, rounds): {counted}"


def accumulate(scale: int, sparse_truth: bool, keys):
    """The top-k accumulator fed batches of 8 users (truth and history as batch rows)."""
    topk, truth, gains, history, popularity, categories, _ = recommender_data(8 * scale, scale)
    acc = TopkAccumulator(keys, n_items=I, item_popularity=popularity, item_categories=categories)
    batches = []
    for b in range(0, topk.shape[0], 8):
        t, h = (truth[0] >= b) & (truth[0] < b + 8), (history[0] >= b) & (history[0] < b + 8)
        batch_truth = torch.stack([truth[0][t] - b, truth[1][t]])
        if sparse_truth:
            batch_truth = sparse(batch_truth, gains[t], (8, I), "coo")
        batches.append((topk[b:b + 8], batch_truth, torch.stack([history[0][h] - b, history[1][h]]),
                        torch.arange(b, b + 8)))
    return acc, batches


@pytest.mark.parametrize("sparse_truth", [False, True])
def test_topk_accumulator_update_reads_nothing_and_compute_a_constant(sparse_truth, monkeypatch, small_blocks):
    reads = HostReads(monkeypatch)
    computed = []
    for scale in (1, 16):
        acc, batches = accumulate(scale, sparse_truth, ACCURACY + BEYOND)
        state = acc.new_state()
        with sizing.force_sync_free(True):
            for topk, truth, history, ids in batches:
                assert reads.count(lambda: acc.update(state, topk, truth, history=history, user_ids=ids)) == {}
            computed.append(reads.count(lambda: acc.compute(state)))
    assert computed[0] == computed[1], computed
    assert sum(computed[0].values()) <= 62, computed  # the duplicate checks of user ids, then evaluate_topk's


def test_embedding_accumulator_exclude_reads_a_constant(monkeypatch, small_blocks):
    """EmbeddingMetrics' exclude= (items by id): the same reads per batch at update, and per
    call at compute, whatever the number of items."""
    reads = HostReads(monkeypatch)
    counted = []
    for scale in (1, 16):
        x, labels = clusters(16 * scale, seed=scale)
        u = x.shape[0]
        seen = distinct_pairs(u, u, 2 * u, torch.Generator().manual_seed(scale))
        ids = torch.arange(u) * 3 + 7
        acc = EmbeddingAccumulator(["cmc@1", "map@r", "ndcg@5"], distance="dot")
        state = acc.new_state()
        with sizing.force_sync_free(True):
            updates = set()
            for b in range(0, u, 8):
                mine = (seen[0] >= b) & (seen[0] < b + 8)
                pairs = torch.stack([seen[0][mine] - b, ids[seen[1][mine]]])
                updates.add(sum(reads.count(lambda: acc.update(state, x[b:b + 8], labels[b:b + 8], ids=ids[b:b + 8],
                                                               exclude=pairs)).values()))
            counted.append((updates, reads.count(lambda: acc.compute(state))))
    assert counted[0] == counted[1] and len(counted[0][0]) == 1, counted


@pytest.mark.skipif(not torch.cuda.is_available(),
                    reason="no CUDA device: torch.cuda.set_sync_debug_mode needs one to count synchronisations")
@pytest.mark.parametrize("case", list(CASES))
def test_cuda_synchronisations_do_not_grow_with_the_input(case, monkeypatch, draws):
    """CUDA's own count (as tests/unit/test_sizing_sync_free.py's), less one per sampling round."""
    make, _ = CASES[case]
    monkeypatch.setattr(sizing, "CPU_BLOCK_ELEMENTS", 256)
    monkeypatch.setattr(sizing, "MIN_DEVICE_BUDGET", 128 * 40 * 4)

    def synchronisations(scale: int) -> int:
        fn, before = make(scale, "cuda"), len(draws)
        return cuda_synchronisations(fn) - (len(draws) - before)

    make(1, "cuda")()  # warm-up: lazy CUDA initialisation is not ours to count
    small, large = synchronisations(1), synchronisations(16)
    assert small == large, f"{case}: {small} synchronisations for 1x, {large} for 16x"


@pytest.mark.parametrize("case", ["topk pairs", "topk sparse graded", "scores exclude @r", "two-tower exclude",
                                  "two-tower graded exclude", "evaluate_sampled mle"])
def test_device_values_equal_cpu(case, device, small_blocks):
    """On CUDA (its default policy: sync-free) the per-user values equal CPU's; on CPU a plain run."""
    make, _ = CASES[case]
    run_cpu, run_device = make(2), make(2, device)
    cpu, got = run_cpu(), run_device()
    for key in cpu:
        assert got[key].device.type == device.type, key
        torch.testing.assert_close(got[key].cpu(), cpu[key], rtol=0, atol=1e-12, equal_nan=True, msg=key)


# ------------------------------------------------------- same values as the CPU policy

@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("truth_form", ["pairs", "coo", "csr"])
@pytest.mark.parametrize("item_data", ["categories", "embeddings"])
def test_topk_values_equal_the_cpu_policy(seed, truth_form, item_data, small_blocks):
    run = topk_case(truth_form, ACCURACY + BEYOND + ["dcg@2", "map@10"], item_data, "none")(seed + 1)
    cpu, free = both_policies(lambda: run())
    for key in cpu:
        assert_values_equal(free[key], cpu[key], key)


EXCLUDE_CASES = {
    "scores top-k": scores_case(["ndcg@10", "map@10", "mrr@10", "precision@10", "recall@10"], "none"),
    "scores @r": scores_case(["map@r", "r_precision", "ndcg@r"], "none"),
    "embeddings labels": embeddings_case("labels", ["cmc@1", "map@r", "ndcg@5"], reduce="none"),
    "two-tower": embeddings_case("pairs", ["recall@5", "map@r", "ndcg@5", "mrr@3"], reduce="none"),
    "two-tower graded": embeddings_case("coo", ["recall@5", "map@r", "ndcg@5"], reduce="none"),
    "two-tower euclidean": embeddings_case("pairs", ["recall@5", "map@r", "ndcg@5"], "euclidean", "none"),
}


@pytest.mark.parametrize("case", list(EXCLUDE_CASES))
def test_exclude_values_equal_the_cpu_policy(case, small_blocks):
    """Tied scores: rows re-ranked after the loop, whose excluded items are read by positions."""
    run = EXCLUDE_CASES[case](2)
    cpu, free = both_policies(lambda: run())
    for key in cpu:
        assert_values_equal(free[key], cpu[key], f"{case} {key}")


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("replace", [True, False])
@pytest.mark.parametrize("popular", [False, True])
def test_sampled_negatives_equal_the_cpu_policy(seed, replace, popular, draws):
    truth = many_rounds(20 + seed, seed)
    history = distinct_pairs(20 + seed, 400, 400, torch.Generator().manual_seed(seed))
    history = history[:, history[0] > 0]  # user 0 keeps its 3 items
    popularity = torch.arange(400, dtype=torch.float64) % 7 + 1 if popular else None
    cpu, free = both_policies(lambda: rc.sample_negatives(truth, 400, 3, n_users=20 + seed, exclude=history,
                                                           popularity=popularity, replace=replace, seed=seed))
    assert torch.equal(cpu, free)
    assert len(draws) >= 4  # several rounds in each policy


# ------------------------------------------------------ the pieces without host reads

def adversarial_items(n_items: int = 7):
    """Users without items, a user with every item, repeated and unordered positions."""
    pairs = torch.tensor([[1, 1, 3, 3, 3, 3, 3, 3, 3, 4], [6, 0, 0, 1, 2, 3, 4, 5, 6, 2]])
    gains = torch.tensor([2.0, 0.5, 1, 2, 3, 4, 5, 6, 7, 9])
    return (user_items("x", pairs, 6, n_items, repeats=True),
            user_items("x", sparse(pairs, gains, (6, n_items), "coo"), 6, n_items, graded=True))


@pytest.mark.parametrize("graded", [False, True])
@pytest.mark.parametrize("part", [[3, 0, 1, 3, 5], [2], [], [0, 5], [4, 3, 2, 1, 0]])
def test_user_items_by_positions_equal_the_exact_pairs(graded, part):
    items = adversarial_items()[graded]
    part = torch.tensor(part, dtype=torch.int64)
    index = torch.tensor([[0, 6, 2, 3, 6]] * part.shape[0], dtype=torch.int64).reshape(-1, 5)
    results = []
    for policy in (False, True):
        with sizing.force_sync_free(policy):
            target = torch.zeros(part.shape[0], 7)
            results.append((items.dense(part), items.dense(part, torch.float64), items.contains(part, index),
                            items.fill_(part, target, float("-inf"))))
    for cpu, free in zip(*results):
        assert cpu.dtype == free.dtype and torch.equal(cpu, free)
    padded, valid, gains = items.padded(part)
    assert padded.shape == (part.shape[0], 7) and valid.sum().item() == items.counts()[part].sum().item()
    assert bool((padded[~valid] == 7).all()) and bool((padded.diff(dim=1) >= 0).all())
    assert (gains is None) != graded


def test_sampling_rounds_never_pad_users_to_the_most_items(monkeypatch):
    """A user with nearly every item forbidden: the users left are looked up in every
    user's keys, never as a [users left, most items] block (sampling has no [c, I] block
    whose size would bound it)."""
    def refuse(self, part):
        raise AssertionError(f"padded {part.shape[0]} users to {self.most_items} items")

    monkeypatch.setattr(UserItems, "padded", refuse)
    truth = many_rounds(64, 0, allowed=2)
    with sizing.force_sync_free(True):
        negatives_ = rc.sample_negatives(truth, 400, 2, replace=False, seed=3)
    assert sorted(negatives_[0].tolist()) == [0, 1]


def test_user_items_without_any_pair():
    empty = user_items("x", torch.zeros((2, 0), dtype=torch.int64), 3, 5, repeats=True)
    part = torch.tensor([2, 0])
    with sizing.force_sync_free(True):
        assert empty.most_items == 0 and empty.padded(part)[0].shape == (2, 0)
        assert not empty.dense(part).any() and not empty.contains(part, torch.tensor([[1], [4]])).any()


@pytest.mark.parametrize("exact", [3, 7, 1 << 20])
@pytest.mark.parametrize("chunk", [2, 5, 1 << 20])
def test_discount_sums_to_a_bound_equal_the_sums_to_the_largest(exact, chunk):
    n = torch.tensor([0, 1, 2, 3, 9, 4, 12, 1])
    want = discount_sums(n, chunk, exact)
    for bound in (12, 13, 40):
        assert torch.equal(discount_sums(n, chunk, exact, bound=bound), want), bound
    assert discount_sums(n[:0], chunk, exact, bound=5).shape == (0,)


@pytest.mark.parametrize("k", [1, 3, 10])
def test_exposure_counts_read_nothing(k, monkeypatch):
    """The set-level keys' counts: an index_add, equal to a bincount of the listed ids
    (padding -1 left out; ids past ``n_items``, as a bincount cut to ``n_items``, too)."""
    ids = torch.tensor([[0, 5, 2, -1], [5, 1, -1, -1], [7, 0, 3, 4], [-1, -1, -1, -1]])
    reads = HostReads(monkeypatch)
    for n_items in (8, 6, 1):
        got = {}
        assert reads.count(lambda: got.setdefault("counts", exposure_counts(ids, k, n_items))) == {}
        first = ids[:, :k].reshape(-1)
        want = torch.bincount(first[first >= 0], minlength=n_items)[:n_items]
        assert got["counts"].dtype == torch.int64 and torch.equal(got["counts"], want), (n_items, k)


def test_binary_topk_ideal_reads_no_count(monkeypatch):
    """A binary truth's ideal is R ones: the discount sums run to the largest R (a host
    number of the inputs), or to the cutoff, without a read."""
    reads = HostReads(monkeypatch)
    topk, truth = recommender_data(30, 0)[:2]
    inputs = topk_inputs(topk, truth, ["ndcg@10", "ndcg"], n_items=I)
    ranking = topk_ranking(inputs, slice(0, 30), 0)
    assert ranking.ideal_ones_max == int(inputs.n_relevant.max())
    with sizing.force_sync_free(True):
        counted = reads.count(lambda: ranking_values(ranking, list(inputs.keys)))
    assert counted == {}, counted

