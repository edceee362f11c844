"""Embedding mode against Open Metric Learning (OML)'s documented definitions (the
cross-checks against OML's own functions: test_oml_functions.py).

The package cannot be installed with the test extra (it requires numpy < 2,
torchvision and opencv), so its documented per-query
definitions of ``calc_retrieval_metrics`` are written out here (:func:`oml_values`)
and fed with each query's eligible candidates in rank order (from a brute-force
float64 ranking) and its number R of relevant eligible items. For a list ``g`` of
relevance flags, best first, cut at ``k' = min(k, len(g))``:

* ``cmc@k`` = 1 if some ``g_i`` (i <= k') is relevant, else 0 (our ``cmc@k``);
* ``precision@k`` = hits within k' / ``min(k', R)`` (our ``precision_capped@k``);
* ``map@k`` = ``sum_{i <= k'} g_i * n_i / i`` / hits within k', ``n_i`` the hits
  within i, and 0 without a hit (our ``map_hits@k``);

equal to ours for every query that has a relevant item. For a query with none
(R = 0) ours is undefined (NaN, skipped) while OML's rules give NaN for precision
(0/0), 0 for cmc and map, and 1.0 for all three when the query has no candidate.
"""
from __future__ import annotations

import math
from typing import Dict, List, Tuple

import pytest
import torch
from torch import Tensor

from tests.references import clusters

import retrieval_core as rc

ATOL = 1e-6


def oml_values(relevant_in_order: List[bool], n_relevant: int, k: int) -> Tuple[float, float, float]:
    """One query's OML ``(cmc@k, precision@k, map@k)`` from its candidates' relevance
    in rank order and its number of relevant items (see the module docstring)."""
    if not relevant_in_order:  # nothing to retrieve
        value = 1.0 if n_relevant == 0 else 0.0
        return value, value, value
    top = relevant_in_order[:k]
    hits = sum(top)
    cmc = float(hits > 0)
    denominator = min(len(top), n_relevant)
    precision = hits / denominator if denominator else math.nan
    hits_so_far, precision_sum = 0, 0.0
    for rank, is_relevant in enumerate(top, start=1):
        if is_relevant:
            hits_so_far += 1
            precision_sum += hits_so_far / rank
    return cmc, precision, (precision_sum / hits if hits else 0.0)


def test_oml_values_by_hand():
    # flags 1 0 1 1, R = 5
    assert oml_values([True, False, True, True], 5, 1) == (1.0, 1.0, 1.0)
    assert oml_values([True, False, True, True], 5, 3) == (1.0, 2 / 3, (1 + 2 / 3) / 2)
    assert oml_values([True, False, True, True], 5, 10) == (1.0, 3 / 4, (1 + 2 / 3 + 3 / 4) / 3)  # k' = 4
    # precision divides by R when R < k: an ideal list scores 1
    assert oml_values([True, True, False, False], 2, 4) == (1.0, 1.0, 1.0)
    assert oml_values([False, False, True], 1, 2) == (0.0, 0.0, 0.0)
    c, p, m = oml_values([False, False], 0, 2)  # R = 0 with candidates
    assert (c, m) == (0.0, 0.0) and math.isnan(p)
    assert oml_values([], 0, 3) == (1.0, 1.0, 1.0) and oml_values([], 2, 3) == (0.0, 0.0, 0.0)


def ranked_relevance(query, query_labels, gallery, gallery_labels, query_ids, gallery_ids):
    """Per query: relevance flags of its eligible gallery items in rank order
    (cosine similarity desc, then lower index, from the full float64 matrix), and R."""
    q = torch.nn.functional.normalize(query.to(torch.float64), dim=1)
    g = torch.nn.functional.normalize(gallery.to(torch.float64), dim=1)
    sim = (q.unsqueeze(1) * g.unsqueeze(0)).sum(-1)
    flags, n_relevant = [], []
    for i in range(len(q)):
        cols = (gallery_ids != query_ids[i]).nonzero().squeeze(1)
        order = torch.sort(sim[i, cols], descending=True, stable=True).indices
        relevant = gallery_labels[cols[order]] == query_labels[i]
        flags.append(relevant.tolist())
        n_relevant.append(int(relevant.sum()))
    return flags, n_relevant


def oml_table(flags, n_relevant, ks) -> Dict[str, Tensor]:
    """``{"cmc@k" | "precision_capped@k" | "map_hits@k": per-query OML values}`` under our names."""
    out = {}
    for k in ks:
        rows = torch.tensor([oml_values(f, r, k) for f, r in zip(flags, n_relevant)], dtype=torch.float64)
        out.update({f"cmc@{k}": rows[:, 0], f"precision_capped@{k}": rows[:, 1], f"map_hits@{k}": rows[:, 2]})
    return out


