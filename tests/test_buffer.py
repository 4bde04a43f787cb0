"""The sequence index map and its burn-in steps against plain-loop oracles, GAE against hand-computed values,
and the rollout buffer's storage, memory estimate and moves to the training device."""
import doctest
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import psutil
import pytest
import torch

import buffer
from buffer import RolloutBuffer, burn_in_index, compute_gae, sequence_index
from config import ConfigError, RecurrenceConfig
from spaces import ActionFormat


def oracle_sequences(dones: np.ndarray, L: int) -> list[list[int]]:
    """The obvious loops: walk each worker's row, cut at episode ends and every L steps."""
    W, T = dones.shape
    sequences = []
    for w in range(W):
        episode = []
        for t in range(T):
            episode.append(w * T + t)
            if dones[w, t] or t == T - 1:
                if L > 0:
                    sequences += [episode[i:i + L] for i in range(0, len(episode), L)]
                else:
                    sequences.append(episode)
                episode = []
    return sequences


def as_lists(index: np.ndarray, mask: np.ndarray) -> list[list[int]]:
    return [row[m].tolist() for row, m in zip(index, mask)]


def done_patterns():
    rng = np.random.default_rng(0)
    yield "random", rng.random((6, 40)) < 0.1
    yield "dense", rng.random((4, 33)) < 0.6
    yield "every step (one-step episodes)", np.ones((3, 10), dtype=bool)
    yield "never (episodes cross both rollout edges)", np.zeros((3, 25), dtype=bool)
    last = np.zeros((2, 17), dtype=bool)
    last[:, -1] = True
    yield "episode ends on the last step", last


@pytest.mark.parametrize("L", [1, 3, 8, 0, -1])
@pytest.mark.parametrize("name,dones", list(done_patterns()))
def test_sequence_index_equals_loop_oracle(name, dones, L):
    index, mask, starts = sequence_index(dones, L)
    expected = oracle_sequences(dones, L)
    assert as_lists(index, mask) == expected
    # L slots with L > 0 even where every piece is shorter ("every step"), else the longest piece.
    assert index.shape == (len(expected), L if L > 0 else max(map(len, expected)))
    assert index.dtype == np.int64
    assert starts.tolist() == [s[0] for s in expected]
    # Padding comes only after the real steps and points at the zero row W*T.
    W, T = dones.shape
    for row, m in zip(index, mask):
        n = int(m.sum())
        assert m[:n].all() and not m[n:].any()
        assert (row[n:] == W * T).all()


def oracle_burn_in(dones: np.ndarray, sequences: list[list[int]], k: int) -> list[list[int]]:
    """The obvious loop: from each sequence's first step, walk back along its worker's row while
    the step before is of the same episode (not done) and inside the rollout, at most k steps."""
    W, T = dones.shape
    burn_ins = []
    for sequence in sequences:
        w, t = divmod(sequence[0], T)
        before = []
        while len(before) < k and t > 0 and not dones[w, t - 1]:
            t -= 1
            before.insert(0, w * T + t)
        burn_ins.append(before)
    return burn_ins


@pytest.mark.parametrize("k", [1, 3, 8, 20])
@pytest.mark.parametrize("L", [1, 3, 8])
@pytest.mark.parametrize("name,dones", list(done_patterns()))
def test_burn_in_index_equals_loop_oracle(name, dones, L, k):
    W, T = dones.shape
    _, _, starts = sequence_index(dones, L)
    index, mask, first = burn_in_index(dones, starts, k)
    expected = oracle_burn_in(dones, oracle_sequences(dones, L), k)
    assert index.shape == (len(starts), k)
    assert as_lists(index, mask) == expected
    assert first.tolist() == [b[0] if b else s for b, s in zip(expected, starts)]
    for row, m in zip(index, mask):  # right-aligned: padding first, pointing at the zero row
        n = int(m.sum())
        assert not m[:k - n].any() and m[k - n:].all()
        assert (row[:k - n] == W * T).all()


@pytest.mark.parametrize("L", [2, 8])
def test_no_sequence_longer_than_L_and_every_step_once(L):
    dones = np.random.default_rng(1).random((16, 128)) < 0.05
    index, mask, _ = sequence_index(dones, L)
    assert index.shape[1] == L
    assert sorted(index[mask].tolist()) == list(range(16 * 128))


