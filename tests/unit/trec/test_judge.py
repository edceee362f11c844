"""QrelsJudge in a validation loop: random qrels (graded, misses, queries without a relevant
document, queries absent from the qrels) and random top-k batches (score ties, padding,
shuffled columns, doc indices or doc id strings, float32 and float64 scores) fed over
several updates to the torchmetrics and ignite RankingMetrics equal, to 1e-12, per query
and in the mean, trec_eval's numbers (``evaluate_trec``) on the run written from the same
lists by ``write_run`` and read back: what trec_eval reads. Plus every bad input's error."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

pytest.importorskip("numpy")

from retrieval_core.trec import (  # noqa: E402
    QrelsJudge, evaluate_trec, parse_measures, qrels_from_dict, read_run, write_run,
)
from tests.unit.trec.cases import make_loop  # noqa: E402

MEASURES = ["map", "ndcg", "ndcg_cut_10", "recip_rank", "P_5", "recall_100", "Rprec", "success_1", "map_cut_10"]
KEYS = [key for key, _ in parse_measures(MEASURES)]  # map, ndcg, ndcg@10, mrr, precision@5, ...
TREC_NAME = dict(parse_measures(MEASURES))


def trec_eval_of(qrels, batches, tmp_path, level=1):
    """evaluate_trec on the run written from the batches' lists and read back."""
    path = tmp_path / "run.txt"
    rows = [(q, i, s) for b in batches for q, i, s in zip(b.queries, b.doc_index, b.scores.double())]
    write_run(path, torch.stack([i for _, i, _ in rows]), torch.stack([s for _, _, s in rows]),
              query_ids=[q for q, _, _ in rows], doc_ids=qrels.docs.ids())
    return evaluate_trec(qrels, read_run(path, docs=qrels.docs), MEASURES, level=level)


def feed(judge, batches, update, *, names: bool, use_mask: bool):
    for j, b in enumerate(batches):
        docs = b.doc_names if names else b.doc_index
        if use_mask:  # padding by the mask, the padded slots holding a real document
            docs = b.doc_index.clamp(min=0) if not names else [[x or "d0" for x in row] for row in b.doc_names]
        update(judge(b.queries, docs, b.scores, mask=b.mask if use_mask else None))


def per_query(results, qrels):
    """{qid: {trec name: value}} from an adapter's MetricResults (ids: indices into qrels.query_ids)."""
    ids = results.query_ids.tolist()
    return {qrels.query_ids[i]: {TREC_NAME[k]: results.per_query[k][n].item() for k in KEYS} for n, i in enumerate(ids)}


def assert_equal_to_trec_eval(results, qrels, want):
    got = per_query(results, qrels)
    assert sorted(got) == sorted(want.per_query())
    for q, row in want.per_query().items():
        for name, value in row.items():
            assert got[q][name] == pytest.approx(value, abs=1e-12, rel=0), (q, name)
    for key in KEYS:
        assert results[key].item() == pytest.approx(want.summary()[TREC_NAME[key]], abs=1e-12, rel=0), key


def lightning_results(judge, batches, **feed_options):
    lightning = pytest.importorskip("lightning_retrieval")
    metric = lightning.RankingMetrics(KEYS, empty="zero")
    feed(judge, batches, lambda b: metric.update(**b.inputs()), **feed_options)
    return metric.compute()


def ignite_results(judge, batches, **feed_options):
    ignite = pytest.importorskip("ignite_retrieval")
    metric = ignite.RankingMetrics(KEYS, empty="zero")
    feed(judge, batches, lambda b: metric.update(b.inputs(preds="y_pred", target="y")), **feed_options)
    metric.compute()
    return metric.last_results


