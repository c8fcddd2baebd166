"""The jobs of an upstream sweep folder, and which of them a downstream job takes.

A downstream job names its training run with ``run=``; where that is a sweep
folder (``multirun/<date>/<time>``, one job per cell), the trained jobs are
matched by an explicit ``model=`` and ``run_match.<key>=`` (:data:`IDENTITY_KEYS`)
and, with ``run_select``, one of them is picked (:func:`pick_jobs`). A single
downstream run needs exactly one (:func:`rlperf.runs.locate.find_run_dir`); a
downstream sweep fans out over them all (:mod:`rlperf.sweep.upstream`).

Reading a job is cheap: its config, Hydra's choices, ``summary.json`` and, for
``run_select``, ``metrics.csv`` and ``fingerprint.json``; no weights are loaded.
"""

from __future__ import annotations

import csv
import json
import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from rlperf.config.schema import RunSelect
from rlperf.errors import CheckpointError
from rlperf.layout import (
    CHECKPOINT_DIR,
    CONFIG_FILE,
    EXCLUDED_COLUMN,
    FINGERPRINT_FILE,
    HYDRA_FILE,
    METRICS_FILE,
    OVERRIDES_FILE,
    POLICY_FILE,
    current_group,
    is_excluded,
)
from rlperf.results.columns import EPISODE_RETURN_MEAN, ITER_S
from rlperf.results.record import read_record
from rlperf.runs.overrides import explicit_model, override_keys
from rlperf.specs.stages import trains
from rlperf.vocabulary import RunStatus

#: What identifies a training job of a sweep besides its model: the keys of
#: ``run_match`` (``rlperf.config.schema.RunMatchConfig``) and where a training
#: job holds each (a config key, or ``choice:<group>`` for the Hydra group option
#: it was composed with). A training axis added later joins here and there.
IDENTITY_KEYS: dict[str, str] = {
    "study_training_row": "choice:study/training_row",
    "seed": "seed",
    "workers": "workers",
    "gpu_layout": "gpu_layout.name",
    "cpu_affinity": "cpu_affinity.name",
    "algo": "algo.name",
    "env_id": "env.id",
}


@dataclass(frozen=True)
class JobQuery:
    """Which jobs of an upstream sweep folder a downstream job takes.

    ``model``: an explicit ``model=`` of the downstream job; ``match``: the set
    keys of ``run_match`` (:data:`IDENTITY_KEYS`); ``select``: ``run_select``
    (``all`` keeps every matching job; a downstream sweep fans out over them).
    """

    model: str | None = None
    match: tuple[tuple[str, str], ...] = ()
    select: str = "all"

    def describe(self, prefix: str = "") -> str:
        """``model=tiny run_match.seed=1`` (with ``prefix``), or '' for an empty query."""
        parts = [f"model={self.model}"] if self.model is not None else []
        parts += [f"run_match.{k}={v}" for k, v in self.match]
        return f"{prefix}{' '.join(parts)}" if parts else ""

    def matches(self, job: UpstreamJob) -> bool:
        if self.model is not None and job.model != self.model:
            return False
        return all(str(job.identity.get(k)) == v for k, v in self.match)


