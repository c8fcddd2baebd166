"""The legacy importer on real data of the 2021 study (tests/data/thesis, MIT, see its README)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from rlperf.config.models import study_models
from rlperf.report.build import build_report
from rlperf.report.read.cells import STUDY_MODELS, match_model
from rlperf.report.read.collect import dedupe, load_cells
from rlperf.report.read.discover import CellRef, discover
from rlperf.report.read.legacy import cpu_affinity_from, dewindow, load_rollout_csv, load_tune_run
from rlperf.results.columns import PHASES
from tests.conftest import THESIS

RUNS = THESIS / "ray_results"


def _tune(run: str):
    return load_tune_run(CellRef(RUNS / run, "tune", run, run.split("/")[0]))


@pytest.mark.parametrize(
    ("run", "model", "layout", "workers", "affinity", "mode", "driver_gpus"),
    [
        ("volta1_def/model1_gpu0_8_workers", "model1", "gpu0", 8, "unrestricted", "shared", 1e-4),
        ("volta1_def/model1_gpu0_driver_8_workers", "model1", "gpu0_driver", 8, "unrestricted",
         "driver", 1.0),
        ("volta1_def/model1_no_gpus_8_workers", "model1", "none", 8, "unrestricted", "none", 0.0),
        ("volta1_def/model1_both_gpus_16_workers", "model1", "both", 16, "unrestricted", "shared",
         1e-4),
        ("volta1_def/model1_both_gpus_4_workers", "model1", "both", 4, "unrestricted", "shared",
         1e-3),
        ("volta1_def/model3_gpu0_8_workers", "model3", "gpu0", 8, "unrestricted", "shared", 1e-4),
        ("volta1_def/model4_gpu1_driver_8_workers", "model4", "gpu1_driver", 8, "unrestricted",
         "driver", 1.0),
        ("volta1_cpus/model1_gpu0_no_cpu_limit_8_workers", "model1", "gpu0", 8, "unrestricted",
         "shared", 1e-4),
        ("volta1_cpus/model1_gpu0_9_cpus_no_set_affinity_8_workers", "model1", "gpu0", 8,
         "ray_cpus", "shared", 1e-4),
        ("volta1_cpus/model1_gpu0_9_cpus_set_affinity_8_workers", "model1", "gpu0", 8, "pinned",
         "shared", 1e-4),
    ],
)  # fmt: skip
def test_axes_of_named_runs(run, model, layout, workers, affinity, mode, driver_gpus):
    cell = _tune(run)
    assert cell.axes == {
        "source": "legacy",
        "stage": "train",
        "model": model,
        "gpu_layout": layout,
        "workers": workers,
        "cpu_affinity": affinity,
        "backend": "rllib",
        "algo": "ppo",
        "env": None,
    }
    assert cell.leaves["gpu_layout.mode"] == mode
    assert cell.leaves["gpu_layout.driver_gpus"] == pytest.approx(driver_gpus)
    assert cell.leaves["algo.train_batch_size"] == 4000
    assert any("10-iteration window" in n for n in cell.notes)


def test_study_models_agree_with_the_shipped_model_presets():
    """The report names legacy models from its own table of the study's conv stacks (it
    reads no config); the shipped conf/model presets must still say the same."""
    assert study_models() == STUDY_MODELS
    assert match_model(84, None) == "model1"  # RLlib 1.x's default stack for 84 px


def test_no_cpus_run_differs_only_in_a_leaf():
    shared, no_cpus = (
        _tune("volta1_def/model1_gpu0_8_workers"),
        _tune("volta1_def/model1_gpu0_no_cpus_8_workers"),
    )
    assert shared.axes == no_cpus.axes
    assert (shared.leaves["workers.num_cpus_per_worker"],
            no_cpus.leaves["workers.num_cpus_per_worker"]) == (1, 0)  # fmt: skip


@pytest.mark.parametrize(
    ("name", "affinity"),
    [
        ("model1_gpu0_3_cpus_2_workers", "ray_cpus"),
        ("model1_gpu0_cpu0_8_workers", "pinned_cpu0"),
        ("model1_gpu0_no_cpus_8_workers", "unrestricted"),
        ("model1_gpu0_no_cpu_limit_2_workers", "unrestricted"),
    ],
)
def test_cpu_affinity_from_other_study_names(name, affinity):
    assert cpu_affinity_from(name) == affinity


def test_dewindow_inverts_a_sliding_mean_exactly():
    rng = np.random.default_rng(1)
    x = rng.uniform(1, 10, 25)
    window_means = [x[max(0, k - 9) : k + 1].mean() for k in range(len(x))]
    np.testing.assert_allclose(dewindow(np.array(window_means)), x, rtol=1e-9)


def test_reconstructed_phases_add_up_to_the_iteration():
    cell = _tune("volta1_def/model3_gpu0_8_workers")
    it = cell.iterations
    # Phase times per iteration: non-negative, and the remainder (other_s) is the
    # few hundred ms of bookkeeping per iteration, in every one of the 20 iterations.
    assert (it[list(PHASES)] >= 0).all().all()
    assert it["other_s"].between(0.1, 0.5).all()
    # The last window mean is the mean of the last 10 reconstructed values.
    assert it["learn_s"].iloc[-10:].mean() == pytest.approx(it["learn_s_win10"].iloc[-1])
    # Iteration 1 includes TensorFlow's graph building: 44.9 s of learning vs ~25 s later.
    assert it["learn_s"].iloc[0] == pytest.approx(44.901765)
    assert it["learn_s"].iloc[-1] == pytest.approx(25.5, abs=1.0)


def test_units_are_converted():
    cell = _tune("volta1_def/model1_gpu0_8_workers")
    raw = pd.read_csv(RUNS / "volta1_def/model1_gpu0_8_workers/progress.csv")
    it = cell.iterations
    np.testing.assert_allclose(it["gpu0_util_pct"], raw["perf/gpu_util_percent0"] * 100)
    np.testing.assert_allclose(it["gpu0_mem_used_pct"], raw["perf/vram_util_percent0"] * 100)
    np.testing.assert_allclose(it["cpu_util_pct"], raw["perf/cpu_util_percent"])
    assert it["env_steps"].tolist() == [4800.0] * 20
    assert it["trained_steps"].iloc[5] == 4800 * 30  # 30 SGD epochs over each sample


def test_warmup_rule_changes_the_means_as_documented():
    """docs/report.md, "Warm-up": model1_gpu0_8_workers has no finished episode before
    iteration 4, so iterations 1-3 are warm-up; dropping them moves the mean time per
    iteration from 16.08 s to 15.16 s and the mean learn time from 10.37 s to 9.57 s (the
    study's average of window means after the same cut, 10.61 s, still carries iteration
    1's 25.8 s through the windows of iterations 4-10)."""
    cell = _tune("volta1_def/model1_gpu0_8_workers")
    it = cell.iterations
    assert it.loc[it["excluded"] == "warmup", "iteration"].tolist() == [1, 2, 3]
    assert it["episode_return_mean"].iloc[:3].isna().all()
    kept = it[it["excluded"] == ""]
    assert it["iter_s"].mean() == pytest.approx(16.0756, abs=1e-4)
    assert kept["iter_s"].mean() == pytest.approx(15.1621, abs=1e-4)
    assert it["learn_s"].mean() == pytest.approx(10.3700, abs=1e-4)
    assert kept["learn_s"].mean() == pytest.approx(9.5663, abs=1e-4)
    assert kept["learn_s_win10"].mean() == pytest.approx(10.6083, abs=1e-4)


@pytest.mark.parametrize("backend", ["rllib", "tflite", "quant_tflite", "edgetpu"])
def test_rollout_csvs_reproduce_the_study_averages(backend):
    path = THESIS / "rollout_results" / "artecslab001" / f"model1_{backend}.csv"
    variant = "episode_means_rllib" if backend == "rllib" else "episode_means"
    cell = load_rollout_csv(CellRef(path, "rollout_csv", path.stem, "artecslab001", variant))
    study = pd.read_csv(THESIS / "result_analysis" / f"results_artecslab001_{backend}.csv")
    row = study[study["model"] == 1].iloc[0]
    assert cell.latency["action_ms"].mean() == pytest.approx(row["average_time_per_step_ms"])
    assert cell.latency["n_steps"].mean() == pytest.approx(row["average_steps_per_episode"])
    assert cell.episodes["return"].mean() == pytest.approx(row["average_reward_per_episode"])
    expected = {
        "rllib": ("rollout", "rllib"),
        "tflite": ("edge", "tflite_fp32"),
        "quant_tflite": ("edge", "tflite_int8"),
        "edgetpu": ("edge", "edgetpu"),
    }
    assert (cell.stage, cell.axes["backend"]) == expected[backend]  # fmt: skip
    assert cell.fingerprint["machine"] == "artecslab001"


def test_rllib_rollout_column_in_seconds_is_detected():
    path = THESIS / "rollout_results" / "artecslab001" / "model1_rllib.csv"
    raw = pd.read_csv(path)
    cell = load_rollout_csv(CellRef(path, "rollout_csv", "r", "g", "episode_means_rllib"))
    # The file's step_time_ms column holds seconds: 0.00102 "ms" is really 1.02 ms.
    np.testing.assert_allclose(cell.latency["action_ms"], raw["step_time_ms"] * 1000, rtol=1e-6)
    assert any("holds seconds" in n for n in cell.notes)


def test_discovery_and_skips():
    disc = discover([THESIS])
    kinds = pd.Series([r.kind for r in disc.refs]).value_counts().to_dict()
    assert kinds == {"tune": 11, "rollout_csv": 6}
    cells, skipped = load_cells(disc.refs)
    reasons = {s.path.name: s.reason for s in skipped}
    assert "no timing recorded" in reasons["model1_10_workers_gpu0.csv"]
    # volta1_def/model1_gpu0_8_workers is a byte-identical copy of a volta1_cpus run.
    assert (
        "same run as `thesis/ray_results/volta1_cpus/model1_gpu0_no_cpu_limit_8_workers`"
        in (reasons["model1_gpu0_8_workers"])
    )
    assert len(cells) == 17 - 2
    assert dedupe(cells, [])[0] == cells


def test_report_on_the_study_data(tmp_path):
    res = build_report([THESIS], tmp_path / "rep", figures=False)
    runs = pd.read_csv(tmp_path / "rep" / "runs.csv")
    assert len(runs) == 15 and runs["cell"].is_unique and runs["label"].is_unique
    train = runs[runs["family"] == "training"].set_index("cell")
    fastest = train.loc[train["model"] == "model1", "objective_value"].idxmin()
    assert fastest.endswith("model1_gpu0_driver_8_workers")
    # Ranked on time per 1 000 env steps: 12.03 s per 4 800-step iteration.
    assert train.loc[fastest, "objective"] == "time per 1 000 env steps"
    assert train.loc[fastest, "objective_value"] == pytest.approx(2.505, abs=0.001)
    assert train.loc[fastest, "iter_s_mean"] == pytest.approx(12.03, abs=0.01)
    assert train.loc[fastest, "throughput"] == pytest.approx(399.1, abs=0.1)
    slowest = train.loc[train["model"] == "model1", "objective_value"].idxmax()
    assert slowest.endswith("model1_no_gpus_8_workers")  # default speedup baseline
    assert train.loc[slowest, "speedup"] == pytest.approx(1.0)
    assert train.loc[fastest, "speedup"] == pytest.approx(43.2, abs=0.1)
    # Labels name the varying values; the odd num_cpus_per_worker=0 run is marked.
    labels = set(train["label"])
    assert "model1 · gpu0 · 8 workers · pinned" in labels
    assert "model1 · gpu0 · 8 workers · all CPUs · num_cpus_per_worker=0" in labels
    # The inference table mixes volta1 (RLlib with 8 workers) and artecslab001: flagged.
    assert ("inference", "model1") in res.mixed
    md = (tmp_path / "rep" / "report.md").read_text()
    assert md.count("rows of this table were recorded on different hardware") == 1
    assert "sliding window of the last 10 iterations" in md
    assert "iterations before the first finished episode" in md
    assert "1 unreadable and 1 duplicate folders skipped" in md
    assert "1 duplicate folder(s), copies of a run already read" in md


def test_phase_times_both_ways_side_by_side(tmp_path):
    """docs/report.md, "Warm-up": the study's way (mean of the logged 10-iteration window
    means after the warm-up cut) gives model1_gpu0_8_workers a learn time of 10.61 s where
    the per-iteration times give 9.57 s; the report shows both, and the difference."""
    res = build_report([RUNS / "volta1_cpus"], tmp_path, figures=False)
    runs = res.runs.set_index("cell")
    row = runs.loc["volta1_cpus/model1_gpu0_no_cpu_limit_8_workers"]
    assert row["learn_s_study_mean"] == pytest.approx(10.6083, abs=1e-4)
    assert row["learn_s_mean"] == pytest.approx(9.5663, abs=1e-4)
    assert row["iter_s_mean"] == pytest.approx(15.1621, abs=1e-4)  # the same both ways
    md = (tmp_path / "report.md").read_text()
    assert "| learn s: study / rlperf (Δ) |" in md
    assert "| all CPUs | 15.16 | 5.35 / 5.25 (-1.8%) | 0.173 / 0.126 (-27.2%) | " in md
    assert "10.6 / 9.57 (-9.8%)" in md
    legacy = [f for f in res.findings if f.kind == "legacy"]
    assert len(legacy) == 1  # one per model; it names the fastest configuration (ray_cpus)
    assert "learn 10.48 s the study's way vs 9.43 s per iteration (-10.0%)" in legacy[0].text
    assert "differs from the study's by -15.2% to -9.8%" in legacy[0].text
    assert "rankings and speedups are the same both ways" in legacy[0].text
    one = build_report([RUNS / "volta1_def" / "model1_gpu0_8_workers"], tmp_path / "one",
                       figures=False)  # fmt: skip
    (finding,) = [f for f in one.findings if f.kind == "legacy"]
    assert "learn 10.61 s the study's way vs 9.57 s per iteration (-9.8%)" in finding.text
