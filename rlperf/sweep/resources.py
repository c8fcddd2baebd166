"""What a sweep cell asks Ray for, which Ray instance it needs, and whether it can ever fit.

Two different things decide where a cell can run:

- its *request*: the resource bundles its RLlib algorithm will start (main
  process / local learner, one bundle per env runner, remote learners), taken
  from RLlib's own ``Algorithm.default_resource_request`` so Tune's accounting
  is exactly what runs;
- its :class:`RayStart`: settings that change how Ray itself is started (the
  visible GPUs, Ray's CPU count, the CPU affinity mask). Cells are grouped by
  them; each group gets its own Ray instance.

Tune keeps a trial whose request can never be met PENDING forever, so the
launcher checks every cell against the capacity first (:func:`shortfall`).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from omegaconf import DictConfig

from rlperf.algos import build_algo_config, plan_resources
from rlperf.errors import InfeasibleError
from rlperf.resources.plan import (
    Machine,
    ResourcePlan,
    _ranges,
    check_env_stage_feasible,
    check_feasible,
    env_stage_cpus,
)
from rlperf.specs.stages import DEFAULT_STAGE, Feasibility, TrialRequest, stage_spec
from rlperf.sweep.cells import is_rlperf_config

Bundle = dict[str, float]

# Ray accounts resources in units of 1e-4; sums of floored fractions may carry float noise.
_EPS = 1e-6


@dataclass(frozen=True)
class RayStart:
    """How the Ray instance of a cell must be started (the grouping key).

    ``visible_gpus=None`` leaves ``CUDA_VISIBLE_DEVICES`` alone (a non-rlperf
    cell); ``num_cpus=None`` lets Ray count the CPUs of its affinity mask;
    ``affinity=None`` keeps the launcher's mask.
    """

    visible_gpus: tuple[int, ...] | None = None
    num_cpus: int | None = None
    affinity: tuple[int, ...] | None = None

    def describe(self) -> str:
        gpus = (
            "GPUs as found"
            if self.visible_gpus is None
            else f"GPUs [{','.join(map(str, self.visible_gpus))}]"
        )
        cpus = "all CPUs" if self.num_cpus is None else f"num_cpus={self.num_cpus}"
        mask = "" if self.affinity is None else f", affinity {_ranges(self.affinity)}"
        return f"{gpus}, {cpus}{mask}"

    def to_json(self) -> dict[str, Any]:
        return {
            "visible_gpus": None if self.visible_gpus is None else list(self.visible_gpus),
            "num_cpus": self.num_cpus,
            "affinity": None if self.affinity is None else list(self.affinity),
        }


@dataclass(frozen=True)
class CellRequest:
    """What a cell's trial asks Tune for, and the Ray instance it needs."""

    bundles: list[Bundle]
    strategy: str = "PACK"
    ray_start: RayStart = field(default_factory=RayStart)
    plan: ResourcePlan | None = None  # None for a non-rlperf cell
    stage: str = str(DEFAULT_STAGE)

    def totals(self) -> Bundle:
        return bundle_totals(self.bundles)


def bundle_totals(bundles: Sequence[Mapping[str, float]]) -> Bundle:
    """Sum of every resource over the bundles."""
    out: Bundle = {}
    for b in bundles:
        for k, v in b.items():
            out[k] = out.get(k, 0.0) + float(v)
    return out


@contextmanager
def _quiet() -> Iterator[None]:
    """Hold back log warnings while RLlib is imported and configured in the launcher.

    RLlib repeats notes there (TensorFlow not imported, deprecated settings of the
    shared training config) that say nothing about the cell; they would bury the
    sweep's own lines. ``logging.disable`` because RLlib resets its logger's level
    when it is imported.
    """
    previous = logging.root.manager.disable
    logging.disable(logging.WARNING)
    try:
        yield
    finally:
        logging.disable(previous)


def algorithm_bundles(cfg: DictConfig, plan: ResourcePlan) -> tuple[list[Bundle], str]:
    """RLlib's own resource request for the cell's algorithm (bundles, strategy).

    Imports RLlib; builds the ``AlgorithmConfig`` only (nothing starts).
    """
    with _quiet():
        algo_config = build_algo_config(cfg, plan)
        pgf = algo_config.algo_class.default_resource_request(algo_config)
    bundles = [{str(k): float(v) for k, v in b.items()} for b in pgf.bundles]
    return bundles, str(pgf.strategy)


def ray_start_of(plan: ResourcePlan) -> RayStart:
    """How Ray must be started for a cell with this resource plan."""
    return RayStart(plan.visible_gpus, plan.ray_num_cpus, plan.affinity)


