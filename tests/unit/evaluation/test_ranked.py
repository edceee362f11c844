"""evaluate_ranked: lists already in rank order, with R (and the ideal gains) given from
outside the list, against brute force and pytrec_eval with relevant documents left
out of the run; the flat form; the errors."""
from __future__ import annotations

import math

import pytest
import torch

import retrieval_core as rc

KEYS = ["map", "map@10", "recall@5", "recall@20", "precision@5", "r_precision", "mrr", "ndcg", "ndcg@10",
        "hit_rate@1"]


def _brute(gains, n_relevant, ideal, key):
    """One query's value from the definitions (docs/metrics.md), R and the ideal given."""
    name, _, cut = key.partition("@")
    rel = [g > 0 for g in gains]
    k = len(gains) if cut == "" else (n_relevant if cut == "r" else int(cut))
    hits = sum(rel[:k])
    if name == "map":
        return sum(sum(rel[:i + 1]) / (i + 1) for i in range(min(k, len(gains))) if rel[i]) / n_relevant
    if name == "recall":
        return hits / n_relevant
    if name == "precision":
        return hits / k
    if name == "r_precision":
        return sum(rel[:n_relevant]) / n_relevant
    if name == "mrr":
        return next((1 / (i + 1) for i, r in enumerate(rel) if r), 0.0)
    if name == "hit_rate":
        return float(hits > 0)
    if name == "ndcg":
        kk = k if cut else max(len(gains), len(ideal))
        dcg = sum(g / math.log2(i + 2) for i, g in enumerate(gains[:kk]))
        best = sorted(ideal, reverse=True)
        return dcg / sum(g / math.log2(i + 2) for i, g in enumerate(best[:kk]))
    raise KeyError(key)


def _random_lists(seed, q=30, depth=15, graded=True):
    g = torch.Generator().manual_seed(seed)
    gains = torch.randint(0, 4 if graded else 2, (q, depth), generator=g) * (torch.rand(q, depth, generator=g) < 0.3)
    missing = torch.randint(0, 6, (q, 3), generator=g)  # gains of relevant items the list did not retrieve
    missing = missing * (torch.rand(q, 3, generator=g) < 0.5)
    if not graded:
        missing = (missing > 0).long()
    ideal = torch.cat([gains, missing], 1)
    n_relevant = (ideal > 0).sum(1)
    return gains, n_relevant, ideal


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("graded", [True, False])
def test_values_equal_brute_force_with_r_from_outside(seed, graded):
    gains, n_rel, ideal = _random_lists(seed, graded=graded)
    got = rc.evaluate_ranked(gains, KEYS, n_relevant=n_rel, ideal=ideal if graded else None, reduce="none",
                             empty="zero")
    for key in KEYS:
        want = [0.0 if int(n_rel[i]) == 0 else _brute(gains[i].tolist(), int(n_rel[i]),
                                                      [x for x in ideal[i].tolist() if x > 0], key)
                for i in range(gains.shape[0])]
        assert got[key].tolist() == pytest.approx(want, abs=1e-12), key


def test_without_n_relevant_equals_evaluate_scores_on_the_list():
    gains, _, _ = _random_lists(7)
    preds = -torch.arange(gains.shape[1], dtype=torch.float64).expand_as(gains)  # rank 1 scores highest
    a = rc.evaluate_ranked(gains, KEYS, reduce="none")
    b = rc.evaluate_scores(preds, gains, KEYS, reduce="none")
    for key in KEYS:
        assert torch.allclose(a[key], b[key], equal_nan=True, atol=1e-12), key


