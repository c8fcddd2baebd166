"""Read one rlperf job folder (docs/results.md) into a :class:`~rlperf.report.read.cells.Cell`.

Every problem with a cell's files raises :class:`CellError`; the caller
reports the cell as skipped and carries on with the others.
"""

from __future__ import annotations

import functools
import io
import json
import re
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import yaml

from rlperf.errors import CellError
from rlperf.layout import (
    CELL_FILE,
    CONFIG_FILE,
    EFFECTIVE_CONFIG_FILE,
    EPISODES_FILE,
    EXCLUDED_COLUMN,
    FINGERPRINT_FILE,
    INDEX_FILE,
    LEVELS_FILE,
    METRICS_FILE,
    STEPS_FILE,
    SUMMARY_FILE,
    TELEMETRY_FILE,
    current_group,
)
from rlperf.report.read import fingerprints
from rlperf.report.read.cells import PHASES, TRAIN_METRICS, Cell
from rlperf.report.read.discover import CellRef
from rlperf.report.read.energy import add_energy_columns
from rlperf.results.columns import (
    ACTION_MS,
    EPISODE_RETURN_MEAN,
    FORWARD_MS,
    ITER_S,
    ITERATION,
    LATENCY_COLUMNS,
    OTHER_S,
    TIME_S,
    WALL_S,
)
from rlperf.results.flat import flatten
from rlperf.results.protocol import env_protocol
from rlperf.results.record import RolloutRecord, TrainRecord, as_record, from_json
from rlperf.specs.backends import Backend
from rlperf.specs.stages import STAGES, EnvSource, StageSpec
from rlperf.vocabulary import Exclusion, RunStatus

#: How a job of a stage this rlperf does not know is read (:func:`_spec_of`).
_UNKNOWN_STAGE = replace(STAGES["rollout"], name="unknown")

#: Canonical axis → where it sits in the resolved config of an rlperf job.
#: The model axis of a ``stage=env`` cell without ``run=`` (it steps with random actions).
RANDOM_ACTIONS = "random actions"

AXIS_KEYS = {
    "stage": "stage",
    "model": "model.name",
    "gpu_layout": "gpu_layout.name",
    "workers": "workers.num_env_runners",
    "cpu_affinity": "cpu_affinity.name",
    "backend": "backend.name",
    "algo": "algo.name",
    "env": "env.id",
}


def read_yaml(path: Path) -> Any:
    """Parse a YAML file with the C loader where available."""
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    try:
        with path.open("r", encoding="utf-8") as fh:
            return yaml.load(fh, Loader=loader)  # noqa: S506 - a safe loader
    except (OSError, yaml.YAMLError) as exc:
        raise CellError(
            f"{path.name}: cannot parse YAML ({exc.__class__.__name__}: {exc})"
        ) from exc


def read_json(path: Path) -> dict[str, Any]:
    """Parse a JSON object file."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise CellError(f"{path.name}: cannot parse JSON ({exc})") from exc
    if not isinstance(data, dict):
        raise CellError(f"{path.name}: expected a JSON object")
    return data


def _get(tree: dict[str, Any], dotted: str) -> Any:
    node: Any = tree
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node


def read_csv(path: Path, notes: list[str], usecols: Any = None) -> pd.DataFrame:
    """Read a result CSV written row by row; a torn last line (job killed mid-write) is dropped.

    ``usecols``: as in :func:`pandas.read_csv` (e.g. a predicate on column names).
    """
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise CellError(f"{path.name}: {exc}") from exc
    if not raw.strip():
        raise CellError(f"{path.name}: empty file")
    torn = not raw.endswith(b"\n")
    if torn:
        raw = raw[: raw.rfind(b"\n") + 1]
        notes.append(f"{path.name}: last line incomplete (job interrupted while writing), dropped")
    try:
        df = pd.read_csv(io.BytesIO(raw), usecols=usecols)
    except (ValueError, pd.errors.ParserError) as exc:
        raise CellError(f"{path.name}: cannot parse CSV ({exc})") from exc
    return df


def _as_bool(series: pd.Series) -> pd.Series:
    if series.dtype == bool:
        return series
    text = series.astype(str).str.strip().str.lower()
    return text.isin(["true", "1", "yes", "1.0"])


def first_episode_warmup(returns: pd.Series) -> pd.Series:
    """The study's warm-up rule: every iteration before the first one with a finished episode."""
    finished = returns.notna().to_numpy()
    first = int(np.argmax(finished)) if finished.any() else len(finished)
    flags = np.zeros(len(finished), dtype=bool)
    flags[:first] = True
    return pd.Series(flags, index=returns.index)


