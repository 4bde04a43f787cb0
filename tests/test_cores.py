"""The memory models of cores.py: a whole sequence, by either path (the loop or the parallel scan), equals the same
core stepped one step at a time, as the rollout steps it; the model stacks one-layer cores and leaves the parameters
of a core that is not torch's own as the core made them."""
import gymnasium as gym
import numpy as np
import pytest
import torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

import config
import cores
import model
from config import CORES, Core, InitializationConfig, RecurrenceConfig
from model import ActorCritic
from tests.devices import BFLOAT16_DEVICES, DEVICES



def suites(core: Core) -> set[str]:
    """The suites below that take a core beyond those every core passes, by what its entry declares: "scan" for a
    scan_min_length (cores.linear_recurrence), "packed" for a packed path of its own, "stacked" for a one-layer
    module the model stacks (neither whole nor torch's own)."""
    own = not core.torch_rnn
    return {suite for suite, takes in (("scan", hasattr(model.layer_class(core), "scan_min_length")),
                                       ("packed", core.packed and own), ("stacked", not core.whole and own))
            if takes}


SCANNED, PACKED, STACKED = ([name for name, core in CORES.items() if suite in suites(core)]
                            for suite in ("scan", "packed", "stacked"))
PATHS = {"loop": 2 ** 62, "scan": 1}  # the scan_min_length that makes every sequence take the path


def build(name: str, layers: int, F: int = 12, H: int = 16, **keys) -> nn.Module:
    return model.build_core(CORES[name], F, RecurrenceConfig(hidden_state_size=H, num_layers=layers, **keys))


def take(monkeypatch, name: str, path: str, device: str = "cpu") -> None:
    monkeypatch.setitem(model.layer_class(CORES[name]).scan_min_length, torch.device(device).type, PATHS[path])


def state(core: Core, layers: int, N: int, H: int, device: str):
    parts = tuple(torch.randn(layers, N, H, device=device) * 0.5 for _ in range(core.state_parts))
    return parts if len(parts) > 1 else parts[0]


def flat(y, h) -> list[torch.Tensor]:
    return [y.float(), *(p.float() for p in (h if isinstance(h, tuple) else (h,)))]


def stepped(layer: nn.Module, x: torch.Tensor, h):
    """layer called on one step at a time, as the rollout calls it: (outputs (N, L, H), final state)."""
    outputs = []
    for t in range(x.shape[1]):
        y, h = layer(x[:, t:t + 1], h)
        outputs.append(y)
    return torch.cat(outputs, dim=1), h


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("L", [2, 7, 64, 512])
@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("name", SCANNED)
def test_a_sequence_equals_its_steps_in_float32(monkeypatch, name, path, L, device):
    torch.manual_seed(0)
    take(monkeypatch, name, path, device)
    layer = build(name, 2).to(device)
    x, h = torch.randn(5, L, 12, device=device), state(CORES[name], 2, 5, 16, device)
    for a, b in zip(flat(*layer(x, h)), flat(*stepped(layer, x, h))):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=0)


@pytest.mark.parametrize("name", SCANNED)
def test_both_paths_give_the_same_gradients(monkeypatch, name):
    torch.manual_seed(0)
    layer = build(name, 1)
    x, h = torch.randn(4, 100, 12), state(CORES[name], 1, 4, 16, "cpu")
    grads = []
    for path in PATHS:
        take(monkeypatch, name, path)
        layer.zero_grad()
        y, final = layer(x, h)
        (y * torch.linspace(-1, 1, 16)).sum().backward()
        grads.append([p.grad.clone() for p in layer.parameters()])
    for a, b in zip(*grads):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("device", BFLOAT16_DEVICES)
@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("name", SCANNED)
def test_a_sequence_equals_its_steps_under_bfloat16(monkeypatch, name, path, device):
    """Under autocast the input projections round to bfloat16 alike in both; the recurrence runs in float32."""
    torch.manual_seed(0)
    take(monkeypatch, name, path, device)
    layer = build(name, 1).to(device)
    x, h = torch.randn(3, 512, 12, device=device), state(CORES[name], 1, 3, 16, device)
    with torch.autocast(torch.device(device).type, dtype=torch.bfloat16):
        whole, steps = flat(*layer(x, h)), flat(*stepped(layer, x, h))
    for a, b in zip(whole, steps):
        torch.testing.assert_close(a, b, atol=1e-2, rtol=0)


