"""Every GPU table in docs/benchmarks.md names the model it measured, and that model is still what the code calls by
that name (benchmarks.harness.models): a table measured on a model that no longer ships fails here until it is measured
again or removed."""

from __future__ import annotations

import re

import pytest

from benchmarks.harness.models import MODELS, describe
from benchmarks.harness.report import BENCHMARKS_DOC

SECTION = re.compile(r"<!-- (?P<name>[\w-]+):start -->(?P<body>.*?)<!-- (?P=name):end -->", re.DOTALL)
GPU_MACHINE = re.compile(r"^- Machine: .*(GPU|H100|H200|A100|NVIDIA)", re.MULTILINE)


def gpu_sections() -> dict[str, str]:
    return {match["name"]: match["body"] for match in SECTION.finditer(BENCHMARKS_DOC.read_text())
            if GPU_MACHINE.search(match["body"])}


def named_models(body: str) -> list[str]:
    """The model descriptions of a section's `- Models:` line (benchmarks.harness.models.model_line)."""
    line = re.search(r"^- Models: (.+)$", body, re.MULTILINE)
    return re.split(r"; (?=" + "|".join(map(re.escape, MODELS)) + r")", line[1]) if line else []


def test_the_doc_has_gpu_tables_to_check():
    assert gpu_sections(), "docs/benchmarks.md lost its GPU sections, or their Machine lines no longer name a GPU"


@pytest.mark.parametrize("section", sorted(gpu_sections()))
def test_each_gpu_table_names_a_model_that_still_ships_under_that_name(section):
    body = gpu_sections()[section]
    described = named_models(body)
    assert described, f"{section}: no '- Models:' line naming what it measured (benchmarks.harness.models.model_line)"
    current = {describe(name) for name in MODELS}
    stale = [description for description in described if description not in current]
    assert not stale, (f"{section} measured {stale}, which is not a model the code ships under that name any more "
                       f"({sorted(current)}): run its benchmark again, or remove the section")
