"""The value checks of score mode (validate.value_flags) give the same flags under both
host-read policies: CPU's (a sum settles finite scores, the exact check runs only when
the sum is not finite) and the sync-free one (min and max), on values built to fool a
shortcut: finite scores whose float32 sum overflows, -inf, negative NaN, -0.0 gains."""
import pytest
import torch

from retrieval_core import sizing
from retrieval_core.validate import value_flags
from retrieval_core.validate.values import check_representable

BIG = 3e38  # finite in float32; two of them sum to inf


def reference(preds: torch.Tensor, target: torch.Tensor):
    bad_preds = bool((~torch.isfinite(preds)).any()) if preds.is_floating_point() else False
    bad_target = bool((~torch.isfinite(target)).any()) if target.is_floating_point() else False
    negative = bool((target < 0).any()) if target.dtype != torch.bool else False
    return [int(bad_preds), int(bad_target), int(negative)]


def cases():
    p = torch.rand(4, 6)
    t = torch.tensor([[0, 1, 2, 0, 0, 3]] * 4, dtype=torch.float32)
    yield "clean", p, t
    yield "finite scores, overflowing sum", torch.full((4, 6), BIG), t
    yield "finite scores, overflowing sum, negative", torch.full((4, 6), -BIG), t
    yield "finite gains, overflowing sum", p, torch.full((4, 6), BIG)
    for name, v in [("nan", float("nan")), ("-nan", -float("nan")), ("+inf", float("inf")), ("-inf", float("-inf"))]:
        q = p.clone()
        q[2, 3] = v
        yield f"score {name}", q, t
        yield f"score {name} with an overflowing sum", torch.full((4, 6), BIG).index_put_(
            (torch.tensor([1]), torch.tensor([1])), torch.tensor(v)), t
        g = t.clone()
        g[1, 4] = v
        yield f"gain {name}", p, g
    g = t.clone()
    g[0, 0] = -0.0
    yield "gain -0.0 (a zero gain)", p, g
    g = t.clone()
    g[3, 5] = -1.0
    yield "negative gain", p, g
    yield "float64", p.double().index_put_((torch.tensor([0]), torch.tensor([0])), torch.tensor(float("inf"), dtype=torch.float64)), t.double()
    yield "float16 overflowing sum", torch.full((4, 6), 60000.0, dtype=torch.float16), t.half()
    yield "integer gains, negative", p, torch.tensor([[0, -2, 1, 0, 0, 0]] * 4)
    yield "bool gains", p, t.bool()
    yield "integer scores", torch.arange(24).view(4, 6), t


@pytest.mark.parametrize("sync_free", [False, True])
@pytest.mark.parametrize("name,preds,target", list(cases()), ids=[c[0] for c in cases()])
def test_value_flags_are_exact_under_both_policies(name, preds, target, sync_free):
    with sizing.force_sync_free(sync_free):
        assert value_flags(preds, target).tolist() == reference(preds, target), name


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32, torch.float64])
def test_embedding_finite_check_finds_each_nan_and_infinity(dtype):
    """The finite check reads the extremes (no |x| copy): a NaN or an infinity anywhere, of
    either sign, among huge finite values, is found; empty embeddings pass."""
    from retrieval_core.validate.embeddings import check_embedding_values
    big = torch.finfo(dtype).max
    labels = torch.zeros(3, dtype=torch.int64)
    check_embedding_values(torch.tensor([[big, -big], [0.0, 1.0], [-0.0, big]], dtype=dtype), labels)
    for bad in (float("nan"), float("inf"), -float("inf")):
        for at in range(6):
            x = torch.tensor([[big, -big], [0.0, 1.0], [-0.0, big]], dtype=dtype)
            x.view(-1)[at] = bad
            with pytest.raises(ValueError, match="query embeddings contain NaN or inf"):
                check_embedding_values(x, labels)
            with pytest.raises(ValueError, match="gallery embeddings contain NaN or inf"):
                check_embedding_values(torch.ones(3, 2, dtype=dtype), labels, x, labels)
    check_embedding_values(torch.zeros(0, 4, dtype=dtype), labels[:0])
    check_embedding_values(torch.zeros(3, 0, dtype=dtype), labels)


def test_a_popularity_too_large_to_average_is_named_as_such():
    """popularity@k past what a mean over the users can sum: the hint names item_popularity,
    not dcg_exp's gains (the hostile tester of session 36)."""
    import retrieval_core as rc

    topk = torch.tensor([[0, -1]] * 100)
    truth = torch.stack([torch.arange(100), torch.zeros(100, dtype=torch.long)])
    with pytest.raises(ValueError, match=r"popularity@2: values up to 1e\+307 over 100 queries.*scale item_popularity"):
        rc.evaluate_topk(topk, truth, ["popularity@2"], item_popularity=torch.tensor([1e307, 1.0], dtype=torch.float64))
    with pytest.raises(ValueError, match="use ndcg_exp/ndcg"):
        check_representable(torch.tensor([[1.0, float("inf")]]), ["popularity@2", "dcg_exp@3"])