@pytest.mark.parametrize("name", PACKED)
def test_packed_sequences_equal_each_sequence_stepped_alone(name):
    """The real steps alone as a PackedSequence, of several lengths (scanned as one flat sequence reset at each
    sequence's start): outputs, last states and gradients as each sequence stepped alone from its own state."""
    torch.manual_seed(0)
    layer = build(name, 2)
    lengths = torch.tensor([3, 40, 1, 17, 40, 9])
    x, h = torch.randn(6, 40, 12, requires_grad=True), state(CORES[name], 2, 6, 16, "cpu")
    y, last = layer(pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False), h)
    y = pad_packed_sequence(y, batch_first=True)[0]  # (6, 40, 16), zeros on padding
    weights, steps_loss = torch.linspace(-1, 1, 16), 0
    for n, length in enumerate(lengths):
        own = tuple(p[:, n:n + 1] for p in h) if isinstance(h, tuple) else h[:, n:n + 1]  # (layers, 1, H) per part
        steps_y, steps_last = stepped(layer, x[n:n + 1, :length], own)
        torch.testing.assert_close(y[n:n + 1, :length], steps_y, atol=1e-5, rtol=0)
        for a, b in zip(flat(y, last)[1:], flat(steps_y, steps_last)[1:]):
            torch.testing.assert_close(a[:, n:n + 1], b, atol=1e-5, rtol=0)
        steps_loss = steps_loss + (steps_y * weights).sum()
    torch.testing.assert_close(torch.autograd.grad((y * weights).sum(), x)[0], torch.autograd.grad(steps_loss, x)[0],
                               atol=1e-5, rtol=1e-4)


def test_the_scan_is_the_loop_for_real_and_complex_numbers():
    torch.manual_seed(0)
    a, b = torch.rand(3, 300, 4), torch.randn(3, 300, 4)
    torch.testing.assert_close(cores.scan(a, b), cores.loop(a, b), atol=1e-5, rtol=0)
    a, b = torch.randn(3, 300, 4, 2), torch.randn(3, 300, 4, 2)
    a = a / a.norm(dim=-1, keepdim=True) * torch.rand(3, 300, 4, 1)  # |a| < 1, as the LRU's lambda
    torch.testing.assert_close(cores.scan(a, b, cores.complex_mul), cores.loop(a, b, cores.complex_mul),
                               atol=1e-5, rtol=0)
    x, y = torch.randn(5, 2), torch.randn(5, 2)
    torch.testing.assert_close(torch.view_as_real(torch.view_as_complex(x) * torch.view_as_complex(y)),
                               cores.complex_mul(x, y))


class Marked(nn.Module):
    """A user's core whose parameters are named neither weight nor bias, initialised its own way."""

    def __init__(self, input_size: int, hidden_size: int):
        super().__init__()
        self.W_z = nn.Parameter(torch.full((input_size, hidden_size), 0.5))
        self.gain = nn.Parameter(torch.full((hidden_size,), 2.0))
        self.cell = nn.GRUCell(hidden_size, hidden_size)  # torch's own cell, not a torch recurrent layer

    def forward(self, x, h):  # x (N, L, F), h (1, N, H)
        outputs, h = [], h[0]
        for x_t in x.unbind(1):
            h = self.cell(torch.tanh(x_t @ self.W_z) * self.gain, h)
            outputs.append(h)
        return torch.stack(outputs, dim=1), h[None]


def check_the_model_keeps_a_cores_own_parameters(name: str) -> None:
    """The registered core `name`, not torch's own, keeps in the model the parameters its constructor made."""
    torch.manual_seed(0)
    made = model.layer_class(CORES[name])(7, 8).state_dict()
    torch.manual_seed(0)
    net = ActorCritic(gym.spaces.Box(-1, 1, (7,), np.float32), gym.spaces.Discrete(3), 16,
                      RecurrenceConfig(layer_type=name, hidden_state_size=8), initialization=InitializationConfig())
    assert made.keys() == net.core.state_dict().keys()
    for key, value in made.items():
        torch.testing.assert_close(net.core.state_dict()[key], value, atol=0, rtol=0)


def test_the_model_keeps_a_cores_own_parameters_and_initialises_torchs(monkeypatch):
    """orthogonal initialisation touches torch's own recurrent layers only: a user's core keeps what it made
    (the old rule zeroed every parameter not named weight, and orthogonalised the rest)."""
    monkeypatch.setitem(CORES, "marked", Core(Marked))
    check_the_model_keeps_a_cores_own_parameters("marked")
    gru = ActorCritic(gym.spaces.Box(-1, 1, (7,), np.float32), gym.spaces.Discrete(3), 16,
                      RecurrenceConfig(layer_type="gru", hidden_state_size=8),
                      initialization=InitializationConfig()).core
    assert not gru.bias_ih_l0.any()  # the reference's way: zero biases, orthogonal weights
    torch.testing.assert_close(gru.weight_hh_l0.T @ gru.weight_hh_l0, torch.eye(8), atol=1e-5, rtol=0)


