"""Writes the reference tables in docs/ from the code they describe: `make docs` (or `python -m tools.generate_docs`).

Each table sits between `<!-- name:start -->` and `<!-- name:end -->` in its page; the prose around it is written by
hand. `--check` writes nothing and exits 1 naming the stale pages (tests/unit/test_generated_docs.py runs it).

- docs/configuration.md: `stacks.config.PipelineConfig`'s fields (their `description=`), defaults from cdk.json.
- docs/trigger.md: the manual payload's fields (`training_trigger.events.MANUAL_FIELDS`) and the manifest's
  (`training_trigger.overrides.OVERRIDE_FIELDS`), described by the docstrings under the dataclass fields.
- docs/trigger.md also: the variables `sagemaker_distributed` reads for users
  (`sagemaker_distributed.job_environment.PACKAGE_SETTINGS`), which the trigger accepts in a job's environment.
- docs/tuning.md: the `tuning` section's fields (`training_trigger.tuning.SECTION_FIELDS`), described by the
  docstrings under `TuningSection`'s fields.
- docs/training.md: the training scripts' flags, from the parser behind `python train_ddp.py --help`.
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import inspect
import json
import re
import sys
import typing
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from annotated_types import Ge, Le, MinLen
from pydantic import BaseModel

PROJECT_ROOT = Path(__file__).resolve().parents[1]
# The trigger and the training code are deployment roots: their packages import as their runtimes import them.
for _root in (PROJECT_ROOT, PROJECT_ROOT / "lambda" / "trigger", PROJECT_ROOT / "training_code"):
    if str(_root) not in sys.path:
        sys.path.append(str(_root))

REGENERATE_COMMAND = "make docs  (or: .venv/bin/python -m tools.generate_docs)"
# The cdk.json context key of a config field, where the two differ.
CONTEXT_KEYS = {"env_name": "env"}


@dataclass(frozen=True)
class Section:
    """One generated table: its page, its marker name and how to render it."""

    page: str
    name: str
    render: Callable[[], str]


class GenerationError(Exception):
    """What stops generation, naming the page, marker or source field and the fix."""


def replace_between_markers(text: str, name: str, body: str, page: str) -> str:
    """`text` with the lines between `<!-- name:start -->` and `<!-- name:end -->` replaced by `body`."""
    start, end = f"<!-- {name}:start -->", f"<!-- {name}:end -->"
    if text.count(start) != 1 or text.count(end) != 1 or text.index(start) > text.index(end):
        raise GenerationError(f"{page}: needs exactly one '{start}' followed by one '{end}' line around the "
                              f"generated {name} table; add them where the table belongs")
    head, rest = text.split(start, 1)
    tail = rest.split(end, 1)[1]
    return f"{head}{start}\n{body.rstrip()}\n{end}{tail}"


def markdown_table(header: Iterable[str], rows: Iterable[Iterable[str]]) -> str:
    header = list(header)
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(cell.replace("|", "\\|").replace("\n", " ") for cell in row) + " |" for row in rows]
    return "\n".join(lines)


def code(value: Any) -> str:
    return f"`{json.dumps(value)}`"


# --- docs/configuration.md -------------------------------------------------------------------------------------

def allowed_values(field: Any) -> str:
    """What a pydantic field accepts beyond its type: choices, bounds, length."""
    choices = typing.get_args(field.annotation) if typing.get_origin(field.annotation) is typing.Literal else ()
    if choices:
        return ", ".join(f"`{choice}`" for choice in choices)
    bounds = {type(item): item for item in field.metadata}
    if Ge in bounds and Le in bounds:
        return f"{bounds[Ge].ge}-{bounds[Le].le}"
    if Ge in bounds:
        return f">= {bounds[Ge].ge}"
    if MinLen in bounds:
        return f"at least {bounds[MinLen].min_length}"
    return ""


def configuration_table(model: type[BaseModel], context: Mapping[str, Any]) -> str:
    """One row per config field: cdk.json's default, the prod environment's value, what is allowed, the meaning."""
    defaults, prod = context["pipeline"], context["environments"].get("prod", {})
    rows = []
    for name, field in model.model_fields.items():
        if not field.description:
            raise GenerationError(f"stacks/config.py: {model.__name__}.{name} has no description: add "
                                  f"Field(description=...) saying what it sets")
        key = CONTEXT_KEYS.get(name, name)
        default = context.get(key) if key in CONTEXT_KEYS.values() else defaults.get(key)
        rows.append([f"`{key}`", code(default), code(prod[key]) if key in prod else "", allowed_values(field),
                     field.description])
    return markdown_table(["Key", "Default (`dev`)", "`prod`", "Allowed", "Meaning"], rows)


def render_configuration() -> str:
    from stacks.config import PipelineConfig

    context = json.loads((PROJECT_ROOT / "cdk.json").read_text())["context"]
    return configuration_table(PipelineConfig, context)


# --- docs/trigger.md -------------------------------------------------------------------------------------------

def attribute_docs(cls: type) -> dict[str, str]:
    """The docstring under each field of a class body (the training code's `ranker.config.field_docs` does the same
    inside its own deployment root)."""
    body = ast.parse(inspect.getsource(cls)).body[0].body
    return {node.target.id: " ".join(following.value.value.split())
            for node, following in zip(body, body[1:])
            if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)
            and isinstance(following, ast.Expr) and isinstance(following.value, ast.Constant)
            and isinstance(following.value.value, str)}


def json_type(annotation: str) -> str:
    for marker, name in (("Mapping", "object"), ("TuningSection", "object"), ("ParameterRange", "object"),
                         ("bool", "boolean"), ("int", "integer"), ("str", "string")):
        if marker in annotation:
            return name
    raise GenerationError(f"no JSON type for the annotation {annotation!r}: extend tools/generate_docs.json_type")


def payload_table(names: Iterable[str], classes: Iterable[type]) -> str:
    """Rows for payload field `names`, typed and described by the first dataclass in `classes` that documents it."""
    described = {}
    for cls in reversed(list(classes)):
        annotations = {field.name: str(field.type) for field in dataclasses.fields(cls)}
        described |= {name: (json_type(annotations[name]), doc) for name, doc in attribute_docs(cls).items()}
    rows = []
    for name in names:
        if name not in described:
            raise GenerationError(f"payload field {name!r} has no docstring under its dataclass field "
                                  f"({', '.join(cls.__name__ for cls in classes)}): add one")
        rows.append([f"`{name}`", *described[name]])
    return markdown_table(["Field", "Type", "Meaning"], rows)


def render_manual_payload() -> str:
    from training_trigger.events import MANUAL_FIELDS, TriggerRequest
    from training_trigger.overrides import JobOverrides

    return payload_table(MANUAL_FIELDS, (JobOverrides, TriggerRequest))


def render_manifest_fields() -> str:
    from training_trigger.overrides import OVERRIDE_FIELDS, JobOverrides

    return payload_table(OVERRIDE_FIELDS, (JobOverrides,))


def render_package_settings() -> str:
    from sagemaker_distributed.job_environment import PACKAGE_SETTINGS

    return markdown_table(["Variable", "Meaning"], [[f"`{setting.name}`", setting.meaning]
                                                    for setting in PACKAGE_SETTINGS])


def render_tuning_fields() -> str:
    """The section's keys; `warm_start` is one object holding two fields (`parents`, `type`)."""
    from training_trigger.tuning import SECTION_FIELDS, TuningSection

    docs = attribute_docs(TuningSection)
    annotations = {field.name: str(field.type) for field in dataclasses.fields(TuningSection)}
    fields_of_key = {"warm_start": "warm_start_parents"}
    rows = []
    for key in SECTION_FIELDS:
        name = fields_of_key.get(key, key)
        if name not in docs:
            raise GenerationError(f"tuning field {key!r} has no docstring under TuningSection.{name}: add one")
        kind = "object" if key in fields_of_key else json_type(annotations[name])
        rows.append([f"`{key}`", kind, docs[name]])
    return markdown_table(["Field", "Type", "Meaning"], rows)


