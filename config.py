"""Typed configuration: nested dataclasses loaded from yaml and checked once at start. The keys are the reference
baseline's, so its yaml files load unchanged; what it left implicit (seed, device, threads) has a default here."""
from __future__ import annotations

import copy
import dataclasses
import difflib
import math
import reprlib
import typing
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import yaml

from plumbing.errors import ConfigError
from plumbing.yaml_input import MAX_CONFIG_CHARACTERS, read_yaml, require_small


@dataclass
class EnvironmentConfig:
    type: str = "PocMemoryEnv"  # environment family: PocMemoryEnv, CartPoleMasked, CartPole, Minigrid, MemoryGym, Atari, gym
    name: str = ""  # Gymnasium id for families that wrap one (Minigrid, MemoryGym, Atari, gym)
    kwargs: dict = field(default_factory=dict)  # passed to the environment's constructor / gym.make
    reset_params: dict = field(default_factory=dict)  # passed to every reset as options= (Memory Gym's reset parameters)
    reward_scale: float | None = None  # training reward multiplier; None: the family's default (CartPole 0.01)
    # training rewards clipped to [-clip, clip] after the scale (1: Atari's sign, as DQN); episode stats keep raw ones
    reward_clip: float | None = None
    observation_mask: list | None = None  # indices of vector-observation entries to hide (e.g. [2]: Pendulum's velocity)
    # merged over kwargs to score or record, e.g. {seed_pool: 0}: MiniGrid scored on unlimited, held-out layouts
    evaluation_kwargs: dict = field(default_factory=dict)
    # merged over reset_params likewise, e.g. {start-seed: 100000}: Memory Gym scored on novel seeds
    evaluation_reset_params: dict = field(default_factory=dict)

    @property
    def has_evaluation_levels(self) -> bool:
        """Evaluations play other levels than training's (evaluation_kwargs / evaluation_reset_params)."""
        return bool(self.evaluation_kwargs or self.evaluation_reset_params)

    @property
    def training_reward_scale(self) -> float:
        """reward_scale, or where it is None the family's default."""
        from environments import FAMILIES
        return FAMILIES[self.type].reward_scale if self.reward_scale is None else self.reward_scale

    def for_evaluation(self) -> "EnvironmentConfig":
        return replace(self, kwargs={**self.kwargs, **self.evaluation_kwargs},
                       reset_params={**self.reset_params, **self.evaluation_reset_params})

    def make(self, max_steps: int | None = None, filmed: bool = False):
        from environments import SetupError, make_env
        from spaces import SpaceError
        try:
            return make_env(self.type, self.name, self.kwargs, self.reset_params, self.observation_mask,
                            max_steps, filmed)
        except (SetupError, SpaceError) as error:
            raise ConfigError(str(error)) from None


@dataclass
class RecurrenceConfig:
    sequence_length: int = 8  # steps per training sequence (truncated BPTT); <= 0: whole episodes
    hidden_state_size: int = 32  # units of the recurrent layer (a transformer's width)
    layer_type: str = "gru"  # the core, a key of CORE_KEYS: gru, lstm, mingru (minGRU), lru (LRU) or trxl
    # zero the recurrent state when an episode starts; false: it runs on into the next episode, while evaluations
    # and enjoy.py start from zeros, so a core can score lower there than in training (docs/results.md, minGRU)
    reset_hidden_state: bool = True
    num_layers: int = 1  # stacked recurrent layers (a transformer's blocks)
    separate_critic_core: bool = False  # the value function gets its own recurrent core (sb3-contrib's option)
    previous_action: bool = False  # the core also sees the last action (zeros at an episode's start)
    previous_reward: bool = False  # the core also sees the last raw environment reward (0 at an episode's start)
    previous_reward_scale: float = 1.0  # multiplies that reward (before the clip); only with previous_reward
    previous_reward_clip: float | None = None  # then clips it to [-clip, clip]; None: none; only with previous_reward
    burn_in: int = 0  # steps before each sequence unrolled without gradient to warm its state (R2D2); 0: none
    refresh_states: bool = False  # before each epoch, recompute every stored state with the current parameters
    memory_length: int = 64  # trxl (Transformer-XL): the steps before this one each block attends over
    attention_heads: int = 4  # trxl: attention heads per block; they divide hidden_state_size
    gated: bool = False  # trxl: GTrXL's gates in place of the blocks' residual sums (Parisotto et al. 2020)


