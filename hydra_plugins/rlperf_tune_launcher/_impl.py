"""The launcher's work: its Hydra objects as a :class:`~rlperf.sweep.state.SweepSetup`,
run by the sweep engine (:func:`rlperf.sweep.launch.launch`).

Imported inside :meth:`RlperfTuneLauncher.launch` only: the engine imports Ray and
Tune, which plugin discovery and config composition must not pay for.
"""

from __future__ import annotations

from collections.abc import Sequence

from hydra.core.utils import JobReturn

from rlperf.report.judge import judge_runs
from rlperf.sweep.launch import launch as launch_cells
from rlperf.sweep.state import SweepSetup


def launch(
    setup: SweepSetup, job_overrides: Sequence[Sequence[str]], initial_job_idx: int
) -> Sequence[JobReturn]:
    """Every cell of the batch as a Tune trial; one JobReturn per override list, in order.
    Between the rounds of repeats, the report's reading judges the runs (the sweep engine
    sits below the report). ``setup``: the launcher's Hydra objects and options."""
    return launch_cells(setup, job_overrides, initial_job_idx, judge_runs)