class UpstreamJob:
    """A job folder of a sweep, read lazily: its model, identity, status and figures."""

    def __init__(self, path: Path) -> None:
        self.path = path
        cfg = OmegaConf.load(path / CONFIG_FILE)
        self.stage = OmegaConf.select(cfg, "stage", default=None)
        self.model = OmegaConf.select(cfg, "model.name", default=None)
        choices = _hydra_choices(path)
        self.identity: dict[str, Any] = {}
        for key, where in IDENTITY_KEYS.items():
            value = (
                choices.get(where.split(":", 1)[1])
                if where.startswith("choice:")
                else OmegaConf.select(cfg, where, default=None)
            )
            if value is not None:
                self.identity[key] = value
        self.status = _summary_status(path)

    @property
    def trained(self) -> bool:
        """A training job with a policy whose summary says completed (or that has none)."""
        return (
            trains(self.stage)
            and (self.path / CHECKPOINT_DIR / POLICY_FILE).is_file()
            and self.status in (None, RunStatus.completed)
        )

    def label(self, keys: Iterable[str] | None = None) -> str:
        """``3 (model=tiny, workers=0)``: the folder name, model and identity keys.

        ``keys``: the identity keys to show; by default those the job's own
        command line set (the axes of its sweep).
        """
        if keys is None:
            typed = {current_group(k) for k in override_keys(self.overrides())}
            keys = [k for k, where in IDENTITY_KEYS.items() if _override_key(k, where) in typed]
        parts = [f"model={self.model}"] + [f"{k}={self.identity.get(k)}" for k in keys]
        if not self.trained:
            parts.append(_why_not(self) if trains(self.stage) else f"stage={self.stage}")
        return f"{self.path.name} ({', '.join(parts)})"

    def overrides(self) -> list[str]:
        """The job's command-line overrides (``.hydra/overrides.yaml``)."""
        try:
            data = OmegaConf.load(self.path / OVERRIDES_FILE)
        except (OSError, ValueError):
            return []
        return [str(o) for o in data] if OmegaConf.is_list(data) else []

    def iter_s(self) -> float | None:
        """Mean seconds per iteration over the counted iterations (all where none counts)."""
        rows = _metrics_rows(self.path)
        counted = [r for r in rows if not is_excluded(r.get(EXCLUDED_COLUMN))] or rows
        values = [v for v in (_float(r.get(ITER_S)) for r in counted) if v is not None]
        return sum(values) / len(values) if values else None

    def final_return(self) -> float | None:
        """``episode_return_mean`` of the last iteration: the return the checkpoint had."""
        rows = _metrics_rows(self.path)
        return _float(rows[-1].get(EPISODE_RETURN_MEAN)) if rows else None

    def started_at(self) -> str:
        """``start_time`` of ``fingerprint.json`` (ISO 8601, so it sorts), or ''."""
        try:
            return str(json.loads((self.path / FINGERPRINT_FILE).read_text())["start_time"])
        except (OSError, ValueError, KeyError, TypeError):
            return ""


def _why_not(job: UpstreamJob) -> str:
    if job.status not in (None, RunStatus.completed):
        return f"status={job.status}"
    return f"no {CHECKPOINT_DIR}/{POLICY_FILE}"


def _override_key(key: str, where: str) -> str:
    """The override key that sets identity ``key``: its group for a group choice, else itself."""
    return where.split(":", 1)[1] if where.startswith("choice:") else key


def _hydra_choices(job_dir: Path) -> dict[str, Any]:
    try:
        node = OmegaConf.select(OmegaConf.load(job_dir / HYDRA_FILE), "hydra.runtime.choices")
    except (OSError, ValueError):
        return {}
    out = OmegaConf.to_container(node) if node is not None else {}
    return {current_group(str(k)): v for k, v in out.items()} if isinstance(out, dict) else {}


def _summary_status(job_dir: Path) -> str | None:
    record = read_record(job_dir)
    return None if record is None or record.status is None else str(record.status)


def _metrics_rows(job_dir: Path) -> list[dict[str, str]]:
    try:
        with open(job_dir / METRICS_FILE, newline="") as f:
            return list(csv.DictReader(f))
    except OSError:
        return []


def _float(value: object) -> float | None:
    try:
        out = float(str(value))
    except ValueError:
        return None
    return out if math.isfinite(out) else None


def is_job_folder(path: Path) -> bool:
    """Whether ``path`` is one job's folder (its config or checkpoint), not a sweep folder."""
    return (path / CONFIG_FILE).is_file() or (path / CHECKPOINT_DIR).is_dir()


