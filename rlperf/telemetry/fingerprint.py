"""The run fingerprint: what machine, mask, GPUs, libraries and code a result came from.

Written as ``fingerprint.json`` at job start (see ``docs/results.md``). Every value
is read cheaply and without importing the heavy libraries it reports on (library
versions come from ``importlib.metadata``), so collecting it neither slows the job
nor changes what it measures.
"""

from __future__ import annotations

import json
import math
import os
import platform
import socket
import subprocess
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

import psutil

from rlperf.telemetry.nvml import NvmlSession, nvml_unavailable_reason, open_nvml

MIB = 2**20

#: Distributions whose versions go into ``fingerprint["libraries"]``.
FINGERPRINT_LIBRARIES: tuple[str, ...] = (
    "ray",
    "torch",
    "tensorflow",
    "gymnasium",
    "ale-py",
    "hydra-core",
    "omegaconf",
    "numpy",
    "ai-edge-litert",
    "rlperf",
    "psutil",
    "nvidia-ml-py",
)

#: Coral USB Accelerator ids: before its firmware is loaded it enumerates as
#: Global Unichip 1a6e:089a, afterwards as Google 18d1:9302. Matching the full
#: pairs (not the vendor alone) avoids counting e.g. an Android phone (18d1:*).
CORAL_USB_IDS: frozenset[tuple[str, str]] = frozenset({("1a6e", "089a"), ("18d1", "9302")})

# The package folder is rlperf/; its parent is a checkout's root (or site-packages).
_PACKAGE_DIR = Path(__file__).resolve().parent.parent


# ------------------------------------------------------------------------ pieces


def parse_cpu_model(cpuinfo: str) -> str | None:
    """The first ``model name`` (x86) or ``Model`` / ``Hardware`` (ARM) in /proc/cpuinfo."""
    for key in ("model name", "Model", "Hardware"):
        for line in cpuinfo.splitlines():
            name, sep, value = line.partition(":")
            if sep and name.strip() == key and value.strip():
                return value.strip()
    return None


def cpu_model(cpuinfo_path: Path = Path("/proc/cpuinfo")) -> str:
    """CPU model name from /proc/cpuinfo, falling back to ``platform.processor()``."""
    try:
        model = parse_cpu_model(cpuinfo_path.read_text(encoding="utf-8", errors="replace"))
    except OSError:
        model = None
    return model or platform.processor() or platform.machine()


def compact_ranges(cpus: Iterable[int]) -> str:
    """Format CPU ids like ``taskset -c`` does: ``[0..8, 12]`` -> ``"0-8,12"``."""
    ids = sorted(set(cpus))
    parts: list[str] = []
    k = 0
    while k < len(ids):
        j = k
        while j + 1 < len(ids) and ids[j + 1] == ids[j] + 1:
            j += 1
        parts.append(str(ids[k]) if j == k else f"{ids[k]}-{ids[j]}")
        k = j + 1
    return ",".join(parts)


def cpu_affinity() -> list[int] | None:
    """Sorted CPU ids this process may run on (``os.sched_getaffinity(0)``); None off Linux."""
    getaffinity = getattr(os, "sched_getaffinity", None)
    if getaffinity is None:
        return None
    return sorted(getaffinity(0))


def cgroup_cpu_limit(cpu_max_path: Path = Path("/sys/fs/cgroup/cpu.max")) -> float | None:
    """CPUs allowed by a cgroup-v2 CPU quota (e.g. a container's ``--cpus``); None if unlimited.

    A quota limits CPU *time*, not which CPUs are used, so the affinity mask alone
    does not show it.
    """
    try:
        quota, _, period = cpu_max_path.read_text(encoding="utf-8").strip().partition(" ")
    except OSError:
        return None
    if quota == "max" or not period:
        return None
    try:
        return int(quota) / int(period)
    except ValueError:
        return None


def detect_edgetpu(
    dev_root: Path = Path("/dev"), usb_sysfs: Path = Path("/sys/bus/usb/devices")
) -> dict[str, Any]:
    """Whether a Coral Edge TPU is attached, and how that was decided.

    Cheap checks only (no runtime library is loaded): a PCIe / M.2 Edge TPU shows
    up as ``/dev/apex_<n>`` (gasket/apex driver); a USB Accelerator as a USB device
    with one of :data:`CORAL_USB_IDS` in sysfs. Returns ``{"present": bool,
    "reason": str}``.
    """
    apex = sorted(dev_root.glob("apex_*"))
    if apex:
        return {
            "present": True,
            "reason": f"PCIe/M.2 Edge TPU: {', '.join(str(p) for p in apex)} exists",
        }
    found: list[str] = []
    try:
        entries = sorted(usb_sysfs.iterdir())
    except OSError:
        entries = []
    for entry in entries:
        try:
            vendor = (entry / "idVendor").read_text(encoding="ascii").strip().lower()
            product = (entry / "idProduct").read_text(encoding="ascii").strip().lower()
        except OSError:
            continue  # interfaces and hubs without ids
        if (vendor, product) in CORAL_USB_IDS:
            found.append(f"{vendor}:{product} at {entry}")
    if found:
        return {"present": True, "reason": "USB Edge TPU: " + "; ".join(found)}
    return {
        "present": False,
        "reason": (
            f"no {dev_root}/apex_* device and no USB device with id "
            f"{' or '.join(sorted(f'{v}:{p}' for v, p in CORAL_USB_IDS))} in {usb_sysfs}"
        ),
    }


def library_versions(names: Iterable[str] = FINGERPRINT_LIBRARIES) -> dict[str, str | None]:
    """Installed versions from package metadata (``None`` if not installed); imports nothing."""
    versions: dict[str, str | None] = {}
    for name in names:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    return versions


