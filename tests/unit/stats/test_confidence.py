"""Confidence metrics: erc:, conf:, spearman:, kendall: keys and rank_correlation.

References: scipy.stats for the rank correlations; plain-Python brute force
(sorted lists, every permutation of tied groups) for the curves.
"""
import itertools
import math
import re

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

import retrieval_core as rc
from retrieval_core.stats.confidence import confidence_results
from retrieval_core.stats.curves import confidence_curve, erc_curve
from retrieval_core.stats.confidence_batched import _batched, _one_key, _resampled
from retrieval_core.stats.correlation import _inversions

pytestmark = pytest.mark.filterwarnings("ignore::scipy.stats.ConstantInputWarning")

# -- references written from the definitions ----------------------------------------------


def erc_reference(values, confidence):
    """ERC by the definition: stable order by decreasing confidence, mean error of the first j."""
    pairs = [(c, i, 1.0 - v) for i, (v, c) in enumerate(zip(values, confidence)) if not math.isnan(v)]
    order = sorted(pairs, key=lambda p: (-p[0], p[1]))
    errors = [p[2] for p in order]
    curve = [sum(errors[:j]) / j for j in range(1, len(errors) + 1)]
    return [j / len(errors) for j in range(1, len(errors) + 1)], curve


def erc_over_orders(errors, confidence, pick):
    """Every order of the queries within tied confidence groups: ``pick`` of the ERCs
    (mean: the expected curve; min/max pointwise: the best/worst order)."""
    groups = {}
    for e, c in zip(errors, confidence):
        groups.setdefault(c, []).append(e)
    levels = sorted(groups, reverse=True)
    curves = []
    for orders in itertools.product(*(itertools.permutations(groups[c]) for c in levels)):
        seq = [e for part in orders for e in part]
        curves.append([sum(seq[:j]) / j for j in range(1, len(seq) + 1)])
    return np.asarray(pick(np.asarray(curves), axis=0))


def conf_reference(values, confidence, reduce=np.mean):
    out = []
    for i in range(101):
        t = i / 100
        kept = [v for v, c in zip(values, confidence) if c >= t and not math.isnan(v)]
        out.append(float(reduce(kept)) if kept else float("nan"))
    return out


def per_query(preds, target, key, **kw):
    return rc.evaluate_scores(preds, target, [key], reduce="none", **kw)[key]


def defined(confidence, values):
    """numpy arrays of the queries whose value is defined (what the keys use under empty='skip')."""
    keep = ~torch.isnan(values)
    return confidence[keep].numpy(), values[keep].numpy()


def assert_same(ours, ref, abs=1e-12):
    if math.isnan(ref):
        assert math.isnan(ours)
    else:
        assert ours == pytest.approx(ref, abs=abs)


@pytest.fixture
def scores(generator):
    """``(preds, target)`` of 60 queries over 20 candidates; about 5% of queries have no
    relevant candidate (skipped), graded gains 0..2, and scores with ties."""
    preds = torch.randint(0, 30, (60, 20), generator=generator).float() / 30
    target = torch.randint(0, 3, (60, 20), generator=generator) * (torch.rand(60, 20, generator=generator) < 0.2)
    target[::20] = 0
    return preds, target


# -- rank correlation ------------------------------------------------------------------


@pytest.mark.parametrize("method", ["spearman", "kendall"])
@pytest.mark.parametrize("n,levels", [(2, 0), (3, 2), (10, 3), (57, 0), (200, 5), (1000, 40)])
def test_rank_correlation_equals_scipy_small(method, n, levels, generator):
    for _ in range(5):
        if levels:  # many ties
            x = torch.randint(0, levels, (n,), generator=generator).to(torch.float64)
            y = torch.randint(0, levels, (n,), generator=generator)
        else:
            x = torch.rand(n, generator=generator, dtype=torch.float64)
            y = torch.rand(n, generator=generator) + 0.3 * x.float()
        ours = rc.rank_correlation(x, y, method).item()
        ref = (stats.spearmanr if method == "spearman" else stats.kendalltau)(x.numpy(), y.numpy())[0]
        assert_same(ours, ref)


