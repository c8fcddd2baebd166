"""What a search leaves: each trial's score from its own cell files, ``search.json``, and the
best trial's configuration as a re-runnable preset (docs/search.md).

Light (no Ray): the search driver, its trials and ``rlperf-report`` read scores the
same way, so the best trial in ``search.json`` is the best by the cells' own files.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from omegaconf import OmegaConf

from rlperf.layout import CONFIG_FILE, METRICS_FILE, SEARCH_FILE
from rlperf.results.columns import EPISODE_RETURN_MEAN, TRAIN_COLUMNS
from rlperf.results.jsonfile import write_json
from rlperf.results.record import read_record
from rlperf.vocabulary import RunStatus

#: The best trial's preset: ``<search folder>/experiment/search_best.yaml``, run with
#: ``rlperf experiment=<that path>`` (rlperf.config.search_path.preset_file_overrides).
BEST_PRESET = Path("experiment") / "search_best.yaml"
#: Cumulative env steps, added to every trial result by the launcher (a scheduler's time).
ENV_STEPS_TOTAL = "env_steps_total"
#: The per-iteration metric a scheduler compares when the objective is summary-only.
PROXY_METRIC, PROXY_MODE = EPISODE_RETURN_MEAN, "max"
#: Groups of the primary config that are not the experiment's own choices.
_NOT_PRESET_GROUPS = ("experiment", "experiment_algo@algo", "rlperf_schema")


def per_iteration(metric: str) -> bool:
    """Whether ``metric`` is a ``metrics.csv`` column (reported to Tune every iteration)."""
    return metric in TRAIN_COLUMNS or metric == ENV_STEPS_TOTAL


def trial_score(cell_dir: Path, metric: str) -> float | None:
    """A trial's value of ``metric``: a ``metrics.csv`` column's last finite value, else
    the ``summary.json`` key (``time_to_target_s`` is null when the target was not reached)."""
    if per_iteration(metric):
        return _last_value(cell_dir / METRICS_FILE, metric)
    record = read_record(cell_dir)
    return _finite(record.data.get(metric) if record is not None else None)


def _finite(value: Any) -> float | None:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def _last_value(path: Path, column: str) -> float | None:
    try:
        with path.open(newline="") as f:
            values = [_finite(row.get(column)) for row in csv.DictReader(f)]
    except OSError:
        return None
    found = [v for v in values if v is not None]
    return found[-1] if found else None


def best_trial(trials: Sequence[Mapping[str, Any]], mode: str) -> Mapping[str, Any] | None:
    """The completed trial with the best score (first of equals), or None."""
    scored = [t for t in trials if t["status"] == RunStatus.completed and t["score"] is not None]
    if not scored:
        return None
    pick = max if mode == "max" else min
    return pick(scored, key=lambda t: float(t["score"]))


def write_search_file(
    sweep_dir: Path, search: Mapping[str, Any], trials: list[dict[str, Any]]
) -> Path:
    """``search.json``: the options, the space, every trial (parameters, status, score)
    in the order they started, and the best trial (with its preset's path)."""
    best = best_trial(trials, str(search["mode"]))
    data = {
        **search,
        "trials": trials,
        "best": None if best is None else dict(best),
    }
    if best is not None:
        preset = write_best_preset(sweep_dir, sweep_dir / str(best["subdir"]), best, search)
        data["best"]["preset"] = str(preset)
    path = sweep_dir / SEARCH_FILE
    write_json(path, data)
    return path


def write_best_preset(
    sweep_dir: Path, cell_dir: Path, best: Mapping[str, Any], search: Mapping[str, Any]
) -> Path:
    """The best trial's whole job config as an ``experiment`` preset (``@package _global_``):
    its group choices as ``override /group: option`` and every value it ran with."""
    hydra_cfg = OmegaConf.load(cell_dir / ".hydra" / "hydra.yaml")
    choices = OmegaConf.to_container(hydra_cfg.hydra.runtime.choices)
    assert isinstance(choices, dict)
    groups = [
        {"override /" + str(group): option}
        for group, option in choices.items()
        if option is not None
        and not str(group).startswith("hydra/")
        and str(group) not in _NOT_PRESET_GROUPS
    ]
    body = OmegaConf.to_container(OmegaConf.load(cell_dir / CONFIG_FILE), resolve=False)
    assert isinstance(body, dict)
    preset = {"defaults": groups, **body}
    path = sweep_dir / BEST_PRESET
    path.parent.mkdir(parents=True, exist_ok=True)
    header = (
        "# @package _global_\n"
        f"# The best trial of the search in {sweep_dir}: {str(best['subdir'])}, "
        f"{search['metric']}={best['score']:.6g} ({search['mode']}).\n"
        f"# Parameters: {dict(best['params'])}\n"
        f"# Re-run it: rlperf experiment={path}\n"
    )
    path.write_text(header + OmegaConf.to_yaml(OmegaConf.create(preset)))
    return path
