"""The sweep launcher's own overhead (prints figures; not a test).

Runs the same 4 tiny training jobs two ways, each in its own ``rlperf`` process:

(a) one sweep: ``rlperf -m model=tiny workers=0,1 seed=0,1 ...`` (one Ray instance,
    4 Tune trials, one at a time);
(b) one by one: ``rlperf model=tiny workers=W seed=S ...`` four times (each job
    starts and stops its own Ray, as a single run does).

Per cell it reports the time from the cell's start to the start of its first
training iteration, split where the timestamps allow:

- sweep: Tune starts the trial (launcher's ``cell.json`` ``started_at``) ->
  the trial function runs (``trial_entered_at``) -> the job wrapper starts
  (``fingerprint.json`` ``start_time``) -> iteration 1 starts
  (``metrics.csv``: ``time_s - iter_s`` of iteration 1);
- one by one: the process is spawned -> the job wrapper starts -> iteration 1 starts
  (this includes ``ray.init``, which the sweep pays once per group);

and Ray's start-up per group (``sweep.json``) and the wall time of everything.

    python benchmarks/bench_launcher.py [--iterations 2]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

import pandas as pd

TINY = [
    "model=tiny",
    "algo.train_batch_size=256",
    "algo.minibatch_size=128",
    "algo.num_epochs=1",
    "telemetry.interval_s=0.5",
]
CELLS = [("0", "0"), ("0", "1"), ("1", "0"), ("1", "1")]  # (workers, seed), Hydra's order


def _epoch(iso: str) -> float:
    return datetime.fromisoformat(iso).timestamp()


def _first_iteration_start(run: Path) -> float:
    """Epoch seconds at which iteration 1 started (job start + time_s - iter_s)."""
    fp = json.loads((run / "fingerprint.json").read_text())
    m = pd.read_csv(run / "metrics.csv")
    return _epoch(fp["start_time"]) + float(m["time_s"].iloc[0] - m["iter_s"].iloc[0])


def _run(args: list[str], cwd: Path, env: dict[str, str]) -> tuple[float, float]:
    """(spawn epoch, wall seconds) of ``rlperf <args>``; raises on failure."""
    spawned = time.time()
    t0 = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "rlperf", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=1800,
    )
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise RuntimeError(f"rlperf {' '.join(args)} failed:\n{proc.stderr[-3000:]}")
    return spawned, wall


def bench(iterations: int, root: Path, env: dict[str, str]) -> None:
    common = [*TINY, f"train.iterations={iterations}"]

    # (b) one by one
    single = []
    for workers, seed in CELLS:
        out = root / f"single_w{workers}_s{seed}"
        spawned, wall = _run(
            [*common, f"workers={workers}", f"seed={seed}", f"hydra.run.dir={out}"], root, env
        )
        fp = json.loads((out / "fingerprint.json").read_text())
        job = _epoch(fp["start_time"])
        first = _first_iteration_start(out)
        single.append(
            {
                "cell": f"workers={workers} seed={seed}",
                "to_job": job - spawned,
                "to_iter": first - spawned,
                "job_to_iter": first - job,
                "wall": wall,
            }
        )

    # (a) one sweep
    sweep = root / "sweep"
    spawned, sweep_wall = _run(
        ["-m", *common, "workers=0,1", "seed=0,1", f"hydra.sweep.dir={sweep}"], root, env
    )
    index = json.loads((sweep / "sweep.json").read_text())
    cells = []
    previous_end = None
    for rec in sorted(index["cells"].values(), key=lambda r: r["job_num"]):
        run = sweep / rec["subdir"]
        fp = json.loads((run / "fingerprint.json").read_text())
        started, entered, job = (
            _epoch(rec["started_at"]),
            float(rec["trial_entered_at"]),
            _epoch(fp["start_time"]),
        )
        first = _first_iteration_start(run)
        cells.append(
            {
                "cell": " ".join(o for o in rec["overrides"] if o.startswith(("workers", "seed"))),
                "to_trial": entered - started,
                "trial_to_job": job - entered,
                "job_to_iter": first - job,
                "to_iter": first - started,
                "wall": rec["wall_s"],
                "gap": None if previous_end is None else started - previous_end,
            }
        )
        previous_end = _epoch(rec["finished_at"])
    ray_starts = [g["ray_start_s"] for g in index["groups"]]
    first_cell_started = min(_epoch(r["started_at"]) for r in index["cells"].values())
    last_cell_ended = max(_epoch(r["finished_at"]) for r in index["cells"].values())

    print(
        f"launcher overhead, 4 tiny cells ({iterations} iterations each), {os.cpu_count()} CPUs\n"
    )
    print("(a) one sweep (rlperf -m): cell start -> iteration 1 starts")
    print(
        f"  {'cell':<18} {'Tune->trial':>11} {'trial->job':>10} {'job->iter1':>10} "
        f"{'total':>7} {'cell wall':>9} {'gap before':>10}"
    )
    for c in cells:
        gap = "-" if c["gap"] is None else f"{c['gap']:.2f}s"
        print(
            f"  {c['cell']:<18} {c['to_trial']:>10.2f}s {c['trial_to_job']:>9.2f}s "
            f"{c['job_to_iter']:>9.2f}s {c['to_iter']:>6.2f}s {c['wall']:>8.2f}s {gap:>10}"
        )
    print(
        "  (gap before: the previous cell ended -> this one's trial started: Tune removes "
        "the old placement group, creates the next one and its trial actor)"
    )
    print(
        f"  Ray start-up per group: {', '.join(f'{s:.2f} s' for s in ray_starts)} "
        f"({len(ray_starts)} group)"
    )
    print(
        f"  process spawn -> first cell starts: {first_cell_started - spawned:.2f} s "
        "(imports, composition, pre-flight, Ray start)"
    )
    print(
        f"  last cell ends -> process exits: {spawned + sweep_wall - last_cell_ended:.2f} s "
        "(Tune teardown, Ray shutdown)"
    )
    print(f"  whole sweep: {sweep_wall:.2f} s\n")
    print("(b) one by one (rlperf, one process and one Ray per job): spawn -> iteration 1 starts")
    print(f"  {'cell':<18} {'spawn->job':>10} {'job->iter1':>10} {'total':>7} {'wall':>8}")
    for c in single:
        print(
            f"  {c['cell']:<18} {c['to_job']:>9.2f}s {c['job_to_iter']:>9.2f}s "
            f"{c['to_iter']:>6.2f}s {c['wall']:>7.2f}s"
        )
    total_single = sum(c["wall"] for c in single)
    print(f"  all four: {total_single:.2f} s\n")
    sweep_mean = statistics.mean(c["to_iter"] for c in cells)
    single_mean = statistics.mean(c["to_iter"] for c in single)
    print(
        f"mean start -> iteration 1: sweep cell {sweep_mean:.2f} s, single run "
        f"{single_mean:.2f} s; whole: sweep {sweep_wall:.2f} s vs one by one "
        f"{total_single:.2f} s ({sweep_wall / total_single:.2f}x)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=2)
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="rlb", dir="/tmp"))
    ray_tmp = root / "ray"  # a short private Ray temp dir
    ray_tmp.mkdir()
    env = dict(os.environ, RAY_TMPDIR=str(ray_tmp), PYTHONUNBUFFERED="1")
    try:
        bench(args.iterations, root, env)
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
