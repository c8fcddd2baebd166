"""What configurations are ranked on: one :class:`Objective` per comparison family.

Training configurations are compared on the time per iteration (``iter_s``,
mean over the non-warm-up iterations); inference configurations (rollout,
edge) on the time per action (``action_ms``, or ``forward_ms`` where a cell
only has that), median over the non-warm-up steps, since latency
distributions have long tails.

To rank on something else (e.g. the time to reach a target return), define an
:class:`Objective` and put it in :data:`OBJECTIVES` for its family, or pass it
to :func:`rlperf.report.findings.analyse_family` next to the family's own:
``samples`` returns one run's values (one value per run is fine: such a run has
no within-run interval and repeats give it a run-to-run one), ``statistic``
reduces them, ``lower_is_better`` orders them, and :meth:`Objective.estimate`,
ranks and ties do the rest. Speedups and the gate's verdicts are ratios
baseline / configuration, which read as "faster" only for a time-like objective
(lower is better).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace

import numpy as np

from rlperf.report import stats
from rlperf.report.cells import Cell, included
from rlperf.report.repeats import Configuration


def training_samples(cell: Cell) -> np.ndarray:
    """The non-excluded iteration times of a training run."""
    df = cell.iterations
    if df is None:
        return np.array([])
    return included(df)["iter_s"].to_numpy(dtype=float)


def latency_samples(cell: Cell) -> np.ndarray:
    """The non-excluded action latencies (forward latencies where only those exist)."""
    df = cell.latency
    if df is None:
        return np.array([])
    kept = included(df)
    col = "action_ms" if kept["action_ms"].notna().any() else "forward_ms"
    return kept[col].to_numpy(dtype=float)


def latency_sample_word(cell: Cell) -> str:
    """What one latency sample of the cell is (a step, or a legacy episode / run mean)."""
    if cell.latency is not None and len(cell.latency):
        granularity = str(cell.latency["granularity"].iloc[0])
        return {"step": "steps", "episode_mean": "episode means", "run_mean": "run means"}.get(
            granularity, "samples"
        )
    return "samples"


@dataclass(frozen=True)
class Objective:
    """A metric a family's configurations are estimated, ranked and compared on."""

    metric: str
    statistic: str  # "mean" or "median" of a run's samples
    unit: str
    what: str  # how findings name it
    samples: Callable[[Cell], np.ndarray]
    sample_word: Callable[[Cell], str]
    lower_is_better: bool = True

    def within_run(self, cell: Cell) -> stats.Estimate:
        """One run's estimate with its bootstrap interval over the run's samples."""
        return stats.bootstrap_ci(self.samples(cell), self.statistic, cell.id)

    def estimate(
        self, configuration: Configuration, runs: Mapping[str, stats.Estimate]
    ) -> stats.Estimate:
        """The configuration's estimate: its run's own where it ran once, else the geometric
        mean of its runs' values with a run-to-run interval (``runs``: cell id -> within-run,
        see :func:`rlperf.report.stats.across_runs`)."""
        measured = [c for c in configuration.completed if np.isfinite(runs[c.id].value)]
        if len(measured) <= 1:  # one run (or one with samples that count): its own interval
            return runs[(measured or configuration.completed)[0].id]
        return stats.across_runs([runs[c.id].value for c in measured], configuration.id)

    def order(self, estimates: Mapping[str, stats.Estimate]) -> list[str]:
        """Ids best first."""
        sign = 1.0 if self.lower_is_better else -1.0
        return sorted(estimates, key=lambda k: sign * estimates[k].value)


OBJECTIVES: dict[str, Objective] = {
    "training": Objective(
        "iter_s", "mean", "s", "time per training iteration", training_samples,
        lambda _: "iterations",
    ),
    "inference": Objective(
        "action_ms", "median", "ms", "latency per action", latency_samples, latency_sample_word
    ),
}  # fmt: skip


def objective_of(family: str) -> Objective:
    """The family's objective (a new stage's family is ranked like training)."""
    return OBJECTIVES.get(family) or replace(OBJECTIVES["training"], what=family)
