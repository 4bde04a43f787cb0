"""The mutation pass's report: what mutmut's last run (`make mutation`) left, per file and mutant.

    make mutation                    # mutmut run, then this script
    python tools/mutation.py         # the report of the run in mutants/ again

Reads mutmut's results from mutants/ (pyproject.toml's [tool.mutmut]: buffer.py, losses.py,
distributions.py, normalization.py) and writes results/mutation.md and .json: the mutants of
each file by outcome, then every mutant that survived, with its diff and, when
docs/mutation.md names it as equivalent (a change no test can see, because the program
computes the same thing), the reason given there. Exits 1 when a survivor is neither killed
nor named there: each is a test to add or sharpen.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import sys
from collections import Counter
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent  # the repository root
sys.path.insert(0, str(ROOT))  # the other tools as tools.<name>
EQUIVALENT = ROOT / "docs/mutation.md"

from plumbing import script  # noqa: E402
from tools import life  # noqa: E402

life.begin(__name__)  # before the imports below

from plumbing.errors import ConfigError  # noqa: E402
from tools.benchmark import describe_tree  # noqa: E402


def equivalent_mutants() -> dict[str, str]:
    """Mutant name -> the reason docs/mutation.md gives, from its table rows `| name | reason |`."""
    if not EQUIVALENT.exists():
        return {}
    text = life.read_text(EQUIVALENT, "the table of equivalent mutants")
    rows = re.findall(r"^\| `([\w.]+__mutmut_\d+)` \| (.+?) \|$", text, flags=re.MULTILINE)
    return dict(rows)


def main(argv: list[str] | None = None) -> int:
    argparse.ArgumentParser(description=__doc__.split("\n\n")[0]).parse_args(argv)
    os.chdir(ROOT)  # mutmut reads its configuration and mutants/ from here
    out = life.prefixed(ROOT / "results/mutation")

    def start():
        try:  # the extra, after the arguments: --help needs none of it
            from mutmut.__main__ import SourceFileMutationData, get_diff_for_mutant, walk_mutatable_files
            from mutmut.stats import status_by_exit_code
        except ImportError:
            raise ConfigError("mutmut is not installed: `make mutation` installs it (requirements-mutation.txt)")
        if not Path("mutants").is_dir():
            raise ConfigError("no mutmut results in mutants/: `make mutation` runs mutmut, then this report")
        life.check_out("results/mutation", out)
        return SourceFileMutationData, get_diff_for_mutant, walk_mutatable_files, status_by_exit_code
    return script.life(start, lambda mutmut: report(*mutmut, out))


def report(SourceFileMutationData, get_diff_for_mutant, walk_mutatable_files, status_by_exit_code,
           out: list[Path]) -> int:
    named = equivalent_mutants()
    counts: dict[str, Counter] = {}
    survivors = []
    for path in walk_mutatable_files():
        data = SourceFileMutationData(path=path)
        data.load()
        counts[str(path)] = Counter(status_by_exit_code[code] for code in data.exit_code_by_key.values())
        for name, code in sorted(data.exit_code_by_key.items()):
            if status_by_exit_code[code] in ("survived", "no tests", "timeout", "suspicious"):
                survivors.append({"mutant": name, "status": status_by_exit_code[code],
                                  "equivalent": named.get(name), "diff": get_diff_for_mutant(name, path=path)})
    unexplained = [s for s in survivors if not s["equivalent"]]
    statuses = sorted({k for c in counts.values() for k in c})
    total = sum(counts.values(), Counter())
    lines = ["# Mutation pass", "",
             "`make mutation` (mutmut 3; pyproject.toml's [tool.mutmut] names the files and the tests), "
             f"report of {datetime.now(timezone.utc):%Y-%m-%d} by `python tools/mutation.py`; code: "
             f"{describe_tree(ROOT)['label']}.", "",
             f"{sum(total.values())} mutants; {total['killed']} killed by a test, {len(survivors)} not, of which "
             f"{len(survivors) - len(unexplained)} are named equivalent in [docs/mutation.md](../docs/mutation.md) "
             f"and {len(unexplained)} are neither.", "",
             "| file | " + " | ".join(statuses) + " |", "|---|" + "---:|" * len(statuses)]
    lines += [f"| {path} | " + " | ".join(str(c[s]) for s in statuses) + " |" for path, c in counts.items()]
    lines += ["", "## Not killed", ""]
    for s in survivors:
        why = f"equivalent: {s['equivalent']}" if s["equivalent"] else "**NEITHER KILLED NOR NAMED EQUIVALENT**"
        lines += [f"### `{s['mutant']}` ({s['status']})", "", why, "", "```diff", s["diff"].strip(), "```", ""]
    life.write_out({out[0]: json.dumps({"counts": counts, "survivors": survivors}, indent=1) + "\n",
                    out[1]: "\n".join(lines) + "\n"})
    print(f"{sum(total.values())} mutants, {total['killed']} killed, {len(survivors)} not: "
          f"{len(survivors) - len(unexplained)} named equivalent, {len(unexplained)} neither; "
          f"wrote {out[1].relative_to(ROOT)}")
    return 1 if unexplained else 0


if __name__ == "__main__":
    script.run(main)
