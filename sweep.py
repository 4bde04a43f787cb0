"""Many runs of one config: seeds, grids and searches as Ray Tune trials, each a normal run.

Usage:
  sweep.py [options] [--set=<kv>]... [--grid=<kv>]... [--search=<kd>]...
  sweep.py --help

Options:
  --config=<path>         The yaml config every trial starts from [default: configs/poc_memory_env.yaml].
  --sweep-id=<name>       Names the sweep's folders, <storage>/<sweep-id>/ and summaries/<sweep-id>/;
                          letters, digits, '.', '_' and '-'. Default: the config's name and the start time.
  --set=<kv>              Override one config key in every trial, as train.py's --set (repeatable).
  --grid=<kv>             KEY=a,b,c: one trial per value, read as yaml like --set; several --grid
                          give every combination (repeatable).
  --seeds=<n>             Run every grid point with seeds 0..n-1. Default: the config's seed.
  --seed-list=<list>      Run every grid point with these seeds, e.g. 3,4,5.
  --search=<kd>           KEY=DIST: Optuna's TPE samples KEY from DIST, one of loguniform:a:b,
                          uniform:a:b, int:a:b (a and b included) or choice:a,b,c (repeatable).
                          Each sample is one run with one seed (see docs/sweeps.md).
  --samples=<n>           Runs a search samples (default 10).
  --scheduler=<name>      none, or asha: stop the trials that fall behind early [default: none].
  --metric=<tag>          What --search and --scheduler maximise [default: episode/reward_mean_last100].
  --cpus-per-trial=<n>    CPUs a trial reserves; its torch threads and environment processes are
                          sized to them [default: 1].
  --gpus-per-trial=<f>    The share of a GPU a trial reserves, e.g. 0.25; above 0 it trains on
                          cuda, else on the cpu [default: 0].
  --max-concurrent=<n>    Run at most n trials at once. Default: as many as the CPUs and GPUs hold.
  --max-failures=<n>      Restarts of a trial whose process died, each from its last checkpoint [default: 3].
  --address=<address>     Run on an existing Ray cluster: auto (the one `ray start` started on this
                          machine), HOST:PORT (its head) or ray://HOST:10001 (a Ray client).
                          Default: a Ray started in this process on this machine's CPUs.
  --storage=<path>        Where Tune keeps results and checkpoints: a folder that every node sees,
                          or an object store URI (s3://..., gs://...) [default: ./sweeps].
  --threshold=<x>         The statistics also give the fraction of seeds scoring at least x.
  --resume=<folder>       Continue an interrupted sweep (its <storage>/<sweep-id>): finished trials
                          are kept, the others go on from their last checkpoints. Only --address
                          and --threshold apply with it.

When the sweep ends it prints the statistics over seeds (stats.py), written to
<storage>/<sweep-id>/stats.{md,json,png}. Ctrl-C (SIGINT) or SIGTERM, to this process or its
process group, stops the trials, keeps their last checkpoints and exits 130 or 143; a second
one stops at once. Exit codes: 0 every trial finished, 1 a trial failed more often than
allowed, 2 refused before starting (bad config, flag or address), 130 / 143 stopped.
"""
from __future__ import annotations

import signal

import stopping
from stopping import STOP_SIGNALS, leave_at_once_on_stop_signals

if __name__ == "__main__":
    leave_at_once_on_stop_signals()  # until main() takes over: nothing is started yet

import itertools  # noqa: E402  (the imports below and Ray's take seconds: a Ctrl-C among them is handled above)
import json  # noqa: E402
import math  # noqa: E402
import os  # noqa: E402
import re  # noqa: E402
import reprlib  # noqa: E402
import resource  # noqa: E402
import secrets  # noqa: E402
import shlex  # noqa: E402
import shutil  # noqa: E402
import socket  # noqa: E402
import sys  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402
from dataclasses import asdict, dataclass, field  # noqa: E402
from datetime import datetime  # noqa: E402
from pathlib import Path  # noqa: E402

import yaml  # noqa: E402

from atomic import temporary_beside  # noqa: E402
from cli import command_line, start_up_warnings  # noqa: E402
from config import ConfigError, apply_override, config_from_dict, load_config, read_yaml, validate  # noqa: E402

ROOT = Path(__file__).resolve().parent
SWEEP_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,199}")
METRICS = ("episode/reward_mean_last100", "episode/reward_mean", "episode/success_mean", "episode/length_mean",
           "eval/reward_mean", "eval/success_mean", "eval/length_mean")  # eval/*: config `evaluation`
DISTRIBUTIONS = ("loguniform", "uniform", "int", "choice")
# The most trials one sweep runs (seeds x grid points, or a search's samples): Tune keeps every trial
# in the driver and rewrites the state of all of them as the sweep goes, and sweep.py builds and checks
# each trial's config before Ray starts; the largest sweep here ran 10 seeds x 12 grid points, while
# --seeds 10**12 ended in a MemoryError. Its bound on --max-concurrent, too.
MAX_TRIALS = 10_000
# The most CPUs or GPUs one trial may reserve: a trial runs on one node, and no node has more.
MAX_PER_TRIAL = 2 ** 16
OWN_FLAGS = ("--resume", "--address", "--threshold")  # what --resume can be combined with


