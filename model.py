"""Actor-critic with a recurrent core: encoder -> GRU/LSTM -> hidden layer -> policy and value heads.

This is the only module that knows a GRU from an LSTM. Everyone else sees the
recurrent state as one tensor of shape (B, S) (`state_size`), made by
`initial_state(B)`, returned by `act()` and taken by `act()`, `value()` and
`evaluate()`. Inside, S = cores x layers x parts x H: one or two cores (the
critic's own core when `separate_critic_core` is on), each stacked layer, and
per layer 1 part for a GRU (h) or 2 for an LSTM (h, then c), of H units each.

The core's input at each step is the encoded observation (B, F), and beside it,
when recurrence.previous_action / previous_reward are on, the previous input
(B, P) made by `previous_input()` from the step before (zeros at an episode's
start). It is stored with the rollout like the observation, so the training
pass sees exactly what the rollout saw. P = 0 (both off): no concatenation.

Truncated BPTT starts each sequence from a stored state. `evaluate(burn_in=...)`
first unrolls up to K steps before the sequence without gradient (R2D2's
burn-in), and `unroll()` recomputes every stored state of a rollout with the
current parameters (recurrence.refresh_states).
"""
from __future__ import annotations

import contextlib
from typing import NamedTuple

import gymnasium as gym
import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from config import ConfigError, InitializationConfig, RecurrenceConfig
from distributions import make_distribution
from spaces import EnvSpaces, Layout, Part, layout



def _lstm_gates(gx: torch.Tensor, gh: torch.Tensor, state: tuple[torch.Tensor, ...]) -> tuple[torch.Tensor, ...]:
    """torch.nn.LSTM's step from its two projections: gx = W_ih x + b_ih, gh = W_hh h + b_hh (B, 4H),
    state (h, c) -> (h', c'), gates in torch's order (input, forget, cell, output)."""
    i, f, g, o = (gx + gh).chunk(4, dim=1)  # (B, 4H) -> 4 x (B, H)
    c = torch.sigmoid(f) * state[1] + torch.sigmoid(i) * torch.tanh(g)
    return torch.sigmoid(o) * torch.tanh(c), c


def _gru_gates(gx: torch.Tensor, gh: torch.Tensor, state: tuple[torch.Tensor, ...]) -> tuple[torch.Tensor, ...]:
    """torch.nn.GRU's step from its two projections (B, 3H), state (h,) -> (h',), gates in torch's order
    (reset, update, new); the reset gate scales the hidden projection of the new gate, bias included."""
    xr, xz, xn = gx.chunk(3, dim=1)  # (B, 3H) -> 3 x (B, H)
    hr, hz, hn = gh.chunk(3, dim=1)
    r, z = torch.sigmoid(xr + hr), torch.sigmoid(xz + hz)
    n = torch.tanh(xn + r * hn)
    return ((1 - z) * n + z * state[0],)


class Core(NamedTuple):
    layer: type  # torch's layer over sequences
    cell: object  # its one-step function on the layer's weights
    parts: int  # tensors in its state: h, or h and c
    gates: object  # its step from the two projections (_packed_sequence's)
    mkldnn_bfloat16: bool  # whether torch's fused layer runs mkldnn's bfloat16 kernel on a CPU (_packs)


CORES = {"gru": Core(nn.GRU, torch.gru_cell, 1, _gru_gates, False),
         "lstm": Core(nn.LSTM, torch.lstm_cell, 2, _lstm_gates, True)}

# Where the training pass takes the packed way (ActorCritic._packs) on a CPU, read off
# results/speed/recurrent.md and recurrent_memory_gym.md (2-core Xeon with AMX); only for core inputs F + P
# at least PACKED_MIN_FEATURES wide (an image encoder's), where every measured cell under this rule was
# faster packed. An LSTM under bfloat16 (mkldnn's fused kernel) packs them when its sequences are at most
# PACKED_MAX_STEPS long, padding or not: 1.5-3.2x. Any other core packs them when the minibatch's
# padding share reaches the least share for its L in PACKED_MIN_PADDING: 1.1-2.2x at half padding and
# L <= 32, 1.7-4.0x at 75% (a Memory Gym minibatch early in training), 3.9-9.0x at 90%. Elsewhere torch's
# fused layer over the padded slots was as fast or faster, or the packed way won only in some cells.
PACKED_MIN_FEATURES = 3072
PACKED_MAX_STEPS = 128
PACKED_MIN_PADDING = ((32, 0.5), (128, 0.75), (2 ** 62, 0.9))  # (at most L steps, at least this padding share)


def _float32(x: torch.Tensor) -> torch.Tensor:
    """x in float32: itself when it already is (a no-op .float() still costs a dispatch, and the
    rollout's step makes three)."""
    return x if x.dtype == torch.float32 else x.float()