def test_r_from_outside_is_trec_eval_semantics():
    pytrec_eval = pytest.importorskip("pytrec_eval")
    gains, n_rel, ideal = _random_lists(11, q=40, depth=25)
    qrels, run = {}, {}
    for i in range(gains.shape[0]):
        qid = f"q{i}"
        listed = {f"d{j}": int(gains[i, j]) for j in range(gains.shape[1])}
        unlisted = {f"m{j}": int(v) for j, v in enumerate(ideal[i, gains.shape[1]:].tolist()) if v > 0}
        qrels[qid] = {**listed, **unlisted}
        run[qid] = {f"d{j}": float(100 - j) for j in range(gains.shape[1])}
    measures = {"map", "map_cut_10", "recall_5", "recall_20", "P_5", "Rprec", "recip_rank", "ndcg", "ndcg_cut_10",
                "success_1"}
    out = pytrec_eval.RelevanceEvaluator(qrels, measures).evaluate(run)
    ours = rc.evaluate_ranked(gains, KEYS, n_relevant=n_rel, ideal=ideal, reduce="none", empty="zero")
    names = dict(zip(KEYS, ["map", "map_cut_10", "recall_5", "recall_20", "P_5", "Rprec", "recip_rank", "ndcg",
                            "ndcg_cut_10", "success_1"]))
    for key, measure in names.items():
        want = [out[f"q{i}"][measure] for i in range(gains.shape[0])]
        assert ours[key].tolist() == pytest.approx(want, abs=1e-9), key
    # R counted from the list instead: the numbers trec_eval gives are not reproduced
    counted = rc.evaluate_ranked(gains, ["map"], empty="zero")["map"].item()
    assert counted != pytest.approx(sum(out[q]["map"] for q in out) / len(out), abs=1e-6)


def test_flat_form_in_rank_order_and_mask():
    # short lists as padded rows with a mask, and the same as a run: entries grouped by
    # query (queries in any order), in rank order within each
    gains, n_rel, ideal = _random_lists(3, q=6, depth=5)
    lengths = torch.tensor([5, 1, 3, 0, 4, 2])
    mask = torch.arange(5) < lengths.unsqueeze(1)
    dense = rc.evaluate_ranked(gains, KEYS, n_relevant=n_rel, mask=mask, ideal=ideal, reduce="none", empty="zero")
    ids = torch.tensor([9, 2, 5, 7, 1, 4])
    shuffled = [3, 0, 5, 1, 4, 2]  # the order the queries come in
    flat_gains = torch.cat([gains[i, :lengths[i]] for i in shuffled])
    flat_ids = torch.cat([ids[i].repeat(int(lengths[i])) for i in shuffled])
    listed = lengths > 0  # a query with no entry is absent from a run
    by_id = torch.argsort(ids[listed])
    flat = rc.evaluate_ranked(flat_gains, KEYS, indexes=flat_ids, n_relevant=n_rel[listed][by_id],
                              ideal=ideal[listed][by_id], reduce="none", empty="zero", keep_per_query=True)
    assert flat.query_ids.tolist() == sorted(ids[listed].tolist())
    for key in KEYS:
        assert torch.allclose(flat[key], dense[key][listed][by_id], atol=1e-12), key


@pytest.mark.parametrize("call, error, message", [
    (lambda: rc.evaluate_ranked(torch.tensor([[1, 1, 0]]), ["map"], n_relevant=torch.tensor([1])), ValueError,
     "n_relevant is below the relevant items in the list of 1 queries"),
    (lambda: rc.evaluate_ranked(torch.tensor([[2, 1, 0]]), ["ndcg"], n_relevant=torch.tensor([3])), ValueError,
     "nDCG of graded gains with n_relevant given needs ideal="),
    (lambda: rc.evaluate_ranked(torch.tensor([[1, 0]]), ["auroc"], n_relevant=torch.tensor([2])), ValueError,
     "auroc need every candidate of the collection"),
    (lambda: rc.evaluate_ranked(torch.tensor([[1, 0]]), ["map"], n_relevant=torch.tensor([2.0])), ValueError,
     "n_relevant must be an integer tensor"),
    (lambda: rc.evaluate_ranked(torch.tensor([[1.0, -1.0]]), ["map"]), ValueError, "gains must be finite and >= 0"),
    (lambda: rc.evaluate_ranked(torch.tensor([[1, 0]]), ["ndcg"], n_relevant=torch.tensor([2]),
                                ideal=torch.tensor([[3, 0, 0]])), ValueError, "ideal and n_relevant disagree"),
    (lambda: rc.evaluate_ranked(torch.tensor([1, 0]), ["map"]), ValueError, "gains must be \\[queries, depth\\]"),
    (lambda: rc.evaluate_ranked(torch.tensor([[1, 0]]), ["nmi"]), ValueError, "evaluate_embeddings computes them"),
])
def test_errors(call, error, message):
    with pytest.raises(error, match=message):
        call()


