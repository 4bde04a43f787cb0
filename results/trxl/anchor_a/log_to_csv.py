"""Turn anchor A's console log into update,env_steps,reward_mean (update counted from 1; steps = update x workers x worker_steps).

Usage: log_to_csv.py RUN.log OUT.csv STEPS_PER_UPDATE
A's reward_mean is the mean reward of the last 100 finished episodes (its deque(maxlen=100)), the value it prints and logs to TensorBoard.
"""
import re
import sys

log, out, steps_per_update = sys.argv[1], sys.argv[2], int(sys.argv[3])
rows = ["update,env_steps,reward_mean"]
for line in open(log):
    m = re.match(r"\s*(\d+) reward=([-\d.]+) ", line)
    if m:
        update = int(m.group(1)) + 1
        rows.append(f"{update},{update * steps_per_update},{m.group(2)}")
open(out, "w").write("\n".join(rows) + "\n")
print(f"{len(rows) - 1} updates -> {out}")