def _linear(layer: nn.Linear, x: torch.Tensor) -> torch.Tensor:
    """layer(x) without nn.Module's call machinery (about 1.3 us a call, four calls a rollout step).
    With _float32, the width-0 encoder's skipped module call and reset_state's kept initial row, a masked-CartPole
    rollout step went from 167 to 158 us, PoC's from 130 to 122 (results/speed/rollout_step.md)."""
    return F.linear(x, layer.weight, layer.bias)


class ActOutput(NamedTuple):
    actions: torch.Tensor  # (B, k) stored action rows (spaces.py)
    log_probs: torch.Tensor  # (B,)
    values: torch.Tensor  # (B,)
    state: torch.Tensor  # (B, S) the state after this step


class BurnIn(NamedTuple):
    """The K steps before each of N sequences (recurrence.burn_in), right-aligned: slot K - 1 is the
    step just before the sequence; a sequence with fewer burn-in steps has padding in its first slots."""
    obs: torch.Tensor  # (R_b, *obs_shape): the real burn-in steps' observations alone, in mask's row-major order
    previous: torch.Tensor | None  # (N, K, P); None when P = 0
    mask: torch.Tensor  # (N, K) True on real burn-in steps


class EvaluateOutput(NamedTuple):
    log_probs: torch.Tensor  # (N, L)
    entropy: torch.Tensor  # (N, L)
    values: torch.Tensor  # (N, L)


# The packed way rounds the rows of each matrix product up (padding rows whose results are dropped): under
# bfloat16, oneDNN builds a new kernel for every new row count, 3-10 ms for a recurrent step's product and
# about 40 ms for a 3136-wide input projection, against 0.5 and 15 ms for a count it has built before
# (2-core Xeon with AMX); the real steps' count, and the sequences still going at each step, change with
# every minibatch. The real steps' rows go up to a multiple of PACKED_ROWS; a step's to _step_rows.
PACKED_ROWS = 32


