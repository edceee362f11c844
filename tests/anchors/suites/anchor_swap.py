"""pytest plugin: run an anchor's own tests with its classes replaced by our drop-ins.

Loaded by ``run.py`` as ``-p anchor_swap`` in a pytest process whose rootdir is the
anchor's extracted test tree. ``ANCHOR_SUITE`` names the anchor (``torchmetrics`` or
``ignite``). Before any test module is imported, every drop-in class name is set,
on the anchor's public package and on the module that defines the class, to our
class; a test module's ``from torchmetrics.retrieval.average_precision import
RetrievalMAP`` then gets ours. Reference functions (``torchmetrics.functional``,
sklearn, ranx) are left alone: they stay the anchors' own.

Two small shims keep the anchors' test trees importable without their dev
dependencies: ``shims/cachier.py``, a no-op stand-in for ``cachier`` (torchmetrics
caches reference values with it; also seen by the DDP pool's workers), and
pytest-xdist's ``worker_id`` fixture, which ignite's fixtures turn into the rank.
Neither changes what a test checks. Each test's report says whether it built one
of our classes (``run.py`` counts only those, and every failure).
"""
from __future__ import annotations

import functools
import importlib
import os
import sys
import types

import pytest
import torch

SWAPS = {
    # anchor module that defines the class -> names replaced there and on the package
    "torchmetrics": ("lightning_retrieval", "torchmetrics.retrieval", [
        "RetrievalAUROC", "RetrievalFallOut", "RetrievalHitRate", "RetrievalMAP", "RetrievalMRR",
        "RetrievalNormalizedDCG", "RetrievalPrecision", "RetrievalPrecisionRecallCurve",
        "RetrievalRPrecision", "RetrievalRecall", "RetrievalRecallAtFixedPrecision",
    ]),
    "ignite": ("ignite_retrieval", "ignite.metrics.rec_sys", ["HitRate", "NDCG"]),
}


SHIMS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "shims")
_CONSTRUCTED = [0]  # drop-in constructions during the current test (this process)


def _install_shims() -> None:
    """Put ``shims/`` last on ``sys.path``: a stand-in ``cachier`` is used only when
    the real one is absent, here and in the ``spawn`` workers of torchmetrics' DDP
    pool (they start with the parent's ``sys.path``)."""
    if SHIMS not in sys.path:
        sys.path.append(SHIMS)


def _count_constructions(cls) -> None:
    """Wrap ``cls.__init__`` so a test can be told to have built one of ours."""
    init = cls.__init__

    @functools.wraps(init)
    def counted(self, *args, **kwargs):
        _CONSTRUCTED[0] += 1
        init(self, *args, **kwargs)

    cls.__init__ = counted


def swap(anchor: str) -> list:
    """Replace the anchor's classes by ours; returns ``[(where, name)]`` replaced."""
    ours_pkg, anchor_pkg, names = SWAPS[anchor]
    ours = importlib.import_module(ours_pkg)
    package = importlib.import_module(anchor_pkg)
    done = []
    for name in names:
        _count_constructions(getattr(ours, name))
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


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item):
    """Record in the junit report whether the test built one of our classes
    (``anchor_ours``) and whether it is a DDP variant (``anchor_ddp``), whose
    drop-ins are built in the pool's workers: ``run.py`` counts only these; and
    the size of the process group the test ran in (``anchor_world``)."""
    _CONSTRUCTED[0] = 0
    yield
    dist = torch.distributed
    world = dist.get_world_size() if dist.is_available() and dist.is_initialized() else 1
    item.user_properties.append(("anchor_world", str(world)))
    item.user_properties.append(("anchor_ours", str(_CONSTRUCTED[0])))
    item.user_properties.append(("anchor_ddp", "1" if item.get_closest_marker("DDP") else "0"))


@pytest.fixture(scope="session")
def worker_id():
    """pytest-xdist's fixture (``run.py`` passes ``-p no:xdist``): ``gw<rank>`` in
    the processes of ignite's distributed run (``ANCHOR_WORKER_ID``), which ignite's
    ``local_rank`` fixture turns into the rank; else the main process."""
    return os.environ.get("ANCHOR_WORKER_ID", "master")
