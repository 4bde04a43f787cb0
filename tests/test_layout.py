"""The repository keeps its three parts apart: the program (the modules at the root, environments/ and plumbing/),
the instruments that measure it (tools/), and what they measured (results/, outputs only)."""
import ast
import io
import re
import subprocess
import sys
import types
from pathlib import Path

import pytest
from tests.hang import HANG_S
from tools import size

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("environments", "plumbing")
PROGRAM = sorted([*ROOT.glob("*.py"), *(p for package in PACKAGES for p in ROOT.glob(f"{package}/*.py"))])
TOOLS = sorted((ROOT / "tools").rglob("*.py"))
# where the commands a user pastes are written
COMMAND_PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), ROOT / "Makefile",
                 *sorted((ROOT / "results").rglob("run.sh"))]


def test_results_holds_no_code():
    assert not sorted(str(p.relative_to(ROOT)) for p in (ROOT / "results").rglob("*.py"))


def test_the_program_imports_nothing_from_the_tools_and_edits_no_sys_path():
    ours = {p.stem for p in ROOT.glob("*.py")} | set(PACKAGES)
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
    resolve."""
    scripts = [p for p in TOOLS if '__name__ == "__main__"' in p.read_text()]
    assert len(scripts) >= 5
    started = {p: subprocess.Popen([sys.executable, str(p), "--help"], cwd=tmp_path, stdout=subprocess.PIPE,
                                   stderr=subprocess.PIPE, text=True) for p in scripts}
    failed = []
    for path, process in started.items():
        out, err = process.communicate(timeout=HANG_S)
        if process.returncode != 0 or "usage:" not in out:
            failed.append(f"{path.relative_to(ROOT)}: exit {process.returncode}\n{err[-800:]}")
    assert not failed, "\n".join(failed)


@pytest.mark.slow
def test_every_tool_refuses_what_it_cannot_read_in_one_line(tmp_path):
    """A missing file, config, run or commit: `error: ...`, one line, exit 2, as the scripts answer (issue 72: a
    tool that stays answers as the scripts do). A value argparse refuses: its usage, then the error, exit 2."""
    commands = {"benchmark.py": ["--config", "no.yaml"], "episode_interval.py": ["no.log"],
                "learning.py": ["--config", "no.yaml"], "plot.py": ["--runs", "no-run", "--out", "p.png"],
                "random_policy.py": ["--config", "no.yaml", "--out", "r"], "size.py": ["--at", "no-commit"],
                "run_summary.py": ["--run", "no-run", "--command", "c", "--out", "s"],
                "core_speed.py": ["--lengths", "0", "--out", "c"]}
    started = {name: subprocess.Popen([sys.executable, str(ROOT / "tools" / name), *args], cwd=tmp_path,
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
               for name, args in commands.items()}
    wrong = []
    for name, process in started.items():
        _, err = process.communicate(timeout=HANG_S)
        lines = err.splitlines() or [""]
        one_line = len(lines) == 1 or name == "core_speed.py"  # argparse's refusal: the usage, then the error
        if process.returncode != 2 or not one_line or "error: " not in lines[-1]:
            wrong.append(f"{name}: exit {process.returncode}\n{err[-800:]}")
    assert not wrong and not list(tmp_path.iterdir()), "\n".join(wrong)


def test_the_mutation_report_needs_its_extra_only_to_run(tmp_path, monkeypatch, capsys):
    """tools/mutation.py --help prints its usage without mutmut (requirements-mutation.txt, not installed by
    default); the report itself is refused in one line, exit 2, without mutmut or without its results."""
    from tools import mutation
    monkeypatch.chdir(tmp_path)  # main() moves to the repository root: back here after the test
    monkeypatch.setitem(sys.modules, "mutmut", None)  # as where the extra is not installed
    with pytest.raises(SystemExit) as shown:
        mutation.main(["--help"])
    assert shown.value.code == 0 and "usage:" in capsys.readouterr().out
    assert mutation.main([]) == 2
    assert capsys.readouterr().err == ("error: mutmut is not installed: `make mutation` installs it "
                                       "(requirements-mutation.txt)\n")
    stub = types.ModuleType("mutmut")  # installed, but mutants/ holds no run
    for name, names in {"mutmut.__main__": ["SourceFileMutationData", "get_diff_for_mutant", "walk_mutatable_files"],
                        "mutmut.stats": ["status_by_exit_code"]}.items():
        module = types.ModuleType(name)
        module.__dict__.update(dict.fromkeys(names))
        monkeypatch.setitem(sys.modules, name, module)
    monkeypatch.setitem(sys.modules, "mutmut", stub)
    monkeypatch.setattr(mutation, "ROOT", tmp_path)
    assert mutation.main([]) == 2
    assert capsys.readouterr().err.startswith("error: no mutmut results in mutants/")


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


def _imports() -> dict[str, set[str]]:
    """Each program module -> the program's modules it imports, wherever the import stands (at the top, inside a
    function, under TYPE_CHECKING). environments/atari.py is the module environments.atari, environments/__init__.py
    is environments (plumbing/ likewise)."""
    names = {path: path.stem if path.parent == ROOT else path.parent.name + ("" if path.stem == "__init__" else
                                                                               f".{path.stem}") for path in PROGRAM}
    ours = set(names.values())
    graph = {}
    for path, module in names.items():
        graph[module] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            targets = ([a.name for a in node.names] if isinstance(node, ast.Import) else
                       [f"{node.module}.{a.name}" for a in node.names] if isinstance(node, ast.ImportFrom)
                       and not node.level else [])
            for parts in (target.split(".") for target in targets):  # the longest prefix that is one of ours
                graph[module] |= next(({".".join(parts[:k])} for k in range(len(parts), 0, -1)
                                       if ".".join(parts[:k]) in ours), set())
        graph[module].discard(module)
    return graph


def _packages(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """The same imports with environments/ as one module: the floors of the program's plan. plumbing/ is a folder,
    not one module: each of its modules is a room of its own, counted in the floors."""
    def room(name: str) -> str:
        return "environments" if name.split(".")[0] == "environments" else name
    merged = {}
    for module, imported in graph.items():
        merged.setdefault(room(module), set()).update(room(name) for name in imported)
        merged[room(module)].discard(room(module))
    return merged


def _circle(graph: dict[str, set[str]]) -> list[str] | None:
    def walk(module: str, path: list[str]) -> list[str] | None:
        if module in path:
            return path[path.index(module):] + [module]
        return next(filter(None, (walk(imported, path + [module]) for imported in sorted(graph[module]))), None)
    return next(filter(None, (walk(module, []) for module in sorted(graph))), None)


def test_the_program_has_no_import_circle():
    """No module of the program imports, at its top or inside a function, one that imports it back by some way: each
    can be read, and loaded, after what it builds on. A file of environments/ never imports its own package."""
    graph = _imports()
    for plan in (graph, _packages(graph)):
        circle = _circle(plan)
        assert circle is None, " -> ".join(circle)


def test_the_program_stands_on_at_most_nine_floors():
    """The longest chain of imports, counting modules (environments/ as one), is at most 9 (it was 13: issue 73):
    a reader who starts from any script reaches what it stands on in a few steps."""
    plan = _packages(_imports())
    assert _circle(plan) is None
    chains: dict[str, list[str]] = {}

    def chain(module: str) -> list[str]:
        if module not in chains:
            chains[module] = [module, *max((chain(imported) for imported in plan[module]), key=len, default=[])]
        return chains[module]
    longest = max((chain(module) for module in sorted(plan)), key=len)
    assert len(longest) <= 9, " -> ".join(longest)


def test_the_plumbing_imports_nothing_of_the_algorithm():
    """plumbing/ stands below the algorithm's files: its modules import each other and nothing else of ours."""
    wrong = {module: sorted(name for name in imported if name.split(".")[0] != "plumbing")
             for module, imported in _imports().items() if module.split(".")[0] == "plumbing"}
    assert not any(wrong.values()), wrong
