"""The installed distribution's version: one source, pyproject.toml."""
from importlib import metadata as _metadata

__all__ = ["__version__"]

try:
    __version__ = _metadata.version("retrieval-metrics")
except _metadata.PackageNotFoundError:  # a source tree on sys.path that was never installed
    __version__ = "0+unknown"