def test_evaluate_scores_with_n_relevant_ranks_the_whole_list():
    # scores of the candidates a run returned; R counts relevant documents it missed too
    gains, n_rel, ideal = _random_lists(5, q=12, depth=9)
    g = torch.Generator().manual_seed(6)
    order = torch.rand(12, 9, generator=g).argsort(1)  # the rank of each column
    preds = (9 - order).double()  # column c is ranked at order[c]
    target = gains.gather(1, order)  # so it holds the gain of that rank
    want = rc.evaluate_ranked(gains, KEYS, n_relevant=n_rel, ideal=ideal, reduce="none", empty="zero")
    got = rc.evaluate_scores(preds, target, KEYS, n_relevant=n_rel, ideal=ideal, reduce="none", empty="zero")
    for key in KEYS:
        assert torch.allclose(got[key], want[key], atol=1e-12), key
    # the flat form: query ids per entry, any order
    ids = torch.arange(12).repeat_interleave(9)
    perm = torch.randperm(ids.numel(), generator=g)
    flat = rc.evaluate_scores(preds.reshape(-1)[perm], target.reshape(-1)[perm], KEYS, indexes=ids[perm],
                              n_relevant=n_rel, ideal=ideal, reduce="none", empty="zero")
    for key in KEYS:
        assert torch.allclose(flat[key], want[key], atol=1e-12), key


def test_evaluate_scores_with_n_relevant_tie_orders():
    preds = torch.tensor([[0.5, 0.5, 0.5, 0.1]])
    target = torch.tensor([[0, 0, 1, 0]])
    r = torch.tensor([2])
    got = {t: rc.evaluate_scores(preds, target, ["mrr", "map"], n_relevant=r, ties=t) for t in
           ("stable", "optimistic", "pessimistic")}
    assert [got[t]["mrr"].item() for t in got] == [1 / 3, 1.0, 1 / 3]
    assert got["optimistic"]["map"].item() == 0.5  # one of R = 2 relevant retrieved, at rank 1
    with pytest.raises(ValueError, match='ties="expected" averages over orders'):
        rc.evaluate_scores(preds, target, ["mrr"], n_relevant=r, ties="expected")
    with pytest.raises(ValueError, match="ties must be one of"):  # not read as "stable"
        rc.evaluate_scores(preds, target, ["mrr"], n_relevant=r, ties="random")


def _interleave(ids, g):
    """A random order of the entries that keeps each query's entries in their order."""
    keys = torch.rand(ids.numel(), generator=g, dtype=torch.float64)
    for q in ids.unique():
        at = (ids == q).nonzero().squeeze(1)
        keys[at] = keys[at].sort().values
    return keys.argsort()