@dataclass
class Sweep:
    """Everything a trial and a resumed sweep need; stored as <storage>/<sweep-id>/sweep.json."""
    sweep_id: str
    config_path: str  # as given to --config, for the lines sweep.py prints
    sets: list[str]  # the --set items, already applied to config
    config: dict  # the yaml, --set applied
    seeds: list[int]
    grid: dict[str, list] = field(default_factory=dict)  # key -> values
    search: dict[str, list] = field(default_factory=dict)  # key -> [kind, *arguments]
    samples: int = 0  # trials of a search
    scheduler: str = "none"
    metric: str = METRICS[0]
    cpus: float = 1.0  # per trial
    gpus: float = 0.0  # per trial
    max_concurrent: int | None = None
    max_failures: int = 3
    storage: str = ""  # absolute folder or URI: Tune's storage_path
    summaries: str = ""  # absolute: summaries/<sweep-id>
    local: str = ""  # absolute: the sweep's folder on this file system (models/, stats.*)
    threshold: float | None = None
    updates: int = 0  # the most updates of any trial: ASHA's max_t

    @property
    def trials(self) -> int:
        if self.search:
            return self.samples
        return len(self.seeds) * math.prod(len(values) for values in self.grid.values())


# ---------------------------------------------------------------- reading the command line

def _yaml(text: str, what: str):
    try:
        return read_yaml(text)
    except yaml.YAMLError:
        raise ConfigError(f"{what}: cannot read {reprlib.repr(text)} as yaml") from None
    except ConfigError as error:
        raise ConfigError(f"{what}: {error}") from None


def _key_values(item: str, flag: str) -> tuple[str, str]:
    key, sep, text = item.partition("=")
    if not sep or not key or not text:
        raise ConfigError(f"{flag} expects KEY=VALUES, e.g. {flag} recurrence.layer_type=gru,lstm; got {item!r}")
    if key == "seed":
        raise ConfigError(f"{flag} seed: give seeds with --seeds N or --seed-list a,b,c")
    return key, text


def read_grid(items: list[str]) -> dict[str, list]:
    grid: dict[str, list] = {}
    for item in items:
        key, text = _key_values(item, "--grid")
        values = _yaml(f"[{text}]", f"--grid {key}")  # a flow sequence: commas split, brackets nest
        if key in grid:
            raise ConfigError(f"--grid {key} is given twice: list all its values in one --grid")
        if len({json.dumps(v, sort_keys=True) for v in values}) < len(values):
            raise ConfigError(f"--grid {key}: a value is given twice in {text!r}")
        grid[key] = values
    return grid


def read_search(items: list[str]) -> dict[str, list]:
    search: dict[str, list] = {}
    for item in items:
        key, text = _key_values(item, "--search")
        kind, _, rest = text.partition(":")
        if kind not in DISTRIBUTIONS or not rest:
            raise ConfigError(f"--search {key}: {text!r} is not a distribution: loguniform:a:b, uniform:a:b, "
                              "int:a:b or choice:a,b,c")
        if kind == "choice":
            values = _yaml(f"[{rest}]", f"--search {key}")
            if len(values) < 2:
                raise ConfigError(f"--search {key}: choice needs at least two values, got {rest!r}")
            search[key] = [kind, *values]
            continue
        parts = rest.split(":")
        try:
            low, high = (int(p) if kind == "int" else float(p) for p in parts)
        except ValueError:
            raise ConfigError(f"--search {key}: {kind} takes two {'integers' if kind == 'int' else 'numbers'}, "
                              f"e.g. {kind}:1:8; got {rest!r}") from None
        if not (math.isfinite(low) and math.isfinite(high) and low < high) or (kind == "loguniform" and low <= 0):
            raise ConfigError(f"--search {key}: {text!r} needs {'0 < ' if kind == 'loguniform' else ''}a < b")
        search[key] = [kind, low, high]
    return search


def read_seeds(args: dict, config_seed: int, searching: bool) -> list[int]:
    if args["--seeds"] and args["--seed-list"]:
        raise ConfigError("--seeds and --seed-list cannot be combined")
    if args["--seeds"]:
        if not re.fullmatch(r"\d+", args["--seeds"]) or not 1 <= int(args["--seeds"]) <= MAX_TRIALS:
            raise ConfigError(f"--seeds must be an integer from 1 to {MAX_TRIALS:,} (the most trials a sweep runs), "
                              f"got {reprlib.repr(args['--seeds'])}")
        seeds = list(range(int(args["--seeds"])))
    elif args["--seed-list"]:
        if not re.fullmatch(r"\d+(,\d+)*", args["--seed-list"]):
            raise ConfigError(f"--seed-list must be integers separated by commas, e.g. 3,4,5; "
                              f"got {reprlib.repr(args['--seed-list'])}")
        seeds = [int(s) for s in args["--seed-list"].split(",")]
    else:
        seeds = [config_seed]
    if len(set(seeds)) < len(seeds) or max(seeds) >= 2 ** 32:
        raise ConfigError(f"seeds must be distinct integers in [0, 2**32), got {reprlib.repr(seeds)}")
    if searching and len(seeds) > 1:
        raise ConfigError("a search runs each sample with one seed: give --seed-list S (or none: the config's seed); "
                          "then run the best sample's config with --seeds N")
    return seeds


def _number(args: dict, flag: str, kind=float, low: float = 0.0, high: float = math.inf):
    text = args[flag]
    try:
        value = kind(text)
    except (TypeError, ValueError):
        value = None
    # compared, never converted: math.isfinite(10**400) raises OverflowError
    if value is None or not low <= value <= high or (kind is float and not math.isfinite(value)):
        what = 'number' if kind is float else 'whole number'
        within = f">= {low:g}" if high == math.inf else f"from {low:g} to {high:,g}"
        raise ConfigError(f"{flag} must be a {what} {within}, got {reprlib.repr(text)}")
    return value


def override(key: str, value) -> str:
    """A parsed value back as a --set item; yaml's own dump, so 1e-05 stays a float (yaml reads '1e-05' as text)."""
    text = yaml.safe_dump(value, default_flow_style=True).strip()
    return f"{key}={text.removesuffix(chr(10) + '...')}"


