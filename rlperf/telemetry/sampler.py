"""Background CPU / RAM / GPU sampling into ``telemetry.csv``, and per-iteration windows.

:class:`TelemetrySampler` runs a daemon thread that takes one sample every
``interval_s`` seconds (config: ``telemetry.interval_s``) and appends it to
``telemetry.csv``, one flushed row per sample, so a crashed job keeps every row it
sampled. The training loop asks the same sampler for per-iteration GPU aggregates
with :meth:`TelemetrySampler.window`; CPU utilisation per iteration is measured
exactly with :class:`~rlperf.telemetry.cpu.CpuWindow` instead of from the samples.

No Ray / torch / TensorFlow import here: the sampler must be cheap to import and
must not perturb what it measures.
"""

from __future__ import annotations

import bisect
import csv
import logging
import math
import re
import threading
import time
from collections.abc import Iterable
from pathlib import Path
from typing import IO, Any

import psutil

from rlperf.results.columns import CPU_ENERGY_J, CPU_UTIL_PCT, RAM_UTIL_PCT, TIME_S
from rlperf.telemetry.cpu import MIB, cpu_util_between, process_tree_rss_mb
from rlperf.telemetry.nvml import NvmlSession, nvml_unavailable_reason, open_nvml
from rlperf.telemetry.rapl import POWERCAP, Rapl, open_rapl
from rlperf.telemetry.window import StartStop

log = logging.getLogger(__name__)

NAN = math.nan

#: Machine-wide columns of ``telemetry.csv``, in file order.
SYSTEM_COLUMNS: tuple[str, ...] = (
    TIME_S,
    CPU_UTIL_PCT,
    RAM_UTIL_PCT,
    "ram_used_mb",
    "proc_rss_mb",
)

#: Per-GPU metrics, in column order; each becomes ``gpu{i}_<metric>``.
GPU_METRICS: tuple[str, ...] = ("util_pct", "mem_util_pct", "mem_used_mb", "power_w", "energy_j")

# The per-GPU metrics window() averages over the samples (energy is a difference).
_MEAN_METRICS: tuple[str, ...] = ("util_pct", "mem_util_pct", "mem_used_mb", "power_w")


def gpu_columns(indices: Iterable[int]) -> list[str]:
    """Per-GPU column names in their fixed order.

    For each NVML index ``i`` (in the order given): ``gpu{i}_util_pct``,
    ``gpu{i}_mem_util_pct``, ``gpu{i}_mem_used_mb``, ``gpu{i}_power_w``,
    ``gpu{i}_energy_j``. The same names are used by ``telemetry.csv`` and by the
    per-iteration columns of ``metrics.csv``.
    """
    return [f"gpu{i}_{metric}" for i in indices for metric in GPU_METRICS]


def action_energy(window: dict[str, float], actions: int) -> dict[str, Any]:
    """The energy of a window in which ``actions`` actions were taken (a rollout's or an
    edge benchmark's, :meth:`TelemetrySampler.window`): the CPU packages' joules (RAPL)
    and the monitored GPUs' (NVML counters), each per 1 000 actions; a part that was not
    read is left out (the job's ``cpu_energy`` record says why)."""
    out: dict[str, Any] = {"actions": int(actions)}
    parts = {
        "cpu": [window.get(CPU_ENERGY_J, NAN)] if CPU_ENERGY_J in window else [],
        "gpu": [v for k, v in window.items() if re.fullmatch(r"gpu\d+_energy_j", k)],
    }
    for name, values in parts.items():
        finite = [v for v in values if not math.isnan(v)]
        if not finite:
            continue
        joules = float(sum(finite))
        out[f"{name}_energy_j"] = round(joules, 4)
        out[f"{name}_energy_per_1k_actions_j"] = (
            round(1000 * joules / actions, 4) if actions > 0 else None
        )
    return out


def telemetry_columns(indices: Iterable[int], cpu_energy: bool = False) -> list[str]:
    """All ``telemetry.csv`` columns for the monitored GPUs ``indices`` (and the CPU
    energy where RAPL counters are read)."""
    return [*SYSTEM_COLUMNS, *gpu_columns(indices), *([CPU_ENERGY_J] if cpu_energy else [])]


