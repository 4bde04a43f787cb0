"""The repository keeps its three parts apart: the program (the modules at the root and environments/),
the instruments that measure it (tools/), and what they measured (results/, outputs only)."""
import ast
import io
import re
import subprocess
import sys
from pathlib import Path

import pytest
from tests.hang import HANG_S
from tools import size

ROOT = Path(__file__).resolve().parent.parent
PROGRAM = sorted([*ROOT.glob("*.py"), *ROOT.glob("environments/*.py")])
TOOLS = sorted((ROOT / "tools").rglob("*.py"))
# where the commands a user pastes are written
COMMAND_PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), ROOT / "Makefile",
                 *sorted((ROOT / "results").rglob("run.sh"))]


def test_results_holds_no_code():
    assert not sorted(str(p.relative_to(ROOT)) for p in (ROOT / "results").rglob("*.py"))


def test_the_program_imports_nothing_from_the_tools_and_edits_no_sys_path():
    ours = {p.stem for p in ROOT.glob("*.py")} | {"environments"}
    foreign = {"tools", "results", "tests"} | ({p.stem for p in TOOLS} - ours)  # a tool's name, run from tools/
    wrong = []
    for path in PROGRAM:
        for node in ast.walk(ast.parse(path.read_text())):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else [])
            wrong += [f"{path.name}:{node.lineno} imports {n}" for n in names if n.split(".")[0] in foreign]
            if isinstance(node, ast.Attribute) and node.attr == "path" and getattr(node.value, "id", "") == "sys":
                wrong.append(f"{path.name}:{node.lineno} uses sys.path")
    assert PROGRAM and not wrong, wrong


def test_every_script_a_command_runs_exists():
    """`python X.py`, `$PY X.py` (run.sh) and `$(BIN)/python X.py` (Makefile) name files that are there."""
    named = {(page.relative_to(ROOT), script) for page in COMMAND_PAGES
             for script in re.findall(r"(?:python3?|\$PY|\$\(BIN\)/python)\s+([\w./-]+\.py)\b", page.read_text())}
    assert any(script.startswith("tools/") for _, script in named)
    missing = sorted(f"{page}: {script}" for page, script in named if not (ROOT / script).is_file())
    assert not missing, missing


@pytest.mark.slow
def test_every_tool_starts_from_any_folder(tmp_path):
    """`python tools/<name>.py --help` from outside the repository: its imports (the root's modules, other tools)
    resolve. mutation.py takes no options (it needs mutmut's results)."""
    scripts = [p for p in TOOLS if '__name__ == "__main__"' in p.read_text() and p.name != "mutation.py"]
    assert len(scripts) >= 5
    started = {p: subprocess.Popen([sys.executable, str(p), "--help"], cwd=tmp_path, stdout=subprocess.PIPE,
                                   stderr=subprocess.PIPE, text=True) for p in scripts}
    failed = []
    for path, process in started.items():
        out, err = process.communicate(timeout=HANG_S)
        if process.returncode != 0 or "usage:" not in out:
            failed.append(f"{path.relative_to(ROOT)}: exit {process.returncode}\n{err[-800:]}")
    assert not failed, "\n".join(failed)


