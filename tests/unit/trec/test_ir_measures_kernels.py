"""Judged@k, gdeval's ERR@k and Compat on aligned runs: hand-computed values and the published
definitions written out directly (prefix sets, products), on random runs with ties, negative
scores, unjudged and pooled-but-unjudged documents, empty lists."""
from __future__ import annotations

import math
import random

import pytest

from retrieval_core.trec import align, qrels_from_dict, run_from_dict
from retrieval_core.trec.ir_measures_kernels import compat, gdeval_err, ir_measures_value, judged_share


def _ranked(docs):
    """trec_eval's order: score descending, doc id descending."""
    return sorted(sorted(docs, key=str.encode, reverse=True), key=lambda d: -docs[d])


def compat_by_definition(qrels, docs, p, normalize):
    ranking = _ranked(docs)
    ideal = sorted((d for d, r in qrels.items() if r > 0),
                   key=lambda d: (-qrels[d], -docs.get(d, 0.0), ranking.index(d) if d in docs else len(ranking)))
    depth = max(len(ranking), len(ideal))

    def rbo(a, b):
        return sum(p ** (d - 1) * len(set(a[:d]) & set(b[:d])) / d for d in range(1, depth + 1))

    norm = sum(p ** (d - 1) for d in range(1, depth + 1))
    score = rbo(ranking, ideal) / norm if depth else 0.0
    best = rbo(ideal, ideal) / norm if depth else 0.0
    return score / best if normalize and best > 0 else score


def err_by_definition(qrels, docs, k):
    total, survive = 0.0, 1.0
    for i, d in enumerate(_ranked(docs)[:k], start=1):
        g = max(qrels.get(d, 0), 0)
        r = (2 ** g - 1) / 16
        total += survive * r / i
        survive *= 1 - r
    return total


def random_query(rng):
    docs = [f"d{i}" for i in range(rng.randint(1, 14))]
    qrels = {d: rng.choice([-1, 0, 0, 1, 2, 3, 4]) for d in rng.sample(docs, rng.randint(1, len(docs)))}
    qrels.update({f"u{i}": rng.choice([1, 2, 3]) for i in range(rng.randint(0, 3))})  # relevant, never retrieved
    run = {d: float(rng.choice([-2, -1, 0, 0, 1, 2, 3])) for d in rng.sample(docs, rng.randint(1, len(docs)))}
    return qrels, run


@pytest.mark.parametrize("seed", range(40))
def test_against_the_definitions(seed):
    rng = random.Random(seed)
    qrels_d, run_d = {}, {}
    for q in range(3):
        qrels_d[f"q{q}"], run_d[f"q{q}"] = random_query(rng)
    al = align(run_from_dict(run_d), qrels_from_dict(qrels_d))
    for p, normalize in ((0.95, True), (0.5, False), (1.0, True), (0.3, True)):
        got = compat(al, p, normalize)[:, 0].tolist()
        want = [compat_by_definition(qrels_d[q], run_d[q], p, normalize) for q in al.query_ids]
        assert got == pytest.approx(want, abs=1e-12), (p, normalize)
    for k in (1, 3, 100):
        want = [err_by_definition(qrels_d[q], run_d[q], k) for q in al.query_ids]
        assert gdeval_err(al, k)[:, 0].tolist() == pytest.approx(want, abs=1e-15)
        want = [sum(d in qrels_d[q] for d in _ranked(run_d[q])[:k]) / min(k, len(run_d[q])) for q in al.query_ids]
        assert judged_share(al, k)[:, 0].tolist() == pytest.approx(want, abs=1e-15)


def test_hand_values_and_empty_lists():
    qrels = qrels_from_dict({"q": {"a": 4, "b": 1}, "e": {"x": 2}})
    al = align(run_from_dict({"q": {"a": 2.0, "c": 1.0, "b": 0.5}}), qrels, complete=True)  # e: no entry
    assert al.query_ids == ("e", "q")
    assert ir_measures_value(al, "gdeval_err@2").tolist() == [0.0, 15 / 16]
    assert ir_measures_value(al, "gdeval_err").tolist() == [0.0, 15 / 16 + (1 / 16) * (1 / 16) / 3]
    assert ir_measures_value(al, "judged@2").tolist() == [0.0, 0.5]
    assert ir_measures_value(al, "judged@9").tolist() == [0.0, 2 / 3]
    # list a, c, b; ideal a, b: overlaps 1, 1, 2 at depths 1, 2, 3; the ideal's 1, 2, 2
    assert ir_measures_value(al, "compat@0.5").tolist() == pytest.approx(
        [0.0, (1 + 0.5 / 2 + 0.25 * 2 / 3) / (1 + 0.5 * 2 / 2 + 0.25 * 2 / 3)])
    assert ir_measures_value(al, "compat_unnormalized@0.5").tolist() == pytest.approx(
        [0.0, (1 + 0.5 / 2 + 0.25 * 2 / 3) / 1.75])


def test_negative_scores_come_after_the_documents_not_retrieved():
    # ideal: a (2, not retrieved: 0.0) before b (2, score -1.0); the list: b alone
    al = align(run_from_dict({"q": {"b": -1.0}}), qrels_from_dict({"q": {"a": 2, "b": 2}}))
    assert compat(al, 0.5, False).item() == pytest.approx((0.5 * 1 / 2) / 1.5)
    assert math.isclose(compat_by_definition({"a": 2, "b": 2}, {"b": -1.0}, 0.5, False), (0.5 * 1 / 2) / 1.5)
