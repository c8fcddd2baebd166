"""Thin, fault-tolerant wrapper over NVML (the ``pynvml`` module of ``nvidia-ml-py``).

Everything GPU-related in rlperf's telemetry goes through :class:`NvmlSession`, so
that the rest of the code never touches ``pynvml`` directly and tests can inject a
fake module at exactly this boundary (``NvmlSession(pynvml_module=fake)``).

Rules this module follows:

* Device indices are NVML indices, i.e. physical GPU indices as ``nvidia-smi``
  numbers them. They ignore ``CUDA_VISIBLE_DEVICES`` (which renumbers devices for
  CUDA only).
* A missing library, missing driver or failing ``nvmlInit`` is not an error for a
  benchmark run: :func:`open_nvml` returns ``None`` and remembers why
  (:func:`nvml_unavailable_reason`).
* A failing per-field query (``NVMLError_NotSupported`` for the energy counter on
  consumer cards, ``NoPermission``, a lost GPU, ...) turns into ``NaN`` for that
  field only; reads never raise.
"""

from __future__ import annotations

import importlib
import logging
import math
import threading
from dataclasses import asdict, dataclass
from typing import Any

from rlperf.errors import NvmlUnavailableError
from rlperf.telemetry.window import StartStop

log = logging.getLogger(__name__)

NAN = math.nan
MIB = 2**20

#: Keys of the dictionary returned by :meth:`NvmlSession.read`, with their units.
READ_FIELDS: tuple[str, ...] = (
    "util_pct",  # % of time a kernel ran (nvmlDeviceGetUtilizationRates().gpu)
    "mem_util_pct",  # % of time device memory was read/written (...().memory)
    "mem_used_mb",  # MiB in use (nvmlDeviceGetMemoryInfo().used / 2**20)
    "power_w",  # board power (nvmlDeviceGetPowerUsage, mW / 1000)
    "energy_mj_total",  # energy counter since driver load, mJ (NaN if unsupported)
)

_reason_lock = threading.Lock()
_unavailable_reason: str | None = None


@dataclass(frozen=True)
class GpuInfo:
    """Static description of one GPU as NVML reports it."""

    index: int
    name: str
    memory_total_mb: float
    uuid: str

    def as_dict(self) -> dict[str, Any]:
        """Return a JSON-serialisable dict (``index, name, memory_total_mb, uuid``)."""
        return asdict(self)


def nvml_unavailable_reason() -> str | None:
    """Why the most recent :func:`open_nvml` call returned ``None``.

    ``None`` if the most recent call succeeded (or none was made yet).
    """
    with _reason_lock:
        return _unavailable_reason


def _set_reason(reason: str | None) -> None:
    global _unavailable_reason
    with _reason_lock:
        _unavailable_reason = reason


def _to_str(value: Any) -> str:
    # Older nvidia-ml-py versions return bytes for names / UUIDs / versions.
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    return str(value)


