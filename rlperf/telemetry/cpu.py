"""CPU and memory readers: exact CPU utilisation over an interval, process-tree RSS.

Read by the background sampler (:mod:`rlperf.telemetry.sampler`) for every
sample, and by the training loop for each iteration (:class:`CpuWindow`), which
needs the exact interval rather than the samples that fall into it. psutil only.
"""

from __future__ import annotations

import math
from typing import Any

import psutil

from rlperf.telemetry.window import StartStop

NAN = math.nan
MIB = 2**20


def cpu_util_between(before: Any, after: Any) -> float:
    """System-wide CPU utilisation in % between two ``psutil.cpu_times()`` readings.

    Same formula as ``psutil.cpu_percent``: busy = total - idle - iowait, where on
    Linux total excludes guest time (already counted in user/nice). Returns 0.0 if
    no CPU time elapsed, and is clamped to [0, 100].
    """
    deltas = {f: max(0.0, getattr(after, f) - getattr(before, f)) for f in after._fields}
    total = sum(deltas.values()) - deltas.get("guest", 0.0) - deltas.get("guest_nice", 0.0)
    busy = total - deltas.get("idle", 0.0) - deltas.get("iowait", 0.0)
    if total <= 0:
        return 0.0
    return min(100.0, max(0.0, 100.0 * busy / total))


class CpuWindow(StartStop):
    """Exact system-wide CPU utilisation over an interval (e.g. one training iteration).

    It reads the kernel's cumulative CPU-time counters (``psutil.cpu_times()``) at
    :meth:`start` and :meth:`stop`, so the value covers exactly that interval rather
    than whatever telemetry samples happen to fall into it. The counters tick in
    jiffies (usually 10 ms per CPU), so intervals much shorter than ~0.1 s are coarse.

    Usage::

        cpu = CpuWindow().start()
        algo.train()
        row["cpu_util_pct"] = cpu.stop()
        row["ram_util_pct"] = cpu.ram_util_pct

    After :meth:`stop`: ``cpu_util_pct`` (%, all CPUs of the machine) and
    ``ram_util_pct`` (% of system RAM in use at the moment of ``stop``).
    """

    def __init__(self) -> None:
        self._before: Any | None = None
        self.cpu_util_pct: float = NAN
        self.ram_util_pct: float = NAN

    def start(self) -> CpuWindow:
        """Read the CPU-time counters; returns ``self`` for chaining."""
        self._before = psutil.cpu_times()
        self.cpu_util_pct = NAN
        self.ram_util_pct = NAN
        return self

    def stop(self) -> float:
        """Read the counters again; return (and store) the CPU utilisation in %."""
        if self._before is None:
            raise RuntimeError("CpuWindow.stop() called before start()")
        after = psutil.cpu_times()
        self.cpu_util_pct = cpu_util_between(self._before, after)
        self.ram_util_pct = float(psutil.virtual_memory().percent)
        self._before = None
        return self.cpu_util_pct


def process_tree_rss_mb(proc: psutil.Process) -> float:
    """RSS of ``proc`` plus all its descendants, in MiB (NaN if ``proc`` is gone).

    Shared pages (e.g. Ray's object store mapped by several processes) are counted
    once per process that touched them, so this is an upper bound of real usage.
    """
    try:
        total = proc.memory_info().rss
        children = proc.children(recursive=True)
    except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
        return NAN
    for child in children:
        try:
            total += child.memory_info().rss
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue  # exited or not ours between listing and reading
    return total / MIB
