"""Metric keys take ASCII digits and numbers only: a cutoff or parameter written with
other Unicode digits, spaces or underscores is refused, not read as a number."""
import pytest
import torch

import retrieval_core as rc


@pytest.mark.parametrize("key", ["ndcg@１０", "ndcg@²", "ndcg@٣", "ndcg@ 10", "ndcg@10 ", "ndcg@+10", "ndcg@1_0", "ndcg@\t3"])
def test_cutoffs_take_ascii_digits_only(key):
    with pytest.raises(ValueError, match=r"k must be a positive integer or 'r' in 'ndcg@"):
        rc.parse_metrics([key])
    with pytest.raises(ValueError, match=r"k must be a positive integer or 'r'"):
        rc.evaluate_scores(torch.rand(2, 12), torch.ones(2, 12), [key])


@pytest.mark.parametrize("key", ["fnmr@０.１", "fnmr@0.１", "fnmr@ 0.1", "fnmr@0.1 ", "fnmr@0.1\n", "fnmr@1_0", "fnmr@inf",
                                 "fnmr@nan", "pcf@٠.5"])
def test_set_level_parameters_take_ascii_numbers_only(key):
    name = key.split("@")[0]
    with pytest.raises(ValueError, match=rf"{name} takes a number after '@', e.g. '{name}@0.1'"):
        rc.parse_metrics([key])


def test_ascii_keys_still_parse():
    parsed = rc.parse_metrics(["ndcg@10", "fnmr@0.1", "fnmr@.5", "pcf@1e-1", "fnmr@1.", "map@r"])
    assert [m.cutoff for m in parsed] == [10, 0.1, 0.5, 0.1, 1.0, "r"]
    with pytest.raises(ValueError, match=r"fnmr takes a finite number after '@'; got 'fnmr@1e999'"):
        rc.parse_metrics(["fnmr@1e999"])
