"""The in-memory form of one cell, whatever folder format it came from.

Both readers (:mod:`rlperf.report.read.load` for rlperf's own result files and
:mod:`rlperf.report.read.legacy` for RLlib 1.x / the 2021 study) produce
:class:`Cell` objects with canonical column names (docs/results.md), so that
everything downstream is format-agnostic.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rlperf.layout import EXCLUDED_COLUMN
from rlperf.results.columns import ITERATION, OTHER_S, TIME_S, TRAIN_COLUMNS
from rlperf.results.columns import PHASES as TIMED_PHASES
from rlperf.results.record import R, RunRecord, as_record, from_json
from rlperf.specs.stages import STAGE_FAMILY
from rlperf.vocabulary import RunStatus

if TYPE_CHECKING:
    import pandas as pd

#: Axes a reader maps onto canonical names; labels list them in this order.
PRIMARY_AXES = (
    "source",
    "stage",
    "model",
    "gpu_layout",
    "workers",
    "cpu_affinity",
    "backend",
    "algo",
    "env",
)

#: Training phases, in the order they are stacked in figures.
PHASES = (*TIMED_PHASES, OTHER_S)

#: Training columns summarised per cell (in addition to per-GPU columns).
TRAIN_METRICS = tuple(c for c in TRAIN_COLUMNS if c not in (ITERATION, TIME_S, EXCLUDED_COLUMN))

#: The 2021 study's models (docs/study.md): name → (input dim, conv_filters), to name the
#: model of a legacy run from the conv stack its params.json holds. Written here, not read
#: from conf/model: the report reads result files only, and the study's folders keep these
#: stacks whatever conf/model says later (tests/report/read/test_report_legacy.py checks they
#: agree today).
STUDY_MODELS: dict[str, tuple[int, list[list[Any]]]] = {
    "model1": (84, [[16, [8, 8], 4], [32, [4, 4], 2], [256, [11, 11], 1]]),
    "model2": (168, [[16, [16, 16], 8], [32, [4, 4], 2], [256, [11, 11], 1]]),
    "model3": (252, [[16, [8, 8], 4], [16, [8, 8], 4], [32, [4, 4], 2], [256, [8, 8], 1]]),
    "model4": (168, [[16, [8, 8], 4], [32, [4, 4], 2], [32, [4, 4], 2], [256, [11, 11], 1]]),
    "model5": (252, [[16, [8, 8], 4], [32, [4, 4], 2], [32, [4, 4], 2], [256, [16, 16], 1]]),
    "model6": (168, [[16, [8, 8], 4], [32, [4, 4], 2], [256, [21, 21], 1]]),
}

#: RLlib 1.x VisionNetwork defaults used when ``conv_filters`` is null (rllib/models/utils.py).
RLLIB1_DEFAULT_FILTERS: dict[int, list[list[Any]]] = {
    84: [[16, [8, 8], 4], [32, [4, 4], 2], [256, [11, 11], 1]],
    42: [[16, [4, 4], 2], [32, [4, 4], 2], [256, [11, 11], 1]],
    10: [[16, [5, 5], 2], [32, [5, 5], 2]],
}


def match_model(dim: int | None, conv_filters: list[Any] | None) -> str:
    """Name the study's model (docs/study.md) with this input size and conv stack (RLlib
    defaults for null)."""
    if dim is None:
        return "unknown"
    filters = conv_filters if conv_filters is not None else RLLIB1_DEFAULT_FILTERS.get(int(dim))
    norm = json.dumps(filters)
    for name, (mdim, mfilters) in STUDY_MODELS.items():
        if int(dim) == mdim and norm == json.dumps(mfilters):
            return name
    return f"custom_{int(dim)}px"


def included(df: pd.DataFrame) -> pd.DataFrame:
    """The rows that count: ``excluded`` empty (warm-up and faults stay in the files)."""
    return df.loc[df[EXCLUDED_COLUMN].eq("")]


def family_of(stage: str) -> str:
    """Comparison family of a stage (cells are only ranked against their family; the specs'
    :data:`~rlperf.specs.stages.STAGE_FAMILY`, an unknown stage a family of its own)."""
    return STAGE_FAMILY.get(stage, stage)


@dataclass
class Cell:
    """One cell (a job of a sweep, a single run, or a legacy run / rollout file).

    ``axes`` holds the canonical axes (:data:`PRIMARY_AXES`); ``leaves`` every
    other flattened config value (dotted keys, from ``.hydra/config.yaml`` and
    ``overrides.yaml`` or from ``params.json``). ``fingerprint`` holds the
    comparable fingerprint leaves (hardware and software); ``machine`` a
    readable one-line description of it. ``run_key`` identifies the run
    itself (Tune experiment id, or host and start time): two cells with the
    same key are copies of one run. ``telemetry`` holds ``telemetry.csv``'s
    time and GPU power / energy columns; ``nvml_unavailable_reason`` and
    ``gpu_count`` come from ``fingerprint.json`` (why no GPU was measured).
    ``env_protocol`` is what an env step of the cell is (:mod:`rlperf.results.protocol`:
    ``summary.json``'s record, else derived from the config or ``params.json``, the cell's
    notes say so); empty for a cell that plays no env (serve).
    """

    id: str
    path: Path
    kind: str
    group: str
    status: str
    axes: dict[str, Any]
    leaves: dict[str, Any] = field(default_factory=dict)
    fingerprint: dict[str, Any] = field(default_factory=dict)
    machine: str = ""
    host: str = ""
    started_at: float | None = None
    ended_at: float | None = None
    summary: dict[str, Any] = field(default_factory=dict)
    iterations: pd.DataFrame | None = None
    latency: pd.DataFrame | None = None
    episodes: pd.DataFrame | None = None
    levels: pd.DataFrame | None = None  # serve: levels.csv (rlperf.report.tables.serve)
    warmup_rule: str = ""
    notes: list[str] = field(default_factory=list)
    run_key: str = ""
    concurrent_cells: int | None = None
    telemetry: pd.DataFrame | None = None
    nvml_unavailable_reason: str | None = None
    gpu_count: int | None = None
    env_protocol: dict[str, Any] = field(default_factory=dict)
    #: A sweep's repeats (docs/sweeps.md#repeats): why this run 0's configuration got no
    #: more runs (``cell.json`` ``closed``), the sweep's design and the rule each of its
    #: comparison sets was decided by (``sweep.json`` ``rounds.design``, ``rounds.rules``).
    closed: dict[str, Any] | None = None
    design: dict[str, Any] | None = None
    rules: dict[str, Any] | None = None

    @property
    def stage(self) -> str:
        """The pipeline stage (train, rollout, edge, ...)."""
        return str(self.axes.get("stage", "train"))

    @property
    def source(self) -> str:
        """``rlperf`` or ``legacy``."""
        return str(self.axes.get("source", "rlperf"))

    @property
    def family(self) -> str:
        """The comparison family of the cell's stage."""
        return family_of(self.stage)

    @property
    def record(self) -> RunRecord:
        """``summary.json`` as the typed record (a view of :attr:`summary`)."""
        return from_json(self.summary)

    def record_of(self, kind: type[R]) -> R:
        """``summary.json`` as the record of a stage (:class:`~rlperf.results.record.EdgeRecord`,
        ...): a view of :attr:`summary`, whatever stage wrote it (a key it lacks reads as
        its default)."""
        return as_record(self.record, kind)

    @property
    def completed(self) -> bool:
        """Only completed cells are ranked and plotted."""
        return self.status == RunStatus.completed
