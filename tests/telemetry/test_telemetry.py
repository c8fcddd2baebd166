"""Tests of the NVML wrapper, the background sampler and CpuWindow.

GPU behaviour is tested against ``tests/fakes/pynvml.py``, a fake of the pynvml API
injected at the wrapper's boundary; the real NVML is only touched by the
``test_real_nvml_*`` tests.
"""

from __future__ import annotations

import csv
import io
import math
import os
import subprocess
import sys
import time
from collections import namedtuple
from pathlib import Path

import psutil
import pytest
from fakes.pynvml import (
    FakeGpu,
    FakePynvml,
    NVMLError_DriverNotLoaded,
    NVMLError_LibraryNotFound,
)

from rlperf.layout import TELEMETRY_FILE
from rlperf.telemetry.cpu import CpuWindow, cpu_util_between, process_tree_rss_mb
from rlperf.telemetry.nvml import NvmlSession, nvml_unavailable_reason, open_nvml
from rlperf.telemetry.sampler import (
    SYSTEM_COLUMNS,
    TelemetrySampler,
    gpu_columns,
    telemetry_columns,
)
from tests.conftest import REPO


def read_csv(path: Path) -> tuple[list[str], list[dict[str, float]]]:
    """Header and rows (as floats) of a telemetry.csv."""
    with path.open(newline="") as f:
        reader = csv.reader(f)
        header = next(reader)
        rows = [dict(zip(header, map(float, r), strict=True)) for r in reader]
    return header, rows


def gpu(**kw: object) -> FakeGpu:
    return FakeGpu(**kw)  # type: ignore[arg-type]


def has_nvidia_driver() -> bool:
    """Whether this machine looks like it has an NVIDIA driver (independent of pynvml)."""
    return Path("/proc/driver/nvidia/version").exists() or any(Path("/dev").glob("nvidia[0-9]*"))


# ----------------------------------------------------------------------- columns


def test_gpu_columns_fixed_order_and_physical_indices() -> None:
    assert gpu_columns([1, 0]) == [
        "gpu1_util_pct",
        "gpu1_mem_util_pct",
        "gpu1_mem_used_mb",
        "gpu1_power_w",
        "gpu1_energy_j",
        "gpu0_util_pct",
        "gpu0_mem_util_pct",
        "gpu0_mem_used_mb",
        "gpu0_power_w",
        "gpu0_energy_j",
    ]
    assert gpu_columns([]) == []
    assert telemetry_columns([]) == [
        "time_s",
        "cpu_util_pct",
        "ram_util_pct",
        "ram_used_mb",
        "proc_rss_mb",
    ]
    assert telemetry_columns([3]) == [*SYSTEM_COLUMNS, *gpu_columns([3])]


# -------------------------------------------------------------------------- NVML


def test_nvml_session_reads_values_in_documented_units() -> None:
    fake = FakePynvml(
        [
            gpu(
                name="NVIDIA Fake H100",
                uuid="GPU-abc",
                memory_total_mb=81920.0,
                util_pct=37,
                mem_util_pct=12,
                mem_used_mb=1536.0,
                power_w=123.456,
                energy_mj=5_000_250,
            )
        ],
        driver_version="560.35.03",
    )
    with NvmlSession(fake) as nvml:
        assert fake.initialised
        assert nvml.device_count() == 1
        assert nvml.driver_version() == "560.35.03"
        (info,) = nvml.devices()
        assert info.as_dict() == {
            "index": 0,
            "name": "NVIDIA Fake H100",
            "memory_total_mb": 81920.0,
            "uuid": "GPU-abc",
        }
        assert nvml.read(0) == {
            "util_pct": 37.0,
            "mem_util_pct": 12.0,
            "mem_used_mb": 1536.0,
            "power_w": 123.456,
            "energy_mj_total": 5_000_250.0,
        }
        assert nvml.energy_mj(0) == 5_000_250.0
    assert not fake.initialised  # nvmlShutdown called on exit
    assert fake.shutdown_count == 1


