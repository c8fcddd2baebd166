"""What saving Tune's experiment state at every step costs a search's launcher.

A search sets ``TUNE_GLOBAL_CHECKPOINT_S=0`` (``rlperf.sweep.search.SEARCH_TUNE_ENV``) so
that a SIGTERM, which ends it without Tune's graceful stop, leaves an exact state to resume
from (docs/search.md#resume). This runs the same 4-trial CartPole search with that setting
and with Tune's default (``auto``: every 10 s or more), alternating, and prints the wall
time and the launcher process's CPU seconds of each (about 4 minutes on 2 cores).

    python benchmarks/bench_search_checkpoint.py
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

SEARCH = [
    "-m", "env=cartpole", "model=mlp64", "algo.train_batch_size=128", "algo.minibatch_size=64",
    "train.iterations=3", "telemetry.enabled=false", "train.env_ceiling.enabled=false",
    "hydra.sweeper.search.algorithm=optuna", "hydra.sweeper.search.num_samples=4",
    "hydra.sweeper.search.seed=0", "hydra.sweeper.search.metric=iter_s",
    "hydra.sweeper.search.mode=min", "algo.lr=tag(log,interval(1e-4,1e-2))",
]  # fmt: skip
#: rlperf's entry point with the search's checkpoint period replaced by argv[1].
CODE = (
    "import sys, rlperf.sweep.search as s; "
    "s.SEARCH_TUNE_ENV = {'TUNE_GLOBAL_CHECKPOINT_S': sys.argv.pop(1)}; "
    "sys.argv[0] = 'rlperf'; from rlperf.cli import main; sys.exit(main())"
)


def _run(period: str) -> tuple[int, float, float]:
    with tempfile.TemporaryDirectory(prefix="ck", dir="/tmp") as work:
        t0 = time.monotonic()
        proc = subprocess.Popen(
            [sys.executable, "-c", CODE, period, *SEARCH, f"hydra.sweep.dir={Path(work) / 's'}"],
            cwd=work,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        launcher, cpu = psutil.Process(proc.pid), 0.0
        while proc.poll() is None:
            try:
                times = launcher.cpu_times()
                cpu = times.user + times.system
            except psutil.Error:
                pass
            time.sleep(0.2)
        return proc.returncode, time.monotonic() - t0, cpu


def main() -> None:
    print("| TUNE_GLOBAL_CHECKPOINT_S | exit | wall s | launcher CPU s |")
    print("| --- | --- | --- | --- |")
    for period in ("0", "auto", "0", "auto"):
        rc, wall, cpu = _run(period)
        print(f"| {period} | {rc} | {wall:.1f} | {cpu:.1f} |", flush=True)


if __name__ == "__main__":
    main()
