"""pytest plugin: run an anchor's own tests with its classes replaced by our drop-ins.

Loaded by ``run.py`` as ``-p anchor_swap`` in a pytest process whose rootdir is the
anchor's extracted test tree. ``ANCHOR_SUITE`` names the anchor (``torchmetrics`` or
``ignite``). Before any test module is imported, every drop-in class name is set,
on the anchor's public package and on the module that defines the class, to our
class; a test module's ``from torchmetrics.retrieval.average_precision import
RetrievalMAP`` then gets ours. Reference functions (``torchmetrics.functional``,
sklearn, ranx) are left alone: they stay the anchors' own.

Two small shims keep the anchors' test trees importable without their dev
dependencies: a no-op ``cachier`` decorator (torchmetrics caches reference values
with it) and a ``worker_id`` fixture (pytest-xdist's, which ignite's fixtures ask
for) when pytest-xdist is absent. Neither changes what a test checks.
"""
from __future__ import annotations

import importlib
import os
import sys
import types

import pytest

SWAPS = {
    # anchor module that defines the class -> names replaced there and on the package
    "torchmetrics": ("lightning_retrieval", "torchmetrics.retrieval", [
        "RetrievalAUROC", "RetrievalFallOut", "RetrievalHitRate", "RetrievalMAP", "RetrievalMRR",
        "RetrievalNormalizedDCG", "RetrievalPrecision", "RetrievalPrecisionRecallCurve",
        "RetrievalRPrecision", "RetrievalRecall", "RetrievalRecallAtFixedPrecision",
    ]),
    "ignite": ("ignite_retrieval", "ignite.metrics.rec_sys", ["HitRate", "NDCG"]),
}


def _no_cache(*args, **kwargs):
    """Stand-in for ``cachier.cachier(...)``: returns the function unchanged."""
    def decorate(fn):
        return fn
    return decorate


def _install_shims() -> None:
    try:
        importlib.import_module("cachier")
    except ImportError:
        shim = types.ModuleType("cachier")
        shim.cachier = _no_cache
        sys.modules["cachier"] = shim


def swap(anchor: str) -> list:
    """Replace the anchor's classes by ours; returns ``[(where, name)]`` replaced."""
    ours_pkg, anchor_pkg, names = SWAPS[anchor]
    ours = importlib.import_module(ours_pkg)
    package = importlib.import_module(anchor_pkg)
    done = []
    for name in names:
        original = getattr(package, name)
        defining = importlib.import_module(original.__module__)
        for where in {package, defining}:
            setattr(where, name, getattr(ours, name))
            done.append((where.__name__, name))
        # parents that re-export the name (ignite.metrics.HitRate)
        parent = anchor_pkg.rsplit(".", 1)[0]
        parent_mod = sys.modules.get(parent)
        if parent_mod is not None and getattr(parent_mod, name, None) is original:
            setattr(parent_mod, name, getattr(ours, name))
            done.append((parent, name))
    return done


_install_shims()  # at import: the anchors' conftests are loaded before pytest_configure


def pytest_configure(config) -> None:
    anchor = os.environ.get("ANCHOR_SUITE")
    if anchor not in SWAPS:
        raise pytest.UsageError(f"ANCHOR_SUITE must be one of {sorted(SWAPS)}; got {anchor!r}")
    replaced = swap(anchor)
    config._anchor_swapped = replaced  # noqa: SLF001 - read by the report header


def pytest_report_header(config):
    replaced = getattr(config, "_anchor_swapped", [])
    return [f"anchor_swap: {len(replaced)} names replaced by ours ({os.environ.get('ANCHOR_SUITE')})"]


try:  # pytest-xdist provides worker_id; ignite's fixtures need it
    import xdist  # noqa: F401
except ImportError:
    @pytest.fixture(scope="session")
    def worker_id():
        """pytest-xdist's fixture without xdist: the main process."""
        return "master"
