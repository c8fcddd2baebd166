"""Finding a training run and its checkpoint from ``run=`` / ``checkpoint=``.

``run=`` names a training job folder, or a sweep folder holding such jobs (the
job is then picked by :func:`rlperf.runs.jobs.pick_jobs`); ``checkpoint=`` names
the ``checkpoint/`` folder of a training job, or its ``rlperf_policy.pt`` (the
run is then the folder the checkpoint was written into). Only paths are checked
here; what the files hold is checked by :mod:`rlperf.runs.checkpoint`. Every
error names the path and what was expected.
"""

from __future__ import annotations

import json
from pathlib import Path

from rlperf.errors import CheckpointError
from rlperf.layout import CHECKPOINT_DIR, CONFIG_FILE, POLICY_FILE, SUMMARY_FILE
from rlperf.runs.jobs import JobQuery, describe_jobs, is_job_folder, pick_jobs

_EXPECTED_CHECKPOINT = f"the {CHECKPOINT_DIR}/ folder of a training job (or its {POLICY_FILE})"


def _as_path(value: str | Path, base: Path) -> Path:
    path = Path(str(value)).expanduser()
    return path if path.is_absolute() else base / path


def find_run_dir(run: Path, query: JobQuery | None = None) -> Path:
    """``run`` itself if it is a job folder, or the training job of a sweep folder ``query`` picks.

    A multirun folder (``multirun/<date>/<time>``) holds one job per cell. The
    jobs ``query`` matches (:func:`pick_jobs`) must come down to one: a single
    run cannot fan out (a downstream sweep does, :mod:`rlperf.sweep.upstream`).
    """
    if not run.exists():
        raise CheckpointError(
            f"run={run}: no such folder; expected a training job folder "
            f"(outputs/<date>/<time>) holding {CONFIG_FILE} and {CHECKPOINT_DIR}/"
        )
    if not run.is_dir():
        raise CheckpointError(
            f"run={run} is a file; expected a training job folder holding {CONFIG_FILE} "
            f"and {CHECKPOINT_DIR}/ (use checkpoint=<path> for a checkpoint folder)"
        )
    if is_job_folder(run):
        return run
    query = query or JobQuery()
    picked = pick_jobs(run, query)
    if len(picked) == 1:
        return picked[0].path
    raise CheckpointError(
        f"run={run} is a sweep folder with {len(picked)} trained jobs{query.describe(' matching ')}"
        f" ({describe_jobs(picked)}); a single run takes one: choose it with run={run}/<job>, "
        f"pick one with run_select=fastest|best_return|latest, narrow the match with model= "
        f"or run_match.<key>=, or run them all as a sweep (rlperf -m ...: a downstream sweep "
        f"fans out over the matching jobs)"
    )


def _checkpoint_dir(checkpoint: str | Path, base: Path) -> Path:
    ckpt = _as_path(checkpoint, base)
    if ckpt.is_file() and ckpt.name == POLICY_FILE:
        return ckpt.parent
    if not ckpt.exists():
        raise CheckpointError(
            f"checkpoint={checkpoint}: no such folder {ckpt}; expected {_EXPECTED_CHECKPOINT}"
        )
    if not ckpt.is_dir():
        raise CheckpointError(
            f"checkpoint={checkpoint}: {ckpt} is a file; expected {_EXPECTED_CHECKPOINT}"
        )
    return ckpt


def resolve_paths(
    run: str | Path | None,
    checkpoint: str | Path | None,
    base: Path | None = None,
    query: JobQuery | None = None,
) -> tuple[Path | None, Path]:
    """(run folder, checkpoint folder) of ``run=`` / ``checkpoint=`` (relative to ``base``).

    ``checkpoint=`` may name the checkpoint folder or its ``rlperf_policy.pt``;
    without ``run=`` the run folder is the one the checkpoint was written into
    (its parent), or None where that folder holds no run config. ``query``
    picks the job of a sweep folder (:func:`find_run_dir`).
    """
    base = base if base is not None else Path.cwd()
    if run is None and checkpoint is None:
        raise CheckpointError(
            f"no training run given: pass run=<training job folder> or checkpoint=<path> "
            f"({_EXPECTED_CHECKPOINT})"
        )
    run_dir = find_run_dir(_as_path(run, base), query) if run is not None else None
    if checkpoint is not None:
        ckpt = _checkpoint_dir(checkpoint, base)
        if run_dir is None and (ckpt.parent / CONFIG_FILE).is_file():
            run_dir = ckpt.parent
        return run_dir, ckpt
    assert run_dir is not None
    ckpt = run_dir / CHECKPOINT_DIR
    if not ckpt.is_dir():
        raise CheckpointError(
            f"run={run}: {ckpt} does not exist; a training job writes its checkpoint at "
            f"the end of training{_run_status(run_dir)}"
        )
    return run_dir, ckpt


def _run_status(run_dir: Path) -> str:
    try:
        status = json.loads((run_dir / SUMMARY_FILE).read_text()).get("status")
    except (OSError, ValueError):
        return ""
    return f" (its {SUMMARY_FILE} says status={status})" if status else ""
