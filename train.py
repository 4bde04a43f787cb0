"""Trains a recurrent PPO agent from the command line: `python train.py --help` says how."""
import signal

from plumbing import script

script.begin(__name__)  # the imports below take seconds

from checkpoint import RunLock, fitted
from config import SEEDS
from plumbing.cli import ArgumentParser, failed, number
from plumbing.errors import CheckpointError, NonFiniteError, StrayParameterError, WorkerError
from plumbing.machine import resolve_device
import runs
from spaces import SpaceError
import tracking


def parser() -> ArgumentParser:
    parser = ArgumentParser(description="Train a recurrent PPO agent.", epilog=(
        "Ctrl-C (SIGINT), SIGTERM or SIGHUP finishes the current update, saves and exits 130, 143 or 129; a "
        "second one stops at once without saving. Exit codes: 0 done, 1 the run failed (the last good "
        f"checkpoint is kept), 2 refused before starting (bad config, flag or file), {script.STOPPED}."))
    parser.add_argument("--config", metavar="PATH", help=f"the yaml config to train (default: {runs.DEFAULT_CONFIG})")
    parser.add_argument("--run-id", metavar="NAME", help="names models/<run-id>.pt and summaries/<run-id>/<time>: "
                        "letters, digits, '.', '_' and '-' (default: the config's name and the start time)")
    parser.add_argument("--seed", type=number(int, 0, SEEDS - 1), help="the run seed; overrides the config's seed")
    parser.add_argument("--cpu", action="store_true", help="train on the CPU even when a GPU is available")
    parser.add_argument("--set", metavar="KEY=VALUE", action="append", default=[],
                        help="override one config key, e.g. --set recurrence.sequence_length=16 (repeatable)")
    parser.add_argument("--resume", metavar="CHECKPOINT", help="continue a run from its checkpoint (its config, run "
                        "id, seed and summaries); overrides apply (e.g. a larger updates) unless they change the "
                        "model or the environments. With --run-id, a branch: a new run from where the checkpoint "
                        "stands, with its own files, leaving the checkpoint's run as it was")
    parser.add_argument("--overwrite", action="store_true",
                        help="replace an existing models/<run-id>.pt (never done without this flag)")
    tracking.add_flags(parser, "the run")
    parser.add_argument("--wandb-name", metavar="NAME", help="with --track: the W&B run's name (default: the run id)")
    return parser


def main(argv=None) -> int:
    run = {}  # what start() made, for the signals and the end to find

    def start():
        args = parser().parse_args(argv)
        config, run_id, checkpoint = runs.read_run(args)
        track = tracking.from_flags(args, args.wandb_name or run_id)
        device = resolve_device(config.device, args.cpu)
        run["lock"] = RunLock(runs.MODELS / f"{run_id}.lock")
        replaced_best = runs.claim(run["lock"], run_id, checkpoint, args.resume, args.overwrite)
        from trainer import Trainer
        try:
            run["trainer"] = trainer = Trainer(config, run_id=run_id, device=device, summaries_dir=runs.SUMMARIES,
                                               models_dir=runs.MODELS, tracking=track,
                                               summaries_path=checkpoint and checkpoint["summaries_path"])
            if checkpoint:
                with fitted(args.resume):
                    trainer.load_state_dict(checkpoint)
                if "branch_of" in checkpoint:  # its own checkpoint is not written yet
                    trainer.saved_update = None
        except WorkerError as error:  # an environment that failed as the run started
            raise script.Failed(f"{error}; {runs.kept(None)}") from None
        if replaced_best is not None:  # else enjoy.py would score the replaced run's model under this id
            replaced_best.unlink(missing_ok=True)
            print(f"removed {replaced_best}, the best evaluation of the run --overwrite replaces", flush=True)
        return trainer, checkpoint

    def finish_update(signum: int) -> None:  # the run's first stop signal
        run["trainer"].stop_signal = signum
        run["trainer"].summaries.say(f"\n{signal.Signals(signum).name}: finishing this update, then saving (send "
                                     "it again to stop at once)")
    return script.life(start, lambda started: train(*started), (SpaceError,), finish_update,
                       lambda: f" at once, without saving; {runs.kept(run.get('trainer'))}",
                       close=lambda: "trainer" in run and run["trainer"].close(),
                       leaving=lambda: "lock" in run and run["lock"].release())


def train(trainer, checkpoint: dict | None) -> int:
    if checkpoint:
        source = f" from {checkpoint['branch_of']}" if "branch_of" in checkpoint else ""
        print(f"{'branching' if source else 'resuming'} {trainer.run_id}{source} at update {trainer.update}/"
              f"{trainer.config.updates}", flush=True)
    print(f"training {trainer.run_id} on {trainer.device} in {trainer.machine}; summaries in {trainer.summaries.path}",
          flush=True)
    try:
        trainer.run()
    except (CheckpointError, WorkerError, NonFiniteError, StrayParameterError, OSError) as error:
        return failed(runs.failure(trainer, error), 1)
    if trainer.stop_signal is not None:
        print(runs.stopped(trainer), flush=True)
        return 128 + trainer.stop_signal
    print(f"saved {trainer.checkpoint_path}")
    return 0


if __name__ == "__main__":
    script.run(main, quick_exit=True)
