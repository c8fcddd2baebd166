"""GPU power and energy in the report: per iteration, per env step and per trained step,
the whole job's energy from telemetry.csv, the power figure, and why a CPU-only run
has none.

The GPU run's files are written by rlperf's own telemetry sampler reading the fake
NVML of tests/fakes/pynvml.py (a card with an energy counter drawing 200 W and one
without a counter drawing 100 W), the way the training loop uses it
(docs/telemetry.md): ``mark()`` at the iteration boundaries, ``window()`` per row.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from fakes.pynvml import FakeGpu, FakePynvml
from support import synthetic

from rlperf.layout import METRICS_FILE, TELEMETRY_FILE
from rlperf.report import build_report
from rlperf.report.read.discover import CellRef
from rlperf.report.read.legacy import load_tune_run
from rlperf.results.columns import ALGO_COLUMNS, TRAIN_COLUMNS
from rlperf.telemetry.sampler import TelemetrySampler, gpu_columns
from tests.conftest import NOT_BLANK_PNG_BYTES, THESIS

NO_NVML = "nvmlInit failed (NVMLError_LibraryNotFound: NVML Shared Library Not Found)"


def _train_on_fake_gpus(run: Path, iterations: int = 5) -> pd.DataFrame:
    """metrics.csv rows of a run on the two fake cards; telemetry.csv is the sampler's."""
    cards = [
        FakeGpu(power_w=200.0, energy_mj=0, energy_rate_w=200.0, util_pct=80, uuid="GPU-0"),
        FakeGpu(power_w=100.0, energy_mj=None, util_pct=40, uuid="GPU-1"),
    ]
    rows = []
    run.mkdir(parents=True)
    with TelemetrySampler(run / TELEMETRY_FILE, interval_s=0.02,
                          pynvml_module=FakePynvml(cards)) as sampler:  # fmt: skip
        for it in range(1, iterations + 1):
            t0 = sampler.mark()
            time.sleep(0.08)
            t1 = sampler.mark()
            iter_s = t1 - t0
            row = {
                "iteration": it,
                "time_s": t1,
                "train_time_s": t1,
                "excluded": "warmup" if it == 1 else "",
                "sample_s": 0.5 * iter_s,
                "load_s": 0.1 * iter_s,
                "learn_s": 0.3 * iter_s,
                "sync_s": 0.05 * iter_s,
                "iter_s": iter_s,
                "other_s": 0.05 * iter_s,
                "eval_s": 0.0,
                "env_steps": 1000,
                "env_steps_per_s": 1000 / iter_s,
                "sampling_efficiency": 1000 / (0.5 * iter_s) / 2600.0,
                "trained_steps": 3000,
                "trained_steps_per_s": 3000 / (0.3 * iter_s),
                "episodes": 1,
                "episode_return_mean": -20.0,
                "eval_return_mean": float("nan"),
                "eval_episodes": 0,
                # PPO: one learner update per iteration; replay/async columns stay empty.
                "learner_updates": 1,
                **dict.fromkeys(ALGO_COLUMNS[1:], float("nan")),
                "cpu_util_pct": 50.0,
                "ram_util_pct": 20.0,
                "env_runners_healthy": 1,
                "env_runner_restarts": 0,
                "env_runners_lost": 0,
                "learner_failures": 0,
            }
            row.update(sampler.window(t0, t1))
            rows.append(row)
    # Columns this test does not fill stay empty (not measured), as the writer leaves them.
    return pd.DataFrame(rows).reindex(columns=[*TRAIN_COLUMNS, *gpu_columns([0, 1])])


@pytest.fixture(scope="module")
def gpu_and_cpu_runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("energy") / "sweep"
    gpu = root / "0"
    metrics = _train_on_fake_gpus(gpu)
    cfg = synthetic.resolved_config(model="model1", gpu_layout="both", iterations=len(metrics))
    fp = synthetic.fingerprint(gpus=("NVIDIA Fake A100", "NVIDIA Fake T4"))
    synthetic.write_cell(gpu, synthetic.CellSpec(cfg, synthetic.overrides_for(cfg), fp,
                                                 synthetic.train_summary(metrics, "model1"),
                                                 metrics))  # fmt: skip
    source = THESIS / "ray_results" / "volta1_def" / "model1_no_gpus_8_workers"
    legacy = load_tune_run(CellRef(source, "tune", source.name, "volta1_def"))
    assert legacy.iterations is not None
    cpu_metrics = synthetic.train_metrics_from(legacy.iterations, 8, gpus=())
    cpu_cfg = synthetic.resolved_config(model="model1", gpu_layout="none", iterations=8)
    cpu_fp = {**synthetic.fingerprint(gpus=(), start_time="2026-12-02T10:00:00+00:00"),
              "nvml_unavailable_reason": NO_NVML}  # fmt: skip
    synthetic.write_cell(root / "1", synthetic.CellSpec(
        cpu_cfg, synthetic.overrides_for(cpu_cfg), cpu_fp,
        synthetic.train_summary(cpu_metrics, "model1"), cpu_metrics))  # fmt: skip
    return root


