"""Options of the ``rlperf`` sweeper (``hydra.sweeper.*``), registered in ``hydra/sweeper``.

Imported by Hydra's plugin discovery: dataclasses and the ConfigStore only. No
``from __future__ import annotations`` (see the launcher's config.py for why).
"""

from dataclasses import dataclass, field
from typing import Any, Dict, Optional  # noqa: UP035 -- OmegaConf reads these annotations

from hydra.core.config_store import ConfigStore


@dataclass
class SchedulerConf:
    """``hydra.sweeper.search.scheduler``: who stops hopeless trials early (Tune's schedulers)."""

    # none | asha (AsyncHyperBandScheduler) | median (MedianStoppingRule)
    name: str = "none"
    # The per-iteration metric it compares (null: search.metric when that is a
    # per-iteration column; episode_return_mean, max, for a summary-only metric).
    metric: Optional[str] = None  # noqa: UP045
    mode: Optional[str] = None  # noqa: UP045
    # What "time" is: training_iteration (Tune's count of iterations) or env_steps_total.
    time_attr: str = "training_iteration"
    # asha and median: no trial is stopped before this much time_attr.
    grace_period: int = 1
    # asha: keep the best 1/reduction_factor at each rung.
    reduction_factor: float = 2.0
    # asha: the time_attr of a whole trial (null: train.iterations).
    max_t: Optional[int] = None  # noqa: UP045
    # median: trials that must have reported before one is compared with their median.
    min_samples_required: int = 3


@dataclass
class SearchConf:
    """``hydra.sweeper.search``: one Tune run with one searcher and one scheduler."""

    # null: `-m` expands a grid (Hydra's basic sweeper). Set, `-m` is a search:
    # random (Tune's random sampler) | optuna (Optuna's TPE via OptunaSearch) | grid
    algorithm: Optional[str] = None  # noqa: UP045
    # Trials to run (grid: repeats of the whole grid).
    num_samples: int = 8
    # Trials running at the same time (1 isolates measurements, and a seeded search
    # is reproducible only with 1).
    max_concurrent: int = 1
    # The objective: a metrics.csv column (its last iteration) or a summary.json key.
    metric: str = "episode_return_mean"
    mode: str = "max"  # max | min
    # Seeds the sampler (and nothing else: each trial's own seed is the config's `seed`).
    seed: Optional[int] = None  # noqa: UP045
    scheduler: SchedulerConf = field(default_factory=SchedulerConf)


@dataclass
class RepeatsConf:
    """``hydra.sweeper.repeats``: independent runs of every configuration of a grid, in
    interleaved rounds (docs/sweeps.md#repeats)."""

    # Runs every configuration gets (null: 2; 1: one run, whose run-to-run spread is not
    # measured).
    min: Optional[int] = None  # noqa: UP045
    # Runs at most (null: min). Between min and max, a configuration gets another round
    # until its run-to-run interval is within ±precision (or, with race, it is eliminated).
    max: Optional[int] = None  # noqa: UP045
    # 0.05: stop once the 95 % interval of the objective is within ±5 % of its estimate.
    precision: Optional[float] = None  # noqa: UP045
    # Earlier sweeps (folders or storage URIs, a list or comma-separated) whose repeated
    # configurations on this machine give the run-to-run variance a prior: more power from
    # few runs (docs/sweeps.md#a-prior-from-the-machines-history).
    prior: Optional[Any] = None  # noqa: UP045


@dataclass
class RlperfSweeperConf:
    """``hydra.sweeper``: Hydra's basic sweeper's options, and ``search`` (docs/search.md)."""

    _target_: str = "hydra_plugins.rlperf_sweeper.sweeper.RlperfSweeper"
    # Cells per launch (null: all at once), as in Hydra's basic sweeper.
    max_batch_size: Optional[int] = None  # noqa: UP045
    # Sweep axes of a preset (`hydra.sweeper.params` in conf/experiment/*.yaml).
    params: Optional[Dict[str, str]] = None  # noqa: UP006, UP045
    # A search instead of a grid when search.algorithm is set (docs/search.md).
    search: SearchConf = field(default_factory=SearchConf)
    # Independent runs of every configuration of a grid (docs/sweeps.md#repeats).
    repeats: RepeatsConf = field(default_factory=RepeatsConf)
    # After each round, close the configurations separated from the best of their
    # comparison set (docs/sweeps.md#racing). Grids only.
    race: bool = False


ConfigStore.instance().store(
    group="hydra/sweeper",
    name="rlperf",
    node=RlperfSweeperConf,
    provider="rlperf_sweeper",
)
