"""The last value of a summary in each of many runs, side by side: a diagnostic sweep's table.

    python tools/finals.py --runs results/trxl/issue85/diagnostics/* --out results/trxl/issue85/diagnostics

Writes <out>.json and <out>.md: per run folder its name, its last update that wrote the tag, and the value there
(default episode/reward_mean_last100, the reference baseline's reward_mean).
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent  # the repository root
sys.path.insert(0, str(ROOT))  # its modules, and the other tools as tools.<name>

from plumbing import script  # noqa: E402
from tools import life  # noqa: E402

life.begin(__name__)  # the imports below take seconds

from plumbing.errors import ConfigError  # noqa: E402
from stats import TAG, read_scalars  # noqa: E402


def final(folder: Path, tag: str) -> dict:
    by_update = read_scalars(folder, {tag: "value"})
    if not by_update:
        raise ConfigError(f"{folder}: no '{tag}' summaries found")
    last = max(by_update)
    return {"run": folder.name, "update": last, tag: by_update[last]["value"]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", nargs="+", required=True, help="one summaries folder per run")
    parser.add_argument("--tag", default=TAG)
    parser.add_argument("--out", required=True, help="writes OUT.json and OUT.md")
    args = parser.parse_args(argv)
    out = life.prefixed(args.out)

    def start() -> list[dict]:
        life.check_out("--out", out)
        return [final(Path(folder), args.tag) for folder in sorted(args.runs)]
    return script.life(start, lambda rows: write(args, out, rows))


def write(args, out: list[Path], rows: list[dict]) -> int:
    command = f"python tools/finals.py --runs <the folders below> --tag {args.tag} --out {args.out}"
    lines = [f"# Last `{args.tag}` of each run", "", f"Command: `{command}`", "",
             f"| run | last update | {args.tag} |", "|---|---:|---:|"]
    lines += [f"| {r['run']} | {r['update']} | {r[args.tag]:.3f} |" for r in rows]
    life.write_out({out[0]: json.dumps({"command": command, "runs": rows}, indent=1) + "\n",
                    out[1]: "\n".join(lines) + "\n"})
    return 0


if __name__ == "__main__":
    script.run(main)
