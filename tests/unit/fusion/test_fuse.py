"""fuse: against a pair-by-pair reference written from the definitions (tests/unit/fusion/cases.py), on
random runs (overlapping queries and documents, ties, negative scores, a query in one run only, a run of
one document per query), hypothesis properties, the fused run's order and its round trip through the
writer, and every refusal with its message."""
from __future__ import annotations

import math

import pytest
import torch

pytest.importorskip("numpy")
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from retrieval_core.fusion import METHODS, NORMS, fuse  # noqa: E402
from retrieval_core.trec import Run, read_run, run_from_dict, write_run  # noqa: E402
from tests.unit.fusion.cases import assert_close, random_runs, ref_fuse  # noqa: E402


def _runs(dicts, shared=False):
    docs = None
    out = []
    for d in dicts:
        out.append(run_from_dict(d, docs=docs))
        docs = out[-1].docs if shared else None
    return out


@pytest.mark.parametrize("ties", [False, True])
@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("norm", NORMS)
def test_fuse_equals_the_reference(method, norm, ties):
    for seed in range(3):
        dicts = random_runs(seed, ties=ties)
        weights = [0.1, 0.4, 0.2, 0.3] if method == "wsum" else None
        got = fuse(_runs(dicts), method=method, norm=norm, weights=weights, k=10)
        assert_close(got.to_dict(), ref_fuse(dicts, method, norm, weights, k=10))


def _ordered(run: Run) -> bool:
    q, s = run.query.tolist(), run.score.tolist()
    d = [run.docs.key(i) for i in run.doc.tolist()]
    return all((q[i], -s[i], [0]) <= (q[i + 1], -s[i + 1], [0]) and
               (q[i] != q[i + 1] or s[i] != s[i + 1] or d[i] > d[i + 1]) for i in range(len(q) - 1))


@pytest.mark.parametrize("method", ["rrf", "sum", "wsum", "med"])
def test_the_fused_run_is_in_trec_order_and_round_trips(tmp_path, method):
    fused = fuse(_runs(random_runs(5, ties=True)), method=method)
    assert _ordered(fused)
    assert fused.offsets.tolist()[-1] == len(fused) and fused.offsets.diff().min() >= 1
    write_run(tmp_path / "fused", fused)
    back = read_run(tmp_path / "fused")
    assert back.query_ids == fused.query_ids and back.tag == method
    assert [back.docs[i] for i in back.doc.tolist()] == [fused.docs[i] for i in fused.doc.tolist()]
    assert back.to_dict() == fused.to_dict()  # the writer prints scores exactly (repr)


def test_a_shared_vocabulary_gives_the_same_fusion():
    dicts = random_runs(7, ties=True)
    apart, shared = fuse(_runs(dicts), method="mnz"), fuse(_runs(dicts, shared=True), method="mnz")
    assert apart.to_dict() == shared.to_dict()


def test_the_inputs_are_left_alone():
    runs = _runs(random_runs(2, ties=True))
    before = [(len(r.docs), r.score.clone(), r.doc.clone()) for r in runs]
    fuse(runs, method="wsum", norm="zmuv")
    for r, (n, s, d) in zip(runs, before):
        assert len(r.docs) == n and torch.equal(r.score, s) and torch.equal(r.doc, d)


def test_rrf_ignores_normalisation_and_breaks_ties_by_docid():
    # d1, d2 tie in run a: trec_eval ranks d2 (docid descending) first, so d2 gets 1/(k+1)
    a = run_from_dict({"q": {"d1": 1.0, "d2": 1.0}})
    fused = fuse([a, a], method="rrf", k=0, norm="zmuv").to_dict()["q"]
    assert fused == {"d2": 2.0, "d1": 1.0}
    assert fuse([a, a], method="rrf", k=0, norm=None).to_dict() == fuse([a, a], method="rrf", k=0).to_dict()


def test_zero_spread_queries_take_ranx_guard():
    one = run_from_dict({"q": {"d": 5.0}})
    flat = run_from_dict({"q": {"d": -2.0, "e": -2.0}})
    for norm in ["min-max", "sum", "zmuv"]:
        assert fuse([one, flat], method="sum", norm=norm).to_dict() == {"q": {"e": 0.0, "d": 0.0}}
    # max: a non-positive maximum divides by 1e-9
    assert fuse([flat], method="sum", norm="max").to_dict() == {"q": {"e": -2.0 / 1e-9, "d": -2.0 / 1e-9}}


