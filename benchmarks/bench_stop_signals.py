"""Time from a stop signal to rlperf's exit: a training run and a 3-cell sweep.

Each case starts ``rlperf`` in its own session, waits until it is mid-work (a training run:
two iterations written; a sweep: cell #1's trial started), sends the signal to the PID
(Kubernetes, ``timeout``) or to the process group (SLURM, a terminal: Ray's processes get it
at the same moment) and prints the exit status, the seconds to exit and what the run folder
says. SLURM's KillWait and Kubernetes' grace period both default to 30 s; rlperf aims at 20 s
on 2 cores (docs/exit-codes.md).

    python benchmarks/bench_stop_signals.py            # every case (about 4 minutes)
    python benchmarks/bench_stop_signals.py train      # the training cases only
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TINY = [
    "model=tiny",
    "workers=0",
    "algo.train_batch_size=256",
    "algo.minibatch_size=128",
    "algo.num_epochs=1",
    "telemetry.interval_s=0.2",
]
CASES = [
    ("train", "SIGINT", "pid"),
    ("train", "SIGTERM", "pid"),
    ("train", "SIGTERM", "group"),
    ("train", "SIGHUP", "group"),
    ("sweep", "SIGINT", "group"),
    ("sweep", "SIGTERM", "pid"),
    ("sweep", "SIGTERM", "group"),
]


def _start(args: list[str], work: Path, ray_tmp: str) -> subprocess.Popen[str]:
    env = dict(os.environ, PYTHONUNBUFFERED="1", RAY_TMPDIR=ray_tmp, RAY_DEDUP_LOGS="0")
    return subprocess.Popen(
        [sys.executable, "-m", "rlperf", *args],
        cwd=work,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


def _send(proc: subprocess.Popen[str], name: str, target: str) -> float:
    signum = getattr(signal, name)
    os.killpg(proc.pid, signum) if target == "group" else proc.send_signal(signum)
    return time.monotonic()


def _train(work: Path, ray_tmp: str, name: str, target: str) -> tuple[int, float, str]:
    out = work / "run"
    proc = _start([*TINY, "train.iterations=50", f"hydra.run.dir={out}"], work, ray_tmp)
    metrics = out / "metrics.csv"
    while not (metrics.is_file() and len(metrics.read_text().splitlines()) >= 3):
        if proc.poll() is not None:
            err = proc.communicate()[1]
            raise SystemExit(f"the run ended before two iterations: {err[-2000:]}")
        time.sleep(0.2)
    t0 = _send(proc, name, target)
    proc.communicate(timeout=120)
    seconds = time.monotonic() - t0
    summary = json.loads((out / "summary.json").read_text())
    rows = len(metrics.read_text().splitlines()) - 1
    said = f"`{summary['status']}`, error `{summary['error']}`, {rows} rows kept"
    return proc.returncode, seconds, said


def _sweep(work: Path, ray_tmp: str, name: str, target: str) -> tuple[int, float, str]:
    sweep = work / "sweep"
    args = ["-m", *TINY, "train.iterations=1,2,3", f"hydra.sweep.dir={sweep}"]
    proc = _start(args, work, ray_tmp)
    assert proc.stderr is not None
    t0 = None
    for line in proc.stderr:
        if t0 is None and re.search(r"\] started\s+#1 ", line):
            time.sleep(2)  # into the trial's job
            t0 = _send(proc, name, target)
    proc.wait(timeout=120)
    if t0 is None:
        raise SystemExit("cell #1 never started")
    seconds = time.monotonic() - t0
    statuses = []
    for d in ("0", "1", "2"):
        cell = sweep / d / "cell.json"
        statuses.append(json.loads(cell.read_text())["status"] if cell.is_file() else "-")
    return proc.returncode, seconds, "cells: " + ", ".join(statuses)


def main() -> None:
    only = sys.argv[1:]
    print("| run | signal | sent to | exit | seconds to exit | what the folder says |")
    print("| --- | --- | --- | --- | --- | --- |")
    for what, name, target in CASES:
        if only and what not in only:
            continue
        with tempfile.TemporaryDirectory(prefix="stop", dir="/tmp") as work:
            ray_tmp = tempfile.mkdtemp(prefix="rlp", dir="/tmp")
            run = _train if what == "train" else _sweep
            rc, seconds, said = run(Path(work), ray_tmp, name, target)
            left = subprocess.run(["pgrep", "-f", ray_tmp], capture_output=True, text=True)
            if left.stdout.strip():
                said += f"; Ray processes left: {left.stdout.split()}"
            print(f"| {what} | {name} | {target} | {rc} | {seconds:.1f} | {said} |", flush=True)


if __name__ == "__main__":
    main()