# recurrence.layer_type -> the recurrence keys that core alone reads. model.CORES builds each core; the two name the
# same cores (tests/test_cores.py), and the config is checked without torch.
CORE_KEYS = {"gru": (), "lstm": (), "mingru": (), "lru": (), "trxl": ("memory_length", "attention_heads", "gated")}
# the cores that are torch's own recurrent layers: initialization.recurrent_gain initialises them, and every other
# core keeps the parameters it made (tests/test_cores.py checks this against model.CORES)
TORCH_CORES = ("gru", "lstm")


@dataclass
class ScheduleConfig:
    shape: str = "polynomial"  # polynomial (decays from initial to final) or constant (initial throughout)
    initial: float = 3.0e-4  # value at update 0
    final: float = 3.0e-4  # value from max_decay_steps on
    power: float = 1.0  # polynomial power of the decay (1: linear)
    max_decay_steps: int = 1  # updates until the final value is reached


@dataclass
class NormalizationConfig:
    observations: bool = False  # running mean/std per feature of vector observations (never images), then clipped
    observation_clip: float = 10.0  # normalised observations are clipped to [-clip, clip]
    rewards: bool = False  # divide rewards by the running std of the discounted return
    reward_clip: float = 10.0  # scaled rewards are clipped to [-clip, clip]
    value_targets: bool = False  # the value head learns returns standardised by their running mean/std
    advantages: bool = True  # standardise advantages per minibatch (over real steps only)


@dataclass
class InitializationConfig:
    orthogonal: bool = True  # orthogonal weights and zero biases everywhere (recurrent layers included); else torch's defaults
    hidden_gain: float = 1.4142135623730951  # gain of the encoder and hidden layers (sqrt 2, for ReLU)
    policy_gain: float = 0.01  # gain of the policy head: a near-uniform first policy
    value_gain: float = 1.0  # gain of the value head
    recurrent_gain: float = 1.0  # gain of torch's own recurrent layers (gru, lstm); other cores set their own: 1.0 only


@dataclass
class OptimizerConfig:
    eps: float = 1.0e-8  # AdamW's epsilon (torch's default, the reference's; CleanRL's Adam takes 1e-5)
    weight_decay: float = 0.01  # AdamW's decoupled weight decay (torch's default, the reference's; 0: Adam)


@dataclass
class EvaluationConfig:
    # score the policy on held-out episodes every K updates and after the last, each time on a new draw of them
    # (docs/reliability.md); the best so far is kept as models/<run-id>-best.pt; 0: never
    interval: int = 0
    episodes: int = 32  # episodes per evaluation (as enjoy.py --episodes), over min(episodes, n_workers) environments
    deterministic: bool = True  # the most probable action (as enjoy.py --deterministic); false: sampled
    # the evaluation seed: the evaluation after update u plays the episodes of enjoy.py --seed (seed + 2**31 + u) mod
    # 2**32 (2147483973 after update 325 where this seed is 0)
    seed: int = 0
    # cut an episode at this many steps, scored as it stood (as enjoy.py --max-steps); 0: its time limit, else 100,000
    max_steps: int = 0

    @property
    def fresh_seed(self) -> int:
        """enjoy.py's default seed: episodes that neither training nor the run's own evaluations played."""
        return (self.seed + 1) % SEEDS


