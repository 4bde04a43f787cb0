"""Many runs of one config: seeds, grids and searches as Ray Tune trials, each a normal run (docs/sweeps.md)."""
import argparse
import itertools
import json
import math
import os
import re
import reprlib
import secrets
import shlex
import shutil
import signal
import socket
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import yaml

from plumbing import script, stopping, threads

script.begin(__name__)  # before the imports below and Ray's, which take seconds

from config import SEEDS, config_from_dict, load_config  # noqa: E402
from plumbing.atomic import write_atomically  # noqa: E402
from plumbing.cli import ArgumentParser, failed, number  # noqa: E402
from plumbing.errors import ConfigError, WorkerError  # noqa: E402
from plumbing.files import reason, writable  # noqa: E402
from plumbing.yaml_input import read_yaml  # noqa: E402
from runs import check_run_id, default_run_id  # noqa: E402
from spaces import SpaceError  # noqa: E402
import tracking  # noqa: E402
from worker import make_probe  # noqa: E402

ROOT = Path(__file__).resolve().parent
METRICS = ("episode/reward_mean_last100", "episode/reward_mean", "episode/success_mean", "episode/length_mean",
           "eval/reward_mean", "eval/success_mean", "eval/length_mean")
DISTRIBUTIONS = ("loguniform", "uniform", "int", "choice")
MAX_TRIALS = 10_000  # Tune keeps every trial in the driver; also the bound of --max-concurrent
MAX_PER_TRIAL = 2 ** 16  # CPUs or GPUs: a trial runs on one node
TUNE_NOISE = ("Tuner.restore", "Stop signal received", "Failed to fetch metrics")  # sweep.py says these itself


@dataclass
class Sweep:
    """Everything a trial and a resumed sweep need; stored as <storage>/<sweep-id>/sweep.json."""
    sweep_id: str
    config_path: str
    sets: list[str]  # the --set items, already applied to config
    config: dict
    seeds: list[int]
    grid: dict[str, list] = field(default_factory=dict)
    search: dict[str, list] = field(default_factory=dict)  # key -> [kind, *arguments]
    samples: int = 0
    scheduler: str = "none"
    metric: str = METRICS[0]
    cpus: float = 1.0
    gpus: float = 0.0
    max_concurrent: int | None = None
    max_failures: int = 3
    storage: str = ""  # absolute folder or URI
    summaries: str = ""
    local: str = ""  # the sweep's folder on this machine (models/, stats.*): ./sweeps/<sweep-id> for a URI
    threshold: float | None = None
    updates: int = 0  # the most updates of any trial: ASHA's max_t
    track: dict | None = None  # --track: tracking.Tracking's project and entity; each trial a W&B run in one group

    @property
    def trials(self) -> int:
        return self.samples if self.search else len(self.seeds) * math.prod(map(len, self.grid.values()))

    @property
    def folder(self) -> str:
        return f"{self.storage.rstrip('/')}/{self.sweep_id}"


def seed_list(text: str) -> list[int]:
    return [int(seed) for seed in text.split(",")]


