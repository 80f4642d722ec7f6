"""The training code's packages import one another one way only: no cycle between their modules, whether the import
sits at the top of a module, inside a function or under TYPE_CHECKING (ast reads them all), and the generic
package (sagemaker_distributed) imports nothing of the ranker that uses it."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

TRAINING_CODE = Path(__file__).resolve().parents[2] / "training_code"
PACKAGES = ("ranker", "sagemaker_distributed")


def module_name(path: Path, root: Path) -> str:
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_names(source: Path, root: Path) -> set[str]:
    """Every dotted name `source` imports anywhere in its text, `from a.b import c` giving both `a.b` and `a.b.c`
    (c may be a module or a name in one); relative imports resolved against `source`'s package."""
    package = module_name(source, root).rsplit(".", 1)[0] if source.name != "__init__.py" else module_name(source, root)
    found: set[str] = set()
    for node in ast.walk(ast.parse(source.read_text())):
        if isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[:len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([base] if base else [])])
            found.add(base)
            found |= {f"{base}.{alias.name}" for alias in node.names}
        elif isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
    return found


def import_graph(root: Path, packages: tuple[str, ...] = PACKAGES) -> dict[str, set[str]]:
    """Module -> the package modules it imports (a package's `__init__` counts as the package's module)."""
    sources = [path for package in packages for path in (root / package).rglob("*.py")]
    modules = {module_name(path, root): path for path in sources}
    return {name: (imported_names(path, root) & modules.keys()) - {name} for name, path in modules.items()}


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle as a path `[a, b, ..., a]`, or None (depth-first search, three colours)."""
    state: dict[str, str] = {}
    stack: list[str] = []

    def visit(module: str) -> list[str] | None:
        state[module] = "open"
        stack.append(module)
        for imported in sorted(graph[module]):
            if state.get(imported) == "open":
                return stack[stack.index(imported):] + [imported]
            if imported not in state and (cycle := visit(imported)):
                return cycle
        state[module] = "done"
        stack.pop()
        return None

    for module in sorted(graph):
        if module not in state and (cycle := visit(module)):
            return cycle
    return None


def test_the_cycle_finder_finds_a_cycle_and_passes_a_tree():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b", "c"}, "b": {"c"}, "c": set()}) is None


def test_the_import_graph_reads_nested_imports_inside_functions_too(tmp_path):
    package = tmp_path / "ranker" / "data"
    package.mkdir(parents=True)
    (tmp_path / "ranker" / "__init__.py").write_text("")
    (package / "__init__.py").write_text("")
    (package / "one.py").write_text("from ranker.data import two\n")
    (package / "two.py").write_text("def late():\n    from .one import thing\n")
    graph = import_graph(tmp_path, ("ranker",))
    assert graph["ranker.data.one"] == {"ranker.data", "ranker.data.two"}
    assert graph["ranker.data.two"] == {"ranker.data.one"}
    assert find_cycle(graph) is not None


def test_the_training_code_has_no_import_cycle():
    cycle = find_cycle(import_graph(TRAINING_CODE))
    if cycle is not None:
        pytest.fail(f"import cycle in training_code: {' -> '.join(cycle)}; move what both need into a module of its "
                    "own that imports neither")


def test_the_generic_package_imports_nothing_of_the_ranker():
    graph = import_graph(TRAINING_CODE)
    leaks = {module: sorted(imported for imported in imports if imported.split(".")[0] == "ranker")
             for module, imports in graph.items() if module.startswith("sagemaker_distributed")}
    assert {module: found for module, found in leaks.items() if found} == {}
