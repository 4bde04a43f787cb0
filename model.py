"""Actor-critic: encoder -> recurrent core -> heads. The only module that holds a core (cores.py): the others pass
the recurrent state along as one tensor (B, S), S = cores x layers x parts x H (h, or h and c)."""
import contextlib
import importlib
from typing import NamedTuple

import gymnasium as gym
import numpy as np
import torch
from torch import nn
from torch.nn import functional as F
from torch.nn.utils.rnn import PackedSequence

from config import CORES, Core, InitializationConfig, RecurrenceConfig
from distributions import make_distribution, one_hot
import fastpath
from plumbing.errors import ConfigError
from plumbing.machine import compute_dtype, no_gradient
from spaces import EnvSpaces, Layout, Part, SpaceError, layout


class Stack(nn.Module):
    """One-layer cores stacked: each layer's outputs are the next one's inputs; the state (layers, N, H) per part."""

    def __init__(self, layers: list[nn.Module]):
        super().__init__()
        self.layers = nn.ModuleList(layers)

    def forward(self, x: torch.Tensor, state):
        parts = state if isinstance(state, tuple) else (state,)
        finals = []
        for k, layer in enumerate(self.layers):
            h = tuple(part[k:k + 1] for part in parts)  # (layers, N, H) -> this layer's (1, N, H)
            x, h = layer(x, h if len(h) > 1 else h[0])
            finals.append(h if isinstance(h, tuple) else (h,))
        final = tuple(torch.cat(part) for part in zip(*finals))  # layers x (1, N, H) -> (layers, N, H) per part
        return x, final if len(final) > 1 else final[0]


def layer_class(core: Core) -> type:
    """The core's module class, imported where its entry names it as "module.Class"."""
    if not isinstance(core.layer, str):
        return core.layer
    module, _, name = core.layer.rpartition(".")
    return getattr(importlib.import_module(module), name)


def build_core(core: Core, input_size: int, recurrence: RecurrenceConfig) -> nn.Module:
    """torch's own RNNs stack their layers: layer(F, H, num_layers=, batch_first=True). A whole core reads its keys
    from the recurrence config itself. Any other core is built one layer at a time as layer(F, H), and stacked here."""
    layer, hidden_size, num_layers = layer_class(core), recurrence.hidden_state_size, recurrence.num_layers
    if core.whole:
        return layer(input_size, recurrence)
    if core.torch_rnn:
        return layer(input_size, hidden_size, num_layers=num_layers, batch_first=True)
    if num_layers == 1:
        return layer(input_size, hidden_size)
    return Stack([layer(input_size if k == 0 else hidden_size, hidden_size) for k in range(num_layers)])


class ActOutput(NamedTuple):
    actions: torch.Tensor
    log_probs: torch.Tensor
    values: torch.Tensor
    state: torch.Tensor
    policy_outputs: torch.Tensor  # (B, n_params): the policy head's output, the action distribution's parameters


class BurnIn(NamedTuple):
    """The K steps before each of N sequences, right-aligned (padding first): obs[mask], previous (N, K, P) or None."""
    obs: torch.Tensor
    previous: torch.Tensor | None
    mask: torch.Tensor


class EvaluateOutput(NamedTuple):
    log_probs: torch.Tensor  # (N, L), 0 on padding as every field
    entropy: torch.Tensor  # (N, L)
    values: torch.Tensor  # (N, L)
    core_outputs: torch.Tensor  # (N, L, cores x H): what the cores gave the heads
    auxiliary: dict[str, torch.Tensor] = {}  # the loss of each real step (R,) by AUXILIARY_HEADS' name


