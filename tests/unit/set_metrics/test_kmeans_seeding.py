"""The k-means++ seeding (``clustering._kmeanspp``, one ``[trials, N]`` distance block per step,
capped at the closest distance in float64) against a plain float64 reference written from the
definition: the same seed picks the same points at tiny, unit and huge scales, with duplicate
points (zero distances, equal potentials) and with as many clusters as points."""
import math

import pytest
import torch

from retrieval_core.set_metrics import clustering


def _reference_seeds(x: torch.Tensor, k: int, seed: int) -> list:
    """Greedy k-means++ from its definition: distances as ``((x - c) ** 2).sum(1)`` in float64."""
    gen = torch.Generator().manual_seed(seed)
    n = x.shape[0]
    trials = 2 + int(math.log(k))
    xd = x.double()
    first = int(torch.randint(n, (1,), generator=gen))
    chosen = [first]
    closest = ((xd - xd[first]) ** 2).sum(1)
    pot = closest.sum()
    for _ in range(1, k):
        r = torch.rand(trials, generator=gen, dtype=torch.float64) * pot
        cand = torch.searchsorted(torch.cumsum(closest, 0), r).clamp(max=n - 1)
        best = None
        for j in cand.tolist():
            d = torch.minimum(((xd - xd[j]) ** 2).sum(1), closest)
            if best is None or float(d.sum()) < best[0]:
                best = (float(d.sum()), j, d)
        pot, closest = torch.tensor(best[0], dtype=torch.float64), best[2]
        chosen.append(best[1])
    return chosen


def _seeds(x: torch.Tensor, k: int, seed: int) -> list:
    gen = torch.Generator().manual_seed(seed)
    return clustering._kmeanspp(x, (x * x).sum(1), k, gen).tolist()


@pytest.mark.parametrize("scale", [1e-30, 1.0, 1e18])
@pytest.mark.parametrize("k", [2, 9, 40])
def test_seeding_matches_definition_float64(scale, k):
    g = torch.Generator().manual_seed(k)
    x = torch.randn(300, 6, generator=g, dtype=torch.float64) * scale + 3 * scale
    for seed in (0, 7):
        assert _seeds(x, k, seed) == _reference_seeds(x, k, seed)


def test_seeding_with_duplicates_and_all_points():
    # five distinct points each repeated: equal potentials among duplicate candidates, zero distances
    base = torch.tensor([[0.0, 0.0], [4.0, 0.0], [0.0, 5.0], [9.0, 9.0], [-3.0, 7.0]], dtype=torch.float64)
    x = base.repeat(4, 1)
    for k in (3, 5, 20):
        got = _seeds(x, k, 1)
        assert got == _reference_seeds(x, k, 1)
        if k >= 5:  # the first five picks are the five distinct points (a duplicate adds nothing)
            assert {tuple(p) for p in x[got[:5]].tolist()} == {tuple(p) for p in base.tolist()}
    # float32 input (integers: exact squared distances): the same picks as in float64
    xi = torch.randint(-20, 20, (120, 3), generator=torch.Generator().manual_seed(2)).float()
    assert _seeds(xi, 12, 3) == _reference_seeds(xi, 12, 3)


def test_seeding_deterministic():
    x = torch.randn(2000, 16, generator=torch.Generator().manual_seed(5))
    assert _seeds(x, 30, 4) == _seeds(x.clone(), 30, 4)
