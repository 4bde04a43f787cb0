"""fastpath.call must be the same function as calling torch's LSTM: outputs, final states and gradients; and
fastpath.sequences the same as the plain training pass."""
import gymnasium as gym
import pytest
import torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence

from config import CORES, Core, InitializationConfig, RecurrenceConfig
import fastpath
import model
from model import ActorCritic
from plumbing import machine


def call(core, x, h, fast: bool):
    """Outputs, final state and the gradients of a loss on both, with respect to x, h and the weights."""
    x = (x.detach().requires_grad_(),)
    h = tuple(p.detach().requires_grad_() for p in h)
    packed = pack_padded_sequence(x[0], LENGTHS, batch_first=True, enforce_sorted=False) if x[0].shape[1] > 1 else x[0]
    y, final = fastpath.call(core, packed, h) if fast else core(packed, h)
    y = y.data if isinstance(y, nn.utils.rnn.PackedSequence) else y
    loss = (y.float() * torch.linspace(-1, 1, y.shape[-1])).sum() + sum((f.float() ** 2).sum() for f in final)
    grads = torch.autograd.grad(loss, [*x, *h, *core.parameters()])
    return [t.detach().float() for t in (y, *final, *grads)]


LENGTHS = torch.tensor([5, 2, 7, 1, 7])  # one sequence per row; padding trails


@pytest.mark.parametrize("steps", [1, 7])  # a rollout step, a packed minibatch with padding
@pytest.mark.parametrize("layers", [1, 2])
def test_run_is_torch_lstm_in_float32(layers, steps):
    torch.manual_seed(0)
    core = nn.LSTM(6, 4, num_layers=layers, batch_first=True)
    x, h = torch.randn(5, steps, 6), (torch.randn(layers, 5, 4), torch.randn(layers, 5, 4))
    for fast, torch_ in zip(call(core, x, h, True), call(core, x, h, False)):
        torch.testing.assert_close(fast, torch_, atol=1e-5, rtol=1e-5)


@pytest.mark.skipif(not machine.bfloat16_is_fast(torch.device("cpu")), reason="this CPU does not run bfloat16 natively")
def test_run_under_bfloat16_autocast_is_close_to_float32():
    torch.manual_seed(0)
    core = nn.LSTM(64, 16, batch_first=True)
    x, h = torch.randn(5, 7, 64), (torch.randn(1, 5, 16), torch.randn(1, 5, 16))
    exact = call(core, x, h, False)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        fast = call(core, x, h, True)
    for a, b in zip(fast, exact):  # bfloat16 keeps 8 bits of mantissa: the input projection's rounding
        torch.testing.assert_close(a, b, atol=0.05 * float(b.abs().max()), rtol=0)


def test_only_torchs_own_lstm_takes_the_fast_path(monkeypatch):
    """torch's nn.LSTM itself takes fastpath's LSTM, every other core (a subclass of nn.LSTM registered as a core of
    its own included) is called as it is; and only a step or a packed sequence on a CPU takes it."""
    class MyLSTM(nn.LSTM):
        pass
    monkeypatch.setitem(CORES, "mylstm", Core(MyLSTM, state_parts=2, torch_rnn=True))
    calls, lstm = [], fastpath._lstm
    monkeypatch.setattr(fastpath, "_lstm", lambda *args: calls.append(type(args[0])) or lstm(*args))
    for name in CORES:
        net = ActorCritic(gym.spaces.Box(-1, 1, (3,)), gym.spaces.Discrete(4), 16,
                          RecurrenceConfig(layer_type=name, hidden_state_size=8), initialization=InitializationConfig())
        calls.clear()
        net.act(torch.randn(2, 3), net.initial_state(2))
        assert bool(calls) == (name == "lstm"), name
    calls.clear()
    core = nn.LSTM(4, 4, batch_first=True)
    fastpath.call(core, torch.randn(3, 5, 4), (torch.zeros(1, 3, 4),) * 2)
    assert not calls  # a padded sequence: torch's own layer


@pytest.mark.parametrize("layers", [1, 2])
def test_model_with_and_without_fastpath(monkeypatch, layers):
    """training_pass() packed and act() give the same log-probs, values, states and gradients either way."""
    torch.manual_seed(0)
    net = ActorCritic(gym.spaces.Box(-1, 1, (3,)), gym.spaces.Discrete(4), 16,
                      RecurrenceConfig(layer_type="lstm", hidden_state_size=8, num_layers=layers,
                                       separate_critic_core=True), initialization=InitializationConfig())
    mask = torch.arange(7)[None] < LENGTHS[:, None]  # (5, 7)
    obs, state = torch.randn(int(mask.sum()), 3), torch.randn(5, net.state_size)
    actions = torch.randint(0, 4, (5, 7, 1))
    monkeypatch.setattr(fastpath, "PACK_MIN_WIDTH", 0)

    def both():
        net.zero_grad()
        out = net.training_pass(obs, state, actions, mask=mask)
        (out.log_probs.sum() + out.values.square().sum()).backward()
        step = net.act(obs[:5], state, deterministic=True)
        return [out.log_probs, out.values, step.values, step.state, *(p.grad for p in net.parameters())]
    calls, lstm = [], fastpath._lstm
    monkeypatch.setattr(fastpath, "_lstm", lambda *args: calls.append(args[1]) or lstm(*args))
    fast = both()
    assert {type(x) for x in calls} == {torch.Tensor, nn.utils.rnn.PackedSequence}  # a step and a packed pass
    monkeypatch.setattr(fastpath, "call", lambda core, x, h: core(x, h))
    monkeypatch.setattr(fastpath, "PACK_MIN_WIDTH", 2 ** 62)
    monkeypatch.setattr(fastpath, "PACK_MIN_PADDING", 1.0)
    for a, b in zip(fast, both()):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5)
