"""rbp@p (rank-biased precision, Moffat and Zobel 2008) and err@k (expected reciprocal rank,
Chapelle et al. 2009): toys by hand, the definitions written out as loops (hypothesis), ranx's
rbp, the tie modes, embeddings and both adapters. Their every-order check under ties="expected"
and the optimistic/pessimistic bounds run in test_ties.py (its keys come from the specs)."""
from __future__ import annotations

import math

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import retrieval_core as rc

SETTINGS = settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def one(key, preds, target, **options):
    return rc.evaluate_scores(torch.tensor([preds], dtype=torch.float64), torch.tensor([target]), [key],
                              **options)[key].item()


def rbp_loop(gains, p):
    """(1 - p) sum_i p^(i-1) rel_i, rel_i = 1 where the gain is > 0 (the published definition)."""
    return (1 - p) * sum(p ** i for i, g in enumerate(gains) if g > 0)


def err_loop(gains, k=None, g_max=None):
    """Chapelle et al.'s cascade: the user stops at rank r with probability R_r = (2^g - 1) / 2^g_max."""
    g_max = max(gains) if g_max is None else g_max
    value, going_on = 0.0, 1.0
    for r, g in enumerate(gains[:k], start=1):
        stop = (2.0 ** g - 1) / 2.0 ** g_max
        value += going_on * stop / r
        going_on *= 1 - stop
    return value


# -- toys by hand ---------------------------------------------------------------------------


def test_rbp_by_hand():
    preds = [4.0, 3.0, 2.0, 1.0]
    assert one("rbp@0.5", preds, [1, 0, 1, 0]) == 0.5 * (1 + 0.25)
    assert one("rbp@0.8", preds, [1, 0, 1, 0]) == pytest.approx(0.2 * (1 + 0.64), abs=1e-15)
    assert one("rbp@0.5", preds, [3, 0, 1, 0]) == 0.625  # binary: any gain > 0 counts 1
    assert one("rbp@0.5", preds, [1, 1, 1, 1]) == 1 - 0.5 ** 4  # the residual 0.5^4 is what no list fills
    assert math.isnan(one("rbp@0.5", preds, [0, 0, 0, 0]))  # no relevant item: empty (empty="zero": 0)
    assert one("rbp@0.5", preds, [0, 0, 0, 0], empty="zero") == 0.0


def test_err_by_hand():
    preds = [3.0, 2.0, 1.0]
    # gains 2, 0, 1 and g_max = 2: R = 3/4, 0, 1/4
    assert one("err", preds, [2, 0, 1]) == pytest.approx(3 / 4 + (1 / 3) * (1 / 4) * (1 / 4), abs=1e-15)
    assert one("err@2", preds, [2, 0, 1]) == 0.75
    assert one("err@1", preds, [0, 2, 1]) == 0.0
    # binary gains: R = 1/2 for a relevant item; one at rank 2
    assert one("err", preds, [0, 1, 0]) == 0.25
    # g_max is the query's largest gain, also when that item is not in the list: a ranked list
    # whose ideal holds a 3 (R = 3/8 and 1/8 for the gains 2 and 1)
    got = rc.evaluate_ranked(torch.tensor([[2.0, 0.0, 1.0]]), ["err"], ideal=torch.tensor([[3.0, 2.0, 1.0]]))
    assert got["err"].item() == pytest.approx(3 / 8 + (1 / 3) * (5 / 8) * (1 / 8), abs=1e-15)


def test_keys_and_their_messages():
    assert rc.parse_metrics(["rbp@0.8"])[0].param == 0.8
    for key, message in [("rbp@1", r"rbp@p takes p in \(0, 1\); got 'rbp@1'"),
                         ("rbp@0", r"takes p in \(0, 1\)"), ("rbp@-0.5", r"takes p in \(0, 1\)"),
                         ("rbp@nan", r"rbp takes a number after '@', e.g. 'rbp@0.8'"),
                         ("rbp", r"metric 'rbp' needs its parameter p, e.g. 'rbp@0.8'"),
                         ("rbp@r", r"metric 'rbp' takes no '@r' cutoff"),
                         ("err@0", r"k must be a positive integer"), ("err@r", r"metric 'err' takes no '@r' cutoff")]:
        with pytest.raises(ValueError, match=message):
            rc.parse_metrics([key])
    assert "rbp@p" in rc.known_metrics() and "err@k" in rc.known_metrics()
    assert rc.parse_metrics(["erc:rbp@0.8"])[0].param == 0.8  # bounded, higher is better: erc takes it