def test_no_test_bounds_a_wait_by_a_clock_of_its_own():
    """A test awaits events; the one bound on a hang is tests/hang.py's HANG_S. A literal timeout or a
    deadline read from a clock is a time limit that a busy machine overruns (three sweep tests failed
    so beside two spinning cores, their 120-240 s bounds outrun by a slow Ray start)."""
    clocks = {"time", "monotonic", "perf_counter"}
    wrong = []
    for path in sorted((ROOT / "tests").glob("test_*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.keyword) and node.arg == "timeout" and isinstance(node.value, ast.Constant):
                wrong.append(f"{path.name}:{node.value.lineno} timeout={node.value.value}")
            if isinstance(node, ast.Attribute) and node.attr in clocks and getattr(node.value, "id", "") == "time":
                wrong.append(f"{path.name}:{node.lineno} time.{node.attr}")
    assert not wrong, wrong


def _comment_lines(path: Path) -> tuple[set[int], set[int], dict[int, str]]:
    """(non-blank lines, comment and docstring lines, the text of each such line) of a Python file."""
    text = path.read_text()
    nonblank, commented = size.comment_lines(text)
    lines = text.splitlines()
    return nonblank, commented, {i: lines[i - 1] for i in commented}


def test_the_program_says_why_in_few_words():
    """At most a fifth of the program's non-blank lines are comments or docstrings (issue 40)."""
    counts = [_comment_lines(p)[:2] for p in PROGRAM]
    share = sum(len(c) for _, c in counts) / sum(len(n) for n, _ in counts)
    assert share <= 0.20, f"comments and docstrings are {share:.1%} of the program's lines"


# what a measurement log looks like: a date, a timing, a speed ratio, a commit id, a result file
MEASUREMENT = re.compile(r"\b20\d\d-\d\d-\d\d\b|\b\d+(\.\d+)?\s?(us|µs|ms)\b|\b\d+\.\d+x\b"
                         r"|\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*\d)[0-9a-f]{7,40}\b|results/")


def test_no_measurement_logs_in_the_programs_comments():
    """Timings, ratios, dates, commit ids and result paths belong in docs/ or a commit message; at most five
    lines of the program link to where a measurement lives (docs/results.md, docs/reliability.md)."""
    found = [f"{p.relative_to(ROOT)}:{i}: {line.strip()}" for p in PROGRAM
             for i, line in _comment_lines(p)[2].items() if MEASUREMENT.search(line)]
    assert len(found) <= 5 and all("docs/" in line for line in found), "\n".join(found)


def test_the_program_has_no_import_circle():
    """No module of the program imports, at its top or inside a function, one that imports it back by some way
    (environments/ counted as one module): each can be read, and loaded, after what it builds on. An import under
    `if TYPE_CHECKING:` names types for the reader and never runs."""
    ours = {p.stem for p in ROOT.glob("*.py")} | {"environments"}
    imports = {}
    for path in PROGRAM:
        module = "environments" if path.parent.name == "environments" else path.stem
        tree = ast.parse(path.read_text())
        typing_only = {id(n) for node in ast.walk(tree) if isinstance(node, ast.If)
                       and getattr(node.test, "id", "") == "TYPE_CHECKING" for n in ast.walk(node)}
        for node in (n for n in ast.walk(tree) if id(n) not in typing_only):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else [])
            imports.setdefault(module, set()).update(n.split(".")[0] for n in names if n.split(".")[0] in ours)
        imports[module].discard(module)

    def circle(module: str, path: list[str]) -> list[str] | None:
        if module in path:
            return path[path.index(module):] + [module]
        for imported in sorted(imports.get(module, ())):
            found = circle(imported, path + [module])
            if found:
                return found
        return None
    circles = [" -> ".join(found) for module in sorted(imports) if (found := circle(module, []))]
    assert not circles, circles[0]


def test_every_script_answers_a_closed_or_full_console_by_the_one_rule():
    """Each script a user runs (the root's and examples/) calls cli.console() where it starts: export.py did not,
    and `export.py ... >/dev/full` wrote its file, then ended in a traceback and exit 1 (issue 72)."""
    scripts = [p for p in sorted([*ROOT.glob("*.py"), *ROOT.glob("examples/*.py")])
               if '__name__ == "__main__"' in p.read_text()]
    missing = []
    for path in scripts:
        tree = ast.parse(path.read_text())
        starts = [node for node in tree.body if isinstance(node, ast.If) and "__main__" in ast.unparse(node.test)]
        calls = {ast.unparse(call.func) for node in starts for call in ast.walk(node) if isinstance(call, ast.Call)}
        if not calls & {"console", "cli.console"}:
            missing.append(str(path.relative_to(ROOT)))
    assert len(scripts) >= 7 and not missing, missing
