"""The GPU check's fixed sequence of rlperf jobs, and running it through rlperf's entry point.

For a machine with one GPU: a 2-iteration training with each of ``none`` (the
CPU baseline), ``gpu0`` and ``gpu0_driver``; the rollout stage on CUDA from the
``gpu0_driver`` run; a 2-cell sweep through the Tune launcher with fractional
GPUs (``gpu_layout=gpu0 workers=1,2``). With two or more GPUs: every layout of
the study (``none``, ``gpu0``, ``gpu1``, ``both``, ``gpu0_driver``,
``gpu1_driver``, ``both_driver``), the same rollout, and the sweep over
``gpu_layout=both workers=2,4``.

Sizes: model1 (the study's model, 2.0 M parameters) with the quickstart's
1000-step batch, 250-step minibatches and 2 epochs — small enough for seconds
per iteration, big enough that a GPU learner is measurably faster than the CPU
one (8 SGD steps of 250 x 84x84x4 through two conv trunks). The first
iteration is flagged warm-up (``train.warmup_iterations=1``): it pays CUDA's
start-up, and :func:`rlperf.gpu_check.checks.learn_s` leaves it out.

Every job is a ``python -m rlperf ...`` subprocess writing under the output
folder (``hydra.run.dir`` / ``hydra.sweep.dir``); ``gpu_check.json`` records
what ran, how it exited and how long it took, and is rewritten after each job.
"""

from __future__ import annotations

import itertools
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rlperf.gpu_check.checks import MANIFEST_FILE
from rlperf.results.columns import WALL_S

#: Every training job's settings (the sweep's too).
TRAIN_BASE: tuple[str, ...] = (
    "experiment=quickstart",
    "model=model1",
    "train.iterations=2",
    "train.warmup_iterations=1",
    "train.warmup_until_first_episode=false",
    "telemetry.interval_s=0.5",
    "seed=0",
)
#: Env runners of the single training jobs: the shared layouts need >= 1, ``both`` >= 2
#: (one env runner cannot hold 1.999 GPUs: Ray wants whole GPUs above 1).
TRAIN_WORKERS = 2
ONE_GPU_LAYOUTS = ("none", "gpu0", "gpu0_driver")
TWO_GPU_LAYOUTS = ("none", "gpu0", "gpu1", "both", "gpu0_driver", "gpu1_driver", "both_driver")
#: The training run the rollout loads, and the rollout's settings.
ROLLOUT_FROM = "train/gpu0_driver"
ROLLOUT = (
    "stage=rollout",
    "gpu_layout=gpu0_driver",
    "workers=0",
    "rollout.device=cuda",
    "rollout.steps=500",
    "rollout.warmup_steps=50",
    "telemetry.interval_s=0.5",
)


@dataclass(frozen=True)
class Step:
    """One ``python -m rlperf`` job (or sweep) of the sequence.

    ``folder`` (relative to the output folder) is its ``hydra.run.dir``, or its
    ``hydra.sweep.dir`` for a sweep; ``sweep`` maps a key to the values ``-m``
    sweeps; ``upstream`` is the training step a rollout loads (``run=``).
    """

    name: str
    kind: str  # train | rollout | sweep
    overrides: tuple[str, ...]
    sweep: tuple[tuple[str, tuple[str, ...]], ...] = ()
    upstream: str | None = None

    @property
    def folder(self) -> str:
        return self.name

    def cells(self) -> list[tuple[str, ...]]:
        """The override lists of the jobs this step runs (one, or the sweep's cells)."""
        combos = itertools.product(*(values for _, values in self.sweep))
        keys = [k for k, _ in self.sweep]
        return [
            (*self.overrides, *(f"{k}={v}" for k, v in zip(keys, combo, strict=True)))
            for combo in combos
        ]

    def args(self, out: Path) -> list[str]:
        """The ``rlperf`` command-line arguments, writing under ``out``."""
        run = [f"run={out / self.upstream}"] if self.upstream else []
        if self.kind == "sweep":
            swept = [f"{k}={','.join(v)}" for k, v in self.sweep]
            return ["-m", *self.overrides, *swept, f"hydra.sweep.dir={out / self.folder}"]
        return [*self.overrides, *run, f"hydra.run.dir={out / self.folder}"]


