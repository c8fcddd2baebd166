"""Ray and Ray Serve for one serve job: up on 127.0.0.1, the applications deployed, all
torn down at the end; a replica killed on request; what Serve's processes listen on.

A job that starts Ray (a single run) starts it through rlperf's one builder
(:func:`rlperf.resources.ray_session.init_ray`), then Serve with its proxy on
127.0.0.1, and shuts both down. Inside a sweep trial Ray is the launcher's:
the job joins it, uses Serve's proxy if one runs already, and deletes only its
own applications (Serve is one per Ray cluster).
"""

from __future__ import annotations

import logging
import socket
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from rlperf.resources.ray_session import LOOPBACK, init_ray

log = logging.getLogger("rlperf.serve")

#: Command-line prefixes (Ray's process titles) of Serve's processes.
SERVE_PROCESS_TITLES = ("ray::ServeReplica", "ray::ProxyActor", "ray::ServeController")


@dataclass
class ServeSession:
    """A running Serve: where its proxy listens and the applications this job deployed."""

    http_port: int
    owns_ray: bool
    tag: str = field(default_factory=lambda: uuid.uuid4().hex[:8])
    apps: dict[str, str] = field(default_factory=dict)  # name -> route prefix
    start_s: dict[str, float] = field(default_factory=dict)

    def url(self, target: str) -> str:
        return f"http://{LOOPBACK}:{self.http_port}{self.apps[self.app_name(target)]}"

    def app_name(self, target: str) -> str:
        return f"rlperf-{self.tag}-{target}"


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((LOOPBACK, 0))
        return int(s.getsockname()[1])


@contextmanager
def serve_session(ray_cfg: Any, num_cpus: int, http_port: int) -> Iterator[ServeSession]:
    """Ray (started here unless this process is connected already) and Serve on 127.0.0.1.

    ``num_cpus``: CPUs of a Ray started here; ``http_port`` 0 picks a free port.
    """
    # Ray and Serve: deferred, the serve job resolves and checks the policy before Ray loads.
    import ray
    from ray import serve

    owns_ray = not ray.is_initialized()
    timings = {"ray_start_s": init_ray(ray_cfg, num_cpus) if owns_ray else 0.0}
    session: ServeSession | None = None
    try:
        t0 = time.perf_counter()
        port = running_http_port() or http_port or free_port()
        serve.start(http_options={"host": LOOPBACK, "port": port})
        timings["serve_start_s"] = time.perf_counter() - t0
        session = ServeSession(port, owns_ray, start_s=timings)
        yield session
    finally:
        if session is not None and not owns_ray:
            for name in session.apps:
                serve.delete(name)
        if owns_ray:
            serve.shutdown()
            ray.shutdown()


def running_http_port() -> int | None:
    """The HTTP port of a Serve already running in this Ray cluster; None when none runs."""
    # Ray Serve: deferred, as in serve_session.
    from ray.serve.context import _get_global_client

    client = _get_global_client(raise_if_no_controller_running=False)
    return int(client.http_config.port) if client is not None else None


def deploy(session: ServeSession, target: str, app: Any) -> Any:
    """Run ``app`` as this job's application ``target``; returns its handle once it is ready."""
    # Ray Serve: deferred, as in serve_session.
    from ray import serve

    name = session.app_name(target)
    route = f"/{name}"
    t0 = time.perf_counter()
    handle = serve.run(app, name=name, route_prefix=route)
    session.apps[name] = route
    session.start_s[f"deploy_{target}_s"] = time.perf_counter() - t0
    return handle


def replica_actor_names(session: ServeSession, target: str) -> list[str]:
    """Ray actor names of the running replicas of application ``target``."""
    # Ray: deferred, as in serve_session.
    import ray
    from ray.serve._private.constants import SERVE_NAMESPACE

    prefix = f"SERVE_REPLICA::{session.app_name(target)}#"
    actors = ray.util.list_named_actors(all_namespaces=True)
    return sorted(
        a["name"]
        for a in actors
        if a["namespace"] == SERVE_NAMESPACE and a["name"].startswith(prefix)
    )


def kill_replica(session: ServeSession, target: str) -> str | None:
    """Kill one replica of ``target`` (no restart: Serve's controller starts a new one)."""
    # Ray: deferred, as in serve_session.
    import ray
    from ray.serve._private.constants import SERVE_NAMESPACE

    names = replica_actor_names(session, target)
    if not names:
        return None
    ray.kill(ray.get_actor(names[0], namespace=SERVE_NAMESPACE), no_restart=True)
    log.warning("killed replica %s", names[0])
    return names[0]


def serve_process_ids() -> dict[int, str]:
    """Serve's processes of the Ray node this process started: pid -> process title.

    Only descendants of this node's raylet count (other Ray instances on the
    machine are not ours).
    """
    # Ray: deferred, as in serve_session.
    import psutil
    import ray

    node = getattr(ray._private.worker, "_global_node", None)
    raylet = getattr(node, "all_processes", {}).get("raylet") if node is not None else None
    roots = [info.process.pid for info in raylet or [] if info.process is not None]
    found: dict[int, str] = {}
    for root in roots:
        try:
            children = psutil.Process(root).children(recursive=True)
        except psutil.Error:
            continue
        for proc in children:
            try:
                title = " ".join(proc.cmdline())
            except psutil.Error:
                continue
            if title.startswith(SERVE_PROCESS_TITLES):
                # Ray appends the running method: "ray::ProxyActor.receive_asgi_messages".
                found[proc.pid] = title.split()[0].split(".")[0]
    return found


def listening_sockets(pids: dict[int, str]) -> list[dict[str, Any]]:
    """The listening TCP sockets of ``pids`` (from the machine's socket table)."""
    import ipaddress

    import psutil

    out = []
    for conn in psutil.net_connections(kind="inet"):
        if conn.status != psutil.CONN_LISTEN or conn.pid not in pids or not conn.laddr:
            continue
        addr = ipaddress.ip_address(conn.laddr.ip.split("%")[0])
        mapped = getattr(addr, "ipv4_mapped", None)
        loopback = (mapped or addr).is_loopback
        out.append(
            {
                "process": pids[conn.pid],
                "pid": conn.pid,
                "ip": conn.laddr.ip,
                "port": conn.laddr.port,
                "loopback": bool(loopback),
            }  # fmt: skip
        )
    return sorted(out, key=lambda x: (x["process"], x["pid"], x["port"]))