@pytest.mark.parametrize("method", ["spearman", "kendall"])
def test_rank_correlation_equals_scipy_large(method, generator):
    n = 100_000
    x = torch.rand(n, generator=generator, dtype=torch.float64)
    y = (torch.rand(n, generator=generator, dtype=torch.float64) + x) // 0.05  # correlated, heavily tied
    ours = rc.rank_correlation(x, y, method).item()
    ref = (stats.spearmanr if method == "spearman" else stats.kendalltau)(x.numpy(), y.numpy())[0]
    assert ours == pytest.approx(ref, abs=1e-10)
    assert 0.3 < ours < 1  # a real correlation, not a degenerate one


def test_rank_correlation_undefined_is_nan():
    assert math.isnan(rc.rank_correlation(torch.tensor([1.0]), torch.tensor([2.0])).item())
    for method in ("spearman", "kendall"):
        constant = rc.rank_correlation(torch.ones(5), torch.arange(5.0), method)
        assert math.isnan(constant.item())
        assert constant.dtype == torch.float64 and constant.ndim == 0


def test_rank_correlation_perfect_orders():
    x = torch.arange(10.0)
    for method in ("spearman", "kendall"):
        assert rc.rank_correlation(x, 2 * x + 1, method).item() == pytest.approx(1.0)
        assert rc.rank_correlation(x, -x, method).item() == pytest.approx(-1.0)


def test_inversions_equal_brute_force(generator):
    for n in (1, 2, 3, 7, 8, 9, 100):
        codes = torch.randint(0, 6, (n,), generator=generator)
        brute = sum(int(codes[i] > codes[j]) for i in range(n) for j in range(i + 1, n))
        assert int(_inversions(codes)) == brute


# -- erc: -------------------------------------------------------------------------------


def test_erc_hand_toy():
    # cmc@1 of each row: 1, 0, 1, 0; most confident first: rows 0, 2, 3, 1 -> errors 0, 0, 1, 1
    preds = torch.tensor([[0.9, 0.1], [0.9, 0.1], [0.9, 0.1], [0.9, 0.1]])
    target = torch.tensor([[1, 0], [0, 1], [1, 0], [0, 1]])
    r = rc.evaluate_scores(preds, target, ["cmc@1", "erc:cmc@1"], confidence=torch.tensor([0.9, 0.1, 0.8, 0.3]))
    kept, error = r.curves["erc:cmc@1"]
    assert kept.tolist() == [0.25, 0.5, 0.75, 1.0]
    assert error.tolist() == pytest.approx([0.0, 0.0, 1 / 3, 0.5])
    assert r["erc:cmc@1"].item() == pytest.approx((0 + 0 + 1 / 3 + 0.5) / 4)
    assert r["cmc@1"].item() == 0.5  # the plain key is unchanged
    assert kept.dtype == error.dtype == torch.float64


def test_erc_equals_reference(dense_scores, generator):
    preds, target = dense_scores
    confidence = torch.rand(preds.shape[0], generator=generator)
    confidence[::7] = 0.5  # some ties
    for key in ("cmc@1", "map@r", "ndcg@5", "precision@3"):
        values = per_query(preds, target, key)
        r = rc.evaluate_scores(preds, target, [f"erc:{key}"], confidence=confidence)
        kept, curve = erc_reference(values.tolist(), confidence.tolist())
        assert r.curves[f"erc:{key}"][0].tolist() == pytest.approx(kept)
        assert r.curves[f"erc:{key}"][1].tolist() == pytest.approx(curve)
        assert r[f"erc:{key}"].item() == pytest.approx(float(np.mean(curve)))


