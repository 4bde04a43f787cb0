"""The instruments' shared life (tools/life.py; issue 87, points 4 and 5): an --out that cannot be written is refused
before anything is measured, a write that fails after keeps what was measured, an input that cannot be read is one
line and exit 2, and a stop signal ends a tool in one line with 130 / 143."""
import json
import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import psutil
import pytest

from tests.hang import HANG_S, wait_until
from tests.test_stats import write_run
from tools import benchmark, core_speed, episode_interval, finals, plot, random_policy, run_summary

ROOT = Path(__file__).resolve().parent.parent
REFERENCE = ROOT / "results/reference/poc_memory_env.csv"
ROW = {"core": "gru", "path": "call", "L": 8, "N": 1, "median_s": 0.5, "min_s": 0.5, "max_s": 0.5, "repeats": 1}


def run(tool, *args) -> int:
    """tool.main() as `python tools/<tool>.py args` runs it; its exit code."""
    saved, sys.argv = sys.argv, [tool.__file__, *map(str, args)]
    try:
        return tool.main()
    except SystemExit as exit:
        return exit.code
    finally:
        sys.argv = saved


def one_error_line(capsys) -> str:
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1, err
    return err


@pytest.fixture
def runs(tmp_path) -> Path:
    """A run's summaries: three updates of 2048 steps."""
    write_run(tmp_path / "runs/a", seed=0, rewards=[0.1, 0.2, 0.3])
    return tmp_path / "runs/a"


@pytest.fixture
def measured(monkeypatch) -> list:
    """core_speed's and random_policy's measurements replaced by ones that take no time; each call noted."""
    calls = []
    monkeypatch.setattr(core_speed, "measure", lambda *args: calls.append("measure") or [ROW])
    monkeypatch.setattr(core_speed, "measure_steps", lambda *args: [{"core": "gru", "W": 2, "median_s": 1e-4,
                                                                     "repeats": 1}])
    monkeypatch.setattr(random_policy, "evaluate", lambda agent, episodes, seed: calls.append("evaluate") or
                        [{"reward": 1.0, "length": 3}] * episodes)
    return calls


def tool_writing(name: str, out: Path, runs: Path, root: Path):
    """(tool, its arguments) that measure and then write to `out`."""
    if name == "benchmark":
        (root / "configs").mkdir(exist_ok=True)
        (root / "configs/tiny.yaml").write_text("updates: 1\n")
        return benchmark, ["--config", "configs/tiny.yaml", "--repeats", "1", "--out", out]
    return {"plot": (plot, ["--runs", runs, "--out", f"{out}.png"]),
            "run_summary": (run_summary, ["--run", runs, "--command", "c", "--out", out]),
            "finals": (finals, ["--runs", runs, "--out", out]),
            "core_speed": (core_speed, ["--cores", "gru", "--lengths", "8", "--out", out]),
            "random_policy": (random_policy, ["--config", "configs/poc_memory_env.yaml", "--episodes", "2",
                                              "--out", out])}[name]


@pytest.mark.parametrize("name", ["plot", "run_summary", "finals", "core_speed", "random_policy", "benchmark"])
def test_an_out_that_cannot_be_written_is_refused_before_anything_is_measured(name, tmp_path, runs, measured,
                                                                             monkeypatch, capsys):
    """--out under a file (the folder cannot be made, as a read-only one cannot take files): one line, exit 2,
    before the measurement (issue 87.4: a traceback after it, the measurement lost)."""
    (tmp_path / "notes.txt").write_text("notes\n")
    timings = {"wall_seconds": 1.0, "final_reward": 0.0, "updates": 1, "env_steps": 64, "steps_per_second": 64.0,
               "peak_rss_mb": 10.0, **{f"{phase}_seconds": 0.1 for phase in benchmark.PHASES}}
    monkeypatch.setattr(benchmark, "run_train", lambda *args: measured.append("train.py") or timings)
    tool, args = tool_writing(name, tmp_path / "notes.txt/out", runs, tmp_path)
    code = benchmark.main(list(map(str, args)), root=tmp_path) if tool is benchmark else run(tool, *args)
    assert code == 2 and "notes.txt is a file, not a folder" in one_error_line(capsys)
    assert measured == [] and (tmp_path / "notes.txt").read_text() == "notes\n"


def test_an_out_that_is_a_folder_is_refused(tmp_path, runs, capsys):
    assert run(plot, "--runs", runs, "--out", tmp_path) == 2
    assert f"--out {tmp_path} is a folder" in one_error_line(capsys)


