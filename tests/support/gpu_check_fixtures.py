"""Recorded GPU-check output folders (``tests/data/gpu_check/``), made with the fake NVML.

``PYTHONPATH=tests python -m support.gpu_check_fixtures`` rewrites them. Each case is an output
folder as ``benchmarks/gpu_check.py`` leaves it: ``gpu_check.json`` and, per
job, the files its checks read. The files are written by rlperf's own writers
where they exist: ``telemetry.csv`` and the per-iteration ``gpu{i}_*`` values
by :class:`~rlperf.telemetry.sampler.TelemetrySampler` over
``tests/fakes/pynvml.py`` (the fake the telemetry tests use), ``metrics.csv``
by :class:`~rlperf.results.csvlog.CsvLog` with the canonical columns, the
training summary by ``summarise_training``, the resource plan by
``plan_resources`` / ``plan_record``, the sweep index by
:class:`~rlperf.sweep.index.SweepIndex` with the trial requests RLlib gives
(``cell_request``). Only what needs a GPU is made up here: the learners' and
env runners' placement records (in the shape of
:mod:`rlperf.resources.placement`, which ``tests/gpu_check/test_gpu_check.py`` compares
with a real run's) and the phase times.

Positive cases: ``one_gpu``, ``two_gpus``, ``no_energy`` (a GPU without the
energy counter). Negative cases, each with the CPU baseline and one bad job,
so that exactly the named checks fail: see :data:`NEGATIVE`.
"""

from __future__ import annotations

import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fakes.pynvml import FakeGpu, FakePynvml
from hydra import compose, initialize_config_module
from hydra.core.global_hydra import GlobalHydra
from omegaconf import DictConfig, OmegaConf

from rlperf.algos import plan_resources
from rlperf.config.schema import register_configs
from rlperf.gpu_check.checks import MANIFEST_FILE
from rlperf.gpu_check.sequence import Step, sequence, step_record
from rlperf.job_wrapper import record_env_protocol
from rlperf.layout import FINGERPRINT_FILE, METRICS_FILE, SUMMARY_FILE, TELEMETRY_FILE
from rlperf.resources.placement import plan_record
from rlperf.resources.plan import ResourcePlan
from rlperf.results.columns import ALGO_COLUMNS, TRAIN_COLUMNS
from rlperf.results.csvlog import CsvLog
from rlperf.results.jsonfile import write_json
from rlperf.results.record import TrainRecord
from rlperf.telemetry.sampler import TelemetrySampler, gpu_columns
from rlperf.training.target import StopCheck

DATA = Path(__file__).resolve().parents[1] / "data" / "gpu_check"
#: Where the recorded cases claim to have run (the manifest's command lines).
RECORDED_OUT = Path("/gpu_check_out")

# Phase times (s) of the fake jobs: CPU learner, GPU learner (first iteration: warm-up).
LEARN_S = {"cpu": (2.1, 1.9), "cuda": (0.9, 0.21)}


@dataclass
class Tweak:
    """What a negative case changes in one job."""

    learner_device: str | None = None  # e.g. "cpu" for a GPU layout
    runner_share: float | None = None  # the GPU share the env runners "got"
    learn_s: tuple[float, float] | None = None
    status: str = "completed"
    gpu: dict[str, Any] = field(default_factory=dict)  # FakeGpu values at the 2nd sample
    fail: set[str] = field(default_factory=set)  # NVML calls that fail on every GPU
    executor_device: str | None = None  # rollout


def _compose(overrides: list[str]) -> DictConfig:
    return compose(config_name="config", overrides=overrides)


def _cards(n: int, energy: bool, fail: set[str]) -> list[FakeGpu]:
    return [
        FakeGpu(
            name="NVIDIA Fake H200",
            uuid=f"GPU-fake-{i}",
            memory_total_mb=143771.0,
            energy_mj=5_000_000 if energy else None,
            fail=set(fail),
        )
        for i in range(n)
    ]