def flags_to_exclusion(flags: pd.Series | np.ndarray | bool, index: pd.Index) -> pd.Series:
    """An ``excluded`` column from warm-up flags (true: ``warmup``, false: ``""``)."""
    values = np.broadcast_to(np.asarray(flags, dtype=bool), (len(index),))
    return pd.Series(np.where(values, str(Exclusion.warmup), ""), index=index, dtype=object)


def as_text(series: pd.Series) -> pd.Series:
    """Strings with ``""`` for missing values (an all-empty CSV column reads as float NaN)."""
    text = series.astype(object).where(series.notna(), "")
    return text.astype(str).str.strip()


def exclusion_column(df: pd.DataFrame) -> pd.Series | None:
    """``excluded`` as strings (``""``: the row counts) from a file's ``excluded`` column,
    or from an older rlperf's boolean ``warmup`` column; ``None`` when it has neither."""
    if EXCLUDED_COLUMN in df.columns:
        return as_text(df[EXCLUDED_COLUMN])
    if "warmup" in df.columns:  # rlperf 0.1 result files
        return flags_to_exclusion(_as_bool(df["warmup"]), df.index)
    return None


def canonical_iterations(df: pd.DataFrame) -> pd.DataFrame:
    """Make sure every canonical training column exists (NaN where unknown) with float dtype."""
    df = df.copy()
    for col in (ITERATION, TIME_S, *TRAIN_METRICS):
        if col not in df.columns:
            df[col] = np.nan
    if df[OTHER_S].isna().all() and df[ITER_S].notna().any():
        df[OTHER_S] = df[ITER_S] - df[list(PHASES[:-1])].sum(axis=1, min_count=1)
    for col in df.columns:
        if col not in (EXCLUDED_COLUMN, "warmup") and df[col].dtype == object:
            df[col] = pd.to_numeric(df[col], errors="coerce")
    return df


def sweep_rounds(sweep_dir: Path) -> dict[str, Any]:
    """The repeats a sweep folder's ``sweep.json`` records (``rounds``: its ``design``, the
    ``rules`` its comparison sets were decided by), or {} (no repeats, an index from before
    them, or none). Read once per version of the file, not once per cell of the sweep."""
    try:
        stamp = (sweep_dir / INDEX_FILE).stat().st_mtime_ns
    except OSError:
        return {}
    return _rounds_of(sweep_dir / INDEX_FILE, stamp)


@functools.lru_cache(maxsize=64)
def _rounds_of(index: Path, stamp: int) -> dict[str, Any]:
    """``rounds`` of ``index`` as it was at ``stamp`` (its mtime: the cache key)."""
    try:
        data = json.loads(index.read_text())
    except (OSError, ValueError):
        return {}
    rounds = data.get("rounds") if isinstance(data, dict) else None
    return rounds if isinstance(rounds, dict) else {}


def _read_cell_record(path: Path, notes: list[str]) -> dict[str, Any]:
    if not path.is_file():
        return {}
    try:
        return read_json(path)
    except CellError as exc:
        notes.append(f"{exc} (ignored)")
        return {}


def _timestamp(value: Any) -> float | None:
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str):
        try:
            return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
        except ValueError:
            return None
    return None


def _parse_overrides(overrides: Any) -> dict[str, str]:
    out: dict[str, str] = {}
    if not isinstance(overrides, list):
        return out
    for item in overrides:
        if not isinstance(item, str) or "=" not in item:
            continue
        key, value = item.split("=", 1)
        out[current_group(key.lstrip("+~"))] = value
    return out


