"""The longest chain of module imports inside retrieval_core (issue 28: "today 16 levels").

Reads the sources without importing them: every module's top-level and function-level
imports of other retrieval_core modules (``from .x import y`` counts as an import of
``x.y`` when that is a module, else of ``x``; a package's ``__init__`` is the package's
name). The depth of a module is the number of modules on the longest chain that starts
at it (a module importing nothing of retrieval_core has depth 1).

    python tools/import_depth.py [ROOT]     # ROOT: the retrieval_core folder (default: core/retrieval_core)

prints the depth and one longest chain, overall and below the public package
(``retrieval_core/__init__``: what ``import retrieval_core`` loads, the applications
cli/, reporting/, compat/ and trec/ set aside).
"""
from __future__ import annotations

import ast
import functools
import sys
from pathlib import Path
from typing import Dict, List, Optional, Set

PACKAGE = "retrieval_core"


def modules(root: Path) -> Dict[str, Path]:
    """Dotted name below retrieval_core -> file (``__init__`` for the package itself)."""
    found = {}
    for path in sorted(root.rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__" and len(parts) > 1:
            parts.pop()
        found[".".join(parts)] = path
    return found


def edges(root: Path) -> Dict[str, Set[str]]:
    """Module -> the retrieval_core modules it imports."""
    mods = modules(root)

    def existing(dotted: str) -> str:
        while dotted and dotted not in mods:
            dotted = dotted.rpartition(".")[0]
        return dotted or "__init__"

    graph: Dict[str, Set[str]] = {}
    for name, path in mods.items():
        package = list(path.relative_to(root).parts[:-1])
        targets: Set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name == PACKAGE:
                        targets.add("__init__")
                    elif alias.name.startswith(PACKAGE + "."):
                        targets.add(existing(alias.name[len(PACKAGE) + 1:]))
            elif isinstance(node, ast.ImportFrom):
                if node.level == 0:
                    if node.module == PACKAGE:
                        base = ""
                    elif node.module and node.module.startswith(PACKAGE + "."):
                        base = node.module[len(PACKAGE) + 1:]
                    else:
                        continue
                else:
                    up = package[:len(package) - (node.level - 1)]
                    base = ".".join(up + ([node.module] if node.module else []))
                for alias in node.names:
                    sub = f"{base}.{alias.name}" if base else alias.name
                    targets.add(sub if sub in mods else existing(base) if base else "__init__")
        targets.discard(name)
        graph[name] = targets
    return graph


def longest_chain(graph: Dict[str, Set[str]], start: Optional[str] = None) -> List[str]:
    """One longest chain of imports (from ``start``, or from any module); the graph has no
    cycle (tests/test_architecture.py)."""
    @functools.lru_cache(maxsize=None)
    def chain(name: str) -> tuple:
        below = [chain(t) for t in sorted(graph[name])]
        return (name,) + max(below, key=len, default=())

    return list(chain(start)) if start else list(max((chain(n) for n in sorted(graph)), key=len))


if __name__ == "__main__":
    root = Path(sys.argv[1] if len(sys.argv) > 1 else "core/retrieval_core")
    graph = edges(root)
    for label, start in (("any module", None), ("retrieval_core/__init__", "__init__")):
        path = longest_chain(graph, start)
        print(f"from {label}: {len(path)} modules: " + " -> ".join(path))