@pytest.mark.parametrize("seed", range(4))
def test_both_adapters_equal_trec_eval_on_the_written_run(seed, tmp_path):
    qrels, batches = make_loop(seed)
    want = trec_eval_of(qrels, batches, tmp_path)
    assert "q0" not in want.per_query() and "q2" not in want.per_query()  # no judgements / never seen
    assert "q1" in want.per_query() and want.per_query()["q1"]["map"] == 0.0  # judged, nothing relevant
    judge = QrelsJudge(qrels)
    options = [dict(names=seed % 2 == 0, use_mask=seed >= 2), dict(names=seed % 2 == 1, use_mask=seed < 2)]
    results = lightning_results(judge, batches, **options[0])
    assert_equal_to_trec_eval(results, qrels, want)
    assert_equal_to_trec_eval(ignite_results(judge, batches, **options[1]), qrels, want)
    # trec_eval -c: every qrels query, 0 where unseen (q2): the mean times seen / all
    complete = evaluate_trec(qrels, read_run(tmp_path / "run.txt", docs=qrels.docs), MEASURES, complete=True)
    for key in KEYS:
        assert results[key].item() * int(results.n_queries) / len(qrels.query_ids) == pytest.approx(
            complete.summary()[TREC_NAME[key]], abs=1e-12, rel=0)


def test_the_loop_has_ties_misses_and_reordered_columns():
    # what the equality above covers (so that it can fail): ties decided by doc id, relevant
    # documents the lists miss (R above the hits), columns not in trec_eval's order
    qrels, batches = make_loop(0)
    judge = QrelsJudge(qrels)
    tied = missed = moved = 0
    for b in batches:
        out = judge(b.queries, b.doc_index, b.scores)
        s = out.preds.masked_fill(~out.mask, float("nan"))
        tied += int(((s[:, 1:] == s[:, :-1])).sum())
        missed += int((out.n_relevant > out.relevant.sum(1)).sum())
        moved += int((out.order != torch.arange(out.order.shape[1])).any(1).sum())
    assert tied > 10 and missed > 3 and moved == sum(len(b.queries) for b in batches) - 1  # q0 dropped


def test_without_r_or_the_tie_order_the_numbers_differ(tmp_path):
    # negative controls: the lists alone (R = hits in the list), or ties left in column order
    lightning = pytest.importorskip("lightning_retrieval")
    qrels, batches = make_loop(1)
    want = trec_eval_of(qrels, batches, tmp_path).summary()
    judge = QrelsJudge(qrels)
    no_r = lightning.RankingMetrics(["map", "recall@100"], empty="zero")
    column_order = lightning.RankingMetrics(["map", "mrr"], empty="zero")
    for b in batches:
        out = judge(b.queries, b.doc_index, b.scores)
        no_r.update(out.preds, out.gains, mask=out.mask)
        unsorted = out.preds.gather(1, out.order.argsort(1))  # back to the input columns
        column_order.update(unsorted, out.gains.gather(1, out.order.argsort(1)), mask=out.mask.gather(
            1, out.order.argsort(1)), n_relevant=out.n_relevant, ideal=out.ideal)
    got = no_r.compute()
    assert got["map"].item() > want["map"] + 0.01 and got["recall@100"].item() > want["recall_100"] + 0.01
    got = column_order.compute()
    assert abs(got["map"].item() - want["map"]) > 1e-6 or abs(got["mrr"].item() - want["recip_rank"]) > 1e-6


def test_level_two_feeds_ndcg_and_the_binary_measures_separately(tmp_path):
    lightning = pytest.importorskip("lightning_retrieval")
    qrels, batches = make_loop(2)
    want = trec_eval_of(qrels, batches, tmp_path, level=2).summary()
    judge = QrelsJudge(qrels, level=2)
    graded = lightning.RankingMetrics(["ndcg", "ndcg@10"], empty="zero")
    binary = lightning.RankingMetrics(["map", "precision@5", "r_precision", "recall@100"], empty="zero")
    for b in batches:
        out = judge(b.queries, b.doc_names, b.scores)
        graded.update(**out.inputs(graded=True))
        binary.update(**out.inputs(graded=False))
        with pytest.raises(ValueError, match=r"at level 2 trec_eval judges nDCG by the rels .* inputs\(graded=True\)"):
            out.inputs()
    got = {**graded.compute(), **binary.compute()}
    for key, name in [("ndcg", "ndcg"), ("ndcg@10", "ndcg_cut_10"), ("map", "map"), ("precision@5", "P_5"),
                      ("r_precision", "Rprec"), ("recall@100", "recall_100")]:
        assert got[key].item() == pytest.approx(want[name], abs=1e-12, rel=0), key
    # the level matters here (else the test could not tell)
    assert abs(want["map"] - trec_eval_of(qrels, batches, tmp_path).summary()["map"]) > 1e-3