# -- the definitions, written out ------------------------------------------------------------

rows = st.integers(1, 12).flatmap(lambda n: st.tuples(
    st.lists(st.integers(0, 4), min_size=n, max_size=n), st.integers(1, n + 2),
    st.floats(0.01, 0.99, allow_nan=False)))


@SETTINGS
@given(rows)
def test_rbp_and_err_equal_their_definitions(row):
    gains, k, p = row
    preds = [float(len(gains) - i) for i in range(len(gains))]  # the list in its given order
    if not any(gains):
        return
    assert one(f"rbp@{p!r}", preds, gains) == pytest.approx(rbp_loop(gains, p), rel=1e-12, abs=1e-15)
    assert one(f"err@{k}", preds, gains) == pytest.approx(err_loop(gains, k), rel=1e-12, abs=1e-15)
    assert 0.0 < one("err", preds, gains) < 1.0
    assert 0.0 < one(f"rbp@{p!r}", preds, gains) <= 1 - p ** len(gains) + 1e-15


@SETTINGS
@given(rows)
def test_graded_rbp_is_binary_rbp_and_err_scales_with_the_grades(row):
    gains, _, p = row
    preds = [float(len(gains) - i) for i in range(len(gains))]
    if not any(gains):
        return
    binary = [int(g > 0) for g in gains]
    assert one(f"rbp@{p!r}", preds, gains) == one(f"rbp@{p!r}", preds, binary)
    # err reads each gain against the query's largest: adding a grade to every relevant item
    # leaves 2^g / 2^g_max alone, and 1 / 2^g_max shrinks
    raised = [g + 1 if g > 0 else 0 for g in gains]
    assert one("err", preds, raised) >= one("err", preds, gains) - 1e-15


def test_rbp_equals_ranx():
    ranx = pytest.importorskip("ranx")
    g = torch.Generator().manual_seed(3)
    preds = torch.rand(6, 30, generator=g, dtype=torch.float64)
    target = (torch.rand(6, 30, generator=g) < 0.3).to(torch.int64)
    target[:, 0] = 1  # every query has a relevant item (ranx counts an empty one as 0)
    qrels = ranx.Qrels.from_dict({f"q{q}": {f"d{j}": 1 for j in range(30) if target[q, j]} for q in range(6)})
    run = ranx.Run.from_dict({f"q{q}": {f"d{j}": float(preds[q, j]) for j in range(30)} for q in range(6)})
    for p in (0.5, 0.8, 0.95):
        want = ranx.evaluate(qrels, run, f"rbp.{str(p)[2:]}")
        got = rc.evaluate_scores(preds, target, [f"rbp@{p}"])[f"rbp@{p}"].item()
        assert got == pytest.approx(want, rel=1e-12), p


# -- tie modes --------------------------------------------------------------------------------


def test_tie_modes_by_hand():
    preds, gains = [1.0, 1.0, 1.0, 0.0], [0, 1, 0, 2]
    # expected: the relevant item of the tied three is at ranks 1-3 with 1/3 each
    assert one("rbp@0.5", preds, gains, ties="expected") == pytest.approx(0.5 * ((1 + 0.5 + 0.25) / 3 + 0.125))
    assert one("rbp@0.5", preds, gains, ties="optimistic") == 0.5 * (1 + 0.125)
    assert one("rbp@0.5", preds, gains, ties="pessimistic") == 0.5 * (0.25 + 0.125)
    # err, g_max = 2: R = 1/4 for the gain 1, 3/4 for the gain 2 at rank 4
    assert one("err", preds, gains, ties="optimistic") == pytest.approx(err_loop([1, 0, 0, 2]))
    assert one("err", preds, gains, ties="pessimistic") == pytest.approx(err_loop([0, 0, 1, 2]))
    with pytest.raises(NotImplementedError, match=r"err@3 has no closed form under ties='expected'"):
        one("err@3", preds, gains, ties="expected")


def test_err_under_expected_is_refused_before_any_work_in_every_entry():
    from ignite_retrieval import RankingMetrics as IgniteRanking
    from lightning_retrieval import RankingMetrics as LightningRanking

    for make in (IgniteRanking, LightningRanking):
        with pytest.raises(NotImplementedError, match=r"err has no closed form under ties='expected'"):
            make(["err"], ties="expected")
    with pytest.raises(NotImplementedError, match=r"err@5 has no closed form"):
        rc.evaluate_embeddings(torch.randn(8, 3), torch.arange(8) % 2, ["err@5"], ties="expected")


