"""The ``rlperf`` sweeper: Hydra's basic sweeper whose batches get the upstream-job axis,
or a search (``hydra.sweeper.search.algorithm`` set: one Tune run, docs/search.md)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
from omegaconf import DictConfig, OmegaConf


class RlperfSweeper(BasicSweeper):
    """Hydra's ``basic`` sweeper; a downstream cell over a sweep folder fans out per job.

    Hydra's basic sweeper is subclassed rather than copied: the grid expansion,
    ``hydra.sweeper.params`` and batching stay Hydra's. Each batch is expanded
    (:func:`rlperf.sweep.upstream.expand_batch`) before it is validated and
    launched, so job numbers, ``multirun.yaml`` and the launcher's one result per
    override list hold for the added cells too.

    With ``search.algorithm`` set, :meth:`sweep` is a search instead: the
    overrides in hydra-optuna-sweeper's syntax are its space
    (:mod:`rlperf.sweep.space`), and one Tune run with a searcher and a scheduler
    runs the trials (:mod:`rlperf.sweep.search`). An option of
    this sweeper rather than a sweeper of its own, so that an experiment preset
    can make a search (the primary config's ``override hydra/sweeper`` wins over a
    preset's).
    """

    def __init__(
        self,
        max_batch_size: int | None,
        params: Any = None,
        search: Any = None,
        repeats: Any = None,
        race: bool = False,
    ) -> None:
        super().__init__(max_batch_size=max_batch_size, params=params)
        # The grid's repeats and race are read by the launcher from the sweep's config
        # (hydra.sweeper.*: rlperf.sweep.design.Design.of); a search refuses them here.
        self.repeats, self.race = repeats, race
        plain = (
            OmegaConf.to_container(search, resolve=True) if OmegaConf.is_config(search) else search
        )
        self.search: DictConfig | None = None
        if isinstance(plain, dict):
            self.search = OmegaConf.create(plain)

    def sweep(self, arguments: list[str]) -> Any:
        # rlperf's modules: deferred, Hydra's plugin discovery imports this module for every
        # app (a search then imports Ray and Tune).
        from hydra_plugins.rlperf_sweeper import _impl

        if self.search is None or self.search.algorithm is None:
            assert self.config is not None
            _impl.check_grid_design(self.config)  # before Hydra makes the sweep folder
            _impl.check_launcher(self.launcher)
            return super().sweep(arguments)
        _impl.check_search_design(self.repeats, self.race)
        _impl.check_launcher(self.launcher)
        return _impl.search(self.launcher, self.params, arguments, self.search)

    def get_job_batch(self) -> Sequence[Sequence[str]]:
        # As in sweep(): only when a multirun asks for a batch.
        from hydra_plugins.rlperf_sweeper import _impl

        assert self.config is not None and self.hydra_context is not None
        return _impl.job_batch(super().get_job_batch(), self.config, self.hydra_context)