def test_erc_any_confidence_range():
    preds = torch.tensor([[0.9, 0.1], [0.9, 0.1], [0.9, 0.1]])
    target = torch.tensor([[1, 0], [0, 1], [1, 0]])
    a = rc.evaluate_scores(preds, target, ["erc:cmc@1"], confidence=torch.tensor([5.0, -3.0, 1e6]))
    b = rc.evaluate_scores(preds, target, ["erc:cmc@1"], confidence=torch.tensor([0.5, 0.1, 0.9]))
    assert a["erc:cmc@1"].item() == b["erc:cmc@1"].item()
    ints = rc.evaluate_scores(preds, target, ["erc:cmc@1"], confidence=torch.tensor([5, -3, 1000]))
    assert ints["erc:cmc@1"].item() == b["erc:cmc@1"].item()


def test_erc_stable_ties_earlier_query_first():
    errors = torch.tensor([1.0, 0.0, 0.0], dtype=torch.float64)
    kept, curve = erc_curve(errors, torch.tensor([0.5, 0.5, 0.5]))
    assert curve.tolist() == pytest.approx([1.0, 0.5, 1 / 3])


@pytest.mark.parametrize("ties,pick", [("expected", np.mean), ("optimistic", np.min), ("pessimistic", np.max)])
def test_erc_tie_modes_equal_brute_force(ties, pick, generator):
    for _ in range(20):
        n = int(torch.randint(1, 7, (1,), generator=generator))
        errors = torch.randint(0, 3, (n,), generator=generator).to(torch.float64) / 2
        confidence = torch.randint(0, 3, (n,), generator=generator).to(torch.float32)
        _, curve = erc_curve(errors, confidence, ties=ties)
        ref = erc_over_orders(errors.tolist(), confidence.tolist(), pick)
        assert curve.tolist() == pytest.approx(ref.tolist())


def test_erc_skipped_queries_left_out(generator):
    preds = torch.rand(6, 4, generator=generator)
    target = torch.tensor([[1, 0, 0, 0], [0, 0, 0, 0], [0, 1, 0, 1], [0, 0, 0, 0], [0, 0, 1, 0], [1, 1, 0, 0]])
    confidence = torch.tensor([0.1, 0.9, 0.5, 0.8, 0.3, 0.7])
    skip = rc.evaluate_scores(preds, target, ["erc:map@r"], confidence=confidence)
    keep = torch.tensor([0, 2, 4, 5])
    alone = rc.evaluate_scores(preds[keep], target[keep], ["erc:map@r"], confidence=confidence[keep])
    assert skip["erc:map@r"].item() == pytest.approx(alone["erc:map@r"].item())
    assert skip.curves["erc:map@r"][0].numel() == 4
    assert skip.n_empty["erc:map@r"].item() == 2
    zero = rc.evaluate_scores(preds, target, ["erc:map@r"], confidence=confidence, empty="zero")
    values = per_query(preds, target, "map@r", empty="zero")
    assert zero.curves["erc:map@r"][1].tolist() == pytest.approx(erc_reference(values.tolist(), confidence.tolist())[1])
    with pytest.raises(ValueError, match="empty='error' forbids them"):
        rc.evaluate_scores(preds, target, ["erc:map@r"], confidence=confidence, empty="error")


def test_all_queries_skipped_gives_nan():
    r = rc.evaluate_scores(torch.rand(2, 3), torch.zeros(2, 3), ["erc:cmc@1", "conf:cmc@1", "kendall:cmc@1"],
                           confidence=torch.tensor([0.2, 0.4]))
    assert all(math.isnan(r[k].item()) for k in r)
    assert r.curves["erc:cmc@1"][1].numel() == 0


# -- conf: ------------------------------------------------------------------------------


def test_conf_equals_reference(dense_scores, generator):
    preds, target = dense_scores
    confidence = torch.rand(preds.shape[0], generator=generator) * 0.8  # nothing kept above 0.8
    confidence[:3] = torch.tensor([0.0, 0.3, 0.8])  # on grid points
    for key in ("cmc@1", "map@r"):
        values = per_query(preds, target, key).tolist()
        r = rc.evaluate_scores(preds, target, [f"conf:{key}"], confidence=confidence)
        t, curve = r.curves[f"conf:{key}"]
        assert t.tolist() == pytest.approx([i / 100 for i in range(101)])
        ref = conf_reference(values, confidence.tolist())
        np.testing.assert_allclose(curve.numpy(), ref, rtol=1e-12, equal_nan=True)
        assert math.isnan(ref[-1]) and not math.isnan(ref[80])
        assert r[f"conf:{key}"].item() == pytest.approx(float(np.nanmean(ref)))


