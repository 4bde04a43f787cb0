"""What `precision: auto` costs or saves against float32 on a visual config, whole runs on an idle machine.

    python tools/speed/precision.py --config configs/minigrid.yaml --set updates=5 --repeats 3

Alternates train.py runs of the config with precision float32 and precision bfloat16 (what
`auto` takes where bfloat16 is native: AVX-512 BF16 or AMX on a CPU); each run on the machine's
cores (torch_threads = the core count), nothing else allowed beside it (benchmark.py's
--require-idle rule: a run with other work beside it is refused). Medians of --repeats; the
phases are train.py's own `timings:` line. Writes results/speed/precision.md and .json (--name: another name).
On a GPU (--device cuda, bfloat16 where torch.cuda.is_bf16_supported) the table adds the peak GPU memory.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent  # the repository root
sys.path.insert(0, str(ROOT))  # its modules, and the other tools as tools.<name>

from tools.benchmark import RunError, UsageError, machine, measure, require_idle  # noqa: E402
from tools.speed.output import command, table, write  # noqa: E402

PRECISIONS = ("float32", "bfloat16")
PHASES = ("env", "inference", "buffer", "update", "evaluation")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", required=True)
    parser.add_argument("--set", action="append", default=[], help="a config override for every run, key=value")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--name", default="precision",
                        help="writes results/speed/<name>.md and .json (another machine's figures beside the first's)")
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu",
                        help="where the runs train (config key device); cuda: the table adds the peak GPU memory")
    args = parser.parse_args()
    import torch
    from model import bfloat16_is_fast
    if args.device == "cuda" and not torch.cuda.is_available():
        print("--device cuda: torch sees no GPU on this machine", file=sys.stderr)
        return 2
    if not bfloat16_is_fast(torch.device(args.device)):
        print(f"this {'GPU' if args.device == 'cuda' else 'CPU'} has no native bfloat16: auto is float32 here, "
              "nothing to compare", file=sys.stderr)
        return 2
    try:
        require_idle()
    except UsageError as error:
        print(error, file=sys.stderr)
        return 2
    config, cores = (ROOT / args.config).resolve(), len(os.sched_getaffinity(0))
    runs = {p: [] for p in PRECISIONS}
    try:
        for _ in range(args.repeats):
            for precision in PRECISIONS:  # alternated: the machine's speed drifts
                run = measure(ROOT, config, [*args.set, f"torch_threads={cores}", f"precision={precision}",
                                             f"device={args.device}"], 0, ROOT, idle=True)
                if args.device == "cuda" and not run["peak_gpu_mb"]:  # a run that fell back to the CPU
                    raise RunError(f"the {precision} run allocated no GPU memory: it did not train on the GPU")
                runs[precision].append(run)
                print(f"{precision}: {run['wall_seconds']:.1f} s, {run['steps_per_second']:.0f} steps/s", flush=True)
    except RunError as error:
        print(error, file=sys.stderr)
        return 1

    def median(precision: str, key: str) -> float:
        return statistics.median(r.get(key, 0.0) for r in runs[precision])

    gpu = torch.cuda.get_device_name() if args.device == "cuda" else None
    report = {"command": command(), "machine": {**machine(), "device": args.device}, "gpu": gpu,
              "config": args.config, "sets": args.set, "threads": cores, "repeats": args.repeats, "runs": runs}
    where = f"{gpu} beside " if gpu else ""
    lines = [f"# {args.config}: bfloat16 (`precision: auto` here) against float32", "",
             f"`{report['command']}` on {where}{report['machine']['cpu']}, {cores} cores, torch_threads {cores}; "
             f"alternated, median of {args.repeats} whole runs each (start-up included in the wall time; steps/s "
             "and the phases, in seconds, are train.py's training loop). Every run was measured idle: other "
             "processes used at most "
             f"{max(r['load']['other_cores'] for p in PRECISIONS for r in runs[p]):.2f} cores beside it.", ""]
    memory = ["peak GPU MB"] if gpu else []  # the most torch's allocator held on the GPU, over the runs
    lines += table(["precision", "wall s", "steps/s", *(f"{p} s" for p in PHASES), *memory],
                   "l" + "r" * (2 + len(PHASES) + len(memory)),
                   [[p, f"{median(p, 'wall_seconds'):.1f}", f"{median(p, 'steps_per_second'):.0f}",
                     *(f"{median(p, phase + '_seconds'):.2f}" for phase in PHASES),
                     *([f"{max(r['peak_gpu_mb'] for r in runs[p]):.0f}"] if gpu else [])] for p in PRECISIONS])
    ratio = median("bfloat16", "steps_per_second") / median("float32", "steps_per_second")
    lines += ["", f"bfloat16 / float32, steps/s: {ratio:.2f}x."]
    write(args.name, report, lines)
    return 0


if __name__ == "__main__":
    sys.exit(main())