def test_nvml_failing_fields_become_nan_and_others_survive() -> None:
    fake = FakePynvml(
        [
            gpu(
                mem_used_mb=100.0,
                energy_mj=None,  # no energy counter: NVMLError_NotSupported
                fail={"nvmlDeviceGetPowerUsage", "nvmlDeviceGetUtilizationRates"},
            )
        ]
    )
    with NvmlSession(fake) as nvml:
        values = nvml.read(0)
        assert math.isnan(values["util_pct"])
        assert math.isnan(values["mem_util_pct"])
        assert math.isnan(values["power_w"])
        assert math.isnan(values["energy_mj_total"])
        assert values["mem_used_mb"] == 100.0
        assert math.isnan(nvml.energy_mj(0))


def test_nvml_decodes_bytes_names_of_older_pynvml() -> None:
    fake = FakePynvml([gpu()], driver_version=b"470.1")  # type: ignore[arg-type]
    fake.gpus[0].name = b"Tesla V100"  # type: ignore[assignment]
    with NvmlSession(fake) as nvml:
        assert nvml.info(0).name == "Tesla V100"
        assert nvml.driver_version() == "470.1"


def test_devices_rejects_indices_nvml_does_not_see() -> None:
    with NvmlSession(FakePynvml([gpu(), gpu()])) as nvml:
        assert [d.index for d in nvml.devices([1])] == [1]
        with pytest.raises(ValueError, match=r"\[2\].*2 GPU\(s\)"):
            nvml.devices([0, 2])


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        (NVMLError_DriverNotLoaded, "Driver Not Loaded"),
        (NVMLError_LibraryNotFound, "NVML Shared Library Not Found"),
        (OSError, "OSError"),
    ],
)
def test_open_nvml_returns_none_with_reason(error: type[BaseException], expected: str) -> None:
    assert open_nvml(FakePynvml(init_error=error)) is None
    reason = nvml_unavailable_reason()
    assert reason is not None and expected in reason
    # A later successful open clears the reason.
    session = open_nvml(FakePynvml([gpu()]))
    assert session is not None
    assert nvml_unavailable_reason() is None
    session.close()


def test_open_nvml_without_pynvml_installed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", None)  # makes `import pynvml` fail
    assert open_nvml() is None
    reason = nvml_unavailable_reason()
    assert reason is not None and "pynvml (nvidia-ml-py) cannot be imported" in reason


def test_real_nvml_absent_on_a_machine_without_nvidia_driver() -> None:
    if has_nvidia_driver():
        pytest.skip("this machine has an NVIDIA driver; see test_real_nvml_reads")
    assert open_nvml() is None
    reason = nvml_unavailable_reason()
    assert reason is not None
    assert "nvmlInit failed" in reason or "cannot be imported" in reason


@pytest.mark.gpu
def test_real_nvml_reads(tmp_path: Path) -> None:
    session = open_nvml()
    if session is None:
        pytest.skip(f"no usable NVIDIA GPU / NVML: {nvml_unavailable_reason()}")
    with session:
        assert session.device_count() >= 1
        info = session.info(0)
        assert info.name and info.uuid.startswith(("GPU-", "MIG-"))
        assert info.memory_total_mb > 1000
        values = session.read(0)
        assert 0 <= values["util_pct"] <= 100
        assert 0 <= values["mem_used_mb"] <= info.memory_total_mb
        assert values["power_w"] > 0
        path = tmp_path / TELEMETRY_FILE
        with TelemetrySampler(path, interval_s=0.1, gpu_indices=[0], nvml=session):
            time.sleep(0.5)
        _, rows = read_csv(path)
        assert len(rows) >= 3
        energy = [r["gpu0_energy_j"] for r in rows]
        if not math.isnan(energy[0]):  # cards without a counter report NaN throughout
            assert energy == sorted(energy) and energy[0] >= 0


# ----------------------------------------------------------------------- sampler


