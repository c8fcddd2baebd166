"""MLflow: a run per job in ``tracking.mlflow.experiment``, a sweep's cells children of one
parent run (docs/tracking.md#mlflow).

The store defaults to SQLite in the job's folder (a sweep's: in the sweep folder, shared by
its cells), opened with a lock timeout so that cells writing at once wait for each other
instead of failing ("database is locked"), and its artifacts beside it. A server's calls
are bounded by MLflow's own settings: 2 s per request, one retry (:func:`bound_requests`).
"""

from __future__ import annotations

import logging
import math
import os
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from rlperf.tracking.record import (
    FOLDER_TAG,
    JOB_ID_TAG,
    KIND_TAG,
    PARENT_TAG,
    SweepRef,
    TrackedJob,
    TrackedRow,
)
from rlperf.vocabulary import RunStatus

#: The default store's file and its artifact folder, in the job's (or sweep's) folder.
STORE_FILE = "mlflow.db"
ARTIFACT_DIR = "mlartifacts"
#: Seconds a writer waits for SQLite's lock (cells of a sweep share the store).
SQLITE_LOCK_TIMEOUT_S = 60
#: MLflow's own limits on one request to a server (the measurement comes first).
REQUEST_TIMEOUT_S = 2
REQUEST_RETRIES = 1
#: MLflow's limits per log_batch call and per value.
PARAMS_PER_BATCH = 100
METRICS_PER_BATCH = 1000
PARAM_LENGTH = 6000
TAG_LENGTH = 8000
#: A new experiment's tags: MLflow's UI opens it on its runs (model training), not on
#: its GenAI overview of traces.
EXPERIMENT_TAGS = {"mlflow.experimentKind": "custom_model_development"}
#: rlperf's statuses as MLflow's run statuses.
RUN_STATUS: dict[str, str] = {
    RunStatus.completed: "FINISHED",
    RunStatus.failed: "FAILED",
    RunStatus.invalid: "FAILED",
}


def bound_requests() -> None:
    """Every HTTP call MLflow makes from this process: at most 2 s and one retry, with no
    back-off (MLflow reads these for each request; defaults: 120 s, 7 retries)."""
    os.environ["MLFLOW_HTTP_REQUEST_TIMEOUT"] = str(REQUEST_TIMEOUT_S)
    os.environ["MLFLOW_HTTP_REQUEST_MAX_RETRIES"] = str(REQUEST_RETRIES)
    os.environ["MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR"] = "0"
    os.environ["MLFLOW_HTTP_REQUEST_BACKOFF_JITTER"] = "0"


def store_of(uri: str | None, folder: Path) -> tuple[str, str | None]:
    """``(tracking URI, artifact location for a new experiment)``: ``uri`` as given (its
    server or store decides where artifacts go), or the default SQLite store in ``folder``."""
    if uri:
        return uri, None
    folder = folder.resolve()
    return (
        f"sqlite:///{folder / STORE_FILE}?timeout={SQLITE_LOCK_TIMEOUT_S}",
        (folder / ARTIFACT_DIR).as_uri(),
    )


def run_status(status: str) -> str:
    return RUN_STATUS.get(status, "KILLED")


def _folder_of(path: Path, root: Path | None) -> str | None:
    """The artifact folder that keeps ``path``'s place in the job folder (``.hydra``)."""
    if root is None or path.parent == root:
        return None
    try:
        return path.parent.relative_to(root).as_posix()
    except ValueError:
        return None


def _quoted(value: str) -> str:
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


