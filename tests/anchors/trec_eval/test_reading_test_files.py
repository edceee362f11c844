"""End-to-end checks of the reading semantics on trec_eval's own test files (tests/anchors/trec_eval/data,
copied unmodified from usnistgov/trec_eval, see data/README.md): counts agree with plain
Python counting, and num_q / num_ret / num_rel / num_rel_ret / num_nonrel_judged_ret and
relstring computed from the parsed objects equal trec_eval's outputs, with -c, -M100 and -l2."""
from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("numpy")

from retrieval_core.trec import align, read_qrels, read_run, read_trec_eval_output  # noqa: E402

DATA = Path(__file__).parent / "data"
COUNTS = ("num_ret", "num_rel", "num_rel_ret", "num_nonrel_judged_ret")


def plain_records(path, n_fields):
    """Records as lists of fields, by plain line splitting (the independent count)."""
    out = []
    for line in path.read_text().splitlines():
        parts = line.split()
        if parts and not parts[0].startswith("#"):
            out.append(parts[:n_fields])
    return out


@pytest.mark.parametrize("name", ["qrels.test", "qrels.test.with-comments", "qrels.rel_level"])
def test_qrels_counts_match_plain_counting(name):
    records = plain_records(DATA / name, 4)
    qrels = read_qrels(DATA / name)
    assert len(qrels) == len(records)
    assert list(qrels.query_ids) == sorted({r[0] for r in records})
    assert len(set(qrels.doc.tolist())) == len({r[2] for r in records})
    assert qrels.to_dict() == {q: {r[2]: int(r[3]) for r in records if r[0] == q} for q in qrels.query_ids}


def test_comment_lines_are_skipped_but_a_hash_inside_a_field_is_kept():
    # the with-comments file adds comment lines and renames one document CR93E-1860 -> CR#93E-1860
    with_comments = read_qrels(DATA / "qrels.test.with-comments").to_dict()
    plain = read_qrels(DATA / "qrels.test").to_dict()
    assert with_comments["301"].pop("CR#93E-1860") == plain["301"].pop("CR93E-1860") == 0
    assert with_comments == plain
    # trec_eval's quicktest compares both qrels files' output with the same out.test
    expected = read_trec_eval_output(DATA / "out.test")["all"]
    for name in ("qrels.test", "qrels.test.with-comments"):
        qrels = read_qrels(DATA / name)
        al = align(read_run(DATA / "results.test", docs=qrels.docs), qrels)
        assert (al.num_ret.sum().item(), al.n_relevant.sum().item(), al.num_rel_ret.sum().item()) == (
            expected["num_ret"], expected["num_rel"], expected["num_rel_ret"])


@pytest.mark.parametrize("name", ["results.test", "results.trunc"])
def test_run_counts_and_order_match_plain_sorting(name):
    records = plain_records(DATA / name, 6)
    run = read_run(DATA / name)
    assert len(run) == len(records)
    assert list(run.query_ids) == sorted({r[0] for r in records})
    assert run.tag == records[-1][5]
    # trec_eval's order, derived here by two stable sorts: docid descending, then score descending
    for qi, qid in enumerate(run.query_ids):
        rows = [(r[2], float(r[4])) for r in records if r[0] == qid]
        rows.sort(key=lambda r: r[0].encode(), reverse=True)
        rows.sort(key=lambda r: r[1], reverse=True)
        lo, hi = run.offsets[qi].item(), run.offsets[qi + 1].item()
        assert [run.docs[d] for d in run.doc[lo:hi].tolist()] == [r[0] for r in rows]
        assert run.score[lo:hi].tolist() == [r[1] for r in rows]


def test_results_test_has_ties_so_the_order_check_covers_them():
    records = plain_records(DATA / "results.test", 6)
    pairs = [(r[0], float(r[4])) for r in records]
    assert len(set(pairs)) < len(pairs)


CASES = {  # out file: (qrels, results, level, max_per_query, complete)
    "out.test.aq": ("qrels.test", "results.test", 1, None, False),
    "out.test.aqc": ("qrels.test", "results.trunc", 1, None, True),
    "out.test.aqcM": ("qrels.test", "results.trunc", 1, 100, True),
    "out.test.aql": ("qrels.rel_level", "results.test", 2, None, False),
}


def aligned(case, shared=True):
    qrels_name, run_name, level, m, complete = CASES[case]
    qrels = read_qrels(DATA / qrels_name)
    run = read_run(DATA / run_name, docs=qrels.docs if shared else None)
    return align(run, qrels, level=level, max_per_query=m, complete=complete), run


@pytest.mark.parametrize("shared", [True, False], ids=["shared_vocabulary", "own_vocabularies"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_counts_per_query_equal_trec_eval(case, shared):
    expected = read_trec_eval_output(DATA / case)
    al, run = aligned(case, shared)
    got = {m: getattr(al, m).tolist() if m != "num_rel" else al.n_relevant.tolist() for m in COUNTS}
    queries = [q for q in expected if q != "all"]
    assert list(al.query_ids) == queries
    for m in COUNTS:
        assert got[m] == [expected[q][m] for q in queries], m
        assert sum(got[m]) == expected["all"][m], m
    assert len(al.query_ids) == expected["all"]["num_q"]
    assert expected["all"]["runid"] == run.tag


def test_summary_of_the_default_output_equals_trec_eval():
    expected = read_trec_eval_output(DATA / "out.test")["all"]
    al, _ = aligned("out.test.aq")
    assert len(al.query_ids) == expected["num_q"]
    assert al.num_ret.sum().item() == expected["num_ret"]
    assert al.n_relevant.sum().item() == expected["num_rel"]
    assert al.num_rel_ret.sum().item() == expected["num_rel_ret"]


def relstring(al, qi, n):
    chars = []
    lo = al.offsets[qi].item()
    for i in range(lo, min(lo + n, al.offsets[qi + 1].item())):
        rel, pooled = al.rel[i].item(), al.pooled[i].item()
        chars.append("-" if not pooled else "." if rel < 0 else ">" if rel > 9 else str(rel))
    return "'" + "".join(chars) + "'"


def test_relstring_equals_trec_eval_with_unjudged_pool_entries_and_ties():
    expected = read_trec_eval_output(DATA / "out.test.aql")
    al, _ = aligned("out.test.aql")
    for qi, q in enumerate(al.query_ids):
        assert relstring(al, qi, 20) == expected[q]["relstring_20"], q
    assert any("." in expected[q]["relstring_20"] for q in al.query_ids)  # the -1 (pool, unjudged) case


def test_ideal_gains_are_the_judged_positive_rels_sorted():
    qrels = read_qrels(DATA / "qrels.rel_level")
    al, _ = aligned("out.test.aql")
    records = plain_records(DATA / "qrels.rel_level", 4)
    dense = al.ideal_dense()
    for qi, q in enumerate(al.query_ids):
        gains = sorted((int(r[3]) for r in records if r[0] == q and int(r[3]) > 0), reverse=True)
        row = dense[qi].tolist()
        assert row[:len(gains)] == gains and not any(row[len(gains):])
    assert qrels.n_relevant(2).tolist() == al.n_relevant.tolist()
