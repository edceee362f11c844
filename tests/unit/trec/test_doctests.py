"""The docstring examples of retrieval_core.trec run as shown (the suite-wide doctest test
walks the same modules; this runs them with the trec tests alone)."""
from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

pytest.importorskip("numpy")

import retrieval_core.trec  # noqa: E402

MODULES = ["retrieval_core.trec"] + [m.name for m in pkgutil.iter_modules(retrieval_core.trec.__path__,
                                                                              "retrieval_core.trec.")]


@pytest.mark.parametrize("name", MODULES)
def test_examples(name):
    result = doctest.testmod(importlib.import_module(name))
    assert result.failed == 0 and result.attempted > 0, result
