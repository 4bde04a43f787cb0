"""Typed configuration: nested dataclasses loaded from yaml and checked once at start. The keys are the reference
baseline's, so its yaml files load unchanged; what it left implicit (seed, device, threads) has a default here."""
import copy
import dataclasses
import difflib
import math
import reprlib
import typing
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable

import yaml

from plumbing.errors import ConfigError
from plumbing.yaml_input import MAX_CONFIG_CHARACTERS, read_yaml, require_small

# bounds where more failed deep inside numpy or torch or hung start-up (sizes in memory: buffer.py, model.py)
MAX_WORKERS = 2 ** 16
MAX_LAYERS = 100
MAX_MEMORY = 2 ** 16  # a transformer's window, in steps
SEEDS = 2 ** 32  # a seed is an integer in [0, SEEDS): numpy's and the environments' range
MAX_EPISODES = 10 ** 6  # per evaluation: every episode's stats are kept, one held-out seed drawn for each


def key(default=dataclasses.MISSING, *, factory=dataclasses.MISSING, above=None, at_least=None, at_most=None,
        choices: tuple = (), check: Callable[[Any], bool] | None = None, allowed: str = "", why: str = "",
        resume: str = "", term: bool = False):
    """A config field with its rules: bounds, choices or a check (`allowed` words them, `why` gives the reason);
    what --resume may do ("fixed": nothing, "switch": not turn it on or off); `term`: it weighs a loss term."""
    return field(default=default, default_factory=factory, metadata=dict(
        above=above, at_least=at_least, at_most=at_most, choices=choices, check=check, allowed=allowed, why=why,
        resume=resume, term=term))


def rule(meta: dict, integer: bool) -> str:
    """A field's own rules in words ("" where it has none): what its refusal says, and docs/config.md."""
    if not meta:
        return ""
    low = meta["above"] if meta["above"] is not None else meta["at_least"]
    if meta["allowed"]:
        allowed = meta["allowed"]
    elif meta["choices"]:
        allowed = f"one of {', '.join(meta['choices'])}"
    elif low is None:
        return ""
    elif meta["at_most"] is None:
        allowed = f"must be {'>' if meta['above'] is not None else '>='} {low}"
    elif integer:
        allowed = f"from {low + (meta['above'] is not None):,} to {meta['at_most']:,}"
    else:
        allowed = f"must be in [{low}, {meta['at_most']}]"
    return f"{allowed} ({meta['why']})" if meta["why"] else allowed


def _keeps(meta: dict, value) -> bool:
    """Whether value keeps a field's own rules (None: an optional key left out)."""
    return value is None or not (
        (meta["above"] is not None and not value > meta["above"])
        or (meta["at_least"] is not None and not value >= meta["at_least"])
        or (meta["at_most"] is not None and not value <= meta["at_most"])
        or (meta["choices"] and value not in meta["choices"])
        or (meta["check"] is not None and not meta["check"](value)))


def config_fields(cls, prefix: str = ""):
    """(dotted key, field) of every field of a config class, each section before the keys inside it."""
    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        yield f"{prefix}{f.name}", f
        if dataclasses.is_dataclass(hints[f.name]):
            yield from config_fields(hints[f.name], f"{prefix}{f.name}.")