def _git(args: list[str], cwd: Path) -> str | None:
    try:
        done = subprocess.run(
            ["git", *args],
            cwd=cwd,
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def git_revision(root: Path = _PACKAGE_DIR.parent) -> tuple[str | None, bool | None]:
    """``(commit, dirty)`` of the git checkout whose top level is ``root``.

    ``(None, None)`` if ``root`` is not the top of a work tree with a commit: an
    installed wheel lives in ``site-packages``, which is not a checkout's top even
    when the virtualenv sits inside one. ``dirty`` ignores untracked files.
    """
    top = _git(["rev-parse", "--show-toplevel"], root)
    if top is None or Path(top).resolve() != root.resolve():
        return None, None
    commit = _git(["rev-parse", "HEAD"], root)
    if commit is None:
        return None, None
    status = _git(["status", "--porcelain", "--untracked-files=no"], root)
    return commit, (None if status is None else bool(status))


def to_jsonable(value: Any) -> Any:
    """Turn a (possibly OmegaConf) config tree into plain JSON types.

    OmegaConf containers are resolved (interpolations replaced); mappings become
    dicts with string keys, tuples / sets lists, non-finite floats ``None`` (JSON
    has no NaN) and other objects their ``str()``.
    """
    if type(value).__module__.startswith("omegaconf"):
        from omegaconf import OmegaConf  # light, and only when given an OmegaConf object

        value = OmegaConf.to_container(value, resolve=True)
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, Mapping):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [to_jsonable(v) for v in value]
    if isinstance(value, Path):
        return str(value)
    return str(value)


def _gpu_fingerprint(
    nvml: NvmlSession | None, pynvml_module: Any | None
) -> tuple[list[dict[str, Any]], str | None, str | None]:
    """``(gpus, driver, reason_if_none)`` from ``nvml`` or a session opened here."""
    owned = False
    if nvml is None:
        nvml = open_nvml(pynvml_module)
        if nvml is None:
            return [], None, nvml_unavailable_reason()
        owned = True
    try:
        gpus = [info.as_dict() for info in nvml.devices()]
        driver = nvml.driver_version()
    finally:
        if owned:
            nvml.close()
    return gpus, driver, (None if gpus else "NVML is available but reports no GPU")


# ---------------------------------------------------------------------- assembly


def collect_fingerprint(
    resolved_config: Mapping[str, Any] | None = None,
    nvml: NvmlSession | None = None,
    *,
    pynvml_module: Any | None = None,
) -> dict[str, Any]:
    """Describe the machine, process and code a run executes on (JSON-serialisable).

    Args:
        resolved_config: the job's fully resolved config (plain mapping or OmegaConf
            ``DictConfig``; stored under ``"config"``).
        nvml: an open :class:`NvmlSession` to query; ``None`` opens (and closes) one.
        pynvml_module: module to open NVML with when ``nvml`` is ``None`` (tests).

    Keys: ``start_time`` (ISO 8601, UTC), ``hostname``, ``platform``, ``python``,
    ``cpu_model``, ``cpu_count_logical``, ``cpu_count_physical``, ``affinity``,
    ``affinity_str``, ``cgroup_cpu_limit``, ``ram_total_mb``, ``gpus`` (list of
    ``{index, name, memory_total_mb, uuid}``, NVML indices), ``gpu_driver``,
    ``nvml_unavailable_reason`` (None when NVML works), ``cuda_visible_devices``,
    ``edgetpu`` (``{present, reason}``), ``libraries``, ``rlperf_git_commit``,
    ``rlperf_git_dirty``, ``config_search_path`` (Hydra's config sources in
    order, e.g. a user's ``./conf`` before ``pkg://rlperf.conf``; empty outside a
    Hydra run), ``config``.
    """
    start_time = datetime.now(UTC).isoformat()
    affinity = cpu_affinity()
    gpus, driver, gpu_reason = _gpu_fingerprint(nvml, pynvml_module)
    commit, dirty = git_revision()
    fingerprint = {
        "start_time": start_time,
        "hostname": socket.gethostname(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "cpu_model": cpu_model(),
        "cpu_count_logical": psutil.cpu_count(logical=True),
        "cpu_count_physical": psutil.cpu_count(logical=False),
        "affinity": affinity,
        "affinity_str": None if affinity is None else compact_ranges(affinity),
        "cgroup_cpu_limit": cgroup_cpu_limit(),
        "ram_total_mb": psutil.virtual_memory().total / MIB,
        "gpus": gpus,
        "gpu_driver": driver,
        "nvml_unavailable_reason": gpu_reason,
        "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
        "edgetpu": detect_edgetpu(),
        "libraries": library_versions(),
        "rlperf_git_commit": commit,
        "rlperf_git_dirty": dirty,
        "config_search_path": config_search_path(),
        "config": resolved_config,
    }
    return to_jsonable(fingerprint)  # type: ignore[no-any-return]


def config_search_path() -> list[dict[str, str]]:
    """Hydra's config sources of this run, in search order (``[]`` outside a Hydra run)."""
    try:
        from hydra.core.hydra_config import HydraConfig

        if not HydraConfig.initialized():
            return []
        sources = HydraConfig.get().runtime.config_sources
    except Exception:  # no Hydra app around this call
        return []
    return [{"provider": str(s.provider), "path": f"{s.schema}://{s.path}"} for s in sources]


def write_fingerprint(path: Path | str, fp: Mapping[str, Any]) -> Path:
    """Write ``fp`` as indented JSON to ``path`` (atomically: temp file + rename)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(to_jsonable(fp), indent=2) + "\n", encoding="utf-8")
    os.replace(tmp, path)
    return path
