"""The device-comparison helpers of tests/devices.py catch what they should (run on CPU)."""
from __future__ import annotations

import pytest
import torch

import retrieval_core as rc
from tests.devices import assert_same, move, on_device


def test_move_keeps_types_and_attributes():
    r = rc.evaluate_scores(torch.tensor([[0.9, 0.1]]), torch.tensor([[1, 0]]), ["mrr"])
    moved = move({"r": r, "t": (torch.ones(1), [torch.zeros(1)], "x")}, "cpu")
    assert type(moved["r"]) is rc.MetricResults and moved["r"].n_queries.item() == 1
    assert moved["r"].n_empty == r.n_empty and moved["t"][2] == "x"
    ranking = rc.Ranking.from_relevance(torch.tensor([[1.0, 0.0]]))
    assert type(move(ranking, "cpu")) is rc.Ranking and move(ranking, "cpu").complete


def test_assert_same_accepts_equal_results():
    r = rc.evaluate_scores(torch.tensor([[0.9, 0.1]]), torch.tensor([[1, 0]]), ["mrr", "ndcg@2"], reduce="none")
    assert_same(r, move(r, "cpu"), "cpu")
    assert_same(torch.tensor([1.0, float("nan")]), torch.tensor([1.0 + 1e-14, float("nan")]), "cpu")


@pytest.mark.parametrize("got,want,message", [
    (torch.tensor([1.0, 2.0]), torch.tensor([1.0, 2.1]), "values differ"),
    (torch.tensor([1.0, float("nan")]), torch.tensor([1.0, 2.0]), "NaN at other places"),
    (torch.tensor([1, 2]), torch.tensor([1, 3]), "on CPU"),
    (torch.tensor([1.0]), torch.tensor([1.0], dtype=torch.float64), "float32"),
    ({"a": torch.ones(1)}, {"b": torch.ones(1)}, "keys"),
    ((torch.ones(1),), (torch.ones(1), torch.ones(1)), "tuple of 1"),
    (3, 4, "3 on"),
])
def test_assert_same_catches_differences(got, want, message):
    with pytest.raises(AssertionError, match=message):
        assert_same(got, want, "cpu")


def test_assert_same_catches_a_result_left_on_another_device():
    with pytest.raises(AssertionError, match="not on cuda"):
        assert_same(torch.ones(1), torch.ones(1), torch.device("cuda"))


def test_on_device_on_cpu_is_a_plain_call():
    calls = []
    out = on_device("cpu", lambda x, k: calls.append((x.device.type, k.device.type)) or x + k, torch.zeros(2),
                    k=torch.ones(1))
    assert calls == [("cpu", "cpu")]  # once: nothing to compare with
    assert out.tolist() == [1.0, 1.0]
