"""Where a built Algorithm's learners and env runners actually run: process, device, GPU share.

The resource plan (:mod:`rlperf.resources.plan`) says what each part should
get; the functions here ask the running processes what they got, for
``summary.json`` (training: ``learner`` and ``env_runners``; rollout:
``learner`` and the runners of ``env_runners``). Comparing the two is how
``benchmarks/gpu_check.py`` proves a GPU layout on real hardware from the
result files alone.

- The learner runs in the driver process (RLlib's local learner) unless the
  plan asks for several (``num_learners > 0``: remote learner actors, one GPU
  each). A local learner outside Ray Tune is not a Ray actor: Ray manages no
  devices for it, it uses ``cuda:0`` of the driver's ``CUDA_VISIBLE_DEVICES``
  (set from the plan before Ray starts) and ``gpus`` is ``None``.
- Env runners are Ray actors; ``gpus`` is the GPU share Ray assigned to each
  (``ray.get_runtime_context().get_assigned_resources()``), which the plan's
  ``gpus_per_worker_scheduled`` must equal.

Importing this module is cheap; Ray is imported inside the functions, which
run in the driver or, shipped by ``foreach_*``, inside the actors.
"""

from __future__ import annotations

from typing import Any

from rlperf.resources.plan import ResourcePlan


def process_gpus() -> dict[str, Any]:
    """This process's ``CUDA_VISIBLE_DEVICES``, and the GPU share Ray assigned it.

    ``gpus`` (and ``gpu_ids``) are ``None`` outside a Ray actor (the driver),
    where Ray assigns nothing.
    """
    import os

    gpus: float | None = None
    gpu_ids: list[str] | None = None
    # Ray: deferred, the training and rollout stages import this module before Ray starts.
    import ray

    if ray.is_initialized():
        context = ray.get_runtime_context()
        if context.get_actor_id() is not None:
            gpus = float(context.get_assigned_resources().get("GPU", 0.0))
            gpu_ids = [str(i) for i in ray.get_gpu_ids()]
    return {
        "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
        "gpus": gpus,
        "gpu_ids": gpu_ids,
    }


def learner_state(learner: Any) -> dict[str, Any]:
    """Runs where the learner lives: its process, torch device and GPUs."""
    import os

    return {"pid": os.getpid(), "device": str(learner.device), **process_gpus()}


def env_runner_state(runner: Any) -> dict[str, Any]:
    """Runs inside an env runner actor: its process, its module's device and GPU share, and
    torch's intra-op threads there (``env_runner.torch_threads``)."""
    import os

    # torch: only in the env runner actor this runs in (rlperf.resources stays light).
    import torch

    module = getattr(runner, "module", None)
    device = getattr(runner, "_device", None)
    if module is not None:
        params = list(module.parameters())
        device = params[0].device if params else device
    return {
        "pid": os.getpid(),
        "worker_index": int(runner.worker_index),
        "device": str(device),
        "torch_threads": int(torch.get_num_threads()),
        **process_gpus(),
    }


def learner_placement(algo: Any, plan: ResourcePlan) -> dict[str, Any]:
    """The ``learner`` entry of ``summary.json``: where the learner(s) run, on which device."""
    results = algo.learner_group.foreach_learner(learner_state)
    states = [r.get() if hasattr(r, "get") else r for r in results]
    return {
        "num_learners": int(plan.num_learners),
        "where": "driver" if algo.learner_group.is_local else "remote actors",
        "gpus_per_learner": float(plan.gpus_per_learner),
        "learners": states,
    }


def env_runner_placement(algo: Any) -> list[dict[str, Any]]:
    """:func:`env_runner_state` of every remote env runner, by worker index."""
    states = algo.env_runner_group.foreach_env_runner(env_runner_state, local_env_runner=False)
    return sorted(states, key=lambda s: s["worker_index"])


def plan_record(plan: ResourcePlan, gpu_layout: str) -> dict[str, Any]:
    """The ``resource_plan`` entry of ``summary.json``: the plan of ``gpu_layout``, as run."""
    return {"gpu_layout": gpu_layout, **plan.to_json()}


__all__ = [
    "env_runner_placement",
    "env_runner_state",
    "learner_placement",
    "learner_state",
    "plan_record",
    "process_gpus",
]
