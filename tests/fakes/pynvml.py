"""A fake of the ``pynvml`` API (nvidia-ml-py) for tests, at the exact call boundary.

``FakePynvml`` provides the functions rlperf's NVML wrapper calls, with the same
names, argument shapes, return types and error classes as the real module. GPU
values are plain attributes of :class:`FakeGpu`, so a test changes them while a
sampler runs and checks what ends up in the CSV. (The camelCase names are
pynvml's own.)
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

NVML_ERROR_NOT_SUPPORTED = 3
NVML_ERROR_NO_PERMISSION = 4
NVML_ERROR_INVALID_ARGUMENT = 2
NVML_ERROR_DRIVER_NOT_LOADED = 9
NVML_ERROR_LIBRARY_NOT_FOUND = 12
NVML_ERROR_UNINITIALIZED = 1


class NVMLError(Exception):
    """Base class, like ``pynvml.NVMLError`` (carries ``value``, the NVML return code)."""

    def __init__(self, value: int = 999, msg: str = "Unknown Error") -> None:
        super().__init__(msg)
        self.value = value


class NVMLError_NotSupported(NVMLError):
    def __init__(self) -> None:
        super().__init__(NVML_ERROR_NOT_SUPPORTED, "Not Supported")


class NVMLError_NoPermission(NVMLError):
    def __init__(self) -> None:
        super().__init__(NVML_ERROR_NO_PERMISSION, "Insufficient Permissions")


class NVMLError_InvalidArgument(NVMLError):
    def __init__(self) -> None:
        super().__init__(NVML_ERROR_INVALID_ARGUMENT, "Invalid Argument")


class NVMLError_DriverNotLoaded(NVMLError):
    def __init__(self) -> None:
        super().__init__(NVML_ERROR_DRIVER_NOT_LOADED, "Driver Not Loaded")


class NVMLError_LibraryNotFound(NVMLError):
    def __init__(self) -> None:
        super().__init__(NVML_ERROR_LIBRARY_NOT_FOUND, "NVML Shared Library Not Found")


class NVMLError_Uninitialized(NVMLError):
    def __init__(self) -> None:
        super().__init__(NVML_ERROR_UNINITIALIZED, "Uninitialized")


@dataclass
class FakeGpu:
    """One fake GPU. ``energy_mj=None`` means the card has no energy counter.

    ``energy_rate_w`` (if set) makes the energy counter grow linearly with
    ``time.monotonic()`` at that many watts, on top of ``energy_mj``.
    ``fail`` names API functions that raise ``NVMLError_NoPermission`` on this GPU.
    """

    name: str = "NVIDIA Fake A100"
    uuid: str = "GPU-00000000-0000-0000-0000-000000000000"
    memory_total_mb: float = 40960.0
    util_pct: int = 0
    mem_util_pct: int = 0
    mem_used_mb: float = 0.0
    power_w: float = 50.0
    energy_mj: int | None = 0
    energy_rate_w: float | None = None
    fail: set[str] = field(default_factory=set)
    _t_ref: float = field(default_factory=time.monotonic)

    def energy_now_mj(self) -> int:
        assert self.energy_mj is not None
        if self.energy_rate_w is None:
            return self.energy_mj
        return self.energy_mj + int(self.energy_rate_w * (time.monotonic() - self._t_ref) * 1000)


class FakePynvml:
    """Module-like fake of ``pynvml``; pass it as ``pynvml_module``.

    Args:
        gpus: the GPUs NVML "sees", index = position.
        init_error: exception class ``nvmlInit`` raises (e.g. ``NVMLError_DriverNotLoaded``
            or ``OSError``) to simulate a machine without a usable driver.
        driver_version: returned by ``nvmlSystemGetDriverVersion``.
    """

    NVMLError = NVMLError
    NVMLError_NotSupported = NVMLError_NotSupported
    NVMLError_NoPermission = NVMLError_NoPermission
    NVMLError_InvalidArgument = NVMLError_InvalidArgument
    NVMLError_DriverNotLoaded = NVMLError_DriverNotLoaded
    NVMLError_LibraryNotFound = NVMLError_LibraryNotFound
    NVMLError_Uninitialized = NVMLError_Uninitialized

    def __init__(
        self,
        gpus: list[FakeGpu] | None = None,
        init_error: type[BaseException] | None = None,
        driver_version: str = "550.54.15",
    ) -> None:
        self.gpus = list(gpus or [])
        self.init_error = init_error
        self.driver_version = driver_version
        self.init_count = 0
        self.shutdown_count = 0
        self.calls: list[str] = []
        self._lock = threading.Lock()

    # -- helpers -------------------------------------------------------------------

    def _gpu(self, handle: Any, fn: str) -> FakeGpu:
        with self._lock:
            self.calls.append(fn)
        if self.init_count <= self.shutdown_count:
            raise NVMLError_Uninitialized()
        gpu: FakeGpu = handle.gpu
        if fn in gpu.fail:
            raise NVMLError_NoPermission()
        return gpu

    @property
    def initialised(self) -> bool:
        return self.init_count > self.shutdown_count

    # -- the pynvml API --------------------------------------------------------------

    def nvmlInit(self) -> None:
        if self.init_error is not None:
            raise self.init_error()
        self.init_count += 1

    def nvmlShutdown(self) -> None:
        if not self.initialised:
            raise NVMLError_Uninitialized()
        self.shutdown_count += 1

    def nvmlDeviceGetCount(self) -> int:
        if not self.initialised:
            raise NVMLError_Uninitialized()
        return len(self.gpus)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> Any:
        if not self.initialised:
            raise NVMLError_Uninitialized()
        if not 0 <= index < len(self.gpus):
            raise NVMLError_InvalidArgument()
        return SimpleNamespace(index=index, gpu=self.gpus[index])

    def nvmlSystemGetDriverVersion(self) -> str:
        if not self.initialised:
            raise NVMLError_Uninitialized()
        return self.driver_version

    def nvmlDeviceGetName(self, handle: Any) -> str:
        return self._gpu(handle, "nvmlDeviceGetName").name

    def nvmlDeviceGetUUID(self, handle: Any) -> str:
        return self._gpu(handle, "nvmlDeviceGetUUID").uuid

    def nvmlDeviceGetUtilizationRates(self, handle: Any) -> Any:
        gpu = self._gpu(handle, "nvmlDeviceGetUtilizationRates")
        return SimpleNamespace(gpu=gpu.util_pct, memory=gpu.mem_util_pct)

    def nvmlDeviceGetMemoryInfo(self, handle: Any) -> Any:
        gpu = self._gpu(handle, "nvmlDeviceGetMemoryInfo")
        total = int(gpu.memory_total_mb * 2**20)
        used = int(gpu.mem_used_mb * 2**20)
        return SimpleNamespace(total=total, used=used, free=total - used)

    def nvmlDeviceGetPowerUsage(self, handle: Any) -> int:
        return int(round(self._gpu(handle, "nvmlDeviceGetPowerUsage").power_w * 1000))

    def nvmlDeviceGetTotalEnergyConsumption(self, handle: Any) -> int:
        gpu = self._gpu(handle, "nvmlDeviceGetTotalEnergyConsumption")
        if gpu.energy_mj is None:
            raise NVMLError_NotSupported()
        return gpu.energy_now_mj()
