"""The models that ship in models/ load and keep their published scores on held-out episodes."""
import subprocess
import sys
from pathlib import Path

import pytest

from agent import Agent
from evaluation import evaluate, summary
from tests.hang import HANG_S

pytestmark = pytest.mark.slow  # processes, Ray or whole configs: make test-fast leaves these out

ROOT = Path(__file__).resolve().parent.parent


def test_cartpole_masked_model_scores_at_least_190():
    results = evaluate(Agent.load(ROOT / "models/cartpole_masked.pt"), episodes=100, deterministic=True)
    mean = sum(r["reward"] for r in results) / len(results)
    assert len(results) == 100 and mean >= 190, mean


def test_poc_model_succeeds_in_98_percent_of_held_out_episodes():
    results = evaluate(Agent.load(ROOT / "models/poc_memory_env.pt"), episodes=100, deterministic=True)
    assert sum(r["success"] for r in results) / len(results) >= 0.98


def test_minigrid_model_scores_at_least_085_on_held_out_unlimited_layouts():
    """Trained on layout seeds 0..98; scored with the config's evaluation_kwargs (unlimited layouts)."""
    agent = Agent.load(ROOT / "models/minigrid.pt")
    assert agent.config.environment.for_evaluation().kwargs.get("seed_pool", 0) == 0
    results = evaluate(agent, episodes=100, deterministic=True)
    mean = sum(r["reward"] for r in results) / len(results)
    assert len(results) == 100 and mean >= 0.85, mean


def test_memory_gym_model_beats_the_published_gru_on_novel_seeds():
    """Mortar Mayhem B Grid: the share of the commands carried out, on seeds no training episode had,
    at least the Memory Gym authors' GRU at 8.2M steps (0.42); the model scored 0.683 on 150 episodes."""
    agent = Agent.load(ROOT / "models/mortar_mayhem_b_grid.pt")
    assert agent.config.environment.for_evaluation().reset_params.get("start-seed", 0) >= 100000
    results = evaluate(agent, episodes=30, deterministic=True)
    mean = sum(r["reward"] for r in results) / len(results)
    assert len(results) == 30 and mean >= 0.42, mean


def test_breakout_model_scores_at_least_30_on_held_out_games():
    """BreakoutNoFrameskip-v4 in CleanRL's setting, whole games in the game's points. The model scored 84.6
    on these 16 sampled games (CleanRL's ppo_atari_lstm: about 45 at 2M steps; random play 1.4). The floor
    is 30, not 45: the games' spread is wide (std 65), and where the CPU runs float32 instead of bfloat16
    the sampled games differ, so 45 would sit 2.4 standard errors below the mean, 30 sits 3.4 below."""
    agent = Agent.load(ROOT / "models/breakout_noframeskip.pt")
    results = evaluate(agent, episodes=16, deterministic=False)
    mean = sum(r["reward"] for r in results) / len(results)
    assert len(results) == 16 and mean >= 30, mean


def test_enjoy_scores_fresh_episodes_by_default_not_those_the_run_picked_its_model_on():
    """A run's evaluations play evaluation.seed's episodes; enjoy.py's default seed is the next one."""
    model = ROOT / "models/poc_memory_env.pt"
    agent = Agent.load(model)
    result = subprocess.run([sys.executable, str(ROOT / "enjoy.py"), "--model", str(model), "--episodes", "20"],
                            capture_output=True, text=True, timeout=HANG_S)
    assert result.returncode == 0, result.stderr
    own, fresh = (summary(evaluate(agent, episodes=20, seed=agent.config.evaluation.seed + k)) for k in (0, 1))
    assert own != fresh and result.stdout.splitlines()[-1] == fresh


def test_plot_script_writes_a_png_with_the_reference(tmp_path):
    from config import load_config
    from trainer import Trainer
    for seed in (0, 1):
        config = load_config(ROOT / "configs/poc_memory_env.yaml", ["updates=3", f"seed={seed}"])
        Trainer(config, run_id=f"seed{seed}", summaries_dir=tmp_path, models_dir=tmp_path, verbose=False).run()
    out = tmp_path / "curve.png"
    reference = ROOT.parent / "shared/reference/poc_memory_env.csv"  # shared/ sits beside the checkout
    command = [sys.executable, str(ROOT / "tools/plot.py"), "--runs", str(tmp_path / "seed0"),
               str(tmp_path / "seed1"), "--out", str(out)]
    if reference.exists():
        command += ["--reference", str(reference)]
    result = subprocess.run(command, capture_output=True, text=True, timeout=HANG_S)
    assert result.returncode == 0, result.stderr
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_run_summary_counts_a_resumed_run_once_and_averages_its_last_updates(tmp_path):
    """A run stopped after 3 updates and resumed to 5 (two processes, two event files) is summarised as one."""
    import json
    train = [sys.executable, str(ROOT / "train.py")]
    config = str(ROOT / "configs/poc_memory_env.yaml")
    printed, lengths = [], []  # the reward and episode length of each update as train.py printed them
    for command in (train + ["--config", config, "--run-id", "r", "--set", "updates=3"],
                    train + ["--resume", "models/r.pt", "--set", "updates=5"]):
        result = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=HANG_S)
        assert result.returncode == 0, result.stderr
        lines = [line for line in result.stdout.splitlines() if line.startswith("update")]
        printed += [float(line.split("reward")[1].split()[0]) for line in lines]
        lengths += [float(line.split("length")[1].split()[0]) for line in lines]
    assert len(printed) == 5
    out = tmp_path / "summary"
    result = subprocess.run([sys.executable, str(ROOT / "tools/run_summary.py"), "--run", str(tmp_path / "summaries/r"),
                             "--last", "2", "--command", "train it", "--out", str(out)],
                            capture_output=True, text=True, timeout=HANG_S)
    assert result.returncode == 0, result.stderr
    summary = json.loads(out.with_suffix(".json").read_text())
    assert summary["updates"] == 5 and summary["env_steps"] == 5 * 16 * 128 and summary["processes"] == 2
    assert [round(row["reward"], 3) for row in summary["curve"]] == printed
    assert [round(row["length"], 1) for row in summary["curve"]] == lengths
    assert summary["reward_mean_last_updates"] == pytest.approx(sum(printed[-2:]) / 2, abs=1e-3)
    assert [row["update"] for row in summary["curve"]] == [1, 2, 3, 4, 5]
    assert 0 < summary["wall_seconds"] and sum(summary["loop_seconds"].values()) < summary["wall_seconds"]
    table = out.with_suffix(".md").read_text()
    assert "train it" in table
    # the curve's rows: the first update and the last
    assert [line.split("|")[1].strip() for line in table.splitlines() if line.startswith("| ") and
            line.split("|")[1].strip().isdigit()] == ["1", "5"]
