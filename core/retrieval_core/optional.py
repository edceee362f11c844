"""Optional dependencies, imported here and nowhere else.

Each is imported only when a feature that needs it is used; when it is missing
the error says which feature needs what and how to install it, always as
``<feature> needs <module>: pip install '<the extra of this project that brings it>'``
(``pip install <package>`` for a package no extra brings).

Example:
    >>> require("math", feature="an example", package="nothing").sqrt(4.0)
    2.0
    >>> require("no_such_module_xyz", feature="backend='xyz'", package="xyz-cpu")
    Traceback (most recent call last):
    ...
    ImportError: backend='xyz' needs no_such_module_xyz: pip install xyz-cpu
    >>> require("no_such_module_xyz", feature="plot()", package="matplotlib")
    Traceback (most recent call last):
    ...
    ImportError: plot() needs no_such_module_xyz: pip install 'retrieval-metrics[plot]'
"""
from __future__ import annotations

import importlib
import os
import sys
from types import ModuleType
from typing import Optional

# the extra of pyproject.toml that installs each optional package (named in the errors)
EXTRAS = {"matplotlib": "plot", "faiss-cpu": "faiss", "tqdm": "cli", "numpy": "cli", "scikit-learn": "demo",
          "pandas": "frames", "pyarrow": "frames"}

__all__ = ["EXTRAS", "install_hint", "require", "faiss", "tqdm", "progress_bar", "pyplot", "figure", "pandas",
           "pyarrow"]


def install_hint(package: str) -> str:
    """How to install ``package``: through this project's extra that brings it, if any.

    Example:
        >>> install_hint("matplotlib"), install_hint("xyz")
        ("pip install 'retrieval-metrics[plot]'", 'pip install xyz')
    """
    extra = EXTRAS.get(package)
    return f"pip install 'retrieval-metrics[{extra}]'" if extra else f"pip install {package}"


def require(module: str, *, feature: str, package: str) -> ModuleType:
    """Import ``module`` for ``feature``, or raise ImportError saying how to install ``package``."""
    try:
        return importlib.import_module(module)
    except ImportError as err:  # missing, or installed but broken (the cause is chained)
        top = module.split(".")[0]
        raise ImportError(f"{feature} needs {top}: {install_hint(package)}") from err


def numpy(path: str) -> ModuleType:
    """numpy, for reading the array file ``path`` (.npy/.npz)."""
    try:
        return importlib.import_module("numpy")
    except ImportError:
        raise ImportError(f"reading {path} needs numpy: {install_hint('numpy')}") from None


def faiss() -> ModuleType:
    """The faiss module, for ``backend='faiss'``."""
    return require("faiss", feature="backend='faiss'", package="faiss-cpu")


def pandas(feature: str) -> ModuleType:
    """pandas, for ``feature`` (qrels and runs as DataFrames)."""
    return require("pandas", feature=feature, package="pandas")


def pyarrow(module: str, feature: str) -> ModuleType:
    """The pyarrow module ``module`` (``"pyarrow.csv"``...), for ``feature`` (reading or writing a table file)."""
    return require(module, feature=feature, package="pyarrow")


def tqdm():
    """tqdm's auto progress bar class, for ``progress=True``."""
    return require("tqdm.auto", feature="progress=True", package="tqdm").tqdm


def progress_bar(progress: Optional[bool]):
    """The tqdm class to show progress with, or None for no progress.

    ``progress``: True (tqdm required), False, or None (auto): shown when stderr is a
    terminal, the ``CI`` environment variable is unset and tqdm is installed.

    Example:
        >>> progress_bar(False) is None
        True
    """
    if progress is None:
        stream = sys.stderr
        interactive = stream is not None and hasattr(stream, "isatty") and stream.isatty()
        if not interactive or os.environ.get("CI"):
            return None
        try:
            return tqdm()
        except ImportError:
            return None
    return tqdm() if progress else None


def pyplot(feature: str) -> ModuleType:
    """matplotlib.pyplot, for ``feature`` (e.g. ``"plot()"``)."""
    return require("matplotlib.pyplot", feature=feature, package="matplotlib")


def figure(feature: str, **kwargs):
    """A new ``matplotlib.figure.Figure`` on its own Agg canvas (no pyplot state), for ``feature``."""
    mpl_figure = require("matplotlib.figure", feature=feature, package="matplotlib")
    agg = require("matplotlib.backends.backend_agg", feature=feature, package="matplotlib")
    fig = mpl_figure.Figure(**kwargs)
    agg.FigureCanvasAgg(fig)
    return fig
