"""run_pml.py counts a pass of PML's own tests only when the test built our
AccuracyCalculator, as the anchor suites' runner does (issue 26, item 19); pml_swap
records the constructions per test."""
from __future__ import annotations

import sys
import types
import xml.etree.ElementTree as ET

from tests.anchors.suites import run_pml


def _case(name: str, ours: int = None, outcome: str = "") -> ET.Element:
    case = ET.Element("testcase", classname="tests.utils.test_x.TestX", name=name)
    if ours is not None:
        props = ET.SubElement(case, "properties")
        ET.SubElement(props, "property", name="pml_ours", value=str(ours))
    if outcome:
        ET.SubElement(case, outcome, message="boom")
    return case


def test_only_passes_that_built_ours_count():
    cases = [_case("a", 2), _case("b", 0), _case("c"), _case("d", 0, "failure"), _case("e", 1, "skipped")]
    counts, failures, not_ours = run_pml.tally(cases)
    assert counts == {"passed": 1, "failed": 1, "skipped": 1, "not_ours": 2}
    assert list(failures) == ["tests.utils.test_x.TestX::d"]  # failures count whatever they built
    assert not_ours == ["tests.utils.test_x.TestX::b", "tests.utils.test_x.TestX::c"]


def test_the_plugin_counts_constructions_of_ours_and_subclasses(monkeypatch):
    from retrieval_core.compat.pml import AccuracyCalculator

    from tests.anchors.suites import pml_swap

    module = types.ModuleType("pytorch_metric_learning.utils.accuracy_calculator")
    utils = types.ModuleType("pytorch_metric_learning.utils")
    utils.accuracy_calculator = module
    monkeypatch.setitem(sys.modules, "pytorch_metric_learning.utils", utils)
    monkeypatch.setitem(sys.modules, "pytorch_metric_learning.utils.accuracy_calculator", module)
    cls = pml_swap.swap()
    assert module.AccuracyCalculator is cls and issubclass(cls, AccuracyCalculator)
    assert f"{cls.__module__}.{cls.__name__}" == run_pml.OURS

    class Custom(module.AccuracyCalculator):  # as PML's tests subclass it
        pass

    pml_swap._BUILT[0] = 0
    cls(k=1)
    Custom(k=1)
    assert pml_swap._BUILT[0] == 2
