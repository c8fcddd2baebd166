"""TensorBoard: event files under the run folder; a sweep's in one folder, a subfolder per
cell (``tensorboard --logdir multirun/<date>/<time>/tensorboard``; docs/tracking.md).

Written with tensorboardX (Ray Tune needs it already); each row's numbers are scalars at
its step and wall-clock time, the composed config is the run's hyperparameters (TensorBoard's
HParams tab) and, with the fingerprint and the env protocol, a text summary.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path

from rlperf.tracking.record import TrackedJob, TrackedRow

#: The folder of a job's event files: in the run folder, or in the sweep folder.
TENSORBOARD_DIR = "tensorboard"


def logdir(job: TrackedJob, root: Path | None = None) -> Path:
    """A job's event folder: ``<run>/tensorboard``, ``<sweep>/tensorboard/<cell label>``; sent
    afterwards (``root``: the report's folder), ``<root>/tensorboard/[<sweep>/]<name>``."""
    if root is not None:
        base = root / TENSORBOARD_DIR
        if job.sweep is not None:
            base = base / safe_name(job.sweep.name)
        return base / safe_name(job.name)
    if job.sweep is None:
        return job.folder / TENSORBOARD_DIR
    return job.sweep.folder / TENSORBOARD_DIR / safe_name(job.name)


def safe_name(label: str) -> str:
    """A cell label as a folder name: ``#3 model=tiny workers=0`` -> ``3_model=tiny_workers=0``."""
    return re.sub(r"[^A-Za-z0-9=.,+\-]+", "_", label).strip("_") or "job"


def _hparam(value: str) -> str | float | bool:
    for parse in (int, float):
        try:
            return parse(value)
        except ValueError:
            pass
    return {"true": True, "false": False}.get(value, value)


class TensorboardSink:
    tool = "tensorboard"

    def __init__(self, root: Path | None = None) -> None:
        self.root = root
        self.writer: object | None = None
        self.where = str(root / TENSORBOARD_DIR) if root is not None else ""

    def exists(self, job: TrackedJob) -> bool:
        return any(logdir(job, self.root).glob("events.out.tfevents.*"))

    def open(self, job: TrackedJob) -> None:
        from tensorboardX import SummaryWriter  # the extra, loaded only when asked for
        from tensorboardX.summary import hparams

        path = logdir(job, self.root)
        self.where = self.where or str(path)
        writer = SummaryWriter(logdir=str(path), flush_secs=5)
        self.writer = writer
        # The HParams summary in the run's own folder (add_hparams would make a subfolder).
        params = {k: _hparam(v) for k, v in job.params.items()}
        files = writer._get_file_writer()  # tensorboardX's, public in all but name
        for summary in hparams(params, {}):
            files.add_summary(summary)
        text = {"config": job.params, "tags": job.all_tags()}
        for name, value in text.items():
            body = "\n".join(f"    {k}: {v}" for k, v in value.items())
            writer.add_text(name, body)
        writer.add_text("job", json.dumps({"name": job.name, "id": job.job_id}))

    def log(self, rows: Sequence[TrackedRow], started_at: float) -> None:
        writer = self.writer
        assert writer is not None
        for row in rows:
            for key, value in row.values.items():
                add = writer.add_scalar  # type: ignore[attr-defined]
                add(key, value, row.step, walltime=row.wall(started_at))
        writer.flush()  # type: ignore[attr-defined]

    def finish(self, status: str, files: Sequence[Path], tags: Mapping[str, str]) -> None:
        if self.writer is not None:
            self.writer.add_text("status", status)  # type: ignore[attr-defined]
            self.writer.close()  # type: ignore[attr-defined]