@pytest.fixture(scope="module")
def report(gpu_and_cpu_runs: Path):
    return build_report([gpu_and_cpu_runs], gpu_and_cpu_runs.parent / "report")


def test_counter_differences_agree_with_power_times_time(gpu_and_cpu_runs):
    """The card with a counter: its per-iteration counter differences are its 200 W times
    the iteration time (the fake's counter grows at 200 W, read at the boundaries)."""
    metrics = pd.read_csv(gpu_and_cpu_runs / "0" / METRICS_FILE)
    np.testing.assert_allclose(metrics["gpu0_energy_j"], 200.0 * metrics["iter_s"], rtol=0.02)
    assert metrics["gpu0_power_w"].eq(200.0).all() and metrics["gpu1_energy_j"].isna().all()


def test_energy_per_iteration_and_per_step(gpu_and_cpu_runs, report):
    metrics = pd.read_csv(gpu_and_cpu_runs / "0" / METRICS_FILE)
    it = report.iterations[report.iterations["cell"] == "sweep/0"].reset_index(drop=True)
    # GPU 0 by its counter, GPU 1 (no counter) by its power times the iteration time.
    expected = metrics["gpu0_energy_j"] + 100.0 * metrics["iter_s"]
    np.testing.assert_allclose(it["gpu_energy_j"], expected, rtol=1e-9)
    assert it["gpu_power_w"].eq(300.0).all()
    assert set(it["gpu_energy_source"]) == {"counter + power × time"}
    row = report.runs.set_index("cell").loc["sweep/0"]
    kept = metrics["excluded"].isna()
    energy = float(expected[kept].sum())
    assert row["gpu_energy_j"] == pytest.approx(energy)
    assert row["energy_per_env_step_j"] == pytest.approx(energy / (1000 * kept.sum()))
    assert row["energy_per_trained_step_j"] == pytest.approx(energy / (3000 * kept.sum()))
    assert (row["gpu_power_w_mean"], row["energy_source"]) == (300.0, "counter + power × time")
    assert row["energy_unavailable"] == ""


def test_job_energy_comes_from_telemetry(gpu_and_cpu_runs, report):
    """The whole job's energy: the last cumulative counter of telemetry.csv (GPU 0 only: GPU 1
    has no counter), which includes the time between iterations."""
    tele = pd.read_csv(gpu_and_cpu_runs / "0" / TELEMETRY_FILE)
    row = report.runs.set_index("cell").loc["sweep/0"]
    assert row["job_gpu_energy_j"] == pytest.approx(tele["gpu0_energy_j"].iloc[-1])
    metrics = pd.read_csv(gpu_and_cpu_runs / "0" / METRICS_FILE)
    assert row["job_gpu_energy_j"] >= metrics["gpu0_energy_j"].sum()
    assert row["job_gpu_energy_j"] == pytest.approx(200.0 * tele["time_s"].iloc[-1], rel=0.1)


def test_tables_and_figure(report):
    md = report.markdown.read_text()
    assert "| GPU W | GPU J/env step | GPU J/trained step |" in md
    assert "Measured for 1 of 2 completed training run(s); not measurable for 1 " in md
    assert f"(NVML unavailable: {NO_NVML})" in md
    assert "gpu_power" in report.figures
    assert report.figures["gpu_power"].stat().st_size > NOT_BLANK_PNG_BYTES


def test_cpu_only_run_says_why_it_has_no_energy(report):
    cpu = report.runs.set_index("cell").loc["sweep/1"]
    assert cpu["energy_unavailable"] == f"NVML unavailable: {NO_NVML}"
    assert pd.isna(cpu["gpu_energy_j"])


def test_a_cpu_only_report_has_no_power_figure_and_says_why(gpu_and_cpu_runs, tmp_path):
    res = build_report([gpu_and_cpu_runs / "1"], tmp_path)
    assert (
        res.figures_skipped["gpu_power"]
        == f"no GPU power recorded: NVML unavailable: {NO_NVML} (1 runs)"
    )
    assert "GPU J/env step" not in res.markdown.read_text()


def test_legacy_runs_recorded_no_power(tmp_path):
    res = build_report([THESIS / "ray_results" / "volta1_def"], tmp_path, figures=False)
    reasons = set(res.runs["energy_unavailable"])
    assert reasons == {"not recorded: RLlib 1.x logged GPU utilisation, not power"}