# --- docs/training.md ------------------------------------------------------------------------------------------

_DEFAULT_SUFFIX = re.compile(r"^(?P<meaning>.*?)\s*\(default: (?P<default>.*)\)$", re.DOTALL)


def flag_tables(parser: argparse.ArgumentParser) -> str:
    """One table per argument group, as `--help` lists them: flag (and choices), default, meaning."""
    parts = []
    # argparse publishes no iterator over its groups; _action_groups is what its own help formatter walks.
    for group in parser._action_groups:
        actions = [action for action in group._group_actions if action.dest != "help"]
        if not actions:
            continue
        rows = []
        for action in actions:
            help_text = action.help or ""
            parsed = _DEFAULT_SUFFIX.match(help_text)
            meaning, default = (parsed["meaning"], f"`{parsed['default']}`") if parsed else (help_text, "")
            flag = " ".join(f"`{spelling}`" for spelling in action.option_strings[:1])
            if action.choices:
                flag += " (" + ", ".join(f"`{choice}`" for choice in action.choices) + ")"
            rows.append([flag, default, meaning])
        parts.append(f"**{group.title}**\n\n" + markdown_table(["Flag", "Default", "Meaning"], rows))
    return "\n\n".join(parts)


def render_training_flags() -> str:
    from ranker.config import build_parser

    return flag_tables(build_parser())


SECTIONS = (
    Section("docs/configuration.md", "configuration-reference", render_configuration),
    Section("docs/trigger.md", "manual-payload-fields", render_manual_payload),
    Section("docs/trigger.md", "manifest-fields", render_manifest_fields),
    Section("docs/trigger.md", "package-settings", render_package_settings),
    Section("docs/tuning.md", "tuning-fields", render_tuning_fields),
    Section("docs/training.md", "training-flags", render_training_flags),
)


def generated_pages(sections: Iterable[Section] = SECTIONS, root: Path = PROJECT_ROOT) -> dict[str, tuple[str, str]]:
    """Each page's current text and its text with every generated table rendered afresh."""
    pages: dict[str, tuple[str, str]] = {}
    for section in sections:
        current, updated = pages.get(section.page) or ((root / section.page).read_text(),) * 2
        pages[section.page] = (current, replace_between_markers(updated, section.name, section.render(), section.page))
    return pages


def stale_pages(sections: Iterable[Section] = SECTIONS, root: Path = PROJECT_ROOT) -> list[str]:
    return [page for page, (current, updated) in generated_pages(sections, root).items() if current != updated]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 if a generated page is stale")
    args = parser.parse_args(argv)
    try:
        pages = generated_pages()
    except GenerationError as error:
        print(f"generate_docs: {error}", file=sys.stderr)
        return 1
    stale = [page for page, (current, updated) in pages.items() if current != updated]
    if args.check:
        for page in stale:
            print(f"{page} is stale: regenerate it with {REGENERATE_COMMAND}", file=sys.stderr)
        return 1 if stale else 0
    for page in stale:
        (PROJECT_ROOT / page).write_text(pages[page][1])
        print(f"wrote {page}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