def parser() -> ArgumentParser:
    parser = ArgumentParser("sweep.py", description=__doc__, epilog="Ctrl-C, SIGTERM or SIGHUP stops the trials at "
                            "their checkpoints, a second one at once. Exit codes: 0 every trial ended, 1 a trial "
                            "failed more often than allowed, 2 refused (before starting, or a trial's config where the "
                            f"trial ran: not retried), {script.STOPPED}.")
    add = parser.add_argument
    seeds, varied = parser.add_mutually_exclusive_group(), parser.add_mutually_exclusive_group()
    add("--config", default="configs/poc_memory_env.yaml", help="the config every trial starts from (%(default)s)")
    add("--sweep-id", metavar="NAME", help="names its folders (default: the config's name and the time)")
    add("--set", action="append", default=[], metavar="KEY=VALUE", help="as train.py's, in every trial (repeatable)")
    seeds.add_argument("--seeds", type=number(int, 1, MAX_TRIALS), metavar="N", help="seeds 0..N-1 (default: the "
                       "config's seed)")
    seeds.add_argument("--seed-list", type=seed_list, metavar="a,b,c", help="these seeds")
    varied.add_argument("--grid", action="append", default=[], metavar="KEY=a,b,c",
                        help="one trial per value, read as yaml; several give every combination (repeatable)")
    varied.add_argument("--search", action="append", default=[], metavar="KEY=DIST", help="Optuna's TPE samples KEY "
                        "from loguniform:a:b, uniform:a:b, int:a:b (a, b included) or choice:a,b,c (repeatable)")
    add("--samples", type=number(int, 1, MAX_TRIALS), metavar="N", help="runs of a search, one seed each (default 10)")
    add("--scheduler", choices=("none", "asha"), default="none", help="asha: stop the trials that fall behind early")
    add("--metric", choices=METRICS, default=METRICS[0], metavar="TAG",
        help="what --search and --scheduler maximise: %(choices)s (the first by default)")
    add("--cpus-per-trial", type=number(float, 0.01, MAX_PER_TRIAL), default=1.0, metavar="N",
        help="CPUs a trial reserves, and its torch threads and environment processes (default: %(default)g)")
    add("--gpus-per-trial", type=number(float, 0, MAX_PER_TRIAL), default=0.0, metavar="F",
        help="a trial's share of a GPU, e.g. 0.25; above 0 it trains on cuda (default: %(default)g)")
    add("--max-concurrent", type=number(int, 1, MAX_TRIALS), metavar="N", help="at most N trials at once")
    add("--max-failures", type=number(int, 0), default=3, metavar="N",
        help="restarts of a trial whose process died, from its last checkpoint (default: %(default)s)")
    add("--address", help="a Ray cluster's: auto, HOST:PORT or ray://HOST:10001 (default: Ray in this process)")
    add("--storage", default="./sweeps", help="a folder every node sees, or s3://..., gs://... (%(default)s)")
    add("--threshold", type=number(float), metavar="X", help="the statistics add the fraction of seeds >= X")
    add("--resume", metavar="FOLDER", help="continue the sweep in <storage>/<sweep-id>; only --address and "
        "--threshold apply with it")
    tracking.add_flags(parser, "each trial")
    return parser


def _values(text: str, what: str) -> list:
    try:
        return read_yaml(f"[{text}]")  # a flow sequence: commas split, brackets nest
    except yaml.YAMLError:
        raise ConfigError(f"{what}: cannot read {reprlib.repr(text)} as yaml values") from None
    except ConfigError as error:
        raise ConfigError(f"{what}: {error}") from None


def read_keys(items: list[str], flag: str) -> dict[str, str]:
    read: dict[str, str] = {}
    for item in items:
        key, sep, text = item.partition("=")
        if not sep or not key or not text:
            raise ConfigError(f"{flag} expects KEY=VALUES, e.g. {flag} recurrence.layer_type=gru,lstm; got {item!r}")
        if key == "seed":
            raise ConfigError(f"{flag} seed: give seeds with --seeds N or --seed-list a,b,c")
        if key in read:
            raise ConfigError(f"{flag} {key} is given twice: list all its values in one {flag}")
        read[key] = text
    return read


def distribution(key: str, text: str) -> list:
    kind, _, rest = text.partition(":")
    if kind not in DISTRIBUTIONS or not rest:
        raise ConfigError(f"--search {key}: {text!r} is not a distribution: loguniform:a:b, uniform:a:b, int:a:b or "
                          "choice:a,b,c")
    if kind == "choice":
        if len(values := _values(rest, f"--search {key}")) < 2:
            raise ConfigError(f"--search {key}: choice needs at least two values, got {rest!r}")
        return [kind, *values]
    try:
        low, high = (int(p) if kind == "int" else float(p) for p in rest.split(":"))
    except ValueError:
        raise ConfigError(f"--search {key}: {kind} takes two {'integers' if kind == 'int' else 'numbers'}, e.g. "
                          f"{kind}:1:8; got {rest!r}") from None
    if not (math.isfinite(low) and math.isfinite(high) and low < high) or (kind == "loguniform" and low <= 0):
        raise ConfigError(f"--search {key}: {text!r} needs {'0 < ' if kind == 'loguniform' else ''}a < b")
    return [kind, low, high]


