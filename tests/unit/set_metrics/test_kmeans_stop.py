"""The k-means stopping threshold computed lazily (``_StopTol``): every comparison
equals the one against sklearn's ``tol * mean(per-feature variance)`` computed up front,
at tiny, huge and mixed scales, in float32 and float64, with ``tol`` 0 and shifts on
both sides of the threshold."""
import pytest
import torch

from retrieval_core.set_metrics.clustering import _StopTol, kmeans


def _exact(x, tol):
    return x.double().var(0, unbiased=False).mean() * tol


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("scale", [1e-30, 1e-20, 1e-3, 1.0, 1e15, 1e18])
@pytest.mark.parametrize("tol", [0.0, 1e-4, 1.0])
def test_reached_equals_exact_threshold(dtype, scale, tol):
    g = torch.Generator().manual_seed(3)
    x = (torch.randn(300, 7, generator=g, dtype=torch.float64) * scale + 5 * scale).to(dtype)
    x[:, 0] = x[0, 0]  # a constant feature: variance 0
    x_sq = (x * x).sum(1)
    exact = _exact(x, tol)
    stop = _StopTol(x, x_sq, tol)
    for shift in [0.0, float(exact) * 0.5, float(exact), float(exact) * (1 + 1e-12), float(exact) * 2,
                  float(exact) * 1e3, scale * scale, 1e300, 5e-324]:
        s = torch.tensor(shift, dtype=torch.float64)
        assert stop.reached(s) == bool(s <= exact), (shift, float(exact))


def test_reached_with_underflowing_squares():
    # float32 squares of 1e-25 underflow to 0: the bound must still cover the float64 variance
    x = torch.tensor([[1e-25, -1e-25], [-1e-25, 1e-25], [3e-25, 0.0]], dtype=torch.float32)
    x_sq = (x * x).sum(1)
    assert float(x_sq.max()) == 0.0
    exact = _exact(x, 1.0)
    assert float(exact) > 0.0
    stop = _StopTol(x, x_sq, 1.0)
    assert stop.reached(exact) and not stop.reached(exact * 2)


@pytest.mark.parametrize("scale", [2.0**-70, 1.0, 2.0**40])
def test_kmeans_stops_on_tol_at_any_scale(scale):
    # a loose tol stops on the shift rule (not on stable labels): exact powers of 2: the same labels at every scale
    g = torch.Generator().manual_seed(0)
    x = torch.randn(400, 3, generator=g, dtype=torch.float64)
    ref = kmeans(x, 5, tol=0.5)
    assert torch.equal(kmeans(x * scale, 5, tol=0.5), ref)
