"""The tools a job's results can go to, the extra each needs, and the check that it is there.

Checked with the config, before Ray starts (:func:`check_tools`): a tool whose package is
missing is one line naming the ``pip install`` that brings it.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rlperf.errors import ConfigError

#: The tools, in the order their sinks open; ``tracking=<tool>`` picks one.
TOOLS = ("tensorboard", "mlflow", "wandb")

#: The module each tool's sink imports, and the extra that installs it (pyproject.toml).
#: TensorBoard's event files are written with tensorboardX (Ray Tune already needs it);
#: the ``tensorboard`` extra adds TensorBoard itself, to look at them.
MODULES = {"tensorboard": "tensorboardX", "mlflow": "mlflow", "wandb": "wandb"}


def enabled_tools(tracking: Any) -> list[str]:
    """The tools ``tracking`` (the config's ``tracking`` node, or None) turns on."""
    if tracking is None:
        return []
    return [t for t in TOOLS if bool(tracking[t].enabled)]


def install_hint(tool: str) -> str:
    return f"pip install 'rlperf[{tool}]'"


def missing_tools(tools: list[str]) -> str | None:
    """The first of ``tools`` whose package is not installed, as one line naming the pip
    command that brings it; None when all are there."""
    for tool in tools:
        if importlib.util.find_spec(MODULES[tool]) is None:
            return (
                f"tracking={tool} needs the {MODULES[tool]} package, which is not installed: "
                f"{install_hint(tool)}"
            )
    return None


def check_tools(tracking: Any) -> None:
    """Refuse a tool whose package is not installed, naming the pip command (ConfigError)."""
    missing = missing_tools(enabled_tools(tracking))
    if missing is not None:
        raise ConfigError(missing)


#: The config key that governs each tool (an incident's ``setting``).
SETTING = {
    "tensorboard": "tracking.tensorboard",
    "mlflow": "tracking.mlflow.uri",
    "wandb": "tracking.wandb.mode",
}


@dataclass(frozen=True)
class ToolSettings:
    """Where each tool sends: ``tracking.<tool>.*`` of a job, or ``rlperf-report --to``'s
    options (the same defaults)."""

    mlflow_uri: str | None = None  # None: SQLite in the store folder
    mlflow_experiment: str = "rlperf"
    wandb_project: str = "rlperf"
    wandb_entity: str | None = None
    wandb_mode: str = "offline"

    @classmethod
    def of(cls, tracking: Any) -> ToolSettings:
        """From a job config's ``tracking`` node."""
        m, w = tracking.mlflow, tracking.wandb
        return cls(m.uri, str(m.experiment), str(w.project), w.entity, str(w.mode))


def make_sink(tool: str, settings: ToolSettings, store: Path, root: Path | None = None) -> Any:
    """A tool's sink (rlperf.tracking.dispatch.Sink). ``store``: the folder of MLflow's default
    store (a job's, or its sweep's); ``root``: where TensorBoard and W&B write instead of the
    job's folder (``rlperf-report --to``: the report's folder). Imports the tool's package."""
    # Each sink imports its tool's package, an extra: deferred to the tool asked for.
    if tool == "mlflow":
        from rlperf.tracking.mlflow_sink import MlflowSink  # mlflow

        return MlflowSink(settings.mlflow_uri, settings.mlflow_experiment, store)
    if tool == "tensorboard":
        from rlperf.tracking.tensorboard_sink import TensorboardSink  # tensorboardX

        return TensorboardSink(root)
    if tool == "wandb":
        from rlperf.tracking.wandb_sink import WandbSink  # wandb

        s = settings
        return WandbSink(s.wandb_project, s.wandb_entity, s.wandb_mode, root)
    raise ValueError(f"no tracking tool {tool!r}: {', '.join(TOOLS)}")
