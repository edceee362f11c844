"""The layer contract of retrieval_core (``retrieval_core.layers``) holds over the import
graph: every module is listed, imports point down (or within a layer), no import cycle, the
chains of imports under the package stay short, no import inside a function (optional
dependencies go through ``optional``), no module only re-exports (a package's ``__init__``
may), no private name is imported from another package, the adapters import only the
public face and the accumulator, and every module is small and says what it owns. The
tests tree mirrors the packages (unit tests by package, anchors' cross-checks by library,
adapters, distributed; see "the tests tree" below)."""
from __future__ import annotations

import ast
import importlib.util
from pathlib import Path
from typing import Dict, Iterator, List, Set, Tuple

import pytest

# found and read without importing retrieval_core: a broken layering may break its import
ROOT = Path(importlib.util.find_spec("retrieval_core").origin).resolve().parent
_spec = importlib.util.spec_from_file_location("_retrieval_core_layers", ROOT / "layers.py")
_layers = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_layers)
LAYERS, layer_of = _layers.LAYERS, _layers.layer_of
PACKAGE = "retrieval_core"
# a function's body (docstring left out) reads in one screen
MAX_FUNCTION_LINES = 60
RANK = {name: i for i, (name, _) in enumerate(LAYERS)}


def _name(path: Path) -> str:
    """Dotted name below retrieval_core (``search.frames``; ``__init__`` for the package,
    ``search`` for a sub-package's __init__)."""
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__" and len(parts) > 1:
        parts.pop()
    return ".".join(parts)


MODULES: Dict[str, Path] = {_name(p): p for p in sorted(ROOT.rglob("*.py"))}
TREES: Dict[str, ast.Module] = {name: ast.parse(p.read_text(encoding="utf-8")) for name, p in MODULES.items()}


def _package_of(name: str) -> List[str]:
    """The package a module's relative imports start from, as parts below retrieval_core."""
    path = MODULES[name]
    parts = list(path.relative_to(ROOT).parts[:-1])
    return parts


def _targets(name: str, node: ast.AST) -> Iterator[str]:
    """The retrieval_core modules an import statement loads (by name below retrieval_core)."""
    if isinstance(node, ast.Import):
        for alias in node.names:
            if alias.name == PACKAGE:
                yield "__init__"
            elif alias.name.startswith(PACKAGE + "."):
                yield _existing(alias.name[len(PACKAGE) + 1:])
        return
    assert isinstance(node, ast.ImportFrom)
    if node.level == 0:
        if node.module == PACKAGE:
            base = ""
        elif node.module and node.module.startswith(PACKAGE + "."):
            base = node.module[len(PACKAGE) + 1:]
        else:
            return
    else:
        package = _package_of(name)
        up = package[:len(package) - (node.level - 1)] if node.level > 1 else package
        base = ".".join(up + ([node.module] if node.module else []))
    for alias in node.names:  # ``from pkg import sub``: the submodule when there is one
        sub = f"{base}.{alias.name}" if base else alias.name
        yield sub if sub in MODULES else _existing(base) if base else "__init__"


def _existing(dotted: str) -> str:
    while dotted and dotted not in MODULES:
        dotted = dotted.rpartition(".")[0]
    return dotted or "__init__"


def _imports(name: str) -> Iterator[Tuple[ast.AST, bool]]:
    """Every import statement of a module, with whether it sits inside a function."""
    def walk(node: ast.AST, inside: bool):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.Import, ast.ImportFrom)):
                yield child, inside
            yield from walk(child, inside or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)))

    yield from walk(TREES[name], False)


EDGES: Dict[str, Set[str]] = {
    name: {t for node, _ in _imports(name) for t in _targets(name, node) if t != name} for name in MODULES
}


def test_the_walk_finds_the_modules_and_their_imports():
    assert {"__init__", "search.frames", "distributed.collectives", "metrics.keys", "distributed",
            "cli"} <= set(MODULES)
    assert "ranking.ranking" in EDGES["metrics.kernels"]
    assert "distributed.collectives" in EDGES["evaluation.accumulator.state"]


