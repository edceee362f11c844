"""pytest plugin: run OML's own functional-metric tests with OML's functions replaced by ours.

Loaded by ``run.py`` as ``-p oml_swap`` in a pytest process rooted at OML's source
tree (``OML_REPO_DIR``). Before any test module is imported, each function of
``oml.functional.metrics`` that :mod:`retrieval_core.compat.oml` provides is replaced
there by ours, wrapped to count its calls; a test module's ``from
oml.functional.metrics import calc_cmc`` then gets ours. OML's ``reduce_metrics``
and every helper of OML's tests stay OML's own.

``oml.metrics`` and ``oml.retrieval`` import OML's datasets, models and image
stack (albumentations, torchvision...), which are not installed here; when they do
not import, stand-ins take their names: ``oml.metrics`` with our
``calc_retrieval_metrics_rr`` / ``calc_fnmr_at_fmr_rr``, ``oml.retrieval`` with a
``RetrievalResults`` that only holds ``distances``, ``retrieved_ids`` and
``gt_ids`` (what the metric functions read; OML's checks of those inputs are not
run). Each test's report says how many of our functions it called (``oml_ours``).
"""
from __future__ import annotations

import functools
import importlib
import sys
import types

import pytest

from oml_env import stub_light_dependencies

import retrieval_core.compat.oml as ours

SWAPPED = ["calc_retrieval_metrics", "calc_cmc", "calc_precision", "calc_map", "calc_fnmr_at_fmr", "calc_pcf",
           "calc_topological_metrics"]
_calls = {"n": 0}


def _counted(fn):
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        _calls["n"] += 1
        return fn(*args, **kwargs)

    return wrapper


class _RetrievalResults:
    """Holds what the metric functions read of OML's RetrievalResults (stand-in)."""

    def __init__(self, distances, retrieved_ids, gt_ids=None):
        self.distances, self.retrieved_ids, self.gt_ids = distances, retrieved_ids, gt_ids


def _stand_in(name: str, **attrs) -> None:
    try:
        module = importlib.import_module(name)
    except ImportError:
        module = types.ModuleType(name)
        module.__doc__ = "stand-in (tests/anchors/suites/oml_swap.py)"
        sys.modules[name] = module
        setattr(sys.modules["oml"], name.split(".")[1], module)
    for key, value in attrs.items():
        setattr(module, key, value)


def _swap() -> None:
    stub_light_dependencies()
    target = importlib.import_module("oml.functional.metrics")
    for name in SWAPPED:
        setattr(target, name, _counted(getattr(ours, name)))
    _stand_in("oml.metrics", calc_retrieval_metrics_rr=_counted(ours.calc_retrieval_metrics_rr),
              calc_fnmr_at_fmr_rr=_counted(ours.calc_fnmr_at_fmr_rr))
    try:
        importlib.import_module("oml.retrieval")
    except ImportError:
        _stand_in("oml.retrieval", RetrievalResults=_RetrievalResults)


_swap()  # at import (``-p oml_swap``), before OML's conftest and test modules import oml


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item):
    before = _calls["n"]
    yield
    item.user_properties.append(("oml_ours", _calls["n"] - before))
