"""retrieval_core.compat.oml: OML's structures and definitions on hand-made cases,
random cases against a plain reference written from OML's documented definitions
(docs/compat_oml.md), devices, and the errors. The cross-checks against OML's own
functions are in tests/anchors/oml/test_oml_functions.py, OML's own tests in
tests/anchors/suites/test_oml_suite.py."""
from __future__ import annotations

import math
import random
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from retrieval_core.compat import oml as C
from tests.devices import on_device

NAN = float("nan")


def reference(retrieved, gt, k):
    """OML's per-query (cmc@k, precision@k, map@k), written from its documentation:
    cmc: a relevant item in the top k; precision: hits / min(k, n_gt) with k clipped
    to the list; map: sum of P@i at the hits over the hits (0 without one); an empty
    list gives 1 without ground truth, 0 with it."""
    gt_set, n_gt, n = set(gt), len(gt), len(retrieved)
    if n == 0:
        return (1.0,) * 3 if n_gt == 0 else (0.0,) * 3
    top = [x in gt_set for x in retrieved[:k]]
    hits = sum(top)
    cmc = float(hits > 0)
    den = min(n_gt, k, n)
    precision = hits / den if den else (math.inf if hits else NAN)
    found, ap = 0, 0.0
    for i, h in enumerate(top, 1):
        if h:
            found += 1
            ap += found / i
    return cmc, precision, (ap / hits if hits else 0.0)


def random_case(rng, n_queries, gallery=12):
    retrieved, gt = [], []
    for _ in range(n_queries):
        length = min(gallery, rng.choice([0, 1, 3, 5, 8, 12]))
        retrieved.append(rng.sample(range(gallery), length))
        gt.append(rng.sample(range(gallery + 3), rng.choice([0, 0, 1, 2, 4, 7])))  # ids past the gallery too
    return retrieved, gt


def tensors(rows):
    return [torch.tensor(r, dtype=torch.int64) for r in rows]


def same(got: torch.Tensor, want) -> bool:
    want = torch.as_tensor(want, dtype=torch.float32)
    return got.dtype == torch.float32 and torch.allclose(got.cpu(), want, atol=1e-6, equal_nan=True)


# ---------------------------------------------------------------- hand-made cases


def test_structure_reduced_and_per_query():
    m = C.calc_retrieval_metrics(tensors([[1, 2], [4, 3]]), tensors([[2], [9]]), cmc_top_k=(1, 2),
                                 precision_top_k=(2,), map_top_k=(2,))
    assert list(m) == ["cmc", "precision", "map"] and list(m["cmc"]) == [1, 2]
    assert all(v.ndim == 0 and v.dtype == torch.float32 for d in m.values() for v in d.values())
    # query 1: the hit at rank 2; query 2: no hit
    assert same(m["cmc"][1], 0.0) and same(m["cmc"][2], 0.5)
    assert same(m["precision"][2], (1 / 1 + 0) / 2) and same(m["map"][2], (0.5 + 0) / 2)
    per_query = C.calc_retrieval_metrics(tensors([[1, 2], [4, 3]]), tensors([[2], [9]]), map_top_k=(), reduce=False)
    assert list(per_query) == ["cmc", "precision"] and same(per_query["cmc"][5], [1.0, 0.0])


def test_oml_conventions_for_undefined_queries():
    # no ground truth and no list: 1; ground truth, no list: 0; no ground truth, a list: cmc/map 0, precision NaN
    m = C.calc_retrieval_metrics(tensors([[], [], [4, 5]]), tensors([[], [3], []]), cmc_top_k=(2,),
                                 precision_top_k=(2,), map_top_k=(2,), reduce=False)
    assert same(m["cmc"][2], [1.0, 0.0, 0.0]) and same(m["map"][2], [1.0, 0.0, 0.0])
    assert same(m["precision"][2], [1.0, 0.0, NAN])
    reduced = C.calc_retrieval_metrics(tensors([[], [], [4, 5]]), tensors([[], [3], []]), cmc_top_k=(2,),
                                       precision_top_k=(2,), map_top_k=(2,))
    assert same(reduced["cmc"][2], 1 / 3) and math.isnan(reduced["precision"][2].item())