@pytest.mark.parametrize("layout", ["sorted", "grouped", "interleaved"])
@pytest.mark.parametrize("ties", ["stable", "optimistic", "pessimistic"])
def test_flat_scores_with_n_relevant_equal_padded_rows(layout, ties):
    # uneven lists, tied scores, ids not 0..Q-1: the flat form laid out as rows (no sort
    # when grouped) must rank each query as its padded row does, ties by order of arrival
    gains, n_rel, ideal = _random_lists(11, q=9, depth=7)
    g = torch.Generator().manual_seed(12)
    preds = torch.randint(0, 3, (9, 7), generator=g).double()  # many ties
    lengths = torch.tensor([7, 1, 3, 7, 4, 2, 6, 5, 7])
    mask = torch.arange(7) < lengths.unsqueeze(1)
    want = rc.evaluate_scores(preds, gains, KEYS, n_relevant=n_rel, ideal=ideal, mask=mask, ties=ties,
                              reduce="none", empty="zero")
    qids = torch.tensor([40, 3, 17, 8, 25, 1, 33, 12, 5])
    rows = [3, 0, 5, 8, 1, 7, 2, 4, 6] if layout != "sorted" else qids.argsort().tolist()
    flat_p = torch.cat([preds[i, :lengths[i]] for i in rows])
    flat_t = torch.cat([gains[i, :lengths[i]] for i in rows])
    flat_ids = torch.cat([qids[i].repeat(int(lengths[i])) for i in rows])
    if layout == "interleaved":
        perm = _interleave(flat_ids, g)
        flat_p, flat_t, flat_ids = flat_p[perm], flat_t[perm], flat_ids[perm]
    by_id = qids.argsort()
    got = rc.evaluate_scores(flat_p, flat_t, KEYS, indexes=flat_ids, n_relevant=n_rel[by_id], ideal=ideal[by_id],
                             ties=ties, reduce="none", empty="zero", keep_per_query=True)
    assert got.query_ids.tolist() == sorted(qids.tolist())
    for key in KEYS:
        assert torch.allclose(got[key], want[key][by_id], atol=1e-12), key


@pytest.mark.parametrize("flat", [False, True])
def test_blocks_of_rows_give_the_values_of_one_block(monkeypatch, flat):
    # R given: the rows are ranked and evaluated a block at a time; a block of one or two
    # rows must give what one block of every row gives, and the checks see every row
    gains, n_rel, ideal = _random_lists(21, q=13, depth=6)
    preds = torch.randint(0, 4, (13, 6), generator=torch.Generator().manual_seed(22)).double()
    ids = torch.arange(13).repeat_interleave(6)
    args = (preds.reshape(-1), gains.reshape(-1)) if flat else (preds, gains)
    kw = dict(indexes=ids) if flat else {}

    def run(**extra):
        return rc.evaluate_scores(*args, KEYS, reduce="none", empty="zero", **kw, **extra)

    want = run(n_relevant=n_rel, ideal=ideal)
    ranked_want = rc.evaluate_ranked(gains, KEYS, n_relevant=n_rel, ideal=ideal, reduce="none", empty="zero")
    monkeypatch.setattr(rc.sizing, "CPU_BLOCK_ELEMENTS", 8 * 12)  # deep blocks of 12 elements: 2 rows of 6
    got = run(n_relevant=n_rel, ideal=ideal)
    ranked_got = rc.evaluate_ranked(gains, KEYS, n_relevant=n_rel, ideal=ideal, reduce="none", empty="zero")
    for key in KEYS:
        assert torch.equal(got[key], want[key]), key
        assert torch.equal(ranked_got[key], ranked_want[key]), key
    short = n_rel.clone()
    with_hits = ((gains > 0).sum(1) > 0).nonzero().squeeze(1)
    short[with_hits[[0, -1]]] = 0  # two queries in different blocks
    assert with_hits[-1] - with_hits[0] >= 2
    with pytest.raises(ValueError, match="in the list of 2 queries"):
        run(n_relevant=short, ideal=None)
    with pytest.raises(ValueError, match="one count per query \\[13\\]"):
        run(n_relevant=torch.cat([n_rel, n_rel[:1]]))  # one too many: never sliced into blocks unseen
    with pytest.raises(ValueError, match="ideal must be \\[queries, m\\] = \\[13, m\\]"):
        run(n_relevant=n_rel, ideal=ideal[:12])
