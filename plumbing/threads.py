"""How a run shares the cores with other processes (docs/reliability.md, "Runs side by side"). torch's OpenMP
threads spin while they wait for work: GNU OpenMP's default spin (300,000 turns) holds a core that another process's
threads need, so share_cores() shortens it before torch loads (OpenMP reads it once). And a parallel region waits for
its slowest thread: two runs with a thread per core take turns at every region; FairShare gives a run the cores
other processes leave free."""
import contextlib
import os
import time

import psutil

SPIN_COUNT = 10_000
EVERY_S = 0.5  # how often FairShare looks again: a look reads the CPU times of every core and of our processes


def share_cores() -> dict[str, str]:
    """Sets GOMP_SPINCOUNT unless OMP_WAIT_POLICY or GOMP_SPINCOUNT is set; returns the settings for child processes
    started elsewhere (a cluster's trials)."""
    if "OMP_WAIT_POLICY" not in os.environ:
        os.environ.setdefault("GOMP_SPINCOUNT", str(SPIN_COUNT))
    return {key: os.environ[key] for key in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT") if key in os.environ}


class FairShare:
    """The torch threads for this process now: the cores it may use, less those that other processes kept busy since
    it last looked, and at least one. Niced processes count too: a thread that must wait for the scheduler to take
    a core back from one holds up every parallel region. Alone on its cores a run keeps them all, so its numbers
    repeat from run to run. A count the user set in OMP_NUM_THREADS holds (up to the cores here)."""

    def __init__(self):
        self.cores = sorted(os.sched_getaffinity(0))
        asked = os.environ.get("OMP_NUM_THREADS", "").split(",")[0].strip()  # the user's count: its first number
        self.fixed = min(int(asked) if asked.isdigit() else 0, len(self.cores))
        self.threads = self.fixed or len(self.cores)
        self._last = self._sample()

    def _sample(self) -> tuple[float, float, float]:
        """(now, busy CPU seconds of our cores, ours included, CPU seconds of this process and its children)."""
        per_core = psutil.cpu_times(percpu=True)
        busy = sum(t.user + t.nice + t.system + t.irq + t.softirq for i, t in enumerate(per_core) if i in self.cores)
        ours, me = 0.0, psutil.Process()
        for process in (me, *me.children(recursive=True)):
            with contextlib.suppress(psutil.Error):
                times = process.cpu_times()
                ours += times.user + times.system
        return time.monotonic(), busy, ours

    def update(self) -> int:
        if self.fixed or time.monotonic() - self._last[0] < EVERY_S:
            return self.threads
        now, busy, ours = self._sample()
        then, busy_then, ours_then = self._last
        others = max(0.0, (busy - busy_then) - (ours - ours_then)) / (now - then)  # cores, on average
        self._last = now, busy, ours
        self.threads = max(1, min(len(self.cores), round(len(self.cores) - others)))
        return self.threads
