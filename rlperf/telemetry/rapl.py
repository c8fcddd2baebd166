"""CPU energy from Linux powercap / RAPL counters, where the machine has them and lets us
read them.

Each top-level zone ``/sys/class/powercap/intel-rapl:N`` (a CPU package; AMD Zen's
packages appear in the same tree on recent kernels) has a cumulative counter
``energy_uj`` that wraps at ``max_energy_range_uj``. Only top-level zones count: a
subzone (``intel-rapl:0:0``, the cores or dram of package 0) is part of its package, and
summing both would count it twice; a top-level ``psys`` zone (the whole platform, on some
laptops) includes the packages and is left out for the same reason. Energy is a counter
difference over a window (:class:`Rapl` unwraps), never an estimate from TDP.

Since Linux 5.10 ``energy_uj`` is readable by root only (CVE-2020-8694), so "permission
denied" is an ordinary case: :func:`open_rapl` then says how to grant access, and every
energy column says it was not measured.
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

#: Where the kernel exposes powercap zones.
POWERCAP = Path("/sys/class/powercap")

#: A top-level RAPL zone's folder name (``intel-rapl:0``; not ``intel-rapl:0:0``).
_TOP_LEVEL = re.compile(r"^intel-rapl:\d+$")

#: Top-level zones that contain the packages (summing them would double-count).
_CONTAINING = frozenset({"psys"})

#: Seconds without any change of a zone's counter after which it is taken as stopped
#: (a CPU package draws power whenever it is on: a still counter is a broken read).
STALL_S = 10.0

#: How to let a user read the counters (the kernel's default since 5.10 is root only).
GRANT = "sudo chmod a+r /sys/class/powercap/intel-rapl:*/energy_uj"


@dataclass(frozen=True)
class Zone:
    """One top-level RAPL zone: its ``name`` (``package-0``), folder and wrap range (µJ)."""

    name: str
    path: Path
    max_uj: int


def _read_int(path: Path) -> int:
    return int(path.read_text().strip())


def zones(root: Path = POWERCAP) -> list[Zone]:
    """The top-level package zones under ``root``, in folder order (none: an empty list)."""
    if not root.is_dir():
        return []
    found = []
    for folder in sorted(root.iterdir(), key=lambda p: p.name):
        if not _TOP_LEVEL.match(folder.name) or not (folder / "energy_uj").exists():
            continue
        name_file = folder / "name"
        name = name_file.read_text().strip() if name_file.exists() else folder.name
        if name in _CONTAINING:
            continue
        found.append(Zone(name, folder, _read_int(folder / "max_energy_range_uj")))
    return found


class Rapl:
    """The summed energy of top-level RAPL zones since the first read, in joules.

    :meth:`read_j` reads every zone's counter, adds ``max_energy_range_uj`` where it
    wrapped, and returns the total since the first read. A zone whose counter has not
    moved for :data:`STALL_S` stops the measurement: :attr:`failed` says why, and every
    read after it is NaN (energy that stopped being counted is not zero energy).
    """

    def __init__(self, found: list[Zone], clock: Callable[[], float] = time.monotonic) -> None:
        if not found:
            raise ValueError("Rapl needs at least one zone")
        self.zones = found
        self._clock = clock
        self._last: dict[str, int] = {}
        self._moved: dict[str, float] = {}
        self._total_uj = 0
        self.failed: str | None = None

    def read_j(self) -> float:
        """Joules counted by every zone since the first read (NaN once a zone stopped)."""
        if self.failed is not None:
            return math.nan
        now = self._clock()
        for zone in self.zones:
            raw = _read_int(zone.path / "energy_uj")
            last = self._last.get(zone.name)
            if last is None or raw != last:
                self._moved[zone.name] = now
            if last is not None:
                self._total_uj += raw - last if raw >= last else raw + zone.max_uj - last
            self._last[zone.name] = raw
            if now - self._moved[zone.name] > STALL_S:
                self.failed = (f"the RAPL counter of {zone.name} ({zone.path.name}) stopped "
                               f"at {raw} µJ for {now - self._moved[zone.name]:.0f} s")  # fmt: skip
                return math.nan
        return self._total_uj / 1e6


def open_rapl(root: Path = POWERCAP) -> tuple[Rapl | None, str | None]:
    """(the counters, None) where the machine has readable RAPL zones; else (None, why:
    no zone, or a counter only root may read, with the command that grants access)."""
    try:
        found = zones(root)
    except OSError as exc:
        return None, f"the RAPL zones under {root} could not be listed: {exc}"
    if not found:
        return None, (f"no RAPL counter: {root} has no intel-rapl package zone (a VM, "
                      "or a CPU or kernel without powercap RAPL)")  # fmt: skip
    rapl = Rapl(found)
    try:
        rapl.read_j()
    except PermissionError:
        return None, (f"{found[0].path / 'energy_uj'} is readable by root only (Linux 5.10 "
                      f"and later); run as root, or grant read access: {GRANT}")  # fmt: skip
    except (OSError, ValueError) as exc:
        return None, f"the RAPL counter {found[0].path / 'energy_uj'} could not be read: {exc}"
    return rapl, None