def _round_up(n: int) -> int:
    """n rounded up to a multiple of PACKED_ROWS."""
    return -(-n // PACKED_ROWS) * PACKED_ROWS


def _step_rows(b: int) -> int:
    """b rounded up to one of 1-8, 10, 12, 14, 16, 20, 24, 28, 32, 40, ...: four sizes an octave, at most
    25% more rows, so a step's product meets few row counts however its sequences end."""
    if b <= 8:
        return b
    k = b.bit_length() - 3  # b in [4 * 2**k, 8 * 2**k)
    return -(-b >> k) << k


def _scatter(real: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """The real steps' rows (R, ...), in mask's row-major order, at their slots of (N, L, ...); 0 on padding."""
    N, L = mask.shape
    # (N*L, ...) zeros with the real rows put at mask's True slots (mask (N, L) -> (N*L,)) -> (N, L, ...)
    return real.new_zeros(N * L, *real.shape[1:]).index_put((mask.reshape(-1),), real).reshape(N, L, *real.shape[1:])


def _padded_rows(x: torch.Tensor, rows: int) -> torch.Tensor:
    """x (n, ...) with zero rows appended up to `rows` rows."""
    return torch.cat((x, x.new_zeros(rows - x.shape[0], *x.shape[1:]))) if rows > x.shape[0] else x


class Packing(NamedTuple):
    """N zero-padded sequences (mask (N, L), padding trailing each) as their R real steps taken one time
    step at a time, longest sequences first (the layout of torch's PackedSequence): step t of the packed
    recurrence runs the first batch_sizes[t] sequences, those still going rounded up (_step_rows, at
    most N), so few padding slots are computed. Real steps are counted in two orders:
    row-major (the order of x[mask], sequence by sequence) and time-major (the packed order)."""
    order: torch.Tensor  # (N,) the sequences longest first: packed row j is sequence order[j]
    batch_sizes: list[int]  # (L',) rows run at each step t that has a real one: non-increasing
    to_time: torch.Tensor  # (sum of batch_sizes,) packed position -> row-major index, R on padding
    to_rows: torch.Tensor  # (R,) row-major index -> packed position


def packing(mask: torch.Tensor) -> Packing:
    """The Packing of mask (N, L); refuses a mask whose padding does not trail (the buffer's never has)."""
    N, L = mask.shape
    lengths = mask.sum(1)  # (N,)
    steps = torch.arange(L, device=mask.device)
    if not torch.equal(mask, steps < lengths[:, None]):
        raise ValueError("a training mask must be True on a prefix of each sequence: padding trails")
    order = torch.argsort(lengths, descending=True, stable=True)
    first = torch.cumsum(lengths, 0) - lengths  # (N,) row-major index of each sequence's first step
    R = int(lengths.sum())
    batch_sizes = [min(_step_rows(b), N) for b in mask.sum(0).tolist() if b]  # (L,) -> (L',): padding trails
    # (L', N): row-major index of step t of packed row j where that step is real, R where it is padding
    index = torch.where(mask[order].T, first[order][None, :] + steps[:, None], R)[:len(batch_sizes)]
    runs = torch.arange(N, device=mask.device) < torch.tensor(batch_sizes, device=mask.device)[:, None]  # (L', N)
    to_time = index[runs]  # (L', N)[(L', N) rows run] -> (sum of batch_sizes,), time-major
    real = to_time < R
    to_rows = torch.empty(R, dtype=torch.long, device=mask.device)
    to_rows[to_time[real]] = torch.arange(to_time.shape[0], device=mask.device)[real]
    return Packing(order, batch_sizes, to_time, to_rows)


class _Init:
    """Applies the config's initialisation: orthogonal weights with a gain and zero
    biases, or (orthogonal off) torch's default initialisation left as it is."""

    def __init__(self, config: InitializationConfig):
        self.config = config

    def __call__(self, layer: nn.Module, gain: float) -> nn.Module:
        if self.config.orthogonal:
            for name, param in layer.named_parameters():
                if "weight" in name:
                    nn.init.orthogonal_(param, gain)
                else:
                    nn.init.zeros_(param)
        return layer


class _ImageEncoder(nn.Module):
    """The three-layer CNN of the reference baseline (seed 000) on HWC or CHW images."""

    def __init__(self, part: Part, init: _Init):
        super().__init__()
        self._channels_last, self._scale = part.channels_last, part.scale
        H, W, C = part.shape if part.channels_last else (part.shape[1], part.shape[2], part.shape[0])
        gain = init.config.hidden_gain
        self.conv = nn.Sequential(
            init(nn.Conv2d(C, 32, 8, stride=4), gain), nn.ReLU(),
            init(nn.Conv2d(32, 64, 4, stride=2), gain), nn.ReLU(),
            init(nn.Conv2d(64, 64, 3, stride=1), gain), nn.ReLU(),
            nn.Flatten())
        with torch.no_grad():
            self.out_features = self.conv(torch.zeros(1, C, H, W)).shape[1]

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        x = obs.permute(0, 3, 1, 2) if self._channels_last else obs  # (B, H, W, C) -> (B, C, H, W), a view
        # One pass over the frames: straight to the compute dtype (bfloat16 under autocast holds
        # 0..255 exactly), the 1/255 scale folded into the first layer's weights (6k numbers
        # instead of millions of pixels): results/speed/encoder.md measures both choices.
        x = x.to(compute_dtype(x.device.type))
        first = self.conv[0]
        x = F.conv2d(x, first.weight * self._scale, first.bias, first.stride)
        return self.conv[1:](x)


class _VectorEncoder(nn.Module):
    """A Linear+ReLU layer of `width` units; width 0 feeds the observation to the
    recurrent core as it is (the reference baseline's choice for vectors). A categorical
    part is first turned into one one-hot vector per index."""

    def __init__(self, part: Part, width: int, init: _Init):
        super().__init__()
        self._categories = list(part.categories)
        size = sum(self._categories) if part.kind == "categorical" else part.size
        # None for width 0: the observation goes on as it is, without a module call at every step
        self.net = (nn.Sequential(init(nn.Linear(size, width), init.config.hidden_gain), nn.ReLU())
                    if width > 0 else None)
        self.out_features = width if width > 0 else size

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        x = obs.reshape(obs.shape[0], -1)  # (B, *shape) -> (B, size); a Discrete part is (B,)
        if self._categories:  # (B, k) indices -> (B, sum of the categories), one one-hot block per index
            x = torch.cat([F.one_hot(i.long(), n) for i, n in zip(x.unbind(1), self._categories)], dim=1)
        x = x.float()
        return x if self.net is None else self.net(x)


def bfloat16_is_fast(device: torch.device) -> bool:
    """Whether bfloat16 matrix work runs natively: AVX-512 BF16 or AMX on a CPU (elsewhere
    oneDNN emulates it; a MiniGrid CNN ran 14x slower so on an EPYC without it), or a GPU
    that supports it."""
    if device.type == "cuda":
        return torch.cuda.is_bf16_supported()
    try:
        flags = next(line for line in open("/proc/cpuinfo") if line.startswith("flags")).split()
    except (OSError, StopIteration):
        return False
    return "avx512_bf16" in flags or "amx_bf16" in flags


def no_gradient(device: torch.device):
    """The grad mode for acting: inference_mode, except inside an autocast region.

    inference_mode skips autograd's bookkeeping (a masked-CartPole step: 123 us against 142 us under
    no_grad), but under it autocast does not keep the weights' bfloat16 copies between calls and
    casts them again at every step (a MiniGrid step under bfloat16: 4.6 ms against 3.6 ms under
    no_grad); results/speed/grad_mode.md. act() and value() enter it themselves unless their caller
    already turned gradients off: the trainer's rollout enters it once for all its steps, which
    saved 33-70 us of a 16-environment step on the fast configs (alternated in one process, best of
    12; the end-to-end effect: results/speed/fast_against_5176396.md)."""
    if not torch.is_grad_enabled():
        return contextlib.nullcontext()
    return torch.no_grad() if torch.is_autocast_enabled(device.type) else torch.inference_mode()


def check_precision(precision: str, device: torch.device) -> None:
    """Refuses precision bfloat16 on a device that does not run it natively (auto takes float32 there):
    on a CPU without AVX-512 BF16 or AMX, oneDNN cannot build a bfloat16 LSTM at all (the training pass
    raised its RuntimeError) and emulates the rest about 14x slower than float32."""
    if precision == "bfloat16" and not bfloat16_is_fast(device):
        what = "this GPU" if device.type == "cuda" else "this CPU (bfloat16 needs AVX-512 BF16 or AMX)"
        raise ConfigError(f"config key 'precision' = 'bfloat16' is not allowed on {what}: it does not run bfloat16 "
                          "natively; use auto (bfloat16 where it is native, else float32) or float32")


def autocast(precision: str, device: torch.device) -> torch.autocast:
    """The autocast region of a config's precision: bfloat16 (or auto where bfloat16_is_fast), else off."""
    on = precision == "bfloat16" or (precision == "auto" and bfloat16_is_fast(device))
    return torch.autocast(device.type, dtype=torch.bfloat16, enabled=on)


def compute_dtype(device_type: str) -> torch.dtype:
    """bfloat16 inside an autocast region (config `precision`), else float32."""
    if torch.is_autocast_enabled(device_type):
        return torch.get_autocast_dtype(device_type)
    return torch.float32


def _encoder(part: Part, vector_width: int, init: _Init) -> nn.Module:
    return _ImageEncoder(part, init) if part.kind == "image" else _VectorEncoder(part, vector_width, init)


class _PartsEncoder(nn.Module):
    """A packed observation (B, D) float -> each part unpacked and encoded -> features concatenated."""

    def __init__(self, observation: Layout, vector_width: int, init: _Init):
        super().__init__()
        self.parts = observation.parts
        self.encoders = nn.ModuleList(_encoder(p, vector_width, init) for p in self.parts)
        self.out_features = sum(e.out_features for e in self.encoders)

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        B = obs.shape[0]
        parts = [encoder(obs[:, p.start:p.start + p.size].reshape(B, *p.shape))  # (B, D) -> (B, *part's shape)
                 for p, encoder in zip(self.parts, self.encoders)]
        return torch.cat(parts, dim=-1)  # (B, sum of the parts' features)


class ActorCritic(nn.Module):
    def __init__(self, observation: Layout | gym.Space, action_space: gym.Space, hidden_layer_size: int,
                 recurrence: RecurrenceConfig, vector_encoder_size: int = 0,
                 initialization: InitializationConfig | None = None):
        """observation: the stored layout (spaces.Layout) or the environment's own observation space."""
        super().__init__()
        init = _Init(initialization or InitializationConfig())
        gains = init.config
        if isinstance(observation, gym.Space):
            observation = layout(observation)
        self.observation_layout = observation  # what act() takes, for Agent's checks
        self.encoder = (_PartsEncoder(observation, vector_encoder_size, init) if observation.packed
                        else _encoder(observation.parts[0], vector_encoder_size, init))
        self.distribution = make_distribution(action_space)
        # P: the previous action's features and the previous reward, fed to the core beside the observation's
        self.previous_size = (self.distribution.n_features * recurrence.previous_action
                              + int(recurrence.previous_reward))
        self._recurrence = recurrence
        self._no_previous: dict = {}  # (B, device) -> the empty (B, 0) previous input when P = 0
        self._initial_row: dict = {}  # device -> initial_state(1), which reset_state() broadcasts

        self._core = CORES[recurrence.layer_type]
        layer, self._cell, self._parts, self._gates = self._core[:4]
        self.hidden_size, self.layers = recurrence.hidden_state_size, recurrence.num_layers
        width = hidden_layer_size

        def core():
            return init(layer(self.encoder.out_features + self.previous_size, self.hidden_size,
                              num_layers=self.layers, batch_first=True), gains.recurrent_gain)

        self.core = core()
        # the one-step function's weights of layer k, by name (see _step_core)
        self._weight_names = [(f"weight_ih_l{k}", f"weight_hh_l{k}", f"bias_ih_l{k}", f"bias_hh_l{k}")
                              for k in range(self.layers)]
        self.hidden = init(nn.Linear(self.hidden_size, width), gains.hidden_gain)
        # With a separate critic core the value function has its own core and hidden
        # layer: actor and critic then share only the encoder.
        self.critic_core = core() if recurrence.separate_critic_core else None
        self.critic_hidden = (init(nn.Linear(self.hidden_size, width), gains.hidden_gain)
                              if recurrence.separate_critic_core else None)
        self._cores = 2 if recurrence.separate_critic_core else 1
        # The policy and value branches' hidden layers side by side in one Linear
        # (the same function as two, in one matrix product); rows [0, width) feed
        # the policy, rows [width, 2 width) the value, each with its own init.
        self.branches = nn.Linear(width, 2 * width)
        if gains.orthogonal:
            for half in self.branches.weight.data.chunk(2, dim=0):
                nn.init.orthogonal_(half, gains.hidden_gain)
            nn.init.zeros_(self.branches.bias)
        self.policy_out = init(nn.Linear(width, self.distribution.n_params), gains.policy_gain)
        self.value_out = init(nn.Linear(width, 1), gains.value_gain)

    # ---------------------------------------------------------- recurrent state
    @property
    def state_size(self) -> int:
        return self._cores * self._parts * self.layers * self.hidden_size

    def initial_state(self, batch: int, device=None) -> torch.Tensor:
        return torch.zeros(batch, self.state_size, device=device)

    def reset_state(self, state: torch.Tensor, starts: np.ndarray | torch.Tensor) -> torch.Tensor:
        """state (B, S) with the rows of environments that begin an episode (starts (B,) bool, numpy or
        on the state's device) set to the initial state when recurrence.reset_hidden_state is on (else
        unchanged): the one place the reset at an episode's start is written."""
        if not self._recurrence.reset_hidden_state:
            return state
        if not isinstance(starts, torch.Tensor):
            if not starts.any():
                return state
            starts = torch.from_numpy(np.asarray(starts, dtype=bool)).to(state.device)
        if state.device not in self._initial_row:
            self._initial_row[state.device] = self.initial_state(1, state.device)
        return torch.where(starts.unsqueeze(1), self._initial_row[state.device], state)  # (B,) -> (B, 1)

    # ----------------------------------------------------------- previous input
    def previous_input(self, actions: torch.Tensor, rewards) -> torch.Tensor:
        """What the core sees of the step before, beside the next observation: the action taken,
        stored rows (B, k), and the raw reward the environment gave for it (B,) -> (B, P).

        The action as its distribution encodes it (one-hot per categorical branch, 0/1 for
        MultiBinary, the Gaussian's sample before the bounds clip it), then the reward times
        previous_reward_scale, clipped to [-previous_reward_clip, previous_reward_clip].
        """
        config, parts = self._recurrence, []
        if not self.previous_size:  # every rollout step asks: one empty (B, 0) tensor per batch size and device
            key = (actions.shape[0], actions.device)
            if key not in self._no_previous:
                self._no_previous[key] = torch.zeros(key[0], 0, device=key[1])
            return self._no_previous[key]
        with torch.inference_mode():
            if config.previous_action:
                parts.append(self.distribution.features(actions))  # (B, n_features)
            if config.previous_reward:
                reward = torch.as_tensor(rewards, dtype=torch.float32, device=actions.device)
                reward = reward * config.previous_reward_scale
                if config.previous_reward_clip is not None:
                    reward = reward.clamp(-config.previous_reward_clip, config.previous_reward_clip)
                parts.append(reward.unsqueeze(1))  # (B,) -> (B, 1)
            return torch.cat(parts, dim=1)

    def reset_previous(self, previous: torch.Tensor, starts: np.ndarray) -> torch.Tensor:
        """previous (B, P) with the rows of environments that begin an episode (starts (B,) bool) set to
        zeros: an episode's first step has no step before it."""
        if not self.previous_size or not starts.any():
            return previous
        starts = torch.from_numpy(np.asarray(starts, dtype=bool)).to(previous.device).unsqueeze(1)  # (B,) -> (B, 1)
        return previous.masked_fill(starts, 0.0)

    def _with_previous(self, x: torch.Tensor, previous: torch.Tensor | None) -> torch.Tensor:
        """Encoder features (..., F) -> the core's input (..., F + P); x itself when P = 0."""
        if not self.previous_size:
            return x
        if previous is None:  # never zeros by accident
            raise ValueError("this model takes the previous action/reward (recurrence.previous_*): pass previous")
        return torch.cat((x, previous), dim=-1)

    def _sequence_state(self, state: torch.Tensor, core: int):
        """(B, S) -> core's state in the layout torch's GRU (h) / LSTM ((h, c)) take: (layers, B, H) each."""
        B = state.shape[0]
        # (B, S) -> (B, cores, layers, parts, H) -> (parts, layers, B, H) of this core
        parts = state.view(B, self._cores, self.layers, self._parts, self.hidden_size)[:, core].permute(2, 1, 0, 3)
        return parts[0].contiguous() if self._parts == 1 else (parts[0].contiguous(), parts[1].contiguous())

    # ------------------------------------------------------------------ forward
    def _step_core(self, index: int, core: nn.Module, x: torch.Tensor, state: torch.Tensor):
        """One step of core `index`: x (B, F), state (B, S) -> output (B, H), its new state pieces (B, H) in order.

        Uses the layer's one-step function on the layer's own weights: the same
        arithmetic as the sequence call in evaluate(), at a third of its overhead
        for a single step. Each piece of the state is a column slice of (B, S).
        """
        H, parts, new = self.hidden_size, self._parts, []
        for k, names in enumerate(self._weight_names):
            weights = [getattr(core, name) for name in names]
            col = (index * self.layers + k) * parts * H  # where this layer's h (then c) begins
            if parts == 1:
                x = self._cell(x, state[:, col:col + H], *weights)
                new.append(x)
            else:
                x, cell = self._cell(x, (state[:, col:col + H], state[:, col + H:col + 2 * H]), *weights)
                new += [x, cell]
        return x, new

    def _sequence(self, index: int, core: nn.Module, x: torch.Tensor, state: torch.Tensor) -> torch.Tensor:
        """Core `index` over N sequences in torch's fused layer (mkldnn's RNN kernel on a CPU): input x
        (N, L, F + P), padding slots included, state (N, S) before their first step -> the last layer's
        outputs (N, L, H)."""
        y, _ = core(x, self._sequence_state(state, index))
        return y

    def _packed_sequence(self, index: int, core: nn.Module, x: torch.Tensor, state: torch.Tensor,
                         pack: Packing) -> torch.Tensor:
        """Core `index` over the real steps: input x (R, F + P) in row-major order, state (N, S) before
        each sequence's first step -> the last layer's outputs (R, H), row-major.

        The same function as _sequence on the real steps: each layer's input projection W_ih x + b_ih of
        all R steps as one matrix product, then the recurrence one time step at a time over the
        sequences still going (pack.batch_sizes, rounded up). The gates' arithmetic is float32 under
        autocast too. Why by hand, and where it is faster than the fused layer: the PACKED_* comment.
        """
        H, parts, R = self.hidden_size, self._parts, x.shape[0]
        for k, names in enumerate(self._weight_names):
            w_ih, w_hh, b_ih, b_hh = (getattr(core, name) for name in names)
            col = (index * self.layers + k) * parts * H  # where this layer's h (then c) begins
            # (N, H) each, longest sequences first
            pieces = tuple(state[pack.order, col + j * H:col + (j + 1) * H] for j in range(parts))
            if k == 0:  # (R, F) -> (R' > R, F): row R is padding's input (zeros); -> packed order
                gx = F.linear(_padded_rows(x, _round_up(R + 1)), w_ih, b_ih).float()[pack.to_time]
            else:  # the later layers' inputs are packed already: (sum of batch_sizes, H), rows rounded up
                gx = F.linear(_padded_rows(x, _round_up(len(x))), w_ih, b_ih).float()[:len(x)]  # (.., G*H), G gates
            outputs, start = [], 0
            for b in pack.batch_sizes:
                pieces = tuple(p[:b] for p in pieces)  # the sequences still going are among the first b
                pieces = self._gates(gx[start:start + b], F.linear(pieces[0], w_hh, b_hh).float(), pieces)
                outputs.append(pieces[0])
                start += b
            x = torch.cat(outputs)  # L' x (b_t, H) -> (sum of batch_sizes, H) packed: the next layer's input
        return x[pack.to_rows]  # packed -> row-major

    def _packs(self, width: int, steps: int, real: int, slots: int, device: torch.device) -> bool:
        """Whether the training pass takes the packed way for inputs `width` wide, sequences of `steps`
        slots, `real` real steps among `slots` slots (equal without padding): only where it was measured
        faster (PACKED_*), and never without a real step."""
        if device.type != "cpu" or width < PACKED_MIN_FEATURES or real == 0:
            return False
        if self._core.mkldnn_bfloat16 and compute_dtype("cpu") == torch.bfloat16:
            return steps <= PACKED_MAX_STEPS
        least = next(share for longest, share in PACKED_MIN_PADDING if steps <= longest)
        return 1.0 - real / slots >= least  # exact counts: a share of 0.9 is 0.9

    def _step(self, obs: torch.Tensor, state: torch.Tensor, previous: torch.Tensor | None):
        """One step for B environments: obs (B, *obs_shape), state (B, S), previous (B, P) -> core output,
        next state (B, S)."""
        return self._advance(self._with_previous(self.encoder(obs), previous), state)

    def _advance(self, x: torch.Tensor, state: torch.Tensor):
        """One step of every core: input x (B, F + P), state (B, S) -> core output, next state (B, S)."""
        y, new = self._step_core(0, self.core, x, state)
        if self.critic_core is not None:
            y_critic, new_critic = self._step_core(1, self.critic_core, x, state)
            y = torch.cat((y, y_critic), dim=-1)  # (B, H) twice -> (B, 2H): actor and critic side by side
            new += new_critic
        # the pieces (B, H) in the state's order -> (B, S); a one-layer GRU's state is its output as it is;
        # kept in float32 under autocast too (the buffer stores it, the next step starts from it)
        return y, _float32(new[0] if len(new) == 1 else torch.cat(new, dim=1))

    def _heads(self, y: torch.Tensor):
        """Core output (B, H), or (B, 2H) with a critic core -> policy parameters (B, P), values (B,)."""
        if self.critic_core is None:
            policy, value = torch.relu(_linear(self.branches, torch.relu(_linear(self.hidden, y)))).chunk(2, dim=-1)
        else:
            actor, critic = y.chunk(2, dim=-1)
            # The branches layer's policy rows see only the actor's features, its value rows only the critic's.
            policy = torch.relu(_linear(self.branches, torch.relu(_linear(self.hidden, actor)))).chunk(2, dim=-1)[0]
            value = torch.relu(_linear(self.branches, torch.relu(_linear(self.critic_hidden, critic))))
            value = value.chunk(2, dim=-1)[1]
        # float32 out of any autocast region: log-probs, entropy and losses are computed in full precision
        return _float32(_linear(self.policy_out, policy)), _float32(_linear(self.value_out, value).squeeze(-1))

    def act(self, obs: torch.Tensor, state: torch.Tensor, deterministic: bool = False,
            action_mask: torch.Tensor | None = None, previous: torch.Tensor | None = None) -> ActOutput:
        """obs (B, *obs_shape), state (B, S), action_mask (B, A) bool or None, previous (B, P) (needed when P > 0)."""
        with no_gradient(obs.device):
            y, state = self._step(obs, state, previous)
            params, values = self._heads(y)
            actions, log_probs = self.distribution.sample(params, action_mask, deterministic)
        return ActOutput(actions, log_probs, values, state)

    def value(self, obs: torch.Tensor, state: torch.Tensor, previous: torch.Tensor | None = None) -> torch.Tensor:
        """V(obs) for B environments given the state and the previous input (B, P) before obs: (B,)."""
        with no_gradient(obs.device):
            y, _ = self._step(obs, state, previous)
            return self._heads(y)[1]

    def _sequence_inputs(self, obs: torch.Tensor, previous: torch.Tensor | None,
                         mask: torch.Tensor | None) -> torch.Tensor:
        """The core's inputs (N, L, F + P) from obs (N, L, *obs_shape) with mask None, or with mask (N, L),
        True on real steps, from the real steps' observations alone (R, *obs_shape), row-major: then the
        encoder sees the real steps only and padding slots get zero features. previous (N, L, P)."""
        if mask is None:
            N, L = obs.shape[:2]
            # (N, L, *obs) -> (N*L, *obs) -> (N*L, F) -> (N, L, F): batch_first, never (L, N, F)
            x = self.encoder(obs.reshape(N * L, *obs.shape[2:])).reshape(N, L, -1)
        else:
            x = _scatter(self.encoder(obs), mask)  # (R, F) for the R real steps -> (N, L, F)
        return self._with_previous(x, previous)

    def evaluate(self, obs: torch.Tensor, state: torch.Tensor, actions: torch.Tensor,
                 action_mask: torch.Tensor | None = None, mask: torch.Tensor | None = None,
                 previous: torch.Tensor | None = None, burn_in: BurnIn | None = None) -> EvaluateOutput:
        """Training pass over N sequences of length L.

        obs (N, L, *obs_shape), state (N, S) before each sequence's first step (or, with
        burn_in, before its first burn-in step), actions (N, L, k), action_mask (N, L, A)
        or None, previous (N, L, P) (needed when P > 0). With mask (N, L), True on real
        steps, obs holds the real steps' observations alone, (R, *obs_shape) in mask's
        row-major order (what obs[mask] gives of the padded form), and the encoder sees
        those only: padding trails each sequence, so the core's outputs on real steps never
        depend on it, and it enters no loss. Short episodes pad heavily (10-step episodes in
        sequences of 8: 6 slots of 16; whole episodes of 5 to 60 steps: most slots), so an
        image encoder saves that share.

        Two ways to one function (_packs chooses): one call of torch's fused layer per core over
        every slot, padding included; or the packed way (_evaluate_packed), where the core, the
        heads and the distribution see the R real steps only and padding slots read 0.
        """
        N, L = actions.shape[:2]
        R = N * L if mask is None else int(mask.sum())  # real steps
        if mask is not None and obs.shape != (expected := (R, *self.observation_layout.shape)):
            raise ValueError(f"with a mask, obs holds the real steps' observations alone: expected shape "
                             f"{expected}, got {tuple(obs.shape)}")
        if burn_in is not None:
            state = self.burn_in_state(state, burn_in)
        if self._packs(self.encoder.out_features + self.previous_size, L, R, N * L, obs.device):
            return self._evaluate_packed(obs, state, actions, action_mask, mask, previous)
        x = self._sequence_inputs(obs, previous, mask)  # (N, L, F + P)
        y = self._sequence(0, self.core, x, state)  # (N, L, H)
        if self.critic_core is not None:
            y = torch.cat((y, self._sequence(1, self.critic_core, x, state)), dim=-1)  # (N, L, 2H)
        params, values = self._heads(y.reshape(N * L, -1))  # (N, L, H) -> (N*L, H)
        flat_mask = None if action_mask is None else action_mask.reshape(N * L, -1)  # (N, L, A) -> (N*L, A)
        log_prob, entropy = self.distribution.evaluate(
            params, actions.reshape(N * L, -1), flat_mask)  # actions (N, L, k) -> (N*L, k)
        # (N*L,) -> (N, L)
        return EvaluateOutput(log_prob.reshape(N, L), entropy.reshape(N, L), values.reshape(N, L))

    def _evaluate_packed(self, obs: torch.Tensor, state: torch.Tensor, actions: torch.Tensor,
                         action_mask: torch.Tensor | None, mask: torch.Tensor | None,
                         previous: torch.Tensor | None) -> EvaluateOutput:
        """evaluate()'s packed way, its arguments as there (state after any burn-in): the core, the heads
        and the distribution on the R real steps only; padding slots read 0."""
        N, L = actions.shape[:2]
        if mask is None:  # every slot is a real step: (N, L, *obs) -> (R = N*L, *obs), row-major
            obs, mask = obs.reshape(N * L, *obs.shape[2:]), torch.ones(N, L, dtype=torch.bool, device=obs.device)
        pack = packing(mask)
        previous = None if previous is None else previous[mask]  # (N, L, P)[mask] -> (R, P)
        x = self._with_previous(self.encoder(obs), previous)  # (R, F + P)
        y = self._packed_sequence(0, self.core, x, state, pack)  # (R, H)
        if self.critic_core is not None:
            y = torch.cat((y, self._packed_sequence(1, self.critic_core, x, state, pack)), dim=-1)  # (R, 2H)
        R = y.shape[0]
        params, values = (v[:R] for v in self._heads(_padded_rows(y, _round_up(R))))  # rows rounded up, then dropped
        log_prob, entropy = self.distribution.evaluate(
            params, actions[mask], None if action_mask is None else action_mask[mask])  # (N, L, ...)[mask] -> (R, ...)
        return EvaluateOutput(_scatter(log_prob, mask), _scatter(entropy, mask), _scatter(values, mask))

    @torch.no_grad()
    def burn_in_state(self, state: torch.Tensor, burn: BurnIn) -> torch.Tensor:
        """The state at each sequence's start (N, S): its burn-in steps unrolled one step at a time from
        state (N, S), the state before its first burn-in step, with no gradient (they enter no loss).
        A row's state advances only on its real burn-in steps; burn-in never crosses an episode's
        start (the buffer takes it from the sequence's own episode), so there is nothing to reset."""
        K = burn.mask.shape[1]
        first = K - int(burn.mask.sum(1).max())  # right-aligned: no row has a real step before this slot
        if first == K:  # no sequence here has burn-in steps (each begins its episode or the rollout)
            return state
        x = self._sequence_inputs(burn.obs, burn.previous, burn.mask)  # (N, K, F + P), zeros on padding
        for i in range(first, K):
            _, new = self._advance(x[:, i], state)
            state = torch.where(burn.mask[:, i:i + 1], new, state)  # (N, 1): padding rows keep their state
        return state

    @torch.no_grad()
    def unroll(self, obs: torch.Tensor, previous: torch.Tensor | None, state: torch.Tensor, starts: torch.Tensor,
               chunk: int) -> torch.Tensor:
        """The state before every step of a rollout, recomputed with the current parameters
        (recurrence.refresh_states): obs (W, T, *obs_shape), previous (W, T, P) or None, state (W, S)
        before step 0 (kept: nothing before the rollout can be recomputed), starts (W, T) True where an
        episode begins (reset_state() applies there, as in the rollout). The encoder takes `chunk`
        steps at a time. -> (W, T, S)."""
        W, T = starts.shape
        flat = obs.reshape(W * T, *obs.shape[2:])  # (W, T, *obs) -> (W*T, *obs)
        x = torch.cat([self.encoder(part) for part in flat.split(chunk)])  # (W*T, F)
        x = self._with_previous(x.reshape(W, T, -1), previous)  # (W*T, F) -> (W, T, F + P)
        states = [state]
        for t in range(1, T):
            _, state = self._advance(x[:, t - 1], state)
            state = self.reset_state(state, starts[:, t])
            states.append(state)
        return torch.stack(states, dim=1)  # T x (W, S) -> (W, T, S)


def build_model(config, spaces: EnvSpaces) -> ActorCritic:
    """The model a config describes, for the environment's spaces (environments.spaces_of);
    sizes whose parameters cannot be allocated are a ConfigError, not a crash."""
    try:
        return ActorCritic(spaces.observation, spaces.action_space, config.hidden_layer_size, config.recurrence,
                           config.vector_encoder_size, config.initialization)
    except (MemoryError, RuntimeError) as error:
        # torch words it "can't allocate memory", or "Storage size calculation overflowed" for sizes
        # whose byte count passes 2**63
        if not isinstance(error, MemoryError) and "alloc" not in str(error) and "overflow" not in str(error):
            raise
        raise ConfigError("the model's parameters do not fit in memory: lower hidden_layer_size, "
                          "recurrence.hidden_state_size or vector_encoder_size") from None
