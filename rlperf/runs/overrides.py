"""A job's command-line overrides, and what they set: the keys, and an explicit ``model=``.

A downstream job (rollout, edge, serve) treats what the user typed differently
from what was only composed by default: an explicit ``model=`` picks the job of
an upstream sweep and must match the run's model, and ``env.<key>=`` applies on
top of the run's env (:mod:`rlperf.runs.merge`).
"""

from __future__ import annotations

from collections.abc import Iterable

from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig


def command_line_overrides() -> list[str]:
    """This job's command-line overrides, sweep parameters included (empty outside Hydra)."""
    try:
        if not HydraConfig.initialized():
            return []
        return [str(o) for o in HydraConfig.get().overrides.task]
    except Exception:  # no Hydra app around this call
        return []


def override_keys(overrides: Iterable[str]) -> set[str]:
    """The config keys ``overrides`` set: ``+env.noop_max=0`` -> ``env.noop_max``."""
    return {str(o).split("=", 1)[0].lstrip("+~") for o in overrides}


def explicit_model(cfg: DictConfig, overrides: Iterable[str]) -> str | None:
    """``model.name`` where ``model=`` is among ``overrides``, else None."""
    return str(cfg.model.name) if "model" in override_keys(overrides) else None