def test_the_index_maps_worked_example_is_what_it_computes():
    """sequence_index's docstring draws the map of two workers' rows; its numbers run here as a doctest."""
    assert doctest.testmod(buffer) == (0, 4)


def test_whole_episode_mode_pads_to_longest_piece_only():
    dones = np.zeros((2, 12), dtype=bool)
    dones[0, 2] = dones[1, 4] = True  # pieces: 3, 9, 5, 7 steps
    index, mask, _ = sequence_index(dones, 0)
    assert index.shape == (4, 9)
    assert mask.sum(1).tolist() == [3, 9, 5, 7]


def gae_hand(rewards, values, nexts, continues, gamma, lamda):
    """Backwards over one worker: deltas with the given next-state values, then the lambda sum."""
    T = len(rewards)
    deltas = [rewards[t] + gamma * nexts[t] - values[t] for t in range(T)]
    adv, acc = [0.0] * T, 0.0
    for t in reversed(range(T)):
        acc = deltas[t] + gamma * lamda * continues[t] * acc
        adv[t] = acc
    return adv


def test_gae_terminated_truncated_and_rollout_cut():
    gamma, lamda = 0.9, 0.8
    rewards = np.array([[1.0, 2.0, 3.0, 4.0, 5.0]], dtype=np.float32)
    values = np.array([[0.5, 0.4, 0.3, 0.2, 0.1]], dtype=np.float32)
    final_values = np.array([[0.0, 7.0, 0.0, 0.0, 0.0]], dtype=np.float32)
    truncated = np.array([[False, True, False, False, False]])  # cut by a time limit after step 1
    terminated = np.array([[False, False, False, True, False]])  # a terminal state after step 3
    last_values = np.array([9.0], dtype=np.float32)  # V after the rollout's last step (rollout cut)
    got = compute_gae(rewards, values, final_values, terminated, truncated, last_values, gamma, lamda)[0]
    # Worth of what follows each step: V(s1); V(final obs) = 7 (bootstrap); V(s3); 0 (terminal); 9 (rollout cut).
    nexts = [0.4, 7.0, 0.2, 0.0, 9.0]
    continues = [1, 0, 1, 0, 1]
    expected = gae_hand(rewards[0], values[0], nexts, continues, gamma, lamda)
    np.testing.assert_allclose(got, expected, rtol=1e-6)
    # By hand for the two ends of the first episode:
    d1 = 2.0 + 0.9 * 7.0 - 0.4
    d0 = 1.0 + 0.9 * 0.4 - 0.5
    assert got[1] == pytest.approx(d1)
    assert got[0] == pytest.approx(d0 + 0.9 * 0.8 * d1)
    assert got[3] == pytest.approx(4.0 - 0.2)  # terminal: no bootstrap at all
    assert got[4] == pytest.approx(5.0 + 0.9 * 9.0 - 0.1)


def test_gae_workers_are_independent():
    rng = np.random.default_rng(3)
    W, T = 5, 30
    r, v, fv = (rng.normal(size=(W, T)).astype(np.float32) for _ in range(3))
    term, trunc = rng.random((W, T)) < 0.1, rng.random((W, T)) < 0.05
    trunc &= ~term
    last = rng.normal(size=W).astype(np.float32)
    batch = compute_gae(r, v, fv, term, trunc, last, 0.99, 0.95)
    for w in range(W):
        one = compute_gae(r[w:w + 1], v[w:w + 1], fv[w:w + 1], term[w:w + 1], trunc[w:w + 1], last[w:w + 1],
                          0.99, 0.95)
        np.testing.assert_allclose(batch[w], one[0], rtol=1e-6)
        nexts = [0.0 if term[w, t] else fv[w, t] if trunc[w, t] else (v[w, t + 1] if t + 1 < T else last[w])
                 for t in range(T)]
        expected = gae_hand(r[w], v[w], nexts, [0 if term[w, t] or trunc[w, t] else 1 for t in range(T)],
                            0.99, 0.95)
        np.testing.assert_allclose(batch[w], expected, rtol=1e-4, atol=1e-5)


