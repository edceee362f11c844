"""Loading open-metric-learning's own code (for the cross-checks and OML's test suite).

OML is not a dependency: its source comes from its repository (``OML_REPO_DIR``, a
folder holding OML's ``oml/`` and ``tests/``, e.g. ``git archive`` of
github.com/OML-Team/open-metric-learning at release.4.0.0), or from an installed
``oml``. ``oml.functional.metrics`` itself needs torch, numpy and tqdm only, but the
package's ``__init__`` files import ``omegaconf``, ``gdown`` and ``validators``
(configs and downloads); when one of those is missing an empty stand-in module
takes its name (:func:`stub_light_dependencies`). None of them is used by the metric
functions, so the stand-ins change nothing that is computed.
"""
from __future__ import annotations

import importlib
import os
import sys
import types
from pathlib import Path
from typing import Optional, Tuple

# name -> attributes that OML's import chain reads at import time
_LIGHT = {
    "omegaconf": ("DictConfig", "OmegaConf", "ListConfig"),
    "gdown": ("download", "download_folder"),
    "validators": ("url",),
}


def _stub(name: str, attrs) -> types.ModuleType:
    module = types.ModuleType(name)
    module.__doc__ = "stand-in (tests/anchors/oml/oml_env.py): OML's metric functions do not use it"

    def unavailable(*args, **kwargs):
        raise RuntimeError(f"{name} is a stand-in here (tests/anchors/oml/oml_env.py)")

    for a in attrs:
        setattr(module, a, type(a, (), {"__init__": unavailable}) if a[0].isupper() else unavailable)
    return module


def stub_light_dependencies() -> list:
    """Put a stand-in under each missing name of ``_LIGHT``; returns the names stubbed."""
    stubbed = []
    for name, attrs in _LIGHT.items():
        try:
            importlib.import_module(name)
        except ImportError:
            sys.modules[name] = _stub(name, attrs)
            stubbed.append(name)
    return stubbed


def oml_repo_dir() -> Optional[Path]:
    """``$OML_REPO_DIR`` when it holds OML's ``oml/functional/metrics.py``."""
    base = os.environ.get("OML_REPO_DIR")
    if base and (Path(base) / "oml" / "functional" / "metrics.py").is_file():
        return Path(base)
    return None


def load_oml_metrics() -> Tuple[Optional[types.ModuleType], str]:
    """``(oml.functional.metrics, "")``, or ``(None, why not)``."""
    try:
        return importlib.import_module("oml.functional.metrics"), ""
    except ImportError as e:
        first = f"oml is not importable ({e})"
    repo = oml_repo_dir()
    if repo is None:
        return None, f"{first}, and OML_REPO_DIR does not point at OML's source (see docs/compat_oml.md)"
    for name in [n for n in sys.modules if n == "oml" or n.startswith("oml.")]:
        del sys.modules[name]  # a failed import leaves partial modules behind
    if str(repo) not in sys.path:
        sys.path.append(str(repo))  # appended: our own ``tests`` package keeps its name
    stub_light_dependencies()
    try:
        return importlib.import_module("oml.functional.metrics"), ""
    except ImportError as e:
        return None, f"OML's source at {repo} is not importable here: {e}"