@pytest.mark.parametrize("name", ["plot", "run_summary", "finals"])
def test_an_out_in_a_missing_folder_is_written_there(name, tmp_path, runs):
    tool, args = tool_writing(name, tmp_path / "new/folder/out", runs, tmp_path)
    assert run(tool, *args) == 0
    assert sorted(p.name for p in (tmp_path / "new/folder").iterdir()) == (
        ["out.png"] if name == "plot" else ["out.json", "out.md"])


@pytest.mark.parametrize("name", ["core_speed", "random_policy"])
def test_a_write_that_fails_after_the_measurement_keeps_it(name, tmp_path, runs, measured, monkeypatch, capsys):
    """The folder of --out becomes a file while the tool measures: exit 1, one line naming the folder that keeps
    what was measured (issue 87.4: a traceback, the measurement lost)."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    out = tmp_path / "results"
    out.mkdir()

    def folder_gone(measure):
        def replaced(*args, **kwargs):
            out.rmdir()
            out.write_text("not a folder any more\n")
            return measure(*args, **kwargs)
        return replaced
    what = {"core_speed": "measure", "random_policy": "evaluate"}[name]
    tool, args = tool_writing(name, out / "x", runs, tmp_path)
    monkeypatch.setattr(tool, what, folder_gone(getattr(tool, what)))
    assert run(tool, *args) == 1
    err = one_error_line(capsys)
    assert err.startswith(f"error: could not write {out}/x.json, {out}/x.md (")
    kept = Path(err.split("kept in ")[1].strip())
    assert kept.parent == tmp_path and sorted(p.name for p in kept.iterdir()) == ["x.json", "x.md"]
    report = json.loads((kept / "x.json").read_text())
    assert report["rows"] == [ROW] if name == "core_speed" else report["scores"]["reward_mean"] == 1.0


def test_a_write_that_no_folder_takes_leaves_the_text_on_stdout(tmp_path, monkeypatch, capsys):
    from plumbing.script import Failed
    from tools import life

    def no_folder(*args, **kwargs):
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(tempfile, "mkdtemp", no_folder)
    (tmp_path / "file").write_text("")
    with pytest.raises(Failed, match="could not write .* what was measured is printed on stdout"):
        life.write_out({tmp_path / "file/x.json": '{"rows": [1]}', tmp_path / "file/x.png": b"\x89PNG"})
    assert capsys.readouterr().out == '{"rows": [1]}\n'


CHECKPOINT = (ROOT / "models/poc_memory_env.pt").read_bytes()


@pytest.mark.parametrize("name, content, words", [
    ("e.log", b"\xff\xfe episode    1  return 1.0", "not UTF-8 text"),
    ("e.json", b'{"episodes": [{"reward": 1.0}, ', "not JSON (Expecting value, line 1)"),
    ("e.json", b'{"rewards": [1.0]}', "does not hold episodes with their returns"),
    ("e.log", b"", "holds no episodes"),  # borderline: nothing to score was exit 0
    ("e.log", None, "is missing"),
    pytest.param("poc_memory_env.pt", CHECKPOINT, "not UTF-8 text (a checkpoint", id="checkpoint")])
def test_episode_interval_refuses_a_file_that_holds_no_episodes(name, content, words, tmp_path, capsys):
    if content is not None:
        (tmp_path / name).write_bytes(content)
    assert run(episode_interval, tmp_path / name) == 2
    assert f"{tmp_path / name} " in (err := one_error_line(capsys)) and words in err


@pytest.mark.parametrize("content, words", [
    (None, "is missing"),
    ("update,env_steps,mean\n1,2048,0.5\n", "has no column 'reward_mean_over_runs'"),
    (REFERENCE.read_text().replace("2048", "many", 1), "line 2: not a number"),
    ("update,env_steps,reward_mean_over_runs,reward_min_over_runs,reward_max_over_runs,runs\n", "holds no rows"),
    pytest.param(CHECKPOINT, "not UTF-8 text", id="checkpoint")])
@pytest.mark.parametrize("name", ["plot", "run_summary"])
def test_a_reference_curve_that_cannot_be_read_is_refused(name, content, words, tmp_path, runs, capsys):
    reference = tmp_path / "reference.csv"
    if content is not None:
        reference.write_bytes(content if isinstance(content, bytes) else content.encode())
    tool, args = tool_writing(name, tmp_path / "out", runs, tmp_path)
    assert run(tool, *args, "--reference", reference) == 2
    assert f"{reference}" in (err := one_error_line(capsys)) and words in err
    assert not list(tmp_path.glob("out*"))


def test_finals_tabulates_the_last_value_of_each_run(tmp_path, runs):
    write_run(tmp_path / "runs/b", seed=1, rewards=[0.5, 0.4])
    assert run(finals, "--runs", tmp_path / "runs/b", runs, "--out", tmp_path / "out") == 0
    rows = json.loads((tmp_path / "out.json").read_text())["runs"]
    assert [(r["run"], r["update"]) for r in rows] == [("a", 3), ("b", 2)]
    assert [r["episode/reward_mean_last100"] for r in rows] == pytest.approx([0.3, 0.4])


def test_a_reference_curve_is_read_and_drawn(tmp_path, runs):
    tool, args = tool_writing("run_summary", tmp_path / "out", runs, tmp_path)
    assert run(tool, *args, "--reference", REFERENCE) == 0
    assert json.loads((tmp_path / "out.json").read_text())["reference_mean_last_updates"] == pytest.approx(
        (-1.7768 - 1.9394 - 1.7252) / 3)


@pytest.mark.parametrize("number", [signal.SIGINT, signal.SIGTERM])
def test_a_stop_signal_ends_a_tool_in_one_line(number, tmp_path, measured, monkeypatch, capsys):
    """The signal lands while the tool measures: `stopped by SIGINT`, exit 130 (SIGTERM: 143), no traceback."""
    class Unanswered(Exception):
        """Where the tool answers no signal, the test's own handler raises this (and keeps pytest alive)."""

    def unanswered(number, frame):
        raise Unanswered
    monkeypatch.setattr(core_speed, "measure", lambda *args: signal.raise_signal(number))
    previous = {n: signal.signal(n, unanswered) for n in (signal.SIGINT, signal.SIGTERM)}
    try:
        code = run(core_speed, "--cores", "gru", "--lengths", "8", "--out", tmp_path / "out")
    finally:
        for n, handler in previous.items():
            signal.signal(n, handler)
    assert code == 128 + number and capsys.readouterr().err == f"stopped by {signal.Signals(number).name}\n"
    assert not list(tmp_path.glob("out*"))