def load_rlperf_cell(ref: CellRef) -> Cell:
    """Read an rlperf job folder.

    Expects ``.hydra/config.yaml`` (top-level keys stage, model, gpu_layout,
    workers, cpu_affinity, backend, env, algo, train, seed), and any of
    ``summary.json``, ``metrics.csv`` (train), ``steps.csv`` / ``episodes.csv``
    (rollout, edge), ``fingerprint.json``.
    """
    path = ref.path
    notes: list[str] = []
    cfg = _read_config(path)
    overrides_file = path / CONFIG_FILE.parent / "overrides.yaml"
    overrides = _parse_overrides(read_yaml(overrides_file)) if overrides_file.is_file() else {}
    summary = read_json(path / SUMMARY_FILE) if (path / SUMMARY_FILE).is_file() else {}
    raw_fp = read_json(path / FINGERPRINT_FILE) if (path / FINGERPRINT_FILE).is_file() else {}
    if not raw_fp:
        notes.append("no fingerprint.json: hardware and software unknown")
    # cell.json: the sweep launcher's record (docs/sweeps.md): status, reason, start / end.
    record = _read_cell_record(path / CELL_FILE, notes)
    cell = Cell(
        id=ref.id,
        path=path,
        kind="rlperf",
        group=ref.group,
        status=_status(summary, record, notes),
        axes=_axes(cfg, summary, path),
        leaves=_leaves(cfg, overrides),
        summary=summary,
        notes=notes,
        **_fingerprint_fields(raw_fp),
    )
    _read_results(cell)
    effective = (path / EFFECTIVE_CONFIG_FILE).is_file()
    cell.env_protocol = _env_protocol(cfg, cell.stage, summary, notes, effective)
    cell.concurrent_cells = record.get("concurrent_cells")
    cell.closed = record.get("closed")
    rounds = sweep_rounds(path.parent) if record else {}
    design, rules = rounds.get("design"), rounds.get("rules")
    cell.design = design if isinstance(design, dict) else None
    cell.rules = rules if isinstance(rules, dict) else None
    _place_in_time(cell, record)
    return cell


def _read_config(path: Path) -> dict[str, Any]:
    """The job's config: the one that actually ran where a downstream stage recorded it."""
    # Downstream stages record the config that actually ran (the upstream run's
    # model and env) in effective_config.yaml; Hydra's snapshot has the composed one.
    cfg_file = path / EFFECTIVE_CONFIG_FILE
    if not cfg_file.is_file():
        cfg_file = path / CONFIG_FILE
    cfg = read_yaml(cfg_file)
    if not isinstance(cfg, dict):
        raise CellError(f"{cfg_file.relative_to(path)}: not a mapping")
    return cfg


def _env_protocol(
    cfg: dict[str, Any], stage: str, summary: dict[str, Any], notes: list[str], effective: bool
) -> dict[str, Any]:
    """The cell's env protocol: ``summary.json``'s, else derived from the config's ``env``.

    Jobs written before the record existed (or killed before their summary) still say
    which env they played in their config: a downstream job's ``effective_config.yaml``
    (``effective``: the upstream run's env, resolved), a training job's
    ``.hydra/config.yaml`` (whose ``${model.dim}``-style values are looked up here). A
    downstream job without the former never learnt its run's env (the composed ``env``
    is not what it would have played), and a serve cell plays none: no protocol.
    """
    recorded = from_json(summary).env_protocol
    if isinstance(recorded, dict) and recorded:
        return recorded
    env = cfg.get("env")
    source = _spec_of(stage).env_source
    if source == EnvSource.none or not isinstance(env, dict):
        return {}
    if source != EnvSource.config and not effective:
        notes.append("env protocol unknown: the job stopped before it resolved its run's env")
        return {}
    resolved = {key: _interpolated(cfg, value) for key, value in env.items()}
    notes.append("env protocol derived from the config (summary.json has no env_protocol)")
    return env_protocol(resolved)


def _interpolated(cfg: dict[str, Any], value: Any) -> Any:
    """``${a.b}`` of an unresolved Hydra snapshot: the value at ``a.b`` (else as written)."""
    if isinstance(value, str):
        match = re.fullmatch(r"\$\{([\w.]+)\}", value.strip())
        if match:
            found = _get(cfg, match.group(1))
            return value if found is None else found
    return value


def _spec_of(stage: Any) -> StageSpec:
    """The spec of a recorded job's stage; a stage this rlperf does not know (a newer
    folder) is read as a downstream job measuring steps, as rollout and edge do."""
    return STAGES.get(str(stage), _UNKNOWN_STAGE)


