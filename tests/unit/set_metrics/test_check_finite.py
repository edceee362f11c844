"""``set_metrics._common._check_finite``: the finite-sum fast path never passes a NaN or +-inf
and never rejects finite values whose sum overflows (every floating dtype)."""
import pytest
import torch

from retrieval_core.set_metrics import _common


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32, torch.float64])
@pytest.mark.parametrize("bad", [float("nan"), float("inf"), float("-inf"), "both infs"])
def test_non_finite_raises(dtype, bad):
    t = torch.randn(50, 3).to(dtype)
    if bad == "both infs":  # +inf and -inf together: a NaN sum
        t[3, 1], t[40, 2] = float("inf"), float("-inf")
    else:
        t[17, 0] = bad
    with pytest.raises(ValueError, match="NaN or infinite"):
        _common._check_finite("x", t)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32, torch.float64])
def test_finite_sum_overflow_passes(dtype):
    big = torch.finfo(dtype).max
    t = torch.full((64, 2), big, dtype=dtype)  # finite values whose sum overflows to inf
    assert not bool(torch.isfinite(t.sum()))
    _common._check_finite("x", t)
    _common._check_finite("x", torch.tensor([big, -big, big], dtype=dtype))
    _common._check_finite("x", torch.zeros(0, 3, dtype=dtype))
    _common._check_finite("ids", torch.tensor([1, 2, 3]))  # integers are not checked