def test_sampler_one_gpu_csv_rows_and_window_aggregates(tmp_path: Path) -> None:
    card = gpu(util_pct=0, power_w=0.0, energy_mj=1_000, mem_used_mb=512.0, mem_util_pct=5)
    fake = FakePynvml([card])
    path = tmp_path / "run" / TELEMETRY_FILE
    # A long interval keeps the thread out of the way: samples come from sample_now().
    sampler = TelemetrySampler(path, interval_s=3600, pynvml_module=fake).start()
    assert sampler.gpu_indices == [0]
    times = []
    for util, power, energy in [(10, 100.0, 3_000), (30, 200.0, 6_000), (50, 300.0, 10_000)]:
        card.util_pct, card.power_w, card.energy_mj = util, power, energy
        times.append(sampler.sample_now()["time_s"])
        time.sleep(0.01)

    # Rows are in the file while the sampler is still running.
    header, rows = read_csv(path)
    assert header == telemetry_columns([0])
    assert [r["gpu0_util_pct"] for r in rows] == [10.0, 30.0, 50.0]
    assert [r["gpu0_power_w"] for r in rows] == [100.0, 200.0, 300.0]
    # Cumulative since start: the baseline counter read at start() was 1000 mJ.
    assert [r["gpu0_energy_j"] for r in rows] == [2.0, 5.0, 9.0]
    assert [r["gpu0_mem_used_mb"] for r in rows] == [512.0] * 3
    assert [r["time_s"] for r in rows] == pytest.approx(times, abs=1e-4)

    whole = sampler.window(0.0, times[-1])
    assert whole["gpu0_util_pct"] == 30.0
    assert whole["gpu0_power_w"] == 200.0
    assert whole["gpu0_mem_util_pct"] == 5.0
    assert whole["gpu0_energy_j"] == pytest.approx(9.0)
    assert sampler.window(times[0], times[2])["gpu0_energy_j"] == pytest.approx(7.0)
    later = sampler.window(times[1], times[2])
    assert later["gpu0_util_pct"] == 40.0
    # Counter values between readings are interpolated linearly.
    mid = (times[0] + times[1]) / 2
    assert sampler.window(mid, times[1])["gpu0_energy_j"] == pytest.approx(1.5)

    # mark() reads the counter at the iteration boundaries themselves; with no sample
    # inside the window the mean columns come from a fresh read.
    card.energy_mj = 20_000
    t0 = sampler.mark()
    card.energy_mj, card.util_pct, card.power_w = 26_500, 77, 250.0
    t1 = sampler.mark()
    short = sampler.window(t0, t1)
    assert short["gpu0_energy_j"] == pytest.approx(6.5)
    assert short["gpu0_util_pct"] == 77.0
    assert short["gpu0_power_w"] == 250.0
    assert list(short) == gpu_columns([0])

    sampler.stop()
    _, rows = read_csv(path)
    assert len(rows) == 4  # three samples + the final one written by stop()
    assert rows[-1]["gpu0_energy_j"] == 25.5  # (26_500 - 1_000) mJ
    assert fake.shutdown_count == 1  # the sampler opened NVML, so it closed it
    sampler.stop()  # idempotent
    assert len(read_csv(path)[1]) == 4


def test_sampler_two_gpus_all_or_subset(tmp_path: Path) -> None:
    cards = [
        gpu(util_pct=11, power_w=70.0, energy_mj=0, uuid="GPU-0"),
        gpu(util_pct=22, power_w=140.0, energy_mj=0, uuid="GPU-1"),
    ]
    fake = FakePynvml(cards)
    with NvmlSession(fake) as nvml:
        path = tmp_path / "all.csv"
        with TelemetrySampler(path, interval_s=3600, nvml=nvml) as sampler:
            assert sampler.gpu_indices == [0, 1]
            cards[0].energy_mj, cards[1].energy_mj = 4_000, 9_000
            sampler.sample_now()
        header, rows = read_csv(path)
        assert header == telemetry_columns([0, 1])
        assert [r["gpu0_util_pct"] for r in rows] == [11.0, 11.0]
        assert [r["gpu1_util_pct"] for r in rows] == [22.0, 22.0]
        assert rows[0]["gpu0_energy_j"] == 4.0 and rows[0]["gpu1_energy_j"] == 9.0
        assert rows[0]["gpu1_power_w"] == 140.0

        path = tmp_path / "one.csv"
        with TelemetrySampler(path, interval_s=3600, gpu_indices=[1], nvml=nvml) as sampler:
            sampler.sample_now()
            assert set(sampler.window(0, sampler.now())) == set(gpu_columns([1]))
        header, rows = read_csv(path)
        assert header == telemetry_columns([1])
        assert rows[0]["gpu1_util_pct"] == 22.0

        with pytest.raises(ValueError, match="out of range"):
            TelemetrySampler(None, gpu_indices=[5], nvml=nvml)
        own = FakePynvml([gpu()])
        with pytest.raises(ValueError, match="out of range"):
            TelemetrySampler(None, gpu_indices=[1], pynvml_module=own)
        assert own.init_count == own.shutdown_count == 1  # its own session was closed
        # The caller's session stays open: the sampler does not own it.
        assert nvml.is_open and fake.shutdown_count == 0