def sweep_jobs(sweep: Path) -> list[UpstreamJob]:
    """The job folders of a sweep folder, in Hydra's job order (``0, 1, ..., 10``)."""
    dirs = [p.parent.parent for p in sweep.glob(f"*/{CONFIG_FILE}")]
    return [UpstreamJob(d) for d in sorted(dirs, key=_natural)]


def runs_per_configuration(jobs: Sequence[UpstreamJob]) -> int:
    """The most trained jobs of ``jobs`` that are runs of one configuration: their command
    lines differ only in ``seed`` (a sweep's repeats, ``<n>-r<r>``, or a ``seed=`` axis),
    as the report pools them. 0 where no job is trained."""
    counts: dict[tuple[str, ...], int] = {}
    for job in jobs:
        if job.trained:
            key = tuple(sorted(o for o in job.overrides()
                               if o.split("=", 1)[0].lstrip("+~") != "seed"))  # fmt: skip
            counts[key] = counts.get(key, 0) + 1
    return max(counts.values(), default=0)


def _natural(path: Path) -> tuple[Any, ...]:
    return tuple(int(t) if t.isdigit() else t for t in re.split(r"(\d+)", path.name))


def describe_jobs(jobs: Sequence[UpstreamJob]) -> str:
    """``0 (model=tiny, workers=0), 1 (...)``: each job with the identity keys that vary."""
    varying = [k for k in IDENTITY_KEYS if len({str(j.identity.get(k)) for j in jobs}) > 1]
    return ", ".join(j.label(varying) for j in jobs)


def select_job(jobs: Sequence[UpstreamJob], how: str) -> UpstreamJob:
    """The job ``run_select=how`` picks (ties: the first in job order).

    ``fastest``: lowest mean seconds per iteration; ``best_return``: highest
    ``episode_return_mean`` at the last iteration (the checkpoint's); ``latest``:
    the last started. Jobs without the figure come last.
    """
    if how == "fastest":
        return min(jobs, key=lambda j: (j.iter_s() is None, j.iter_s() or 0.0))
    if how == "best_return":
        return min(jobs, key=lambda j: (j.final_return() is None, -(j.final_return() or 0.0)))
    if how == "latest":
        return max(jobs, key=lambda j: j.started_at())
    raise ValueError(f"run_select={how!r}: expected one of {', '.join(RunSelect)}")


def pick_jobs(sweep: Path, query: JobQuery) -> list[UpstreamJob]:
    """The trained jobs of ``sweep`` that ``query`` matches; one where it selects.

    Raises:
        CheckpointError: no job matches; the message lists what the folder holds.
    """
    jobs = sweep_jobs(sweep)
    trained = [j for j in jobs if j.trained]
    if not trained:
        held = f"; it holds {describe_jobs(jobs)}" if jobs else ""
        raise CheckpointError(
            f"run={sweep} is neither a training job folder (with {CONFIG_FILE} and "
            f"{CHECKPOINT_DIR}/) nor a sweep folder containing completed training jobs{held}"
        )
    matching = [j for j in trained if query.matches(j)]
    if not matching:
        raise CheckpointError(
            f"run={sweep}: no trained job matches {query.describe()}; the folder holds "
            f"{describe_jobs(jobs)}"
        )
    return matching if query.select == "all" else [select_job(matching, query.select)]


def job_query(cfg: DictConfig, overrides: Iterable[str]) -> JobQuery:
    """The :class:`JobQuery` of a downstream job (keys ``model``, ``run_match``, ``run_select``).

    Only an explicit ``model=`` among ``overrides`` names the model (a default
    model is not a choice); every ``run_match.<key>`` that is set names its key.
    """
    node = OmegaConf.select(cfg, "run_match", default=None)
    match = OmegaConf.to_container(node, resolve=True) if node is not None else {}
    assert isinstance(match, dict)
    return JobQuery(
        model=explicit_model(cfg, overrides),
        match=tuple((str(k), str(v)) for k, v in match.items() if v is not None),
        select=str(OmegaConf.select(cfg, "run_select", default="all")),
    )
