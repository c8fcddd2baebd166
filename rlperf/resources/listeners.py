"""Which TCP ports the processes of a Ray that rlperf started listen on, and where.

rlperf starts Ray on 127.0.0.1 only (:func:`rlperf.resources.ray_session.init_ray`,
docs/configuration.md#network-exposure). :func:`ray_listeners` reads the
machine's socket table for the processes of the running Ray node (the driver,
GCS, raylet, agents and every worker they started) so that a run can check it
and log what would be reachable from the network. A stage that starts more
servers (a Ray Serve proxy, replicas) passes their pids to :func:`listeners`.
"""

from __future__ import annotations

import ipaddress
import os
from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class Listener:
    """One listening TCP socket: the process that holds it and the address it is bound to."""

    pid: int
    name: str
    ip: str
    port: int

    @property
    def loopback(self) -> bool:
        """Bound to a loopback address (IPv4-mapped ``::ffff:127.0.0.1`` included)."""
        return is_loopback(self.ip)

    def __str__(self) -> str:
        return f"{self.name}[{self.pid}] on {self.ip}:{self.port}"


def is_loopback(ip: str) -> bool:
    """Whether ``ip`` is a loopback address; the wildcards (``0.0.0.0``, ``::``) are not."""
    addr = ipaddress.ip_address(ip.split("%")[0])
    if isinstance(addr, ipaddress.IPv6Address) and addr.ipv4_mapped is not None:
        return addr.ipv4_mapped.is_loopback
    return addr.is_loopback


def listeners(pids: Iterable[int]) -> list[Listener]:
    """The listening TCP sockets (IPv4 and IPv6) held by ``pids``."""
    import psutil

    wanted = set(pids)
    found = []
    for conn in psutil.net_connections(kind="inet"):
        if conn.status != psutil.CONN_LISTEN or conn.pid not in wanted or not conn.laddr:
            continue
        try:
            name = psutil.Process(conn.pid).name()
        except psutil.Error:
            name = "?"
        found.append(Listener(conn.pid, name, conn.laddr.ip, conn.laddr.port))
    return sorted(found, key=lambda x: (x.name, x.pid, x.port))


def ray_process_ids() -> set[int]:
    """This process and the processes of the Ray node it started, with their descendants.

    Empty when this process started no Ray node (it joined a cluster, or Ray is off).
    """
    # Ray: deferred, rlperf.job_wrapper imports this module (through ray_session) before any
    # Ray starts.
    import psutil
    import ray

    node = getattr(ray._private.worker, "_global_node", None)
    if node is None or not getattr(node, "all_processes", None):
        return set()
    roots = {os.getpid()}
    for infos in node.all_processes.values():
        roots.update(info.process.pid for info in infos if info.process is not None)
    pids = set(roots)
    for pid in roots:
        try:
            pids.update(child.pid for child in psutil.Process(pid).children(recursive=True))
        except psutil.Error:
            continue
    return pids


def ray_listeners() -> list[Listener]:
    """:func:`listeners` of :func:`ray_process_ids`."""
    return listeners(ray_process_ids())