def _sample(sampler: TelemetrySampler, cards: list[FakeGpu], busy: float, extra: dict) -> None:
    """One telemetry sample with the fake cards doing ``busy`` (0-1) work."""
    for card in cards:
        card.util_pct = int(10 + 60 * busy)
        card.mem_util_pct = int(5 + 30 * busy)
        card.mem_used_mb = 900.0 + 1500.0 * busy
        card.power_w = 80.0 + 200.0 * busy
        if card.energy_mj is not None:
            card.energy_mj += int(1000 * card.power_w * 0.5)  # 0.5 s at that power
        for key, value in extra.items():
            setattr(card, key, value)
    sampler.sample_now()


#: The env ceiling the recorded jobs divide by (env steps/s of Pong on one core).
CEILING = 2600.0


def _telemetry_and_rows(
    folder: Path, plan: ResourcePlan, n_gpus: int, energy: bool, tweak: Tweak, learner: str
) -> list[dict[str, Any]]:
    """telemetry.csv through the real sampler; the two metrics rows with its windows."""
    cards = _cards(n_gpus, energy, tweak.fail)
    sampler = TelemetrySampler(
        folder / TELEMETRY_FILE,
        interval_s=3600,  # samples come from _sample(), as in tests/telemetry/test_telemetry.py
        gpu_indices=list(plan.visible_gpus),
        pynvml_module=FakePynvml(cards),
        time_origin=time.monotonic(),
    ).start()
    learn = tweak.learn_s or LEARN_S[learner]
    rows = []
    for it in (1, 2):
        t0 = sampler.mark()
        _sample(sampler, cards, 0.2, {})
        _sample(sampler, cards, 0.9, tweak.gpu if it == 2 else {})
        t1 = sampler.mark()
        sample_s, load_s, learn_s, sync_s = 1.4, 0.3, learn[it - 1], 0.01
        iter_s = sample_s + load_s + learn_s + sync_s + 0.05
        rows.append(
            {
                "iteration": it,
                "time_s": t1,
                "train_time_s": (iter_s + 0.01) * it,
                "excluded": "warmup" if it == 1 else "",
                "env_runners_healthy": plan.num_env_runners,
                "env_runner_restarts": 0,
                "env_runners_lost": 0,
                "learner_failures": 0,
                "sample_s": sample_s,
                "load_s": load_s,
                "learn_s": learn_s,
                "sync_s": sync_s,
                "iter_s": iter_s,
                "other_s": 0.05,
                "eval_s": 0.0,  # no train.stop.episode_return: no evaluation
                "env_steps": 1000,
                "env_steps_per_s": 1000 / iter_s,
                "sampling_efficiency": 1000 / sample_s / max(plan.num_env_runners, 1) / CEILING,
                "trained_steps": 2000,
                "trained_steps_per_s": 2000 / learn_s,
                "episodes": 1 if it == 2 else 0,
                "episode_return_mean": -21.0 if it == 2 else float("nan"),
                "eval_return_mean": float("nan"),
                "eval_episodes": 0,
                "eval_capped_episodes": 0,
                # PPO: one learner update per iteration; replay/async columns stay empty.
                "learner_updates": 1,
                **dict.fromkeys(ALGO_COLUMNS[1:], float("nan")),
                "cpu_util_pct": 55.0,
                "ram_util_pct": 30.0,
                **sampler.window(t0, t1),
            }
        )
    sampler.stop()
    return rows