def test_tie_order_is_doc_id_descending_in_bytes_and_padding_last():
    qrels = qrels_from_dict({"q": {"d9": 1, "d10": 2, "é": 1}})
    judge = QrelsJudge(qrels)
    out = judge(["q"], [["d9", None, "d10", "é", "a"]], torch.tensor([[1.0, 5.0, 1.0, 1.0, 2.0]]))
    # "a" first (score 2); then the ties: "é" (0xc3...) > "d9" > "d10" in bytes; the padding last
    assert out.order.tolist() == [[4, 3, 0, 2, 1]]
    assert out.gains.tolist() == [[0.0, 1.0, 1.0, 2.0, 0.0]] and out.mask.tolist() == [[True] * 4 + [False]]
    by_index = judge(torch.tensor([0]), torch.tensor([[qrels.docs.index("d9"), -1, qrels.docs.index("d10"),
                                                       qrels.docs.index("é"), qrels.docs.add(b"a")]]),
                     torch.tensor([[1.0, 5.0, 1.0, 1.0, 2.0]]))
    assert by_index.order.tolist() == out.order.tolist() and torch.equal(by_index.gains, out.gains)
    assert out.n_relevant.tolist() == [3] and out.ideal.tolist() == [[2.0, 1.0, 1.0]]


def test_unjudged_queries_and_empty_rows_are_dropped_as_trec_eval_does():
    lightning = pytest.importorskip("lightning_retrieval")
    ignite = pytest.importorskip("ignite_retrieval")
    qrels = qrels_from_dict({"q1": {"a": 1}, "q2": {"b": 1}})
    judge = QrelsJudge(qrels)
    out = judge(["zz", "q2", "q1"], [["a", "b"], ["a", "b"], ["a", "b"]], torch.tensor([[1.0, 0.5]] * 3),
                mask=torch.tensor([[True, True], [True, True], [False, False]]))
    assert out.rows.tolist() == [1] and out.query_ids == ("q2",) and out.ids.tolist() == [1]
    nothing = judge(["zz"], [["a", "b"]], torch.tensor([[1.0, 0.5]]))
    assert nothing.preds.shape == (0, 2) and nothing.ideal.shape == (0, 0)
    m = lightning.RankingMetrics(["map"], empty="zero")
    m.update(**nothing.inputs())
    m.update(**out.inputs())
    assert m.compute()["map"].item() == 0.5
    i = ignite.RankingMetrics(["map"], empty="zero")
    i.update(nothing.inputs(preds="y_pred", target="y"))
    i.update(out.inputs(preds="y_pred", target="y"))
    assert i.compute()["map"] == 0.5


def test_result_on_the_scores_device_and_documents_added_after_the_qrels():
    qrels = qrels_from_dict({"q1": {"a": 1}, "q2": {"b": 1}})
    new = qrels.docs.add(b"zz")  # a corpus document: index after the qrels' ones, never judged
    out = QrelsJudge(qrels)(torch.tensor([0, 1]), torch.tensor([[new, 0], [new, 1]]), torch.tensor([[1.0, 0.5]] * 2))
    assert out.gains.tolist() == [[0.0, 1.0], [0.0, 1.0]] and out.preds.device == torch.device("cpu")


