"""GPU energy of training runs (rlperf.report.read.energy) value by value, on rows built in
memory: counter or power x time per GPU, the run's totals and per-step figures, the job's
energy, the power timeline and why a run has none (found by mutation testing,
docs/development.md#mutation-testing)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from rlperf.layout import EXCLUDED_COLUMN
from rlperf.report.read import energy
from rlperf.report.read.cells import Cell

NAN = float("nan")


def _cell(cid: str, df: pd.DataFrame | None, **over: Any) -> Cell:
    axes = {"stage": "train", **over.pop("axes", {})}
    return Cell(cid, Path(cid), "rlperf", "g", over.pop("status", "completed"), axes,
                iterations=df, **over)  # fmt: skip


def test_gpu_indices_are_the_power_columns_in_numeric_order() -> None:
    df = pd.DataFrame(columns=["gpu10_power_w", "gpu2_power_w", "gpu1_power_wx", "gpu3_energy_j"])
    assert energy.gpu_indices(df) == [2, 10]


def test_each_gpu_takes_its_counter_else_power_times_time() -> None:
    df = pd.DataFrame(
        {
            "iter_s": [2.0, 2.0, 4.0, 1.0],
            "gpu0_power_w": [100.0, 100.0, 50.0, NAN],
            "gpu0_energy_j": [150.0, NAN, 210.0, NAN],
            "gpu1_power_w": [10.0, 20.0, "n/a", NAN],
        }
    )
    out = energy.add_energy_columns(df)
    assert out["gpu_power_w"].tolist()[:3] == [110.0, 120.0, 50.0]
    # Row 0: gpu0's counter + gpu1's 10 W x 2 s; row 1: both power x time.
    assert out["gpu_energy_j"].tolist()[:3] == [170.0, 240.0, 210.0]
    assert out["gpu_energy_source"].tolist() == [
        "counter + power × time", "power × time", "counter", ""
    ]  # fmt: skip
    assert math.isnan(out["gpu_power_w"].iloc[3]) and math.isnan(out["gpu_energy_j"].iloc[3])
    bare = pd.DataFrame({"iter_s": [1.0]})
    assert energy.add_energy_columns(bare) is bare


def _rows() -> pd.DataFrame:
    return energy.add_energy_columns(
        pd.DataFrame(
            {
                EXCLUDED_COLUMN: ["warmup", "", "", "fault"],
                "iter_s": [5.0, 2.0, 2.0, 2.0],
                "env_steps": [100.0, 400.0, 600.0, 50.0],
                "trained_steps": [100.0, 1000.0, 1000.0, 50.0],
                "gpu0_power_w": [300.0, 100.0, 50.0, 999.0],
                "gpu0_energy_j": [1500.0, 200.0, NAN, 999.0],
            }
        )
    )


def test_a_runs_energy_is_over_the_iterations_that_count() -> None:
    telemetry = pd.DataFrame(
        {"time_s": [0.0, 1.0, 2.0], "gpu0_energy_j": [0.0, 40.0, 70.0],
         "gpu1_energy_j": [5.0, 30.0, NAN], "gpu0_power_w": [1, 2, 3]}
    )  # fmt: skip
    summary = energy.energy_summary(_cell("a", _rows(), telemetry=telemetry, gpu_count=1))
    assert summary == {
        "gpu_power_w_mean": 75.0,
        "gpu_energy_j": 300.0,  # 200 J counted + 50 W x 2 s
        "energy_per_env_step_j": 0.3,
        "energy_per_trained_step_j": 0.15,
        "energy_source": "counter / power × time",
        "job_gpu_energy_j": 100.0,  # each GPU's last counter value: 70 + 30
        "energy_unavailable": "",
    }
    no_steps = _rows().assign(env_steps=0.0, trained_steps=0.0)
    summary = energy.energy_summary(_cell("b", no_steps))
    assert np.isnan(summary["energy_per_env_step_j"])
    assert np.isnan(summary["energy_per_trained_step_j"])
    assert np.isnan(summary["job_gpu_energy_j"])


def test_why_a_run_has_no_energy() -> None:
    assert energy.unavailable_reason(_cell("a", _rows())) == ""
    no_power = _rows().assign(gpu_energy_j=NAN)
    legacy = _cell("l", no_power, axes={"source": "legacy"})
    assert energy.unavailable_reason(legacy) == (
        "not recorded: RLlib 1.x logged GPU utilisation, not power"
    )
    assert energy.unavailable_reason(_cell("n", None, nvml_unavailable_reason="no driver")) == (
        "NVML unavailable: no driver"
    )
    assert energy.unavailable_reason(_cell("z", None, gpu_count=0)) == (
        "NVML sees no GPU on this machine"
    )
    cpu_rows = pd.DataFrame({EXCLUDED_COLUMN: [""], "iter_s": [1.0]})
    for df in (None, cpu_rows):
        assert energy.unavailable_reason(_cell("c", df, gpu_count=1)) == (
            "no GPU monitored (telemetry disabled, or an older rlperf)"
        )
    assert energy.unavailable_reason(_cell("u", no_power, gpu_count=1)) == (
        "NVML gave no power or energy reading for the monitored GPUs"
    )
    assert energy.energy_summary(_cell("z", None, gpu_count=0)) == {
        "energy_unavailable": "NVML sees no GPU on this machine"
    }


def test_job_energy_without_a_counter_is_nan() -> None:
    assert math.isnan(energy.job_energy(None))
    assert math.isnan(energy.job_energy(pd.DataFrame()))
    assert math.isnan(energy.job_energy(pd.DataFrame({"gpu0_power_w": [1.0]})))
    assert math.isnan(energy.job_energy(pd.DataFrame({"gpu0_energy_j": [NAN, "x"]})))
    assert energy.job_energy(pd.DataFrame({"gpu0_energy_j": [1.0, 2.5, NAN]})) == 2.5


def test_the_power_timeline_sums_the_gpus() -> None:
    telemetry = pd.DataFrame(
        {"time_s": [0.0, 1.0, 2.0, NAN], "gpu0_power_w": [10.0, NAN, NAN, 1],
         "gpu1_power_w": [5.0, 7.0, NAN, 1], "cpu_util_pct": [1, 2, 3, 4]}
    )  # fmt: skip
    timeline = energy.power_timeline(telemetry)
    assert timeline.to_dict("list") == {"time_s": [0.0, 1.0], "gpu_power_w": [15.0, 7.0]}
    for empty in (None, pd.DataFrame()):
        assert list(energy.power_timeline(empty).columns) == ["time_s", "gpu_power_w"]
        assert energy.power_timeline(empty).empty


def test_the_methods_paragraph_counts_what_could_not_be_measured() -> None:
    cells = [_cell(c, None) for c in ("a", "b", "c", "d")]
    cells += [_cell("f", None, status="failed"), _cell("r", None, axes={"stage": "rollout"})]
    summaries = pd.DataFrame({"cell": ["a", "b", "c"],
                              "energy_unavailable": ["", "NVML unavailable: x", NAN]})  # fmt: skip
    text = energy.energy_text(cells, summaries)
    assert text.startswith("**Energy.** GPU energy per iteration is the NVML total-energy ")
    assert (
        "Measured for 2 of 4 completed training run(s); not measurable for 1 (NVML "
        "unavailable: x); 1 (not summarised). CPU energy is the CPU packages' RAPL counters"
    ) in text
    # These cells have no summary.json record: their CPU energy says why, once for all.
    assert text.endswith("measured for 0 of 4; 4: not measured here: no record (telemetry "
                         "disabled, or an older rlperf).")  # fmt: skip
    everything = energy.energy_text(cells[:1], summaries)
    assert "Measured for 1 of 1 completed training run(s). CPU energy" in everything
    assert (
        "Measured for 0 of 1 completed training run(s); not measurable for 1 (not summarised). CPU"
    ) in energy.energy_text(cells[:1], pd.DataFrame({"cell": ["a"]}))
    assert energy.energy_text(cells[4:], summaries) == ""
    indexed = summaries.set_index("cell")
    assert (
        "of 2 completed training run(s); not measurable for 1 (NVML unavailable: x). CPU"
    ) in energy.energy_text(cells[:2], indexed)


def test_unreadable_values_count_as_missing() -> None:
    df = pd.DataFrame({"iter_s": [2.0, "n/a"], "gpu0_power_w": [10.0, 10.0],
                       "gpu0_energy_j": ["n/a", 7.0]})  # fmt: skip
    out = energy.add_energy_columns(df)
    assert out["gpu_energy_j"].tolist() == [20.0, 7.0]
    assert out["gpu_energy_source"].tolist() == ["power × time", "counter"]
    # No GPU with a counter column at all: power x time everywhere.
    power_only = energy.add_energy_columns(pd.DataFrame({"iter_s": [3.0], "gpu1_power_w": [5.0]}))
    assert power_only["gpu_energy_j"].tolist() == [15.0]
    assert power_only["gpu_energy_source"].tolist() == ["power × time"]
    telemetry = pd.DataFrame({"time_s": [0.0, "?", 2.0], "gpu0_power_w": [1.0, 2.0, "?"]})
    assert energy.power_timeline(telemetry).to_dict("list") == {
        "time_s": [0.0], "gpu_power_w": [1.0]
    }  # fmt: skip


def test_a_run_with_a_reason_has_only_the_reason() -> None:
    legacy = _cell("l", _rows().assign(gpu_energy_j=NAN), axes={"source": "legacy"})
    assert energy.energy_summary(legacy) == {
        "energy_unavailable": "not recorded: RLlib 1.x logged GPU utilisation, not power"
    }


def test_one_counted_iteration_and_one_step_are_enough() -> None:
    rows = energy.add_energy_columns(
        pd.DataFrame({EXCLUDED_COLUMN: ["warmup", ""], "iter_s": [1.0, 1.0],
                      "env_steps": [5.0, 1.0], "trained_steps": [5.0, 1.0],
                      "gpu0_power_w": [9.0, 4.0], "gpu0_energy_j": [9.0, 4.0]})
    )  # fmt: skip
    summary = energy.energy_summary(_cell("one", rows))
    assert summary["gpu_energy_j"] == 4.0
    assert (summary["energy_per_env_step_j"], summary["energy_per_trained_step_j"]) == (4.0, 4.0)


def test_the_whole_methods_paragraph() -> None:
    cells = [_cell(c, None) for c in ("a", "b", "c")]
    why = "NVML unavailable: x"
    summaries = pd.DataFrame({"cell": ["a", "b", "c"], "energy_unavailable": ["", why, why]})
    assert energy.energy_text(cells, summaries) == (
        "**Energy.** GPU energy per iteration is the NVML total-energy counter's difference "
        "over the iteration, or, on a GPU without that counter, its mean board power × the "
        "iteration time (`energy_source` says which); tables give it per sampled env step and "
        "per trained step over the iterations that count, summed over the monitored GPUs. "
        "Measured for 1 of 3 completed training run(s); not measurable for 2 (NVML "
        "unavailable: x). CPU energy is the CPU packages' RAPL counters (Linux powercap, "
        "top-level zones) differenced over each iteration, never estimated: measured for 0 of "
        "3; 3: not measured here: no record (telemetry disabled, or an older rlperf)."
    )


def test_cpu_energy_per_run_or_why_not() -> None:
    """RAPL's per-iteration joules summed over the iterations that count, per 1 000 env
    steps; where the job read none, the reason its summary.json recorded."""
    rows = _rows().assign(cpu_energy_j=[500.0, 30.0, 50.0, 999.0])  # warm-up, 2 counted, fault
    measured = _cell("m", rows, summary={"cpu_energy": {"measured": True, "job_j": 1600.0}})
    assert energy.cpu_energy_summary(measured) == {
        "cpu_energy_j": 80.0,
        "cpu_energy_per_1k_env_steps_j": 80.0,  # 80 J over 400 + 600 env steps
        "job_cpu_energy_j": 1600.0,
        "cpu_energy_unavailable": "",
    }
    why = "no RAPL counter: /sys/class/powercap has no intel-rapl package zone"
    absent = _cell("a", _rows(), summary={"cpu_energy": {"unavailable_reason": why}})
    assert energy.cpu_energy_summary(absent) == {
        "cpu_energy_unavailable": f"not measured here: {why}"
    }
    legacy = _cell("l", _rows(), axes={"source": "legacy"})
    assert energy.cpu_unavailable_reason(legacy).startswith("not measured here: RLlib 1.x")