def test_gae_is_computed_in_float32_like_the_stored_values():
    """In float32, gamma 0.99 times V(next) = 1 is float32(0.99), the stored V(s): the advantage is exactly 0
    (in float64 it would be 0.99 - float32(0.99) = -9.5e-9). A float64 bootstrap value is taken as float32 too:
    1 + 2^-30 is 1 there."""
    rewards, values = np.zeros((1, 1), np.float32), np.full((1, 1), 0.99, np.float32)
    no = np.zeros((1, 1), dtype=bool)
    for last_values in (np.ones(1, np.float32), np.array([1.0 + 2.0 ** -30])):
        got = compute_gae(rewards, values, np.zeros((1, 1), np.float32), no, no, last_values, 0.99, 0.95)
        assert got.dtype == np.float32
        assert got[0, 0] == 0.0


# ------------------------------------------------------------------ the rollout buffer

# name -> obs_shape, obs_dtype, actions, masked, state_size, previous_size, W, T, n_mini_batch
LAYOUTS = {
    "uint8 image, discrete actions": ((6, 5, 3), np.uint8, ActionFormat(1, np.int64, 4), False, 8, 0, 3, 4, 2),
    "vector, masked multidiscrete, previous input": ((7,), np.float32, ActionFormat(2, np.int64, 5), True, 16, 6,
                                                     2, 5, 3),
    "vector, box actions, lstm state, previous reward": ((3,), np.float32, ActionFormat(2, np.float32, 0), False,
                                                         64, 1, 4, 3, 4),
    "masked uint8 image, previous input": ((4, 4, 1), np.uint8, ActionFormat(1, np.int64, 3), True, 24, 4, 1, 6, 2),
}


def allocated_bytes(b: RolloutBuffer) -> int:
    """What the buffer really holds: its flat per-step fields and its (W, T) rollout arrays."""
    return sum(a.nbytes for a in b._flat.values()) + sum(
        a.nbytes for a in (b.rewards, b.terminated, b.truncated, b.final_values))


