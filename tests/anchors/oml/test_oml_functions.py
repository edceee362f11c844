"""Random cross-checks of retrieval_core.compat.oml against OML's own functions.

Skipped (with the reason) unless ``oml.functional.metrics`` loads: installed, or from
OML's source tree at ``OML_REPO_DIR`` (tests/anchors/oml/oml_env.py; docs/compat_oml.md
says how to get it)."""
from __future__ import annotations

import random

import numpy as np
import pytest
import torch

from retrieval_core.compat import oml as ours
from tests.anchors.oml.oml_env import load_oml_metrics
from tests.unit.compat.test_oml import random_case, tensors

OML, WHY = load_oml_metrics()
pytestmark = pytest.mark.skipif(OML is None, reason=f"OML's functions are not available: {WHY}")


def assert_same_dict(got, want, where="metrics"):
    assert list(got) == list(want), f"{where}: keys {list(got)} vs OML's {list(want)}"
    for k in want:
        g, w = got[k], want[k]
        if isinstance(w, dict):
            assert_same_dict(g, w, f"{where}[{k!r}]")
        else:
            assert g.dtype == w.dtype and g.shape == w.shape, f"{where}[{k!r}]: {g.dtype} {g.shape} vs {w.dtype} {w.shape}"
            assert torch.allclose(g, w, atol=1e-6, rtol=1e-6, equal_nan=True), f"{where}[{k!r}]: {g} vs OML's {w}"


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("reduce", [True, False])
def test_calc_retrieval_metrics(seed, reduce):
    rng = random.Random(seed)
    retrieved, gt = random_case(rng, 60, gallery=rng.choice([5, 12, 30]))
    ks = {name: tuple(rng.sample([1, 2, 3, 5, 10, 40], rng.choice([0, 1, 3]))) for name in ["cmc", "precision", "map"]}
    cats = None if seed % 2 else np.array([rng.choice(["x", "y", "z"]) for _ in retrieved])
    args = dict(query_categories=cats, cmc_top_k=ks["cmc"], precision_top_k=ks["precision"], map_top_k=ks["map"],
                reduce=reduce, verbose=False)
    assert_same_dict(ours.calc_retrieval_metrics(tensors(retrieved), tensors(gt), **args),
                     OML.calc_retrieval_metrics(tensors(retrieved), tensors(gt), **args))


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("name", ["calc_cmc", "calc_precision", "calc_map"])
def test_gt_tops_functions(seed, name):
    g = torch.Generator().manual_seed(seed)
    tops = [torch.rand(int(n), generator=g) < 0.3 for n in torch.randint(0, 9, (50,), generator=g)]
    # counts at least the hits (consistent inputs) and some zeros without hits
    n_gts = [int(t.sum()) + int(torch.randint(0, 3, (1,), generator=g)) for t in tops]
    top_k = (1, 2, 4, 8, 20)
    got, want = getattr(ours, name)(tops, n_gts, top_k), getattr(OML, name)(tops, n_gts, top_k)
    for k, a, b in zip(top_k, got, want):
        assert torch.allclose(a, b, atol=1e-6, equal_nan=True), (k, a, b)


@pytest.mark.parametrize("seed", range(6))
def test_fnmr_at_fmr(seed):
    rng = np.random.default_rng(seed)
    integer = seed % 2 == 0  # ties: small integer distances
    pos = rng.integers(0, 6, 200) if integer else rng.normal(1.0, 1.0, 300)
    neg = rng.integers(2, 9, 150) if integer else rng.normal(2.0, 1.0, 500)
    fmr = (0.0, 0.01, 0.1, 0.333, 0.5, 0.9, 1.0)
    assert torch.allclose(ours.calc_fnmr_at_fmr(pos, neg, fmr), OML.calc_fnmr_at_fmr(pos, neg, fmr), atol=1e-7)


@pytest.mark.parametrize("shape", [(50, 8), (6, 20), (200, 3)])
def test_pcf_and_topological(shape):
    g = torch.Generator().manual_seed(shape[0])
    x = torch.randn(*shape, generator=g) * torch.linspace(0.1, 3.0, shape[1])
    # not 1.0: OML's float32 cumulative ratios may pass 1 a component early (docs/compat_oml.md)
    variance = (0.1, 0.5, 0.8, 0.99)
    got, want = ours.calc_pcf(x, variance), OML.calc_pcf(x, variance)
    assert got.dtype == want.dtype and torch.allclose(got, want), (got, want)
    cats = np.arange(shape[0]) % 3
    assert_same_dict(ours.calc_topological_metrics(x, variance, categories=cats),
                     OML.calc_topological_metrics(x, variance, categories=cats))