@dataclass
class EnvironmentConfig:
    type: str = "PocMemoryEnv"  # family: PocMemoryEnv, CartPoleMasked, CartPole, Minigrid, MemoryGym, Atari or gym
    name: str = ""  # Gymnasium id for families that wrap one (Minigrid, MemoryGym, Atari, gym)
    kwargs: dict = field(default_factory=dict)  # passed to the environment's constructor / gym.make
    reset_params: dict = field(default_factory=dict)  # passed to each reset as options= (Memory Gym's reset parameters)
    reward_scale: float | None = key(None, above=0)  # training reward multiplier; None: the family's (CartPole 0.01)
    # training rewards clipped to [-clip, clip] after the scale (1: Atari's sign, as DQN); episode stats keep raw ones
    reward_clip: float | None = key(None, above=0)
    # indices of vector-observation entries to hide (e.g. [2]: Pendulum's velocity)
    observation_mask: list | None = key(None, check=lambda mask: len(mask) > 0 and all(type(i) is int for i in mask),
                                        allowed="a non-empty list of integer indices (or null)")
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
    hidden_state_size: int = key(32, above=0, resume="fixed")  # units of the recurrent layer (a transformer's width)
    layer_type: str = key("gru", resume="fixed")  # the core, a key of CORES: gru, lstm, mingru, lru or trxl
    # zero the recurrent state when an episode starts; false: it runs on, evaluations start at zeros (docs/results.md)
    reset_hidden_state: bool = True
    # stacked recurrent layers (a transformer's blocks)
    num_layers: int = key(1, above=0, at_most=MAX_LAYERS, why="torch builds and steps stacked layers one by one",
                          resume="fixed")
    separate_critic_core: bool = key(False, resume="fixed")  # the critic has its own core (sb3-contrib's option)
    previous_action: bool = key(False, resume="fixed")  # the core also sees the last action (zeros at episode start)
    previous_reward: bool = key(False, resume="fixed")  # the core also sees the last raw reward (0 at episode start)
    previous_reward_scale: float = key(1.0, above=0, resume="fixed")  # scales that reward; only with previous_reward
    previous_reward_clip: float | None = key(None, above=0, resume="fixed")  # then clipped to [-clip, clip]; None: not
    burn_in: int = key(0, at_least=0)  # steps before a sequence run without gradient to warm its state (R2D2); 0: none
    refresh_states: bool = False  # before each epoch, recompute every stored state with the current parameters
    memory_length: int = key(64, above=0, at_most=MAX_MEMORY, resume="fixed")  # trxl: past steps each block attends to
    attention_heads: int = key(4, above=0, resume="fixed")  # trxl: heads per block, dividing hidden_state_size
    gated: bool = key(False, resume="fixed")  # trxl: GTrXL's gates in place of residual sums (Parisotto et al. 2020)
    # trxl: relative (a learned bias per distance back), absolute (the step's sinusoid on keys and values) or none
    positional_encoding: str = key("relative", choices=("relative", "absolute", "none"), resume="fixed")


@dataclass(frozen=True)
class Core:
    """A memory model, declared once: model.py builds it, the config is checked against it without torch."""
    layer: str | type  # its nn.Module class, or "module.Class" to import it only when a model is built
    state_parts: int = 1  # tensors in its state: 1, or 2 (an LSTM's h and c, the LRU's real and imaginary parts)
    keys: tuple[str, ...] = ()  # the recurrence keys this core alone reads (a transformer's memory_length)
    torch_rnn: bool = False  # torch's own nn.RNNBase: it stacks its layers, initialization.recurrent_gain applies
    whole: bool = False  # built as layer(F, recurrence), its state one (N, layer.state_size) tensor of its layout
    episodic: bool = False  # its memory holds the current episode alone: reset_hidden_state must be true
    packed: bool = False  # it also takes a PackedSequence of the real steps alone, as torch's RNNs do


# recurrence.layer_type -> its core
CORES = {
    "gru": Core("torch.nn.GRU", torch_rnn=True, packed=True),
    "lstm": Core("torch.nn.LSTM", state_parts=2, torch_rnn=True, packed=True),
    "mingru": Core("cores.MinGRU", packed=True),
    "lru": Core("cores.LRU", state_parts=2, packed=True),
    "trxl": Core("cores.TransformerXL", keys=("memory_length", "attention_heads", "gated", "positional_encoding"),
                 whole=True, episodic=True),
}


@dataclass
class ScheduleConfig:
    shape: str = key("polynomial", choices=("polynomial", "constant"))  # polynomial: decays to final; constant: initial
    initial: float = key(3.0e-4, at_least=0)  # value at update 0
    final: float = key(3.0e-4, at_least=0)  # value from max_decay_steps on
    power: float = key(1.0, above=0)  # polynomial power of the decay (1: linear)
    max_decay_steps: int = key(1, above=0)  # updates until the final value is reached


@dataclass
class NormalizationConfig:
    observations: bool = key(False, resume="fixed")  # running mean/std per vector feature (never images), then clipped
    observation_clip: float = key(10.0, above=0)  # normalised observations are clipped to [-clip, clip]
    rewards: bool = key(False, resume="fixed")  # divide rewards by the running std of the discounted return
    reward_clip: float = key(10.0, above=0)  # scaled rewards are clipped to [-clip, clip]
    value_targets: bool = key(False, resume="fixed")  # the value head learns returns standardised by running mean/std
    advantages: bool = True  # standardise advantages per minibatch (over real steps only)


