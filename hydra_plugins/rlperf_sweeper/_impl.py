"""The sweeper's work: a downstream batch fanned out over an upstream sweep's jobs
(:func:`rlperf.sweep.upstream.expand_batch`), or a search run by the sweep engine
(:func:`rlperf.sweep.search.run_search`).

Imported inside the sweeper's methods (plugin discovery imports the sweeper for every
Hydra app); the search engine, which imports Ray and Tune, only when a search runs, so
that expanding a grid's batch stays light.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from hydra.core.utils import JobReturn
from omegaconf import DictConfig, OmegaConf

from hydra_plugins.rlperf_tune_launcher.launcher import RlperfTuneLauncher
from rlperf.errors import SearchSpaceError
from rlperf.sweep.space import check_search_options, parse_space, with_params
from rlperf.sweep.upstream import expand_batch


def search(
    launcher: Any, params: Any, arguments: list[str], options: DictConfig
) -> list[JobReturn]:
    """One Tune run over the space of ``params`` and ``arguments`` (hydra-optuna-sweeper's
    syntax, :mod:`rlperf.sweep.space`); ``options``: ``hydra.sweeper.search``."""
    # Ray, Tune and pandas: deferred, only a search needs them (not a grid's batch).
    from rlperf.sweep.search import run_search

    check_search_options(options)
    space = parse_space(with_params(params, arguments), str(options.algorithm))
    if not isinstance(launcher, RlperfTuneLauncher):
        raise SearchSpaceError(
            f"a search runs its trials with rlperf's launcher (hydra/launcher=rlperf_tune), "
            f"not {type(launcher).__name__}"
        )
    return run_search(launcher.sweep_setup(), space, options)


def job_batch(
    batch: Sequence[Sequence[str]], config: DictConfig, hydra_context: Any
) -> Sequence[Sequence[str]]:
    """Hydra's batch with each downstream cell over a sweep folder fanned out per job."""
    loader = hydra_context.config_loader

    def load(overrides: list[str]) -> DictConfig:
        return loader.load_sweep_config(config, overrides)

    base_run = OmegaConf.select(config, "run", default=None)
    return expand_batch(batch, load, None if base_run is None else str(base_run))