@dataclass
class Config:
    environment: EnvironmentConfig = field(default_factory=EnvironmentConfig)  # what to train on (below)
    gamma: float = 0.99  # discount factor
    lamda: float = 0.95  # GAE lambda (the reference's spelling)
    updates: int = 30  # PPO iterations: collect W*T steps, then optimise
    epochs: int = 4  # passes over each rollout
    n_workers: int = 16  # W: environments stepped in parallel
    worker_steps: int = 128  # T: steps per environment per rollout
    n_mini_batch: int = 8  # minibatches per epoch (each a set of whole sequences)
    value_loss_coefficient: float = 0.25  # weight of the value loss
    hidden_layer_size: int = 64  # units of the hidden layers after the recurrent core
    vector_encoder_size: int = 0  # units of a Linear+ReLU on vector observations before the core; 0: none
    max_grad_norm: float = 0.5  # global gradient-norm clip
    recurrence: RecurrenceConfig = field(default_factory=RecurrenceConfig)  # the recurrent core and its sequences
    learning_rate_schedule: ScheduleConfig = field(default_factory=ScheduleConfig)  # AdamW's learning rate
    optimizer: OptimizerConfig = field(default_factory=OptimizerConfig)  # AdamW's other settings
    beta_schedule: ScheduleConfig = field(  # entropy bonus coefficient
        default_factory=lambda: ScheduleConfig(initial=0.001, final=0.001))
    clip_range_schedule: ScheduleConfig = field(  # PPO ratio clip range
        default_factory=lambda: ScheduleConfig(initial=0.2, final=0.2))
    # weight of the mean square of the recurrent cores' outputs over the real steps, a penalty on large activations
    # (Merity et al. 2017's activation regularisation); 0: none
    activation_penalty: float = 0.0
    # weight of the observation-reconstruction loss (the Memory Gym paper's auxiliary loss): a decoder from the cores'
    # outputs back to each real step's observation, trained with the model; 0: no decoder and no loss
    reconstruction_coefficient: float = 0.0
    value_clip: bool = True  # clip the value loss around the rollout's values (as the reference)
    value_clip_range: float | None = None  # its clip range; None: the policy's clip range of the update
    target_kl: float | None = None  # stop the update's epochs once a minibatch's approx-KL exceeds it; None: never
    normalization: NormalizationConfig = field(default_factory=NormalizationConfig)  # the normalisation switches
    initialization: InitializationConfig = field(default_factory=InitializationConfig)  # the weights' initial values
    evaluation: EvaluationConfig = field(default_factory=EvaluationConfig)  # held-out evaluation while training
    seed: int = 0  # run seed: torch, numpy and every environment's seed derive from it
    device: str = "auto"  # auto (cuda when available), cpu, cuda, cuda:N
    # float32; bfloat16: the rollout and the training pass under autocast (parameters, optimizer, losses and
    # the recurrent state stay float32); auto: bfloat16 on a CPU with AVX-512 BF16 or AMX, else float32 (GPUs too)
    precision: str = "float32"
    worker_processes: int = 0  # processes stepping the environments; 0: step them in the trainer's process
    torch_threads: int = 0  # torch intra-op threads; 0: the cores others leave free (plumbing/threads.py); above the cores here: those
    checkpoint_interval: int = 25  # save models/<run-id>.pt every K updates (and at the end); 0: only at the end

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


# how and where a run is computed, not what it trains (stats.py counts runs differing only in these as seeds)
EXECUTION_KEYS = ("device", "worker_processes", "torch_threads", "checkpoint_interval")


def load_config(path: str | Path, overrides: list[str] = ()) -> Config:
    from plumbing.files import kind
    path = Path(path)
    if (what := kind(path)) not in ("a file", "a pipe"):  # a pipe (--config <(...)) is read once, here
        raise ConfigError(f"config file not found: {path}" if what == "missing" else
                          f"{path} is {what}, not a config file")
    try:
        with open(path, encoding="utf-8") as file:  # a pipe has no size to check before
            text = file.read(MAX_CONFIG_CHARACTERS + 1)
        if len(text) > MAX_CONFIG_CHARACTERS:
            raise ConfigError(f"it is longer than {MAX_CONFIG_CHARACTERS:,} characters, which no config is")
        raw = read_yaml(text)
    except UnicodeDecodeError:
        raise ConfigError(f"{path} is not a text file in UTF-8") from None
    except yaml.YAMLError as error:
        raise ConfigError(f"{path} is not valid yaml: {' '.join(str(error).split())}") from None
    except ConfigError as error:
        raise ConfigError(f"{path}: {error}") from None
    if raw is None:  # more likely the wrong file, or one not yet saved, than a wish for the defaults
        raise ConfigError(f"{path} holds no keys (it is empty, or comments only): to train on every default, "
                          "write {} in it")
    return config_from_dict(raw, overrides)


