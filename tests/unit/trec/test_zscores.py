"""The z-score file reader of retrieval_core.trec.zscores (trec_eval -Z): what it reads, and every bad
file's error (type, file, line)."""
from __future__ import annotations

import re

import pytest
import torch

pytest.importorskip("numpy")

from retrieval_core.trec.zscores import MISSING, read_zscores, to_zscores, zscores_from_lines  # noqa: E402


def test_fields_split_by_any_whitespace_comments_and_blank_lines_skipped(tmp_path):
    p = tmp_path / "z"
    p.write_bytes(b"# means\n\n301 map\t0.25   1e-1 \n 302 P_5 -1 2.5\r\n301 num_ret 7 0")  # no final newline
    zs = read_zscores(p)
    assert zs.table == {("301", "map"): (0.25, 0.1), ("302", "P_5"): (-1.0, 2.5), ("301", "num_ret"): (7.0, 0.0)}
    assert zs.source == str(p)


@pytest.mark.parametrize("text, message", [
    ("301 map 0.5 0.1\n301 P_5 0.5\n", "line 2: expected 4 fields (qid measure mean stddev), got 3: '301 P_5 0.5'"),
    ("301 map 0.5 0.1 extra\n", "line 1: expected 4 fields (qid measure mean stddev), got 5"),
    ("\n301 map abc 0.1\n", "line 2: the mean (3rd field) must be a finite number; got 'abc'"),
    ("301 map 0.5 0.1\n302 map 0.5 x1\n", "line 2: the stddev (4th field) must be a finite number; got 'x1'"),
    ("301 map nan 0.1\n", "line 1: the mean (3rd field) must be a finite number; got 'nan'"),
    ("301 map 0.5 1_0\n", "line 1: the stddev (4th field) must be a finite number; got '1_0'"),
    ("301 map 0.5 0.1\n301 map 0.4 0.1\n", "line 2: query '301', measure 'map' given twice"),
    ("# nothing\n\n", "no z-scores"),
])
def test_bad_files_name_the_file_and_line(tmp_path, text, message):
    p = tmp_path / "z"
    p.write_text(text)
    with pytest.raises(ValueError, match=re.escape(f"{p}: {message}")):
        read_zscores(p)


def test_conversion_rules():
    zs = zscores_from_lines(["q 1 0.5 0.25", "q 2 0.5 0", "q 3 0.5 0", "q 4 0.5 -0.5", "q 5 0 1"])
    values = torch.tensor([[1.0, 0.5, 0.25, 1.0, 1.0, 3.0]], dtype=torch.float64)
    got = to_zscores(values, ["q"], ["1", "2", "3", "4", "5", "6"], zs, logs=[4])
    assert got.tolist() == [[2.0, 0.0, MISSING, -1.0, 0.0, MISSING]]  # log(1) = 0 for a geometric mean's column
    assert to_zscores(values, ["other"], ["1", "2", "3", "4", "5", "6"], zs).tolist() == [[MISSING] * 6]