def test_sampler_gpu_without_energy_counter_gives_nan_energy(tmp_path: Path) -> None:
    cards = [gpu(energy_mj=None, power_w=60.0), gpu(energy_mj=0, power_w=90.0)]
    path = tmp_path / TELEMETRY_FILE
    with TelemetrySampler(path, interval_s=3600, pynvml_module=FakePynvml(cards)) as sampler:
        cards[1].energy_mj = 2_500
        sampler.sample_now()
        win = sampler.window(0.0, sampler.now())
    assert math.isnan(win["gpu0_energy_j"])
    assert win["gpu0_power_w"] == 60.0
    assert win["gpu1_energy_j"] == pytest.approx(2.5)
    _, rows = read_csv(path)
    assert all(math.isnan(r["gpu0_energy_j"]) for r in rows)
    assert [r["gpu0_power_w"] for r in rows] == [60.0, 60.0]
    assert [r["gpu1_energy_j"] for r in rows] == [2.5, 2.5]
    first_data_line = path.read_text().splitlines()[1].split(",")
    assert first_data_line[telemetry_columns([0, 1]).index("gpu0_energy_j")] == "nan"


@pytest.mark.timing
def test_sampler_thread_appends_flushed_rows_while_running(tmp_path: Path) -> None:
    card = gpu(util_pct=64, energy_mj=0, energy_rate_w=250.0)
    path = tmp_path / TELEMETRY_FILE
    sampler = TelemetrySampler(path, interval_s=0.05, pynvml_module=FakePynvml([card]))
    sampler.start()
    try:
        deadline = time.monotonic() + 10
        rows: list[dict[str, float]] = []
        while time.monotonic() < deadline:
            _, rows = read_csv(path)  # read by another file handle, mid-run
            if len(rows) >= 4:
                break
            time.sleep(0.02)
        assert sampler.running
        assert len(rows) >= 4
        t = [r["time_s"] for r in rows]
        assert t == sorted(t) and t[0] > 0
        assert all(0 < b - a < 1.0 for a, b in zip(t, t[1:], strict=False))
        for r in rows:
            assert 0.0 <= r["cpu_util_pct"] <= 100.0
            assert 0.0 < r["ram_util_pct"] < 100.0
            assert r["ram_used_mb"] > 0
            assert r["proc_rss_mb"] >= psutil.Process().memory_info().rss / 2**20 * 0.5
            assert r["gpu0_util_pct"] == 64.0
            # The fake's counter grows at 250 W, so the cumulative energy is 250 * time_s.
            assert r["gpu0_energy_j"] == pytest.approx(250.0 * r["time_s"], abs=250 * 0.05)
        # Between samples the counter is interpolated: exact for a linear counter.
        t0 = (t[0] + t[1]) / 2
        t1 = (t[2] + t[3]) / 2
        assert sampler.window(t0, t1)["gpu0_energy_j"] == pytest.approx(250.0 * (t1 - t0), rel=0.01)
    finally:
        sampler.stop()
    assert not sampler.running
    _, final_rows = read_csv(path)
    assert len(final_rows) > len(rows)


def test_sampler_without_nvml_samples_cpu_and_ram_only(tmp_path: Path) -> None:
    path = tmp_path / TELEMETRY_FILE
    fake = FakePynvml(init_error=NVMLError_DriverNotLoaded)
    with TelemetrySampler(path, interval_s=3600, gpu_indices=[0], pynvml_module=fake) as sampler:
        assert sampler.gpu_indices == []
        assert sampler.columns == list(SYSTEM_COLUMNS)
        reason = sampler.nvml_unavailable_reason
        assert reason is not None and "Driver Not Loaded" in reason
        row = sampler.sample_now()
        assert set(row) == set(SYSTEM_COLUMNS)
        assert sampler.window(0.0, sampler.now()) == {}
    header, rows = read_csv(path)
    assert header == list(SYSTEM_COLUMNS)
    assert len(rows) == 2
    assert all(0 <= r["cpu_util_pct"] <= 100 and r["ram_used_mb"] > 0 for r in rows)


