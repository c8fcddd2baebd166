"""Translate ``workers``, ``learners``, ``env_runner``, ``gpu_layout`` and ``cpu_affinity``
into what Ray and RLlib get.

The 2021 study's rule (docs/study.md, training matrix): in a "shared" layout the
driver (learner) gets a small fraction and the workers split the rest, per
worker = (n_visible - driver) / workers; in a "driver" layout the driver gets
every visible GPU and the workers none.

Learners (RLlib ``num_learners``): ``learners=null`` keeps the default — one
learner per GPU where the layout gives the learner side several GPUs, else the
algorithm's RLlib default (its spec's ``default_learners``, which
:func:`rlperf.algos.plan_resources` passes in: 0 for PPO, the learner in the driver;
1 for APPO/IMPALA). An explicit ``learners=N``
shares the layout's learner GPUs among N learner actors (with several GPUs, one
each: ``N`` must equal their number). Like RLlib (``num_cpus_per_learner=auto``),
a learner actor without a GPU takes a CPU of its own, on top of the driver's.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from omegaconf import DictConfig

from rlperf.errors import InfeasibleError
from rlperf.specs.engines import DEFAULT_ENGINE, ENGINES, engine_of, engine_threads
from rlperf.specs.stages import Feasibility
from rlperf.telemetry.fingerprint import compact_ranges as _ranges

# Ray accounts resources in units of 1e-4 (ray_constants.MIN_RESOURCE_GRANULARITY).
# We schedule the per-worker fraction floored to that unit, so what Ray is asked
# for is exactly what we record (`gpus_per_worker_scheduled`) and can never round
# up past the card (8 x 0.125 + 0.0001 > 1 would never fit); the exact value by the rule
# is recorded next to it.
RAY_RESOURCE_UNIT = 1e-4


def gpu_fractions(
    mode: str, n_visible: int, driver_gpus: float, workers: int
) -> tuple[float, float]:
    """(driver GPUs, GPUs per worker) by the study's rule for ``gpu_layout.mode``."""
    if mode == "none" or n_visible == 0:
        return 0.0, 0.0
    if mode == "driver":
        return float(n_visible), 0.0
    if mode == "shared":
        if workers == 0:
            return float(driver_gpus), 0.0
        return float(driver_gpus), (n_visible - driver_gpus) / workers
    raise ValueError(f"gpu_layout.mode={mode!r}: expected none, shared or driver")


def floor_to_ray_unit(value: float) -> float:
    """Largest multiple of Ray's resource unit (1e-4) not above ``value``."""
    return math.floor(round(value / RAY_RESOURCE_UNIT, 6)) * RAY_RESOURCE_UNIT