def check_values(raw: dict, grid: dict[str, list], search: dict[str, list]) -> list:
    """Builds the config of every grid point, and of every search bound and choice: an unknown key or
    a value its key does not allow ends here, as one ConfigError line that names the key."""
    points = [dict(zip(grid, values)) for values in itertools.product(*grid.values())]
    for key, (kind, *arguments) in search.items():
        points += [{key: value} for value in arguments]
    configs = []
    for point in points:
        try:
            configs.append(config_from_dict(raw, [override(k, v) for k, v in point.items()]))
        except ConfigError as error:
            flag = "--grid" if set(point) <= set(grid) else "--search"
            raise ConfigError(f"{flag} {', '.join(f'{k}={v}' for k, v in point.items())}: {error}") from None
    return configs


def read_sweep(args: dict) -> Sweep:
    """The sweep the command line describes, every input checked; starts nothing, writes nothing."""
    config = load_config(args["--config"], args["--set"])  # the environment's settings are checked here too
    raw = read_yaml(Path(args["--config"]).read_text(encoding="utf-8")) or {}  # as load_config read it
    for item in args["--set"]:
        apply_override(raw, item)
    grid, search = read_grid(args["--grid"]), read_search(args["--search"])
    if grid and search:
        raise ConfigError("--grid and --search cannot be combined: give the grid's values to the search as "
                          "choice:a,b,c")
    if args["--samples"] is not None and not search:
        raise ConfigError("--samples is the number of runs of a search: give --search KEY=DIST with it")
    if set(grid) & set(search):
        raise ConfigError(f"{', '.join(set(grid) & set(search))} is given to --grid and --search")
    seeds = read_seeds(args, config.seed, bool(search))
    samples = (_number(args, "--samples", int, 1, MAX_TRIALS) if args["--samples"] is not None
               else (10 if search else 0))
    trials = samples if search else len(seeds) * math.prod(len(values) for values in grid.values())
    if trials > MAX_TRIALS:  # before any config is built for them
        raise ConfigError(f"the sweep would run {trials:,} trials (seeds x grid points), more than {MAX_TRIALS:,}: "
                          "split it into several sweeps")
    configs = check_values(raw, grid, search)
    if args["--scheduler"] not in ("none", "asha"):
        raise ConfigError(f"--scheduler must be none or asha, got {args['--scheduler']!r}")
    if args["--metric"] not in METRICS:
        raise ConfigError(f"--metric must be one of {', '.join(METRICS)}, got {args['--metric']!r}")
    if args["--metric"].startswith("eval/") and not all(c.evaluation.interval for c in configs):
        raise ConfigError(f"--metric {args['--metric']} is scored by evaluations during training: "
                          "set evaluation.interval (e.g. --set evaluation.interval=10)")
    sweep_id = args["--sweep-id"] or f"{Path(args['--config']).stem}-{datetime.now():%Y%m%d-%H%M%S}"
    if not SWEEP_ID.fullmatch(sweep_id):
        raise ConfigError(f"--sweep-id {sweep_id!r} is not allowed: letters, digits, '.', '_' and '-' "
                          "(no folders, no leading '.' or '-')")
    storage = args["--storage"] if "://" in args["--storage"] else str(Path(args["--storage"]).expanduser().resolve())
    local = Path(storage if "://" not in storage else Path("sweeps").resolve()) / sweep_id
    sweep = Sweep(
        sweep_id, args["--config"], args["--set"], raw, seeds, grid, search,
        samples=samples, scheduler=args["--scheduler"], metric=args["--metric"],
        cpus=_number(args, "--cpus-per-trial", float, 0.01, MAX_PER_TRIAL),
        gpus=_number(args, "--gpus-per-trial", float, 0, MAX_PER_TRIAL),
        max_concurrent=_number(args, "--max-concurrent", int, 1, MAX_TRIALS) if args["--max-concurrent"] else None,
        max_failures=_number(args, "--max-failures", int, 0), storage=storage,
        summaries=str(Path("summaries").resolve() / sweep_id), local=str(local),
        threshold=_number(args, "--threshold", float, -math.inf) if args["--threshold"] else None)
    if sweep.gpus > 1 and sweep.gpus != int(sweep.gpus):
        raise ConfigError(f"--gpus-per-trial above 1 must be whole GPUs, got {sweep.gpus:g}")
    cpus = len(os.sched_getaffinity(0))
    if args["--address"] is None and sweep.cpus > cpus:  # a cluster's nodes are known once Ray joins it
        raise ConfigError(f"--cpus-per-trial {sweep.cpus:g}: this machine has {cpus} CPUs")
    trial_names(sweep)  # names must be distinct
    sweep.updates = max(c.updates for c in configs)
    return sweep


# ---------------------------------------------------------------- names, configs, files

def _short(keys: list[str]) -> dict[str, str]:
    """Each key by its last part (learning_rate_schedule.initial -> initial) unless two keys share it."""
    last = [k.rsplit(".", 1)[-1] for k in keys]
    return {k: (s if last.count(s) == 1 else k) for k, s in zip(keys, last)}


def _text(value) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return value if isinstance(value, str) else json.dumps(value)


def trial_name(values: dict, trial_id: str = "") -> str:
    """seed3-initial0.0003: readable, and a valid run id (letters, digits, '.', '_', '-'). A search's
    trials end in Tune's trial id: two samples may look alike at four digits."""
    keys = [k for k in values if k != "seed"]
    short = _short(keys)
    parts = [f"seed{values['seed']}", *(f"{short[k]}{_text(values[k])}" for k in keys)]
    suffix = f"-{trial_id}" if trial_id else ""
    return re.sub(r"[^A-Za-z0-9._-]", "_", "-".join(parts))[:200 - len(suffix)] + suffix


def trial_names(sweep: Sweep) -> list[str]:
    """The grid's trial names; refuses two trials with one name (values that differ only in dropped characters)."""
    if sweep.search:
        return []
    names = [trial_name({"seed": seed, **dict(zip(sweep.grid, values))})
             for seed in sweep.seeds for values in itertools.product(*sweep.grid.values())]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise ConfigError(f"--grid values give two trials the name {twice[0]}: make them differ in letters or digits")
    return names


