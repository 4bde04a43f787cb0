"""The program's size as issue 40 counts it: lines per file, and the share of comment and docstring lines.

    python tools/size.py              # this checkout
    python tools/size.py --at accca2c # a commit of this repository, read from git

The program is every .py outside tests/, tools/, results/ and docs/; a comment or docstring line is one that
tokenize finds a comment on, or a string standing as a statement (tests/test_layout.py holds the share with it).
"""
import argparse
import io
import subprocess
import sys
import tokenize
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # its plumbing, and the other tools as tools.<name>

from plumbing import script  # noqa: E402
from plumbing.errors import ConfigError  # noqa: E402
from tools import life  # noqa: E402

life.begin(__name__)

OUTSIDE = ("tests/", "tools/", "results/", "docs/")


def program_files(commit: str | None) -> dict[str, str]:
    """{path: text} of the program's files, in the work tree or at a commit."""
    listed = ["git", "ls-tree", "-r", "--name-only", commit] if commit else ["git", "ls-files"]
    paths = subprocess.run(listed, cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    paths = [p for p in paths if p.endswith(".py") and not p.startswith(OUTSIDE)]
    if not commit:
        return {p: life.read_text(ROOT / p, "a Python file") for p in paths}
    return {p: subprocess.run(["git", "show", f"{commit}:{p}"], cwd=ROOT, capture_output=True, text=True,
                              check=True).stdout for p in paths}


def comment_lines(text: str) -> tuple[set[int], set[int]]:
    """(non-blank line numbers, those holding a comment or a docstring) of a Python file's text."""
    lines = text.splitlines()
    nonblank = {i + 1 for i, line in enumerate(lines) if line.strip()}
    commented, previous = set(), tokenize.INDENT
    for token in tokenize.generate_tokens(io.StringIO(text).readline):
        if token.type == tokenize.COMMENT:
            commented.add(token.start[0])
        elif token.type == tokenize.STRING and previous in (tokenize.INDENT, tokenize.DEDENT, tokenize.NEWLINE):
            commented.update(range(token.start[0], token.end[0] + 1))  # a docstring, or a string statement
        if token.type not in (tokenize.COMMENT, tokenize.NL):
            previous = token.type
    return nonblank, commented & nonblank


def count(text: str) -> tuple[int, int, int]:
    """(lines, non-blank lines, comment and docstring lines)."""
    nonblank, commented = comment_lines(text)
    return len(text.splitlines()), len(nonblank), len(commented)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--at", metavar="COMMIT", help="count the program at this commit instead of the work tree")
    args = parser.parse_args(argv)

    def start() -> dict[str, str]:
        try:
            return program_files(args.at)
        except subprocess.CalledProcessError as error:
            raise ConfigError(f"git could not read {args.at or 'the work tree'}: {' '.join(error.stderr.split())}")
    return script.life(start, table)


def table(files: dict[str, str]) -> int:
    rows = sorted(((p, *count(text)) for p, text in files.items()), key=lambda r: -r[1])
    print("| file | lines | comment and docstring share |\n|---|---:|---:|")
    for path, lines, nonblank, comments in rows:
        print(f"| {path} | {lines:,} | {comments / max(nonblank, 1):.0%} |")
    lines, nonblank, comments = (sum(r[i] for r in rows) for i in (1, 2, 3))
    print(f"| **program** | **{lines:,}** | **{comments / nonblank:.1%}** |")
    return 0


if __name__ == "__main__":
    script.run(main)