@dataclass(frozen=True)
class ResourcePlan:
    """Everything the training job needs to start Ray and configure RLlib."""

    visible_gpus: tuple[int, ...]
    driver_gpus: float  # exact, by the study's rule
    gpus_per_worker: float  # exact, by the study's rule
    gpus_per_worker_scheduled: float  # floored to Ray's 1e-4 unit
    num_learners: int  # 0 = the learner runs in the driver process
    gpus_per_learner: float
    num_env_runners: int
    cpus_per_env_runner: float
    envs_per_env_runner: int
    ray_num_cpus: int | None  # None = let Ray detect (cpu_affinity=unrestricted)
    affinity: tuple[int, ...] | None  # CPUs to pin the Ray-starting process to
    engine: str = str(DEFAULT_ENGINE)  # env.engine (rlperf.specs.engines)
    env_threads: int = 1  # env.threads of a threaded engine (counted in cpus_per_env_runner)
    env_runner_torch_threads: int | None = None  # None: as Ray starts the actor

    def to_json(self) -> dict[str, Any]:
        """Every field as plain JSON values (tuples become lists), plus ``num_gpus``,
        ``cpus_per_learner`` and ``required_cpus`` (what the pre-flight counts)."""
        out = {
            f.name: list(v) if isinstance(v := getattr(self, f.name), tuple) else v
            for f in fields(self)
        }
        return {
            **out,
            "vectorize_mode": self.vectorize_mode,
            "num_gpus": self.num_gpus,
            "cpus_per_learner": self.cpus_per_learner,
            "required_cpus": self.required_cpus,
        }

    @property
    def vectorize_mode(self) -> str:
        """RLlib's ``gym_env_vectorize_mode`` for the engine."""
        return ENGINES[self.engine].rllib_mode

    @property
    def cuda_visible_devices(self) -> str:
        """Value for CUDA_VISIBLE_DEVICES, set before Ray starts ('' hides every GPU)."""
        return ",".join(str(i) for i in self.visible_gpus)

    @property
    def num_gpus(self) -> int:
        """GPUs Ray is told about."""
        return len(self.visible_gpus)

    @property
    def cpus_per_learner(self) -> float:
        """CPUs of one learner actor: 1 without a GPU, else 0 (``num_cpus_per_learner=auto``)."""
        return 0.0 if self.gpus_per_learner > 0 else 1.0

    @property
    def required_cpus(self) -> float:
        """CPUs RLlib will request: 1 for the main process (driver, with the local learner),
        ``num_cpus`` per env runner, and a CPU per learner actor without a GPU."""
        return (
            1
            + self.num_env_runners * self.cpus_per_env_runner
            + self.num_learners * self.cpus_per_learner
        )

    @property
    def required_gpus(self) -> float:
        """GPUs requested: the learner(s) plus every env runner's scheduled fraction."""
        learners = self.gpus_per_learner * max(self.num_learners, 1)
        return learners + self.num_env_runners * self.gpus_per_worker_scheduled


def learner_split(
    driver_gpus: float, learners: int | None, default_learners: int
) -> tuple[int, float]:
    """(num_learners, GPUs per learner) of the learner side's ``driver_gpus`` and ``learners``
    (null: ``default_learners``, the algorithm's RLlib default, on at most one GPU).

    Raises:
        ValueError: a split RLlib cannot make (the message names the keys).
    """
    if driver_gpus > 1 and driver_gpus != int(driver_gpus):
        raise ValueError(f"gpu_layout.driver_gpus={driver_gpus}: above 1 it must be whole GPUs")
    if learners is None:
        # RLlib's local learner uses at most one GPU: more than one means data-parallel
        # remote learners with one GPU each.
        if driver_gpus > 1:
            return int(driver_gpus), 1.0
        return default_learners, driver_gpus / max(default_learners, 1)
    if driver_gpus > 1 and learners != int(driver_gpus):
        raise ValueError(
            f"learners={learners} with a GPU layout that gives the learners "
            f"{int(driver_gpus)} GPUs: RLlib gives each learner actor whole GPUs here, so use "
            f"learners={int(driver_gpus)} (or null), or a layout with one GPU for the learner"
        )
    return learners, (driver_gpus / learners if learners else driver_gpus)