def test_precision_cutoff_clipped_to_the_list():
    # two relevant items retrieved of 5: OML divides by min(k, n_gt, list length) = 2, not by min(k, n_gt) = 5
    m = C.calc_retrieval_metrics(tensors([[7, 8]]), tensors([[7, 8, 9, 10, 11]]), precision_top_k=(5,))
    assert same(m["precision"][5], 1.0)
    assert same(C.calc_precision([torch.tensor([True, False])], [4], top_k=(3,))[0], [1 / 2])


def test_repeated_retrieved_ids_count_as_hits():
    # isin marks both copies: 2 hits for 1 ground truth (precision 2 / min(2, 1))
    m = C.calc_retrieval_metrics(tensors([[1, 1]]), tensors([[1]]), cmc_top_k=(1,), precision_top_k=(2,),
                                 map_top_k=(2,))
    assert same(m["precision"][2], 2.0) and same(m["map"][2], (1 / 1 + 2 / 2) / 2)


def test_gt_tops_hit_without_ground_truth_count():
    # the functional form takes gt_tops and n_gts apart: a hit with n_gt = 0 gives hits / 0 = inf, as OML
    got = C.calc_precision([torch.tensor([False, True])], [0], top_k=(1, 2))
    assert same(got[0], [NAN]) and same(got[1], [math.inf])
    assert same(C.calc_map([torch.tensor([False, True])], [0], top_k=(2,))[0], [0.5])


def test_matrix_inputs_equal_lists():
    tops = torch.tensor([[True, False, True], [False, False, True]])
    assert all(torch.equal(a, b) for a, b in zip(C.calc_map(tops, torch.tensor([2, 1]), (1, 3)),
                                                 C.calc_map(list(tops), [2, 1], (1, 3))))
    ids = torch.tensor([[3, 1, 2], [0, 1, 2]])
    a = C.calc_retrieval_metrics(ids, tensors([[1], [2, 5]]), reduce=False)
    b = C.calc_retrieval_metrics(list(ids), tensors([[1], [2, 5]]), reduce=False)
    assert all(torch.equal(a[n][5], b[n][5]) for n in a)


def test_top_k_order_and_repeats_kept_in_lists():
    got = C.calc_cmc([torch.tensor([False, True])], [1], top_k=(2, 1, 2))
    assert [g.tolist() for g in got] == [[1.0], [0.0], [1.0]]


def test_categories_tensor_and_array():
    retrieved, gt = tensors([[1, 2], [3, 4], [5, 6]]), tensors([[1], [9], [6]])
    m = C.calc_retrieval_metrics(retrieved, gt, query_categories=torch.tensor([7, 3, 7]), cmc_top_k=(1,),
                                 precision_top_k=(), map_top_k=())
    assert list(m) == ["OVERALL", 7, 3]  # first appearance, as OML's dict over the categories
    assert same(m[7]["cmc"][1], 0.5) and same(m[3]["cmc"][1], 0.0) and same(m["OVERALL"]["cmc"][1], 1 / 3)
    per = C.calc_retrieval_metrics(retrieved, gt, query_categories=np.array(["b", "a", "b"]), cmc_top_k=(2,),
                                   precision_top_k=(), map_top_k=(), reduce=False)
    assert list(per) == ["OVERALL", "b", "a"] and same(per["b"]["cmc"][2], [1.0, 1.0])