@pytest.mark.parametrize("reduce,ref", [("median", np.median), ("min", np.min), ("max", np.max)])
def test_conf_other_reductions(reduce, ref, dense_scores, generator):
    preds, target = dense_scores
    confidence = torch.rand(preds.shape[0], generator=generator)
    values = per_query(preds, target, "ndcg@5").tolist()
    r = rc.evaluate_scores(preds, target, ["conf:ndcg@5"], confidence=confidence, reduce=reduce)
    expected = conf_reference(values, confidence.tolist(), ref)
    np.testing.assert_allclose(r.curves["conf:ndcg@5"][1].numpy(), expected, rtol=1e-12, equal_nan=True)


def test_conf_hand_toy():
    v = torch.tensor([1.0, 0.0, 1.0], dtype=torch.float64)
    t, curve = confidence_curve(v, torch.tensor([0.9, 0.2, 0.5]))
    assert curve[0].item() == pytest.approx(2 / 3)  # every query
    assert curve[20].item() == pytest.approx(2 / 3)  # 0.2 >= 0.2 still kept
    assert curve[21].item() == 1.0
    assert curve[90].item() == 1.0 and math.isnan(curve[91].item())


# -- spearman:, kendall: ------------------------------------------------------------------


def test_correlation_keys_equal_scipy(scores, generator):
    preds, target = scores
    confidence = torch.rand(preds.shape[0], generator=generator)
    confidence[::5] = 0.5  # tied confidences
    keys = ["ndcg@5", "cmc@1", "map@r"]
    r = rc.evaluate_scores(preds, target, [f"{m}:{k}" for k in keys for m in ("spearman", "kendall")],
                           confidence=confidence)
    for key in keys:
        c, v = defined(confidence, per_query(preds, target, key))
        assert len(v) < 60  # skipped queries were left out
        assert_same(r[f"kendall:{key}"].item(), stats.kendalltau(c, v)[0])
        assert_same(r[f"spearman:{key}"].item(), stats.spearmanr(c, v)[0])
        assert not math.isnan(r[f"kendall:{key}"].item())
    assert not r.curves


# -- forms and options ----------------------------------------------------------------------


KEYS = ["cmc@1", "erc:cmc@1", "conf:map@r", "spearman:ndcg@5", "kendall:ndcg@5"]


def test_flat_form_equals_dense(scores, generator):
    _, target = scores
    q, n = target.shape
    preds = torch.rand(q, n, generator=generator, dtype=torch.float64)  # no tied scores: one order in both forms
    confidence = torch.rand(q, generator=generator)
    dense = rc.evaluate_scores(preds, target, KEYS, confidence=confidence)
    perm = torch.randperm(q * n, generator=generator)
    indexes = torch.arange(q).repeat_interleave(n)[perm]
    flat = rc.evaluate_scores(preds.reshape(-1)[perm], target.reshape(-1)[perm], KEYS, indexes=indexes,
                              confidence=confidence[indexes])
    for k in KEYS:
        assert_same(flat[k].item(), dense[k].item())
    for k in dense.curves:
        assert torch.allclose(flat.curves[k][1], dense.curves[k][1], equal_nan=True)


def test_categories_apply_to_confidence_keys(scores, generator):
    preds, target = scores
    confidence = torch.rand(preds.shape[0], generator=generator)
    categories = torch.arange(preds.shape[0]) % 3
    r = rc.evaluate_scores(preds, target, KEYS, confidence=confidence, categories=categories)
    for c in range(3):
        rows = categories == c
        alone = rc.evaluate_scores(preds[rows], target[rows], KEYS, confidence=confidence[rows])
        for k in KEYS:
            assert_same(r[f"{k}/{c}"].item(), alone[k].item())
    assert set(r.curves) == {"erc:cmc@1", "conf:map@r"}  # curves of all queries only


