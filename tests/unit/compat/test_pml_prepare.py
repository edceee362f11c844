"""The PML drop-in's input checks and cluster codes on their fast paths: a reference
that is the query itself is checked for NaN as ``allclose(query, query)`` would, and
1-D integer labels give the same NMI/AMI as the row-wise ``unique`` they replace."""
import pytest
import torch

from retrieval_core.compat.pml import AccuracyCalculator


def _data(n=60, classes=4):
    g = torch.Generator().manual_seed(0)
    labels = torch.randint(-3, classes, (n,), generator=g)
    return torch.randn(classes + 3, 5, generator=g)[labels + 3] + 0.3 * torch.randn(n, 5, generator=g), labels


@pytest.mark.parametrize("explicit", [False, True])
def test_nan_query_as_its_own_reference_is_refused(explicit):
    x, labels = _data()
    x[7, 2] = float("nan")
    calc = AccuracyCalculator(include=("precision_at_1",), k=3)
    with pytest.raises(ValueError, match="ref_includes_query"):
        if explicit:
            calc.get_accuracy(x, labels, x, labels, ref_includes_query=True)
        else:
            calc.get_accuracy(x, labels)


def test_inf_query_passes_the_same_check_as_allclose():
    x, labels = _data()
    x[3, 1] = float("inf")
    assert torch.allclose(x, x)  # what the check was: inf equals inf
    calc = AccuracyCalculator(include=("precision_at_1",), k=3)
    try:
        calc.get_accuracy(x, labels)
    except ValueError as err:  # a later check may refuse inf, never this one
        assert "ref_includes_query" not in str(err)


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.uint8])
def test_flat_integer_labels_give_the_row_wise_clusters(dtype):
    x, labels = _data()
    labels = (labels + 3).to(dtype)
    calc = AccuracyCalculator(include=("NMI", "AMI"))
    flat = calc.get_accuracy(x, labels)
    rows = calc.get_accuracy(x, labels.unsqueeze(1))
    assert flat == rows
    assert 0.0 < flat["NMI"] <= 1.0