def test_rr_objects():
    rr = SimpleNamespace(retrieved_ids=tensors([[2, 0], [1, 3]]), gt_ids=tensors([[0], [1, 3]]),
                         distances=[torch.tensor([0.2, 0.3]), torch.tensor([0.1, 0.9])])
    assert C.calc_retrieval_metrics_rr(rr, map_top_k=(2,)) == C.calc_retrieval_metrics(
        rr.retrieved_ids, rr.gt_ids, map_top_k=(2,))
    # positives 0.3, 0.1, 0.9; negative 0.2: its quantiles are 0.2, two of three positives >= 0.2
    fnmr = C.calc_fnmr_at_fmr_rr(rr, fmr_vals=(0.5,))
    assert list(fnmr) == ["fnmr@fmr"] and same(fnmr["fnmr@fmr"][0.5], 2 / 3)


def test_fnmr_hand_case():
    # negatives 1..5: quantiles 0.25 -> 2, 0.9 -> 4.6 (linear interpolation), 0 -> 1, 1 -> 5;
    # the share of positives >= each
    pos, neg = np.array([0.5, 2.0, 3.0, 5.0]), np.array([5.0, 1.0, 4.0, 2.0, 3.0])
    assert same(C.calc_fnmr_at_fmr(pos, neg, (0.25, 0.9, 0.0, 1.0)), [3 / 4, 1 / 4, 3 / 4, 1 / 4])


def test_pcf_and_topological_hand_case():
    # 3 points on a line in 4-D: one component explains half (all) the variance: 1 of 4 components;
    # pcf@1 is OML's (min(N, D) + 1) / D, past the end of the min(N, D) = 3 singular values: 4 / 4
    x = torch.tensor([[0.0, 0, 0, 0], [1, 0, 0, 0], [3, 0, 0, 0]], dtype=torch.float64)
    got = C.calc_pcf(x, (0.5, 1.0))
    assert got.dtype == torch.float64 and torch.allclose(got, torch.tensor([1 / 4, 4 / 4], dtype=torch.float64))
    y = torch.cat([x, torch.tensor([[0.0, 2, 0, 0]], dtype=torch.float64)])
    topo = C.calc_topological_metrics(y, (0.5,), categories=np.array(["z", "a", "z", "a"]))
    assert list(topo) == ["OVERALL", "a", "z"] and list(topo["z"]) == ["pcf"]
    # two points per category: one component of 4
    assert torch.equal(topo["a"]["pcf"][0.5], torch.tensor(0.25, dtype=torch.float64))
    assert C.calc_topological_metrics(x, ()) == {}
    # the core's conventions (docs/compat_oml.md): no variance is undefined, one embedding an error
    assert torch.isnan(C.calc_pcf(torch.ones(3, 4), (0.5,))).all()
    with pytest.raises(ValueError, match="pcf needs at least 2 embeddings"):
        C.calc_pcf(torch.ones(1, 4), (0.5,))


# ---------------------------------------------------------------- random cases, devices


@pytest.mark.parametrize("seed", range(6))
def test_random_against_reference(seed, device):
    rng = random.Random(seed)
    retrieved, gt = random_case(rng, 40)
    ks = (1, 2, 5, 13)
    got = on_device(device, C.calc_retrieval_metrics, tensors(retrieved), tensors(gt), cmc_top_k=ks,
                    precision_top_k=ks, map_top_k=ks, reduce=False, verbose=False)
    for k in ks:
        want = [reference(r, g, k) for r, g in zip(retrieved, gt)]
        for j, name in enumerate(["cmc", "precision", "map"]):
            assert same(got[name][k], [w[j] for w in want]), (name, k)


def test_reduced_is_mean_of_per_query(device):
    retrieved, gt = random_case(random.Random(11), 30)
    gt = [g or [0] for g in gt]  # no NaN precision: the means are finite
    cats = np.array([i % 3 for i in range(30)])
    per = on_device(device, C.calc_retrieval_metrics, tensors(retrieved), tensors(gt), query_categories=cats,
                    reduce=False)
    red = on_device(device, C.calc_retrieval_metrics, tensors(retrieved), tensors(gt), query_categories=cats)
    for c in ["OVERALL", 0, 1, 2]:
        for name in ["cmc", "precision", "map"]:
            assert same(red[c][name][5], per[c][name][5].double().mean())