@dataclass
class InitializationConfig:
    orthogonal: bool = True  # orthogonal weights, zero biases (a core of cores.py keeps its own); else torch's defaults
    hidden_gain: float = 1.4142135623730951  # gain of the encoder and hidden layers (sqrt 2, for ReLU)
    policy_gain: float = 0.01  # gain of the policy head: a near-uniform first policy
    value_gain: float = 1.0  # gain of the value head
    recurrent_gain: float = 1.0  # gain of torch's own recurrent layers (gru, lstm); other cores set their own: 1.0 only


@dataclass
class OptimizerConfig:
    eps: float = key(1.0e-8, above=0)  # AdamW's epsilon (torch's default, the reference's; CleanRL's Adam takes 1e-5)
    weight_decay: float = key(0.01, at_least=0)  # AdamW's weight decay (torch's default, the reference's; 0: Adam)


@dataclass
class EvaluationConfig:
    # score held-out episodes every K updates and after the last, keeping the best as models/<run-id>-best.pt; 0: never
    interval: int = key(0, at_least=0)
    # episodes per evaluation (as enjoy.py --episodes), over min(episodes, n_workers) environments
    episodes: int = key(32, at_least=1, at_most=MAX_EPISODES, why="as enjoy.py --episodes")
    deterministic: bool = True  # the most probable action (as enjoy.py --deterministic); false: sampled
    # the evaluation seed: the evaluation after update u plays enjoy.py --seed (seed + 2**31 + u) mod 2**32
    seed: int = key(0, at_least=0, at_most=SEEDS - 1, allowed="an integer in [0, 2**32)")
    # cut an episode at this many steps, scored as it stood (as enjoy.py --max-steps); 0: its time limit, else 100,000
    max_steps: int = key(0, at_least=0, at_most=2 ** 31 - 1,
                         allowed="from 0 (the environment's own time limit, else 100,000) to 2**31 - 1")

    @property
    def fresh_seed(self) -> int:
        """enjoy.py's default seed: episodes that neither training nor the run's own evaluations played."""
        return (self.seed + 1) % SEEDS


@dataclass
class Config:
    environment: EnvironmentConfig = key(factory=EnvironmentConfig, resume="fixed")  # what to train on (below)
    gamma: float = key(0.99, at_least=0, at_most=1)  # discount factor
    lamda: float = key(0.95, at_least=0, at_most=1)  # GAE lambda (the reference's spelling)
    updates: int = key(30, above=0)  # PPO iterations: collect W*T steps, then optimise
    epochs: int = key(4, above=0)  # passes over each rollout
    # W: environments stepped in parallel
    n_workers: int = key(16, above=0, at_most=MAX_WORKERS, resume="fixed",
                         why="environments are Python objects, each made and stepped on its own")
    worker_steps: int = key(128, above=0)  # T: steps per environment per rollout
    n_mini_batch: int = key(8, above=0)  # minibatches per epoch (each a set of whole sequences)
    value_loss_coefficient: float = key(0.25, at_least=0, term=True)  # weight of the value loss
    hidden_layer_size: int = key(64, above=0, resume="fixed")  # units of the hidden layers after the recurrent core
    vector_encoder_size: int = key(0, at_least=0, resume="fixed")  # Linear+ReLU units on vector observations; 0: none
    max_grad_norm: float = key(0.5, above=0)  # global gradient-norm clip
    recurrence: RecurrenceConfig = field(default_factory=RecurrenceConfig)  # the recurrent core and its sequences
    learning_rate_schedule: ScheduleConfig = field(default_factory=ScheduleConfig)  # AdamW's learning rate
    optimizer: OptimizerConfig = field(default_factory=OptimizerConfig)  # AdamW's other settings
    beta_schedule: ScheduleConfig = field(  # entropy bonus coefficient
        default_factory=lambda: ScheduleConfig(initial=0.001, final=0.001))
    clip_range_schedule: ScheduleConfig = field(  # PPO ratio clip range
        default_factory=lambda: ScheduleConfig(initial=0.2, final=0.2))
    # weight of the cores' outputs' mean square, a penalty on large activations (Merity et al. 2017); 0: none
    activation_penalty: float = key(0.0, at_least=0, term=True)
    # weight of the Memory Gym paper's observation-reconstruction loss (a decoder on the cores' outputs); 0: no decoder
    reconstruction_coefficient: float = key(0.0, at_least=0, resume="switch", term=True)
    value_clip: bool = True  # clip the value loss around the rollout's values (as the reference)
    value_clip_range: float | None = key(None, above=0)  # its clip range; None: the policy's clip range of the update
    target_kl: float | None = key(None, above=0)  # end the update once a minibatch's approx-KL exceeds it; None: never
    normalization: NormalizationConfig = field(default_factory=NormalizationConfig)  # the normalisation switches
    initialization: InitializationConfig = key(factory=InitializationConfig, resume="fixed")  # the initial weights
    evaluation: EvaluationConfig = field(default_factory=EvaluationConfig)  # held-out evaluation while training
    # run seed: torch, numpy and every environment's seed derive from it
    seed: int = key(0, at_least=0, at_most=SEEDS - 1, allowed="an integer in [0, 2**32)", resume="fixed")
    # auto (cuda when available), cpu, cuda, cuda:N
    device: str = key("auto", check=lambda d: d in ("auto", "cpu", "cuda") or d.startswith("cuda:"),
                      allowed="one of auto, cpu, cuda, cuda:N")
    # float32; bfloat16: rollout and training pass under autocast; auto: bfloat16 on a CPU with AVX-512 BF16 or AMX
    precision: str = key("float32", choices=("float32", "bfloat16", "auto"))
    worker_processes: int = key(0, at_least=0)  # processes stepping the environments; 0: the trainer's process
    # torch intra-op threads; 0: the cores others leave free (plumbing/threads.py); above the cores here: those
    torch_threads: int = key(0, at_least=0)
    # save models/<run-id>.pt every K updates (and at the end); 0: only at the end
    checkpoint_interval: int = key(25, at_least=0)

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