def config_from_dict(raw: dict, overrides: list[str] = ()) -> Config:
    if not isinstance(raw, dict):
        raise ConfigError(f"a config is a mapping of keys (key: value lines), got {reprlib.repr(raw)}")
    require_small(raw, "the config")  # one read from a checkpoint, too
    raw = copy.deepcopy(raw)
    for item in overrides:
        apply_override(raw, item)
    require_small(raw, "the config with its --set values")
    config = _build(Config, raw, prefix="")
    validate(config)
    return config


def apply_override(raw: dict, item: str) -> None:
    """`recurrence.layer_type=gru` sets raw["recurrence"]["layer_type"] = "gru" (the value is read as yaml)."""
    key, sep, text = item.partition("=")
    if not sep or not key:
        raise ConfigError(f"--set expects key=value (e.g. recurrence.layer_type=gru), got {item!r}")
    try:
        value = read_yaml(text)
    except yaml.YAMLError:
        raise ConfigError(f"--set {key}: cannot read the value {reprlib.repr(text)}") from None
    except ConfigError as error:
        raise ConfigError(f"--set {key}: {error}") from None
    node = raw
    parts = key.split(".")
    for i, part in enumerate(parts[:-1]):
        node = node.setdefault(part, {})
        if not isinstance(node, dict):
            raise ConfigError(f"--set {key}: '{'.'.join(parts[:i + 1])}' is not a section")
    node[parts[-1]] = value


def _build(cls, raw: Any, prefix: str):
    if not isinstance(raw, dict):
        raise ConfigError(f"{prefix.rstrip('.') or 'config'}: expected a mapping of keys, got {reprlib.repr(raw)}")
    hints = typing.get_type_hints(cls)
    names = [f.name for f in dataclasses.fields(cls)]
    values = {}
    for key, value in raw.items():
        if key not in names:
            close = difflib.get_close_matches(str(key), names, n=1)
            hint = f"; did you mean '{prefix}{close[0]}'?" if close else f"; valid keys: {', '.join(names)}"
            raise ConfigError(f"unknown config key '{prefix}{key}'{hint}")
        values[key] = _coerce(hints[key], value, f"{prefix}{key}")
    return cls(**values)


def _coerce(hint, value, key: str):
    if dataclasses.is_dataclass(hint):
        return _build(hint, value, prefix=f"{key}.")
    if type(None) in typing.get_args(hint):  # Optional
        if value is None:
            return None
        hint = next(a for a in typing.get_args(hint) if a is not type(None))
    takes = (int, float) if hint is float else hint  # an int is a float too; a bool is neither
    if not isinstance(value, takes) or (isinstance(value, bool) and hint is not bool):
        raise ConfigError(f"config key '{key}' must be of type {hint.__name__}, got {reprlib.repr(value)}")
    if hint is int and not -2 ** 63 <= value < 2 ** 63:  # what numpy and torch can hold
        raise ConfigError(f"config key '{key}' = {reprlib.repr(value)} is not allowed: beyond a 64-bit integer")
    if hint is float and not math.isfinite(value):
        raise ConfigError(f"config key '{key}' must be a finite number, got {reprlib.repr(value)}")
    return float(value) if hint is float else value


# bounds where more failed deep inside numpy or torch or hung start-up (sizes in memory: buffer.py, model.py)
MAX_WORKERS = 2 ** 16
MAX_LAYERS = 100
SEEDS = 2 ** 32  # a seed is an integer in [0, SEEDS): numpy's and the environments' range
MAX_EPISODES = 10 ** 6  # per evaluation: every episode's stats are kept, one held-out seed drawn for each


SCHEDULES = ("learning_rate_schedule", "beta_schedule", "clip_range_schedule")
# Bounds of single keys (docs/config.md says what 0 or null means where it means something)
POSITIVE = ("updates", "epochs", "n_workers", "worker_steps", "n_mini_batch", "hidden_layer_size", "max_grad_norm",
            "recurrence.hidden_state_size", "recurrence.memory_length", "recurrence.attention_heads",
            "recurrence.previous_reward_scale", "recurrence.previous_reward_clip",
            "value_clip_range", "target_kl", "normalization.observation_clip", "normalization.reward_clip",
            "optimizer.eps", "environment.reward_scale", "environment.reward_clip", "learning_rate_schedule.initial",
            "clip_range_schedule.final", *(f"{s}.{key}" for s in SCHEDULES for key in ("power", "max_decay_steps")))
