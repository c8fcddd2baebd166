"""The ``rlperf`` sweeper: Hydra's basic sweeper whose batches get the upstream-job axis."""

from __future__ import annotations

from collections.abc import Sequence

from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
from omegaconf import DictConfig, OmegaConf


class RlperfSweeper(BasicSweeper):
    """Hydra's ``basic`` sweeper; a downstream cell over a sweep folder fans out per job.

    Hydra's basic sweeper is subclassed rather than copied: the grid expansion,
    ``hydra.sweeper.params`` and batching stay Hydra's. Each batch is expanded
    (:func:`rlperf.sweep.upstream.expand_batch`) before it is validated and
    launched, so job numbers, ``multirun.yaml`` and the launcher's one result per
    override list hold for the added cells too.
    """

    def get_job_batch(self) -> Sequence[Sequence[str]]:
        from rlperf.sweep.upstream import expand_batch

        batch = super().get_job_batch()
        assert self.config is not None and self.hydra_context is not None
        loader = self.hydra_context.config_loader
        config = self.config

        def load(overrides: list[str]) -> DictConfig:
            return loader.load_sweep_config(config, overrides)

        base_run = OmegaConf.select(config, "run", default=None)
        return expand_batch(batch, load, None if base_run is None else str(base_run))