BAD = [
    (lambda j: j(["q1"], [["a"]], torch.tensor([1.0])), ValueError, r"scores must be a \[B, k\] tensor; got \(1,\)"),
    (lambda j: j(["q1"], [["a"]], torch.tensor([[True]])), TypeError, "scores must be real numbers; got torch.bool"),
    (lambda j: j(["q1", "q2"], [["a"]], torch.tensor([[1.0]])), ValueError, "2 query ids for 1 rows of scores"),
    (lambda j: j(["q1", 0], [["a"], ["b"]], torch.ones(2, 1)), TypeError, r"all str \(query ids\) or all int"),
    (lambda j: j("q1", [["a"]], torch.ones(1, 1)), TypeError, "query_ids must be a sequence"),
    (lambda j: j(torch.tensor([0.0]), [["a"]], torch.ones(1, 1)), TypeError, "integer indices into qrels.query_ids"),
    (lambda j: j(torch.tensor([5]), [["a"]], torch.ones(1, 1)), ValueError,
     r"query index 5 is not in range for the qrels' 2 queries"),
    (lambda j: j([-1], [["a"]], torch.ones(1, 1)), ValueError, "query index -1 is not in range"),
    (lambda j: j(["q1"], [["a", "b"]], torch.ones(1, 1)), ValueError, r"doc_ids row 0 must hold k = 1 doc ids"),
    (lambda j: j(["q1"], [[3]], torch.ones(1, 1)), TypeError, r"doc ids must be str \(None = padding\); got 3"),
    (lambda j: j(["q1"], torch.tensor([[0, 1]]), torch.ones(1, 1)), ValueError,
     r"doc_ids must be \[B, k\] = \[1, 1\] like the scores"),
    (lambda j: j(["q1"], torch.tensor([[0.0]]), torch.ones(1, 1)), TypeError, "integer indices into qrels.docs"),
    (lambda j: j(["q1"], torch.tensor([[99]]), torch.ones(1, 1)), ValueError,
     r"doc index 99 is not in qrels.docs \(3 documents\)"),
    (lambda j: j(["q1"], [["a", "b", "a"]], torch.tensor([[1.0, 2.0, 3.0]])), ValueError,
     r"row 0 \(query 'q1'\) retrieves a document twice"),
    (lambda j: j(["q2"], torch.tensor([[1, 1]]), torch.tensor([[1.0, 1.0]])), ValueError,
     r"row 0 \(query 'q2'\) retrieves a document twice"),
    (lambda j: j(["q1"], [["a", "b"]], torch.tensor([[1.0, float("nan")]])), ValueError,
     r"scores must be finite where valid .* row 0, column 1 is nan"),
    (lambda j: j(["q1"], [["a"]], torch.ones(1, 1), mask=torch.ones(1, 1)), ValueError,
     r"mask must be a bool tensor \[B, k\] = \[1, 1\]"),
    (lambda j: j(["q1"], "ab", torch.ones(1, 2)), ValueError, r"doc_ids must be an integer tensor \[B, k\] or 1 rows"),
]


@pytest.mark.parametrize("case", range(len(BAD)))
def test_bad_inputs_are_refused_with_a_clear_message(case):
    call, kind, message = BAD[case]
    judge = QrelsJudge(qrels_from_dict({"q1": {"a": 1, "b": 0}, "q2": {"c": 2}}))
    with pytest.raises(kind, match=message):
        call(judge)


def test_bad_options_and_unknown_queries_when_refused():
    qrels = qrels_from_dict({"q1": {"a": 1}})
    with pytest.raises(TypeError, match="QrelsJudge takes a Qrels"):
        QrelsJudge({"q1": {"a": 1}})
    with pytest.raises(TypeError, match="level must be an int"):
        QrelsJudge(qrels, level=1.5)
    with pytest.raises(ValueError, match=r"unjudged must be one of \['skip', 'error'\]; got 'drop'"):
        QrelsJudge(qrels, unjudged="drop")
    with pytest.raises(ValueError, match=r"queries absent from the qrels: \['zz'\] \(unjudged='error'"):
        QrelsJudge(qrels, unjudged="error")(["q1", "zz"], [["a"], ["a"]], torch.ones(2, 1))
    out = QrelsJudge(qrels)(["q1"], [["a"]], torch.ones(1, 1))
    with pytest.raises(TypeError, match="graded must be None, True or False; got 'yes'"):
        out.inputs(graded="yes")

    with pytest.raises(ValueError, match=r"level must be an int64 \(-2\*\*63 <= level < 2\*\*63\), as the relevances"):
        QrelsJudge(qrels, level=2**70)  # was torch's bare OverflowError


