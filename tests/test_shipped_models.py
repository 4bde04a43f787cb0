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


# enjoy.py's default for these checkpoints (evaluation.seed 0, plus 1): episodes neither training nor the runs'
# own evaluations played, those of the README's scores (results/shipped_models.md); each floor sits under them.
FRESH = 1


def mean_return(model: str, episodes: int, deterministic: bool) -> float:
    results = evaluate(Agent.load(ROOT / f"models/{model}.pt"), episodes, FRESH, deterministic)
    assert len(results) == episodes
    return sum(r["reward"] for r in results) / episodes


def plays_novel_seeds(model: str) -> bool:
    """Memory Gym's evaluation seeds start at 100000: no training episode had them."""
    agent = Agent.load(ROOT / f"models/{model}.pt")
    return agent.config.environment.for_evaluation().reset_params.get("start-seed", 0) >= 100000


def test_cartpole_masked_model_scores_at_least_195():
    assert mean_return("cartpole_masked", 100, deterministic=True) >= 195  # 200 [200, 200]


def test_poc_model_succeeds_in_98_percent_of_held_out_episodes():
    results = evaluate(Agent.load(ROOT / "models/poc_memory_env.pt"), 100, FRESH, deterministic=True)
    assert sum(r["success"] for r in results) / len(results) >= 0.98  # 100 of 100


def test_minigrid_model_scores_at_least_095_on_held_out_unlimited_layouts():
    """Trained on layout seeds 0..98; scored with the config's evaluation_kwargs (unlimited layouts)."""
    agent = Agent.load(ROOT / "models/minigrid.pt")
    assert agent.config.environment.for_evaluation().kwargs.get("seed_pool", 0) == 0
    assert mean_return("minigrid", 100, deterministic=True) >= 0.95  # 0.966 [0.965, 0.968]: one failure passes


def test_memory_gym_model_beats_the_published_gru_on_novel_seeds():
    """Mortar Mayhem B Grid: the share of the commands carried out, on seeds no training episode had, well
    above the Memory Gym authors' GRU at 8.2M steps (0.42). These 32 episodes (one per environment) scored
    0.684 [0.634, 0.734]; 0.60 sits 2.8 standard errors under the 150 episodes' 0.671."""
    assert plays_novel_seeds("mortar_mayhem_b_grid")
    assert mean_return("mortar_mayhem_b_grid", 32, deterministic=True) >= 0.60


def test_mortar_mayhem_grid_model_remembers_the_commands_on_novel_seeds():
    """Mortar Mayhem Grid with the reference's config: the share of the commands carried out, on seeds no
    training episode had. These 32 episodes scored 0.166 [0.144, 0.191]; 0.10 sits 3.6 standard errors under
    the 150 episodes' 0.151 and far above what no memory gets (0.029, the Memory Gym authors' PPO)."""
    assert plays_novel_seeds("mortar_mayhem_grid")
    assert mean_return("mortar_mayhem_grid", 32, deterministic=True) >= 0.10


def test_mystery_path_grid_model_reaches_the_goal_on_novel_seeds():
    """Mystery Path Grid with the reference's config: the share of episodes that reach the goal, on seeds no
    training episode had. These 150 episodes scored 0.073 [0.033, 0.120]; 0.02 sits 2.5 standard errors under
    it and 5 times an untrained agent's 0.004 (the Memory Gym authors')."""
    assert plays_novel_seeds("mystery_path_grid")
    assert mean_return("mystery_path_grid", 150, deterministic=True) >= 0.02


def test_breakout_model_scores_at_least_cleanrls_45_on_fresh_games():
    """BreakoutNoFrameskip-v4 in CleanRL's setting, whole sampled games in the game's points (CleanRL's
    ppo_atari_lstm: about 45 at 2M steps). These 32 games scored 72.9 [63.8, 83.6] here; a CPU whose
    float32 rounds otherwise samples other games, and a floor just under this interval would fail on
    them often, so it is 45: 3.7 standard errors under the 32-game mean of fresh games (65.1, std 31.2)."""
    assert mean_return("breakout_noframeskip", 32, deterministic=False) >= 45


def test_enjoy_scores_fresh_episodes_by_default_not_those_the_run_picked_its_model_on():
    """enjoy.py's default seed is evaluation.seed + 1: not evaluation.seed, whose episodes every evaluation of
    the shipped models' runs played, nor any seed a run's evaluations play now (evaluation.evaluation_seed)."""
    model = ROOT / "models/poc_memory_env.pt"
    agent = Agent.load(model)
    result = subprocess.run([sys.executable, str(ROOT / "enjoy.py"), "--model", str(model), "--episodes", "20"],
                            capture_output=True, text=True, timeout=HANG_S)
    assert result.returncode == 0, result.stderr
    own, fresh = (summary(evaluate(agent, episodes=20, seed=agent.config.evaluation.seed + k)) for k in (0, 1))
    assert own != fresh and result.stdout.splitlines()[-1] == fresh


def test_plot_script_draws_the_training_curve_with_the_reference_and_the_held_out_one(tmp_path):
    from config import load_config
    from tools.plot import read_run
    from trainer import Trainer
    for seed in (0, 1):
        config = load_config(ROOT / "configs/poc_memory_env.yaml", ["updates=3", f"seed={seed}",
                                                                     "evaluation.interval=2", "evaluation.episodes=4"])
        Trainer(config, run_id=f"seed{seed}", summaries_dir=tmp_path, models_dir=tmp_path, verbose=False).run()
    steps_per_update = config.n_workers * config.worker_steps
    assert list(read_run(tmp_path / "seed0")[0]) == [steps_per_update * u for u in (1, 2, 3)]
    assert list(read_run(tmp_path / "seed0", "eval/reward_mean")[0]) == [steps_per_update * u for u in (2, 3)]
    reference = ROOT.parent / "shared/reference/poc_memory_env.csv"  # shared/ sits beside the checkout
    plot = [sys.executable, str(ROOT / "tools/plot.py"), "--runs", str(tmp_path / "seed0"), str(tmp_path / "seed1")]
    for out, options in (("curve.png", ["--reference", str(reference)] if reference.exists() else []),
                         ("held_out.png", ["--tag", "eval/reward_mean"])):
        result = subprocess.run([*plot, *options, "--out", str(tmp_path / out)], capture_output=True, text=True,
                                timeout=HANG_S)
        assert result.returncode == 0, result.stderr
        assert (tmp_path / out).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


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