# -- embeddings and adapters ------------------------------------------------------------------


def test_embeddings_equal_score_mode_in_every_order_mode():
    g = torch.Generator().manual_seed(5)
    x = torch.randint(0, 2, (30, 4), generator=g).float()  # hamming distances: many ties
    labels = torch.randint(0, 3, (30,), generator=g)
    scores = -((x[:, None] != x[None]).sum(-1)).float()
    mask = ~torch.eye(30, dtype=torch.bool)
    for ties, keys in [("stable", ["rbp@0.8", "err@5", "err"]), ("optimistic", ["rbp@0.8", "err@5"]),
                       ("pessimistic", ["rbp@0.6", "err"]), ("expected", ["rbp@0.8", "rbp@0.2"])]:
        got = rc.evaluate_embeddings(x, labels, keys, distance="hamming", ties=ties, reduce="none")
        want = rc.evaluate_scores(scores, labels[:, None] == labels[None], keys, mask=mask, ties=ties, reduce="none")
        for key in keys:
            torch.testing.assert_close(got[key], want[key], rtol=0, atol=1e-12, equal_nan=True, msg=(ties, key))


def test_both_adapters_accept_the_keys():
    from ignite_retrieval import RankingMetrics as IgniteRanking
    from lightning_retrieval import RankingMetrics as LightningRanking

    g = torch.Generator().manual_seed(7)
    preds, target = torch.rand(10, 12, generator=g), torch.randint(0, 3, (10, 12), generator=g)
    keys = ["rbp@0.8", "err@4", "err", "ndcg@3"]
    want = rc.evaluate_scores(preds, target, keys)
    for compact in (False, True):
        ignite = IgniteRanking(keys, compact=compact)
        lightning = LightningRanking(keys, compact=compact)
        for rows in (slice(0, 4), slice(4, 10)):
            ignite.update((preds[rows], target[rows]))
            lightning.update(preds[rows], target[rows])
        for got in (ignite.compute(), lightning.compute()):
            for key in keys:
                assert float(got[key]) == pytest.approx(want[key].item(), rel=1e-12), (compact, key)


def test_evaluate_trec_gives_err_the_judged_gains_and_rbp_binary_relevance():
    from retrieval_core.trec import evaluate_trec, qrels_from_dict, run_from_dict

    qrels = qrels_from_dict({"q1": {"a": 2, "b": 0, "c": 1}, "q2": {"x": 1}})
    run = run_from_dict({"q1": {"a": 0.1, "b": 0.9, "c": 0.5}, "q2": {"x": 0.3, "y": 0.8}})  # y: unjudged
    got = evaluate_trec(qrels, run, ["err", "err@2", "rbp@0.5"]).results
    # q1 ranks b (0), c (1), a (2): R = 0, 1/4, 3/4; q2 ranks y, x (1): R = 1/2 at rank 2
    assert got["err"].item() == pytest.approx((1 / 8 + 3 / 16 + 1 / 4) / 2, abs=1e-15)
    assert got["err@2"].item() == pytest.approx((1 / 8 + 1 / 4) / 2, abs=1e-15)
    assert got["rbp@0.5"].item() == pytest.approx((0.5 * (0.5 + 0.25) + 0.5 * 0.5) / 2, abs=1e-15)


def test_the_whole_list_notice_names_rbp_and_suggests_a_cutoff_only_where_one_exists():
    g = torch.Generator().manual_seed(0)
    gallery, query = torch.randn(4096, 4, generator=g), torch.randn(3, 4, generator=g)
    gl, ql = torch.arange(4096) % 5, torch.arange(3) % 5
    with pytest.warns(UserWarning, match=r"^whole-list keys \(rbp@0.8\) rank all 4096 gallery items of every query, "
                      r"where the cutoff keys rank only the top 5: .*; only a cutoff key bounds the work$"):
        rc.evaluate_embeddings(query, ql, ["rbp@0.8", "cmc@5"], gallery=gallery, gallery_labels=gl)
    with pytest.warns(UserWarning, match=r"^whole-list keys \(rbp@0.8, err\) rank .*'err@100'"):
        rc.evaluate_embeddings(query, ql, ["rbp@0.8", "err"], gallery=gallery, gallery_labels=gl)