def test_reduce_none_gives_inner_values(dense_scores):
    preds, target = dense_scores
    r = rc.evaluate_scores(preds, target, ["erc:cmc@1", "cmc@1"], reduce="none")
    torch.testing.assert_close(r["erc:cmc@1"], r["cmc@1"], equal_nan=True, rtol=0, atol=0)
    assert r.curves == {}


def test_embeddings_confidence(embeddings_labels, generator):
    x, labels = embeddings_labels
    confidence = torch.rand(x.shape[0], generator=generator)
    keys = ["erc:cmc@1", "conf:map@r", "spearman:map@r", "kendall:cmc@5"]
    r = rc.evaluate_embeddings(x, labels, keys, confidence=confidence)
    values = rc.evaluate_embeddings(x, labels, ["cmc@1", "map@r", "cmc@5"], reduce="none")
    kept, curve = erc_reference(values["cmc@1"].tolist(), confidence.tolist())
    assert r.curves["erc:cmc@1"][1].tolist() == pytest.approx(curve)
    assert r["erc:cmc@1"].item() == pytest.approx(float(np.mean(curve)))
    assert r["conf:map@r"].item() == pytest.approx(
        float(np.nanmean(conf_reference(values["map@r"].tolist(), confidence.tolist()))))
    assert_same(r["spearman:map@r"].item(), stats.spearmanr(confidence.numpy(), values["map@r"].numpy())[0])
    assert_same(r["kendall:cmc@5"].item(), stats.kendalltau(confidence.numpy(), values["cmc@5"].numpy())[0])
    assert list(r)[:4] == keys


def test_embeddings_per_class_macro(embeddings_labels, generator):
    x, labels = embeddings_labels
    confidence = torch.rand(x.shape[0], generator=generator)
    r = rc.evaluate_embeddings(x, labels, ["erc:cmc@1"], confidence=confidence, per_class="all")
    per = [r[k].item() for k in r if k.startswith("erc:cmc@1/class=")]
    assert r["erc:cmc@1"].item() == pytest.approx(float(np.nanmean(per)))
    c0 = labels == labels.min()
    q = torch.nonzero(c0).squeeze(1)
    gal = rc.evaluate_embeddings(x, labels, ["cmc@1"], reduce="none")["cmc@1"][q]
    _, curve = erc_reference(gal.tolist(), confidence[q].tolist())
    assert r[f"erc:cmc@1/class={labels.min().item()}"].item() == pytest.approx(float(np.mean(curve)))


def test_curves_on_the_input_device(device):
    preds = torch.rand(5, 4, device=device)
    target = (torch.arange(20, device=device).reshape(5, 4) % 3 == 0)
    r = rc.evaluate_scores(preds, target, ["erc:cmc@1", "conf:cmc@1", "kendall:cmc@1"],
                           confidence=torch.linspace(0, 1, 5, device=device))
    for k in ("erc:cmc@1", "conf:cmc@1"):
        assert all(t.device == preds.device for t in r.curves[k])
    assert all(v.device == preds.device for v in r.values())


# -- bad inputs ------------------------------------------------------------------------------

P, T = torch.rand(3, 4), torch.tensor([[1, 0, 0, 0], [0, 1, 0, 0], [0, 0, 1, 1]])
C = torch.tensor([0.1, 0.5, 0.9])

