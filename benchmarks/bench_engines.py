"""Sampling in training on each env engine: ale-py's C++ vector env against rlperf's wrappers.

Trains model1 on Pong with one remote env runner of 8 envs on ``env.engine=python`` (the
best gymnasium setting of docs/benchmarks.md: 8 envs per runner, sync), ``ale_vector``
with 1 thread and ``ale_vector`` with 2 threads (on 2 cores that runner asks Ray for 2
CPUs beside the driver's: ``ray.overcommit_cpus=true``), each variant after the other,
``--rounds`` times (default 3), in one run. Prints each run's sample-phase env steps/s
(env steps over sampling seconds, warm-up excluded) and, per engine, the median of its
ratio to ``python`` in the same round with the range over the rounds
(docs/benchmarks.md#env-engines).

    python benchmarks/bench_engines.py            # about 12 minutes on 2 cores
"""

from __future__ import annotations

import argparse
import csv
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

TRAIN = [
    "model=model1", "env=pong", "workers=1", "env_runner.num_envs=8",
    "algo.train_batch_size=2000", "algo.minibatch_size=500", "algo.num_epochs=1",
    "train.iterations=4", "train.warmup_iterations=1", "telemetry.interval_s=1",
]  # fmt: skip
VARIANTS = {
    "python": ["env.engine=python"],
    "ale_vector, 1 thread": ["env.engine=ale_vector", "env.threads=1"],
    "ale_vector, 2 threads": ["env.engine=ale_vector", "env.threads=2", "ray.overcommit_cpus=true"],
}


def _run(args: list[str], out: Path) -> tuple[float, float]:
    """(sample-phase env steps/s, the ceiling) of one training run."""
    proc = subprocess.run(
        [sys.executable, "-m", "rlperf", *TRAIN, *args, f"hydra.run.dir={out}"],
        cwd=out.parent, capture_output=True, text=True,
    )  # fmt: skip
    if proc.returncode != 0:
        raise SystemExit(f"rlperf failed ({proc.returncode}): {proc.stderr[-2000:]}")
    with (out / "metrics.csv").open() as f:
        rows = [r for r in csv.DictReader(f) if not r["excluded"]]
    steps = sum(float(r["env_steps"]) for r in rows)
    seconds = sum(float(r["sample_s"]) for r in rows)
    summary = json.loads((out / "summary.json").read_text())
    return steps / seconds, float(summary["env_ceiling_steps_per_s"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    rounds = parser.parse_args().rounds
    rates: dict[str, list[float]] = {name: [] for name in VARIANTS}
    print("| round | engine | sample-phase env steps/s | env ceiling steps/s |")
    print("| --- | --- | --- | --- |")
    with tempfile.TemporaryDirectory(prefix="eng", dir="/tmp") as work:
        for r in range(rounds):
            for i, (name, args) in enumerate(VARIANTS.items()):
                rate, ceiling = _run(args, Path(work) / f"r{r}_{i}")
                rates[name].append(rate)
                print(f"| {r + 1} | {name} | {rate:.0f} | {ceiling:.0f} |", flush=True)
    print("\n| engine | median env steps/s | against python: median ratio (range over rounds) |")
    print("| --- | --- | --- |")
    base = rates["python"]
    for name, values in rates.items():
        ratios = [v / b for v, b in zip(values, base, strict=True)]
        print(
            f"| {name} | {statistics.median(values):.0f} | {statistics.median(ratios):.2f}x "
            f"({min(ratios):.2f}-{max(ratios):.2f}) |"
        )


if __name__ == "__main__":
    main()