class _CounterTrace:
    """Timestamped readings of one cumulative energy counter (mJ), in time order."""

    def __init__(self) -> None:
        self.t: list[float] = []
        self.mj: list[float] = []

    def append(self, t: float, mj: float) -> None:
        self.t.append(t)
        self.mj.append(mj)

    def at(self, t: float) -> float:
        """Counter value at ``t``: linear interpolation, clamped to the readings' span."""
        if not self.t:
            return NAN
        if t <= self.t[0]:
            return self.mj[0]
        if t >= self.t[-1]:
            return self.mj[-1]
        k = bisect.bisect_right(self.t, t)
        ta, tb, ea, eb = self.t[k - 1], self.t[k], self.mj[k - 1], self.mj[k]
        if tb == ta:
            return eb
        return ea + (eb - ea) * (t - ta) / (tb - ta)


def _nanmean(values: Iterable[float]) -> float:
    finite = [v for v in values if not math.isnan(v)]
    return sum(finite) / len(finite) if finite else NAN


def _fmt(value: float) -> str:
    return "nan" if math.isnan(value) else repr(round(value, 4))


class TelemetrySampler(StartStop):
    """Samples CPU, RAM, process-tree RSS and NVML GPU values on a daemon thread.

    Config subtree: ``telemetry`` (``enabled``, ``interval_s``); the caller decides
    ``gpu_indices`` (NVML / physical indices) from the resources config.

    Args:
        csv_path: where to write ``telemetry.csv`` (parent folders are created);
            ``None`` keeps the samples in memory only (``window()`` still works).
        interval_s: seconds between samples (``telemetry.interval_s``).
        gpu_indices: NVML indices of the GPUs to monitor; ``None`` = every GPU NVML
            sees, ``[]`` = none (NVML is then not even opened).
        nvml: an open :class:`NvmlSession` to use (the caller keeps ownership). If
            ``None``, the sampler opens its own (and closes it in :meth:`stop`); if
            NVML is unavailable, only the CPU/RAM columns are sampled and
            :attr:`nvml_unavailable_reason` says why.
        pid: the process whose tree's RSS is ``proc_rss_mb``; default: this process.
        pynvml_module: the ``pynvml`` module to open when ``nvml`` is ``None``
            (tests inject a fake here).
        time_origin: ``time.monotonic()`` value that is ``time_s == 0``; default:
            the moment :meth:`start` is called. Pass the job's start to share one
            time base with ``metrics.csv``.

    Rows are written every ``interval_s`` after :meth:`start` and once more by
    :meth:`stop`; ``cpu_util_pct`` in a row covers the time since the
    previous row. All public methods are thread-safe.
    """

    def __init__(
        self,
        csv_path: Path | None,
        interval_s: float = 1.0,
        gpu_indices: list[int] | None = None,
        nvml: NvmlSession | None = None,
        pid: int | None = None,
        *,
        pynvml_module: Any | None = None,
        time_origin: float | None = None,
        powercap: Path | None = POWERCAP,
    ) -> None:
        if not interval_s > 0:
            raise ValueError(f"telemetry.interval_s must be > 0, got {interval_s!r}")
        self.csv_path = Path(csv_path) if csv_path is not None else None
        self.interval_s = float(interval_s)
        self._proc = psutil.Process(pid)  # pid None = this process
        self._time_origin = time_origin
        self.nvml_unavailable_reason: str | None = None

        self._owns_nvml = False
        self._nvml: NvmlSession | None = None
        if gpu_indices is None or len(gpu_indices) > 0:
            if nvml is None:
                nvml = open_nvml(pynvml_module)
                self._owns_nvml = nvml is not None
                if nvml is None:
                    self.nvml_unavailable_reason = nvml_unavailable_reason()
            self._nvml = nvml
        if self._nvml is None:
            if gpu_indices:
                log.warning(
                    "telemetry: GPUs %s requested but NVML is unavailable (%s); "
                    "sampling CPU/RAM only",
                    gpu_indices,
                    self.nvml_unavailable_reason,
                )
            self.gpu_indices: list[int] = []
        else:
            try:
                devices = self._nvml.devices(gpu_indices)  # validates the indices
            except Exception:
                if self._owns_nvml:
                    self._nvml.close()
                raise
            self.gpu_indices = [d.index for d in devices]
        # CPU energy where the machine's RAPL counters can be read (None: not looked for).
        self.rapl: Rapl | None = None
        self.rapl_unavailable_reason: str | None = "not sampled"
        if powercap is not None:
            self.rapl, self.rapl_unavailable_reason = open_rapl(powercap)
        self.columns: list[str] = telemetry_columns(self.gpu_indices, self.rapl is not None)

        self._lock = threading.Lock()
        self._stop_event = threading.Event()
        self._thread: threading.Thread | None = None
        self._file: IO[str] | None = None
        self._writer: Any = None
        self._t_start: float | None = None
        self._cpu_before: Any = None
        # Rows as tuples in column order: a third of the memory of dicts.
        self._rows: list[tuple[float, ...]] = []
        self._row_times: list[float] = []
        self._energy: dict[int, _CounterTrace] = {i: _CounterTrace() for i in self.gpu_indices}
        self._energy_base: dict[int, float] = dict.fromkeys(self.gpu_indices, NAN)
        self._last_energy_t = -math.inf
        self._cpu_energy = _CounterTrace()  # RAPL joules x 1000 (the trace's unit)
        self._stopped = False
        self._error_logged = False

    # -- lifecycle -------------------------------------------------------------------

    @property
    def running(self) -> bool:
        """Whether the sampling thread is alive."""
        return self._thread is not None and self._thread.is_alive()

    def start(self) -> TelemetrySampler:
        """Write the CSV header, read the baselines and start the sampling thread."""
        if self._t_start is not None or self._stopped:
            raise RuntimeError("TelemetrySampler can only be started once")
        self._t_start = time.monotonic()
        if self._time_origin is None:
            self._time_origin = self._t_start
        if self.csv_path is not None:
            self.csv_path.parent.mkdir(parents=True, exist_ok=True)
            self._file = self.csv_path.open("w", newline="", encoding="utf-8")
            self._writer = csv.writer(self._file)
            self._writer.writerow(self.columns)
            self._file.flush()
        with self._lock:
            self._cpu_before = psutil.cpu_times()
            self._read_energy_locked()  # baseline of the cumulative energy columns
        self._thread = threading.Thread(target=self._run, name="rlperf-telemetry", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop the thread, write a final sample, close the CSV (and an owned NVML).

        Idempotent; also releases an owned NVML session if the sampler never started.
        """
        if self._stopped:
            return
        self._stopped = True
        if self._thread is not None:
            self._stop_event.set()
            self._thread.join(timeout=self.interval_s + 30.0)
            if self._thread.is_alive():
                log.warning("telemetry thread did not stop in time; abandoning it")
        if self._t_start is not None:
            try:
                self.sample_now()
            except Exception as exc:
                _log_failure("telemetry: final sample failed", exc)
        with self._lock:
            if self._file is not None:
                try:
                    self._file.close()
                except OSError as exc:  # a full disk: the job's own error says so
                    _log_failure("telemetry: closing telemetry.csv failed", exc)
                self._file = None
                self._writer = None
        if self._owns_nvml and self._nvml is not None:
            self._nvml.close()

    def _run(self) -> None:
        assert self._t_start is not None
        tick = 1
        while True:
            deadline = self._t_start + tick * self.interval_s
            if self._stop_event.wait(max(0.0, deadline - time.monotonic())):
                return
            try:
                self.sample_now()
            except Exception as exc:
                if not self._error_logged:  # once: a broken disk must not flood the log
                    self._error_logged = True
                    _log_failure("telemetry sample failed (further failures not logged)", exc)
            # Skip ticks missed by a slow sample instead of bursting to catch up.
            elapsed = time.monotonic() - self._t_start
            tick = max(tick + 1, math.floor(elapsed / self.interval_s) + 1)

    # -- time base -------------------------------------------------------------------

    def now(self) -> float:
        """The current time in the sampler's time base (``time_s`` of the CSV)."""
        if self._time_origin is None:
            raise RuntimeError("TelemetrySampler.now() needs start() (or time_origin) first")
        return time.monotonic() - self._time_origin

    def mark(self) -> float:
        """Read the GPU energy counters now and return :meth:`now`.

        Use it for iteration boundaries (``t0 = s.mark(); train(); t1 = s.mark()``)
        so :meth:`window` gets the energy counter at exactly ``t0`` and ``t1``
        instead of interpolating between samples.
        """
        with self._lock:
            if self._counters_live():
                return self._read_energy_locked()
            return self.now()

    # -- sampling --------------------------------------------------------------------

    def _nvml_live(self) -> bool:
        return self._nvml is not None and self._nvml.is_open and bool(self.gpu_indices)

    def _counters_live(self) -> bool:
        return self._nvml_live() or self.rapl is not None

    def _read_cpu_energy_locked(self, t: float) -> float:
        """One RAPL reading (J since the start) into the CPU trace; NaN once it failed."""
        if self.rapl is None:
            return NAN
        try:
            joules = self.rapl.read_j()
        except (OSError, ValueError) as exc:
            self.rapl.failed = f"the RAPL counters could not be read: {exc}"
            joules = NAN
        if math.isnan(joules):
            if self.rapl_unavailable_reason is None:
                self.rapl_unavailable_reason = self.rapl.failed
                log.warning("telemetry: %s; CPU energy is not measured from here on",
                            self.rapl.failed)  # fmt: skip
            return NAN
        self._cpu_energy.append(t, 1000.0 * joules)
        return joules

    def _read_energy_locked(self) -> float:
        """Append one energy-counter reading per GPU and of the CPU; return its timestamp."""
        t = self.now()
        self._read_cpu_energy_locked(t)
        self._last_energy_t = t
        if self._nvml_live():
            assert self._nvml is not None
            for i in self.gpu_indices:
                t_read = t if i == self.gpu_indices[0] else self.now()
                self._record_energy_locked(i, t_read, self._nvml.energy_mj(i))
            self._last_energy_t = t
        return t

    def _record_energy_locked(self, index: int, t: float, mj: float) -> None:
        if math.isnan(mj):
            return
        if math.isnan(self._energy_base[index]):
            self._energy_base[index] = mj
        self._energy[index].append(t, mj)

    def sample_now(self) -> dict[str, float]:
        """Take one sample immediately, append it to the CSV and return it.

        The thread calls this every ``interval_s``; it may also be called directly.
        """
        if self._t_start is None:
            raise RuntimeError("TelemetrySampler.sample_now() needs start() first")
        with self._lock:
            t = self.now()
            row: dict[str, float] = {TIME_S: t}
            # GPUs first, right after the timestamp: the energy trace's accuracy
            # depends on how close the counter read is to its timestamp.
            nvml_live = self._nvml_live()
            for i in self.gpu_indices:
                t_read = t if i == self.gpu_indices[0] else self.now()
                reading = self._nvml.read(i) if nvml_live and self._nvml else {}
                for metric in _MEAN_METRICS:
                    row[f"gpu{i}_{metric}"] = reading.get(metric, NAN)
                mj = reading.get("energy_mj_total", NAN)
                self._record_energy_locked(i, t_read, mj)
                row[f"gpu{i}_energy_j"] = (mj - self._energy_base[i]) / 1000.0
            if nvml_live:
                self._last_energy_t = t
            if self.rapl is not None:
                row[CPU_ENERGY_J] = self._read_cpu_energy_locked(t)
                self._last_energy_t = t
            cpu_after = psutil.cpu_times()
            vm = psutil.virtual_memory()
            row[CPU_UTIL_PCT] = cpu_util_between(self._cpu_before, cpu_after)
            row[RAM_UTIL_PCT] = float(vm.percent)
            # total - available, so that ram_used_mb / total == ram_util_pct
            row["ram_used_mb"] = (vm.total - vm.available) / MIB
            # The process-tree scan walks /proc (ms), so it comes last.
            row["proc_rss_mb"] = process_tree_rss_mb(self._proc)
            self._cpu_before = cpu_after
            row = {c: row[c] for c in self.columns}
            self._rows.append(tuple(row.values()))
            self._row_times.append(t)
            if self._writer is not None and self._file is not None:
                self._writer.writerow([_fmt(row[c]) for c in self.columns])
                self._file.flush()  # one row at a time: a crash keeps every row
            return row

    # -- queries ---------------------------------------------------------------------

    def cpu_energy_record(self) -> dict[str, Any]:
        """``summary.json`` ``cpu_energy``: whether the CPU packages' energy was measured,
        the RAPL zones read, the whole job's joules (from the sampler's start to its last
        reading), or why it was not measured."""
        with self._lock:
            last = self._cpu_energy.mj[-1] / 1000.0 if self._cpu_energy.mj else NAN
        measured = self.rapl is not None and self.rapl.failed is None
        return {
            "measured": measured,
            "zones": [z.name for z in self.rapl.zones] if self.rapl is not None else [],
            "job_j": round(last, 3) if measured and not math.isnan(last) else None,
            "unavailable_reason": None if measured else self.rapl_unavailable_reason,
        }

    def samples(self) -> list[dict[str, float]]:
        """A copy of every sample taken so far (the rows of ``telemetry.csv``)."""
        with self._lock:
            return [dict(zip(self.columns, r, strict=True)) for r in self._rows]

    def window(self, t0: float, t1: float) -> dict[str, float]:
        """Per-iteration GPU aggregates over ``[t0, t1]`` (sampler time base).

        Returns ``{column: value}`` for :func:`gpu_columns` of the monitored GPUs:

        * ``gpu{i}_util_pct``, ``_mem_util_pct``, ``_mem_used_mb``, ``_power_w``: the
          mean (NaN-ignoring) of the samples with ``t0 <= time_s <= t1``; if no sample
          falls inside (iteration shorter than ``interval_s``), one fresh read now.
        * ``gpu{i}_energy_j``: energy-counter difference between ``t1`` and ``t0``
          in J, each counter value linearly interpolated between the surrounding
          counter readings (samples, :meth:`mark` calls, and a fresh reading taken
          here if ``t1`` is later than the last one). NaN without a counter.

        * ``cpu_energy_j`` where RAPL counters are read: the CPU packages' counter
          difference, interpolated the same way (NaN once the counters failed).

        Empty dict when no GPU is monitored and no CPU energy read.
        """
        if t1 < t0:
            raise ValueError(f"window end {t1} is before its start {t0}")
        if not self.gpu_indices and self.rapl is None:
            return {}
        with self._lock:
            if t1 > self._last_energy_t and self._counters_live():
                self._read_energy_locked()
            cpu_j = (self._cpu_energy.at(t1) - self._cpu_energy.at(t0)) / 1000.0
            if self.rapl is not None and self.rapl.failed is not None:
                cpu_j = NAN
            lo = bisect.bisect_left(self._row_times, t0)
            hi = bisect.bisect_right(self._row_times, t1)
            rows = [dict(zip(self.columns, r, strict=True)) for r in self._rows[lo:hi]]
            energy_j = {
                i: (trace.at(t1) - trace.at(t0)) / 1000.0 for i, trace in self._energy.items()
            }
            nvml_live = self._nvml_live()
        if not rows and nvml_live and self._nvml is not None:
            fresh: dict[str, float] = {}
            for i in self.gpu_indices:
                reading = self._nvml.read(i)
                for metric in _MEAN_METRICS:
                    fresh[f"gpu{i}_{metric}"] = reading[metric]
            rows = [fresh]
        out: dict[str, float] = {CPU_ENERGY_J: cpu_j} if self.rapl is not None else {}
        for i in self.gpu_indices:
            for metric in GPU_METRICS:
                col = f"gpu{i}_{metric}"
                if metric == "energy_j":
                    out[col] = energy_j[i]
                else:
                    out[col] = _nanmean(r.get(col, NAN) for r in rows)
        return out


def _log_failure(what: str, exc: BaseException) -> None:
    """A failed sample: one line for the file system's errors (a full disk, which the job
    then reports in its own one line), the traceback for anything else (a bug)."""
    if isinstance(exc, OSError):
        log.warning("%s: %s", what, exc)
    else:
        log.exception(what)
