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
from rlperf.sweep.design import Design
from rlperf.sweep.space import check_search_options, parse_space, with_params
from rlperf.sweep.state import check_options
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


def check_grid_design(config: DictConfig) -> None:
    """Refuse repeats that cannot run (:class:`rlperf.sweep.design.Design`), before anything
    is made or run."""
    Design.of(config)


def check_launcher(launcher: Any) -> None:
    """rlperf's launcher options out of range (a storage URI carrying a key, which
    ``multirun.yaml`` would hold) are refused before Hydra makes the sweep folder."""
    if isinstance(launcher, RlperfTuneLauncher):
        check_options(launcher.options)


def check_search_design(repeats: Any, race: bool) -> None:
    """A search runs each trial once: ``hydra.sweeper.repeats`` and ``race`` are a grid's
    (``num_samples`` with ``algorithm=grid`` repeats the grid instead)."""
    plain = OmegaConf.to_container(repeats) if OmegaConf.is_config(repeats) else repeats or {}
    assert isinstance(plain, dict)
    # min=1 is what a search does anyway (a test suite's sweeps say it everywhere).
    given = [
        f"hydra.sweeper.repeats.{k!s}={v!s}"
        for k, v in plain.items()
        if v is not None and not (k == "min" and v == 1)
    ]
    if race:
        given.append("hydra.sweeper.race=true")
    if given:
        raise SearchSpaceError(
            f"{', '.join(given)}: repeats and racing are for grids; a search "
            "(hydra.sweeper.search.algorithm) runs each trial once and stops trials with its "
            "scheduler (with algorithm=grid, hydra.sweeper.search.num_samples repeats the grid)"
        )


def job_batch(
    batch: Sequence[Sequence[str]], config: DictConfig, hydra_context: Any
) -> Sequence[Sequence[str]]:
    """Hydra's batch with each downstream cell over a sweep folder fanned out per job."""
    loader = hydra_context.config_loader

    def load(overrides: list[str]) -> DictConfig:
        return loader.load_sweep_config(config, overrides)

    base_run = OmegaConf.select(config, "run", default=None)
    return expand_batch(batch, load, None if base_run is None else str(base_run))
