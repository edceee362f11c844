"""Options of different issues used together: intervals, per-query values, confidence
keys and tie modes in one call give what each gives alone."""
import torch

import retrieval_core as rc


def _data(seed=0, q=40, n=12):
    g = torch.Generator().manual_seed(seed)
    preds = torch.randint(0, 4, (q, n), generator=g).float()  # many ties
    target = (torch.rand(q, n, generator=g) < 0.3).long()
    confidence = torch.rand(q, generator=g)
    return preds, target, confidence


def test_ci_per_query_and_confidence_keys_together():
    preds, target, confidence = _data()
    keys = ["cmc@1", "map@5", "erc:cmc@1", "spearman:map@5"]
    both = rc.evaluate_scores(preds, target, keys, confidence=confidence, ci=0.9, keep_per_query=True,
                              ties="expected")
    alone = rc.evaluate_scores(preds, target, keys, confidence=confidence, ties="expected")
    plain = rc.evaluate_scores(preds, target, ["cmc@1", "map@5"], ci=0.9, keep_per_query=True, ties="expected")
    for k in keys:
        torch.testing.assert_close(both[k], alone[k])
    # intervals: the plain keys as without confidence keys; the confidence keys bootstrapped too
    assert set(both.ci) == set(keys)
    for k in ("cmc@1", "map@5"):
        torch.testing.assert_close(both.ci[k], plain.ci[k])
    for k in ("erc:cmc@1", "spearman:map@5"):
        low, high = both.ci[k]
        assert low.item() <= high.item()
    assert set(both.curves) == {"erc:cmc@1"}
    # per-query values: the inner key's values for a confidence key
    torch.testing.assert_close(both.per_query["erc:cmc@1"], plain.per_query["cmc@1"], equal_nan=True)
    torch.testing.assert_close(both.per_query["spearman:map@5"], plain.per_query["map@5"], equal_nan=True)


def test_embeddings_ci_confidence_neighbours_together():
    g = torch.Generator().manual_seed(1)
    emb = torch.randn(30, 4, generator=g)
    labels = torch.randint(0, 3, (30,), generator=g)
    confidence = torch.rand(30, generator=g)
    r = rc.evaluate_embeddings(emb, labels, ["cmc@1", "erc:cmc@1"], confidence=confidence, ci=0.9,
                               keep_per_query=True, return_neighbours=3)
    alone = rc.evaluate_embeddings(emb, labels, ["cmc@1", "erc:cmc@1"], confidence=confidence)
    torch.testing.assert_close(r["erc:cmc@1"], alone["erc:cmc@1"])
    assert set(r.ci) == {"cmc@1", "erc:cmc@1"} and set(r.curves) == {"erc:cmc@1"}
    assert r.ci["erc:cmc@1"][0].item() <= r["erc:cmc@1"].item() <= r.ci["erc:cmc@1"][1].item()
    positions, scores = r.neighbours
    assert positions.shape == scores.shape == (30, 3)
    # the first neighbour decides cmc@1
    hit = (labels[positions[:, 0]] == labels).double()
    torch.testing.assert_close(r.per_query["cmc@1"], hit)