AT_LEAST_0 = ("vector_encoder_size", "value_loss_coefficient", "activation_penalty", "reconstruction_coefficient",
              "worker_processes",
              "torch_threads", "checkpoint_interval", "recurrence.burn_in", "optimizer.weight_decay",
              "evaluation.interval", *(f"{s}.{key}" for s in SCHEDULES for key in ("initial", "final")))


def validate(config: Config) -> None:
    def need(ok: bool, key: str, value, allowed: str):
        if not ok:
            raise ConfigError(f"config key '{key}' = {reprlib.repr(value)} is not allowed: {allowed}")

    values = config.to_dict()
    for keys, ok, allowed in ((POSITIVE, lambda v: v > 0, "must be > 0"),
                              (AT_LEAST_0, lambda v: v >= 0, "must be >= 0")):
        for key in keys:
            value = _get(values, key)
            need(value is None or ok(value), key, value, allowed)
    need(config.n_workers <= MAX_WORKERS, "n_workers", config.n_workers, f"at most {MAX_WORKERS:,} (environments "
         "are Python objects, each made and stepped on its own)")
    need(0.0 <= config.gamma <= 1.0, "gamma", config.gamma, "must be in [0, 1]")
    need(0.0 <= config.lamda <= 1.0, "lamda", config.lamda, "must be in [0, 1]")
    need(config.worker_processes <= config.n_workers, "worker_processes", config.worker_processes,
         f"at most n_workers ({config.n_workers})")
    need(0 <= config.seed < SEEDS, "seed", config.seed, "an integer in [0, 2**32)")
    device = config.device
    need(device in ("auto", "cpu", "cuda") or device.startswith("cuda:"), "device", device,
         "one of auto, cpu, cuda, cuda:N")
    need(config.precision in ("float32", "bfloat16", "auto"), "precision", config.precision,
         "one of float32, bfloat16, auto")

    rec = config.recurrence
    need(0 < rec.num_layers <= MAX_LAYERS, "recurrence.num_layers", rec.num_layers,
         f"from 1 to {MAX_LAYERS} (torch builds and steps stacked layers one by one)")
    need(rec.layer_type in CORE_KEYS, "recurrence.layer_type", rec.layer_type, f"one of {', '.join(CORE_KEYS)}")
    own_keys = CORE_KEYS[rec.layer_type]
    for name, keys in CORE_KEYS.items():  # a core's own keys (a transformer's memory_length) apply to that core only
        for key in keys:
            need(key in own_keys or getattr(rec, key) == getattr(RecurrenceConfig, key), f"recurrence.{key}",
                 getattr(rec, key), f"it applies only with recurrence.layer_type: {name}")
    need("attention_heads" not in own_keys or rec.hidden_state_size % rec.attention_heads == 0,
         "recurrence.attention_heads", rec.attention_heads,
         f"must divide recurrence.hidden_state_size ({rec.hidden_state_size})")
    gain = config.initialization.recurrent_gain
    need(rec.layer_type in TORCH_CORES or gain == InitializationConfig.recurrent_gain, "initialization.recurrent_gain",
         gain, f"it applies to torch's own recurrent layers ({', '.join(TORCH_CORES)}); the {rec.layer_type} core "
         "initialises its own parameters")
    need(rec.sequence_length <= config.worker_steps, "recurrence.sequence_length", rec.sequence_length,
         f"at most worker_steps ({config.worker_steps}); <= 0 means whole episodes")
    for key in ("previous_reward_scale", "previous_reward_clip"):
        need(rec.previous_reward or getattr(rec, key) == getattr(RecurrenceConfig, key), f"recurrence.{key}",
             getattr(rec, key), "it applies only with recurrence.previous_reward: true")
    need(rec.burn_in == 0 or rec.sequence_length > 0, "recurrence.burn_in", rec.burn_in,
         "needs sequence_length > 0 (a whole-episode sequence has no steps of its episode before it)")
    need(rec.burn_in + max(rec.sequence_length, 0) <= config.worker_steps, "recurrence.burn_in", rec.burn_in,
         f"burn_in + sequence_length at most worker_steps ({config.worker_steps})")
    # every minibatch needs a sequence: a rollout holds at least ceil(T / L) per worker (no episode ends)
    L = rec.sequence_length if rec.sequence_length > 0 else config.worker_steps
    min_sequences = config.n_workers * -(-config.worker_steps // L)
    need(config.n_mini_batch <= min_sequences, "n_mini_batch", config.n_mini_batch,
         f"at most {min_sequences}, the fewest sequences a rollout of n_workers x worker_steps "
         f"with sequence_length {rec.sequence_length} can hold")
    for name in SCHEDULES:
        shape = getattr(config, name).shape
        need(shape in ("polynomial", "constant"), f"{name}.shape", shape, "one of polynomial, constant")
    mask = config.environment.observation_mask
    need(mask is None or (len(mask) > 0 and all(isinstance(i, int) and not isinstance(i, bool) for i in mask)),
         "environment.observation_mask", mask, "a non-empty list of integer indices (or null)")
    e = config.evaluation
    need(1 <= e.episodes <= MAX_EPISODES, "evaluation.episodes", e.episodes,
         f"from 1 to {MAX_EPISODES:,} (as enjoy.py --episodes)")
    need(0 <= e.max_steps < 2 ** 31, "evaluation.max_steps", e.max_steps,
         "from 0 (the environment's own time limit, else 100,000) to 2**31 - 1")
    need(0 <= e.seed < SEEDS, "evaluation.seed", e.seed, "an integer in [0, 2**32)")

    from environments import SetupError, check_settings
    env = config.environment
    evaluated = env.for_evaluation()
    for settings, keys in ((env, ("environment.kwargs", "environment.reset_params")),
                           (evaluated, ("environment.evaluation_kwargs", "environment.evaluation_reset_params"))):
        try:
            check_settings(env.type, env.name, settings.kwargs, settings.reset_params)
        except SetupError as error:
            message = str(error).replace("environment.kwargs", keys[0]).replace("environment.reset_params", keys[1])
            raise ConfigError(message) from None


def _get(tree: dict, key: str):
    for part in key.split("."):
        tree = tree[part]
    return tree


# Keys a resumed run cannot change: the model, the environments and the normalisers' statistics depend on them
FIXED_ON_RESUME = ("environment", "n_workers", "hidden_layer_size", "vector_encoder_size",
                   "recurrence.hidden_state_size", "recurrence.layer_type", "recurrence.num_layers",
                   "recurrence.memory_length", "recurrence.attention_heads", "recurrence.gated",
                   "recurrence.separate_critic_core", "recurrence.previous_action", "recurrence.previous_reward",
                   "recurrence.previous_reward_scale", "recurrence.previous_reward_clip", "normalization.observations",
                   "normalization.rewards", "normalization.value_targets", "initialization", "seed")


ON_OR_OFF_ON_RESUME = ("reconstruction_coefficient",)


def check_resume_overrides(saved: dict, config: Config) -> None:
    saved = _build(Config, saved, prefix="").to_dict()  # keys added since the checkpoint was written: defaults
    now = config.to_dict()
    changed = [key for key in FIXED_ON_RESUME if _get(saved, key) != _get(now, key)]
    # a loss term's own head (model.AUXILIARY_HEADS) exists while its coefficient is above 0: it cannot come or go
    changed += [f"{key} (0 or not)" for key in ON_OR_OFF_ON_RESUME if (_get(saved, key) > 0) != (_get(now, key) > 0)]
    if changed:
        raise ConfigError(f"{', '.join(changed)} cannot change on --resume (the checkpoint's model, "
                          "environments and statistics depend on them); start a new run instead")


def schedule_value(schedule: ScheduleConfig, update: int) -> float:
    """Decays from initial to final over max_decay_steps updates (never rises, as the reference); constant: initial."""
    if schedule.shape == "constant":
        return schedule.initial
    if update >= schedule.max_decay_steps or schedule.initial < schedule.final:
        return schedule.final
    remaining = 1.0 - update / schedule.max_decay_steps
    return (schedule.initial - schedule.final) * remaining ** schedule.power + schedule.final
