"""Start Ray for one experiment: visible GPUs and CPU affinity applied first.

Both must be in place before Ray starts: Ray's raylet and every worker it forks
inherit the environment (CUDA_VISIBLE_DEVICES) and the affinity mask of the
process that starts it. Both are restored when the session ends.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from omegaconf import DictConfig

from rlperf.errors import keep_stop_handlers
from rlperf.resources.listeners import ray_listeners
from rlperf.resources.node_watch import watch_node
from rlperf.resources.plan import Machine, ResourcePlan, ray_cpu_count

log = logging.getLogger(__name__)

LOOPBACK = "127.0.0.1"


#: GPU indices in configs are physical (NVML, PCI bus order, as telemetry reports them).
#: CUDA numbers devices fastest-first unless told otherwise, so on a machine with two
#: different cards (the study's RTX 3090 + V100) ``CUDA_VISIBLE_DEVICES=1`` could name
#: the other card than NVML's GPU 1: the placement makes CUDA use PCI order too.
CUDA_DEVICE_ORDER = "PCI_BUS_ID"


@contextmanager
def applied_placement(plan: ResourcePlan) -> Iterator[None]:
    """Set CUDA_VISIBLE_DEVICES (in PCI order) and the CPU affinity mask; restore after."""
    prev_env = {k: os.environ.get(k) for k in ("CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER")}
    prev_mask = os.sched_getaffinity(0)
    os.environ["CUDA_DEVICE_ORDER"] = CUDA_DEVICE_ORDER
    os.environ["CUDA_VISIBLE_DEVICES"] = plan.cuda_visible_devices
    if plan.affinity is not None:
        os.sched_setaffinity(0, plan.affinity)
    try:
        yield
    finally:
        for key, value in prev_env.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        os.sched_setaffinity(0, prev_mask)


def ray_init_kwargs(
    ray_cfg: Any, num_cpus: int | None = None, num_gpus: int | None = None
) -> dict[str, Any]:
    """Arguments for ``ray.init`` from the ``ray`` node (:class:`~rlperf.config.schema.RayConfig`).

    With ``ray.address`` the cluster there is joined (``num_cpus`` / ``num_gpus``
    are its own; ``auto``: the cluster this machine belongs to, as Ray finds it);
    otherwise a fresh local Ray is started (``address="local"``: whatever
    ``RAY_ADDRESS`` or the address file of an earlier ``ray start`` say, which a
    plain ``ray.init()`` would join) with ``num_cpus`` CPUs and ``num_gpus`` GPUs
    (``None``: Ray detects them), and nothing binds beyond 127.0.0.1. The one
    builder for single runs and for the sweep launcher.
    """
    if ray_cfg.address is not None:
        return {
            "address": str(ray_cfg.address),
            "log_to_driver": bool(ray_cfg.log_to_driver),
            "logging_level": logging.WARNING,
        }
    kwargs: dict[str, Any] = {
        "address": "local",
        "include_dashboard": bool(ray_cfg.include_dashboard),
        "dashboard_host": LOOPBACK,
        "_node_ip_address": LOOPBACK,
        "log_to_driver": bool(ray_cfg.log_to_driver),
        "configure_logging": True,
        "logging_level": logging.WARNING,
    }
    if num_cpus is not None:
        kwargs["num_cpus"] = int(num_cpus)
    if num_gpus is not None:
        kwargs["num_gpus"] = int(num_gpus)
    if ray_cfg.object_store_memory_mb is not None:
        kwargs["object_store_memory"] = int(ray_cfg.object_store_memory_mb) * 2**20
    return kwargs


def joined_address(ray_cfg: Any) -> str:
    """The Ray this process is connected to, as people name it: ``ray.address`` as given
    (``127.0.0.1:6379``; Ray itself reports the head's network address), else the GCS
    address Ray reports (a local Ray, ``ray.address=auto``)."""
    import ray

    given = ray_cfg.address
    if given is not None and str(given) not in ("auto", "local"):
        return str(given)
    return str(ray.get_runtime_context().gcs_address)


def init_ray(
    ray_cfg: Any,
    num_cpus: int | None = None,
    num_gpus: int | None = None,
    env_vars: dict[str, str] | None = None,
) -> float:
    """``ray.init`` with :func:`ray_init_kwargs`; returns the seconds it took.

    ``env_vars``: set in every worker process of the Ray job (the job's runtime
    environment, held by the cluster, written to no file of rlperf's).

    A Ray started here listens on 127.0.0.1 only; its listening sockets are
    checked right after the start (:func:`check_exposure`). Its processes are in process
    groups of their own (:func:`_own_process_group`).
    """
    # Ray: deferred, rlperf.job_wrapper imports this module before the config is validated.
    import ray

    kwargs = ray_init_kwargs(ray_cfg, num_cpus, num_gpus)
    joining = ray_cfg.address is not None
    if not joining:
        ignored = other_ray_address()
        if ignored is not None:
            log.warning(
                "starting rlperf's own Ray on 127.0.0.1, not joining %s (join a cluster "
                "with ray.address=<host:port>, or ray.address=auto)",
                ignored,
            )
    # The variables' names only: their values (credentials) go into no log.
    log.info("starting Ray: %s", {**kwargs, **({"env_vars": sorted(env_vars)} if env_vars else {})})
    if env_vars:
        kwargs["runtime_env"] = {"env_vars": dict(env_vars)}
    t0 = time.perf_counter()
    with _loopback_kept(kwargs["address"] if joining else None), _own_process_group(joining):
        ray.init(**kwargs)
    keep_stop_handlers()  # ray.init replaced rlperf's SIGTERM handler (rlperf.errors)
    seconds = time.perf_counter() - t0
    if not joining:
        check_exposure()
    return seconds


def other_ray_address() -> str | None:
    """The Ray a plain ``ray.init()`` would join instead of starting one: ``RAY_ADDRESS``
    (set inside a Ray job and on cluster nodes), or the address file an earlier
    ``ray start --head`` left (Ray's ``ray_current_cluster``); None when there is none."""
    env = os.environ.get("RAY_ADDRESS")
    if env:
        return f"RAY_ADDRESS={env}"
    # Ray's private reader of its address file (fragile across Ray versions: a failure
    # only loses this notice); deferred, as in init_ray.
    try:
        from ray._private.services import find_bootstrap_address

        found = find_bootstrap_address(None)
    except Exception:
        return None
    return None if not found else f"the Ray at {found} (the address file of a `ray start`)"


def check_exposure() -> list[str]:
    """Log what the Ray this process started exposes; returns the non-loopback listeners.

    A warning (on the terminal too) names every socket bound beyond loopback and
    says when Ray's token authentication is off (``RAY_AUTH_MODE=disabled``).
    """

    found = ray_listeners()
    exposed = [str(x) for x in found if not x.loopback]
    token = os.environ.get("RAY_AUTH_MODE", "token").lower() == "token"
    if exposed:
        log.warning("Ray listens beyond 127.0.0.1: %s", "; ".join(exposed))
    if not token:
        log.warning("Ray runs without token authentication (RAY_AUTH_MODE is not 'token')")
    log.info(
        "Ray: %d listening socket(s), %s; token authentication %s",
        len(found),
        "all on loopback" if not exposed else f"{len(exposed)} beyond loopback",
        "on" if token else "off",
    )
    return exposed


@contextmanager
def _loopback_kept(address: str | None) -> Iterator[None]:
    """Keep 127.0.0.1 as given, for a local start (no ``address``) or a loopback address.

    Ray rewrites 127.0.0.1 / localhost to this machine's network IP
    (``services.resolve_ip_for_localhost``, ray-project/ray#59110): a local
    start with ``_node_ip_address=127.0.0.1`` then advertises the network IP,
    and Ray 2.60 binds the GCS, raylet, object manager and worker gRPC servers
    to the wildcard address (``*:port``) and the runtime-env agent to that IP;
    joining ``ray start --head --node-ip-address=127.0.0.1`` at 127.0.0.1 misses
    the cluster. Ray asks ``ray_constants.ENABLE_RAY_CLUSTER`` whether to rewrite
    at call time; it is switched off for the duration of ``ray.init`` only (a
    private constant: fragile across Ray versions; tests/training/test_faults.py checks
    the socket table of a real run).
    """
    host = (address or "").split("://")[-1].rsplit(":", 1)[0].strip("[]")
    if address is not None and host not in ("127.0.0.1", "localhost", "::1"):
        yield
        return
    # Ray's private constants: deferred, as in init_ray.
    from ray._private import ray_constants

    saved = ray_constants.ENABLE_RAY_CLUSTER
    ray_constants.ENABLE_RAY_CLUSTER = False
    try:
        yield
    finally:
        ray_constants.ENABLE_RAY_CLUSTER = saved


@contextmanager
def _own_process_group(joining: bool) -> Iterator[None]:
    """Start the local Ray's processes (GCS, raylet and the workers it forks, log monitor) in
    a process group of their own, for the duration of ``ray.init`` only.

    A stop signal sent to rlperf's process group (``kill -TERM -PGID``, a closed terminal's
    SIGHUP, a job runner that signals the group) then reaches rlperf alone, which stops
    Ray itself. Reaching the raylet too, it raced rlperf's own handler: the raylet's death
    made Ray's core worker in this process end it (``_exit(1)``: "the connection to the
    plasma store is failed") within 0.1 s, before the interrupt was written (2 runs in 12
    beside a CPU hog). Ray blocks SIGINT in its processes for the same reason. Ray still
    shares this process's fate (``PR_SET_PDEATHSIG`` on Linux: a ``kill -9`` of rlperf
    ends its GCS and raylet), and ``ray.shutdown`` signals each process by its pid. Ray's
    ``ConsolePopen`` is private: fragile across Ray versions (tests/training/test_training.py
    signals a real run's group).
    """
    if joining:
        yield
        return
    from ray._private import services

    saved = services.ConsolePopen

    class OwnGroupPopen(saved):  # type: ignore[misc, valid-type]
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            kwargs.setdefault("process_group", 0)
            super().__init__(*args, **kwargs)

    services.ConsolePopen = OwnGroupPopen  # type: ignore[misc]
    try:
        yield
    finally:
        services.ConsolePopen = saved  # type: ignore[misc]


@contextmanager
def ray_session(plan: ResourcePlan, machine: Machine, ray_cfg: DictConfig) -> Iterator[None]:
    """Start (or join) Ray for one job; always shut it down.

    Call it inside :func:`applied_placement` (the job wrapper does) so that Ray
    inherits the plan's visible GPUs and affinity mask.
    """
    # Ray: deferred, as in init_ray.
    import ray

    if ray.is_initialized():
        # Inside a Ray Tune trial (the sweep launcher): Ray was started by the
        # launcher with the group's placement; the trial neither starts nor stops it.
        yield
        return
    init_ray(ray_cfg, ray_cpu_count(plan, machine, bool(ray_cfg.overcommit_cpus)), plan.num_gpus)
    try:
        with watch_node("during the run"):  # a local Ray only (a cluster's raylet is not ours)
            yield
    finally:
        ray.shutdown()