def trial_config(sweep: Sweep, values: dict):
    """This trial's config, its threads and environment processes sized to the CPUs it reserves.

    Why not more threads than reserved CPUs: on this project's 2-core machine, beside one other
    training run, two torch threads trained masked CartPole and MiniGrid at 0.14x the speed of one
    (results/speed/threads.md): threads that outnumber the cores a trial may use wait on each other,
    so a sweep packs one trial per reserved core and gives each exactly its share.
    """
    config = config_from_dict(sweep.config, [override(k, v) for k, v in values.items() if k != "seed"])
    config.seed = values["seed"]
    threads = max(1, int(sweep.cpus))
    config.torch_threads = min(config.torch_threads or threads, threads)
    # With one core, a worker process only adds a round trip per step: step in the trainer's process.
    config.worker_processes = 0 if threads == 1 else min(config.worker_processes, threads)
    config.device = "cuda" if sweep.gpus > 0 else "cpu"
    validate(config)
    return config


def _filesystem(storage: str):
    """(pyarrow file system, path in it) of a folder or URI."""
    import pyarrow.fs
    if "://" not in storage:
        return pyarrow.fs.LocalFileSystem(), storage
    try:
        return pyarrow.fs.FileSystem.from_uri(storage)
    except (pyarrow.ArrowException, OSError, ValueError) as error:
        raise ConfigError(f"--storage {storage}: {' '.join(str(error).split())[:200]}") from None


# An object store that does not answer within this many seconds is refused: pyarrow's own retries
# went on for more than 5 minutes (gs:// with no network), deaf to Ctrl-C inside its C++ code.
STORAGE_SECONDS = 30


def _in_time(function, what: str):
    """function(), run in a thread of its own: a ConfigError if it takes more than STORAGE_SECONDS
    (the thread is left behind, a daemon, stuck in the object store's client)."""
    outcome: dict = {}

    def call():
        try:
            outcome["value"] = function()
        except BaseException as error:  # handed to the caller below
            outcome["error"] = error
    thread = threading.Thread(target=call, daemon=True, name="storage-check")
    thread.start()
    thread.join(STORAGE_SECONDS)  # a stop signal still reaches this thread's handler meanwhile
    if thread.is_alive():
        raise ConfigError(f"{what}: no answer within {STORAGE_SECONDS} s (unreachable, or no credentials?)")
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]


def _exists(storage: str) -> bool:
    import pyarrow
    import pyarrow.fs

    def look() -> bool:
        fs, path = _filesystem(storage)
        return fs.get_file_info(path).type != pyarrow.fs.FileType.NotFound
    try:
        return _in_time(look, storage)
    except (pyarrow.ArrowException, OSError) as error:
        raise ConfigError(f"{storage} cannot be read: {' '.join(str(error).split())[:200]}") from None


def _uri_problem(uri: str) -> str | None:
    """_folder_problem for a URI: a file in the folder's place, or an object that cannot be written
    there (one is written and deleted)."""
    import pyarrow
    import pyarrow.fs
    fs, path = _filesystem(uri)
    if isinstance(fs, pyarrow.fs.LocalFileSystem):
        return _folder_problem(path)
    try:
        if fs.get_file_info(path).type == pyarrow.fs.FileType.File:
            return f"{uri} is a file, not a folder"
        probe = f"{path.rstrip('/')}/.write-test-{os.getpid()}-{secrets.token_hex(4)}"
        with fs.open_output_stream(probe) as out:
            out.write(b"\0")
        fs.delete_file(probe)
    except (pyarrow.ArrowException, OSError) as error:
        return f"cannot write there ({' '.join(str(error).split())[:200]})"
    return None


def _folder_problem(path: str) -> str | None:
    """Why files cannot be made under the local folder `path` (made if missing), in a few words, or
    None. Checked on its nearest existing folder, by writing a byte there (and removing it): a file
    in its place, a folder without write permission, a full disk. Writes nothing that stays."""
    existing = next(p for p in [Path(path), *Path(path).parents] if os.path.lexists(p))
    if not existing.is_dir():
        return f"{existing} is a file, not a folder"
    probe = existing / f".write-test-{os.getpid()}-{secrets.token_hex(4)}"
    try:
        with open(probe, "xb") as file:
            file.write(b"\0")
    except OSError as error:
        return f"{existing} is not writable ({error.strerror or error})"
    finally:
        try:
            probe.unlink()
        except OSError:
            pass
    return None


def _join(storage: str, *parts: str) -> str:
    return "/".join([storage.rstrip("/"), *parts])


def check_new(sweep: Sweep) -> None:
    """Refuses a sweep whose folders exist (its trials would mix with another sweep's) or cannot be made."""
    folder = _join(sweep.storage, sweep.sweep_id)
    for path in (folder, sweep.summaries, sweep.local):
        if "://" in path or Path(path).exists():
            if _exists(path):
                raise ConfigError(f"{path} exists: continue that sweep with --resume {folder}, "
                                  "or choose another --sweep-id")
    for flag, path in (("--storage", sweep.storage), ("summaries", sweep.summaries), ("--storage", sweep.local)):
        problem = _in_time(lambda: _uri_problem(path), path) if "://" in path else _folder_problem(path)
        if problem:
            raise ConfigError(f"{flag} {path}: {problem}: the sweep could not save its work")


def check_address(address: str | None) -> None:
    """Fails fast (5 s) when nothing listens at the address, instead of Ray's minutes of retries."""
    if address in (None, "auto"):
        return
    match = re.fullmatch(r"(ray://)?(\[[^\]]+\]|[^:/\[\]]+)(?::(\d+))?", address)
    if not match:
        raise ConfigError(f"--address must be auto, HOST:PORT or ray://HOST:PORT, got {address!r}")
    client, host, port = match.groups()
    port = int(port or (10001 if client else 6379))
    try:
        socket.create_connection((host.strip("[]"), port), timeout=5).close()
    except OSError as error:
        raise ConfigError(f"--address {address}: nothing answers at {host}:{port} ({error.strerror or error}); "
                          "start the cluster with `ray start --head`, or leave --address out to run here") from None


