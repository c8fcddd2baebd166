"""The whole pipeline for real: a training sweep, a rollout, an edge job, then the report."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from rlperf.layout import EFFECTIVE_CONFIG_FILE, METRICS_FILE, STEPS_FILE, SUMMARY_FILE
from tests.conftest import TINY_TRAIN, run_rlperf

pytestmark = pytest.mark.slow


def test_sweep_rollout_edge_then_report(tmp_path) -> None:
    from rlperf.report import build_report

    sweep = tmp_path / "sweep"
    train = [o for o in TINY_TRAIN if not o.startswith("workers=")]
    proc = run_rlperf(
        [
            "-m",
            *train,
            "workers=0,1",
            "train.iterations=2",
            "train.warmup_until_first_episode=false",
            f"hydra.sweep.dir={sweep}",
        ],
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    cells = sorted(p.parent for p in sweep.glob("*/summary.json"))
    assert len(cells) == 2
    for cell in cells:
        s = json.loads((cell / SUMMARY_FILE).read_text())
        assert s["status"] == "completed" and s["iterations"] == 2
        assert len(pd.read_csv(cell / METRICS_FILE)) == 2

    run = cells[0]
    rollout = tmp_path / "rollout"
    proc = run_rlperf(
        [
            "stage=rollout",
            f"run={run}",
            "rollout.steps=120",
            "rollout.warmup_steps=20",
            "workers=0",
            f"hydra.run.dir={rollout}",
        ],
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    steps = pd.read_csv(rollout / STEPS_FILE)
    assert len(steps) == 120 and int(steps["excluded"].eq("warmup").sum()) == 20
    # The downstream job ran the run's model, and says so.
    assert "name: tiny" in (rollout / EFFECTIVE_CONFIG_FILE).read_text()

    edge = tmp_path / "edge"
    proc = run_rlperf(
        [
            "stage=edge",
            f"run={run}",
            "backend=tflite_fp32",
            "edge.steps=80",
            "edge.warmup_steps=10",
            "edge.calibration_size=40",
            "edge.fidelity_observations=40",
            f"edge.cache_dir={tmp_path / 'cache'}",
            f"hydra.run.dir={edge}",
        ],
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    es = json.loads((edge / SUMMARY_FILE).read_text())
    assert es["status"] == "completed"
    assert es["fidelity"]["agreement"] == pytest.approx(1.0)  # fp32 acts like torch

    report = build_report([sweep, rollout, edge], tmp_path / "report")
    runs = report.runs
    assert len(runs) == 4  # 2 training cells, 1 rollout, 1 edge: one row per cell
    assert sorted(runs["stage"]) == ["edge", "rollout", "train", "train"]
    assert set(runs.loc[runs["stage"] == "train", "workers"].astype(int)) == {0, 1}
    assert len(report.iterations) == 4  # 2 cells x 2 iterations
    for name, path in report.figures.items():
        assert path.stat().st_size > 1000, name
    names = set(runs["cell"])
    assert report.findings
    for finding in report.findings:
        assert finding.cells and set(finding.cells) <= names
    assert (tmp_path / "report" / "runs.csv").is_file()
    assert (tmp_path / "report" / "report.html").stat().st_size > 10_000
