"""What a checkpoint holds, in this process: every checkpoint the writer can write is read again, and contents
that do not fit are one CheckpointError line."""
import zipfile
from pathlib import Path

import pytest
import torch

from checkpoint import MAX_CHECKPOINT_VALUES, CheckpointError, load_checkpoint, save_checkpoint
from config import MAX_WORKERS, ConfigError, config_from_dict
from environments import EpisodeStats
from plumbing.yaml_input import require_small
from trainer import Trainer

ROOT = Path(__file__).resolve().parent.parent
TINY = {"n_workers": 2, "worker_steps": 4, "n_mini_batch": 1, "updates": 1, "hidden_layer_size": 8,
        "recurrence": {"sequence_length": 4, "hidden_state_size": 4}}


@pytest.fixture
def payload(tmp_path):
    """What train.py saves for a tiny run before its first update."""
    trainer = Trainer(config_from_dict(TINY), run_id="t", summaries_dir=tmp_path / "s", models_dir=tmp_path,
                      verbose=False)
    try:
        return trainer.state_dict()
    finally:
        trainer.close()


def test_an_environments_state_holds_the_values_the_bound_counts(payload):
    state = payload["environments"][0]
    require_small(state, "state", limit=EpisodeStats.STATE_VALUES)
    with pytest.raises(ConfigError):
        require_small(state, "state", limit=EpisodeStats.STATE_VALUES - 1)


def test_a_checkpoint_of_the_most_environments_a_config_allows_is_read_again(tmp_path, payload):
    """n_workers=44000 saved and exited 0, then every reader refused the file as a 'billion laughs' (issue 58
    point 2). The states are shared here (written and read in a moment) and counted in full all the same."""
    payload["environments"] = payload["environments"][:1] * MAX_WORKERS
    save_checkpoint(tmp_path / "most.pt", payload)
    assert len(load_checkpoint(tmp_path / "most.pt")["environments"]) == MAX_WORKERS


def test_a_checkpoint_no_reader_would_take_is_not_written(tmp_path, payload):
    payload["environments"] = payload["environments"][:1] * (MAX_CHECKPOINT_VALUES // EpisodeStats.STATE_VALUES)
    with pytest.raises(CheckpointError, match="more than a checkpoint may"):
        save_checkpoint(tmp_path / "huge.pt", payload)
    assert not list(tmp_path.glob("*.pt"))


def _zip_of_another_program(path):
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("notes/hello.txt", "hi")


@pytest.mark.parametrize("write, words", [
    (lambda path: torch.save({"a": 1}, path), "is another program's torch file (it holds no model, config or digest)"),
    (lambda path: torch.save(torch.zeros(3), path), "is another program's torch file"),
    (_zip_of_another_program, "is another program's zip archive (torch's hold a data.pkl)"),
    (lambda path: torch.save({"model": {}, "config": {}}, path), "written by an older version of this project"),
    (lambda path: path.write_bytes((ROOT / "models/poc_memory_env.pt").read_bytes()[:15000]), "corrupt checkpoint"),
])
def test_another_programs_file_is_told_from_a_corrupt_checkpoint(tmp_path, write, words):
    """A plain torch.save({'a': 1}) was 'corrupt, or written by an older version of this project', a bare tensor and
    a zip that torch did not write 'corrupt checkpoint' (issue 87, borderline)."""
    write(tmp_path / "x.pt")
    with pytest.raises(CheckpointError) as refused:
        load_checkpoint(tmp_path / "x.pt")
    assert words in str(refused.value) and ("corrupt" in str(refused.value)) == (words == "corrupt checkpoint")