def read_sweep(args: argparse.Namespace) -> Sweep:
    """The sweep the command line describes, every trial's config checked; starts nothing, writes nothing."""
    config = load_config(args.config, args.set)
    grid = {key: _values(text, f"--grid {key}") for key, text in read_keys(args.grid, "--grid").items()}
    search = {key: distribution(key, text) for key, text in read_keys(args.search, "--search").items()}
    if args.samples is not None and not search:
        raise ConfigError("--samples is the number of runs of a search: give --search KEY=DIST with it")
    seeds = list(range(args.seeds)) if args.seeds else args.seed_list or [config.seed]
    if len(set(seeds)) < len(seeds) or not 0 <= min(seeds) <= max(seeds) < SEEDS:
        raise ConfigError(f"seeds must be distinct integers in [0, 2**32), got {reprlib.repr(seeds)}")
    if search and len(seeds) > 1:
        raise ConfigError("a search runs each sample with one seed: give --seed-list S (or none: the config's seed); "
                          "then run the best sample's config with --seeds N")
    sweep_id = args.sweep_id or default_run_id(args.config)
    check_run_id(sweep_id, "--sweep-id")
    track = tracking.from_flags(args)
    storage = args.storage.removeprefix("file://")
    storage = storage if "://" in storage else str(Path(storage).expanduser().resolve())
    sweep = Sweep(sweep_id, args.config, args.set, config.to_dict(), seeds, grid, search,
                  samples=args.samples or 10 * bool(search), scheduler=args.scheduler, metric=args.metric,
                  cpus=args.cpus_per_trial, gpus=args.gpus_per_trial, max_concurrent=args.max_concurrent,
                  max_failures=args.max_failures, storage=storage, threshold=args.threshold,
                  summaries=str(Path("summaries").resolve() / sweep_id),
                  local=str(Path(storage if "://" not in storage else "sweeps").resolve() / sweep_id),
                  track=track and {"project": track.project, "entity": track.entity})
    if sweep.trials > MAX_TRIALS:
        raise ConfigError(f"the sweep would run {sweep.trials:,} trials (seeds x grid points), more than "
                          f"{MAX_TRIALS:,}: split it into several sweeps")
    if sweep.gpus > 1 and sweep.gpus != int(sweep.gpus):
        raise ConfigError(f"--gpus-per-trial above 1 must be whole GPUs, got {sweep.gpus:g}")
    cpus = len(os.sched_getaffinity(0))
    if args.address is None and sweep.cpus > cpus:  # a cluster's nodes are known once Ray joins it
        raise ConfigError(f"--cpus-per-trial {sweep.cpus:g}: this machine has {cpus} CPUs")
    configs = check_trials(sweep, here=args.address is None)
    if sweep.metric.startswith("eval/") and not all(c.evaluation.interval for c in configs):
        raise ConfigError(f"--metric {sweep.metric} is scored by evaluations during training: "
                          "set evaluation.interval (e.g. --set evaluation.interval=10)")
    sweep.updates = max(c.updates for c in configs)
    return sweep


def check_trials(sweep: Sweep, here: bool) -> list:
    """Every grid point's config (or search bound's and choice's) refused as train.py refuses it: its checks, each
    distinct environment made once, its model built, and with `here` (trials on this machine) its rollout's memory."""
    points = [dict(zip(sweep.grid, values)) for values in itertools.product(*sweep.grid.values())]
    points += [{key: value} for key, (kind, *arguments) in sweep.search.items() for value in arguments]
    import torch

    from buffer import require_rollout_memory
    from model import build_model
    configs, names, made = [], set(), {}  # made: environment -> its spaces
    for point in points:
        what = f"{'--search' if sweep.search else '--grid'} {', '.join(f'{k}={v}' for k, v in point.items())}"
        if not sweep.search:
            if (name := trial_name({"seed": 0, **point})) in names:
                raise ConfigError(f"{what} gives two trials the name {name}: make the values differ in letters or "
                                  "digits")
            names.add(name)
        try:
            configs.append(config := trial_config(sweep, {"seed": sweep.seeds[0], **point}))
            evaluated = [config.environment.for_evaluation()] if config.evaluation.interval else []
            for environment in [config.environment, *evaluated]:
                if repr(environment) not in made:
                    env, made[repr(environment)] = make_probe(environment, config.seed)
                    env.close()
                    build_model(config, made[repr(environment)])  # an image smaller than the CNN's kernels, say
            if here:
                spaces = made[repr(config.environment)]
                with torch.device("meta"):  # the model's sizes without its memory
                    require_rollout_memory(config, spaces, build_model(config, spaces))
        except (ConfigError, SpaceError, WorkerError) as error:
            raise ConfigError(f"{what}: {error}" if point else str(error)) from None
    return configs


