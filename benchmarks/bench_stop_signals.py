"""Time from a stop signal to rlperf's exit: a training run, a 3-cell sweep and a search.

Each case starts ``rlperf`` in its own session, waits until it is mid-work (a training run:
two iterations written; a sweep: cell #1's trial started; a search: its second trial
started), sends the signal to the PID (Kubernetes, ``timeout``), to the process group (a
terminal, ``kill -TERM -PGID``) or to every process of the run at once (SLURM's ``scancel``,
systemd: Ray's processes get it at the same moment) and prints the exit status, the seconds
to exit and what the run folder says. SLURM's KillWait and Kubernetes' grace period both
default to 30 s; rlperf aims at 20 s on 2 cores (docs/exit-codes.md). ``--repeat N`` runs
each case N times and counts the outcomes (a race shows as a second outcome).

    PYTHONPATH=tests python benchmarks/bench_stop_signals.py          # every case (~7 min)
    PYTHONPATH=tests python benchmarks/bench_stop_signals.py train    # the training cases only
    PYTHONPATH=tests python benchmarks/bench_stop_signals.py train --repeat 10
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from support.live_run import LiveRun, csv_rows

TINY = [
    "model=tiny",
    "workers=0",
    "algo.train_batch_size=256",
    "algo.minibatch_size=128",
    "algo.num_epochs=1",
    "telemetry.interval_s=0.2",
]
SEARCH = [
    "env=cartpole", "model=mlp64", "algo.train_batch_size=128", "algo.minibatch_size=64",
    "train.iterations=3", "telemetry.enabled=false", "train.env_ceiling.enabled=false",
    "hydra.sweeper.search.algorithm=optuna", "hydra.sweeper.search.num_samples=4",
    "hydra.sweeper.search.seed=0", "hydra.sweeper.search.metric=iter_s",
    "hydra.sweeper.search.mode=min", "algo.lr=tag(log,interval(1e-4,1e-2))",
]  # fmt: skip
CASES = [
    ("train", "SIGINT", "pid"),
    ("train", "SIGTERM", "pid"),
    ("train", "SIGTERM", "group"),
    ("train", "SIGHUP", "group"),
    ("train", "SIGTERM", "every"),
    ("sweep", "SIGINT", "group"),
    ("sweep", "SIGTERM", "pid"),
    ("sweep", "SIGTERM", "group"),
    ("sweep", "SIGTERM", "every"),
    ("search", "SIGTERM", "pid"),
    ("search", "SIGTERM", "group"),
]


def _start(args: list[str], work: Path, ray_tmp: str) -> LiveRun:
    env = dict(os.environ, RAY_TMPDIR=ray_tmp, RAY_DEDUP_LOGS="0")
    return LiveRun(args, work, env, new_session=True)


def _send(run: LiveRun, name: str, target: str) -> float:
    run.send(getattr(signal, name), to=target)
    return time.monotonic()


def _statuses(folder: Path, subdirs: list[str]) -> str:
    found = []
    for d in subdirs:
        cell = folder / d / "cell.json"
        found.append(json.loads(cell.read_text())["status"] if cell.is_file() else "-")
    return ", ".join(found)


def _train(work: Path, ray_tmp: str, name: str, target: str) -> tuple[int, float, str]:
    out = work / "run"
    metrics = out / "metrics.csv"
    with _start([*TINY, "train.iterations=50", f"hydra.run.dir={out}"], work, ray_tmp) as run:
        if not run.wait_until(lambda: csv_rows(metrics) >= 2, 300):
            raise SystemExit(f"the run ended before two iterations: {run.output[-2000:]}")
        t0 = _send(run, name, target)
        rc = run.finish(timeout=120)
    seconds = time.monotonic() - t0
    summary = json.loads((out / "summary.json").read_text())  # a run ended by Ray: `running`
    said = f"`{summary['status']}`, error `{summary['error']}`, {csv_rows(metrics)} rows kept"
    return rc, seconds, said


def _sweep(work: Path, ray_tmp: str, name: str, target: str) -> tuple[int, float, str]:
    sweep = work / "sweep"
    args = ["-m", *TINY, "train.iterations=1,2,3", f"hydra.sweep.dir={sweep}"]
    with _start(args, work, ray_tmp) as run:
        if not run.wait_line(r"\] started\s+#1 ", timeout=300):
            raise SystemExit(f"cell #1 never started: {run.output[-2000:]}")
        time.sleep(2)  # into the trial's job
        t0 = _send(run, name, target)
        rc = run.finish(timeout=120)
    return rc, time.monotonic() - t0, "cells: " + _statuses(sweep, ["0", "1", "2"])


def _search(work: Path, ray_tmp: str, name: str, target: str) -> tuple[int, float, str]:
    folder = work / "search"
    with _start(["-m", *SEARCH, f"hydra.sweep.dir={folder}"], work, ray_tmp) as run:
        if not run.wait_line(r"\] started\s+#1 ", timeout=300):
            raise SystemExit(f"trial #1 never started: {run.output[-2000:]}")
        time.sleep(2)
        t0 = _send(run, name, target)
        rc = run.finish(timeout=120)
    trials = json.loads((folder / "search.json").read_text())["trials"]
    return rc, time.monotonic() - t0, "trials: " + ", ".join(t["status"] for t in trials)


def _case(what: str, name: str, target: str) -> tuple[int, float, str]:
    with tempfile.TemporaryDirectory(prefix="stop", dir="/tmp") as work:
        ray_tmp = tempfile.mkdtemp(prefix="rlp", dir="/tmp")
        run = {"train": _train, "sweep": _sweep, "search": _search}[what]
        rc, seconds, said = run(Path(work), ray_tmp, name, target)
        left = subprocess.run(["pgrep", "-f", ray_tmp], capture_output=True, text=True)
        if left.stdout.strip():
            said += f"; Ray processes left: {left.stdout.split()}"
        return rc, seconds, said


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("only", nargs="*", help="train, sweep or search (default: all)")
    parser.add_argument("--repeat", type=int, default=1, help="runs of each case")
    args = parser.parse_args()
    if unknown := set(args.only) - {"train", "sweep", "search"}:
        parser.error(f"unknown run(s) {sorted(unknown)}: train, sweep or search")
    print("| run | signal | sent to | exit | seconds to exit | what the folder says |")
    print("| --- | --- | --- | --- | --- | --- |")
    for what, name, target in CASES:
        if args.only and what not in args.only:
            continue
        outcomes: dict[tuple[int, str], list[float]] = {}
        for _ in range(args.repeat):
            rc, seconds, said = _case(what, name, target)
            outcomes.setdefault((rc, said), []).append(seconds)
        for (rc, said), times in outcomes.items():
            runs = f" ({len(times)} of {args.repeat})" if args.repeat > 1 else ""
            median = statistics.median(times)
            row = f"| {what} | {name} | {target} | {rc}{runs} | {median:.1f} | {said} |"
            print(row, flush=True)


if __name__ == "__main__":
    main()
