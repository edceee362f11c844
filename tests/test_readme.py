"""The README's Python snippets run as written and print what their comments show.

A ``print(...)`` line whose comment starts with the expected output (``...`` matches
anything, as in doctest; an explanation may follow after " — ") is checked against
the line the snippet printed. Each snippet runs in a fresh interpreter.

Each snippet runs where the package is installed with the extra the README names
before it ("Needs the `ignite` extra"; none named: the core alone, torch): the
packages that only the other extras bring are blocked in its interpreter, so a
snippet that needs more than its extra fails here as it would in a user's
virtualenv (issue 26, item 11).
"""
from __future__ import annotations

import doctest
import re
import subprocess
import sys
from importlib import metadata
from pathlib import Path
from typing import Dict, List, Optional, Set

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

README = Path(__file__).resolve().parents[1] / "README.md"
TEXT = README.read_text(encoding="utf-8")
BLOCKS = re.findall(r"```python\n(.*?)```", TEXT, flags=re.S)
PROJECT = "retrieval-metrics"


def _extras_named() -> List[Optional[str]]:
    """The extra each snippet needs: "Needs the `NAME` extra" between the previous block and it."""
    out, end = [], 0
    for match in re.finditer(r"```python\n.*?```", TEXT, flags=re.S):
        named = re.findall(r"Needs\s+the\s+`([\w-]+)`\s+extra", TEXT[end:match.start()])
        out.append(named[-1] if named else None)
        end = match.end()
    return out


EXTRAS = _extras_named()


def _closure(extras: Set[str]) -> Set[str]:
    """The distributions installed with this project and ``extras``, and all they require."""
    seen: Set[str] = set()
    todo = [(PROJECT, frozenset(extras))]
    while todo:
        name, wanted = todo.pop()
        try:
            requires = metadata.requires(name) or []
        except metadata.PackageNotFoundError:
            continue
        for text in requires:
            req = Requirement(text)
            envs = [{"extra": e} for e in wanted] or [{"extra": ""}]
            if req.marker is not None and not any(req.marker.evaluate(env) for env in envs):
                continue
            dist = canonicalize_name(req.name)
            if dist == PROJECT:
                todo.append((PROJECT, frozenset(req.extras)))
            elif dist not in seen:
                seen.add(dist)
                todo.append((dist, frozenset(req.extras)))
    return seen


def _blocked(extra: Optional[str]):
    """The distributions that other extras bring and ``extra`` does not, and their top-level modules."""
    every = _closure(set(metadata.metadata(PROJECT).get_all("Provides-Extra") or []))
    dists = every - _closure({extra} if extra else set())
    owners: Dict[str, Set[str]] = {}
    for module, names in metadata.packages_distributions().items():
        owners.setdefault(module, set()).update(canonicalize_name(d) for d in names)
    modules = sorted(m for m, names in owners.items() if names <= dists and m.isidentifier())
    return sorted(dists), modules


def _blocked_modules(extra: Optional[str]) -> List[str]:
    return _blocked(extra)[1]


PRELUDE = """import sys, importlib.metadata as md, re
sys.modules.update(dict.fromkeys({modules!r}))  # `import X` fails as where X is not installed
_dists, _discover = set({dists!r}), md.Distribution.discover
def _installed(*args, **kwargs):  # and its metadata is gone too (libraries check it before importing)
    return (d for d in _discover(*args, **kwargs)
            if re.sub(r"[-_.]+", "-", (d.metadata["Name"] or "")).lower() not in _dists)
md.Distribution.discover = staticmethod(_installed)
"""


def _guarded(code: str, extra: Optional[str]) -> str:
    """The snippet, after a prelude that makes the blocked packages look uninstalled."""
    dists, modules = _blocked(extra)
    return PRELUDE.format(modules=modules, dists=dists) + code


def test_readme_names_existing_extras():
    known = set(metadata.metadata(PROJECT).get_all("Provides-Extra") or [])
    assert {e for e in EXTRAS if e} <= known
    assert len(EXTRAS) == len(BLOCKS)


def test_an_extra_blocks_what_it_does_not_bring():
    assert "ignite" in _blocked_modules(None) and "ignite" not in _blocked_modules("ignite")
    assert "numpy" in _blocked_modules(None) and "numpy" not in _blocked_modules("cli")
    assert "torch" not in _blocked_modules(None)


def _expected_prints(code: str) -> list:
    out = []
    for line in code.splitlines():
        if line.lstrip().startswith("print(") and "  # " in line:
            out.append(line.split("  # ", 1)[1].strip().split(" — ")[0])
    return out


def test_readme_has_snippets():
    assert len(BLOCKS) >= 4


@pytest.mark.parametrize("code, extra", list(zip(BLOCKS, EXTRAS)),
                         ids=[f"snippet{i}-{e or 'core'}" for i, e in enumerate(EXTRAS)])
def test_readme_snippet(code, extra, tmp_path):
    proc = subprocess.run([sys.executable, "-c", _guarded(code, extra)], capture_output=True, text=True,
                          cwd=tmp_path, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    printed = [line for line in proc.stdout.splitlines() if line.strip()]
    expected = _expected_prints(code)
    assert len(printed) == len(expected), (printed, expected)
    checker = doctest.OutputChecker()
    for want, got in zip(expected, printed):
        assert checker.check_output(want + "\n", got + "\n", doctest.ELLIPSIS), f"printed {got!r}, README shows {want!r}"


def test_examples_demo_runs():
    """examples/demo.py, whose run hint the README's layout points to, runs and prints its table."""
    demo = README.parent / "examples" / "demo.py"
    proc = subprocess.run([sys.executable, str(demo)], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "ndcg@10" in proc.stdout and "users with no relevant item are skipped" in proc.stdout


def test_install_commands_never_ask_a_registry_for_this_package():
    """The package is on no registry: every `pip install` of it in a shell block of the
    README installs from the clone or a built wheel (issue 26, item 11)."""
    lines = [line.split("#")[0] for block in re.findall(r"```bash\n(.*?)```", TEXT, flags=re.S)
             for line in block.splitlines()]
    commands = [line for line in lines if "pip install" in line]
    ours = [c for c in commands if "torch==" not in c and not re.search(r"pip install (-q )?build\b", c)]
    assert ours, commands
    for command in ours:
        target = command.split("pip install", 1)[1].split()[-1].strip("'\"")
        assert target.startswith((".", "dist/")), command
    assert "not on PyPI" in TEXT


def test_lightning_snippet_says_why_sync_dist_does_not_apply():
    """Lightning prints a `sync_dist=True` hint for every key a DDP run logs from
    `compute()`; the README says why it does not apply and how to hide it (item 17)."""
    lightning = next(i for i, code in enumerate(BLOCKS) if "import lightning" in code)
    assert "log_dict(self.val_metrics.compute())" in BLOCKS[lightning]
    after = TEXT.split(BLOCKS[lightning], 1)[1].split("```python", 1)[0]
    assert "sync_dist=True" in after and "already gathered" in after
    hint = "It is recommended to use `self.log('map@r', ..., sync_dist=True)` when logging on epoch level"
    pattern = re.search(r'message="([^"]+)"', after).group(1)
    assert re.match(pattern, hint)  # the filter shown matches Lightning's hint (lightning 2.x wording)
