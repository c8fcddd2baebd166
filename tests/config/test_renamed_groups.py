"""Folders written before conf/'s groups were renamed read as folders written today.

``study_training_row`` became ``study/training_row`` (and ``study_rollout_row``,
``algo_sizes`` likewise, rlperf.layout.RENAMED_GROUPS). A training sweep recorded
before keeps the old name in ``.hydra/hydra.yaml`` and ``.hydra/overrides.yaml``: its
jobs must still match ``run_match``, and get the same labels downstream and in the report.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from rlperf.layout import (
    CONFIG_FILE,
    HYDRA_FILE,
    METRICS_FILE,
    OVERRIDES_FILE,
    RENAMED_GROUPS,
    SUMMARY_FILE,
    current_group,
)
from rlperf.report.read.discover import CellRef
from rlperf.report.read.load import load_rlperf_cell
from rlperf.runs.jobs import JobQuery, UpstreamJob
from tests.conftest import CONF


def write_job(folder: Path, row_group: str) -> Path:
    """A training job of ``model=tiny study/training_row=exp3`` whose choices say ``row_group``."""
    (folder / ".hydra").mkdir(parents=True)
    cfg = {
        "stage": "train",
        "seed": 0,
        "workers": 8,
        "model": {"name": "tiny"},
        "gpu_layout": {"name": "none"},
        "cpu_affinity": {"name": "unrestricted"},
    }
    OmegaConf.save(OmegaConf.create(cfg), folder / CONFIG_FILE)
    overrides = ["model=tiny", f"{row_group}=exp3"]
    OmegaConf.save(OmegaConf.create(overrides), folder / OVERRIDES_FILE)
    choices = {"model": "tiny", row_group: "exp3", "gpu_layout": "none"}
    OmegaConf.save(
        OmegaConf.create({"hydra": {"runtime": {"choices": choices}}}), folder / HYDRA_FILE
    )
    (folder / METRICS_FILE).write_text("iteration,excluded,iter_s\n1,warmup,3.0\n2,,1.0\n")
    (folder / SUMMARY_FILE).write_text(json.dumps({"status": "completed", "stage": "train"}))
    return folder


@pytest.fixture
def jobs(tmp_path: Path) -> tuple[Path, Path]:
    """The same job recorded before the rename (``old/0``) and after it (``new/0``)."""
    return write_job(tmp_path / "old" / "0", "study_training_row"), write_job(
        tmp_path / "new" / "0", "study/training_row"
    )


def test_renamed_groups_are_todays_groups() -> None:
    for old, new in RENAMED_GROUPS.items():
        assert not (CONF / old.split("@")[0]).exists(), old
        assert (CONF / new.split("@")[0]).is_dir(), new
        assert current_group(new) == new
    assert current_group("model") == "model"


def test_recorded_job_matches_and_gets_the_same_label(jobs: tuple[Path, Path]) -> None:
    old, new = (UpstreamJob(path) for path in jobs)
    assert old.identity == new.identity
    assert old.identity["study_training_row"] == "exp3"
    label = "0 (model=tiny, study_training_row=exp3, no checkpoint/rlperf_policy.pt)"
    assert old.label() == new.label() == label
    query = JobQuery(match=(("study_training_row", "exp3"),))
    assert query.matches(old) and query.matches(new)
    assert not JobQuery(match=(("study_training_row", "exp4"),)).matches(old)


def test_recorded_job_reads_the_same_in_the_report(jobs: tuple[Path, Path]) -> None:
    old, new = (
        load_rlperf_cell(CellRef(path=path, kind="rlperf", id=path.parent.name, group=""))
        for path in jobs
    )
    assert old.leaves == new.leaves
    assert old.leaves["study/training_row"] == "exp3"
