"""diagnostics.md and .json from the runs under diagnostics/: each run's final episode/reward_mean_last100 (masked
CartPole at update 100, PoC at 30; the MiniGrid run where it stopped), by code state and variant.
    python results/trxl/issue85/table.py"""
import glob, json, os
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

HERE = os.path.dirname(os.path.abspath(__file__))
rows = []
for run in sorted(glob.glob(f"{HERE}/diagnostics/*/")):
    values = {}
    for f in sorted(glob.glob(f"{run}**/events.*", recursive=True)):
        ea = EventAccumulator(f, size_guidance={"scalars": 0})
        ea.Reload()
        if "episode/reward_mean_last100" in ea.Tags()["scalars"]:
            values.update({e.step: e.value for e in ea.Scalars("episode/reward_mean_last100")})
    if values:
        last = max(values)
        rows.append({"run": os.path.basename(run.rstrip("/")), "update": last, "reward_mean_last100": values[last]})
with open(f"{HERE}/diagnostics.json", "w") as out:
    json.dump(rows, out, indent=1)
lines = ["# Issue 85 diagnostics", "", "Final `episode/reward_mean_last100` of each run (code state _ variant _ seed; "
         "the patches and scripts beside the runs say what each switch changes). Made by table.py.", "",
         "| run | last update | reward_mean_last100 |", "|---|---:|---:|"]
lines += [f"| {r['run']} | {r['update']} | {r['reward_mean_last100']:.1f} |" for r in rows]
with open(f"{HERE}/diagnostics.md", "w") as out:
    out.write("\n".join(lines) + "\n")
