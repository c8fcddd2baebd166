"""Start Ray for one experiment: visible GPUs and CPU affinity applied first.

Both must be in place before Ray starts: Ray's raylet and every worker it forks
inherit the environment (CUDA_VISIBLE_DEVICES) and the affinity mask of the
process that starts it. Both are restored when the session ends.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from omegaconf import DictConfig

from rlperf.resources.plan import Machine, ResourcePlan, ray_cpu_count

log = logging.getLogger(__name__)

LOOPBACK = "127.0.0.1"


@contextmanager
def applied_placement(plan: ResourcePlan) -> Iterator[None]:
    """Set CUDA_VISIBLE_DEVICES and the CPU affinity mask of this process; restore after."""
    prev_cuda = os.environ.get("CUDA_VISIBLE_DEVICES")
    prev_mask = os.sched_getaffinity(0)
    os.environ["CUDA_VISIBLE_DEVICES"] = plan.cuda_visible_devices
    if plan.affinity is not None:
        os.sched_setaffinity(0, plan.affinity)
    try:
        yield
    finally:
        if prev_cuda is None:
            os.environ.pop("CUDA_VISIBLE_DEVICES", None)
        else:
            os.environ["CUDA_VISIBLE_DEVICES"] = prev_cuda
        os.sched_setaffinity(0, prev_mask)


def ray_init_kwargs(plan: ResourcePlan, machine: Machine, ray_cfg: DictConfig) -> dict[str, Any]:
    """Arguments for ``ray.init`` (``ray.*`` config); nothing binds beyond 127.0.0.1."""
    if ray_cfg.address is not None:
        return {"address": ray_cfg.address, "log_to_driver": ray_cfg.log_to_driver}
    kwargs: dict[str, Any] = {
        "num_cpus": ray_cpu_count(plan, machine, ray_cfg.overcommit_cpus),
        "num_gpus": plan.num_gpus,
        "include_dashboard": bool(ray_cfg.include_dashboard),
        "dashboard_host": LOOPBACK,
        "_node_ip_address": LOOPBACK,
        "log_to_driver": bool(ray_cfg.log_to_driver),
        "configure_logging": True,
        "logging_level": logging.WARNING,
    }
    if ray_cfg.object_store_memory_mb is not None:
        kwargs["object_store_memory"] = int(ray_cfg.object_store_memory_mb) * 2**20
    return kwargs


@contextmanager
def ray_session(plan: ResourcePlan, machine: Machine, ray_cfg: DictConfig) -> Iterator[None]:
    """Start (or join) Ray; always shut it down.

    Call it inside :func:`applied_placement` (the job wrapper does) so that Ray
    inherits the plan's visible GPUs and affinity mask.
    """
    import ray

    if ray.is_initialized():
        # Inside a Ray Tune trial (the sweep launcher): Ray was started by the
        # launcher with the group's placement; the trial neither starts nor stops it.
        yield
        return
    kwargs = ray_init_kwargs(plan, machine, ray_cfg)
    log.info("starting Ray: %s", kwargs)
    ray.init(**kwargs)
    try:
        yield
    finally:
        ray.shutdown()