@pytest.mark.parametrize("name", sorted(MODULES))
def test_every_module_is_in_a_layer(name):
    assert layer_of(name) is not None, f"retrieval_core.{name} is in no layer: list it in retrieval_core/layers.py"


@pytest.mark.parametrize("name", sorted(MODULES))
def test_imports_point_down(name):
    mine = RANK[layer_of(name)]
    upward = sorted(t for t in EDGES[name] if RANK[layer_of(t)] > mine)
    assert not upward, (f"retrieval_core.{name} ({layer_of(name)}) imports a higher layer: "
                        + ", ".join(f"{t} ({layer_of(t)})" for t in upward))


def test_no_import_cycle():
    # Tarjan's strongly connected components over the module graph
    index: Dict[str, int] = {}
    low: Dict[str, int] = {}
    stack: List[str] = []
    on_stack: Set[str] = set()
    cycles: List[List[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(EDGES[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for v in sorted(EDGES):
        if v not in index:
            visit(v)
    assert not cycles, f"import cycles: {cycles}"


# the longest chain of imports that ``import retrieval_core`` loads (16 modules before issue 28;
# ``python tools/import_depth.py`` prints it): modules import the submodule that defines a name
MAX_IMPORT_CHAIN = 10


def test_the_import_chains_of_the_package_stay_short():
    chains: Dict[str, Tuple[str, ...]] = {}

    def chain(name: str) -> Tuple[str, ...]:  # the graph has no cycle (test_no_import_cycle)
        if name not in chains:
            chains[name] = (name,) + max((chain(t) for t in sorted(EDGES[name])), key=len, default=())
        return chains[name]

    longest = chain("__init__")
    assert len(longest) <= MAX_IMPORT_CHAIN, f"{len(longest)} modules: " + " -> ".join(longest)


@pytest.mark.parametrize("name", sorted(MODULES))
def test_no_import_inside_a_function(name):
    if name == "optional":
        return
    inside = [ast.unparse(node) for node, in_function in _imports(name) if in_function]
    assert not inside, f"retrieval_core.{name} imports inside a function (use retrieval_core.optional): {inside}"


def _only_re_exports(tree: ast.Module) -> bool:
    """Whether a module's body is only imports (and its docstring and ``__all__``)."""
    code = [n for n in tree.body
            if not isinstance(n, (ast.Import, ast.ImportFrom))
            and not (isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant))
            and not (isinstance(n, ast.Assign) and [getattr(t, "id", None) for t in n.targets] == ["__all__"])]
    return not code and any(isinstance(n, (ast.Import, ast.ImportFrom)) for n in tree.body)


@pytest.mark.parametrize("name", sorted(MODULES))
def test_no_module_only_re_exports(name):
    # a package's __init__ is its face and may re-export its modules' names; any other
    # module holds code (an old path kept as re-exports is a second name for one thing)
    if MODULES[name].name == "__init__.py":
        return
    assert not _only_re_exports(TREES[name]), (f"retrieval_core.{name} only re-exports: import the real module "
                                               "(or the name from retrieval_core) instead")


def _package(name: str) -> str:
    """The package a module belongs to: its first part below retrieval_core ("" for the
    modules at the top: ``__init__``, ``sizing``, ``optional``...)."""
    return name.split(".")[0] if name.split(".")[0] in PACKAGES else ""


PACKAGES = {name.split(".")[0] for name, path in MODULES.items() if path.name == "__init__.py" and name != "__init__"}

# Private names imported from another package that are left to pay: each is a debt of
# issue 28's next steps (remove an entry once its import is gone; the test says when).
PRIVATE_DEBTS: set = set()


def _private_imports(name: str) -> Iterator[str]:
    """``module.name`` for each private name (or private module) that module ``name``
    imports from another package of retrieval_core."""
    for node, _ in _imports(name):
        if not isinstance(node, ast.ImportFrom):
            continue
        for alias in node.names:
            base = _existing_base(name, node)
            if base is None:
                continue
            full = f"{base}.{alias.name}" if base else alias.name
            private = [p for p in full.split(".") if p.startswith("_") and not p.startswith("__")]
            if private and _package(full if full in MODULES else base) != _package(name):
                yield full


def _existing_base(name: str, node: ast.ImportFrom):
    """The dotted module an ImportFrom reads from, below retrieval_core (None: outside)."""
    if node.level == 0:
        if node.module == PACKAGE:
            return ""
        if node.module and node.module.startswith(PACKAGE + "."):
            return node.module[len(PACKAGE) + 1:]
        return None
    package = _package_of(name)
    up = package[:len(package) - (node.level - 1)] if node.level > 1 else package
    return ".".join(up + ([node.module] if node.module else []))


def test_no_private_name_is_imported_across_packages():
    found = {(name, full) for name in MODULES for full in _private_imports(name)}
    new = sorted(found - PRIVATE_DEBTS)
    assert not new, ("private names imported from another package (give them a public name where they "
                     f"belong): {new}")
    paid = sorted(PRIVATE_DEBTS - found)
    assert not paid, f"these debts are paid: remove them from PRIVATE_DEBTS: {paid}"


@pytest.mark.parametrize("adapter", ["ignite_retrieval", "lightning_retrieval"])
def test_the_adapters_import_no_private_name_of_the_core(adapter):
    folder = Path(importlib.util.find_spec(adapter).origin).resolve().parent
    private = []
    for path in sorted(folder.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").startswith(PACKAGE):
                parts = node.module.split(".") + [alias.name for alias in node.names]
                private += [f"{path.name}: {ast.unparse(node)}" for p in parts if p.startswith("_")
                            and not p.startswith("__")][:1]
    assert not private, private


# What an adapter may import of the core: the public face and the accumulator's module (each
# name in that module's __all__); and the plots of the reporting application (drawn by the
# torchmetrics adapters' plot(), above the public face, so not one of its names).
ADAPTER_IMPORTS = {"": "__init__", "evaluation.accumulator": "evaluation.accumulator", "reporting.plot": None}


def _all_of(name: str) -> Set[str]:
    """The names listed in ``__all__`` of module ``name`` (read from its source)."""
    for node in TREES[name].body:
        if isinstance(node, ast.Assign) and [getattr(t, "id", None) for t in node.targets] == ["__all__"]:
            return set(ast.literal_eval(node.value))
    return set()


def _adapter_imports(adapter: str) -> Iterator[Tuple[str, str, List[str]]]:
    """``(file, module below retrieval_core, names)`` of each import of the core in an adapter package."""
    folder = Path(importlib.util.find_spec(adapter).origin).resolve().parent
    for path in sorted(folder.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name == PACKAGE or alias.name.startswith(PACKAGE + "."):
                        yield path.name, alias.name[len(PACKAGE) + 1:], []
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and (
                    node.module == PACKAGE or (node.module or "").startswith(PACKAGE + ".")):
                yield path.name, node.module[len(PACKAGE) + 1:], [alias.name for alias in node.names]


@pytest.mark.parametrize("adapter", ["ignite_retrieval", "lightning_retrieval"])
def test_the_adapters_import_only_the_public_face_and_the_accumulator(adapter):
    found = list(_adapter_imports(adapter))
    assert found, f"{adapter} imports nothing of {PACKAGE}: is the walk broken?"
    wrong = [f"{file}: {PACKAGE}.{module}".rstrip(".") for file, module, _ in found if module not in ADAPTER_IMPORTS]
    assert not wrong, f"adapters import only {PACKAGE}, {PACKAGE}.evaluation.accumulator (and plots): {wrong}"
    unlisted = [f"{file}: {name} from {PACKAGE}.{module}".rstrip(".") for file, module, names in found
                if ADAPTER_IMPORTS[module] for name in names if name not in _all_of(ADAPTER_IMPORTS[module])]
    assert not unlisted, f"names outside the module's __all__: {unlisted}"


def _body_lines(node: ast.AST) -> int:
    """Lines of a function's body, its docstring left out."""
    body = node.body
    if len(body) > 1 and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
            and isinstance(body[0].value.value, str):
        body = body[1:]
    return node.end_lineno - body[0].lineno + 1


def _function_lengths(tree: ast.AST) -> Iterator[Tuple[str, int]]:
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield node.name, _body_lines(node)


@pytest.mark.parametrize("name", sorted(MODULES))
def test_modules_say_what_they_own_and_functions_read_in_one_screen(name):
    """A module is named for what it holds (its docstring says it); a function's body fits one
    screen (``MAX_FUNCTION_LINES``), with no exception."""
    assert ast.get_docstring(TREES[name]), f"retrieval_core.{name} has no module docstring"
    for function, lines in _function_lengths(TREES[name]):
        assert lines <= MAX_FUNCTION_LINES, (f"retrieval_core.{name}:{function} has a {lines}-line body "
                                             f"(at most {MAX_FUNCTION_LINES}): split it")


def test_a_long_function_is_seen():
    # the length counts the body's lines, its docstring left out (nested functions too)
    tree = ast.parse('def f():\n    """doc\n    doc"""\n' + "    x = 1\n" * 60 + "    def g():\n        pass\n")
    assert dict(_function_lengths(tree)) == {"f": 62, "g": 1}


def test_a_violation_is_caught(tmp_path):
    # the checks above are not vacuous: an upward import, a function-level one, a private
    # name from another package (not one from its own) and a module of imports only are seen
    tree = ast.parse("from ..cli import main\nfrom ..stats.results import _x\nfrom .dense import _y\n\n"
                     "def f():\n    from . import plot\n")
    TREES["ranking.fake"], MODULES["ranking.fake"] = tree, ROOT / "ranking" / "fake.py"
    try:
        targets = {t for node, _ in _imports("ranking.fake") for t in _targets("ranking.fake", node)}
        assert targets == {"cli", "stats.results", "ranking.dense", "ranking"}
        assert RANK[layer_of("cli")] > RANK[layer_of("ranking.fake")]
        assert [in_function for _, in_function in _imports("ranking.fake")] == [False, False, False, True]
        assert list(_private_imports("ranking.fake")) == ["stats.results._x"]
        assert not _only_re_exports(tree)
        assert _only_re_exports(ast.parse('"""doc"""\nfrom .dense import rank_dense\n__all__ = ["rank_dense"]\n'))
    finally:
        del TREES["ranking.fake"], MODULES["ranking.fake"]


# -- the tests tree mirrors the packages ------------------------------------------------------
# tests/unit/<package>/ the unit tests of one package of retrieval_core (a sub-folder: its
#   sub-package); tests/unit/test_<module>*.py those of a module at the top (sizing, optional...)
# tests/anchors/<library>/ the cross-checks against one anchor; tests/anchors/suites/ the
#   anchors' own test suites run against our drop-ins; tests/anchors/test_*.py compare several
# tests/adapters/<framework>/ the tests of <framework>_retrieval
# tests/distributed/ the multi-process tests (gloo, the shared harness)
# tests/test_*.py the project's own checks (packaging, docs, README, architecture...) and
#   the tests of the shared test helpers (conftest.py, devices.py)
TESTS = Path(__file__).resolve().parent
TEST_FOLDERS = {"unit", "anchors", "adapters", "distributed"}
ANCHORS = {  # folder -> the library its tests compare with
    "torchmetrics": "torchmetrics", "ignite": "pytorch-ignite", "sklearn": "scikit-learn", "ranx": "ranx",
    "trec_eval": "trec_eval (its outputs, pytrec_eval)", "pml": "pytorch-metric-learning",
    "oml": "open-metric-learning", "torch_geometric": "torch-geometric (its LinkPred* metrics)",
    "ir_measures": "ir_measures (its providers: pytrec_eval, cwl_eval, gdeval...)",
    "recommenders": "Microsoft Recommenders (its python_evaluation; rec_env.py loads it and RecBole)",
    "recbole": "RecBole (its evaluator: Collector and metrics)",
    "suites": "the anchors' own test suites, run against our drop-ins"}
CROSS_ANCHOR_TESTS = {"test_empty_queries.py"}
PROJECT_TESTS = {"test_architecture.py", "test_bench_distributed.py", "test_bench_gpu.py", "test_devices.py",
                 "test_docs_runs.py", "test_doctests.py", "test_fixtures.py", "test_make_test.py",
                 "test_packaging.py", "test_python_env.py", "test_readme.py"}
TEST_HELPERS = {"__init__.py", "conftest.py", "devices.py", "references.py"}
SKIPPED_FOLDERS = {"__pycache__", "data", "shims"}  # test data, the anchor suites' stand-ins


def _kept(folder: Path, root: Path) -> bool:
    return not any(part in SKIPPED_FOLDERS or part.startswith(".") for part in folder.relative_to(root).parts)


def _folders(folder: Path) -> List[Path]:
    """The folders in ``folder`` (not below), test data and hidden ones left out."""
    return sorted(p for p in folder.iterdir() if p.is_dir() and _kept(p, folder)) if folder.is_dir() else []


def _all_folders(root: Path) -> List[Path]:
    """Every folder below ``root``, test data and hidden ones left out."""
    return sorted(p for p in root.rglob("*") if p.is_dir() and _kept(p, root)) if root.is_dir() else []


def _layout_problems(tests: Path, modules: Dict[str, Path], adapters: Set[str]) -> List[str]:
    """What in the tests tree ``tests`` does not mirror the packages (``modules``: the dotted names
    below retrieval_core of its modules; ``adapters``: the frameworks with an adapter package)."""
    packages = {name for name, path in modules.items() if path.name == "__init__.py" and name != "__init__"}
    top_modules = {name for name, path in modules.items() if "." not in name and path.name != "__init__.py"}
    problems = [f"tests/{d.name}/: not one of {sorted(TEST_FOLDERS)}" for d in _folders(tests)
                if d.name not in TEST_FOLDERS]
    problems += [f"tests/{name}/: missing" for name in sorted(TEST_FOLDERS) if not (tests / name).is_dir()]
    problems += [f"tests/{f.name}: a test file at the top that is not a project-level test (move it into the tree "
                 "or list it in PROJECT_TESTS)" for f in sorted(tests.glob("*.py"))
                 if f.name not in PROJECT_TESTS | TEST_HELPERS]
    unit = tests / "unit"
    for folder in _all_folders(unit):
        dotted = ".".join(folder.relative_to(unit).parts)
        if dotted not in packages:
            problems.append(f"tests/unit/{dotted.replace('.', '/')}/: retrieval_core has no package {dotted}")
    problems += [f"tests/unit/{f.name}: names no module at the top of retrieval_core ({sorted(top_modules)})"
                 for f in sorted(unit.glob("test_*.py"))
                 if not any(f.stem == f"test_{m}" or f.stem.startswith(f"test_{m}_") for m in top_modules)]
    problems += [f"tests/anchors/{d.name}/: not an anchor of ANCHORS" for d in _folders(tests / "anchors")
                 if d.name not in ANCHORS]
    problems += [f"tests/anchors/{f.name}: not a cross-anchor test of CROSS_ANCHOR_TESTS"
                 for f in sorted((tests / "anchors").glob("test_*.py")) if f.name not in CROSS_ANCHOR_TESTS]
    problems += [f"tests/adapters/{d.name}/: no adapter {d.name}_retrieval" for d in _folders(tests / "adapters")
                 if d.name not in adapters]
    for folder in _all_folders(tests):
        if list(folder.glob("*.py")) and not (folder / "__init__.py").exists():
            problems.append(f"tests/{folder.relative_to(tests)}/: no __init__.py (test modules of one name in two "
                            "folders would collide)")
    return problems


ADAPTERS = {name for name in ("ignite", "lightning") if importlib.util.find_spec(f"{name}_retrieval")}


def test_the_tests_tree_mirrors_the_packages():
    assert not _layout_problems(TESTS, MODULES, ADAPTERS), "\n".join(_layout_problems(TESTS, MODULES, ADAPTERS))
    assert {d.name for d in _folders(TESTS / "unit")} <= PACKAGES and (TESTS / "unit" / "metrics").is_dir()


def test_a_misplaced_test_is_caught(tmp_path):
    # the rule is not vacuous: a folder outside the four, a test file at the top, a unit folder
    # naming no package, a unit file naming no top module, an unknown anchor and adapter, and a
    # folder without __init__.py are each reported
    for folder in ("core", "unit/metrics", "unit/kernels", "anchors/pml", "anchors/faiss", "adapters/keras",
                   "distributed"):
        (tmp_path / folder).mkdir(parents=True)
        for package in (tmp_path / folder, (tmp_path / folder).parent):
            (package / "__init__.py").write_text("")
    for name in ("test_toys.py", "unit/test_sizing_sync_free.py", "unit/test_shapes.py", "unit/metrics/test_x.py",
                 "anchors/test_ranx_only.py", "distributed/nested/test_y.py"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("")
    problems = _layout_problems(tmp_path, MODULES, {"ignite"})
    expected = ["tests/core/", "tests/test_toys.py", "tests/unit/kernels/", "tests/unit/test_shapes.py",
                "tests/anchors/faiss/", "tests/anchors/test_ranx_only.py", "tests/adapters/keras/",
                "tests/distributed/nested/"]
    assert [p.split(":")[0] for p in problems] == expected, problems


# -- the inputs layer: each input form's check sequence in one place --------------------------

# check -> the modules that may call it: the embedding sequence lives in inputs.embeddings,
# the score sequences (dense, flat, R given, an accumulator's batch) in inputs.scores, the
# ranked lists' in inputs.ranked (an adapter's embedding batch is checked per update by the
# accumulator, the values once, at compute; the flat drop-ins' entries by accumulator.flat)
SCORE_OWNERS = {"inputs.scores", "inputs.ranked", "inputs.topk", "inputs.sampled"}
CHECK_OWNERS = {
    "check_score_options": SCORE_OWNERS,
    "check_per_query_keys": SCORE_OWNERS,
    "check_tie_keys": {"inputs.scores"},
    "check_scores": {"inputs.scores", "evaluation.accumulator.flat"},
    "check_score_batch": {"inputs.scores", "evaluation.accumulator.scores"},  # score_batch_values(checked=False)
    "as_categories": SCORE_OWNERS,
    "as_tensors": SCORE_OWNERS | {"evaluation.accumulator.embeddings"},
    "check_embedding_values": {"inputs.embeddings"},
    "check_embeddings": {"inputs.embeddings", "evaluation.accumulator.embeddings"},
    "check_labels": {"inputs.embeddings", "evaluation.accumulator.embeddings"},
    "check_query_gallery": {"inputs.embeddings"},
    "check_pairs": {"inputs.embeddings"},
    "check_embedding_options": {"inputs.embeddings", "evaluation.accumulator.embeddings"},
    "check_topk": {"inputs.topk"},
    "check_item_data": {"inputs.topk"},
    "check_topk_keys": {"inputs.topk"},
    "check_user_items": {"inputs.pairs"},
    "check_truth_mode": {"inputs.embeddings"},
}


def _calls(tree: ast.AST) -> Set[str]:
    return {node.func.id if isinstance(node.func, ast.Name) else node.func.attr
            for node in ast.walk(tree) if isinstance(node, ast.Call)
            and isinstance(node.func, (ast.Name, ast.Attribute))}


def test_each_check_sequence_is_written_once():
    """The embedding and score checks are called from the inputs layer (``inputs.embeddings``,
    ``inputs.scores``, ``inputs.ranked``), not written again by an entry point (the
    one-process, the distributed and the adapters')."""
    for check, owners in CHECK_OWNERS.items():
        callers = {name for name, tree in TREES.items() if check in _calls(tree) and not name.startswith("validate")}
        assert callers <= owners, (check, sorted(callers - owners))
