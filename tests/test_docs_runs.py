"""The docs report the anchor runs they claim (issue 26, item 19): docs/lightning.md's
table of torchmetrics' suite covers every file of its retrieval folder with totals that
add up, and names every all-zero-predictions failure that known.py expects;
docs/compat.md names PML's tests by their tag and counts only passes that built ours;
docs/architecture.md's plain-loop adapter runs and prints what it shows."""
from __future__ import annotations

import doctest
import re
from pathlib import Path

import pytest

from tests.anchors.suites import known

DOCS = Path(__file__).resolve().parent.parent / "docs"
TORCHMETRICS_FILES = {"test_auroc.py", "test_fallout.py", "test_hit_rate.py", "test_map.py", "test_mrr.py",
                      "test_ndcg.py", "test_precision.py", "test_precision_recall_curve.py", "test_r_precision.py",
                      "test_recall.py"}  # tests/unittests/retrieval at torchmetrics dab03339


def _number(text: str) -> int:
    return int(text.strip("* ").replace(",", ""))


def test_lightning_doc_reports_every_torchmetrics_file_and_totals_that_add_up():
    text = (DOCS / "lightning.md").read_text(encoding="utf-8")
    rows = re.findall(r"^  \| (test_\w+\.py) \| (\d+)[^|]*\| (\d+) \| (\d+) \| (\d+) \|$", text, flags=re.M)
    assert {r[0] for r in rows} == TORCHMETRICS_FILES
    total = re.search(r"^  \| \*\*the whole folder\*\* \| ([\d,]+) \| ([\d*,]+) \| ([\d*,]+) \| ([\d*,]+) \|$",
                      text, flags=re.M)
    sums = [sum(int(r[i]) for r in rows) for i in (2, 3, 4)]
    assert [_number(total.group(i)) for i in (2, 3, 4)] == sums
    assert "not yet re-measured" not in text.lower()


def test_lightning_doc_names_every_all_zero_failure_known_expects():
    text = (DOCS / "lightning.md").read_text(encoding="utf-8")
    pattern = next(p for p in known.KNOWN["torchmetrics"] if "all_zero_predictions" in p)
    expected = set(re.search(r"test_\(([\w|]+)\)", pattern).group(1).split("|"))
    named = re.search(r"`test_\{([\w,]+)\}_all_zero_predictions_returns_zero`", text).group(1).split(",")
    assert set(named) == expected == {"map", "mrr", "precision", "recall"}


def test_compat_doc_names_pml_tests_by_their_tag_and_counts_ours_only():
    text = " ".join((DOCS / "compat.md").read_text(encoding="utf-8").split())
    assert "PML 2.9.0's tests" not in text
    assert "commit 216a792, tagged v2.8.1" in text
    assert "11 passed, 0 failed, 0 skipped**, and 5 more passed without building ours, not counted" in text


def test_architecture_doc_plain_loop_adapter_runs():
    text = (DOCS / "architecture.md").read_text(encoding="utf-8")
    section = text.split("## Adding an adapter", 1)[1].split("\n## ", 1)[0]
    section = re.sub(r"^```.*$", "", section, flags=re.M)  # a fence ends an example's output
    test = doctest.DocTestParser().get_doctest(section, {}, "architecture.md: Adding an adapter", None, 0)
    assert len(test.examples) >= 5
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    runner.run(test)
    assert runner.summarize(verbose=False).failed == 0


def test_metrics_doc_two_tower_example_runs():
    text = (DOCS / "metrics.md").read_text(encoding="utf-8")
    section = text.split("## Seen items and two-tower models", 1)[1].split("\n## ", 1)[0]
    section = re.sub(r"^```.*$", "", section, flags=re.M)
    test = doctest.DocTestParser().get_doctest(section, {}, "metrics.md: Seen items and two-tower models", None, 0)
    assert len(test.examples) >= 8
    runner = doctest.DocTestRunner()
    runner.run(test)
    assert runner.summarize(verbose=False).failed == 0


@pytest.mark.parametrize("doc, section", [("ignite.md", "## Recommenders: top-k lists with sparse truth"),
                                          ("lightning.md", "### Recommenders: top-k lists with sparse truth")])
def test_adapter_docs_topk_snippets_run(doc, section):
    pytest.importorskip("ignite")
    pytest.importorskip("torchmetrics")
    text = (DOCS / doc).read_text(encoding="utf-8")
    body = text.split(section, 1)[1].split("\n## ", 1)[0]
    body = re.sub(r"^```.*$", "", body, flags=re.M)
    test = doctest.DocTestParser().get_doctest(body, {}, f"{doc}: {section}", None, 0)
    assert len(test.examples) >= 6
    runner = doctest.DocTestRunner()
    runner.run(test)
    assert runner.summarize(verbose=False).failed == 0
