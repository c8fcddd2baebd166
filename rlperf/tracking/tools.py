"""The tools a job's results can go to, the extra each needs, and the check that it is there.

Checked with the config, before Ray starts (:func:`check_tools`): a tool whose package is
missing is one line naming the ``pip install`` that brings it.
"""

from __future__ import annotations

import importlib.util
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