class NvmlSession(StartStop):
    """An initialised NVML library (``nvmlInit`` ... ``nvmlShutdown``).

    Use as a context manager, or call :meth:`open` / :meth:`close` explicitly::

        with NvmlSession() as nvml:
            print(nvml.device_count(), nvml.read(0))

    Args:
        pynvml_module: the object providing the ``pynvml`` API; ``None`` imports the
            real ``pynvml`` (from ``nvidia-ml-py``) when the session is opened. Tests
            pass a fake here.

    NVML is thread-safe, so one session may be read from the telemetry thread and
    the main thread at the same time.
    """

    def __init__(self, pynvml_module: Any | None = None) -> None:
        self._module: Any = pynvml_module
        self._open = False
        self._handles: dict[int, Any] = {}
        self._info: dict[int, GpuInfo] = {}
        self._lock = threading.Lock()

    # -- lifecycle -------------------------------------------------------------------

    @property
    def is_open(self) -> bool:
        """Whether ``nvmlInit`` succeeded and ``close`` was not called yet."""
        return self._open

    @property
    def module(self) -> Any:
        """The ``pynvml`` module in use (``None`` before :meth:`open` imported it)."""
        return self._module

    def open(self) -> NvmlSession:
        """Import ``pynvml`` if needed and call ``nvmlInit``.

        Raises:
            NvmlUnavailableError: the module cannot be imported, the shared library
                or the driver is missing, or ``nvmlInit`` fails for another reason.
        """
        if self._open:
            return self
        if self._module is None:
            try:
                self._module = importlib.import_module("pynvml")
            except ImportError as exc:
                raise NvmlUnavailableError(
                    f"pynvml (nvidia-ml-py) cannot be imported: {exc}"
                ) from exc
        nvml_error = getattr(self._module, "NVMLError", None)
        errors: tuple[type[BaseException], ...] = (OSError,)
        if isinstance(nvml_error, type) and issubclass(nvml_error, BaseException):
            errors = (nvml_error, OSError)
        try:
            self._module.nvmlInit()
        except errors as exc:
            raise NvmlUnavailableError(
                f"nvmlInit failed ({type(exc).__name__}: {exc}); "
                "no NVIDIA driver / libnvidia-ml.so.1 on this machine?"
            ) from exc
        self._open = True
        return self

    def close(self) -> None:
        """Call ``nvmlShutdown`` (idempotent; errors are logged, not raised)."""
        if not self._open:
            return
        self._open = False
        self._handles.clear()
        try:
            self._module.nvmlShutdown()
        except Exception as exc:  # shutdown must never fail a run
            log.debug("nvmlShutdown failed: %s", exc)

    # ``with NvmlSession() as nvml:`` opens and closes it (StartStop).
    def start(self) -> NvmlSession:
        return self.open()

    def stop(self) -> None:
        self.close()

    # -- helpers ---------------------------------------------------------------------

    def _require_open(self) -> None:
        if not self._open:
            raise RuntimeError("NvmlSession is not open; use `with NvmlSession() as nvml:`")

    @property
    def _error_type(self) -> type[BaseException]:
        err = getattr(self._module, "NVMLError", None)
        if isinstance(err, type) and issubclass(err, BaseException):
            return err
        return RuntimeError

    def _handle(self, index: int) -> Any:
        self._require_open()
        with self._lock:
            handle = self._handles.get(index)
            if handle is None:
                handle = self._module.nvmlDeviceGetHandleByIndex(index)
                self._handles[index] = handle
            return handle

    def _handle_or_none(self, index: int) -> Any:
        try:
            return self._handle(index)
        except self._error_type as exc:
            log.debug("nvmlDeviceGetHandleByIndex(%d) failed: %s", index, exc)
            return None

    def _call(self, fn_name: str, *args: Any) -> Any:
        """Call ``pynvml.<fn_name>(*args)``; return ``None`` on any NVMLError."""
        try:
            return getattr(self._module, fn_name)(*args)
        except self._error_type as exc:
            log.debug("%s failed: %s", fn_name, exc)
            return None

    # -- queries ---------------------------------------------------------------------

    def device_count(self) -> int:
        """Number of GPUs NVML sees (0 if the query fails)."""
        self._require_open()
        count = self._call("nvmlDeviceGetCount")
        return int(count) if count is not None else 0

    def driver_version(self) -> str | None:
        """The NVIDIA driver version string, or ``None`` if NVML cannot tell."""
        self._require_open()
        version = self._call("nvmlSystemGetDriverVersion")
        return None if version is None else _to_str(version)

    def info(self, index: int) -> GpuInfo:
        """Static information about GPU ``index`` (cached; failing fields are blank/NaN)."""
        cached = self._info.get(index)
        if cached is not None:
            return cached
        handle = self._handle_or_none(index)
        if handle is None:
            return GpuInfo(index=index, name="", memory_total_mb=NAN, uuid="")
        name = self._call("nvmlDeviceGetName", handle)
        uuid = self._call("nvmlDeviceGetUUID", handle)
        mem = self._call("nvmlDeviceGetMemoryInfo", handle)
        info = GpuInfo(
            index=index,
            name="" if name is None else _to_str(name),
            memory_total_mb=NAN if mem is None else float(mem.total) / MIB,
            uuid="" if uuid is None else _to_str(uuid),
        )
        self._info[index] = info
        return info

    def devices(self, indices: list[int] | None = None) -> list[GpuInfo]:
        """Static information for ``indices`` (NVML indices; ``None`` = every GPU).

        Raises:
            ValueError: an index is not a GPU NVML knows.
        """
        count = self.device_count()
        if indices is None:
            indices = list(range(count))
        bad = [i for i in indices if not 0 <= i < count]
        if bad:
            raise ValueError(
                f"GPU index {bad} out of range: NVML sees {count} GPU(s) "
                f"(valid NVML/physical indices: {list(range(count))})"
            )
        return [self.info(i) for i in indices]

    def energy_mj(self, index: int) -> float:
        """The total-energy counter of GPU ``index`` in mJ, NaN where unsupported."""
        handle = self._handle_or_none(index)
        if handle is None:
            return NAN
        value = self._call("nvmlDeviceGetTotalEnergyConsumption", handle)
        return NAN if value is None else float(value)

    def read(self, index: int) -> dict[str, float]:
        """One reading of the dynamic values of GPU ``index``.

        Returns a dict with the keys of :data:`READ_FIELDS`: ``util_pct``,
        ``mem_util_pct``, ``mem_used_mb`` (MiB), ``power_w`` and ``energy_mj_total``
        (the driver's cumulative counter, mJ). Any field whose NVML query fails is NaN.
        """
        handle = self._handle_or_none(index)
        if handle is None:
            return dict.fromkeys(READ_FIELDS, NAN)
        # The energy counter first: callers timestamp just before read().
        energy = self._call("nvmlDeviceGetTotalEnergyConsumption", handle)
        util = self._call("nvmlDeviceGetUtilizationRates", handle)
        mem = self._call("nvmlDeviceGetMemoryInfo", handle)
        power_mw = self._call("nvmlDeviceGetPowerUsage", handle)
        return {
            "util_pct": NAN if util is None else float(util.gpu),
            "mem_util_pct": NAN if util is None else float(util.memory),
            "mem_used_mb": NAN if mem is None else float(mem.used) / MIB,
            "power_w": NAN if power_mw is None else float(power_mw) / 1000.0,
            "energy_mj_total": NAN if energy is None else float(energy),
        }


def open_nvml(pynvml_module: Any | None = None) -> NvmlSession | None:
    """Open an :class:`NvmlSession`, or return ``None`` when NVML is unavailable.

    The reason for ``None`` (no ``pynvml``, no ``libnvidia-ml.so.1``, driver not
    loaded, ...) is available from :func:`nvml_unavailable_reason` afterwards. The
    caller owns the returned session and must :meth:`~NvmlSession.close` it.
    """
    session = NvmlSession(pynvml_module)
    try:
        session.open()
    except NvmlUnavailableError as exc:
        _set_reason(str(exc))
        log.info("GPU telemetry disabled: %s", exc)
        return None
    _set_reason(None)
    return session