def resource_plan(cfg: DictConfig, default_learners: int) -> ResourcePlan:
    """Resource plan of ``workers``, ``learners``, ``env_runner``, ``gpu_layout``,
    ``cpu_affinity``; ``default_learners``: the algorithm's RLlib default (what
    ``learners=null`` gives on at most one GPU; :func:`rlperf.algos.plan_resources`)."""
    gl = cfg.gpu_layout
    visible = tuple(int(i) for i in gl.visible_gpus)
    workers = int(cfg.workers)
    driver, per_worker = gpu_fractions(gl.mode, len(visible), float(gl.driver_gpus), workers)
    learners = cfg.get("learners")
    num_learners, per_learner = learner_split(
        driver, None if learners is None else int(learners), default_learners
    )
    aff = cfg.cpu_affinity
    ray_num_cpus: int | None = None
    affinity: tuple[int, ...] | None = None
    if aff.mode in ("ray_cpus", "pinned"):
        ray_num_cpus = int(aff.num_cpus) if aff.num_cpus is not None else workers + 1
        if aff.mode == "pinned":
            affinity = tuple(range(int(aff.first_cpu), int(aff.first_cpu) + ray_num_cpus))
    runner = cfg.env_runner
    threads = runner.get("torch_threads")
    env = cfg.get("env") or {}
    engine = engine_of(env)
    env_threads = engine_threads(env) if engine.threaded else 1
    # A threaded engine's threads are CPUs of the env runner: Ray must count them.
    runner_cpus = max(float(runner.num_cpus), float(env_threads) if engine.threaded else 0.0)
    return ResourcePlan(
        visible_gpus=visible,
        driver_gpus=driver,
        gpus_per_worker=per_worker,
        gpus_per_worker_scheduled=floor_to_ray_unit(per_worker),
        num_learners=num_learners,
        gpus_per_learner=per_learner,
        num_env_runners=workers,
        cpus_per_env_runner=runner_cpus,
        envs_per_env_runner=int(runner.num_envs),
        engine=engine.name,
        env_threads=env_threads,
        env_runner_torch_threads=None if threads is None else int(threads),
        ray_num_cpus=ray_num_cpus,
        affinity=affinity,
    )


@dataclass(frozen=True)
class Machine:
    """What this process can use: its CPU affinity mask and the NVIDIA GPUs present."""

    cpus: tuple[int, ...]
    gpus: int
    gpu_source: str  # how the GPU count was found


def count_nvidia_gpus() -> tuple[int, str]:
    """Count NVIDIA GPUs without initialising CUDA (the driver's /proc entries, else NVML)."""
    proc = Path("/proc/driver/nvidia/gpus")
    if proc.is_dir():
        return len([p for p in proc.iterdir() if p.is_dir()]), str(proc)
    try:
        import pynvml

        pynvml.nvmlInit()
        try:
            return int(pynvml.nvmlDeviceGetCount()), "NVML"
        finally:
            pynvml.nvmlShutdown()
    except Exception as exc:  # no library, no driver
        return 0, f"no NVIDIA driver ({type(exc).__name__}: {exc})"


def detect_machine() -> Machine:
    """The CPUs this process may run on and the GPU count."""
    gpus, source = count_nvidia_gpus()
    return Machine(cpus=tuple(sorted(os.sched_getaffinity(0))), gpus=gpus, gpu_source=source)


def check_feasible(plan: ResourcePlan, machine: Machine, overcommit_cpus: bool) -> None:
    """Fail fast, saying what was asked and what exists (RLlib otherwise waits forever)."""
    missing = [i for i in plan.visible_gpus if i >= machine.gpus]
    if missing:
        raise InfeasibleError(
            f"gpu_layout asks for GPU(s) {list(plan.visible_gpus)} but this machine has "
            f"{machine.gpus} NVIDIA GPU(s) ({machine.gpu_source}); use gpu_layout=none"
            + (f" or indices below {machine.gpus}" if machine.gpus else "")
        )
    if plan.affinity is not None:
        absent = sorted(set(plan.affinity) - set(machine.cpus))
        if absent:
            raise InfeasibleError(
                f"cpu_affinity=pinned asks for CPUs {_ranges(plan.affinity)} (workers + 1 = "
                f"{len(plan.affinity)} CPUs) but this process may only use CPUs "
                f"{_ranges(machine.cpus)}; CPUs {_ranges(absent)} do not exist here. Lower "
                f"workers or cpu_affinity.num_cpus, or use cpu_affinity=ray_cpus"
            )
    ray_cpus = plan.ray_num_cpus if plan.ray_num_cpus is not None else len(machine.cpus)
    if plan.required_cpus > ray_cpus and not overcommit_cpus:
        learner_cpus = plan.num_learners * plan.cpus_per_learner
        learners = (
            f" + {learner_cpus:g} for {plan.num_learners} learner actor(s)" if learner_cpus else ""
        )
        threaded = ENGINES[plan.engine].threaded and plan.cpus_per_env_runner == plan.env_threads
        per_runner = f" (env.threads={plan.env_threads})" if threaded else ""
        raise InfeasibleError(
            f"workers={plan.num_env_runners}"
            + (f" learners={plan.num_learners}" if plan.num_learners else "")
            + " needs "
            f"{plan.required_cpus:g} CPU bundles (1 for the driver + "
            f"{plan.cpus_per_env_runner:g} per env runner{per_runner}{learners}) but Ray will have "
            f"{ray_cpus} CPUs"
            + (" (cpu_affinity.num_cpus)" if plan.ray_num_cpus is not None else " (this machine)")
            + ". Lower workers or learners, or set ray.overcommit_cpus=true to let Ray schedule "
            "more bundles than cores (measurements then share cores)"
        )