def validate(config: Config) -> None:
    def need(ok: bool, key: str, value, allowed: str):
        if not ok:
            raise ConfigError(f"config key '{key}' = {reprlib.repr(value)} is not allowed: {allowed}")

    values = config.to_dict()
    for name, f in config_fields(Config):  # each key's own rules, declared beside it
        value = _get(values, name)
        need(not f.metadata or _keeps(f.metadata, value), name, value, rule(f.metadata, isinstance(value, int)))
    for name in ("learning_rate_schedule.initial", "clip_range_schedule.final"):
        need(_get(values, name) > 0, name, _get(values, name), "must be > 0")
    need(config.worker_processes <= config.n_workers, "worker_processes", config.worker_processes,
         f"at most n_workers ({config.n_workers})")

    rec = config.recurrence
    need(rec.layer_type in CORES, "recurrence.layer_type", rec.layer_type, f"one of {', '.join(CORES)}")
    core = CORES[rec.layer_type]
    for name, other in CORES.items():  # a core's own keys (a transformer's memory_length) apply to that core only
        for key in other.keys:
            need(key in core.keys or getattr(rec, key) == getattr(RecurrenceConfig, key), f"recurrence.{key}",
                 getattr(rec, key), f"it applies only with recurrence.layer_type: {name}")
    need("attention_heads" not in core.keys or rec.hidden_state_size % rec.attention_heads == 0,
         "recurrence.attention_heads", rec.attention_heads,
         f"must divide recurrence.hidden_state_size ({rec.hidden_state_size})")
    need(rec.reset_hidden_state or not core.episodic, "recurrence.reset_hidden_state", rec.reset_hidden_state,
         f"the {rec.layer_type} core's memory holds the current episode alone: true "
         "(--set recurrence.reset_hidden_state=true)")
    gain = config.initialization.recurrent_gain
    need(core.torch_rnn or gain == InitializationConfig.recurrent_gain, "initialization.recurrent_gain", gain,
         f"it applies to torch's own recurrent layers ({', '.join(n for n, c in CORES.items() if c.torch_rnn)}); "
         f"the {rec.layer_type} core initialises its own parameters (--set initialization.recurrent_gain=1.0)")
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


def check_resume_overrides(saved: dict, config: Config) -> None:
    """Refuses what a resumed run cannot change: the keys declared resume="fixed" (the model, the environments and
    the normalisers' statistics depend on them) and resume="switch" (a loss term's own head exists while it is on)."""
    saved = _build(Config, saved, prefix="").to_dict()  # keys added since the checkpoint was written: defaults
    now, changed = config.to_dict(), []
    for name, f in config_fields(Config):
        was, is_ = _get(saved, name), _get(now, name)
        if f.metadata.get("resume") == "fixed" and was != is_:
            changed.append(name)
        elif f.metadata.get("resume") == "switch" and (was > 0) != (is_ > 0):
            changed.append(f"{name} (0 or not)")
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
