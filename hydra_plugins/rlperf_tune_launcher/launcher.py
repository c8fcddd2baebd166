"""The ``rlperf_tune`` launcher class: thin; the work is in ``_core`` (imported in ``launch``)."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from hydra.core.utils import JobReturn
from hydra.plugins.launcher import Launcher
from hydra.types import HydraContext, TaskFunction
from omegaconf import DictConfig, OmegaConf

log = logging.getLogger(__name__)


class RlperfTuneLauncher(Launcher):
    """Runs each cell of a Hydra multirun as a Ray Tune trial (see docs/sweeps.md)."""

    def __init__(self, **options: Any) -> None:
        # Hydra passes the resolved ``hydra.launcher`` node (minus _target_) as keywords.
        plain = {
            k: OmegaConf.to_container(v, resolve=True) if OmegaConf.is_config(v) else v
            for k, v in options.items()
        }
        self.options: DictConfig = OmegaConf.create(plain)
        self.config: DictConfig | None = None
        self.task_function: TaskFunction | None = None
        self.hydra_context: HydraContext | None = None

    def setup(
        self,
        *,
        hydra_context: HydraContext,
        task_function: TaskFunction,
        config: DictConfig,
    ) -> None:
        self.config = config
        self.hydra_context = hydra_context
        self.task_function = task_function

    def launch(
        self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int
    ) -> Sequence[JobReturn]:
        """One JobReturn per override list, in order."""
        from hydra_plugins.rlperf_tune_launcher import _core

        return _core.launch(self, job_overrides, initial_job_idx)