def _placement(plan: ResourcePlan, tweak: Tweak) -> tuple[dict[str, Any], dict[str, Any]]:
    """``learner`` and ``env_runners`` records as a GPU machine would write them."""
    visible = plan.cuda_visible_devices
    if plan.num_learners == 0:
        device = tweak.learner_device or ("cuda:0" if plan.driver_gpus > 0 else "cpu")
        learners = [
            {"pid": 4100, "device": device, "cuda_visible_devices": visible}
            | {"gpus": None, "gpu_ids": None}
        ]
    else:
        learners = [
            {"pid": 4200 + k, "device": tweak.learner_device or "cuda:0"}
            | {"cuda_visible_devices": str(g), "gpus": 1.0, "gpu_ids": [str(g)]}
            for k, g in enumerate(plan.visible_gpus)
        ]
    learner = {
        "num_learners": plan.num_learners,
        "where": "driver" if plan.num_learners == 0 else "remote actors",
        "gpus_per_learner": plan.gpus_per_learner,
        "learners": learners,
    }
    share = plan.gpus_per_worker_scheduled if tweak.runner_share is None else tweak.runner_share
    runners = []
    for k in range(plan.num_env_runners):
        gpu = plan.visible_gpus[k % len(plan.visible_gpus)] if share > 0 else None
        runners.append(
            {
                "pid": 4300 + k,
                "worker_index": k + 1,
                "device": "cuda:0" if share > 0 else "cpu",
                "torch_threads": 1,
                "cuda_visible_devices": str(gpu) if gpu is not None else visible,
                "gpus": share,
                "gpu_ids": [str(gpu)] if gpu is not None else [],
            }
        )
    return learner, {"started": len(runners), "runners": runners}


def write_training(
    folder: Path, cfg: DictConfig, n_gpus: int, energy: bool, tweak: Tweak
) -> dict[str, Any]:
    """One training job folder; returns its resource plan record."""
    from rlperf.training.training_job import summarise_training

    folder.mkdir(parents=True, exist_ok=True)
    plan = plan_resources(cfg)
    learner_info, runners = _placement(plan, tweak)
    device = learner_info["learners"][0]["device"].split(":")[0]
    rows = _telemetry_and_rows(folder, plan, n_gpus, energy, tweak, device)
    columns = [*TRAIN_COLUMNS, *gpu_columns(plan.visible_gpus)]
    with CsvLog(folder / METRICS_FILE, columns) as metrics:
        for row in rows:
            metrics.write(row)
    record = plan_record(plan, str(cfg.gpu_layout.name))
    summary = {
        "status": tweak.status,
        "stage": "train",
        "backend": "rllib",
        "error": None if tweak.status == "completed" else "RuntimeError: recorded failure",
        "traceback": None,
        "incidents": [],
        "resource_plan": record,
        "model_params": 2009447,
        "learner": learner_info,
        "env_runners": runners,
        "env_ceiling_steps_per_s": CEILING,
        "env_ceiling": {"enabled": True, "steps_per_s": CEILING, "cached": True, "probe_s": 0.0},
        "scale": {
            "num_env_runners": plan.num_env_runners,
            "num_envs_per_env_runner": plan.envs_per_env_runner,
            "gym_env_vectorize_mode": plan.vectorize_mode,
            "num_cpus_per_env_runner": plan.cpus_per_env_runner,
            "num_learners": plan.num_learners,
            "num_gpus_per_learner": plan.gpus_per_learner,
            "num_cpus_per_learner": "auto",
            "driver_torch_threads": 1,
        },
    }
    run = TrainRecord(summary)  # filled as the job fills it, in the order it does
    summarise_training(cfg, rows, columns, Path("checkpoint"), run, plan.num_env_runners)
    run.startup_s = 12.0
    StopCheck(cfg).record(run)  # no train.stop target: ran its iterations
    run.wall_s = 31.5
    record_env_protocol(run, OmegaConf.to_container(cfg, resolve=True))  # as the job does
    write_json(folder / SUMMARY_FILE, summary)
    return record


