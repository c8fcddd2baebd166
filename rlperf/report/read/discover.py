"""Find the cells under the paths a user hands to ``rlperf-report``.

Three kinds of cell are recognised (see docs/report.md):

- an rlperf job folder: ``.hydra/config.yaml`` plus at least one result file
  (``summary.json``, ``metrics.csv`` or ``steps.csv``); a folder with only
  ``.hydra/`` is reported as skipped (the job died before writing anything);
- a legacy Ray Tune run folder (RLlib 1.x): ``params.json`` + ``progress.csv``;
- one of the 2021 study's rollout CSVs, recognised by its header.

A sweep folder (``multirun.yaml`` + numbered cells) or any folder of such
folders is walked recursively. No pandas here: discovery must stay cheap.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from rlperf.errors import NoRunsFoundError
from rlperf.layout import (
    CELL_FILE,
    CONFIG_FILE,
    METRICS_FILE,
    MULTIRUN_FILE,
    STEPS_FILE,
    SUMMARY_FILE,
)

RESULT_FILES = (SUMMARY_FILE, METRICS_FILE, STEPS_FILE)
# A sweep cell also has the launcher's cell.json (status pending / skipped / ...).

#: Headers of the study's rollout CSVs (reference/thesis/rollout_results).
LEGACY_ROLLOUT_HEADERS = {
    "episode,step_time_ms,steps,reward": "episode_means",
    "episode,total_model_time,steps,step_time_ms,reward": "episode_means_rllib",
    "episode,total_model_time,num_steps,average_model_time_per_step,reward": "run_mean",
}

# Folders never holding cells; walking them only costs time. The tracking tools' folders
# (rlperf.tracking) hold copies of a job's files (MLflow's artifacts, W&B's run files):
# read as cells, they would count every tracked job twice.
_PRUNE = {".hydra", ".tune", ".git", "__pycache__", ".venv", "node_modules", ".ruff_cache",
          "mlartifacts", "mlruns", "wandb", "tensorboard"}  # fmt: skip


@dataclass(frozen=True)
class CellRef:
    """Where a cell lives and what kind it is.

    ``kind`` is ``rlperf``, ``tune`` (legacy RLlib 1.x run) or ``rollout_csv``
    (legacy study rollout file; ``variant`` says which header it has).
    ``group`` is the sweep (or parent) folder relative to the report root.
    """

    path: Path
    kind: str
    id: str
    group: str
    variant: str = ""


@dataclass(frozen=True)
class Skipped:
    """A folder or file that looked like a cell but could not be read."""

    path: Path
    reason: str
    duplicate: bool = False


@dataclass
class Discovery:
    """The result of walking the input paths."""

    root: Path
    refs: list[CellRef] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)
    sweeps: list[Path] = field(default_factory=list)


def legacy_rollout_variant(path: Path) -> str | None:
    """Return the variant name of a study rollout CSV, or None if the header does not match."""
    try:
        with path.open("r", encoding="utf-8", errors="replace") as fh:
            header = fh.readline().strip().replace(" ", "")
    except OSError:
        return None
    return LEGACY_ROLLOUT_HEADERS.get(header)


def _is_report_output(names: set[str]) -> bool:
    return "report.md" in names and "runs.csv" in names


def _report_root(paths: Sequence[Path]) -> Path:
    parents = [p.parent if p.parent != p else p for p in paths]
    return Path(os.path.commonpath([str(p) for p in parents]))


def _rel(path: Path, root: Path) -> str:
    rel = os.path.relpath(path, root)
    return Path(rel).as_posix() if rel != "." else path.name


def discover(
    paths: Sequence[Path | str],
    progress: Callable[[str], None] | None = None,
) -> Discovery:
    """Walk ``paths`` and return every cell found, in a stable (sorted) order.

    Raises :class:`NoRunsFoundError` naming the first path that does not exist
    or holds no cell at all.
    """
    resolved = [Path(p).expanduser().resolve() for p in paths]
    if not resolved:
        raise NoRunsFoundError("no path given")
    for p in resolved:
        if not p.exists():
            raise NoRunsFoundError(f"{p}: no such file or directory")
    result = Discovery(root=_report_root(resolved))
    seen: set[Path] = set()
    for top in resolved:
        before = len(result.refs) + len(result.skipped)
        _walk(top, result, seen)
        if len(result.refs) + len(result.skipped) == before:
            raise NoRunsFoundError(
                f"{top}: no runs found. Expected rlperf job folders (.hydra/config.yaml with "
                "summary.json, metrics.csv or steps.csv), sweep folders of them "
                "(multirun.yaml), Ray Tune run folders (params.json + progress.csv) or the "
                "2021 study's rollout CSVs."
            )
        if progress is not None:
            progress(f"found {len(result.refs) - before} cells under {top}")
    result.refs.sort(key=lambda r: _natural_key(r.id))
    return result


def _natural_key(text: str) -> list[object]:
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", text)]


def _group_of(path: Path, root: Path, sweeps: list[Path]) -> str:
    for sweep in sweeps:
        if sweep in path.parents:
            return _rel(sweep, root)
    return _rel(path.parent, root)


def _walk(top: Path, result: Discovery, seen: set[Path]) -> None:
    root = result.root
    if top.is_file():
        variant = legacy_rollout_variant(top) if top.suffix == ".csv" else None
        if variant and top not in seen:
            seen.add(top)
            result.refs.append(
                CellRef(
                    top,
                    "rollout_csv",
                    _rel(top.with_suffix(""), root),
                    _rel(top.parent, root),
                    variant,
                )
            )
        return
    for dirpath, dirnames, filenames in os.walk(top):
        here = Path(dirpath)
        names = set(filenames)
        if MULTIRUN_FILE in names and here not in result.sweeps:
            result.sweeps.append(here)
        if (here / CONFIG_FILE).is_file():
            dirnames[:] = []
            if here in seen:
                continue
            seen.add(here)
            group = _group_of(here, root, result.sweeps)
            if names.intersection(RESULT_FILES) or CELL_FILE in names:
                result.refs.append(CellRef(here, "rlperf", _rel(here, root), group))
            else:
                result.skipped.append(
                    Skipped(
                        here,
                        "no result file (summary.json, metrics.csv, steps.csv): "
                        "the job did not get to write results",
                    )
                )
            continue
        if "params.json" in names and "progress.csv" in names:
            dirnames[:] = []
            if here not in seen:
                seen.add(here)
                result.refs.append(CellRef(here, "tune", _rel(here, root), _rel(here.parent, root)))
            continue
        if _is_report_output(names):
            dirnames[:] = []
            continue
        dirnames[:] = sorted(d for d in dirnames if d not in _PRUNE)
        for name in sorted(filenames):
            if not name.endswith(".csv"):
                continue
            f = here / name
            variant = legacy_rollout_variant(f)
            if variant and f not in seen:
                seen.add(f)
                result.refs.append(
                    CellRef(
                        f, "rollout_csv", _rel(f.with_suffix(""), root), _rel(here, root), variant
                    )
                )
