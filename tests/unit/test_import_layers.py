"""local_mode/ and benchmarks/ import one way only: no cycle between their modules, and each sub-package imports only
the sub-packages its docstring's `May import:` line names, which themselves form no cycle (tools/import_graph.py reads
every import, at the top of a module, inside a function or under TYPE_CHECKING). Their fronts stay small."""

from __future__ import annotations

from pathlib import Path

import pytest

from tools.import_graph import PROJECT_ROOT, find_cycle, import_graph, layer_problems, sub_packages

LAYERED_PACKAGES = ("local_mode", "benchmarks")


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


def write_layers(root: Path, declarations: dict[str, str], modules: dict[str, str]) -> None:
    """A package `app` with a front module `app/cli.py`, sub-packages whose docstrings hold `declarations` (name ->
    the docstring's last line) and `modules` (path below app/ -> source)."""
    (root / "app").mkdir()
    (root / "app" / "__init__.py").write_text("")
    (root / "app" / "cli.py").write_text("from app.services import api\n")
    for name, line in declarations.items():
        (root / "app" / name).mkdir()
        (root / "app" / name / "__init__.py").write_text(f'"""The {name} layer.\n\n{line}\n"""\n')
    for path, source in modules.items():
        (root / "app" / path).write_text(source)


LAYERS = {"services": "May import: `app.runtime`.", "runtime": "May import: nothing else of app."}


def test_imports_down_the_declared_layers_pass(tmp_path):
    write_layers(tmp_path, LAYERS, {"services/api.py": "from app.runtime import runner\n",
                                    "runtime/runner.py": "import app\nfrom app.runtime import steps\n",
                                    "runtime/steps.py": ""})
    assert layer_problems(tmp_path, "app") == []


def test_a_layer_importing_one_above_it_or_the_front_is_named(tmp_path):
    write_layers(tmp_path, LAYERS, {"services/api.py": "from app.runtime import runner\n",
                                    "runtime/runner.py": "def late():\n    from app.services import api\n",
                                    "runtime/steps.py": "from app import cli\n"})
    problems = layer_problems(tmp_path, "app")
    assert "app.runtime.runner imports app.services.api: app.runtime may import nothing else of app" in problems
    assert "app.runtime.steps imports the front module app.cli: app.runtime may import nothing else of app" in problems
    assert any(problem.startswith("import cycle in app: ") for problem in problems)


def test_declarations_that_form_a_cycle_are_named(tmp_path):
    write_layers(tmp_path, {"services": "May import: `app.runtime`.", "runtime": "May import: `app.services`."},
                 {"services/api.py": "", "runtime/runner.py": ""})
    assert layer_problems(tmp_path, "app") == [
        "the declarations of app's sub-packages form a cycle: app.runtime -> app.services -> app.runtime"]


@pytest.mark.parametrize(("line", "expected"), [
    ("Imports whatever it needs.", "app/runtime/__init__.py: its docstring needs one line 'May import: `app.NAME`"),
    ("May import: the services.", "app/runtime/__init__.py: 'May import: the services.' names no sub-package"),
    ("May import: `app.storage`.", "app/runtime/__init__.py: 'May import:' names ['app.storage'], which are not"),
])
def test_a_missing_or_wrong_declaration_is_named(tmp_path, line, expected):
    write_layers(tmp_path, {"services": "May import: `app.runtime`.", "runtime": line},
                 {"services/api.py": "", "runtime/runner.py": ""})
    [problem] = layer_problems(tmp_path, "app")
    assert problem.startswith(expected)


@pytest.mark.parametrize("package", LAYERED_PACKAGES)
def test_each_sub_package_imports_only_what_it_declares_and_nothing_imports_in_a_cycle(package):
    problems = layer_problems(PROJECT_ROOT, package)
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("package", LAYERED_PACKAGES)
def test_the_front_keeps_at_most_a_dozen_modules_over_at_least_three_sub_packages(package):
    front = sorted(path.name for path in (PROJECT_ROOT / package).glob("*.py"))
    assert len(front) <= 12, f"{package}/ holds {len(front)} modules at its top: {front}; move one into the " \
                             "sub-package of its concern"
    assert len(sub_packages(PROJECT_ROOT, package)) >= 3