BAD = [
    ("no confidence", lambda: rc.evaluate_scores(P, T, ["erc:cmc@1"]), ValueError,
     "erc:cmc@1: confidence keys need per-query confidences: pass confidence=[queries] floats"),
    ("wrong length", lambda: rc.evaluate_scores(P, T, ["erc:cmc@1"], confidence=torch.rand(4)), ValueError,
     "confidence must have one value per query (row); got 4 for 3"),
    ("flat wrong length", lambda: rc.evaluate_scores(P.reshape(-1), T.reshape(-1), ["erc:cmc@1"],
                                                     indexes=torch.arange(3).repeat_interleave(4), confidence=C),
     ValueError, "confidence must have one value per prediction (the flat form takes one per entry); got 3 for 12"),
    ("flat disagree", lambda: rc.evaluate_scores(P.reshape(-1), T.reshape(-1), ["erc:cmc@1"],
                                                 indexes=torch.arange(3).repeat_interleave(4),
                                                 confidence=torch.rand(12)),
     ValueError, "confidence must be the same for every entry of a query (equal indexes)"),
    ("nan", lambda: rc.evaluate_scores(P, T, ["erc:cmc@1"], confidence=torch.tensor([0.1, float("nan"), 0.2])),
     ValueError, "confidence contains NaN or infinite values (1 of 3); confidences must be finite numbers"),
    ("inf", lambda: rc.evaluate_scores(P, T, ["kendall:cmc@1"], confidence=torch.tensor([0.1, float("inf"), 0.2])),
     ValueError, "confidence contains NaN or infinite values (1 of 3)"),
    ("nan embeddings", lambda: rc.evaluate_embeddings(torch.rand(3, 2), torch.tensor([0, 0, 1]), ["erc:cmc@1"],
                                                      confidence=torch.tensor([0.1, float("nan"), 0.2])),
     ValueError, "confidence contains NaN or infinite values (1 of 3)"),
    ("list", lambda: rc.evaluate_scores(P, T, ["erc:cmc@1"], confidence=[0.1, 0.2, 0.3]), TypeError,
     "confidence must be a torch.Tensor with one real value per query (row); got list"),
    ("bool", lambda: rc.evaluate_scores(P, T, ["erc:cmc@1"], confidence=C > 0.3), TypeError,
     "confidence must be a real (float or integer) tensor; got torch.bool"),
    ("2-d", lambda: rc.evaluate_scores(P, T, ["erc:cmc@1"], confidence=C.reshape(3, 1)), ValueError,
     "confidence must be 1-D with one value per query (row); got shape (3, 1)"),
    ("conf range", lambda: rc.evaluate_scores(P, T, ["conf:cmc@1"], confidence=torch.tensor([0.1, 1.5, 0.2])),
     ValueError, "conf:cmc@1: conf: keys need confidences within [0, 1]; got values from 0.1 to 1.5"),
    ("unknown prefix", lambda: rc.evaluate_scores(P, T, ["aurc:cmc@1"], confidence=C), ValueError,
     "unknown prefix 'aurc:' in key 'aurc:cmc@1'; confidence keys are erc:<key>, conf:<key>, spearman:<key>, "
     "kendall:<key>"),
    ("unbounded erc", lambda: rc.evaluate_scores(P, T, ["erc:dcg@3"], confidence=C), ValueError,
     "'erc:dcg@3': erc: reads 1 - value as the error of a query and needs a metric within [0, 1]"),
    ("set-level inner", lambda: rc.evaluate_embeddings(torch.rand(3, 2), torch.tensor([0, 0, 1]), ["erc:nmi"],
                                                       confidence=C),
     ValueError, "'erc:nmi': confidence keys reduce per-query values; 'nmi' is an embedding-set metric"),
    ("nested", lambda: rc.parse_metrics(["erc:conf:cmc@1"]), ValueError,
     "confidence keys take a plain per-query key after 'erc:', e.g. 'erc:cmc@1'; got 'erc:conf:cmc@1'"),
    ("bad inner", lambda: rc.parse_metrics(["erc:cmc@0"]), ValueError, "k must be a positive integer in 'cmc@0'"),
    ("correlation shapes", lambda: rc.rank_correlation(torch.rand(3), torch.rand(4)), ValueError,
     "x and y must be 1-D of the same length; got shapes (3,) and (4,)"),
    ("correlation method", lambda: rc.rank_correlation(C, C, "pearson"), ValueError,
     "method must be one of 'spearman', 'kendall'; got 'pearson'"),
    ("correlation nan", lambda: rc.rank_correlation(torch.tensor([1.0, float("nan")]), torch.rand(2)), ValueError,
     "x contains NaN or infinite values; rank correlation needs finite numbers"),
    ("correlation list", lambda: rc.rank_correlation([1.0, 2.0], C[:2]), TypeError,
     "x must be a torch.Tensor; got list"),
    ("correlation bool", lambda: rc.rank_correlation(C, C > 0.2), TypeError,
     "y must be a real (float or integer) tensor; got torch.bool"),
]