def serve_replica_cpus(cfg: DictConfig) -> float:
    """Ray CPUs the policy replicas of a serve job ask for (``serve.replicas`` x
    ``serve.cpus_per_replica``; the echo replica asks for none)."""
    return int(cfg.serve.replicas) * float(cfg.serve.cpus_per_replica)


def check_serve_feasible(cfg: DictConfig, machine: Machine) -> None:
    """A serve job's replicas fit in the Ray it starts (else Serve would wait forever)."""
    need = serve_replica_cpus(cfg)
    have = len(machine.cpus)
    if need > have + 1e-9 and not bool(cfg.ray.overcommit_cpus):
        raise InfeasibleError(
            f"serve.replicas={cfg.serve.replicas} x serve.cpus_per_replica="
            f"{cfg.serve.cpus_per_replica} asks Ray for {need:g} CPUs but this process may use "
            f"{have} (CPUs {_ranges(machine.cpus)}). Lower serve.replicas or "
            f"serve.cpus_per_replica, or set ray.overcommit_cpus=true (replicas then share cores)"
        )


def check_env_stage_feasible(plan: ResourcePlan, machine: Machine, overcommit_cpus: bool) -> None:
    """A ``stage=env`` job's engine threads fit on the CPUs this process may use (in a sweep
    its trial asks Ray for them: :func:`env_stage_cpus`)."""
    have = len(plan.affinity) if plan.affinity is not None else len(machine.cpus)
    if plan.env_threads > have and not overcommit_cpus:
        raise InfeasibleError(
            f"env.threads={plan.env_threads} (env.engine={plan.engine}) needs {plan.env_threads} "
            f"CPUs but this process may use {have} (CPUs "
            f"{_ranges(plan.affinity if plan.affinity is not None else machine.cpus)}). Lower "
            f"env.threads, or set ray.overcommit_cpus=true (threads then share cores)"
        )


def check_feasibility(
    check: Feasibility, cfg: DictConfig, plan: ResourcePlan, machine: Machine, overcommit_cpus: bool
) -> None:
    """Run the pre-flight ``check`` a stage's spec names (:class:`InfeasibleError`)."""
    if check == Feasibility.env_runners:
        check_feasible(plan, machine, overcommit_cpus)
    elif check == Feasibility.engine_threads:
        check_env_stage_feasible(plan, machine, overcommit_cpus)
    elif check == Feasibility.serve_replicas:
        check_serve_feasible(cfg, machine)
    else:
        raise ValueError(f"no pre-flight check named {check!r}")


def env_stage_cpus(plan: ResourcePlan) -> float:
    """CPUs a ``stage=env`` job uses: its engine's threads (one for a Python engine; the
    workers of gymnasium_async are not counted, as in training)."""
    return float(max(1, plan.env_threads))


def ray_cpu_count(plan: ResourcePlan, machine: Machine, overcommit_cpus: bool) -> int:
    """``num_cpus`` for ``ray.init``: the plan's, the machine's, or enough when overcommitting."""
    base = plan.ray_num_cpus if plan.ray_num_cpus is not None else len(machine.cpus)
    if overcommit_cpus:
        return max(base, math.ceil(plan.required_cpus))
    return base