@pytest.mark.parametrize("layout", LAYOUTS)
def test_memory_estimate_is_the_storage_allocated_and_one_minibatch_of_float32_observations(layout):
    """Each field in its own dtype, with one zero row after the W*T steps; the estimate the run checks is
    those bytes, plus 4 a step (it counts 14 a step for the (W, T) arrays, which take 4 + 1 + 1 + 4), plus
    one minibatch's observations as float32."""
    obs_shape, obs_dtype, actions, masked, S, P, W, T, n = LAYOUTS[layout]
    b = RolloutBuffer(W, T, obs_shape, obs_dtype, actions, masked, S, torch.device("cpu"), P)
    fields = {"obs": (obs_shape, obs_dtype), "states": ((S,), np.float32), "actions": ((actions.size,), actions.dtype),
              "log_probs": ((), np.float32), "values": ((), np.float32), "advantages": ((), np.float32),
              "returns": ((), np.float32)}
    if masked:
        fields["action_mask"] = ((actions.mask_size,), bool)
    if P:
        fields["previous"] = ((P,), np.float32)
    assert {name: (a.shape, a.dtype) for name, a in b._flat.items()} == {
        name: ((W * T + 1, *shape), np.dtype(dtype)) for name, (shape, dtype) in fields.items()}
    assert [(a.shape, a.dtype) for a in (b.rewards, b.terminated, b.truncated, b.final_values)] == [
        ((W, T), np.float32), ((W, T), bool), ((W, T), bool), ((W, T), np.float32)]
    obs_entries = 1
    for d in obs_shape:
        obs_entries *= d
    expected = allocated_bytes(b) + 4 * W * T + (W * T // n) * obs_entries * 4
    taken = buffer.rollout_bytes(W, T, buffer.stored_fields(obs_shape, obs_dtype, actions, masked, S, P), n)
    assert sum(taken.values()) == expected
    assert taken["states"] == b._flat["states"].nbytes


def test_buffer_defaults_to_no_previous_input():
    b = RolloutBuffer(2, 3, (4,), np.float32, ActionFormat(1, np.int64, 2), False, 8, torch.device("cpu"))
    assert b.previous_size == 0 and "previous" not in b._flat


def poc(*sets: str, meta: bool = True):
    """The PoC config with these --set items, its spaces and its model (built on the meta device: sizes alone)."""
    from config import load_config
    from model import build_model
    from worker import make_probe
    config = load_config(Path(buffer.__file__).parent / "configs/poc_memory_env.yaml", list(sets))
    env, spaces = make_probe(config.environment, 0)
    env.close()
    with torch.device("meta" if meta else "cpu"):
        return config, spaces, build_model(config, spaces)


def refusal(monkeypatch, available: int, *sets: str) -> str:
    monkeypatch.setattr(psutil, "virtual_memory", lambda: SimpleNamespace(available=available))
    with pytest.raises(ConfigError) as refused:
        buffer.require_rollout_memory(*poc(*sets))
    return str(refused.value)


def test_a_rollout_that_does_not_fit_is_refused_naming_what_takes_the_memory(monkeypatch):
    """A transformer's stored window was blamed on 'the rollout of these observations: lower n_workers or
    worker_steps' (issue 87, point 1): the refusal names the part that takes the memory, and its keys."""
    window = refusal(monkeypatch, 2 ** 30, "recurrence.layer_type=trxl", "recurrence.memory_length=50000")
    assert window == ("the rollout of n_workers x worker_steps = 2,048 steps needs at least 12.2 GiB, 1.0 GiB is "
                      "available: the recurrent state stored at each step (1,600,001 floats) takes 12.2 GiB of it; "
                      "lower recurrence.memory_length, hidden_state_size or num_layers, or n_workers or worker_steps")
    wide = refusal(monkeypatch, 2 ** 20, "recurrence.hidden_state_size=4096")
    assert "the recurrent state stored at each step (4,096 floats) takes " in wide
    assert wide.endswith("lower recurrence.hidden_state_size or num_layers, or n_workers or worker_steps")
    many = refusal(monkeypatch, 2 ** 20, "n_workers=65536", "recurrence.hidden_state_size=1")
    assert many.startswith("the rollout of n_workers x worker_steps = 8,388,608 steps needs at least ")
    assert "the observations stored at each step take " in many and many.endswith("lower n_workers or worker_steps")


def test_a_rollout_that_just_fits_is_not_refused_and_the_model_need_not_be_real(monkeypatch):
    """The check reads the model's sizes alone: a model built on the meta device (sweep.py's) gives the same."""
    config, spaces, model = poc(meta=False)
    fields = buffer.stored_fields(spaces.observation.shape, np.float32, spaces.action, spaces.masked,
                                  model.state_size, model.previous_size)
    needed = sum(buffer.rollout_bytes(config.n_workers, config.worker_steps, fields, config.n_mini_batch).values())
    monkeypatch.setattr(psutil, "virtual_memory", lambda: SimpleNamespace(available=needed))
    buffer.require_rollout_memory(config, spaces, model)  # exactly what is available fits
    buffer.require_rollout_memory(*poc())
    monkeypatch.setattr(psutil, "virtual_memory", lambda: SimpleNamespace(available=needed - 1))
    for built in (model, poc()[2]):
        with pytest.raises(ConfigError):
            buffer.require_rollout_memory(config, spaces, built)


def test_a_new_buffer_has_no_sequences_and_the_default_recurrence_until_finish():
    b = RolloutBuffer(2, 3, (4,), np.float32, ActionFormat(1, np.int64, 2), False, 8, torch.device("cpu"))
    assert b.index is None and b.burn_in is None and b._train == {}
    assert b.recurrence == RecurrenceConfig()


def small_buffer(device: torch.device, recurrence: RecurrenceConfig, W: int = 2, T: int = 3) -> RolloutBuffer:
    """A finished buffer of W x T steps with a masked action and a previous input, episodes ending at step 1."""
    b = RolloutBuffer(W, T, (2,), np.float32, ActionFormat(1, np.int64, 2), True, 4, device, 1)
    b.terminated[:, 1] = True
    b.finish(np.zeros(W, np.float32), 0.99, 0.95, recurrence)
    return b


class RecordingModel:
    """Stands in for the ActorCritic in refresh_states: records the chunk it is given, returns zero states."""

    def __init__(self):
        self.chunks = []

    def unroll(self, obs, previous, state, starts, chunk):
        self.chunks.append(chunk)
        return torch.zeros(*starts.shape, state.shape[1])


@pytest.mark.parametrize("burn_in", [0, 1])
def test_burn_in_steps_reach_the_minibatches_only_when_switched_on(burn_in):
    """One-step sequences, episodes ending at step 1: with burn_in 1, the two sequences at step 1 get step 0."""
    b = small_buffer(torch.device("cpu"), RecurrenceConfig(sequence_length=1, burn_in=burn_in))
    batches = list(b.minibatches(2))
    assert sum(len(mb.mask) for mb in batches) == 6
    if burn_in:
        assert all(mb.burn_in.mask.shape == (len(mb.mask), 1) for mb in batches)
        assert sum(int(mb.burn_in.mask.sum()) for mb in batches) == 2
    else:
        assert b.burn_in is None and "burn_index" not in b._train
        assert all(mb.burn_in is None for mb in batches)


def test_minibatches_serve_the_real_steps_observations_alone_in_the_masks_order():
    """Whole episodes of 2, 1 and 3 steps padded to 3: each minibatch's obs are its real steps' alone,
    (R, *obs_shape) in the row-major order of its mask, and with its other fields they name the same steps."""
    W, T = 2, 3
    b = RolloutBuffer(W, T, (2,), np.float32, ActionFormat(1, np.int64, 2), False, 4, torch.device("cpu"))
    b.obs[:] = np.arange(W * T * 2, dtype=np.float32).reshape(W, T, 2)  # step w*T + t holds 2(w*T + t), +1
    b.actions[:] = np.arange(W * T).reshape(W, T, 1)
    b.terminated[0, 1] = True  # worker 0: episodes of 2 and 1 steps; worker 1: one of 3
    b.finish(np.zeros(W, np.float32), 0.99, 0.95, RecurrenceConfig(sequence_length=0))
    seen = []
    for mb in b.minibatches(2):
        R = int(mb.mask.sum())
        assert mb.mask.shape[1] == 3 and mb.obs.shape == (R, 2)
        steps = mb.actions[..., 0][mb.mask]  # (n, L)[mask] -> (R,) the flat index of each real step
        assert torch.equal(mb.obs[:, 0], 2.0 * steps) and torch.equal(mb.obs[:, 1], 2.0 * steps + 1)
        seen += steps.tolist()
    assert sorted(seen) == list(range(W * T))


@pytest.mark.parametrize("n_mini_batch,chunk", [(1, 6), (4, 1)])
def test_refresh_gives_the_encoder_one_minibatch_of_steps_at_a_time(n_mini_batch, chunk):
    """W x T = 6 steps: 6 // 1 at a time with one minibatch; 6 // 4 = 1 with four."""
    b = small_buffer(torch.device("cpu"), RecurrenceConfig(sequence_length=1, refresh_states=True))
    model = RecordingModel()
    list(b.minibatches(n_mini_batch, model))
    assert model.chunks == [chunk]


@pytest.mark.parametrize("device", ["cpu", "cuda"])
def test_storage_is_pinned_and_copied_asynchronously_for_a_gpu_only(device, monkeypatch):
    """Runs without a GPU: torch.zeros and Tensor.to are replaced by spies that record what the buffer asks for
    (page-locked memory or not; which device, non-blocking or not) and leave everything on the CPU, unpinned."""
    device, pinned, moves = torch.device(device), [], []
    cuda = device.type == "cuda"
    zeros = torch.zeros
    monkeypatch.setattr(torch, "zeros", lambda *args, **kwargs: pinned.append(kwargs.get("pin_memory")) or zeros(
        *args, **{k: v for k, v in kwargs.items() if k != "pin_memory"}))
    monkeypatch.setattr(torch.Tensor, "to", lambda self, *args, **kwargs: moves.append(
        (args[0] if args else kwargs.get("device"), kwargs.get("non_blocking", False))) or self)
    b = small_buffer(device, RecurrenceConfig(sequence_length=2, burn_in=1, refresh_states=True))
    assert pinned == ([True] * len(b._flat) if cuda else [])  # one page-locked torch allocation per field
    assert {name: (a.shape, a.dtype) for name, a in b._flat.items()} == {  # W*T + 1 = 7 rows each
        "obs": ((7, 2), np.float32), "states": ((7, 4), np.float32), "actions": ((7, 1), np.int64),
        **{name: ((7,), np.float32) for name in ("log_probs", "values", "advantages", "returns")},
        "action_mask": ((7, 2), bool), "previous": ((7, 1), np.float32)}
    # finish(): each stored field in one copy, non-blocking to a GPU; then the 5 arrays of the sequence maps
    assert moves == [(device, cuda)] * len(b._flat) + [(device, False)] * 5
    moves.clear()
    list(b.minibatches(2, RecordingModel()))  # the refresh's episode starts, then the shuffled order
    assert moves == [(device, False)] * 2
