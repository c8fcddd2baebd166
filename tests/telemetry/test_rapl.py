"""CPU energy from RAPL counters (rlperf/telemetry/rapl.py), on a fake powercap tree: the
top-level package zones only, wrap-around, a counter that stops, a counter only root may
read, no tree at all; and the sampler's telemetry.csv column and per-window joules."""

from __future__ import annotations

import csv
import math
from pathlib import Path

import pytest

from rlperf.telemetry import rapl
from rlperf.telemetry.rapl import Rapl, open_rapl, zones
from rlperf.telemetry.sampler import CPU_ENERGY_J, TelemetrySampler

MAX_UJ = 262_143_328_850  # a real package's max_energy_range_uj


def _zone(root: Path, folder: str, name: str, uj: int, max_uj: int = MAX_UJ) -> Path:
    path = root / folder
    path.mkdir(parents=True)
    (path / "name").write_text(f"{name}\n")
    (path / "energy_uj").write_text(f"{uj}\n")
    (path / "max_energy_range_uj").write_text(f"{max_uj}\n")
    return path


def _set(path: Path, uj: int) -> None:
    """A new counter value, replaced at once as sysfs gives it (never a half-written file)."""
    tmp = path / "energy_uj.tmp"
    tmp.write_text(f"{uj}\n")
    tmp.replace(path / "energy_uj")


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """Two packages, a core subzone of package 0 and a top-level psys zone."""
    root = tmp_path / "powercap"
    _zone(root, "intel-rapl:0", "package-0", 1_000_000)
    _zone(root, "intel-rapl:0/intel-rapl:0:0", "core", 500_000)
    _zone(root, "intel-rapl:1", "package-1", 2_000_000)
    _zone(root, "intel-rapl:2", "psys", 9_000_000)
    (root / "intel-rapl-mmio:0").mkdir()  # another powercap type: not a package counter
    return root


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def test_only_top_level_package_zones_are_summed(tree: Path) -> None:
    """A subzone is part of its package and psys holds the packages: both left out."""
    assert [z.name for z in zones(tree)] == ["package-0", "package-1"]
    clock = Clock()
    meter = Rapl(zones(tree), clock)
    assert meter.read_j() == 0.0  # the first read is the baseline
    _set(tree / "intel-rapl:0", 4_000_000)  # +3 J
    _set(tree / "intel-rapl:0" / "intel-rapl:0:0", 2_500_000)  # +2 J of those 3: not again
    _set(tree / "intel-rapl:1", 2_500_000)  # +0.5 J
    _set(tree / "intel-rapl:2", 19_000_000)  # psys +10 J: not counted
    clock.t = 1.0
    assert meter.read_j() == pytest.approx(3.5)


def test_a_counter_that_wraps_is_unwrapped(tree: Path) -> None:
    clock = Clock()
    _set(tree / "intel-rapl:0", MAX_UJ - 1_000_000)
    _set(tree / "intel-rapl:1", 2_000_001)  # package 1 moves a little, so it is alive
    meter = Rapl(zones(tree), clock)
    meter.read_j()
    _set(tree / "intel-rapl:0", 2_000_000)  # wrapped: 1 J to the top, 2 J after it
    _set(tree / "intel-rapl:1", 2_000_002)
    clock.t = 1.0
    assert meter.read_j() == pytest.approx(3.0 + 1e-6)


def test_a_counter_that_stops_stops_the_measurement(tree: Path) -> None:
    """A package draws power whenever it is on: a counter still for longer than STALL_S
    is a broken read, and its energy is NaN from then on, never zero."""
    clock = Clock()
    meter = Rapl(zones(tree), clock)
    meter.read_j()
    for step in range(1, 4):
        clock.t = 4.0 * step
        _set(tree / "intel-rapl:1", 2_000_000 + step)  # package 1 moves; package 0 does not
        value = meter.read_j()
    assert math.isnan(value) and meter.failed is not None
    assert "package-0 (intel-rapl:0) stopped at 1000000" in meter.failed
    _set(tree / "intel-rapl:0", 9_000_000)
    assert math.isnan(meter.read_j())  # stays stopped


def test_no_tree_and_a_root_only_counter_say_why(tmp_path: Path, tree: Path, monkeypatch) -> None:
    meter, why = open_rapl(tmp_path / "absent")
    assert meter is None and why is not None and why.startswith("no RAPL counter: ")
    empty = tmp_path / "empty"
    empty.mkdir()
    assert open_rapl(empty)[0] is None

    def root_only(path: Path) -> int:
        if path.name == "energy_uj":
            raise PermissionError(13, "Permission denied", str(path))
        return int(path.read_text())

    monkeypatch.setattr(rapl, "_read_int", root_only)
    meter, why = open_rapl(tree)
    assert meter is None and why is not None
    assert "energy_uj is readable by root only (Linux 5.10 and later)" in why
    assert why.endswith(rapl.GRANT)


