"""The ``tracking`` group's schema: where a job's results go besides its run folder
(docs/tracking.md). Its options (``conf/tracking/<tool>.yaml``) each turn one tool on, so
``tracking=[mlflow,wandb]`` picks several."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum


class WandbMode(StrEnum):
    """``tracking.wandb.mode``: W&B's own ``mode`` (docs/tracking.md)."""

    offline = "offline"  # files under the run folder; `wandb sync` uploads them later
    online = "online"  # to the W&B server (needs `wandb login` or WANDB_API_KEY)


@dataclass
class MlflowTrackingConfig:
    """``tracking.mlflow``: every job's rows, config and files to an MLflow run."""

    enabled: bool = False  # tracking=mlflow sets it
    # null = a SQLite store in the job's folder (a sweep's: in the sweep folder), with its
    # artifacts beside it; else any MLflow tracking URI (http://127.0.0.1:5000, sqlite:///...).
    uri: str | None = None
    experiment: str = "rlperf"


@dataclass
class TensorboardTrackingConfig:
    """``tracking.tensorboard``: event files under the run folder (a sweep's: one folder)."""

    enabled: bool = False  # tracking=tensorboard sets it


@dataclass
class WandbTrackingConfig:
    """``tracking.wandb``: a W&B run per job, one group per sweep."""

    enabled: bool = False  # tracking=wandb sets it
    project: str = "rlperf"
    entity: str | None = None  # null = W&B's default for the logged-in user
    mode: WandbMode = WandbMode.offline


@dataclass
class TrackingConfig:
    """``tracking``: where a job's results go besides its run folder, live (docs/tracking.md).

    Picked as a group option list: ``tracking=mlflow``, ``tracking=[mlflow,tensorboard]``;
    not part of a cell's identity (rlperf.layout.NON_IDENTITY_KEYS).
    """

    mlflow: MlflowTrackingConfig = field(default_factory=MlflowTrackingConfig)
    tensorboard: TensorboardTrackingConfig = field(default_factory=TensorboardTrackingConfig)
    wandb: WandbTrackingConfig = field(default_factory=WandbTrackingConfig)
