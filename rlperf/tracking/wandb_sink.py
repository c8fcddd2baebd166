"""Weights & Biases: a run per job, a sweep's cells in one group; offline by default, with
the run folder as W&B's directory (``wandb sync <run folder>/wandb/offline-run-*`` uploads
it later; docs/tracking.md#wb).

The run's config is the composed config; its history the rows, at their step; its summary
(W&B's default) the last row. The fingerprint and the env protocol go as files, and a few
tags (stage, host, env). W&B's own console capture and system metrics stay off: rlperf has
its terminal and its telemetry, and a second sampler would load the measured machine.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from rlperf.tracking.record import TrackedJob, TrackedRow, short_id
from rlperf.vocabulary import RunStatus

#: rlperf's statuses as the exit code W&B's run ends with.
EXIT_CODE: dict[str, int] = {RunStatus.completed: 0}
#: W&B refuses longer tags.
TAG_LENGTH = 64


def settings(wandb: Any) -> Any:
    return wandb.Settings(
        silent=True,
        console="off",
        x_disable_stats=True,
        disable_git=True,
        save_code=False,
        x_save_requirements=False,
    )


class WandbSink:
    tool = "wandb"

    def __init__(
        self, project: str, entity: str | None, mode: str, root: Path | None = None
    ) -> None:
        """``root``: W&B's directory; default the job's folder."""
        # W&B's own terminal lines (its run banner, "Symlinked 1 file ...") stay off: set
        # before W&B sets itself up, it is the one switch its terminal helpers read.
        os.environ.setdefault("WANDB_SILENT", "true")
        self.project, self.entity, self.mode, self.root = project, entity, mode, root
        self.run: Any = None
        self.folder: Path | None = None
        self.where = f"W&B ({mode}) project {project}"

    def run_id(self, job: TrackedJob) -> str:
        return short_id(job.job_id)

    def exists(self, job: TrackedJob) -> bool:
        rid = self.run_id(job)
        if self.mode == "offline":
            return any(((self.root or job.folder) / "wandb").glob(f"offline-run-*-{rid}"))
        import wandb  # the extra, loaded only when asked for

        try:
            path = "/".join(p for p in (self.entity, self.project, rid) if p)
            wandb.Api(timeout=2).run(path)
        except Exception:  # not found (or W&B unreachable: then sending will say so)
            return False
        return True

    def open(self, job: TrackedJob) -> None:
        import wandb  # the extra, loaded only when asked for

        self.folder = job.folder
        tags = [f"stage:{job.stage}"]
        for key, name in (("fingerprint.hostname", "host"), ("env_protocol.env_id", "env")):
            if key in job.tags:
                tags.append(f"{name}:{job.tags[key]}"[:TAG_LENGTH])
        self.run = wandb.init(
            project=self.project,
            entity=self.entity,
            dir=str(self.root or job.folder),
            id=self.run_id(job),
            name=job.name,
            group=job.sweep.name if job.sweep is not None else None,
            job_type=job.stage,
            config=job.config,
            tags=tags,
            mode=self.mode,  # type: ignore[arg-type]
            reinit="create_new",
            settings=settings(wandb),
        )

    def log(self, rows: Sequence[TrackedRow], started_at: float) -> None:
        for row in rows:
            self.run.log(dict(row.values), step=row.step)

    def finish(self, status: str, files: Sequence[Path], tags: Mapping[str, str]) -> None:
        for path in files:
            # Under their own names in the run folder (.hydra/config.yaml is not W&B's config).
            self.run.save(str(path), base_path=str(self.folder or path.parent), policy="now")
        self.run.finish(exit_code=EXIT_CODE.get(status, 1))