@pytest.mark.slow
def test_ctrl_c_ends_learning_and_its_seeds_in_one_line(tmp_path):
    """Ctrl-C (SIGINT to the whole process group) once a seed's process runs: the seeds' processes end with the
    tool, which says so in one line, exit 130 (issue 87.5: KeyboardInterrupt tracebacks from the tool and each
    seed)."""
    config = tmp_path / "long.yaml"
    config.write_text("environment:\n  type: PocMemoryEnv\nupdates: 100000\nn_workers: 2\nworker_steps: 16\n"
                      "n_mini_batch: 1\nhidden_layer_size: 8\nrecurrence:\n  hidden_state_size: 4\n")
    marker = f"TOOL_{os.getpid()}_{tmp_path.name}"  # in the environment of every process the tool starts
    tool = subprocess.Popen([sys.executable, str(ROOT / "tools/learning.py"), "--config", str(config), "--seeds",
                             "0", "--out", str(tmp_path)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True, env={**os.environ, marker: "1"})
    wait_until(lambda: len(marked(marker)) > 1, "a seed's process", tool)
    os.killpg(tool.pid, signal.SIGINT)
    out, err = tool.communicate(timeout=HANG_S)  # its end of file: every process that holds its pipes has ended
    assert tool.returncode == 130 and err == "stopped by SIGINT: the seeds' runs were ended\n", err
    wait_until(lambda: not marked(marker), "the end of every process the tool started")
    assert not list(tmp_path.glob("learning_*"))


def test_a_ctrl_c_while_the_seeds_processes_start_is_answered_after():
    """A Ctrl-C while the pool starts is held back, then answered, even where a thread of the tool's would take it:
    it was ignored there and lost, and the tool trained on (CI: the Ctrl-C test above hung). In a fresh process,
    where the resource tracker has not started yet (starting, it unblocks the signals)."""
    script = ("import multiprocessing as mp, os, signal, threading\n"
              "from plumbing import stopping\n"
              "threading.Thread(target=threading.Event().wait, daemon=True).start()  # takes what main blocks\n"
              "try:\n"
              "    with stopping.starting_processes():\n"
              "        os.kill(os.getpid(), signal.SIGINT)\n"
              "        mp.get_context('spawn').SimpleQueue()\n"
              "        print('held back')\n"
              "except KeyboardInterrupt:\n"
              "    print('answered after')\n")
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=HANG_S)
    assert done.stdout == "held back\nanswered after\n", done.stdout + done.stderr


def marked(marker: str) -> list[int]:
    """The live processes whose environment holds `marker`."""
    found = []
    for process in psutil.process_iter():
        try:
            if process.status() != psutil.STATUS_ZOMBIE and marker in process.environ():
                found.append(process.pid)
        except psutil.Error:  # ended meanwhile, or not ours to read
            pass
    return found