def check_new(sweep: Sweep) -> None:
    """Refuses a sweep whose folders exist (its trials would mix with another's) or cannot be made here."""
    for path in (sweep.folder, sweep.summaries, sweep.local):
        if "://" not in path and Path(path).exists():
            raise ConfigError(f"{path} exists: continue that sweep with --resume {sweep.folder}, "
                              "or choose another --sweep-id")
    for flag, path in (("--storage", Path(sweep.local).parent), ("summaries", Path(sweep.summaries).parent)):
        if why := writable(path):
            raise ConfigError(f"{flag} {path}: not a folder, or not writable ({why}): the sweep could not save "
                              "its work")


def read_sweep_file(folder: str) -> Sweep:
    import pyarrow.fs
    try:
        fs, path = pyarrow.fs.FileSystem.from_uri(folder if "://" in folder else str(Path(folder).resolve()))
        with fs.open_input_stream(f"{path}/sweep.json") as stream:
            return Sweep(**json.loads(stream.read()))
    except (OSError, ValueError, TypeError):
        raise ConfigError(f"{folder} is no sweep folder (no readable sweep.json): give <storage>/<sweep-id>") from None


def write_sweep_file(sweep: Sweep) -> None:
    data = (json.dumps(asdict(sweep), indent=1) + "\n").encode()
    if "://" in sweep.storage:  # an object store writes an object whole or not at all
        import pyarrow.fs
        fs, path = pyarrow.fs.FileSystem.from_uri(sweep.folder)
        with fs.open_output_stream(f"{path}/sweep.json") as out:
            out.write(data)
        return
    Path(sweep.folder).mkdir(parents=True, exist_ok=True)
    write_atomically(Path(sweep.folder) / "sweep.json", lambda tmp: tmp.write_bytes(data))


def override(key: str, value) -> str:
    """A value back as a --set item, in yaml's own dump: a float stays a float for any yaml reader."""
    return f"{key}={yaml.safe_dump(value, default_flow_style=True).strip().removesuffix(chr(10) + '...')}"


def trial_name(values: dict, trial_id: str = "") -> str:
    """seed3-initial0.0003: a valid run id, each key by its last part unless two keys share it. A search's
    trials end in Tune's trial id: two samples may look alike at four digits."""
    keys = [k for k in values if k != "seed"]
    last = [k.rsplit(".", 1)[-1] for k in keys]
    parts = [f"seed{values['seed']}"]
    for key, short, value in zip(keys, last, map(values.get, keys)):
        text = f"{value:.4g}" if isinstance(value, float) else value if isinstance(value, str) else json.dumps(value)
        parts.append(f"{short if last.count(short) == 1 else key}{text}")
    suffix = f"-{trial_id}" if trial_id else ""
    return re.sub(r"[^A-Za-z0-9._-]", "_", "-".join(parts))[:200 - len(suffix)] + suffix


def trial_config(sweep: Sweep, values: dict):
    """This trial's config; its threads and environment processes are the CPUs it reserves, as more threads
    than cores wait on each other, and with one core a worker process only adds a round trip per step."""
    config = config_from_dict(sweep.config, [override(k, v) for k, v in values.items()])
    threads = max(1, int(sweep.cpus))
    config.torch_threads = min(config.torch_threads or threads, threads)
    config.worker_processes = 0 if threads == 1 else min(config.worker_processes, threads)
    config.device = "cuda" if sweep.gpus > 0 else "cpu"
    return config


