"""What users install: the wheel and the sdist hold every module of the three import
packages, and (under ``make test``) the suite runs against the installed wheel.

``make test`` builds ``dist/`` (the wheel from the sdist), installs the wheel and runs
this suite from a copy of tests/ with the sources left behind; tools/wheel_tests.py
tells the tests so through ``RETRIEVAL_METRICS_TEST_WHEEL`` / ``_SOURCE`` / ``_DIST``.
Run from a checkout (``make test-dev``), the artifacts are built here into a temporary
folder instead, and the installed-copy test is skipped: the editable install is the
copy that runs there, by design.
"""
from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
import sysconfig
import tarfile
import zipfile
from importlib import metadata
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parents[1]
PACKAGES = {"retrieval_core": Path("core") / "retrieval_core", "ignite_retrieval": Path("ignite_retrieval"),
            "lightning_retrieval": Path("lightning_retrieval")}
WHEEL = os.environ.get("RETRIEVAL_METRICS_TEST_WHEEL")


def _source_root() -> Path:
    root = Path(os.environ.get("RETRIEVAL_METRICS_SOURCE", HERE))
    if not (root / "core" / "retrieval_core" / "__init__.py").exists():
        pytest.fail(f"no source tree at {root}: set RETRIEVAL_METRICS_SOURCE to the checkout")
    return root


def _shipped_files(root: Path) -> set:
    """Every module (and py.typed marker) of the three packages, as paths inside the wheel."""
    files = set()
    for name, folder in PACKAGES.items():
        for path in (root / folder).rglob("*"):
            if path.suffix == ".py" or path.name == "py.typed":
                if "__pycache__" not in path.parts:
                    files.add(f"{name}/{path.relative_to(root / folder).as_posix()}")
    return files


@pytest.fixture(scope="module")
def artifacts(tmp_path_factory):
    """``(wheel, sdist)``: those ``make test`` built, or built here from the checkout."""
    dist = os.environ.get("RETRIEVAL_METRICS_DIST")
    if not dist:
        dist = tmp_path_factory.mktemp("dist")
        proc = subprocess.run([sys.executable, "-m", "build", "--no-isolation", "--outdir", str(dist),
                               str(_source_root())], capture_output=True, text=True, timeout=600)
        assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    wheels, sdists = sorted(Path(dist).glob("*.whl")), sorted(Path(dist).glob("*.tar.gz"))
    assert len(wheels) == 1 and len(sdists) == 1, (wheels, sdists)
    return wheels[0], sdists[0]


def test_the_source_tree_has_the_packages_the_wheel_must_hold():
    files = _shipped_files(_source_root())
    assert {"retrieval_core/__init__.py", "retrieval_core/set_metrics/__init__.py", "retrieval_core/py.typed",
            "ignite_retrieval/py.typed", "lightning_retrieval/py.typed"} <= files


def test_wheel_holds_every_module(artifacts):
    wheel, _ = artifacts
    names = set(zipfile.ZipFile(wheel).namelist())
    missing = _shipped_files(_source_root()) - names
    assert not missing, f"{wheel.name} lacks {sorted(missing)}"


def test_sdist_holds_every_module(artifacts):
    _, sdist = artifacts
    with tarfile.open(sdist) as tar:
        top = tar.getnames()[0].split("/")[0]
        names = {n[len(top) + 1:] for n in tar.getnames()}
    expected = {str(PACKAGES[f.split("/")[0]].parent / f) if PACKAGES[f.split("/")[0]].parent != Path(".") else f
                for f in _shipped_files(_source_root())}
    missing = expected - names
    assert not missing, f"{sdist.name} lacks {sorted(missing)}"
    assert {"pyproject.toml", "README.md"} <= names


def test_metadata_matches_pyproject(artifacts):
    wheel, _ = artifacts
    with zipfile.ZipFile(wheel) as z:
        meta = next(z.read(n).decode() for n in z.namelist() if n.endswith(".dist-info/METADATA"))
    assert "Requires-Python: >=3.10" in meta  # torch 2.13.0 is built for CPython 3.10-3.14
    assert "Provides-Extra: test" in meta and "Requires-Dist: torch" in meta


@pytest.mark.skipif(not WHEEL, reason="run from a checkout: the editable install is the copy under test "
                                      "(`make test` runs this against the installed wheel)")
def test_the_suite_runs_against_the_installed_wheel():
    """Every package was imported from this interpreter's site-packages, installed from the
    wheel ``make test`` built (pip's direct_url.json), and never from the source tree."""
    site = Path(sysconfig.get_paths()["purelib"]).resolve()
    source = Path(os.environ["RETRIEVAL_METRICS_SOURCE"]).resolve()
    for name, folder in PACKAGES.items():
        where = Path(importlib.import_module(name).__file__).resolve()
        assert site in where.parents, f"{name} was imported from {where}, not from {site}"
        assert (source / folder).resolve() not in where.parents, f"{name} was imported from the source tree: {where}"
    dist = metadata.distribution("retrieval-metrics")
    direct = json.loads(dist.read_text("direct_url.json") or "{}")
    assert direct.get("url", "").endswith(Path(WHEEL).name), direct
    assert not direct.get("dir_info", {}).get("editable", False), direct
    import retrieval_core
    assert retrieval_core.__version__ == dist.version != "0+unknown"


@pytest.mark.skipif(not WHEEL, reason="run from a checkout: `make test` runs the installed console script")
def test_the_installed_command_runs_outside_the_repository(tmp_path):
    """What a user types after ``pip install``: the console script of the wheel, from a
    folder that is not the checkout."""
    script = Path(sys.executable).parent / "retrieval-metrics"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    version = subprocess.run([str(script), "--version"], cwd=tmp_path, capture_output=True, text=True, env=env,
                             timeout=120)
    assert version.returncode == 0 and version.stdout.strip() == f"retrieval-metrics {metadata.version('retrieval-metrics')}"
    demo = subprocess.run([str(script), "demo", "--metrics", "cmc@1", "map@r"], cwd=tmp_path, capture_output=True,
                          text=True, env=env, timeout=600)
    assert demo.returncode == 0, demo.stderr[-2000:]
    assert "raw pixels (64-d)" in demo.stdout and "cmc@1" in demo.stdout
