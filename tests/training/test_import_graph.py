"""The training package's modules import one another one way only: no cycle, whether the import sits at the top of a
module, inside a function or under TYPE_CHECKING (ast reads them all)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "training_code" / "ranker"


def imported_modules(source: Path, modules: set[str]) -> set[str]:
    """The package's modules that `source` imports anywhere in its text."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(source.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module == "ranker":
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("ranker."):
            found.add(node.module.split(".")[1])
        elif isinstance(node, ast.Import):
            found |= {alias.name.split(".")[1] for alias in node.names if alias.name.startswith("ranker.")}
    return found & modules


def import_graph(package: Path) -> dict[str, set[str]]:
    modules = {path.stem for path in package.glob("*.py")}
    return {path.stem: imported_modules(path, modules) - {path.stem} for path in package.glob("*.py")}


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


def test_the_import_graph_reads_imports_inside_functions_too(tmp_path):
    (tmp_path / "one.py").write_text("from ranker import two\n")
    (tmp_path / "two.py").write_text("def late():\n    from ranker.one import thing\n")
    assert import_graph(tmp_path) == {"one": {"two"}, "two": {"one"}}


def test_the_training_package_has_no_import_cycle():
    cycle = find_cycle(import_graph(PACKAGE))
    if cycle is not None:
        pytest.fail(f"import cycle in training_code/ranker: {' -> '.join(cycle)}; move what both need into a module "
                    "of its own that imports neither")