def _axes(cfg: dict[str, Any], summary: dict[str, Any], path: Path) -> dict[str, Any]:
    """The canonical axes (:data:`AXIS_KEYS`) of a job config."""
    stage = cfg.get("stage") or from_json(summary).stage
    if stage is None:
        stage = "train" if (path / METRICS_FILE).is_file() else "rollout"
    axes: dict[str, Any] = {"source": "rlperf"}
    for axis, key in AXIS_KEYS.items():
        axes[axis] = _get(cfg, key)
    if axes["workers"] is None and isinstance(cfg.get("workers"), int | float):
        axes["workers"] = int(cfg["workers"])  # `workers: 8` (a plain value, not a group)
    if axes["env"] is None:
        axes["env"] = _get(cfg, "env.entry_point")  # env.kind=custom has no id
    axes["stage"] = str(stage)
    spec = _spec_of(stage)
    if axes["backend"] is None and spec.trains:
        axes["backend"] = str(Backend.rllib)  # training runs in RLlib
    if spec.env_only:
        # stage=env starts no env runners, learner or policy backend: those axes say nothing
        # of its work; without run= it acts at random (no model).
        axes.update(gpu_layout=None, workers=None, backend=None, algo=None)
        if not cfg.get("run") and not cfg.get("checkpoint"):
            axes["model"] = RANDOM_ACTIONS
    return axes


def _leaves(cfg: dict[str, Any], overrides: dict[str, str]) -> dict[str, Any]:
    """Every other config value (dotted keys), plus overrides of keys the config lacks."""
    leaves = flatten({k: v for k, v in cfg.items() if k != "hydra"})
    for key in [*AXIS_KEYS.values(), "workers"]:
        leaves.pop(key, None)
    groups = set(cfg)
    for key, value in overrides.items():
        if key not in leaves and key not in groups and key not in AXIS_KEYS.values():
            leaves[key] = value
    return leaves


def _status(summary: dict[str, Any], record: dict[str, Any], notes: list[str]) -> str:
    """The job's status from summary.json, else the launcher's record, else ``partial``."""
    job = from_json(summary)
    status = str(job.status or record.get("status") or RunStatus.partial)
    if not summary and not record:
        notes.append("no summary.json: the job is still running or was killed")
    elif status != RunStatus.completed:
        err = job.error or record.get("reason")
        notes.append(f"status {status}" + (f": {err}" if err else ""))
    return status


def _fingerprint_fields(raw_fp: dict[str, Any]) -> dict[str, Any]:
    """What fingerprint.json tells about a cell: comparable leaves, machine, host, start,
    and whether NVML saw GPUs (and if not, why)."""
    gpus = raw_fp.get("gpus")
    return {
        "nvml_unavailable_reason": raw_fp.get("nvml_unavailable_reason") or None,
        "gpu_count": len(gpus) if isinstance(gpus, list) else None,
        "fingerprint": fingerprints.comparable(
            {k: v for k, v in raw_fp.items() if k not in ("config", "resolved_config")}
        ),
        "machine": fingerprints.describe(raw_fp),
        "host": fingerprints.host_of(raw_fp),
        "started_at": fingerprints.start_time_of(raw_fp),
    }


def _read_results(cell: Cell) -> None:
    """Read metrics.csv, steps.csv and episodes.csv; a completed cell must have its data."""
    path, summary = cell.path, cell.summary
    rows_file = _spec_of(cell.stage).rows_file
    metrics = path / METRICS_FILE
    if metrics.is_file():
        cell.iterations = _read_metrics(metrics, summary, cell)
    steps = path / STEPS_FILE
    if steps.is_file():
        cell.latency = _read_steps(steps, cell.notes)
    episodes = path / EPISODES_FILE
    if episodes.is_file():
        cell.episodes = read_csv(episodes, cell.notes)
    if (path / TELEMETRY_FILE).is_file():
        cell.telemetry = _read_telemetry(path / TELEMETRY_FILE, cell.notes)
    if rows_file == LEVELS_FILE and (path / LEVELS_FILE).is_file():
        cell.levels = read_csv(path / LEVELS_FILE, cell.notes)
    # A skipped / failed / pending cell may lack its data; a completed one has its rows.
    if cell.status != RunStatus.completed:
        return
    if rows_file == METRICS_FILE and cell.iterations is None:
        raise CellError(f"{cell.stage} cell without metrics.csv")
    if rows_file == LEVELS_FILE and cell.levels is None:
        raise CellError(f"{cell.stage} cell without levels.csv")
    no_latency = cell.latency is None and not cell.record_of(RolloutRecord).latency
    if rows_file == STEPS_FILE and no_latency:
        raise CellError(f"{cell.stage} cell without steps.csv or summary latency")


