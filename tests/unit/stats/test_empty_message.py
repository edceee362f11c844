"""empty='error' (stats.aggregate.fill_empty): the message says why a query is undefined,
for the beyond-accuracy keys of top-k lists as for the accuracy keys."""
from __future__ import annotations

import pytest
import torch

import retrieval_core as rc


def test_empty_error_names_why_a_beyond_accuracy_key_is_undefined():
    """A user with one item has no diversity (no pair): the message said 'no relevant candidate'."""
    with pytest.raises(ValueError, match=r"fewer than 2 items for diversity.* diversity@2: 1;"):
        rc.evaluate_topk(torch.tensor([[0, 1], [2, -1]]), torch.tensor([[0], [2]]), ["diversity@2"],
                         item_categories=torch.tensor([0, 0, 1]), empty="error")
    with pytest.raises(ValueError, match=r"no relevant candidate.* recall@2: 1;"):
        rc.evaluate_topk(torch.tensor([[0, 1], [2, -1]]), torch.tensor([[0], [2]]), ["recall@2"], empty="error")
