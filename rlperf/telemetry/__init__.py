"""Telemetry: background CPU / RAM / GPU sampling, per-iteration windows, run fingerprint.

Importing this package is cheap (psutil only); ``pynvml`` is imported when an NVML
session is opened, and Ray / torch / TensorFlow never are. See ``docs/telemetry.md``.
"""

from __future__ import annotations

from rlperf.errors import NvmlUnavailableError
from rlperf.telemetry.cpu import CpuWindow
from rlperf.telemetry.fingerprint import (
    FINGERPRINT_LIBRARIES,
    collect_fingerprint,
    compact_ranges,
    detect_edgetpu,
    git_revision,
    library_versions,
    write_fingerprint,
)
from rlperf.telemetry.nvml import GpuInfo, NvmlSession, nvml_unavailable_reason, open_nvml
from rlperf.telemetry.sampler import (
    GPU_METRICS,
    SYSTEM_COLUMNS,
    TelemetrySampler,
    gpu_columns,
    telemetry_columns,
)

__all__ = [
    "FINGERPRINT_LIBRARIES",
    "GPU_METRICS",
    "SYSTEM_COLUMNS",
    "CpuWindow",
    "GpuInfo",
    "NvmlSession",
    "NvmlUnavailableError",
    "TelemetrySampler",
    "collect_fingerprint",
    "compact_ranges",
    "detect_edgetpu",
    "git_revision",
    "gpu_columns",
    "library_versions",
    "nvml_unavailable_reason",
    "open_nvml",
    "telemetry_columns",
    "write_fingerprint",
]
