"""What every speed measurement writes: results/speed/<name>.json (all it measured) and .md (its table)."""
from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent  # the repository root


def command() -> str:
    """The command line that ran this measurement, as one types it in the repository root."""
    script = Path(sys.argv[0]).resolve()
    return shlex.join(["python", str(script.relative_to(ROOT) if script.is_relative_to(ROOT) else script),
                       *sys.argv[1:]])


def table(header: list[str], align: str, rows: list[list[str]]) -> list[str]:
    """A markdown table: one cell per column in each row, `align` one letter per column (l text, r numbers)."""
    rule = "|" + "".join("---:|" if a == "r" else "---|" for a in align)
    return ["| " + " | ".join(header) + " |", rule, *("| " + " | ".join(row) + " |" for row in rows)]


def write(name: str, report: dict, lines: list[str]) -> None:
    """results/speed/<name>.json (the report) and .md (the lines); prints the markdown."""
    out = ROOT / "results/speed" / name
    out.with_suffix(".json").write_text(json.dumps(report, indent=1) + "\n")
    out.with_suffix(".md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    print(f"wrote {out.relative_to(ROOT)}.md and .json")