def test_ideal_of_relevances_near_int64_is_each_querys_rels_descending():
    """The ideal was sorted by query * (max rel + 1) - rel, which overflows int64 for such rels."""
    big = 2**62
    qrels = qrels_from_dict({"q1": {"a": 1}, "q2": {"b": 1, "c": big, "e": 3}, "q3": {"d": big, "f": 5, "g": 2}})
    out = QrelsJudge(qrels)(["q1", "q2", "q3"], [["a"], ["b"], ["d"]], torch.ones(3, 1))
    assert out.ideal.tolist() == [[1.0, 0.0, 0.0], [float(big), 3.0, 1.0], [float(big), 5.0, 2.0]]
    assert out.n_positive.tolist() == [1, 3, 3]

@pytest.mark.parametrize("adapter", ["lightning", "ignite"])
def test_adapters_refuse_bad_r_and_ideal(adapter):
    pytest.importorskip("lightning_retrieval" if adapter == "lightning" else "ignite_retrieval")
    from ignite_retrieval import RankingMetrics as IgniteRanking
    from lightning_retrieval import RankingMetrics as LightningRanking

    preds, target = torch.tensor([[0.9, 0.5]]), torch.tensor([[1, 1]])

    def update(ties="stable", **kw):
        if adapter == "lightning":
            LightningRanking(["map", "ndcg"], ties=ties).update(preds, target, **kw)
        else:
            IgniteRanking(["map", "ndcg"], ties=ties).update({"y_pred": preds, "y": target, **kw})

    prefix = "" if adapter == "lightning" else "RankingMetrics: "
    with pytest.raises(ValueError, match=prefix + r"n_relevant must be a tensor of shape \[B\] with B = 1"):
        update(n_relevant=torch.tensor([2, 3]))
    with pytest.raises(ValueError, match=prefix + r"ideal must be a tensor of shape \[B, m\] with B = 1"):
        update(ideal=torch.tensor([1.0]))
    with pytest.raises(TypeError, match=prefix + "n_relevant must be integer counts"):
        update(n_relevant=torch.tensor([2.0]))
    with pytest.raises(ValueError, match=prefix + "n_relevant is below the relevant items in the list of 1 queries"):
        update(n_relevant=torch.tensor([1]))
    with pytest.raises(ValueError, match=prefix + "ideal and n_relevant disagree"):
        update(n_relevant=torch.tensor([3]), ideal=torch.tensor([[1.0, 1.0]]))
    with pytest.raises(ValueError, match=prefix + r'n_relevant / ideal rank each list once: ties must be "stable", '
                                                  r'"optimistic" or "pessimistic", not "expected"'):
        update(ties="expected", n_relevant=torch.tensor([2]))


DOCS = Path(__file__).resolve().parents[3] / "docs"


def _snippets():
    """The Python blocks of the docs that use QrelsJudge: (file and adapter, code)."""
    out = []
    for name in ("trec.md", "lightning.md", "ignite.md"):
        blocks = re.findall(r"```python\n(.*?)```", (DOCS / name).read_text(encoding="utf-8"), flags=re.S)
        out += [(f"{name}:{'ignite' if 'ignite_retrieval' in code else 'lightning'}", code) for code in blocks
                if "QrelsJudge" in code]
    return out


@pytest.mark.parametrize("name, code", _snippets(), ids=[n for n, _ in _snippets()])
def test_doc_snippets_run_and_print_what_they_show(name, code, tmp_path):
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    expected = [line.split("  # ", 1)[1].strip() for line in code.splitlines()
                if line.lstrip().startswith("print(") and "  # " in line]
    assert expected and proc.stdout.split("\n")[:-1] == expected, (proc.stdout, expected)


def test_the_validation_loop_is_documented_once():
    # docs/trec.md shows it with each adapter; the adapters' docs point there
    assert sorted(n for n, _ in _snippets()) == ["trec.md:ignite", "trec.md:lightning"]
    for name in ("lightning.md", "ignite.md"):
        text = " ".join((DOCS / name).read_text(encoding="utf-8").split())
        assert 'docs/trec.md, "In a validation loop"' in text, name
