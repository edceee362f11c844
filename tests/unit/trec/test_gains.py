"""trec_eval's gain tables (retrieval_core.trec.gains): the parameters read and refused, and the order
trec_eval's qsort gives a table (glibc's merge sort, a comparator that truncates to int)."""
from __future__ import annotations

import random

import pytest

from retrieval_core.trec.gains import (DEFAULT_P, GainParams, SLOW_LIMIT, _merge_sort, c_int, parse_gain_params,
                                       table_order)


def test_parameters_read_as_trec_eval_reads_them():
    assert parse_gain_params("ndcg", None) == GainParams("")
    assert parse_gain_params("G", "+1=1e1,-1=-.5,0=3.") == GainParams("+1=1e1,-1=-.5,0=3.", ((1, 10.0), (-1, -0.5),
                                                                                            (0, 3.0)))
    assert parse_gain_params("rbp", "2=1,p=0.8") == GainParams("2=1,p=0.8", ((2, 1.0),), 0.8)
    assert parse_gain_params("rbp_resid", "p=1").p == 1.0 and DEFAULT_P == 0.9


@pytest.mark.parametrize("base, text, message", [
    ("ndcg", "1=3,2", "parameters are name=value pairs separated by commas, e.g. 1=3,2=9 (trec_eval: 'malformed "
                      "pair parameters')"),
    ("ndcg", "1=3=4", "parameters are name=value pairs"),
    ("ndcg", "1=3,,2=4", "parameters are name=value pairs"),
    ("ndcg", "x=3", "x=3: ndcg takes rel_level=gain pairs (a relevance level is an integer)"),
    ("G", "p=0.5", "p=0.5: G takes rel_level=gain pairs (a relevance level is an integer)"),
    ("rbp_resid", "1=2", "1=2: rbp_resid takes p= alone (a relevance level is an integer)"),
    ("rbp", "q=2", "q=2: rbp takes rel_level=gain pairs and p= (a relevance level is an integer)"),
    ("ndcg", "1=3,+1=4", "relevance level 1 is given twice"),
    ("ndcg", "1=abc", "1=abc: the value must be a finite number"),
    ("ndcg", "1=3x", "1=3x: the value must be a finite number"),
    ("ndcg", "1=1e999", "1=1e999: the value must be a finite number"),
    ("ndcg", "99999999999999999999=1", "99999999999999999999=1: a relevance level must be an int64"),
    ("rbp", "p=1.5", "p must be in [0, 1]; got 1.5"),
    ("rbp", "p=0.5,p=0.6", "p is given twice"),
])
def test_bad_parameters_are_refused(base, text, message):
    with pytest.raises(ValueError) as err:
        parse_gain_params(base, text)
    assert str(err.value).startswith(message)


def test_bad_parameters_are_measure_errors_naming_the_measure():
    from retrieval_core.trec import MeasureError, parse_one
    with pytest.raises(MeasureError, match=r"^'ndcg\.1=3,1=4': relevance level 1 is given twice$"):
        parse_one("ndcg.1=3,1=4")
    with pytest.raises(MeasureError, match=r"^'infAP\.5': trec_eval's infAP takes no parameter"):
        parse_one("infAP.5")
    assert parse_one("G.1=3") == [("G.1=3", "G_1=3")] and parse_one("gm_bpref") == [("gm_bpref", "gm_bpref")]


def test_bad_parameters_on_the_command_line_exit_2(tmp_path, capsys):
    from retrieval_core.cli import main
    (tmp_path / "q").write_text("q 0 a 1\n")
    (tmp_path / "r").write_text("q Q0 a 1 1 t\n")
    assert main(["trec", "-m", "rbp.p=2", str(tmp_path / "q"), str(tmp_path / "r")]) == 2
    assert capsys.readouterr().err == "retrieval-metrics trec: error: -m: 'rbp.p=2': p must be in [0, 1]; got 2\n"


def test_c_int_truncates_and_gives_int_min_out_of_range():
    assert [c_int(x) for x in (0.5, -0.5, 2.9, -2.9, 2.0**31 - 1, 2.0**31, -2.0**31, -2.0**31 - 1, float("nan"))] == [
        0, 0, 2, -2, 2**31 - 1, -2**31, -2**31, -2**31, -2**31]


def test_a_fractional_table_keeps_trec_evals_order():
    # 2.5 and 3 compare equal ((int) -0.5 is 0): the merge keeps level 2 after level 1
    assert table_order(((1, 3.0), (2, 2.5)), 3) == [(0, 0.0), (1, 3.0), (2, 2.5)]
    # 0.5 and 0 compare equal too: level 1 (0.5) stays below level 0, so the walk from the top stops at 0
    assert table_order(((1, 0.5),), 3) == [(1, 0.5), (0, 0.0), (2, 2.0)]
    assert table_order(((0, 1e10),), 2) == [(0, 1e10), (1, 1.0)]  # 1e10 - 1 beyond int: INT_MIN, "less"


def test_integer_tables_sort_as_the_merge_sort_does():
    rng = random.Random(0)
    for _ in range(300):
        levels = rng.sample(range(-2, 9), rng.randint(0, 5))
        gains = tuple((lv, float(rng.randint(-3, 12))) for lv in levels)
        m = rng.randint(0, 9)
        given = {lv for lv, _ in gains}
        entries = list(gains) + [(lv, float(lv)) for lv in range(m) if lv not in given]
        assert table_order(gains, m) == _merge_sort(entries, lambda a, b: c_int(a[1] - b[1]))


def test_a_huge_fractional_table_is_refused():
    with pytest.raises(ValueError, match=f"reproduced for at most {SLOW_LIMIT} entries"):
        table_order(((1, 0.5),), SLOW_LIMIT + 5)
