"""The reference tables in docs/ are generated from the code (tools/generate_docs.py): a stale page fails here."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import BaseModel, Field

from tools.generate_docs import (
    REGENERATE_COMMAND,
    GenerationError,
    Section,
    configuration_table,
    replace_between_markers,
    stale_pages,
)


def test_every_generated_page_matches_the_code_it_is_generated_from() -> None:
    # When every generated table is rendered from the current code
    stale = stale_pages()
    # Then each page already holds it
    assert not stale, f"{', '.join(stale)} out of date with the code: regenerate with {REGENERATE_COMMAND}"


def test_only_the_text_between_the_markers_is_replaced() -> None:
    # Given a page with hand-written text around a generated table
    page = "intro\n<!-- table:start -->\nold row\n<!-- table:end -->\noutro\n"
    # When the table is regenerated
    updated = replace_between_markers(page, "table", "new row\n", "page.md")
    # Then the text around it is untouched
    assert updated == "intro\n<!-- table:start -->\nnew row\n<!-- table:end -->\noutro\n"


def test_a_page_without_its_markers_is_an_error_naming_page_and_marker() -> None:
    with pytest.raises(GenerationError, match=r"docs/x\.md: needs exactly one '<!-- table:start -->'"):
        replace_between_markers("no markers here\n", "table", "row", "docs/x.md")


def test_a_stale_page_is_reported_and_a_fresh_one_is_not(tmp_path: Path) -> None:
    # Given one page holding the current table and one holding an old one
    (tmp_path / "fresh.md").write_text("<!-- t:start -->\n| a |\n<!-- t:end -->\n")
    (tmp_path / "stale.md").write_text("<!-- t:start -->\n| old |\n<!-- t:end -->\n")
    sections = [Section(page, "t", lambda: "| a |") for page in ("fresh.md", "stale.md")]
    # Then only the old one is stale
    assert stale_pages(sections, tmp_path) == ["stale.md"]


class _Config(BaseModel):
    documented: int = Field(ge=1, le=5, description="a documented key")
    undocumented: int


def test_a_config_field_without_a_description_stops_generation_naming_it() -> None:
    context = {"pipeline": {"documented": 2, "undocumented": 3}, "environments": {}}
    with pytest.raises(GenerationError, match=r"_Config\.undocumented has no description"):
        configuration_table(_Config, context)


def test_config_rows_carry_the_cdk_json_default_the_prod_value_and_the_bounds() -> None:
    class Documented(BaseModel):
        documented: int = Field(ge=1, le=5, description="a documented key")

    table = configuration_table(Documented, {"pipeline": {"documented": 2}, "environments": {"prod": {"documented": 4}}})
    assert table.splitlines()[-1] == "| `documented` | `2` | `4` | 1-5 | a documented key |"