def write_json(storage_folder: str, name: str, data: dict) -> None:
    """<storage_folder>/<name>, written under a temporary name and moved there: a full disk leaves no half file."""
    fs, path = _filesystem(storage_folder)
    fs.create_dir(path, recursive=True)
    tmp = f"{path}/{temporary_beside(Path(name)).name}"  # atomic.py's name rule, in pyarrow's file system
    try:
        with fs.open_output_stream(tmp) as out:
            out.write((json.dumps(data, indent=1) + "\n").encode())
        fs.move(tmp, f"{path}/{name}")
    except BaseException:
        try:
            fs.delete_file(tmp)
        except Exception:  # it was never made, or is gone already: nothing to clean
            pass
        raise


def read_sweep_file(folder: str) -> Sweep:
    import pyarrow

    def read() -> dict:
        fs, path = _filesystem(folder if "://" in folder else str(Path(folder).resolve()))
        with fs.open_input_stream(f"{path}/sweep.json") as stream:
            return json.loads(stream.read())
    try:
        data = _in_time(read, f"--resume {folder}")
    except ConfigError:
        raise
    except (pyarrow.ArrowException, OSError, ValueError):
        raise ConfigError(f"{folder} is not a sweep folder (no readable sweep.json): give <storage>/<sweep-id>") \
            from None
    return Sweep(**data)


# ---------------------------------------------------------------- one trial (runs in a Ray worker)

def run_trial(values: dict, sweep: dict) -> None:
    """One trial: a normal run of the Trainer that reports to Tune after every update and hands Tune
    each checkpoint it saves; a restarted trial continues exactly from Tune's latest checkpoint."""
    import ray
    from ray import tune

    from checkpoint import RunLock, load_checkpoint, restore
    from trainer import Trainer
    sweep = Sweep(**sweep)
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
        trainer = Trainer(config, run_id=name, device=config.device, summaries_dir=sweep.summaries,
                          models_dir=models, verbose=False, summaries_path=saved and saved["summaries_path"])
        if saved:
            restore(trainer, saved)
        where = {"node_id": ray.get_runtime_context().get_node_id(), "hostname": socket.gethostname(),
                 "pid": os.getpid()}
        trainer.run(on_update=Reporter(sweep.metric, models / f".{name}.tune", where))
    finally:
        lock.release()


class Reporter:
    """Trainer.run's on_update: the update's scalars (and the checkpoint, if one was saved) to Tune."""

    def __init__(self, metric: str, staging: Path, where: dict):
        self.staging, self.where = staging, where
        # Episode tags are absent from updates in which no episode ended, evaluation tags from updates
        # without an evaluation: report the latest value (as stats.py reads the curves), NaN
        # before the first, so every result has the metric.
        self.latest = {metric: float("nan")}

    def __call__(self, trainer, log, scalars: dict) -> None:
        from ray import tune
        if trainer.update == trainer.config.updates and trainer.saved_update != trainer.update:
            trainer.save()  # the final checkpoint travels with the final result (run() would save it later)
        self.latest.update((k, v) for k, v in scalars.items() if k.startswith(("episode/", "eval/")))
        usage = resource.getrusage(resource.RUSAGE_SELF)  # this process; environment processes are its children
        metrics = {**scalars, **self.latest, "update": trainer.update, "updates": trainer.config.updates,
                   "trial/cpu_seconds": usage.ru_utime + usage.ru_stime, "trial/peak_rss_mb": usage.ru_maxrss / 1024,
                   **self.where}
        if trainer.saved_update != trainer.update:
            tune.report(metrics)
            return
        shutil.rmtree(self.staging, ignore_errors=True)
        self.staging.mkdir()
        try:  # a hard link: Tune copies the folder to its storage; the models/ file stays the run's own
            os.link(trainer.checkpoint_path, self.staging / trainer.checkpoint_path.name)
            tune.report(metrics, checkpoint=tune.Checkpoint.from_directory(str(self.staging)))
        finally:
            shutil.rmtree(self.staging, ignore_errors=True)


# ---------------------------------------------------------------- the driver

def param_space(sweep: Sweep) -> dict:
    from ray import tune
    if sweep.search:
        kinds = {"loguniform": tune.loguniform, "uniform": tune.uniform,
                 "int": lambda a, b: tune.randint(a, b + 1)}  # Tune's upper bound is exclusive
        space = {key: tune.choice(args) if kind == "choice" else kinds[kind](*args)
                 for key, (kind, *args) in sweep.search.items()}
        return {"seed": sweep.seeds[0], **space}
    return {"seed": tune.grid_search(sweep.seeds), **{k: tune.grid_search(v) for k, v in sweep.grid.items()}}


def searcher(sweep: Sweep):
    """Optuna's TPE, seeded with the sweep's seed: the same command samples the same values (exactly so
    for the first samples, drawn at random; TPE's later ones also depend on which trials finished first)."""
    if not sweep.search:
        return None
    import optuna
    from ray.tune.search.optuna import OptunaSearch
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    return OptunaSearch(metric=sweep.metric, mode="max", seed=sweep.seeds[0])