def run_trial(values: dict, sweep: dict) -> None:
    """A normal run that reports to Tune after every update and checkpoint; a restarted trial goes on from Tune's
    latest one. A config refused where it runs is reported, not raised (a restart would meet it again)."""
    from ray import tune
    sweep = Sweep(**sweep)
    try:
        train_trial(values, sweep)
    except ConfigError as error:
        tune.report({"refused": str(error), sweep.metric: float("nan"), "update": 0})


def train_trial(values: dict, sweep: Sweep) -> None:
    import ray
    from ray import tune

    from checkpoint import RunLock, load_checkpoint
    from trainer import Trainer
    name = tune.get_context().get_trial_name()
    models = Path(sweep.local) / "models"
    models.mkdir(parents=True, exist_ok=True)
    config = trial_config(sweep, values)
    lock = RunLock(models / f"{name}.lock").acquire()
    try:
        saved = None
        if (checkpoint := tune.get_checkpoint()) is not None:
            with checkpoint.as_directory() as folder:
                saved = load_checkpoint(Path(folder) / f"{name}.pt")
        else:  # an attempt that died before its first checkpoint would count as a second run of this seed
            shutil.rmtree(Path(sweep.summaries) / name, ignore_errors=True)
        track = sweep.track and tracking.Tracking(**sweep.track, name=name, group=sweep.sweep_id)
        trainer = Trainer(config, run_id=name, device=config.device, summaries_dir=sweep.summaries,
                          models_dir=models, verbose=False, summaries_path=saved and saved["summaries_path"],
                          tracking=track)
        if saved:
            trainer.load_state_dict(saved)
        # updates without an episode's end or an evaluation report the latest value, as stats.py reads curves
        latest = {sweep.metric: float("nan")}
        node = ray.get_runtime_context().get_node_id()
        staging = models / f".{name}.tune"

        def on_update(trainer, log, scalars: dict) -> None:
            if trainer.update == trainer.config.updates and trainer.saved_update != trainer.update:
                trainer.save()  # the final checkpoint travels with the final result
            latest.update((k, v) for k, v in scalars.items() if k.startswith(("episode/", "eval/")))
            metrics = {**scalars, **latest, "update": trainer.update, "updates": trainer.config.updates,
                       "node_id": node}
            if (tracker := trainer.summaries.tracker) is not None and tracker.off:  # said on the sweep's console
                metrics["tracking_off"] = tracker.off
            if trainer.saved_update != trainer.update:
                return tune.report(metrics)
            shutil.rmtree(staging, ignore_errors=True)
            staging.mkdir()
            try:  # a hard link: Tune copies the folder to its storage; the models/ file stays the run's own
                os.link(trainer.checkpoint_path, staging / trainer.checkpoint_path.name)
                tune.report(metrics, checkpoint=tune.Checkpoint.from_directory(str(staging)))
            finally:
                shutil.rmtree(staging, ignore_errors=True)
        trainer.run(on_update=on_update)
    finally:
        lock.release()


def check_address(address: str | None) -> None:
    """Refuses in 5 s an address where nothing listens, which Ray retries for minutes."""
    if address in (None, "auto"):
        return
    if not (match := re.fullmatch(r"(ray://)?(\[[^\]]+\]|[^:/\[\]]+)(?::(\d+))?", address)):
        raise ConfigError(f"--address must be auto, HOST:PORT or ray://HOST:PORT, got {address!r}")
    client, host, port = match.groups()
    port = int(port or (10001 if client else 6379))
    try:
        socket.create_connection((host.strip("[]"), port), timeout=5).close()
    except OSError as error:
        raise ConfigError(f"--address {address}: nothing answers at {host}:{port} ({reason(error)}); "
                          "start the cluster with `ray start --head`, or leave --address out to run here") from None


