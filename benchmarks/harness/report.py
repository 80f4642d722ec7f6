"""Records a benchmark's result table in docs/benchmarks.md, each benchmark in a section of its own.

Each section sits between `<!-- NAME:start -->` and `<!-- NAME:end -->` markers, so running one benchmark
replaces only its own figures and leaves the others' as they were measured.
"""

from __future__ import annotations

import datetime as dt
import platform
import re
import shlex
import sys
from pathlib import Path

from benchmarks import PROJECT_ROOT

BENCHMARKS_DOC = PROJECT_ROOT / "docs" / "benchmarks.md"
_HEADER = "# Benchmarks\n\nEach section is written by the benchmark it names; rerun the command shown to refresh it.\n"


def markdown_table(headers: list[str], rows: list[list[object]]) -> str:
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows]
    return "\n".join(lines)


def command_line() -> str:
    """The running benchmark's command, as a user types it (`python -m module ...`)."""
    return " ".join(shlex.quote(arg) for arg in ["python", *_invocation()])


def provenance(machine: str | None = None, command: str | None = None, measured: dict | None = None) -> str:
    """Command, machine and date lines that every section starts with; `measured` (from `measured_at()`) holds the
    date and Python of a run rendered later on another machine."""
    command = command or command_line()
    measured = measured or measured_at()
    machine = machine or f"{platform.processor() or platform.machine()}, {platform.system()} {platform.release()}"
    return (f"- Command: `{command}`\n- Machine: {machine}\n- Date: {measured['date']}\n"
            f"- Python {measured['python']}")


def measured_at() -> dict:
    return {"date": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            "python": platform.python_version()}


def _invocation() -> list[str]:
    """How the running benchmark was started, as a user types it (`-m module` rather than a file path)."""
    main_spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    if main_spec is not None:
        return ["-m", main_spec.name, *sys.argv[1:]]
    return list(sys.argv)


def write_section(name: str, title: str, body: str, doc: Path = BENCHMARKS_DOC) -> None:
    start, end = f"<!-- {name}:start -->", f"<!-- {name}:end -->"
    section = f"{start}\n## {title}\n\n{body.strip()}\n{end}"
    text = doc.read_text() if doc.exists() else _HEADER
    pattern = re.compile(re.escape(start) + r".*?" + re.escape(end), re.DOTALL)
    text = pattern.sub(lambda _: section, text) if pattern.search(text) else text.rstrip() + "\n\n" + section + "\n"
    doc.parent.mkdir(parents=True, exist_ok=True)
    doc.write_text(text)