def check_a_sequence_equals_its_steps(name: str, L: int = 9) -> None:
    """Two layers of the core `name` on L steps at once give what they give stepped one step at a time."""
    torch.manual_seed(0)
    layer, core = build(name, 2), CORES[name]
    h = torch.zeros(3, layer.state_size) if core.whole else state(core, 2, 3, 16, "cpu")
    x = torch.randn(3, L, 12)
    for a, b in zip(flat(*layer(x, h)), flat(*stepped(layer, x, h))):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=0)


@pytest.mark.parametrize("name", CORES)
def test_every_core_on_a_sequence_equals_its_steps(name):
    check_a_sequence_equals_its_steps(name)


@pytest.mark.parametrize("name", STACKED)
def test_one_layer_cores_are_stacked(name):
    check_one_layer_cores_are_stacked(name)


def check_one_layer_cores_are_stacked(name: str) -> None:
    """num_layers 3 of a one-layer core: three layers, each fed the last one's outputs, the state of each its own."""
    torch.manual_seed(0)
    stack = build(name, 3)
    assert isinstance(stack, model.Stack) and len(stack.layers) == 3
    x, h = torch.randn(2, 5, 12), state(CORES[name], 3, 2, 16, "cpu")
    y, final = stack(x, h)
    parts = h if isinstance(h, tuple) else (h,)
    for k, layer in enumerate(stack.layers):
        h_k = tuple(p[k:k + 1] for p in parts)
        x, h_k = layer(x, h_k if len(h_k) > 1 else h_k[0])
        for a, b in zip(h_k if isinstance(h_k, tuple) else (h_k,), final if isinstance(final, tuple) else (final,)):
            torch.testing.assert_close(a, b[k:k + 1])
    torch.testing.assert_close(x, y)


def test_each_core_entry_says_what_its_layer_is_and_no_core_reads_anothers_keys():
    """An entry's torch_rnn says whether its layer is torch's own (nn.RNNBase), whose initialisation the model does;
    a core built with every other core's own keys away from their defaults is the same module, its parameters and
    outputs alike."""
    for name, core in CORES.items():
        assert core.torch_rnn == issubclass(model.layer_class(core), nn.RNNBase), name
        others = {key: getattr(RecurrenceConfig, key) for other in CORES.values() if other is not core
                  for key in other.keys}
        changed = {key: (not value) if isinstance(value, bool) else 2 * value for key, value in others.items()}
        x, built = torch.randn(2, 3, 12), []
        for keys in (others, changed):
            torch.manual_seed(0)
            layer = build(name, 2, **keys)
            h = torch.zeros(2, layer.state_size) if core.whole else state(core, 2, 2, 16, "cpu")
            built.append((layer.state_dict(), flat(*layer(x, h))))
        (params, outputs), (changed_params, changed_outputs) = built
        assert params.keys() == changed_params.keys(), name
        for a, b in zip([*params.values(), *outputs], [*changed_params.values(), *changed_outputs]):
            torch.testing.assert_close(a, b, atol=0, rtol=0)


def trxl_state(core: cores.TransformerXL, counters: list[int]) -> torch.Tensor:
    """A state (N, S) whose rows have taken `counters` steps: a window filled as far as those steps, random inputs."""
    state = torch.randn(len(counters), core.state_size)
    state[:, 0] = torch.tensor(counters, dtype=torch.float32)
    return state


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("W", [5, 600])
@pytest.mark.parametrize("L", [1, 7, 64, 512])
@pytest.mark.parametrize("gated,encoding", [(False, "absolute"), (True, "absolute"), (False, "relative"),
                                            (False, "none")])
def test_transformer_xl_on_a_sequence_equals_its_steps(W, L, gated, encoding, device):
    """A window W smaller and larger than L, rows whose windows are empty, part filled and full (the slots before
    the first step masked), two blocks, each positional encoding; outputs and state to 1e-5 in float32."""
    torch.manual_seed(0)
    core = build("trxl", 2, memory_length=W, gated=gated, positional_encoding=encoding).to(device)
    if encoding == "relative":  # a bias for every distance, not the zeros it starts from
        torch.nn.init.normal_(core.distance_bias)
    x, state = torch.randn(4, L, 12, device=device), trxl_state(core, [0, 3, W, 10 * W]).to(device)
    for a, b in zip(flat(*core(x, state)), flat(*stepped(core, x, state))):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=0)