def cell_request(cfg: DictConfig, plan: ResourcePlan | None = None) -> CellRequest:
    """The request and Ray start of one cell (config subtrees: ``stage``, ``workers``,
    ``env_runner``, ``gpu_layout``, ``cpu_affinity`` and what the algorithm needs);
    ``plan``: the cell's resource plan where the caller made it already.

    Training and rollout cells ask for what their algorithm starts; an edge cell
    (TFLite, no Ray workers) and a non-rlperf cell ask for one CPU.
    """
    if not is_rlperf_config(cfg):
        return CellRequest([{"CPU": 1.0}])
    plan = plan if plan is not None else plan_resources(cfg)
    start = ray_start_of(plan)
    trial = stage_spec(cfg.stage).trial
    if trial == TrialRequest.algorithm:
        bundles, strategy = algorithm_bundles(cfg, plan)
    elif trial == TrialRequest.engine:
        bundles, strategy = [{"CPU": env_stage_cpus(plan)}], "PACK"
    else:
        bundles, strategy = [{"CPU": 1.0}], "PACK"
    return CellRequest(bundles, strategy, start, plan, str(cfg.stage))


def local_capacity(
    start: RayStart, requests: Sequence[CellRequest], machine: Machine, overcommit_cpus: bool
) -> Bundle:
    """What a local Ray started with ``start`` will have (``num_cpus``, ``num_gpus``).

    With ``overcommit_cpus`` Ray is told it has as many CPUs as the largest
    request of the group needs, even beyond the cores (measurements then share
    cores; the sweep's index records the option).
    """
    cpus = float(start.num_cpus if start.num_cpus is not None else len(machine.cpus))
    if overcommit_cpus and requests:
        cpus = max(cpus, float(math.ceil(max(r.totals().get("CPU", 0.0) for r in requests))))
    gpus = float(machine.gpus if start.visible_gpus is None else len(start.visible_gpus))
    return {"CPU": cpus, "GPU": gpus}


def shortfall(
    bundles: Sequence[Mapping[str, float]],
    total: Mapping[str, float],
    nodes: Sequence[Mapping[str, float]] | None = None,
) -> str | None:
    """Why ``bundles`` can never be placed on ``total`` / ``nodes``; None when they can.

    Checks the sum of every resource against the total, and that each bundle fits
    on at least one node (a bundle is never split across nodes).
    """
    need = bundle_totals(bundles)
    for res in sorted(need):
        have = float(total.get(res, 0.0))
        if need[res] > have + _EPS:
            return (
                f"its trial asks for {need[res]:g} {res} in all "
                f"({len(bundles)} bundles) but Ray has {have:g}"
            )
    for b in bundles:
        fits = any(
            all(float(node.get(r, 0.0)) + _EPS >= float(v) for r, v in b.items())
            for node in (nodes if nodes is not None else [total])
        )
        if not fits:
            return f"its bundle {dict(b)} fits on no node of the cluster"
    return None


def local_infeasibility(
    request: CellRequest, machine: Machine, overcommit_cpus: bool
) -> str | None:
    """Why a cell can never run in a local Ray started for it; None when it can."""
    if request.plan is not None:
        # stage=env starts no env runners: only its engine's threads must fit. (Serve's
        # replicas are checked by its job, in the Ray it starts.)
        spec = stage_spec(request.stage)
        engine_only = spec.feasibility == Feasibility.engine_threads
        check = check_env_stage_feasible if engine_only else check_feasible
        try:
            check(request.plan, machine, overcommit_cpus)
        except InfeasibleError as exc:
            return str(exc)
    capacity = local_capacity(request.ray_start, [request], machine, overcommit_cpus)
    reason = shortfall(request.bundles, capacity)
    if reason is not None and not overcommit_cpus and "CPU" in reason:
        reason += "; ray.overcommit_cpus=true lets Ray schedule more bundles than cores"
    return reason


def cluster_axis_error(start: RayStart) -> str | None:
    """Why an existing Ray cluster cannot honour how a cell wants Ray started (``start``)."""
    if start.affinity is not None or start.num_cpus is not None:
        return (
            f"cpu_affinity asks Ray to be started with {start.describe()}, but the sweep "
            "runs on an existing Ray cluster (ray.address) whose CPUs are "
            "already set; use cpu_affinity=unrestricted or a local sweep"
        )
    gpus = start.visible_gpus
    if gpus and gpus != tuple(range(len(gpus))):
        return (
            f"gpu_layout asks for the physical GPU(s) {list(gpus)}, but on an existing Ray "
            "cluster Ray assigns GPUs itself and only the number of GPUs can be chosen; "
            "use a layout of the first GPUs (gpu0, both, ...) or a local sweep"
        )
    return None


def cluster_infeasibility(
    request: CellRequest, total: Mapping[str, float], nodes: Sequence[Mapping[str, float]]
) -> str | None:
    """Why a cell can never run on the existing Ray cluster with ``total`` / ``nodes``
    (how it wants Ray started, or its bundles); None when it can."""
    return cluster_axis_error(request.ray_start) or shortfall(request.bundles, total, nodes)


def cluster_capacity() -> tuple[Bundle, list[Bundle]]:
    """Totals and per-node resources of the Ray cluster this process is connected to."""
    # Ray: only to read a running cluster; the sweep's pre-flight plans cells without it.
    import ray

    total = {str(k): float(v) for k, v in ray.cluster_resources().items()}
    nodes = [
        {str(k): float(v) for k, v in n.get("Resources", {}).items()}
        for n in ray.nodes()
        if n.get("Alive", False)
    ]
    return total, nodes