def test_sampler_with_empty_gpu_list_does_not_open_nvml() -> None:
    fake = FakePynvml([gpu()])
    with TelemetrySampler(None, interval_s=3600, gpu_indices=[], pynvml_module=fake) as sampler:
        sampler.sample_now()
        assert sampler.columns == list(SYSTEM_COLUMNS)
        assert len(sampler.samples()) == 1
    assert fake.init_count == 0
    assert len(sampler.samples()) == 2  # in memory only, final sample included


def test_sampler_time_origin_and_argument_checks() -> None:
    origin = time.monotonic() - 100.0
    with TelemetrySampler(None, interval_s=3600, gpu_indices=[], time_origin=origin) as s:
        assert 100.0 <= s.now() < 110.0
        assert s.sample_now()["time_s"] >= 100.0
        with pytest.raises(ValueError, match="before its start"):
            s.window(5.0, 4.0)
        with pytest.raises(RuntimeError, match="once"):
            s.start()
    with pytest.raises(ValueError, match="interval_s"):
        TelemetrySampler(None, interval_s=0, gpu_indices=[])
    with pytest.raises(RuntimeError, match="start"):
        TelemetrySampler(None, gpu_indices=[]).now()


@pytest.mark.timing
def test_proc_rss_covers_the_process_tree() -> None:
    # The child says when its 64 MiB are allocated and touched, so its RSS is
    # steady while it is measured (polling for RSS >= 64 MiB raced the tail of
    # the allocation: 66.9 MiB read, 73.6 MiB a moment later).
    child = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import time; b = b'x' * (64 * 2**20); print('ready', flush=True); time.sleep(30)",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        proc = psutil.Process(child.pid)
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "ready"
        child_mb = proc.memory_info().rss / 2**20
        own_mb = psutil.Process().memory_info().rss / 2**20
        assert child_mb >= 64
        assert process_tree_rss_mb(proc) == pytest.approx(child_mb, rel=0.1)
        assert process_tree_rss_mb(psutil.Process()) >= 0.9 * (own_mb + child_mb)
        with TelemetrySampler(None, interval_s=3600, gpu_indices=[], pid=child.pid) as s:
            assert s.sample_now()["proc_rss_mb"] == pytest.approx(child_mb, rel=0.1)
    finally:
        child.kill()
        child.communicate()
    assert math.isnan(process_tree_rss_mb(proc))  # gone: NaN, not an exception


# --------------------------------------------------------------------------- CPU


def test_cpu_util_between_matches_psutil_formula() -> None:
    scputimes = namedtuple(  # mimics psutil's
        "scputimes", ["user", "nice", "system", "idle", "iowait", "guest", "guest_nice"]
    )
    before = scputimes(0, 0, 0, 0, 0, 0, 0)
    # busy = user + nice + system = 3 + 1 + 2; guest (1) is part of user already;
    # total = 6 busy + idle 3 + iowait 1 = 10.
    after = scputimes(3, 1, 2, 3, 1, 1, 0)
    assert cpu_util_between(before, after) == pytest.approx(60.0)
    assert cpu_util_between(after, after) == 0.0


@pytest.mark.timing
def test_cpu_window_busy_loop_shows_utilisation() -> None:
    window = CpuWindow().start()
    end = time.monotonic() + 0.3
    x = 0
    while time.monotonic() < end:
        x += 1
    pct = window.stop()
    assert pct == window.cpu_util_pct
    assert 0.0 < pct <= 100.0
    # One busy core out of N is at least ~1/N of the machine (minus scheduling noise).
    assert pct >= 100.0 / (psutil.cpu_count() or 1) * 0.5
    assert 0.0 < window.ram_util_pct < 100.0
    with pytest.raises(RuntimeError):
        window.stop()
    with CpuWindow() as w:
        time.sleep(0.05)
    assert 0.0 <= w.cpu_util_pct <= 100.0