@pytest.mark.parametrize("call,exc,message", [c[1:] for c in BAD], ids=[c[0] for c in BAD])
def test_bad_inputs(call, exc, message):
    with pytest.raises(exc, match=re.escape(message)):
        call()


def test_errors_before_the_work():
    """A wrong confidence length fails before any ranking (the check reads no values)."""
    with pytest.raises(ValueError, match="got 2 for 3"):
        rc.evaluate_scores(P, T, ["erc:ndcg"], confidence=torch.rand(2))


# -- properties --------------------------------------------------------------------------

pairs_of_lists = st.integers(0, 40).flatmap(
    lambda n: st.tuples(st.lists(st.integers(-3, 3), min_size=n, max_size=n),
                        st.lists(st.floats(-2, 2, allow_nan=False, width=32), min_size=n, max_size=n)))


@settings(max_examples=150, deadline=None)
@given(pairs_of_lists)
def test_property_rank_correlation_equals_scipy(data):
    x, y = data
    tx, ty = torch.tensor(x, dtype=torch.int64), torch.tensor(y, dtype=torch.float32)
    for method, ref in (("spearman", stats.spearmanr), ("kendall", stats.kendalltau)):
        ours = rc.rank_correlation(tx, ty, method).item()
        if len(x) < 2:
            assert math.isnan(ours)
            continue
        assert_same(ours, float(ref(np.asarray(x), np.asarray(y, dtype=np.float32))[0]), abs=1e-9)
        assert -1 <= ours <= 1 or math.isnan(ours)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.sampled_from([0.0, 0.25, 0.5, 1.0, float("nan")]), st.integers(0, 4)), max_size=30))
def test_property_erc_and_conf_equal_definitions(rows):
    values = torch.tensor([v for v, _ in rows], dtype=torch.float64)
    confidence = torch.tensor([c / 4 for _, c in rows], dtype=torch.float64)
    out, curves = confidence_results(values.unsqueeze(1).repeat(1, 2), ["erc:x", "conf:x"], confidence)
    kept, ref = erc_reference(values.tolist(), confidence.tolist())
    assert curves["erc:x"][1].tolist() == pytest.approx(ref)
    assert curves["erc:x"][0].tolist() == pytest.approx(kept)
    np.testing.assert_allclose(curves["conf:x"][1].numpy(), conf_reference(values.tolist(), confidence.tolist()),
                               rtol=1e-12, equal_nan=True)
    if ref:
        assert out["erc:x"].item() == pytest.approx(float(np.mean(ref)))
        # the oracle order (confidence = value) is never worse
        oracle = erc_curve(1 - values[~torch.isnan(values)], values[~torch.isnan(values)])[1]
        assert oracle.mean().item() <= out["erc:x"].item() + 1e-12
    else:
        assert math.isnan(out["erc:x"].item()) and math.isnan(out["conf:x"].item())


