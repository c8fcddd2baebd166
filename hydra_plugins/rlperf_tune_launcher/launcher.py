"""The ``rlperf_tune`` launcher class: thin; the work is the sweep engine's (``_impl``,
imported in ``launch``: :mod:`rlperf.sweep.launch`)."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from hydra.core.utils import JobReturn
from hydra.plugins.launcher import Launcher
from hydra.types import HydraContext, TaskFunction
from omegaconf import DictConfig, OmegaConf

if TYPE_CHECKING:
    from rlperf.sweep.state import SweepSetup

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
        # _impl imports Ray, Tune and pandas: deferred, Hydra's plugin discovery imports this
        # module for every app (only a launch needs them).
        from hydra_plugins.rlperf_tune_launcher import _impl

        return _impl.launch(self.sweep_setup(), job_overrides, initial_job_idx)

    def sweep_setup(self) -> SweepSetup:
        """What the sweep engine runs with: this launcher's Hydra objects and options
        (the sweeper's search uses it too)."""
        # Plugin discovery imports this module for every Hydra app: rlperf's own only here
        # (rlperf.sweep.state pulls rlperf.algos, and with it gymnasium and ale_py).
        from rlperf.sweep.state import SweepSetup

        assert self.config is not None and self.hydra_context is not None
        assert self.task_function is not None, "setup() was not called"
        return SweepSetup(self.config, self.hydra_context, self.task_function, self.options)