def _scatter(real: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    N, L = mask.shape
    # the real steps' rows (R, ...), in mask's row-major order, at mask's True slots of (N*L, ...) -> (N, L, ...)
    return real.new_zeros(N * L, *real.shape[1:]).index_put((mask.reshape(-1),), real).reshape(N, L, *real.shape[1:])


class _Init(NamedTuple):
    config: InitializationConfig

    def __call__(self, layer: nn.Module, gain: float) -> nn.Module:
        if self.config.orthogonal:
            for name, param in layer.named_parameters():
                if "weight" in name:
                    nn.init.orthogonal_(param, gain)
                else:
                    nn.init.zeros_(param)
        return layer


# The reference baseline's CNN: (output channels, kernel, stride) of each layer, each followed by a ReLU
CNN = ((32, 8, 4), (64, 4, 2), (64, 3, 1))


def _image_shape(part: Part) -> tuple[int, int, int]:
    """H, W, C of an image part, HWC or CHW."""
    return part.shape if part.channels_last else (part.shape[1], part.shape[2], part.shape[0])


def feature_maps(H: int, W: int) -> list[tuple[int, int]]:
    """The image's height and width, then those of each CNN layer's output."""
    sizes = [(H, W)]
    for _, kernel, stride in CNN:
        sizes.append(tuple((n - kernel) // stride + 1 for n in sizes[-1]))
    return sizes


class _ImageEncoder(nn.Module):
    """The reference baseline's three-layer CNN, on HWC or CHW images."""

    def __init__(self, part: Part, init: _Init):
        super().__init__()
        self._channels_last, self._scale = part.channels_last, part.scale
        H, W, C = _image_shape(part)
        side = 1  # the fewest pixels a side that leave one output pixel after every layer
        for _, kernel, stride in reversed(CNN):
            side = (side - 1) * stride + kernel
        if min(H, W) < side:
            where = f" '{part.key}'" if part.key else ""
            raise SpaceError(f"the image observation{where} is {H}x{W} pixels: the CNN's kernels need at least "
                             f"{side}x{side} (resize it, e.g. with gymnasium.wrappers.ResizeObservation)")
        layers, channels = [], C
        for out, kernel, stride in CNN:
            layers += [init(nn.Conv2d(channels, out, kernel, stride=stride), init.config.hidden_gain), nn.ReLU()]
            channels = out
        self.conv = nn.Sequential(*layers, nn.Flatten())
        h, w = feature_maps(H, W)[-1]
        self.out_features = channels * h * w

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        x = obs.permute(0, 3, 1, 2) if self._channels_last else obs  # (B, H, W, C) -> (B, C, H, W), a view
        # one pass over the pixels: to the compute dtype (bfloat16 holds 0..255), the scale in the weights
        first = self.conv[0]
        x = F.conv2d(x.to(compute_dtype(x.device.type)), first.weight * self._scale, first.bias, first.stride)
        return self.conv[1:](x)


class _VectorEncoder(nn.Module):
    """Linear + ReLU of `width` units, or (width 0) the observation as it is; categorical parts one-hot."""

    def __init__(self, part: Part, width: int, init: _Init):
        super().__init__()
        self._categories = list(part.categories)
        size = sum(self._categories) if part.kind == "categorical" else part.size
        self.net = (nn.Sequential(init(nn.Linear(size, width), init.config.hidden_gain), nn.ReLU())
                    if width > 0 else nn.Identity())
        self.out_features = width if width > 0 else size

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        x = obs.reshape(obs.shape[0], -1)  # (B, *shape) -> (B, size); a Discrete part is (B,)
        if self._categories:
            x = one_hot(x, self._categories)
        return self.net(x.float())


def _encoder(part: Part, vector_width: int, init: _Init) -> nn.Module:
    return _ImageEncoder(part, init) if part.kind == "image" else _VectorEncoder(part, vector_width, init)


class _PartsEncoder(nn.Module):
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


class ObservationDecoder(nn.Module):
    """The observation back from the cores' outputs, for the Memory Gym paper's reconstruction loss (Pleines et al.
    2025): an image part through the CNN transposed, scored by binary cross-entropy on its pixels in [0, 1] (as the
    authors' code), any other part through one Linear, by squared error (categories one-hot). y (R, F) and obs
    (R, *obs_shape) of the real steps -> the loss of each step (R,), the mean over the parts."""

    def __init__(self, observation: Layout, features: int, init: _Init):
        super().__init__()
        self.parts = observation.parts
        self.decoders = nn.ModuleList(self._image(p, features, init) if p.kind == "image"
                                      else init(nn.Linear(features, sum(p.categories) or p.size),
                                                init.config.hidden_gain) for p in self.parts)

    @staticmethod
    def _image(part: Part, features: int, init: _Init) -> nn.Module:
        """The CNN's layers transposed, last first, each back to its input's exact size; logits of the pixels."""
        H, W, C = _image_shape(part)
        sizes, gain = feature_maps(H, W), init.config.hidden_gain
        (h, w), channels = sizes[-1], CNN[-1][0]
        layers = [init(nn.Linear(features, channels * h * w), gain), nn.ReLU(), nn.Unflatten(1, (channels, h, w))]
        for k in reversed(range(len(CNN))):
            _, kernel, stride = CNN[k]
            out = CNN[k - 1][0] if k else C
            padding = tuple(n - ((m - 1) * stride + kernel) for n, m in zip(sizes[k], sizes[k + 1]))
            layers.append(init(nn.ConvTranspose2d(channels, out, kernel, stride, output_padding=padding), gain))
            layers += [nn.ReLU()] if k else []
            channels = out
        return nn.Sequential(*layers)

    def forward(self, y: torch.Tensor, obs: torch.Tensor) -> torch.Tensor:
        R, losses = obs.shape[0], []
        for part, decoder in zip(self.parts, self.decoders):
            target = obs.reshape(R, -1)[:, part.start:part.start + part.size].reshape(R, *part.shape)
            predicted = decoder(y).float()
            if part.kind == "image":
                target = target.permute(0, 3, 1, 2) if part.channels_last else target  # (R, H, W, C) -> (R, C, H, W)
                target = (target.float() * part.scale).clamp(0, 1)
                error = F.binary_cross_entropy_with_logits(predicted, target, reduction="none")
            else:
                target = (one_hot(target.reshape(R, -1), list(part.categories)) if part.categories
                          else target.reshape(R, -1)).float()
                error = (predicted - target).square()
            losses.append(error.flatten(1).mean(1))
        return torch.stack(losses).mean(0)


class Head(NamedTuple):
    coefficient: str  # the config key that weighs its loss term: the head exists while it is above 0
    module: type  # built as module(observation layout, width of the cores' outputs, init)


# Heads that only a loss term reads, by its name: the model's own modules, called as head(y (R, F), obs (R, ...)) ->
# the loss of each real step, EvaluateOutput.auxiliary[name] (R,).
AUXILIARY_HEADS = {"reconstruction": Head("reconstruction_coefficient", ObservationDecoder)}


class ActorCritic(nn.Module):
    def __init__(self, observation: Layout | gym.Space, action_space: gym.Space, hidden_layer_size: int,
                 recurrence: RecurrenceConfig, vector_encoder_size: int = 0, *, initialization: InitializationConfig,
                 auxiliary: tuple[str, ...] = ()):
        super().__init__()
        init = _Init(initialization)
        gains, width = init.config, hidden_layer_size
        if isinstance(observation, gym.Space):
            observation = layout(observation)
        self.observation_layout = observation
        self.encoder = (_PartsEncoder(observation, vector_encoder_size, init) if observation.packed
                        else _encoder(observation.parts[0], vector_encoder_size, init))
        self.distribution = make_distribution(action_space)
        self.previous_size = (self.distribution.n_features * recurrence.previous_action
                              + int(recurrence.previous_reward))
        self._recurrence = recurrence
        self.hidden_size, self.layers = recurrence.hidden_state_size, recurrence.num_layers
        self._entry = entry = CORES[recurrence.layer_type]
        self._input_size = self.encoder.out_features + self.previous_size

        def new_core() -> nn.Module:  # torch's own layers initialised as the reference's; any other keeps its own
            core = build_core(entry, self._input_size, recurrence)
            return init(core, gains.recurrent_gain) if entry.torch_rnn else core
        self.core = new_core()
        self.hidden = init(nn.Linear(self.hidden_size, width), gains.hidden_gain)
        self.critic_core = self.critic_hidden = None
        if recurrence.separate_critic_core:  # its own core and hidden layer: actor and critic share the encoder only
            self.critic_core = new_core()
            self.critic_hidden = init(nn.Linear(self.hidden_size, width), gains.hidden_gain)
        self._cores = [c for c in (self.core, self.critic_core) if c is not None]
        # The policy's and the value's hidden layers side by side in one Linear, each half initialised alone.
        self.branches = nn.Linear(width, 2 * width)
        if gains.orthogonal:
            for half in self.branches.weight.data.chunk(2, dim=0):
                nn.init.orthogonal_(half, gains.hidden_gain)
            nn.init.zeros_(self.branches.bias)
        self.policy_out = init(nn.Linear(width, self.distribution.n_params), gains.policy_gain)
        self.value_out = init(nn.Linear(width, 1), gains.value_gain)
        features = len(self._cores) * self.hidden_size
        self.auxiliary = nn.ModuleDict({name: AUXILIARY_HEADS[name].module(observation, features, init)
                                        for name in auxiliary})
        per_core = self.core.state_size if entry.whole else self.layers * entry.state_parts * self.hidden_size
        self.state_size = len(self._cores) * per_core

    @contextlib.contextmanager
    def rollout(self):
        """A rollout's steps, the weights unchanged: a core may keep what it computed (TransformerXL.caching)."""
        with contextlib.ExitStack() as stack:
            for core in self._cores:
                if hasattr(core, "caching"):
                    stack.enter_context(core.caching())
            yield

    def initial_state(self, batch: int, device=None) -> torch.Tensor:
        return torch.zeros(batch, self.state_size, device=device)

    def reset_state(self, state: torch.Tensor, starts: np.ndarray | torch.Tensor) -> torch.Tensor:
        """state (B, S), initial where an episode starts (B,) if recurrence.reset_hidden_state (only here)."""
        if not self._recurrence.reset_hidden_state or (isinstance(starts, np.ndarray) and not starts.any()):
            return state
        starts = torch.as_tensor(starts, dtype=torch.bool, device=state.device)
        return torch.where(starts.unsqueeze(1), self.initial_state(1, state.device), state)

    def previous_input(self, actions: torch.Tensor, rewards, starts=None) -> torch.Tensor:
        """The previous step's action (B, k) as its distribution encodes it and raw reward (B,) -> (B, P), zeros
        where an episode starts (B,) (reset_previous)."""
        config, parts = self._recurrence, []
        if config.previous_action:
            parts.append(self.distribution.features(actions))
        if config.previous_reward:
            reward = torch.as_tensor(rewards, dtype=torch.float32, device=actions.device) * config.previous_reward_scale
            if config.previous_reward_clip is not None:
                reward = reward.clamp(-config.previous_reward_clip, config.previous_reward_clip)
            parts.append(reward.unsqueeze(1))
        previous = torch.cat(parts, dim=1) if parts else actions.new_zeros(actions.shape[0], 0, dtype=torch.float32)
        return previous if starts is None else self.reset_previous(previous, starts)

    def reset_previous(self, previous: torch.Tensor, starts: np.ndarray | torch.Tensor) -> torch.Tensor:
        """previous (B, P), zeros where an episode starts (B,): its first step has no step before it."""
        if not self.previous_size or (isinstance(starts, np.ndarray) and not starts.any()):
            return previous
        starts = torch.as_tensor(starts, dtype=torch.bool, device=previous.device)
        return previous.masked_fill(starts.unsqueeze(1), 0.0)

    def _with_previous(self, x: torch.Tensor, previous: torch.Tensor | None) -> torch.Tensor:
        if not self.previous_size:
            return x
        if previous is None:  # never zeros by accident
            raise ValueError("this model takes the previous action/reward (recurrence.previous_*): pass previous")
        return torch.cat((x, previous), dim=-1)

    def _run_cores(self, x: torch.Tensor | PackedSequence, state: torch.Tensor):
        """Every core over x (N, L, F + P) or packed (R, F + P) from state (N, S) -> outputs (.., cores x H), state."""
        N, outputs, states = state.shape[0], [], []
        for index, core in enumerate(self._cores):
            if self._entry.whole:  # (N, S) -> (N, cores, S / cores) -> this core's (N, S / cores)
                y, h = core(x, state.view(N, len(self._cores), -1)[:, index])
            else:  # (N, S) -> (N, cores, layers, parts, H) -> this core's (parts, layers, N, H)
                parts = self._entry.state_parts
                h = state.view(N, -1, self.layers, parts, self.hidden_size)[:, index].permute(2, 1, 0, 3)
                h = tuple(part.contiguous() for part in h) if parts > 1 else h[0].contiguous()
                y, h = fastpath.call(core, x, h)
                y = y.data if isinstance(y, PackedSequence) else y
                h = torch.stack(h if isinstance(h, tuple) else (h,), dim=2)  # -> (layers, N, parts, H)
                h = h.transpose(0, 1).reshape(N, -1)  # -> (N, layers, parts, H) -> (N, layers x parts x H)
            outputs.append(y)
            states.append(h)
        return torch.cat(outputs, dim=-1), torch.cat(states, dim=1).float()

    def _step(self, obs: torch.Tensor, state: torch.Tensor, previous: torch.Tensor | None):
        x = self._with_previous(self.encoder(obs), previous)
        y, state = self._run_cores(x.unsqueeze(1), state)  # a step is a sequence of one: (B, F + P) -> (B, 1, F + P)
        return y.squeeze(1), state

    def _heads(self, y: torch.Tensor):
        """Core outputs (B, cores x H) -> policy parameters (B, n_params), values (B,), in float32."""
        if self.critic_core is None:
            policy, value = torch.relu(self.branches(torch.relu(self.hidden(y)))).chunk(2, dim=-1)
        else:  # the policy half of branches sees only the actor's features, the value half only the critic's
            actor, critic = y.chunk(2, dim=-1)
            policy = torch.relu(self.branches(torch.relu(self.hidden(actor)))).chunk(2, dim=-1)[0]
            value = torch.relu(self.branches(torch.relu(self.critic_hidden(critic)))).chunk(2, dim=-1)[1]
        return self.policy_out(policy).float(), self.value_out(value).squeeze(-1).float()

    def act(self, obs: torch.Tensor, state: torch.Tensor, deterministic: bool = False,
            action_mask: torch.Tensor | None = None, previous: torch.Tensor | None = None) -> ActOutput:
        """obs (B, *obs_shape), state (B, S), action_mask (B, A) bool or None, previous (B, P) (needed when P > 0)."""
        with no_gradient(obs.device):
            y, state = self._step(obs, state, previous)
            policy, values = self._heads(y)
            actions, log_probs = self.distribution.sample(policy, action_mask, deterministic)
        return ActOutput(actions, log_probs, values, state, policy)

    def value(self, obs: torch.Tensor, state: torch.Tensor, previous: torch.Tensor | None = None) -> torch.Tensor:
        with no_gradient(obs.device):
            return self._heads(self._step(obs, state, previous)[0])[1]

    def training_pass(self, obs: torch.Tensor, state: torch.Tensor, actions: torch.Tensor,
                      action_mask: torch.Tensor | None = None, mask: torch.Tensor | None = None,
                      previous: torch.Tensor | None = None, burn_in: BurnIn | None = None) -> EvaluateOutput:
        """Training pass over N sequences of L slots from state (N, S) (before any burn-in): obs (N, L, *obs_shape),
        or with mask (N, L) obs[mask]; actions (N, L, k), action_mask (N, L, A), previous (N, L, P). Padding reads 0."""
        N, L = actions.shape[:2]
        if mask is None:  # every slot is a real step: (N, L, *obs) -> (N*L, *obs)
            obs, mask = obs.reshape(N * L, *obs.shape[2:]), torch.ones(N, L, dtype=torch.bool, device=obs.device)
        R = int(mask.sum())
        if obs.shape != (expected := (R, *self.observation_layout.shape)):
            raise ValueError(f"obs holds the real steps alone, obs[mask]: expected {expected}, got {tuple(obs.shape)}")
        if burn_in is not None:
            state = self.burn_in_state(state, burn_in)
        x = self._with_previous(_scatter(self.encoder(obs), mask), previous)  # (R, F) -> (N, L, F + P)
        y = fastpath.sequences(self._run_cores, x, mask, state, self._entry)  # (R, cores x H), the real steps'
        policy, values = self._heads(y)
        log_prob, entropy = self.distribution.evaluate(policy, actions[mask],
                                                       None if action_mask is None else action_mask[mask])
        auxiliary = {name: head(y, obs) for name, head in self.auxiliary.items()}
        return EvaluateOutput(_scatter(log_prob, mask), _scatter(entropy, mask), _scatter(values, mask),
                              _scatter(y, mask), auxiliary)

    @torch.no_grad()
    def burn_in_state(self, state: torch.Tensor, burn: BurnIn) -> torch.Tensor:
        """The state (N, S) at each sequence's start: its real burn-in steps taken one at a time, without gradient."""
        K = burn.mask.shape[1]
        first = K - int(burn.mask.sum(1).max())  # right-aligned: no real step before this slot
        if first == K:
            return state
        x = self._with_previous(_scatter(self.encoder(burn.obs), burn.mask), burn.previous)  # (N, K, F + P)
        for i in range(first, K):
            _, new = self._run_cores(x[:, i:i + 1], state)
            state = torch.where(burn.mask[:, i:i + 1], new, state)  # (N, 1): padding rows keep their state
        return state

    @torch.no_grad()
    def unroll(self, obs: torch.Tensor, previous: torch.Tensor | None, state: torch.Tensor, starts: torch.Tensor,
               chunk: int) -> torch.Tensor:
        """The state before every step of a rollout (W, T, S), recomputed from state (W, S) before step 0 and reset
        where starts (W, T), as the rollout did; the encoder takes `chunk` steps at a time."""
        W, T = starts.shape
        flat = obs.reshape(W * T, *obs.shape[2:])  # (W, T, *obs) -> (W*T, *obs)
        x = torch.cat([self.encoder(part) for part in flat.split(chunk)])
        x = self._with_previous(x.reshape(W, T, -1), previous)  # (W*T, F) -> (W, T, F + P)
        states = [state]
        for t in range(1, T):
            _, state = self._run_cores(x[:, t - 1:t], state)
            state = self.reset_state(state, starts[:, t])
            states.append(state)
        return torch.stack(states, dim=1)  # T x (W, S) -> (W, T, S)


def build_model(config, spaces: EnvSpaces) -> ActorCritic:
    """The model a config describes; parameters too large to allocate are a ConfigError, not a crash."""
    try:
        auxiliary = tuple(name for name, head in AUXILIARY_HEADS.items() if getattr(config, head.coefficient) > 0)
        return ActorCritic(spaces.observation, spaces.action_space, config.hidden_layer_size, config.recurrence,
                           config.vector_encoder_size, initialization=config.initialization, auxiliary=auxiliary)
    except (MemoryError, RuntimeError) as error:
        if not isinstance(error, MemoryError) and "alloc" not in str(error) and "overflow" not in str(error):
            raise
        raise ConfigError("the model's parameters do not fit in memory: lower hidden_layer_size, "
                          "recurrence.hidden_state_size or vector_encoder_size") from None