def test_transformer_xl_sequences_cut_from_a_stream_equal_the_stream_stepped():
    """As the buffer cuts a rollout: one stream of 200 steps per row stepped with the state zeroed at episode starts,
    then cut into sequences at the episode starts and every L steps, each run from the state stored before its
    first step. The windows cross sequence starts (W > L) and the episode starts reset them."""
    torch.manual_seed(0)
    core, (N, T, L) = build("trxl", 2, memory_length=24), (3, 200, 16)
    x = torch.randn(N, T, 12)
    starts = torch.rand(N, T) < 0.03  # an episode begins at these steps: the state before them is zeros
    states, outputs, h = [], [], torch.zeros(N, core.state_size)
    for t in range(T):
        h = torch.where(starts[:, t:t + 1], torch.zeros_like(h), h)
        states.append(h)
        y, h = core(x[:, t:t + 1], h)
        outputs.append(y)
    outputs = torch.cat(outputs, dim=1)  # (N, T, D)
    for n in range(N):
        cuts = sorted({0, *range(0, T, L), *starts[n].nonzero().flatten().tolist(), T})
        pieces = [(a, min(b, a + L)) for a, b in zip(cuts, cuts[1:])]
        for a, b in pieces:
            y, _ = core(x[n:n + 1, a:b], states[a][n:n + 1])
            torch.testing.assert_close(y, outputs[n:n + 1, a:b], atol=1e-5, rtol=0)


def test_transformer_xl_looks_back_memory_length_steps_per_block_and_no_further():
    """One block: step t's output depends on the inputs of steps t - W .. t and on no earlier one; the window held in
    the state reaches the first step's output."""
    torch.manual_seed(0)
    W, L = 6, 20
    core = build("trxl", 1, memory_length=W)
    x = torch.randn(1, L, 12, requires_grad=True)
    state = trxl_state(core, [W]).requires_grad_()
    y, _ = core(x, state)
    grad = torch.autograd.grad(y[0, -1].sum(), x, retain_graph=True)[0][0].abs().sum(-1)  # (L,)
    assert (grad[L - 1 - W:] > 0).all() and not grad[:L - 1 - W].any()
    window = torch.autograd.grad(y[0, 0].sum(), state)[0]
    assert window[0, 1:].any()  # the first step attends over the stored window


def test_a_whole_core_is_built_from_the_recurrence_config_and_holds_its_window():
    config = RecurrenceConfig(layer_type="trxl", hidden_state_size=16, num_layers=3, memory_length=10,
                              attention_heads=2, gated=True)
    net = ActorCritic(gym.spaces.Box(-1, 1, (7,), np.float32), gym.spaces.Discrete(3), 16, config,
                      initialization=InitializationConfig())
    assert len(net.core.blocks) == 3 and net.core.blocks[0].heads == 2 and net.core.blocks[0].gates is not None
    assert net.state_size == 1 + 3 * 10 * 16


def test_transformer_xl_on_a_sequence_equals_its_steps_under_bfloat16_autocast():
    """Under autocast the projections and attention round to bfloat16 alike in both ways; the window is kept in
    float32. Emulated on a CPU without native bfloat16 (the config refuses it there), which rounds as native does."""
    torch.manual_seed(0)
    core = build("trxl", 2, memory_length=16, gated=True)
    x, state = torch.randn(3, 64, 12), trxl_state(core, [0, 5, 40])
    with torch.autocast("cpu", dtype=torch.bfloat16):
        whole, steps = flat(*core(x, state)), flat(*stepped(core, x, state))
    assert whole[1].dtype == torch.float32
    for a, b in zip(whole, steps):
        torch.testing.assert_close(a, b, atol=2e-2, rtol=0)


@pytest.mark.parametrize("encoding", ["absolute", "relative", "none"])
def test_transformer_xl_steps_with_its_window_cached_equal_steps_without(encoding):
    """Within caching(), a rollout's steps (rows reset to zeros now and then, a call on a subset of the rows between
    steps, as a truncated episode's bootstrap value is, and a call whose state is dropped) give what the same steps
    give projecting every window."""
    torch.manual_seed(0)
    core = build("trxl", 2, memory_length=6, positional_encoding=encoding)
    if encoding == "relative":
        torch.nn.init.normal_(core.distance_bias)
    xs, N = torch.randn(20, 4, 1, 12), 4
    resets = torch.rand(20, N) < 0.15

    def rollout():
        state, outputs = torch.zeros(N, core.state_size), []
        for t in range(20):
            if t % 5 == 2:  # a peek whose state is dropped, as the rollout's last value: the next call is not its
                outputs.append(core(xs[t], state)[0])
            y, state = core(xs[t], state)
            outputs += [y, state]
            if t % 7 == 3:
                outputs.append(core(xs[t][:2], state[:2])[0])  # a subset: projected in full, the cache kept right
            state = torch.where(resets[t][:, None], torch.zeros_like(state), state)
        return outputs

    with torch.no_grad():
        plain = rollout()
        with core.caching():
            cached = rollout()
            assert core._cache
    for a, b in zip(plain, cached):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=0)
