"""What the speed scripts that time the working tree's files against a git ref's, in one process, share:
their command line (--against, --config, --repeats) and the ref's files imported beside ours."""
from __future__ import annotations

import argparse
import importlib.util
import sys
from pathlib import Path

from tools.benchmark import UsageError, git, resolve_ref

ROOT = Path(__file__).resolve().parent.parent.parent  # the repository root


def parse(doc: str, files: str) -> tuple[argparse.Namespace, str]:
    """The command line -> (its arguments, the full commit --against names); an unknown ref ends the
    script with its one line and exit code 2. files: which of the ref's files are the old side."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--against", required=True, help=f"a git ref whose {files} the old side")
    parser.add_argument("--config", action="append", required=True)
    parser.add_argument("--repeats", type=int, default=15)
    args = parser.parse_args()
    try:
        return args, resolve_ref(ROOT, args.against)
    except UsageError as error:
        print(error, file=sys.stderr)
        raise SystemExit(2) from None


def module_at(name: str, commit: str, folder: Path):
    """<name>.py as it was at `commit`, imported under the name <name>_at_ref (it imports the working
    tree's other modules, so it must use their interfaces)."""
    path = folder / f"{name}_at_ref.py"
    path.write_text(git(ROOT, "show", f"{commit}:{name}.py") + "\n")
    spec = importlib.util.spec_from_file_location(f"{name}_at_ref", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
