"""Optional dependencies come from retrieval_core.optional, with one message format."""
from __future__ import annotations

import pathlib
import re
import sys

import pytest
import torch

import retrieval_core as rc
from retrieval_core import optional, search

OPTIONAL_MODULES = ("faiss", "tqdm", "matplotlib", "pandas", "pyarrow")


def hide(monkeypatch, *modules):
    """Make ``import <module>`` fail as if it were not installed."""
    for name in modules:
        monkeypatch.setitem(sys.modules, name, None)


def test_faiss_backend_without_faiss(monkeypatch):
    hide(monkeypatch, "faiss")
    with pytest.raises(ImportError, match=r"^backend='faiss' needs faiss: pip install 'retrieval-metrics\[faiss\]'$"):
        search.FaissSearch(torch.randn(5, 3), "cosine")


def test_progress_without_tqdm(monkeypatch):
    hide(monkeypatch, "tqdm", "tqdm.auto")
    x, labels = torch.randn(12, 3), torch.arange(12) % 3
    with pytest.raises(ImportError, match=r"^progress=True needs tqdm: pip install 'retrieval-metrics\[cli\]'$"):
        rc.evaluate_embeddings(x, labels, ["cmc@1"], progress=True)
    assert rc.evaluate_embeddings(x, labels, ["cmc@1"])["cmc@1"].ndim == 0  # no progress, no tqdm needed


def test_pyplot_without_matplotlib(monkeypatch):
    hide(monkeypatch, "matplotlib", "matplotlib.pyplot")
    with pytest.raises(ImportError, match=r"^plot\(\) needs matplotlib: pip install 'retrieval-metrics\[plot\]'$"):
        optional.pyplot("plot()")


def test_require_chains_the_cause_and_returns_the_module(monkeypatch):
    hide(monkeypatch, "faiss")
    with pytest.raises(ImportError) as info:
        optional.faiss()
    assert isinstance(info.value.__cause__, ImportError)
    assert optional.require("json", feature="x", package="y") is sys.modules["json"]


def test_present_modules_are_returned():
    from tqdm.auto import tqdm  # in the test extra

    assert optional.tqdm() is tqdm


def test_no_other_module_imports_an_optional_dependency():
    import ignite_retrieval
    import lightning_retrieval

    pattern = re.compile(rf"^\s*(import|from)\s+({'|'.join(OPTIONAL_MODULES)})\b", re.M)
    files = [p for pkg in (rc, ignite_retrieval, lightning_retrieval) for p in pathlib.Path(pkg.__file__).parent.rglob("*.py")]
    assert len(files) > 20
    offenders = [str(p) for p in files if p.name != "optional.py" and pattern.search(p.read_text())]
    assert offenders == []
    assert pattern.search("    from tqdm.auto import tqdm") and pattern.search("import faiss")  # the pattern works