def start_ray(address: str | None, sweep: Sweep) -> None:
    """A Ray of its own in this process, or a connection to a cluster whose nodes have this repository here."""
    os.environ["TUNE_DISABLE_SIGINT_HANDLER"] = "1"  # main() answers SIGINT and SIGTERM alike
    os.environ["RAY_DISABLE_FAILURE_SIGNAL_HANDLER"] = "1"  # Ray's crash handler aborted the driver on SIGTERM
    os.environ.setdefault("TUNE_WARN_EXCESSIVE_EXPERIMENT_CHECKPOINT_SYNC_THRESHOLD_S", "0")  # num_to_keep=1's cost
    os.environ.setdefault("RAY_AIR_NEW_OUTPUT", "0")  # Tune's older reporter is silent at verbose=0
    if address is None:
        os.environ.setdefault("RAY_memory_monitor_refresh_ms", "0")  # out of memory is the kernel's call
        os.environ.setdefault("RAY_worker_niceness", "0")  # trials at the sweep's own priority, not 15 steps below
        if "RAY_AUTH_MODE" not in os.environ:  # Ray's token authentication, its token kept out of ~/.ray
            os.environ.update(RAY_AUTH_MODE="token", RAY_AUTH_TOKEN=os.environ.get("RAY_AUTH_TOKEN") or
                              secrets.token_hex(32))
    import logging

    import ray
    for name in ("ray.tune.tune", "ray.tune.analysis.experiment_analysis", "ray.tune.execution.experiment_state",
                 "ray.train._internal.syncer"):
        logging.getLogger(name).addFilter(_not_noise)
    path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    # log_to_driver=False: what a trial's process writes stays in Ray's logs (docs/sweeps.md)
    common = dict(logging_level=logging.WARNING, logging_config=ray.LoggingConfig(log_level="WARNING"),
                  runtime_env={"env_vars": {"PYTHONPATH": path, **threads.share_cores()}}, log_to_driver=False)
    if address is not None:
        try:
            return ray.init(address=address, **common)
        except (ConnectionError, RuntimeError, ValueError) as error:
            raise ConfigError(f"--address {address}: {reason(error, 300)}") from None
    with stopping.blocked():  # Ray's processes start with both signals blocked: the driver alone answers them
        ray.init(address="local", num_cpus=len(os.sched_getaffinity(0)), include_dashboard=False, **common)
    if sweep.gpus > (gpus := ray.cluster_resources().get("GPU", 0)):
        raise ConfigError(f"--gpus-per-trial {sweep.gpus:g}: this machine has {gpus:g} GPUs")


def _not_noise(record) -> bool:
    """False for Tune's lines that sweep.py says itself, and for a save of Tune's state that failed on
    Tune's own temporary file, renamed meanwhile: the next save copies it."""
    text = record.getMessage() + str(record.exc_info)
    return not any(words in text for words in TUNE_NOISE) and not ("FileNotFoundError" in text and "-tmp-" in text)


def space(sweep: Sweep) -> dict:
    from ray import tune
    if not sweep.search:
        return {"seed": tune.grid_search(sweep.seeds), **{k: tune.grid_search(v) for k, v in sweep.grid.items()}}
    kinds = {"loguniform": tune.loguniform, "uniform": tune.uniform, "choice": lambda *values: tune.choice(values),
             "int": lambda a, b: tune.randint(a, b + 1)}  # Tune's upper bound is exclusive
    return {"seed": sweep.seeds[0], **{k: kinds[kind](*args) for k, (kind, *args) in sweep.search.items()}}


def searcher(sweep: Sweep):
    """Optuna's TPE seeded with the sweep's seed: the same command samples the same values (docs/sweeps.md)."""
    import optuna
    from ray.tune.search.optuna import OptunaSearch
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    return OptunaSearch(metric=sweep.metric, mode="max", seed=sweep.seeds[0]) if sweep.search else None


