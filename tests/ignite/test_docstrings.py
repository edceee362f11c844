"""The docstring examples of ignite_retrieval run and print what they show."""
from __future__ import annotations

import doctest
import importlib
import pkgutil

import ignite_retrieval


def test_docstring_examples_run():
    modules = [ignite_retrieval] + [
        importlib.import_module(info.name)
        for info in pkgutil.walk_packages(ignite_retrieval.__path__, "ignite_retrieval.")
    ]
    failed = attempted = 0
    for module in modules:
        result = doctest.testmod(module)
        failed, attempted = failed + result.failed, attempted + result.attempted
    assert failed == 0 and attempted >= 20
    for name in ignite_retrieval.__all__:
        if name != "RetrievalMetric":
            assert ">>>" in getattr(ignite_retrieval, name).__doc__, name
