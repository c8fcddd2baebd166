"""A real downstream sweep over the tests' real training sweep (``tiny_sweep``).

The edge stage's ``rllib`` backend plays the torch policy (no TensorFlow), so
the cells are quick; the fan-out and pairing are the sweeper's, the same for
every backend and for the rollout stage (tests/sweep/test_upstream_jobs.py).
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from rlperf.layout import STEPS_FILE, SUMMARY_FILE
from rlperf.sweep.index import SweepIndex
from tests.conftest import run_rlperf

pytestmark = pytest.mark.slow

EDGE_SMALL = (
    "edge.steps=40",
    "edge.warmup_steps=10",
    "edge.fidelity_observations=20",
    "edge.calibration_size=20",
    "edge.isolate=false",  # the benchmark in the job's process: quicker
)


def test_an_edge_sweep_fans_out_over_the_training_jobs(tiny_sweep: Path, tmp_path: Path) -> None:
    out = tmp_path / "edge"
    proc = run_rlperf(
        [
            "-m",
            "stage=edge",
            f"run={tiny_sweep}",
            "backend=rllib",
            "model=tiny,model1",  # tiny: the jobs 0 and 1; model1: none
            *EDGE_SMALL,
            f"edge.cache_dir={tmp_path / 'cache'}",
            f"hydra.sweep.dir={out}",
        ],
        cwd=tmp_path,
    )
    # The cell without a matching job is invalid (a user error: exit 2); the paired cells ran.
    assert proc.returncode == 2, proc.stderr[-3000:]
    cells = sorted(SweepIndex.load(out).cells.values(), key=lambda r: r.job_num)
    assert [(r.status, r.upstream) for r in cells] == [
        ("completed", "0 (model=tiny, workers=0)"),
        ("completed", "1 (model=tiny, workers=1)"),
        ("invalid", None),
    ]
    assert [o for o in cells[0].overrides if o.startswith("run=")] == [f"run={tiny_sweep}/0"]
    assert len({r.hash for r in cells}) == 3  # the upstream job is part of each cell's identity
    assert "no trained job matches model=model1; the folder holds 0 (model=tiny, workers=0), " in (
        str(cells[2].reason)
    )
    assert "3 (model=tiny2, workers=1)" in str(cells[2].reason)
    for rec, job in zip(cells[:2], ("0", "1"), strict=True):
        summary = json.loads((out / rec.subdir / SUMMARY_FILE).read_text())
        source = summary["source"]
        assert (source["run"], source["sweep"], source["job"]) == (
            str(tiny_sweep / job),
            str(tiny_sweep),
            job,
        )
        assert source["identity"]["workers"] == int(job) and source["model"] == "tiny"
        assert len(pd.read_csv(out / rec.subdir / STEPS_FILE)) == 40
    # The final table names each cell's upstream job.
    table = proc.stderr[proc.stderr.rindex("] cells:") :]
    assert "upstream" in table.splitlines()[1] and "1 (model=tiny, workers=1)" in table