# ------------------------------------------------------------------------ import


def test_telemetry_imports_no_heavy_frameworks() -> None:
    code = (
        "import sys, rlperf.telemetry, rlperf.telemetry.sampler, rlperf.telemetry.cpu,"
        " rlperf.telemetry.fingerprint;"
        "print(sorted(m for m in ('ray', 'torch', 'tensorflow', 'pynvml') if m in sys.modules))"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True
    )
    assert out.stdout.strip() == "[]"


def test_sampler_window_edges_and_a_closed_nvml(tmp_path: Path) -> None:
    """A zero-length window is a window; a window's means stop at its end; a sample taken
    after the caller closed NVML records NaN for the GPU, energy included (found by
    mutation testing, docs/development.md#mutation-testing)."""
    card = gpu(util_pct=10, power_w=100.0, energy_mj=0)
    fake = FakePynvml([card])
    with NvmlSession(fake) as nvml:
        sampler = TelemetrySampler(None, interval_s=3600, nvml=nvml).start()
        times = []
        for util, energy in [(10, 1_000), (30, 3_000), (80, 9_000)]:
            card.util_pct, card.energy_mj = util, energy
            times.append(sampler.sample_now()["time_s"])
            time.sleep(0.01)
        assert sampler.window(0.0, times[1])["gpu0_util_pct"] == 20.0
        at = sampler.window(times[1], times[1])
        assert at["gpu0_util_pct"] == 30.0 and at["gpu0_energy_j"] == 0.0
        with pytest.raises(ValueError, match="window end"):
            sampler.window(times[1], times[0])
    row = sampler.sample_now()  # NVML closed by its owner: nothing read
    assert math.isnan(row["gpu0_util_pct"]) and math.isnan(row["gpu0_energy_j"])
    sampler.stop()
    assert sampler.samples()[0]["gpu0_energy_j"] == 1.0


def test_a_full_disk_during_sampling_is_one_line_not_a_traceback(tmp_path, caplog) -> None:
    """A sample write that meets a full disk is logged in one line (the job reports the full
    disk itself); anything else keeps its traceback (a bug)."""
    import errno
    import logging
    import threading

    sampler = TelemetrySampler(tmp_path / TELEMETRY_FILE, interval_s=0.02).start()
    failed = threading.Event()

    def full_disk() -> dict[str, float]:
        failed.set()
        raise OSError(errno.ENOSPC, "No space left on device")

    sampler.sample_now = full_disk  # type: ignore[method-assign]
    with caplog.at_level(logging.WARNING, logger="rlperf"):
        assert failed.wait(10)
        sampler.stop()
    records = [r for r in caplog.records if "sample failed" in r.getMessage()]
    assert len(records) == 2  # the thread's first failure (once), the final sample's
    assert all("No space left on device" in r.getMessage() for r in records)
    assert all(r.exc_info is None for r in records)

    def bug() -> dict[str, float]:
        raise ZeroDivisionError("a bug")

    other = TelemetrySampler(tmp_path / "other.csv", interval_s=3600).start()
    other.sample_now = bug  # type: ignore[method-assign]
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="rlperf"):
        other.stop()
    assert [
        r.exc_info is not None for r in caplog.records if "sample failed" in r.getMessage()
    ] == [True]


def test_stop_on_a_full_disk_leaves_the_jobs_error_alone(tmp_path: Path, caplog) -> None:
    """The job's own one line says the disk is full: the sampler's last flush failing as it
    closes telemetry.csv is one warning, never a second exception in the job's cleanup (CI
    once saw it replace the job's line with a traceback)."""

    class FullDisk(io.StringIO):
        def close(self) -> None:
            raise OSError(28, "No space left on device")

    sampler = TelemetrySampler(tmp_path / "telemetry.csv", interval_s=3600, gpu_indices=[])
    sampler.start()
    sampler._file.close()  # the disk filled after the header was written
    sampler._file = FullDisk()
    sampler._writer = csv.writer(sampler._file)
    with caplog.at_level("WARNING"):
        sampler.stop()
    assert "closing telemetry.csv failed" in caplog.text and "No space left" in caplog.text
