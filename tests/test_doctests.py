"""The docstring examples of every module of the three packages run and print what
they show: one test case per module, found by walking the packages."""
from __future__ import annotations

import doctest
import importlib
import pkgutil
from typing import List

import pytest

PACKAGES = ("retrieval_core", "ignite_retrieval", "lightning_retrieval")
MIN_EXAMPLES = {"retrieval_core": 50, "ignite_retrieval": 20, "lightning_retrieval": 5}  # lower bounds, not counts


def module_names() -> List[str]:
    names = []
    for package in PACKAGES:
        pkg = importlib.import_module(package)
        names.append(package)
        names.extend(info.name for info in pkgutil.walk_packages(pkg.__path__, f"{package}."))
    return names


MODULES = module_names()


def run_examples(name: str) -> doctest.TestResults:
    module = importlib.import_module(name)
    finder = doctest.DocTestFinder()
    runner = doctest.DocTestRunner(verbose=False)
    report: List[str] = []
    for test in finder.find(module, name):
        runner.run(test, out=report.append)
    result = doctest.TestResults(runner.failures, runner.tries)
    assert result.failed == 0, "".join(report)
    return result


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    run_examples(name)


def test_every_module_is_found_and_examples_exist():
    # each package's modules, subpackages included (retrieval_core.set_metrics.*)
    assert {"retrieval_core.set_metrics.fnmr", "ignite_retrieval.ranking", "lightning_retrieval.metrics"} <= set(MODULES)
    for package in PACKAGES:
        attempted = sum(run_examples(n).attempted for n in MODULES if n == package or n.startswith(f"{package}."))
        assert attempted >= MIN_EXAMPLES[package], (package, attempted)


def test_ignite_exports_have_examples():
    import ignite_retrieval

    for name in ignite_retrieval.__all__:
        if name != "RetrievalMetric":
            assert ">>>" in getattr(ignite_retrieval, name).__doc__, name


def test_a_failing_example_fails(tmp_path, monkeypatch):
    """The runner reports a wrong example (the check is not vacuous)."""
    (tmp_path / "h4_doctest_probe.py").write_text('def f():\n    """\n    >>> 1 + 1\n    3\n    """\n')
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(AssertionError, match=r"Expected:\s+3\s+Got:\s+2"):
        run_examples("h4_doctest_probe")
