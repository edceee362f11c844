"""Loading Microsoft Recommenders' and RecBole's evaluation code (for the cross-checks of
tests/anchors/recommenders/, tests/anchors/recbole/ and tests/anchors/suites/run_recommenders.py).

Neither is a dependency, and neither is installed into the project's environment: both
would pull a large stack (Recommenders: jupyter, transformers, cornac, lightgbm and
``pandas<3``; RecBole: ray, tensorboard and ``torch>=1.10``, which outside an environment
that already has torch resolves to another torch). Their evaluation modules need far
less, so the packages go with ``pip install --no-deps --target DIR`` into a folder of
their own (:data:`PACKAGES`, :func:`install`). tests/anchors/suites/run_recommenders.py
runs the checks in a process with that folder on ``PYTHONPATH``, before the environment's
packages; in any other test session ``REC_ANCHORS_SITE=DIR`` adds it after them (so that
its pandas 2 never replaces the environment's pandas 3 for the other tests: Recommenders'
checks then skip, saying so). What each evaluation module imports, read from its source:

- ``recommenders.evaluation.python_evaluation`` (1.2.1): numpy, pandas, scikit-learn and
  its own ``recommenders.utils.constants`` / ``recommenders.datasets.pandas_df_utils``.
  It needs pandas < 3 (its requirement): under pandas 3 ``df.agg({...})[0]`` raises
  KeyError (positional ``[]`` on a labelled Series) in novelty, diversity, serendipity and
  distributional_coverage, and ``df[col].fillna(0, inplace=True)`` is a no-op under
  copy-on-write, so pairs that never co-occurred stay NaN and are dropped from the
  means. The folder therefore holds pandas 2.x (and its ``pytz``), which shadows the
  environment's pandas 3 in the runner's process.
- ``recbole.evaluator.metrics`` (1.2.1): numpy, scikit-learn, torch (the environment's),
  and ``recbole.utils``, whose ``__init__`` imports ``torch.utils.tensorboard`` (needs
  ``tensorboard``, ``protobuf``, ``absl-py``), ``colorlog``, ``colorama``, ``texttable``.
  Its ``MRR``, ``MAP`` and ``NDCG`` call ``np.float``, removed in NumPy 1.24:
  :func:`load_recbole` sets ``numpy.float = float`` when it is missing, the alias it was
  (``np.float is float`` in every NumPy that had it), so nothing computed changes.
"""
from __future__ import annotations

import importlib
import importlib.util
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Optional, Tuple

# what `pip install --no-deps --target` puts in the folder (versions read and run here)
PACKAGES = (
    "recommenders==1.2.1",
    "recbole==1.2.1",
    "pandas>2.0.0,<3.0.0",  # Recommenders' own requirement
    "pytz",  # pandas 2's
    "colorlog==4.7.2",  # RecBole's pins
    "colorama==0.4.4",
    "texttable",
    "tensorboard",  # torch.utils.tensorboard, imported by recbole.utils
    "protobuf",
    "absl-py",
)
SITE_VARIABLE = "REC_ANCHORS_SITE"


def site_dir() -> Optional[Path]:
    """``$REC_ANCHORS_SITE`` when it names a folder."""
    base = os.environ.get(SITE_VARIABLE)
    return Path(base) if base and Path(base).is_dir() else None


def install(target: Path) -> None:
    """``pip install --no-deps --target target`` of :data:`PACKAGES` (never into the
    environment itself; no torch among them)."""
    target.mkdir(parents=True, exist_ok=True)
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--disable-pip-version-check", "--no-deps",
                    "--target", str(target), *PACKAGES], check=True)


def _add_site() -> None:
    site = site_dir()
    if site is not None and str(site) not in sys.path:
        sys.path.append(str(site))


def load_recommenders() -> Tuple[Optional[ModuleType], str]:
    """``(recommenders.evaluation.python_evaluation, "")``, or ``(None, why not)``."""
    _add_site()
    if importlib.util.find_spec("recommenders") is None:
        return None, f"recommenders is not installed (pip install --no-deps --target DIR; {SITE_VARIABLE}=DIR)"
    try:
        module = importlib.import_module("recommenders.evaluation.python_evaluation")
    except ImportError as error:
        return None, f"recommenders does not import ({error}); see tests/anchors/recommenders/rec_env.py"
    import pandas

    if int(pandas.__version__.split(".")[0]) >= 3:
        return None, (f"Recommenders 1.2.1 needs pandas < 3 (pandas {pandas.__version__} is loaded): run "
                      "tests/anchors/suites/run_recommenders.py, whose process loads the folder's pandas 2")
    return module, ""


def load_recbole() -> Tuple[Optional[ModuleType], str]:
    """``(recbole.evaluator.metrics, "")``, or ``(None, why not)``."""
    _add_site()
    if importlib.util.find_spec("recbole") is None:
        return None, f"recbole is not installed (pip install --no-deps --target DIR; {SITE_VARIABLE}=DIR)"
    import numpy

    if not hasattr(numpy, "float"):
        numpy.float = float  # the alias NumPy < 1.24 had; RecBole's MRR, MAP, NDCG use it
    try:
        return importlib.import_module("recbole.evaluator.metrics"), ""
    except ImportError as error:
        return None, f"recbole.evaluator.metrics does not import ({error}); see tests/anchors/recommenders/rec_env.py"