def sequence(gpus: int) -> list[Step]:
    """The fixed sequence for a machine with ``gpus`` NVIDIA GPUs (>= 1)."""
    if gpus < 1:
        raise ValueError(f"the GPU sequence needs at least one GPU, got {gpus}")
    layouts = ONE_GPU_LAYOUTS if gpus == 1 else TWO_GPU_LAYOUTS
    steps = [
        Step(
            f"train/{layout}",
            "train",
            (*TRAIN_BASE, f"gpu_layout={layout}", f"workers={TRAIN_WORKERS}"),
        )
        for layout in layouts
    ]
    steps.append(Step("rollout/cuda", "rollout", ROLLOUT, upstream=ROLLOUT_FROM))
    layout, workers = ("gpu0", ("1", "2")) if gpus == 1 else ("both", ("2", "4"))
    steps.append(
        Step("sweep", "sweep", (*TRAIN_BASE, f"gpu_layout={layout}"), (("workers", workers),))
    )
    return steps


def command(step: Step, out: Path, python: str = sys.executable) -> list[str]:
    """The full command line of ``step``."""
    return [python, "-m", "rlperf", *step.args(out)]


def step_record(step: Step, out: Path) -> dict[str, Any]:
    """The manifest entry of ``step`` before it runs."""
    return {
        "name": step.name,
        "kind": step.kind,
        "folder": step.folder,
        "command": command(step, out),
        "cells": [list(c) for c in step.cells()],
        "returncode": None,
        WALL_S: None,
        "log": f"logs/{step.name.replace('/', '_')}.log",
    }


def write_manifest(out: Path, manifest: dict[str, Any]) -> None:
    """``gpu_check.json``, replaced atomically (a killed run leaves a readable one)."""
    tmp = out / f".{MANIFEST_FILE}.tmp"
    tmp.write_text(json.dumps(manifest, indent=2) + "\n")
    tmp.replace(out / MANIFEST_FILE)


def run_sequence(
    steps: list[Step],
    out: Path,
    manifest: dict[str, Any],
    timeout_s: float,
    progress: Callable[[str], None],
) -> dict[str, Any]:
    """Run every step in order (each one's output in ``logs/``); returns the manifest.

    A step that fails does not stop the sequence: the rest still shows what works
    (a rollout whose training failed fails too, and says why).
    """
    (out / "logs").mkdir(parents=True, exist_ok=True)
    manifest["steps"] = [step_record(s, out) for s in steps]
    write_manifest(out, manifest)
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    started = time.monotonic()
    for k, (step, record) in enumerate(zip(steps, manifest["steps"], strict=True), start=1):
        progress(f"[{k}/{len(steps)}] {step.name}: {' '.join(record['command'][3:])}")
        t0 = time.monotonic()
        with (out / record["log"]).open("w") as log:
            record["returncode"] = _run(record["command"], out, env, log, timeout_s)
        record[WALL_S] = round(time.monotonic() - t0, 1)
        manifest["total_s"] = round(time.monotonic() - started, 1)
        write_manifest(out, manifest)
        status = "ok" if record["returncode"] == 0 else f"exit {record['returncode']}"
        progress(f"[{k}/{len(steps)}] {step.name}: {status} in {record[WALL_S]} s")
    return manifest


def _run(argv: list[str], cwd: Path, env: dict[str, str], log: Any, timeout_s: float) -> int | str:
    """Run one job in its own process group (so a timeout ends its Ray too)."""
    proc = subprocess.Popen(
        argv, cwd=cwd, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
    )
    try:
        return proc.wait(timeout=timeout_s)
    except KeyboardInterrupt:
        # Ctrl-C reaches this process only: pass it on, so the job writes its summary.
        os.killpg(proc.pid, signal.SIGINT)
        proc.wait(timeout=60)
        raise
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        return f"timeout after {timeout_s:g} s"