class MlflowSink:
    """One job's MLflow run (create, rows, artifacts, end), or a sweep's parent run."""

    tool = "mlflow"

    def __init__(self, uri: str | None, experiment: str, folder: Path) -> None:
        bound_requests()
        from mlflow.tracking import MlflowClient  # the extra, loaded only when asked for

        # MLflow's INFO lines (its store's table updates) are not the user's business.
        for name in ("mlflow", "alembic"):
            logging.getLogger(name).setLevel(logging.WARNING)

        self.uri, self.artifacts = store_of(uri, folder)
        self.where = uri or str(folder / STORE_FILE)
        self.client = MlflowClient(tracking_uri=self.uri)
        self.experiment = experiment
        self.run_id: str | None = None
        self.folder: Path | None = None
        self._experiment_id: str | None = None

    def experiment_id(self) -> str:
        if self._experiment_id is None:
            found = self.client.get_experiment_by_name(self.experiment)
            if found is None:
                try:
                    self._experiment_id = self.client.create_experiment(
                        self.experiment, artifact_location=self.artifacts, tags=EXPERIMENT_TAGS
                    )
                except Exception:  # another cell created it first
                    found = self.client.get_experiment_by_name(self.experiment)
                    if found is None:
                        raise
            if found is not None:
                self._experiment_id = found.experiment_id
        assert self._experiment_id is not None
        return self._experiment_id

    def find(self, tag: str, value: str) -> Any | None:
        """The oldest run of the experiment with ``tag`` = ``value``, or None."""
        runs = self.client.search_runs(
            [self.experiment_id()],
            filter_string=f"tags.`{tag}` = {_quoted(value)}",
            order_by=["attributes.start_time ASC"],
            max_results=1,
        )
        return runs[0] if runs else None

    def exists(self, job: TrackedJob) -> bool:
        return self.find(JOB_ID_TAG, job.job_id) is not None

    def parent(self, sweep: SweepRef, create: bool = True) -> str | None:
        """The sweep's parent run id: found by the sweep's identity tag, else created
        (running; the sweep engine ends it)."""
        found = self.find(PARENT_TAG, sweep.id)
        if found is not None:
            return str(found.info.run_id)
        if not create:
            return None
        tags = {KIND_TAG: "sweep", PARENT_TAG: sweep.id, FOLDER_TAG: str(sweep.folder)}
        run = self.client.create_run(self.experiment_id(), tags=tags, run_name=sweep.name)
        return str(run.info.run_id)

    def open(self, job: TrackedJob) -> None:
        from mlflow.entities import Param

        self.folder = job.folder
        tags = {k: v[:TAG_LENGTH] for k, v in job.all_tags().items()}
        if job.sweep is not None:
            tags["mlflow.parentRunId"] = str(self.parent(job.sweep))
        run = self.client.create_run(
            self.experiment_id(),
            start_time=int(job.started_at * 1000) if math.isfinite(job.started_at) else None,
            tags=tags,
            run_name=job.name,
        )
        self.run_id = str(run.info.run_id)
        params = [Param(k, v[:PARAM_LENGTH]) for k, v in job.params.items()]
        for i in range(0, len(params), PARAMS_PER_BATCH):
            self.client.log_batch(self.run_id, params=params[i : i + PARAMS_PER_BATCH])

    def log(self, rows: Sequence[TrackedRow], started_at: float) -> None:
        from mlflow.entities import Metric

        assert self.run_id is not None
        metrics = [
            Metric(key, value, int(row.wall(started_at) * 1000), row.step)
            for row in rows
            for key, value in row.values.items()
        ]
        for i in range(0, len(metrics), METRICS_PER_BATCH):
            self.client.log_batch(self.run_id, metrics=metrics[i : i + METRICS_PER_BATCH])

    def finish(self, status: str, files: Sequence[Path], tags: Mapping[str, str]) -> None:
        from mlflow.entities import RunTag

        assert self.run_id is not None
        if tags:
            self.client.log_batch(
                self.run_id, tags=[RunTag(k, v[:TAG_LENGTH]) for k, v in tags.items()]
            )
        self.end_parent(self.run_id, status, files)

    def end_parent(self, run_id: str, status: str, files: Sequence[Path] = ()) -> None:
        """Send ``files`` (in their folder of the job's folder, where one is open) and end
        the run ``run_id`` with rlperf's ``status``: a job's run, or a sweep's parent."""
        for path in files:
            self.client.log_artifact(run_id, str(path), _folder_of(path, self.folder))
        self.client.set_terminated(run_id, run_status(status), int(time.time() * 1000))

    def reopen_parent(self, run_id: str) -> None:
        """A resumed sweep: its parent runs again."""
        self.client.update_run(run_id, status="RUNNING")