# ---------------------------------------------------------------- errors


@pytest.mark.parametrize("top_k", [(), (0,), (2, -1), (1.5,), (True,), 5, "5", ((1,),)])
def test_bad_top_k(top_k):
    with pytest.raises(ValueError, match="top_k must be a non-empty tuple or list of positive integers"):
        C.calc_cmc([torch.tensor([True])], [1], top_k)
    if top_k:  # an empty tuple leaves the metric out of calc_retrieval_metrics
        with pytest.raises(ValueError, match="map_top_k must be a non-empty"):
            C.calc_retrieval_metrics(tensors([[1]]), tensors([[1]]), map_top_k=top_k)


def test_bad_inputs():
    with pytest.raises(ValueError, match="one entry per query, got 2 and 1"):
        C.calc_retrieval_metrics(tensors([[1], [2]]), tensors([[1]]))
    with pytest.raises(ValueError, match=r"retrieved_ids\[0\] must be 1-D"):
        C.calc_retrieval_metrics([torch.ones(2, 2, dtype=torch.int64)], tensors([[1]]))
    with pytest.raises(ValueError, match="integer ids"):
        C.calc_retrieval_metrics([torch.tensor([True])], tensors([[1]]))
    with pytest.raises(ValueError, match="one count per query"):
        C.calc_map([torch.tensor([True])], [1, 2], (1,))
    with pytest.raises(ValueError, match="n_gts must be >= 0"):
        C.calc_map([torch.tensor([True])], [-1], (1,))
    with pytest.raises(ValueError, match="n_gts must be integer counts"):
        C.calc_map([torch.tensor([True])], [1.5], (1,))
    with pytest.raises(ValueError, match="gt_tops must be bool"):
        C.calc_precision([torch.tensor([2, 0])], [1], (1,))
    with pytest.raises(ValueError, match="one category per query"):
        C.calc_retrieval_metrics(tensors([[1]]), tensors([[1]]), query_categories=np.array([1, 2]))
    with pytest.raises(ValueError, match="rr must have RetrievalResults' retrieved_ids and gt_ids"):
        C.calc_retrieval_metrics_rr(object())
    with pytest.raises(ValueError, match="rr.gt_ids is None"):
        C.calc_retrieval_metrics_rr(SimpleNamespace(retrieved_ids=tensors([[1]]), gt_ids=None))
    with pytest.raises(ValueError, match="one distance per retrieved id"):
        C.calc_fnmr_at_fmr_rr(SimpleNamespace(retrieved_ids=tensors([[1, 2]]), gt_ids=tensors([[1]]),
                                              distances=[torch.tensor([0.1])]))


@pytest.mark.parametrize("fmr", [(), (-0.1,), (1.5,), (True,), 0.1])
def test_bad_fmr_vals(fmr):
    with pytest.raises(ValueError, match="fmr_vals must be a non-empty tuple or list of numbers in"):
        C.calc_fnmr_at_fmr(np.zeros(3), np.ones(3), fmr)


def test_bad_distances_and_embeddings():
    with pytest.raises(ValueError, match="must not be empty"):
        C.calc_fnmr_at_fmr(np.zeros(0), np.ones(3))
    with pytest.raises(ValueError, match="neg_dist must be finite"):
        C.calc_fnmr_at_fmr(np.zeros(2), np.array([1.0, np.inf]))
    with pytest.raises(ValueError, match="pcf_variance must be a non-empty"):
        C.calc_pcf(torch.eye(3), (2.0,))
    with pytest.raises(ValueError, match="floating point tensor"):
        C.calc_pcf(torch.eye(3, dtype=torch.int64), (0.5,))
    with pytest.raises(ValueError, match="one category per embedding"):
        C.calc_topological_metrics(torch.eye(3), (0.5,), categories=np.array([0, 1]))