def _place_in_time(cell: Cell, record: dict[str, Any]) -> None:
    """Start and end of the cell (for concurrency checks) and its run key (for duplicates).

    The launcher's record, which saw the whole trial, wins over the fingerprint's
    start time plus the job's wall time.
    """
    wall = cell.summary.get(WALL_S)
    iterations, episodes = cell.iterations, cell.episodes
    if wall is None and iterations is not None and iterations[TIME_S].notna().any():
        wall = float(iterations[TIME_S].max())
    if wall is None and episodes is not None and WALL_S in episodes:
        wall = float(pd.to_numeric(episodes[WALL_S], errors="coerce").sum())
    if cell.started_at is not None and wall is not None:
        cell.ended_at = cell.started_at + float(wall)
    launched, finished = _timestamp(record.get("started_at")), _timestamp(record.get("finished_at"))
    if launched is not None and finished is not None:
        cell.started_at, cell.ended_at = launched, finished
    if cell.started_at is not None and cell.host:
        cell.run_key = f"rlperf:{cell.host}@{cell.started_at:.3f}"


def _read_metrics(path: Path, summary: dict[str, Any], cell: Cell) -> pd.DataFrame:
    df = read_csv(path, cell.notes)
    if ITERATION not in df.columns or ITER_S not in df.columns:
        raise CellError("metrics.csv: missing the iteration / iter_s columns")
    if df.empty:
        cell.notes.append("metrics.csv has no rows yet")
    df = canonical_iterations(df)
    rule = (as_record(from_json(summary), TrainRecord).warmup or {}).get("rule")
    excluded = exclusion_column(df)
    if excluded is not None:
        df[EXCLUDED_COLUMN] = excluded
        cell.warmup_rule = f"flagged in metrics.csv (rule: {rule or 'as configured'})"
    else:
        df[EXCLUDED_COLUMN] = flags_to_exclusion(
            first_episode_warmup(df[EPISODE_RETURN_MEAN]), df.index
        )
        cell.warmup_rule = "first finished episode (no excluded column in metrics.csv)"
    return add_energy_columns(df)


def _read_telemetry(path: Path, notes: list[str]) -> pd.DataFrame | None:
    """``telemetry.csv``'s time and GPU power / energy columns (the report needs no more,
    and only those are parsed); a telemetry file that does not parse is noted, never fatal."""

    def wanted(col: str) -> bool:
        return col == TIME_S or re.fullmatch(r"gpu\d+_(power_w|energy_j)", col) is not None

    try:
        df = read_csv(path, notes, usecols=wanted)
    except CellError as exc:
        notes.append(f"{exc} (ignored)")
        return None
    if TIME_S not in df or len(df.columns) == 1:
        return None
    return df.apply(pd.to_numeric, errors="coerce")


def _read_steps(path: Path, notes: list[str]) -> pd.DataFrame | None:
    df = read_csv(path, notes)
    if df.empty:
        notes.append("steps.csv has no rows")
        return None
    if ACTION_MS not in df.columns and FORWARD_MS not in df.columns:
        raise CellError("steps.csv: neither action_ms nor forward_ms present")
    for col in LATENCY_COLUMNS:
        if col not in df.columns:
            df[col] = np.nan
        df[col] = pd.to_numeric(df[col], errors="coerce")
    excluded = exclusion_column(df)
    df[EXCLUDED_COLUMN] = excluded if excluded is not None else flags_to_exclusion(False, df.index)
    if "episode" not in df.columns:
        df["episode"] = 0
    if "step" not in df.columns:
        df["step"] = np.arange(len(df))
    df["granularity"] = "step"
    df["n_steps"] = 1
    return df