def write_rollout(folder: Path, cfg: DictConfig, n_gpus: int, energy: bool, tweak: Tweak) -> None:
    """One rollout job folder (``rollout.device=cuda``)."""
    folder.mkdir(parents=True, exist_ok=True)
    plan = plan_resources(cfg)
    cards = _cards(n_gpus, energy, tweak.fail)
    with TelemetrySampler(
        folder / TELEMETRY_FILE,
        interval_s=3600,
        gpu_indices=list(plan.visible_gpus),
        pynvml_module=FakePynvml(cards),
    ) as sampler:
        for busy in (0.1, 0.3, 0.3):
            _sample(sampler, cards, busy, tweak.gpu if busy == 0.3 else {})
    resolved = OmegaConf.to_container(cfg, resolve=True)
    write_json(folder / FINGERPRINT_FILE, {"gpus": len(cards), "config": resolved})
    latency = {"count": 450, "mean": 0.45, "std": 0.05, "p50": 0.43, "p90": 0.5}
    summary = {
        "status": tweak.status,
        "stage": "rollout",
        "backend": "rllib",
        "error": None,
        "traceback": None,
        "incidents": [],
        "executor": {"process": "driver", "device": tweak.executor_device or "cuda:0"},
        "probe": {
            "observations": 32,
            "max_abs_logit_err": 2.4e-6,
            "greedy_agreement": 1.0,
            "tolerance": 1e-3,
        },
        "steps": 500,
        "latency": {"forward_ms": latency, "action_ms": latency, "env_step_ms": latency},
        "wall_s": 9.0,
    }
    write_json(folder / SUMMARY_FILE, summary)


def write_sweep(folder: Path, step: Step, n_gpus: int, energy: bool, tweaks: list[Tweak]) -> None:
    """A sweep folder: ``sweep.json`` (the launcher's index) and one training job per cell."""
    from rlperf.sweep.cells import cell_hash
    from rlperf.sweep.index import CellRecord, SweepIndex, write_cell_file
    from rlperf.sweep.resources import cell_request

    index = SweepIndex(folder)
    for num, (cell, tweak) in enumerate(zip(step.cells(), tweaks, strict=True)):
        cfg = _compose(list(cell))
        request = cell_request(cfg)
        record = CellRecord(
            hash=cell_hash(cfg),
            overrides=list(cell[-2:]),
            subdir=str(num),
            job_num=num,
            status=tweak.status,
            group=0,
            request=request.bundles,
            runs=1,
        )
        write_training(folder / str(num), cfg, n_gpus, energy, tweak)
        write_cell_file(folder / str(num), record)
        index.cells[record.hash] = record
    start = request.ray_start
    index.groups = [
        {"ray_start": start.to_json(), "describe": start.describe(), "cells": list(index.cells)}
    ]
    index.save()


@dataclass
class Case:
    """One recorded output folder: which steps of the sequence, and what goes wrong."""

    gpus: int
    energy: bool = True
    only: tuple[str, ...] | None = None  # step names to keep (default: all)
    tweaks: dict[str, Tweak] = field(default_factory=dict)  # step name (or sweep/<n>) -> tweak
    fails: tuple[
        str, ...
    ] = ()  # the check names that must fail (tests/gpu_check/test_gpu_check.py)


POSITIVE = {
    "one_gpu": Case(gpus=1),
    "two_gpus": Case(gpus=2),
    "no_energy": Case(gpus=1, energy=False, only=("train/none", "train/gpu0", "rollout/cuda")),
}