def test_the_sampler_writes_cpu_energy_and_differences_it_per_window(tree: Path) -> None:
    """telemetry.csv gets cpu_energy_j (joules since the start) where RAPL is read, a
    window its difference, and summary.json's record says what was measured."""
    out = tree.parent / "telemetry.csv"
    sampler = TelemetrySampler(out, interval_s=3600, gpu_indices=[], powercap=tree)
    assert sampler.columns[-1] == CPU_ENERGY_J and sampler.rapl_unavailable_reason is None
    sampler.start()
    t0 = sampler.mark()
    _set(tree / "intel-rapl:0", 6_000_000)  # +5 J
    t1 = sampler.mark()
    assert sampler.window(t0, t1) == {CPU_ENERGY_J: pytest.approx(5.0)}
    _set(tree / "intel-rapl:1", 3_000_000)  # +1 J
    sampler.sample_now()
    sampler.stop()
    rows = list(csv.DictReader(out.open()))
    assert float(rows[-1][CPU_ENERGY_J]) == pytest.approx(6.0)
    assert sampler.cpu_energy_record() == {
        "measured": True, "zones": ["package-0", "package-1"], "job_j": 6.0,
        "unavailable_reason": None,
    }  # fmt: skip


def test_without_rapl_the_sampler_has_no_column_and_says_why(tmp_path: Path) -> None:
    sampler = TelemetrySampler(None, interval_s=3600, gpu_indices=[], powercap=tmp_path / "no")
    assert CPU_ENERGY_J not in sampler.columns
    sampler.start()
    t0 = sampler.mark()
    assert sampler.window(t0, sampler.mark()) == {}
    sampler.stop()
    record = sampler.cpu_energy_record()
    assert record["measured"] is False and record["job_j"] is None
    assert str(record["unavailable_reason"]).startswith("no RAPL counter: ")


def test_a_job_records_its_cpu_energy_where_the_counters_move(
    compose_cfg, tree: Path, tmp_path: Path
) -> None:
    """A whole job (the env stage: no Ray) with ``telemetry.powercap`` at the fake tree,
    whose package counters a thread advances as a CPU would: summary.json's cpu_energy is
    measured, with the job's joules; with the real (absent) tree, it says why not."""
    import json
    import threading

    from rlperf.job_wrapper import execute_stage
    from rlperf.layout import SUMMARY_FILE
    from rlperf.stages import stage_function

    done = threading.Event()

    def draw_power() -> None:  # 2 W on package 0
        uj = 1_000_000
        while not done.wait(0.05):
            uj += 100_000
            _set(tree / "intel-rapl:0", uj)
            _set(tree / "intel-rapl:1", 2_000_000 + uj)  # and 2 W on package 1

    thread = threading.Thread(target=draw_power, daemon=True)
    thread.start()
    try:
        cfg = compose_cfg("stage=env", "env=cartpole", "env_bench.steps=2000",
                          f"telemetry.powercap={tree}")  # fmt: skip
        execute_stage(cfg, tmp_path / "on", stage_function("env"), in_trial=False)
    finally:
        done.set()
        thread.join()
    record = json.loads((tmp_path / "on" / SUMMARY_FILE).read_text())["cpu_energy"]
    assert record["measured"] is True and record["zones"] == ["package-0", "package-1"]
    assert record["job_j"] > 0 and record["unavailable_reason"] is None
    cfg = compose_cfg("stage=env", "env=cartpole", "env_bench.steps=400",
                      f"telemetry.powercap={tmp_path / 'none'}")  # fmt: skip
    execute_stage(cfg, tmp_path / "off", stage_function("env"), in_trial=False)
    record = json.loads((tmp_path / "off" / SUMMARY_FILE).read_text())["cpu_energy"]
    assert record["measured"] is False and record["unavailable_reason"].startswith("no RAPL")


def test_energy_per_1000_actions_of_a_window() -> None:
    """A rollout's or edge benchmark's loop: CPU and GPU joules per 1 000 actions; a part
    not read (no RAPL, no GPU, a NaN counter) is left out, never zero."""
    from rlperf.telemetry.sampler import action_energy

    window = {CPU_ENERGY_J: 12.0, "gpu0_energy_j": 30.0, "gpu1_energy_j": math.nan,
              "gpu0_power_w": 100.0}  # fmt: skip
    assert action_energy(window, 600) == {
        "actions": 600, "cpu_energy_j": 12.0, "cpu_energy_per_1k_actions_j": 20.0,
        "gpu_energy_j": 30.0, "gpu_energy_per_1k_actions_j": 50.0,
    }  # fmt: skip
    assert action_energy({}, 600) == {"actions": 600}
    assert action_energy({CPU_ENERGY_J: math.nan}, 600) == {"actions": 600}
    assert action_energy({CPU_ENERGY_J: 1.0}, 0)["cpu_energy_per_1k_actions_j"] is None


def test_an_inference_run_reports_its_energy_per_1000_actions_or_why_not() -> None:
    from rlperf.report.read.cells import Cell
    from rlperf.report.read.energy import action_energy_summary

    def cell(summary: dict) -> Cell:
        return Cell("r", Path("r"), "rlperf", "g", "completed", {"stage": "rollout"},
                    summary=summary)  # fmt: skip

    measured = cell({"energy": {"actions": 600, "cpu_energy_per_1k_actions_j": 20.0}})
    assert action_energy_summary(measured) == {"cpu_energy_per_1k_actions_j": 20.0}
    why = "no RAPL counter: here"
    absent = cell({"energy": {"actions": 600}, "cpu_energy": {"unavailable_reason": why}})
    assert action_energy_summary(absent) == {"cpu_energy_unavailable": f"not measured here: {why}"}