@pytest.mark.parametrize("ties,pick", [("expected", np.mean), ("optimistic", np.min), ("pessimistic", np.max)])
def test_erc_follows_the_ties_option(ties, pick, scores, generator):
    """``ties=`` orders tied confidences as it orders tied scores: the ERC over the
    per-query values of that mode equals the brute force over every order of each tied group."""
    preds, target = scores
    preds, target = preds[:9], target[:9]
    confidence = torch.tensor([0.5, 0.2, 0.5, 0.9, 0.5, 0.2, 0.9, 0.1, 0.5])
    r = rc.evaluate_scores(preds, target, ["erc:ndcg@5", "spearman:ndcg@5"], confidence=confidence, ties=ties)
    values = per_query(preds, target, "ndcg@5", ties=ties)
    keep = ~torch.isnan(values)
    ref = erc_over_orders((1 - values[keep]).tolist(), confidence[keep].tolist(), pick)
    assert r.curves["erc:ndcg@5"][1].tolist() == pytest.approx(ref.tolist())
    assert r["erc:ndcg@5"].item() == pytest.approx(float(ref.mean()))
    c, v = defined(confidence, values)
    assert_same(r["spearman:ndcg@5"].item(), stats.spearmanr(c, v)[0])


# -- intervals of confidence keys -------------------------------------------------------------

CASES_BATCHED = [("erc", "mean", "stable"), ("erc", "mean", "expected"), ("erc", "mean", "optimistic"),
                 ("erc", "mean", "pessimistic"), ("conf", "mean", "stable"), ("conf", "min", "stable"),
                 ("conf", "max", "stable"), ("conf", "median", "stable"), ("spearman", "mean", "stable"),
                 ("kendall", "mean", "stable")]


@pytest.mark.parametrize("kind,reduce,ties", CASES_BATCHED)
def test_batched_resamples_equal_one_by_one(kind, reduce, ties, generator):
    """The many-resamples-at-once form equals the key of each resample alone (ties,
    repeated queries, skipped queries, empty resamples)."""
    for _ in range(15):
        n = int(torch.randint(1, 25, (1,), generator=generator))
        values = torch.randint(0, 4, (n, 1), generator=generator).double() / 3
        values[torch.rand(n, generator=generator) < 0.2] = float("nan")
        confidence = torch.randint(0, 5, (n,), generator=generator).float() / 4
        counts = torch.zeros(6, n)
        for b in range(6):
            drawn = torch.randint(0, n, (int(torch.randint(0, n + 3, (1,), generator=generator)),), generator=generator)
            counts[b].index_add_(0, drawn, torch.ones(drawn.numel()))
        v, c = _resampled(values, confidence, counts)
        got = _batched(kind, v[..., 0], c, reduce, ties)
        for b in range(6):
            take = torch.repeat_interleave(torch.arange(n), counts[b].long())
            assert_same(got[b].item(), _one_key(kind, values[take, 0], confidence[take], reduce, ties)[0].item())


def test_confidence_intervals_are_the_bootstrap_percentiles(scores, generator):
    preds, target = scores
    confidence = torch.rand(preds.shape[0], generator=generator)
    keys = ["erc:ndcg@5", "conf:map@r", "spearman:cmc@3", "kendall:ndcg@5"]
    r = rc.evaluate_scores(preds, target, keys + ["ndcg@5"], confidence=confidence, ci=0.8, n_resamples=60, seed=3)
    # the same resamples, drawn as retrieval_core.intervals draws them, evaluated one by one
    gen = torch.Generator().manual_seed(3)
    draws = torch.randint(60, (60, 60), generator=gen)
    for key in keys:
        kind, inner = key.split(":")
        values = per_query(preds, target, inner)
        per_resample = [_one_key(kind, values[d], confidence[d], "mean", "stable")[0].item() for d in draws.sort(1).values]
        low, high = np.nanquantile(per_resample, [0.1, 0.9])
        assert r.ci[key][0].item() == pytest.approx(low, abs=1e-12)
        assert r.ci[key][1].item() == pytest.approx(high, abs=1e-12)
        assert low <= r[key].item() <= high or kind in ("spearman", "kendall")
    assert set(r.ci) == set(keys) | {"ndcg@5"}


def test_confidence_keys_refuse_beta_intervals():
    with pytest.raises(ValueError, match=re.escape("ci_method='beta' needs metrics whose per-query values are 0 or 1")):
        rc.evaluate_scores(P, T, ["erc:cmc@1"], confidence=C, ci=0.9, ci_method="beta")