def tuner(sweep: Sweep, resume: bool):
    from ray import tune
    from ray.tune.schedulers import ASHAScheduler
    trainable = tune.with_resources(tune.with_parameters(run_trial, sweep=asdict(sweep)),
                                    {"cpu": sweep.cpus, "gpu": sweep.gpus})
    if resume:
        return tune.Tuner.restore(sweep.folder, trainable, resume_unfinished=True, resume_errored=True)
    ranked = bool(sweep.search) or sweep.scheduler != "none"

    def name(trial) -> str:
        return trial_name(trial.config, trial.trial_id if sweep.search else "")
    return tune.Tuner(trainable, param_space=space(sweep), tune_config=tune.TuneConfig(
        metric=sweep.metric if ranked else None, mode="max" if ranked else None, search_alg=searcher(sweep),
        # ASHA's first rung after a quarter of the updates (RL curves are noisy early), then half go on at each
        scheduler=ASHAScheduler(time_attr="update", max_t=sweep.updates, grace_period=max(1, sweep.updates // 4),
                                reduction_factor=2) if sweep.scheduler == "asha" else None,
        num_samples=sweep.samples if sweep.search else 1, max_concurrent_trials=sweep.max_concurrent,
        trial_name_creator=name, trial_dirname_creator=name),
        run_config=tune.RunConfig(
            name=sweep.sweep_id, storage_path=sweep.storage, verbose=0, callbacks=[progress(sweep)],
            failure_config=tune.FailureConfig(max_failures=sweep.max_failures),
            checkpoint_config=tune.CheckpointConfig(num_to_keep=1)))


def progress(sweep: Sweep):
    """One line per trial that ends, fails or restarts, and one for each whose tracking is off."""
    from ray import tune

    class Progress(tune.Callback):
        stopping = False

        def on_step_begin(self, iteration, trials, **info):
            # Tune's own stop signal, sent here where Tune's handler is in place. The Stop is looked up, not
            # held: a resumed sweep's callback is a copy unpickled from Tune's state, and so would be a held one
            stop = stopping.Stop.in_place
            if stop is not None and stop.signal is not None and not self.stopping:
                self.stopping = True
                print(f"{signal.Signals(stop.signal).name}: stopping the trials at their next update; their "
                      "checkpoints are kept (send it again to stop at once)", file=sys.stderr, flush=True)
                signal.raise_signal(signal.SIGUSR1)

        def on_trial_result(self, iteration, trials, trial, result, **info):
            if "refused" in result and not self.stopping:  # report() says it
                self.stopping = True
                signal.raise_signal(signal.SIGUSR1)
            if result.get("tracking_off") and not trial.last_result.get("tracking_off"):  # once: Tune updates it after
                print(f"warning: {trial}: tracking is off: {result['tracking_off']}; the trial trains on with "
                      "TensorBoard", file=sys.stderr, flush=True)

        def on_trial_complete(self, iteration, trials, trial, **info):
            if "refused" not in (result := trial.last_result):
                stopped = "" if result.get("update") == result.get("updates") else " (stopped early)"
                print(f"{trial} finished at update {result.get('update')}{stopped}: {sweep.metric} "
                      f"{result.get(sweep.metric, float('nan')):.4g}", flush=True)

        def on_trial_recover(self, iteration, trials, trial, **info):
            print(f"{trial} failed ({trial.num_failures} of {sweep.max_failures} restarts): restarting from its "
                  "last checkpoint", flush=True)

        def on_trial_error(self, iteration, trials, trial, **info):
            print(f"{trial} failed {trial.num_failures} times: given up (its error: {trial.path}/error.txt)",
                  flush=True)
    return Progress()


def main(argv: list[str] | None = None) -> int:
    began, run = time.perf_counter(), {}

    def start():
        args = (command := parser()).parse_args(argv)
        if args.resume:  # read again into Nones: argparse fills no defaults in, so what is set was given
            given = command.parse_args(argv, argparse.Namespace(**dict.fromkeys(vars(args))))
            if flags := [f"--{k.replace('_', '-')}" for k, v in vars(given).items()
                         if v is not None and k not in ("resume", "address", "threshold")]:
                raise ConfigError(f"{', '.join(flags)} cannot be combined with --resume (the sweep keeps them)")
            sweep = read_sweep_file(args.resume)
            sweep.threshold = sweep.threshold if args.threshold is None else args.threshold
        else:
            check_new(sweep := read_sweep(args))
        check_address(args.address)
        run["sweep"] = sweep
        return args, sweep

    def work(started) -> int:
        args, sweep = started
        stop = stopping.Stop.in_place
        try:
            start_ray(args.address, sweep)
        except SystemExit:  # ray.init's own SIGTERM handler, in place while Ray starts
            stop.signal = stop.signal or signal.SIGTERM
        except ConfigError:
            if stop.signal is None:
                raise
        stop.working(on_first=lambda number: None)  # again: ray.init replaced the SIGTERM handler
        if stop.signal is not None:
            return stop.report()
        if not args.resume:
            try:
                write_sweep_file(sweep)
            except OSError as error:
                raise script.Failed(f"could not write {sweep.folder}/sweep.json ({error}); no trial was started")
        results = tuner(sweep, bool(args.resume)).fit()
        return report(sweep, list(results), time.perf_counter() - began, stop.signal)

    def close() -> None:
        if "ray" in sys.modules:  # stopping Ray's processes takes a moment: let it finish
            for number in stopping.STOP_SIGNALS:
                signal.signal(number, signal.SIG_IGN)
            sys.modules["ray"].shutdown()
    # the first signal is noted (Tune stops the trials at their checkpoints), a second stops at once
    return script.life(start, work, on_first=lambda number: None, close=close,
                       at_once=lambda: f" at once; resume with: python sweep.py --resume {run['sweep'].folder}")


def report(sweep: Sweep, results: list, seconds: float, stopped_by: int | None) -> int:
    """Statistics over the trials that ran all their updates (not those ASHA cut), a search's best sample; exit code."""
    import stats
    ended = [r for r in results if r.error is None]
    if refused := [r for r in ended if "refused" in r.metrics]:
        return failed(f"{Path(refused[0].path).name}: {refused[0].metrics['refused']} (the trial's config, refused "
                      "where it ran: not retried; the sweep stopped)")
    finished = [r for r in ended if r.metrics.get("update") == r.metrics.get("updates")]
    if stopped_by is not None:
        print(f"stopped with {len(finished)} of {sweep.trials} trials finished; resume with: python sweep.py "
              f"--resume {sweep.folder}", flush=True)
        return 128 + stopped_by
    code, out = 0, Path(sweep.local) / "stats"
    try:
        if not finished:
            raise ConfigError("no trial ran all its updates")
        table = stats.report([Path(sweep.summaries) / Path(r.path).name for r in finished], out, sweep.threshold)
        print(f"{table}statistics in {out}.md, .json, .png")
    except ConfigError as error:
        print(f"no statistics: {error}", file=sys.stderr)
    except (OSError, script.Failed) as error:  # a read, or stats.report's write
        code = failed(f"no statistics: {error}; the trials' models and summaries are kept", 1)
    stopped = f", {len(ended) - len(finished)} of them stopped early by ASHA" if len(ended) > len(finished) else ""
    print(f"sweep {sweep.sweep_id}: {len(ended)} of {sweep.trials} trials ended{stopped}, in {seconds:.0f} s wall "
          f"time; models in {sweep.local}/models, summaries in {sweep.summaries}", flush=True)
    if sweep.search and ended:
        best = max(finished or ended, key=lambda r: _score(r.metrics.get(sweep.metric)))
        sets = [*sweep.sets, *(override(k, v) for k, v in best.config.items() if k != "seed")]
        command = shlex.join(["python", "sweep.py", "--config", sweep.config_path,
                              *(arg for item in sets for arg in ("--set", item)), "--seeds", "10"])
        print(f"best sample: {Path(best.path).name} ({sweep.metric} {_score(best.metrics.get(sweep.metric)):.4g} "
              f"at update {best.metrics.get('update')}); run it over seeds with: {command}")
    if lost := len(results) - len(ended):
        return failed(f"{lost} trial(s) failed more than {sweep.max_failures} times (see error.txt in their folders "
                      f"under {sweep.folder}); retry them with: python sweep.py --resume {sweep.folder}", 1)
    return code


def _score(value) -> float:
    return -math.inf if value is None or math.isnan(value) else value


if __name__ == "__main__":
    script.run(main, quick_exit=True)