def scheduler(sweep: Sweep):
    """ASHA on the update count: a trial reaches its first rung after a quarter of the updates (RL
    curves are noisy early, and a memory task's return often rises only once memory is used), then
    half of the trials go on at each rung."""
    if sweep.scheduler == "none":
        return None
    from ray.tune.schedulers import ASHAScheduler
    return ASHAScheduler(time_attr="update", max_t=sweep.updates, grace_period=max(1, sweep.updates // 4),
                         reduction_factor=2)


def trainable(sweep: Sweep):
    from ray import tune
    return tune.with_resources(tune.with_parameters(run_trial, sweep=asdict(sweep)),
                               {"cpu": sweep.cpus, "gpu": sweep.gpus})


def start_ray(address: str | None, sweep: Sweep) -> None:
    """A local Ray in this process (no dashboard, quiet), or a connection to a cluster. Trials import
    this repository's modules: every node needs it at this same path (as Ray assumes for the driver's)."""
    import logging

    import ray
    path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    # log_to_driver=False: what Ray's worker processes write (a trial's library warnings, and the C++
    # core's own lines, such as abseil's "[mutex.cc : 452] RAW: Lock blocking" that idle pool workers
    # wrote as Ray stopped them after a Ctrl-C, 1 stop in 45 beside a CPU-heavy job: results/test_tally.md)
    # stays in Ray's logs (<temp dir>/session_latest/logs/worker-*.out, .err) instead of reaching this
    # console unasked; a failed trial is still reported here, with its error.txt.
    common = dict(logging_level=logging.WARNING, logging_config=ray.LoggingConfig(log_level="WARNING"),
                  runtime_env={"env_vars": {"PYTHONPATH": path}}, log_to_driver=False)
    # num_to_keep=1 makes Tune save its state at every checkpoint (so that a resumed trial finds
    # the checkpoint it points to): what a run that checkpoints often costs, not a fault.
    os.environ.setdefault("TUNE_WARN_EXCESSIVE_EXPERIMENT_CHECKPOINT_SYNC_THRESHOLD_S", "0")
    os.environ.setdefault("RAY_AIR_NEW_OUTPUT", "0")  # Tune's older reporter is silent at verbose=0
    # After Ctrl-C, Tune suggests its Python API for resuming and says how it stops; sweep.py says both
    # itself (Stopping). Reading the state of trials stopped before their first result is no fault.
    logging.getLogger("ray.tune.tune").addFilter(
        lambda record: not any(words in record.getMessage() for words in ("Tuner.restore", "Stop signal received")))
    logging.getLogger("ray.tune.analysis.experiment_analysis").addFilter(
        lambda record: "Failed to fetch metrics" not in record.getMessage())
    # Ray says at every start of a local cluster that it turned its token authentication on, its default
    logging.getLogger("ray._private.authentication.authentication_token_setup").addFilter(
        lambda record: "Token authentication is enabled" not in record.getMessage())
    for name in ("ray.tune.execution.experiment_state", "ray.train._internal.syncer"):
        logging.getLogger(name).addFilter(lambda record: not _lost_tune_temporary(record))
    if address is not None:
        try:
            ray.init(address=address, **common)
        except (ConnectionError, RuntimeError, ValueError) as error:
            raise ConfigError(f"--address {address}: {' '.join(str(error).split())[:300]}") from None
        return
    cpus = len(os.sched_getaffinity(0))  # read_sweep refused a trial larger than this machine
    # Ray's processes begin with SIGINT and SIGTERM blocked (Ray blocks SIGINT itself): a stop signal
    # sent to the process group (Ctrl-C, Slurm's scancel) reaches this driver alone, which stops Tune
    # gracefully and then Ray by its handle. Without it a SIGTERM ended Ray's processes under the
    # running trials and the sweep exited 1 after a minute. Its cost: ray.shutdown() takes ~4 s
    # longer, waiting 1 s on each process before it kills it (5.1 s against 1.4 s here).
    # Out of memory is the kernel's call here, not Ray's monitor's: when another process filled the
    # machine's memory (a 19 GB job beside a MiniGrid sweep), the monitor killed the sweep's trials,
    # and Tune ended the whole sweep on that error instead of restarting them; the kernel's OOM killer
    # takes the largest process, and a trial it kills is restarted from its checkpoint (--max-failures).
    os.environ.setdefault("RAY_memory_monitor_refresh_ms", "0")
    # Ray starts its workers 15 niceness steps below itself: beside a job at normal priority its trials
    # got almost no CPU (beside two spinning loops, a trial of the tests' tiny sweep had 36 s of CPU in
    # 14 min; train.py would have had its share). Trials run at the sweep's own priority, as the runs
    # they are; `nice python sweep.py` lowers them all, and RAY_worker_niceness set outside still wins.
    os.environ.setdefault("RAY_worker_niceness", "0")
    # address "local": never join a cluster that `ray start` left running on this machine
    with stopping.blocked():
        ray.init(address="local", num_cpus=cpus, include_dashboard=False, **common)
    gpus = ray.cluster_resources().get("GPU", 0)
    if sweep.gpus > gpus:  # its trials would wait for it forever
        ray.shutdown()
        raise ConfigError(f"--gpus-per-trial {sweep.gpus:g}: this machine has {gpus:g} GPUs")


def _lost_tune_temporary(record) -> bool:
    """A failed upload of Tune's state that is no fault: Tune saves its state in its staging folder
    under a temporary name (.<uuid>-tmp-<file>) and renames it, sometimes while its previous upload
    of that folder is still copying it (seen at a Ctrl-C on a busy machine); that upload then fails
    on the vanished file, and Tune logged its traceback (as an error when it waits for the upload,
    as a warning when it starts the next one), although the next upload copies the renamed file.
    Any other failed upload (a full disk, a storage that went away) still shows."""
    message = record.getMessage()
    if not message.startswith(("Saving experiment state", "Last sync command failed")):
        return False
    if record.exc_info and record.exc_info[1] is not None:
        error = record.exc_info[1]
        last = f"{type(error).__name__}: {error}"
    else:  # the traceback is in the message's text: its last line is the error
        last = message.rstrip().rsplit("\n", 1)[-1]
    return last.startswith("FileNotFoundError") and "-tmp-" in last


def tuner(sweep: Sweep, resume: bool):
    from ray import tune
    if resume:
        return tune.Tuner.restore(_join(sweep.storage, sweep.sweep_id), trainable(sweep), resume_unfinished=True,
                                  resume_errored=True)
    return tune.Tuner(
        trainable(sweep), param_space=param_space(sweep),
        tune_config=tune.TuneConfig(
            metric=sweep.metric if sweep.search or sweep.scheduler != "none" else None,
            mode="max" if sweep.search or sweep.scheduler != "none" else None,
            search_alg=searcher(sweep), scheduler=scheduler(sweep),
            num_samples=sweep.samples if sweep.search else 1, max_concurrent_trials=sweep.max_concurrent,
            trial_name_creator=_search_name if sweep.search else _grid_name,
            trial_dirname_creator=_search_name if sweep.search else _grid_name),
        run_config=tune.RunConfig(
            name=sweep.sweep_id, storage_path=sweep.storage, verbose=0, callbacks=[progress(sweep)],
            failure_config=tune.FailureConfig(max_failures=sweep.max_failures),
            checkpoint_config=tune.CheckpointConfig(num_to_keep=1)))


def progress(sweep: Sweep):
    """One line per trial that ends, fails or restarts, and a count every minute (Tune's own
    tables are switched off: a table per trial buries the lines that matter)."""
    from ray import tune

    class Progress(tune.Callback):
        def setup(self, **info):
            self.last = time.monotonic()

        def on_step_end(self, iteration, trials, **info):
            if time.monotonic() - self.last > 60:
                self.last = time.monotonic()
                count = {s: sum(t.status == s for t in trials) for s in ("TERMINATED", "RUNNING", "ERROR")}
                say(f"{count['TERMINATED']} of {sweep.trials} trials finished, {count['RUNNING']} running, "
                    f"{count['ERROR']} failed")

        def on_trial_complete(self, iteration, trials, trial, **info):
            result = trial.last_result
            stopped = "" if result.get("update") == result.get("updates") else " (stopped early)"
            say(f"{trial} finished at update {result.get('update')}{stopped}: {sweep.metric} "
                f"{result.get(sweep.metric, float('nan')):.4g}")

        def on_trial_recover(self, iteration, trials, trial, **info):
            say(f"{trial} failed ({trial.num_failures} of {sweep.max_failures} restarts): restarting from its "
                "last checkpoint")

        def on_trial_error(self, iteration, trials, trial, **info):
            say(f"{trial} failed {trial.num_failures} times: given up (its error: {trial.path}/error.txt)")
    return Progress()


def say(text: str) -> None:
    print(text, flush=True)


def _grid_name(trial) -> str:
    return trial_name(trial.config)


def _search_name(trial) -> str:
    return trial_name(trial.config, trial.trial_id)


def statistics(sweep: Sweep, finished: list[str]) -> bool:
    """The table over seeds of the trials that ran all their updates, written to
    <storage>/<sweep-id>/stats.{md,json,png}. Trials that ASHA stopped are left out: in a search each
    sample is its own grid point, and its curve cut short would be scored as if it had ended there.
    False when the files could not be written (a full disk): one line says so."""
    import pyarrow
    import stats
    if not finished:
        print("no statistics: no trial ran all its updates", file=sys.stderr)
        return True
    try:
        table = stats.report([Path(sweep.summaries) / name for name in finished], Path(sweep.local) / "stats",
                             sweep.threshold)
        if "://" in sweep.storage:
            import pyarrow.fs
            target_fs, target = _filesystem(_join(sweep.storage, sweep.sweep_id))
            for suffix in ("md", "json", "png"):
                pyarrow.fs.copy_files(str(Path(sweep.local) / f"stats.{suffix}"), f"{target}/stats.{suffix}",
                                      destination_filesystem=target_fs)
    except stats.InputError as error:
        print(f"no statistics: {error}", file=sys.stderr)
        return True
    except (OSError, pyarrow.ArrowException) as error:
        print(f"error: could not write the statistics to {_join(sweep.storage, sweep.sweep_id)}/stats.* "
              f"({getattr(error, 'strerror', None) or ' '.join(str(error).split())[:200]}); the trials' models "
              f"are in {sweep.local}/models, their summaries in {sweep.summaries}", file=sys.stderr)
        return False
    print(table, end="")
    print(f"statistics in {_join(sweep.storage, sweep.sweep_id)}/stats.md, .json, .png")
    return True


class Stopping:
    """SIGINT and SIGTERM once Ray may be starting: nothing may be left running, and the sweep's
    trials keep their checkpoints.

    A signal that comes while Ray starts is held (interrupting ray.init halfway left its processes
    running) and acted on once Ray is up: main() then shuts Ray down by its handle and exits 128 +
    the signal. Inside Tune's loop, both signals stop it as Ctrl-C does, through SIGUSR1, the stop
    signal Tune documents: the trials stop, Tune saves its state, and --resume goes on. One that
    comes before the loop has put its SIGUSR1 handler in place is passed on once it has.
    TUNE_DISABLE_SIGINT_HANDLER keeps Tune from taking SIGINT itself, and
    RAY_DISABLE_FAILURE_SIGNAL_HANDLER keeps Ray's C++ crash handler from taking SIGTERM (it
    aborted the driver, exit -6, with a stack dump): the two signals are answered alike, here.
    A second signal stops at once (KeyboardInterrupt)."""

    def __init__(self):
        self.signal: int | None = None
        self.done = threading.Event()  # set when main() no longer needs Tune stopped
        os.environ["TUNE_DISABLE_SIGINT_HANDLER"] = "1"
        os.environ["RAY_DISABLE_FAILURE_SIGNAL_HANDLER"] = "1"  # read when Ray is imported: set before
        self.listen()

    def listen(self) -> None:
        """Takes both signals (again: ray.init replaces the SIGTERM handler with its own sys.exit)."""
        for number in STOP_SIGNALS:
            signal.signal(number, self._on_signal)

    def _on_signal(self, number, frame) -> None:
        if self.signal is not None:
            raise KeyboardInterrupt
        self.signal = number
        threading.Thread(target=self._stop_tune, daemon=True).start()

    def _stop_tune(self) -> None:
        """Sends Tune its stop signal as soon as its loop handles it (a Python handler for SIGUSR1)."""
        while not callable(signal.getsignal(signal.SIGUSR1)):
            if self.done.wait(0.05):
                return
        print(f"{signal.Signals(self.signal).name}: stopping the trials at their next update; their checkpoints "
              "are kept (send it again to stop at once)", file=sys.stderr, flush=True)
        os.kill(os.getpid(), signal.SIGUSR1)

    @property
    def code(self) -> int:
        return 128 + (self.signal or signal.SIGINT)


def main(argv: list[str] | None = None) -> int:
    raw_argv = sys.argv[1:] if argv is None else argv
    start = time.perf_counter()
    try:
        with start_up_warnings():  # a refusal is its one line alone; a sweep that starts shows them
            args = command_line(__doc__, argv)
            if args["--resume"]:
                given = [a.split("=")[0] for a in raw_argv if a.startswith("--") and a.split("=")[0] not in OWN_FLAGS]
                if given:
                    raise ConfigError(f"{', '.join(given)} cannot be combined with --resume (the sweep keeps them)")
                sweep = read_sweep_file(args["--resume"])
                if args["--threshold"]:
                    sweep.threshold = _number(args, "--threshold", float, -math.inf)
            else:
                sweep = read_sweep(args)
                check_new(sweep)
            check_address(args["--address"])
    except ConfigError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    stopping = Stopping()
    folder = _join(sweep.storage, sweep.sweep_id)
    import pyarrow
    import ray
    try:
        try:
            start_ray(args["--address"], sweep)
        except ConfigError as error:
            if stopping.signal is None:
                print(f"error: {error}", file=sys.stderr)
                return 2
        except SystemExit as error:  # ray.init's own SIGTERM handler, in place while it starts
            if error.code != signal.SIGTERM:
                raise
            stopping.signal = stopping.signal or signal.SIGTERM
        except Exception:  # Ray's start failed because a stop signal ended its processes
            if stopping.signal is None:
                raise
        stopping.listen()
        if stopping.signal is not None:
            print(f"stopped by {signal.Signals(stopping.signal).name} during start-up", file=sys.stderr)
            return stopping.code
        if not args["--resume"]:
            try:
                write_json(folder, "sweep.json", asdict(sweep))
            except (OSError, pyarrow.ArrowException) as error:  # a full disk: before any trial starts
                reason = getattr(error, "strerror", None) or " ".join(str(error).split())[:200]
                print(f"error: could not write {folder}/sweep.json ({reason}); no trial was started", file=sys.stderr)
                return 1
        tuner(sweep, bool(args["--resume"])).fit()
        return report(sweep, time.perf_counter() - start, stopping.code)
    except KeyboardInterrupt:  # a second signal
        print(f"stopped at once; resume with: python sweep.py --resume {folder}", file=sys.stderr)
        return stopping.code
    finally:
        stopping.done.set()
        for number in STOP_SIGNALS:  # stopping Ray's processes takes a moment: let it finish
            signal.signal(number, signal.SIG_IGN)
        ray.shutdown()


def report(sweep: Sweep, seconds: float, stopped: int = 130) -> int:
    """The statistics, the wall time, a search's best sample; the exit code. Read from the experiment
    state Tune saved, as a resume would see it: after Ctrl-C, Tune marks the trials it stopped as
    terminated in memory, but saved them as running."""
    from ray.tune import ExperimentAnalysis
    folder = _join(sweep.storage, sweep.sweep_id)
    trials = ExperimentAnalysis(folder).trials
    ended = [t for t in trials if t.status == "TERMINATED"]
    failed = [t for t in trials if t.status == "ERROR"]
    if len(ended) + len(failed) < sweep.trials:
        print(f"stopped with {len(ended)} of {sweep.trials} trials ended; resume with: python sweep.py --resume "
              f"{folder}", flush=True)
        return stopped
    finished = [t for t in ended if t.last_result.get("update") == t.last_result.get("updates")]
    written = statistics(sweep, [str(t) for t in finished])
    stopped = f", {len(ended) - len(finished)} of them stopped early by ASHA" if len(ended) > len(finished) else ""
    print(f"sweep {sweep.sweep_id}: {len(ended)} of {sweep.trials} trials ended{stopped}, in {seconds:.0f} s wall "
          f"time; models in {sweep.local}/models, summaries in {sweep.summaries}", flush=True)
    if sweep.search and ended:  # among the trials that ran all their updates, if any did
        best = max(finished or ended, key=lambda t: _score(t.last_result.get(sweep.metric)))
        sets = [*sweep.sets, *(override(k, v) for k, v in best.config.items() if k != "seed")]
        command = shlex.join(["python", "sweep.py", "--config", sweep.config_path,
                              *(arg for item in sets for arg in ("--set", item)), "--seeds", "10"])
        print(f"best sample: {best} ({sweep.metric} {_score(best.last_result.get(sweep.metric)):.4g} at update "
              f"{best.last_result.get('update')}); run it over seeds with: {command}")
    if failed:
        print(f"error: {len(failed)} trial(s) failed more than {sweep.max_failures} times (see error.txt in their "
              f"folders under {folder}); retry them with: python sweep.py --resume {folder}", file=sys.stderr)
        return 1
    return 0 if written else 1


def _score(value) -> float:
    return -math.inf if value is None or math.isnan(value) else value


if __name__ == "__main__":
    sys.exit(main())
