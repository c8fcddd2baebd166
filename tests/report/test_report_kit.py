"""The report's test kit (tests/support/synthetic.py) follows rlperf's result format.

The report's tests read folders the kit writes. If the format changed (a
column, a config group option, a fingerprint key) and the kit did not follow,
those tests would keep passing on a format rlperf no longer writes; these tests
fail instead.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from conftest import group_options
from omegaconf import OmegaConf
from support import synthetic

from rlperf.layout import (
    CELL_FILE,
    EPISODES_FILE,
    FINGERPRINT_FILE,
    METRICS_FILE,
    STEPS_FILE,
    SUMMARY_FILE,
)
from rlperf.results.columns import LATENCY_COLUMNS, OTHER_S, PHASES, TRAIN_COLUMNS
from rlperf.results.latency import EPISODE_COLUMNS, STEP_COLUMNS
from rlperf.sweep.index import CellRecord
from rlperf.telemetry.fingerprint import collect_fingerprint
from rlperf.telemetry.sampler import gpu_columns
from tests.conftest import THESIS


@pytest.fixture(scope="module")
def sweeps(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[Path], list[Path]]:
    root = tmp_path_factory.mktemp("kit")
    train = synthetic.study_training_sweep(THESIS / "ray_results" / "volta1_def", root / "train",
                                           iterations=12, n_cells=3)  # fmt: skip
    infer = synthetic.study_inference_sweep(THESIS, root / "infer", steps_per_episode=40)
    return train, infer


def _header(path: Path) -> list[str]:
    return path.read_text().splitlines()[0].split(",")


def test_metrics_csv_has_the_canonical_columns(sweeps):
    train, _ = sweeps
    for cell in train:
        assert _header(cell / METRICS_FILE) == [*TRAIN_COLUMNS, *gpu_columns([0, 1])]
        df = pd.read_csv(cell / METRICS_FILE)
        assert len(df) == 12 and df["iteration"].tolist() == list(range(1, 13))
        phases = df[[*PHASES, OTHER_S]].sum(axis=1)
        assert phases.to_numpy() == pytest.approx(df["iter_s"].to_numpy())
        assert df["time_s"].is_monotonic_increasing


def test_steps_and_episodes_csv_have_the_canonical_columns(sweeps):
    _, infer = sweeps
    assert infer  # the study's rollout files give one cell per backend
    for cell in infer:
        assert _header(cell / STEPS_FILE) == list(STEP_COLUMNS)
        assert _header(cell / EPISODES_FILE) == list(EPISODE_COLUMNS)
        summary = json.loads((cell / SUMMARY_FILE).read_text())
        assert set(summary["latency"]) == set(LATENCY_COLUMNS)
        steps = pd.read_csv(cell / STEPS_FILE)
        kept = steps.loc[steps["excluded"].isna(), "action_ms"]
        assert summary["latency"]["action_ms"]["count"] == len(kept)
        assert summary["latency"]["action_ms"]["p50"] == pytest.approx(kept.median())


def test_fingerprint_and_cell_record_have_the_canonical_keys(sweeps):
    train, _ = sweeps
    body = json.loads((train[0] / FINGERPRINT_FILE).read_text())
    assert set(body) == set(collect_fingerprint())
    record = json.loads((train[0] / CELL_FILE).read_text())
    assert set(record) == set(CellRecord.__dataclass_fields__)
    assert CellRecord.from_json(record).status == "completed"


def test_kit_knows_every_shipped_gpu_layout_and_cpu_affinity():
    assert sorted(synthetic.GPU_LAYOUTS) == group_options("gpu_layout")
    assert sorted(synthetic.CPU_AFFINITIES) == group_options("cpu_affinity")


@pytest.mark.parametrize("gpu_layout", group_options("gpu_layout"))
@pytest.mark.parametrize("cpu_affinity", group_options("cpu_affinity"))
def test_config_is_what_hydra_composes(compose_cfg, gpu_layout, cpu_affinity):
    """The kit's ``.hydra/config.yaml``: the composed config's keys and group nodes."""
    kit = synthetic.resolved_config(model="model3", gpu_layout=gpu_layout,
                                    cpu_affinity=cpu_affinity, workers=4, backend="tflite_int8",
                                    stage="edge")  # fmt: skip
    composed = OmegaConf.to_container(
        compose_cfg("model=model3", f"gpu_layout={gpu_layout}", f"cpu_affinity={cpu_affinity}",
                    "workers=4", "backend=tflite_int8", "stage=edge"),
        resolve=False,
    )  # fmt: skip
    assert isinstance(composed, dict)
    assert set(kit) <= set(composed)
    for group in ("model", "gpu_layout", "backend", "env"):
        assert kit[group] == composed[group], group
    affinity = {k: v for k, v in kit["cpu_affinity"].items() if k != "num_cpus"}
    assert affinity == {k: v for k, v in composed["cpu_affinity"].items() if k != "num_cpus"}
    assert set(kit["algo"]) == set(composed["algo"])  # values: the preset may shrink them
    assert set(kit["train"]) <= set(composed["train"])
    assert set(kit["telemetry"]) <= set(composed["telemetry"])