@pytest.fixture(scope="module")
def oml_case():
    x, labels = clusters(140, 8, 6, seed=11, lone_labels=2)  # queries 0, 1: no relevant item anywhere
    q, ql, g, gl = x[:60], labels[:60], x[60:], labels[60:]
    gen = torch.Generator().manual_seed(13)
    qids = torch.randint(0, 10, (60,), generator=gen)
    gids = torch.randint(0, 10, (80,), generator=gen)
    qids[3] = 78
    gids[70:] = 78  # query 3: at most 70 candidates; with k = 80 its list is short
    qids[2] = 77
    gids[gl == ql[2]] = 77  # query 2: its relevant items are all excluded (R = 0, candidates left)
    qids[4] = 79  # query 4: nothing excluded
    return q.double(), ql, g.double(), gl, qids, gids


def test_oml_definitions(oml_case):
    q, ql, g, gl, qids, gids = oml_case
    ks = (1, 3, 10, 80)
    flags, n_relevant = ranked_relevance(q, ql, g, gl, qids, gids)
    assert len(flags[3]) < 80 and len(flags[4]) == 80 and n_relevant[2] == 0 and len(flags[2]) > 0
    theirs = oml_table(flags, n_relevant, ks)
    got = rc.evaluate_embeddings(q, ql, list(theirs), gallery=g, gallery_labels=gl, query_ids=qids, gallery_ids=gids,
                                 reduce="none")
    empty = torch.tensor([r == 0 for r in n_relevant])
    assert empty.tolist()[:3] == [True, True, True] and int(empty.sum()) == 3
    for key, value in theirs.items():
        assert torch.isnan(got[key]).tolist() == empty.tolist(), key  # ours: undefined exactly when R = 0
        torch.testing.assert_close(got[key][~empty], value[~empty], rtol=0, atol=ATOL, msg=lambda m: f"{key}: {m}")
    for k in ks:  # where R = 0, OML's conventions (which we do not follow)
        assert torch.isnan(theirs[f"precision_capped@{k}"][empty]).all()  # 0 / min(k', 0)
        assert (theirs[f"cmc@{k}"][empty] == 0).all() and (theirs[f"map_hits@{k}"][empty] == 0).all()
    # OML's mean over all queries is NaN for precision as soon as one query has R = 0;
    # over the other queries it is our skip-mean
    assert math.isnan(theirs["precision_capped@10"].mean().item())
    ours_mean = rc.evaluate_embeddings(q, ql, ["precision_capped@10"], gallery=g, gallery_labels=gl, query_ids=qids,
                                       gallery_ids=gids)
    assert math.isclose(ours_mean["precision_capped@10"].item(), theirs["precision_capped@10"][~empty].mean().item(),
                        abs_tol=ATOL)


def test_oml_query_without_any_candidate():
    """OML scores a query with nothing to retrieve and nothing relevant as 1.0;
    ours leaves it undefined (skipped)."""
    q, ql = clusters(5, 4, 2, seed=21)
    g, gl = clusters(7, 4, 2, seed=22)
    qids = torch.tensor([0, 1, 2, 3, 4])
    gids = torch.tensor([0, 0, 0, 0, 0, 0, 0])  # query 0: every gallery item excluded
    flags, n_relevant = ranked_relevance(q, ql, g, gl, qids, gids)
    assert flags[0] == [] and n_relevant[0] == 0
    theirs = oml_table(flags, n_relevant, (3,))
    got = rc.evaluate_embeddings(q.double(), ql, list(theirs), gallery=g.double(), gallery_labels=gl, query_ids=qids,
                                 gallery_ids=gids, reduce="none")
    for key, value in theirs.items():
        assert value[0].item() == 1.0 and math.isnan(got[key][0].item())
        defined = ~torch.isnan(got[key])
        assert defined[1:].all()
        torch.testing.assert_close(got[key][defined], value[defined], rtol=0, atol=ATOL)


def test_oml_definitions_small_self_gallery(embeddings_labels):
    """With the queries as their own gallery (each query's own row excluded) and every
    class present more than once, every query has R > 0 and all three agree exactly."""
    x, labels = embeddings_labels
    ids = torch.arange(len(x))
    flags, n_relevant = ranked_relevance(x, labels, x, labels, ids, ids)
    assert min(n_relevant) > 0
    theirs = oml_table(flags, n_relevant, (1, 5, 59))
    got = rc.evaluate_embeddings(x, labels, list(theirs), reduce="none")
    for key, value in theirs.items():
        torch.testing.assert_close(got[key], value, rtol=0, atol=ATOL, msg=lambda m: f"{key}: {m}")
