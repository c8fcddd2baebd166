"""Repeats: cells that differ only in ``seed`` are pooled into one configuration.

A real 2-seed tiny sweep through the ``rlperf`` entry point (one Ray, ~1-2 min,
shared by the slow tests of this module), and synthetic sweeps of the study's
data (tests/support/synthetic.py) for the edge cases.
"""

from __future__ import annotations

import json
import math
import re
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from support import synthetic

from rlperf.layout import CELL_FILE, FINGERPRINT_FILE, METRICS_FILE, SUMMARY_FILE
from rlperf.report import build_report
from rlperf.report.cli import main
from tests.conftest import THESIS, TINY_TRAIN, run_rlperf, succeeded

T_975_1DF = 12.706204736174704


@pytest.fixture(scope="module")
def two_seeds(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``rlperf -m model=tiny seed=0,1 workers=0 ...``: two runs of one configuration."""
    root = tmp_path_factory.mktemp("repeats")
    tiny = [o for o in TINY_TRAIN if not o.startswith(("workers=", "train.iterations="))]
    args = ["-m", *tiny, "workers=0", "seed=0,1", "train.iterations=3",
            "train.warmup_iterations=1", "train.warmup_until_first_episode=false",
            f"hydra.sweep.dir={root / 'sweep'}"]  # fmt: skip
    proc = run_rlperf(args, cwd=root)
    succeeded(proc)
    return root / "sweep"


@pytest.fixture(scope="module")
def report(two_seeds: Path):
    return build_report([two_seeds], two_seeds.parent / "report")


def _kept(cell: Path) -> pd.DataFrame:
    metrics = pd.read_csv(cell / METRICS_FILE)
    kept = metrics[metrics["excluded"].fillna("").eq("")]
    assert len(kept) == 2  # 3 iterations, the first one warm-up
    return kept


def _own_mean(cell: Path) -> float:
    """The run's objective: its time per 1 000 env steps over the kept iterations."""
    kept = _kept(cell)
    return 1000 * float(kept["iter_s"].sum()) / float(kept["env_steps"].sum())


@pytest.mark.slow
def test_two_seeds_are_one_configuration_with_a_run_to_run_interval(two_seeds, report):
    runs = pd.read_csv(report.out / "runs.csv").set_index("cell")
    ids = ["sweep/0", "sweep/1"]
    assert list(runs.index) == ids
    assert runs["label"].tolist() == ["tiny · seed=0", "tiny · seed=1"]
    assert runs["configuration"].tolist() == ["sweep/0", "sweep/0"]
    assert runs["repeats"].tolist() == [2, 2]
    # Every run keeps its own row and its own (within-run) estimate.
    own = [_own_mean(two_seeds / i.split("/")[1]) for i in ids]
    assert runs["objective_value"].tolist() == pytest.approx(own)
    assert (runs["objective_ci_low"] < runs["objective_value"]).all()

    confs = pd.read_csv(report.out / "configurations.csv")
    assert len(confs) == 1
    row = confs.iloc[0]
    assert (row["repeats"], row["runs"], row["cells"]) == (2, 2, "sweep/0; sweep/1")
    assert (row["interval"], row["objective_n"], row["label"]) == ("run to run", 2, "tiny")
    logs = np.log(own)
    half = T_975_1DF * logs.std(ddof=1) / np.sqrt(2)
    assert row["objective_value"] == pytest.approx(np.exp(logs.mean()))
    assert (row["objective_ci_low"], row["objective_ci_high"]) == pytest.approx(
        (np.exp(logs.mean() - half), np.exp(logs.mean() + half))
    )
    # Counts add up over the runs; means are averaged.
    assert row["iterations"] == 6 and row["warmup_iterations"] == 2
    iter_means = [float(_kept(two_seeds / i.split("/")[1])["iter_s"].mean()) for i in ids]
    assert row["iter_s_mean"] == pytest.approx(np.mean(iter_means))


@pytest.mark.slow
def test_findings_table_and_figure_say_how_many_runs(report):
    fastest = next(f for f in report.findings if f.kind == "fastest")
    assert "only one configuration (`all`, 2 runs: cells `sweep/0`, `sweep/1`)" in fastest.text
    assert "(95% CI over 2 runs, run to run)" in fastest.text
    spread = next(f for f in report.findings if f.kind == "repeats")
    assert "1 configuration(s) ran 2 times" in spread.text
    assert "each run's own interval spans at most ±" in spread.text
    md = report.markdown.read_text()
    assert "| rank | configuration | runs | iters (warm-up) | time per 1 000 env steps (s)" in md
    assert "time per 1 000 env steps (s) [95% CI]" in md
    assert "| 1 | all | 2 | 6 (2) |" in md
    assert "| all | `sweep/0`, `sweep/1` |" in md  # the cells, under the table
    assert "1 of 1 configuration(s) ran more than once (2 runs)" in md
    # One configuration (its two runs pooled): no panel of intervals to compare.
    assert report.figures_skipped["intervals"].startswith("every family and workload has a single")


@pytest.mark.slow
def test_energy_is_measured_or_says_why(two_seeds, report):
    fp = json.loads((two_seeds / "0" / FINGERPRINT_FILE).read_text())
    runs = report.runs.set_index("cell")
    reason = fp["nvml_unavailable_reason"]
    if reason:  # a machine without NVML (the CI machine)
        assert runs["energy_unavailable"].tolist() == [f"NVML unavailable: {reason}"] * 2
        md = report.markdown.read_text()
        assert f"not measurable for 2 (NVML unavailable: {reason})" in md
        assert reason in report.figures_skipped["gpu_power"]
    else:
        assert (runs["gpu_energy_j"] > 0).all() and (runs["energy_per_env_step_j"] > 0).all()
        assert "gpu_power" in report.figures


@pytest.mark.slow
def test_gate_of_a_sweep_against_itself_is_a_tie(two_seeds, tmp_path, capsys):
    status = main([str(two_seeds), "--gate", str(two_seeds), "--no-figures", "-q",
                   "--out", str(tmp_path)])  # fmt: skip
    out = capsys.readouterr().out
    assert status == 0, out
    # Welch on the runs' logs, as every speedup: the same runs on both sides give 1.000x and
    # an interval symmetric about it on the log scale, as wide as two runs each allow.
    tie = re.search(r"TIE {10}training tiny: speedup 1\.000× \[([\d.]+), ([\d.]+)\]", out)
    assert tie, out
    low, high = float(tie[1]), float(tie[2])
    # The page prints three decimals: symmetric up to that rounding, however wide the runs'
    # spread made the interval (CI's loaded machine gave [0.126, 7.917]).
    assert low < 1 < high
    assert abs(math.log(low * high)) <= 0.0005 / low + 0.0005 / high + 1e-9
    assert "gate: passed (no regression beyond 5%)" in out
    gate = pd.read_csv(tmp_path / "gate.csv")
    assert gate["verdict"].tolist() == ["tie"] and gate["candidate_runs"].tolist() == [2]


# ------------------------------------------------------------------ synthetic edge cases


@pytest.fixture(scope="module")
def seeds_sweep(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The study's three CPU-restriction runs (cells 0-2: ray_cpus, pinned, all CPUs),
    twice each (seeds 0 and 1; cells 3-5); then a third, failed run of the first
    configuration (cell 6) is added and the seed-1 run of the last (cell 5) removed."""
    root = tmp_path_factory.mktemp("seeds") / "sweep"
    cells = synthetic.study_training_sweep(THESIS / "ray_results" / "volta1_cpus", root,
                                           iterations=12, n_cells=6)  # fmt: skip
    failed = root / "6"
    shutil.copytree(cells[0], failed)
    for f in (failed / ".hydra" / "config.yaml", failed / ".hydra" / "overrides.yaml"):
        f.write_text(f.read_text().replace("seed: 0", "seed: 9").replace("seed=0", "seed=9"))
    summary = json.loads((failed / SUMMARY_FILE).read_text())
    (failed / SUMMARY_FILE).write_text(json.dumps({**summary, "status": "failed"}))
    fp = json.loads((failed / FINGERPRINT_FILE).read_text())
    fp["start_time"] = "2027-01-01T00:00:00+00:00"  # a run of its own, not a copy of cell 0
    (failed / FINGERPRINT_FILE).write_text(json.dumps(fp))
    (failed / CELL_FILE).unlink()
    shutil.rmtree(cells[5])
    return root


@pytest.fixture(scope="module")
def seeds_report(seeds_sweep: Path):
    return build_report([seeds_sweep], seeds_sweep.parent / "report", figures=False)


def test_repeats_pool_completed_runs_and_keep_every_row(seeds_report):
    runs = seeds_report.runs.set_index("cell")
    assert len(runs) == 6 and runs["label"].is_unique
    first = runs.loc["sweep/0"]
    assert first["label"] == "model1 · ray_cpus · seed=0"
    members = runs[runs["configuration"] == "sweep/0"]
    assert sorted(members.index) == ["sweep/0", "sweep/3", "sweep/6"]
    assert members["status"].tolist().count("failed") == 1 and (members["repeats"] == 2).all()
    confs = seeds_report.configurations.set_index("configuration")
    assert len(confs) == 3
    pooled = confs.loc["sweep/0"]
    assert (pooled["repeats"], pooled["runs"], pooled["interval"]) == (2, 3, "run to run")
    values = runs.loc[["sweep/0", "sweep/3"], "objective_value"].to_numpy()
    assert pooled["objective_value"] == pytest.approx(np.exp(np.log(values).mean()))


def test_a_configuration_run_once_keeps_its_within_run_interval(seeds_report):
    confs = seeds_report.configurations.set_index("configuration")
    runs = seeds_report.runs.set_index("cell")
    once = confs.loc["sweep/2"]  # its seed=1 run (cell 5) was removed
    counted = runs.loc["sweep/2", "iterations"] - runs.loc["sweep/2", "warmup_iterations"]
    one_run = "one run: run-to-run spread not measured"
    assert (once["repeats"], once["interval"], once["objective_n"]) == (1, one_run, counted)
    for col in ("objective_value", "objective_ci_low", "objective_ci_high"):
        assert once[col] == runs.loc["sweep/2", col]
    assert once["label"] == "model1 · all CPUs" == runs.loc["sweep/2", "label"]


def test_baseline_matching_a_repeated_configuration_is_not_ambiguous(seeds_sweep, tmp_path):
    res = build_report([seeds_sweep], tmp_path, "cpu_affinity=pinned", figures=False)
    assert not [w for w in res.warnings if "ambiguous" in w]
    pinned = res.configurations.set_index("label").loc["model1 · pinned"]
    assert pinned["speedup"] == pytest.approx(1.0)
    assert res.analyses["training"].baselines == {"model1": pinned["configuration"]}


def test_a_repeat_without_counted_iterations_leaves_the_other_runs_interval(seeds_sweep, tmp_path):
    sweep = tmp_path / "sweep"
    shutil.copytree(seeds_sweep, sweep)
    metrics = pd.read_csv(sweep / "4" / METRICS_FILE)  # pinned, seed 1
    metrics.assign(excluded="warmup").to_csv(sweep / "4" / METRICS_FILE, index=False)
    res = build_report([sweep], tmp_path / "report", figures=False)
    pinned = res.configurations.set_index("configuration").loc["sweep/1"]
    own = res.runs.set_index("cell").loc["sweep/1"]
    assert (pinned["repeats"], pinned["interval"]) == (2, "one run: run-to-run spread not measured")
    assert pinned["objective_ci_high"] == own["objective_ci_high"]
    assert pd.isna(res.runs.set_index("cell").loc["sweep/4", "objective_value"])