NEGATIVE = {
    "learner_on_cpu": Case(
        gpus=1,
        only=("train/none", "train/gpu0_driver"),
        tweaks={"train/gpu0_driver": Tweak(learner_device="cpu", learn_s=LEARN_S["cuda"])},
        fails=("train/gpu0_driver: learner device",),
    ),
    "util_130": Case(
        gpus=1,
        only=("train/none", "train/gpu0"),
        tweaks={"train/gpu0": Tweak(gpu={"util_pct": 130})},
        # The iteration's mean (76 %) hides it; the samples do not.
        fails=("train/gpu0: telemetry.csv gpu0",),
    ),
    "energy_decreasing": Case(
        gpus=1,
        only=("train/none", "train/gpu0_driver"),
        tweaks={"train/gpu0_driver": Tweak(gpu={"energy_mj": 4_000_000})},
        fails=(
            "train/gpu0_driver: metrics.csv gpu0 energy",
            "train/gpu0_driver: telemetry.csv gpu0 energy",
        ),
    ),
    "power_unreadable": Case(
        gpus=1,
        only=("train/none", "train/gpu0"),
        tweaks={"train/gpu0": Tweak(fail={"nvmlDeviceGetPowerUsage"})},
        fails=("train/gpu0: metrics.csv gpu0", "train/gpu0: telemetry.csv gpu0"),
    ),
    "runner_share_wrong": Case(
        gpus=1,
        only=("train/none", "train/gpu0"),
        tweaks={"train/gpu0": Tweak(runner_share=0.25)},
        fails=("train/gpu0: env runner GPU share",),
    ),
    "gpu_learner_slower": Case(
        gpus=1,
        only=("train/none", "train/gpu0_driver"),
        tweaks={"train/gpu0_driver": Tweak(learn_s=(2.5, 2.4))},
        fails=("train/gpu0_driver: learn phase vs CPU",),
    ),
    "rollout_on_cpu": Case(
        gpus=1,
        only=("rollout/cuda",),
        tweaks={"rollout/cuda": Tweak(executor_device="cpu")},
        fails=("rollout/cuda: policy device",),
    ),
    "sweep_cell_failed": Case(
        gpus=1,
        only=("sweep",),
        tweaks={"sweep/1": Tweak(status="failed")},
        fails=("sweep: cells", "sweep/1: status"),
    ),
}


def write_case(root: Path, case: Case) -> None:
    """The output folder of ``case`` under ``root``: its manifest and every job folder."""
    steps = [s for s in sequence(case.gpus) if case.only is None or s.name in case.only]
    manifest: dict[str, Any] = {"gpus": case.gpus, "recorded_with": "tests/fakes/pynvml.py"}
    manifest["steps"] = [step_record(s, RECORDED_OUT) for s in steps]
    for step, record in zip(steps, manifest["steps"], strict=True):
        record["returncode"], record["wall_s"] = 0, 30.0
        tweak = case.tweaks.get(step.name, Tweak())
        if step.kind == "train":
            write_training(root / step.folder, _compose([*step.overrides]), case.gpus,
                           case.energy, tweak)  # fmt: skip
        elif step.kind == "rollout":
            run = f"run={RECORDED_OUT / str(step.upstream)}"
            cfg = _compose([*step.overrides, run])
            write_rollout(root / step.folder, cfg, case.gpus, case.energy, tweak)
        else:
            tweaks = [case.tweaks.get(f"sweep/{k}", Tweak()) for k in range(len(step.cells()))]
            write_sweep(root / step.folder, step, case.gpus, case.energy, tweaks)
    write_json(root / MANIFEST_FILE, manifest)


def write_all(data: Path = DATA, cases: dict[str, Case] | None = None) -> None:
    """Rewrite every case (or ``cases``) under ``data``."""
    register_configs()
    GlobalHydra.instance().clear()
    with initialize_config_module(config_module="rlperf.conf", version_base="1.3"):
        for name, case in (cases or {**POSITIVE, **NEGATIVE}).items():
            shutil.rmtree(data / name, ignore_errors=True)
            write_case(data / name, case)
    GlobalHydra.instance().clear()


def case_of(name: str) -> Case:
    return {**POSITIVE, **NEGATIVE}[name]


if __name__ == "__main__":
    import os

    os.environ.setdefault("RLLIB_TEST_NO_TF_IMPORT", "1")  # cell_request imports RLlib
    write_all()
    print(f"wrote {len(POSITIVE) + len(NEGATIVE)} cases under {DATA}")
