"""The training code's packages import one another one way only: no cycle between their modules, whether the import
sits at the top of a module, inside a function or under TYPE_CHECKING (ast reads them all), and the generic
package (sagemaker_distributed) imports nothing of the ranker that uses it. The graph and the cycle finder are
tools/import_graph.py's (tests/unit/test_import_layers.py tests them)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tools.import_graph import find_cycle, import_graph

TRAINING_CODE = Path(__file__).resolve().parents[2] / "training_code"
PACKAGES = ("ranker", "sagemaker_distributed")


def test_the_training_code_has_no_import_cycle():
    cycle = find_cycle(import_graph(TRAINING_CODE, PACKAGES))
    if cycle is not None:
        pytest.fail(f"import cycle in training_code: {' -> '.join(cycle)}; move what both need into a module of its "
                    "own that imports neither")


def test_the_generic_package_imports_nothing_of_the_ranker():
    graph = import_graph(TRAINING_CODE, PACKAGES)
    leaks = {module: sorted(imported for imported in imports if imported.split(".")[0] == "ranker")
             for module, imports in graph.items() if module.startswith("sagemaker_distributed")}
    assert {module: found for module, found in leaks.items() if found} == {}