def test_one_run_and_a_single_entry():
    run = run_from_dict({"q": {"d": 3.0}})
    assert fuse([run], method="sum", norm=None).to_dict() == {"q": {"d": 3.0}}


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 10_000), method=st.sampled_from(METHODS), norm=st.sampled_from(NORMS),
       ties=st.booleans(), n_runs=st.integers(1, 5))
def test_property_equals_reference_and_symmetric_methods_ignore_run_order(seed, method, norm, ties, n_runs):
    dicts = random_runs(seed, ties=ties, n_runs=n_runs, n_queries=4, n_docs=8)
    got = fuse(_runs(dicts), method=method, norm=norm)
    assert _ordered(got)
    assert_close(got.to_dict(), ref_fuse(dicts, method, norm))
    # equal default weights: every method is symmetric in the runs
    assert_close(fuse(_runs(dicts[::-1]), method=method, norm=norm).to_dict(), got.to_dict(), 1e-12)


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 10_000))
def test_property_min_max_scores_lie_in_0_1_and_mnz_counts(seed):
    dicts = random_runs(seed, ties=True, n_runs=3, n_queries=4, n_docs=8)
    runs = _runs(dicts)
    for f in fuse(runs, method="max", norm="min-max").score.tolist():
        assert 0.0 <= f <= 1.0
    ones = [run_from_dict({q: {d: 1.0 for d in r[q]} for q in r}) for r in dicts]
    mnz = fuse(ones, method="mnz", norm=None).to_dict()
    for q, docs in mnz.items():
        for d, v in docs.items():
            held = sum(d in r.get(q, {}) for r in dicts)
            assert v == held * held


def test_refusals_name_the_choices():
    run = run_from_dict({"q": {"d": 1.0}})
    with pytest.raises(ValueError, match="non-empty list of runs.*an empty list"):
        fuse([])
    with pytest.raises(ValueError, match="a single Run"):
        fuse(run)
    with pytest.raises(ValueError, match=r"runs\[1\] is a dict"):
        fuse([run, {"q": {"d": 1.0}}])
    with pytest.raises(ValueError, match=r"unknown fusion method 'borda'; choose one of \['rrf', 'sum'"):
        fuse([run, run], method="borda")
    with pytest.raises(ValueError, match=r"unknown norm 'l2'; choose one of \['min-max', 'max', 'sum', 'zmuv'"):
        fuse([run, run], norm="l2")
    with pytest.raises(ValueError, match="one per run; got 3 weights for 2 runs"):
        fuse([run, run], method="wsum", weights=[0.2, 0.3, 0.5])
    with pytest.raises(ValueError, match=r"finite and >= 0; got \[-0.5, 1.5\]"):
        fuse([run, run], method="wsum", weights=[-0.5, 1.5])
    with pytest.raises(ValueError, match="finite and >= 0"):
        fuse([run, run], method="wsum", weights=[math.nan, 1.0])
    with pytest.raises(ValueError, match="weights apply to method 'wsum' only"):
        fuse([run, run], method="rrf", weights=[0.5, 0.5])


def test_nan_scores_are_refused():
    run = run_from_dict({"q": {"d": 1.0, "e": 0.5}})
    bad = Run(run.query_ids, run.docs, run.query, run.doc, torch.tensor([1.0, math.nan], dtype=torch.float64),
              run.offsets, "bad")
    with pytest.raises(ValueError, match=r"runs\[1\]: query 'q', doc 'e': scores must be finite; got nan"):
        fuse([run, bad])


def test_aliases():
    run = run_from_dict({"q": {"d": 1.0, "e": 0.5}})
    assert fuse([run, run], method="CombMNZ").to_dict() == fuse([run, run], method="mnz").to_dict()
    assert fuse([run, run], method="sum", norm="min_max").to_dict() == fuse([run, run], method="sum").to_dict()


def test_an_empty_run_contributes_nothing():
    a = run_from_dict({"q1": {"d": 1.0, "e": 3.0}})
    empty = run_from_dict({})
    for method in METHODS:
        want = fuse([a], method=method, norm="zmuv", weights=[0.5] if method == "wsum" else None).to_dict()
        got = fuse([a, empty], method=method, norm="zmuv", weights=[0.5, 0.5] if method == "wsum" else None)
        assert got.query_ids == ("q1",) and got.to_dict() == want
