"""Which module of a package imports which, and whether its sub-packages import one another only as they declare.

    python -m tools.import_graph local_mode benchmarks     # each package's graph, then its cycles and wrong-way imports

A sub-package declares what it may import in its docstring, on a line of its own: `May import:` and the other
sub-packages of its package, each in backticks, or `nothing`. A sub-package may import its own modules, the package's
own `__init__` (which Python runs before any of its modules anyway) and what it declares; nothing else of the package,
so neither the modules at the package's top (its front: the entry points) nor a sub-package it does not name. The
declarations themselves must form no cycle, so that they order the sub-packages in layers. Every import counts,
whether it sits at the top of a module, inside a function or under TYPE_CHECKING (ast reads them all).
tests/unit/test_import_layers.py holds local_mode/ and benchmarks/ to this; tests/training/test_import_graph.py holds
training_code/ free of cycles.
"""

from __future__ import annotations

import argparse
import ast
import re
import sys
from collections.abc import Sequence
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parents[1]
_DECLARATION = re.compile(r"^May import: (.+)$", re.MULTILINE)


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


def import_graph(root: Path, packages: Sequence[str]) -> dict[str, set[str]]:
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
        for imported in sorted(graph.get(module, ())):
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


def sub_packages(root: Path, package: str) -> list[str]:
    """The package's sub-packages, as dotted names (`local_mode.aws`)."""
    return sorted(f"{package}.{folder.name}" for folder in (root / package).iterdir()
                  if (folder / "__init__.py").is_file())


def declared_imports(root: Path, package: str) -> dict[str, set[str]]:
    """Sub-package -> the sub-packages its docstring's `May import:` line names. Raises ValueError naming the
    sub-package whose line is missing, names nothing, or names what is not a sub-package of `package`."""
    known = set(sub_packages(root, package))
    declared = {}
    for sub_package in sorted(known):
        init = root / Path(*sub_package.split(".")) / "__init__.py"
        docstring = ast.get_docstring(ast.parse(init.read_text())) or ""
        lines = _DECLARATION.findall(docstring)
        if len(lines) != 1:
            raise ValueError(f"{init.relative_to(root)}: its docstring needs one line 'May import: `{package}.NAME`, "
                             f"...' (or 'May import: nothing ...') naming the sub-packages it builds on; found "
                             f"{len(lines)}")
        names = set(re.findall(r"`([\w.]+)`", lines[0]))
        if not names and not lines[0].startswith("nothing"):
            raise ValueError(f"{init.relative_to(root)}: 'May import: {lines[0]}' names no sub-package in backticks "
                             "and does not say nothing")
        if unknown := sorted(names - known):
            raise ValueError(f"{init.relative_to(root)}: 'May import:' names {unknown}, which are not sub-packages of "
                             f"{package}; its sub-packages are {sorted(known)}")
        declared[sub_package] = names - {sub_package}
    return declared


def sub_package_of(module: str, sub_packages_: Sequence[str]) -> str | None:
    """The sub-package `module` belongs to; None for the package's own `__init__` and the modules at its top."""
    return next((sub for sub in sub_packages_ if module == sub or module.startswith(f"{sub}.")), None)


def wrong_way_imports(graph: dict[str, set[str]], package: str, declared: dict[str, set[str]]) -> list[str]:
    """One line per import of a sub-package's module that its sub-package does not declare, naming both modules."""
    problems = []
    for module, imports in sorted(graph.items()):
        home = sub_package_of(module, list(declared))
        if home is None:
            continue
        for imported in sorted(imports):
            target = sub_package_of(imported, list(declared))
            if imported == package or target == home or target in declared[home]:
                continue
            what = f"the front module {imported}" if target is None else imported
            allowed = ", ".join(sorted(declared[home])) or "nothing else of " + package
            problems.append(f"{module} imports {what}: {home} may import {allowed}")
    return problems


def layer_problems(root: Path, package: str) -> list[str]:
    """Everything wrong with `package`'s layers: a missing or bad declaration, declarations that form a cycle, an
    import cycle between modules, an import its sub-package does not declare. Empty when all hold."""
    try:
        declared = declared_imports(root, package)
    except ValueError as error:
        return [str(error)]
    problems = []
    if cycle := find_cycle(declared):
        problems.append(f"the declarations of {package}'s sub-packages form a cycle: {' -> '.join(cycle)}")
    graph = import_graph(root, [package])
    if cycle := find_cycle(graph):
        problems.append(f"import cycle in {package}: {' -> '.join(cycle)}")
    return problems + wrong_way_imports(graph, package, declared)


def render(root: Path, package: str) -> str:
    """The package's modules grouped by sub-package, each with what it imports of the package, then its problems."""
    graph = import_graph(root, [package])
    subs = sub_packages(root, package)
    try:
        declared = {sub: ", ".join(sorted(names)) or "nothing" for sub, names in declared_imports(root, package).items()}
    except ValueError:
        declared = {}
    lines = []
    for home in [None, *subs]:
        members = sorted(module for module in graph if sub_package_of(module, subs) == home)
        heading = f"{package} (front)" if home is None else f"{home} (may import: {declared.get(home, '?')})"
        lines.append(heading)
        lines += [f"  {module} -> {', '.join(sorted(graph[module])) or '-'}" for module in members]
    problems = layer_problems(root, package)
    lines += [f"PROBLEM: {problem}" for problem in problems] or [f"{package}: no cycle, every import as declared"]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.import_graph", description=__doc__.split("\n\n")[0])
    parser.add_argument("packages", nargs="+", help="top-level packages of the repository, e.g. local_mode")
    args = parser.parse_args(argv)
    for package in args.packages:
        print(render(PROJECT_ROOT, package), end="\n\n")
    return 1 if any(layer_problems(PROJECT_ROOT, package) for package in args.packages) else 0


if __name__ == "__main__":
    sys.exit(main())
