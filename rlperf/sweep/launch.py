"""A sweep's run: N override lists of a Hydra multirun in, N JobReturns out, in order.

In between (each step in its module):

1. every cell's sweep config is loaded, hashed and given its folder; cells the
   sweep folder's index says completed are kept (:mod:`rlperf.sweep.prepare`);
2. pre-flight: each cell is validated and its Ray request compared with what Ray
   will have; infeasible cells are skipped with the reason, the rest grouped by
   how Ray must be started (:mod:`rlperf.sweep.preflight`);
3. each group runs as one Tune experiment in its own Ray (:mod:`rlperf.sweep.groups`),
   every cell a trial (:mod:`rlperf.sweep.trial`) whose events the Tune callback
   records (:mod:`rlperf.sweep.callback`);
4. progress lines go to stderr; ``sweep.json`` and each ``cell.json`` are updated
   at every event; the final table lists every cell.

The ``rlperf_tune`` launcher plugin (hydra_plugins/rlperf_tune_launcher) is a thin
shell over :func:`launch`; it imports this module inside its ``launch()`` (Ray,
Tune, RLlib).
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from hydra.core.utils import JobReturn
from omegaconf import OmegaConf

from rlperf.console import TERMINAL, Console
from rlperf.console.deprecations import watching
from rlperf.errors import ExitCode, SweepIncomplete
from rlperf.resources.node_watch import NodeLost
from rlperf.results.storage import parse_storage
from rlperf.sweep.design import Design
from rlperf.sweep.groups import LocalRay, run_group, stored_input
from rlperf.sweep.index import SweepIndex
from rlperf.sweep.lifecycle import run_lifecycle
from rlperf.sweep.preflight import (
    announce,
    cluster_preflight,
    preflight,
    record_not_run,
    register_groups,
    strict_check,
)
from rlperf.sweep.prepare import prepare_cells
from rlperf.sweep.progress import SweepProgress, format_table
from rlperf.sweep.rounds import Judge, Rounds
from rlperf.sweep.state import (
    Group,
    Sweep,
    SweepSetup,
    fetch_finished,
    publish_index,
    ray_options,
    sweep_session,
)
from rlperf.sweep.trial import job_return
from rlperf.vocabulary import RunStatus

log = logging.getLogger(__name__)


def launch(
    setup: SweepSetup,
    job_overrides: Sequence[Sequence[str]],
    initial_job_idx: int,
    judge: Judge | None = None,
) -> Sequence[JobReturn]:
    """Run every cell as a Tune trial; one JobReturn per override list, in order.

    With repeats (``hydra.sweeper.repeats``, :mod:`rlperf.sweep.rounds`), each list's
    further runs go in rounds after it; ``judge`` reads the runs' objective values between
    rounds (needed for ``precision`` and ``race``).

    An rlperf sweep in which cells failed or were invalid raises
    :class:`~rlperf.errors.SweepIncomplete` after the final table instead
    (docs/exit-codes.md); other Hydra apps get their failed JobReturns.
    """
    Design.of(setup.config)  # a design that cannot run is refused before anything starts
    with sweep_session(setup) as (sweep_dir, console):
        sweep = _new_sweep(setup, job_overrides, initial_job_idx, sweep_dir, console)
        with watching():
            run_lifecycle(sweep, GridStrategy(sweep, judge))
        outcome = _outcome(sweep)
        if outcome is not None:
            log.error("%s", outcome, extra={TERMINAL: False})
    if outcome is not None:
        raise outcome
    return [job_return(c) for c in sweep.cells if c.record.repeat == 0]


def _new_sweep(
    setup: SweepSetup,
    job_overrides: Sequence[Sequence[str]],
    initial_job_idx: int,
    sweep_dir: Path,
    console: Console,
) -> Sweep:
    """The sweep's index (resumed from ``sweep.json``), its cells and its progress display."""
    opts = setup.options
    index = SweepIndex.load(sweep_dir) if opts.resume else SweepIndex(sweep_dir)
    index.options = OmegaConf.to_container(opts, resolve=True)  # type: ignore[assignment]
    storage = parse_storage(opts.get("storage"))
    if storage is not None:
        storage.check_writable()
        fetch_finished(index, storage)
    progress = SweepProgress(int(opts.max_concurrent_trials), console)
    cells = prepare_cells(setup, job_overrides, initial_job_idx, sweep_dir, index)
    sweep = Sweep(setup, sweep_dir, index, cells, progress, ray_options(setup.config))
    sweep.by_hash = {c.record.hash: c for c in cells}
    sweep.storage = storage
    return sweep


class GridStrategy:
    """A grid's part of the lifecycle (:func:`rlperf.sweep.lifecycle.run_lifecycle`): every
    cell validated and grouped by how Ray must start before Ray; each group in a Ray of its
    own (:class:`LocalRay`), round after round; the index and the table at the end."""

    kept, resumes = "completed cells", "resume"

    def __init__(self, sweep: Sweep, judge: Judge | None) -> None:
        self.sweep, self.judge = sweep, judge
        self.groups: list[Group] = []
        self.existing = False
        self.local: LocalRay | None = None

    def before_ray(self, existing: bool) -> None:
        self.existing = existing
        self.local = None if existing else LocalRay(self.sweep)
        self.groups = preflight(self.sweep, existing)

    def stored(self) -> bool:
        sweep = self.sweep
        return sweep.storage is not None or any(stored_input(c) for c in sweep.cells)

    def on_cluster(self) -> None:
        cluster_preflight(self.sweep, self.groups)

    def start_local(self) -> bool:
        return False  # each group starts its own, as it runs (run_group)

    def run(self) -> None:
        sweep, groups = self.sweep, self.groups
        strict_check(sweep)
        register_groups(sweep, groups)
        record_not_run(sweep)
        announce(sweep, groups, self.existing)
        rounds = Rounds(sweep, groups, self.judge)
        sweep.progress.start_live([c.record for c in sweep.cells if not c.kept])
        for r in range(rounds.design.max):
            for group in rounds.groups_of_round(r, self.local):
                _run_to_end(sweep, group, self.local, rounds.label(r))
            if not rounds.decide(r):
                break

    def close(self) -> None:
        if self.local is not None:
            self.local.close()

    def finish(self) -> None:
        sweep = self.sweep
        sweep.progress.stop_live()
        sweep.index.save()
        if sweep.storage is not None:
            publish_index(sweep)
        if any(c.record.status != RunStatus.pending or c.kept for c in sweep.cells):
            sweep.progress.say("cells:\n" + format_table(sweep.records))


def _run_to_end(sweep: Sweep, group: Group, local: LocalRay | None, label: str) -> None:
    """:func:`run_group`; when the group's Ray loses its node (the raylet died), the cell that
    ran fails with the reason, and the group's cells not started go on in a fresh Ray."""
    while group.cells:
        try:
            run_group(sweep, group, local, label)
            return
        except NodeLost:
            rest = [c for c in group.cells if c.record.status == RunStatus.pending]
            lost_gid, group = group.gid, Group(-1, group.start, rest, group.capacity)
            register_groups(sweep, [group])
            if rest:
                sweep.progress.say(
                    f"group {lost_gid}: Ray's node was lost; {len(rest)} cell(s) not started "
                    f"go on in a new Ray (group {group.gid})"
                )


def _outcome(sweep: Sweep) -> SweepIncomplete | None:
    """How the sweep ends (docs/exit-codes.md): None when every rlperf cell completed or was
    skipped; else exit 1 if a cell failed, 2 if cells were only invalid."""
    records = [c.record for c in sweep.cells if c.rlperf]
    counts = Counter(r.status for r in records)
    failed, invalid = counts[RunStatus.failed], counts[RunStatus.invalid]
    if not failed and not invalid:
        return None
    what = ", ".join(
        f"{n} {status}"
        for status, n in ((RunStatus.failed, failed), (RunStatus.invalid, invalid))
        if n
    )
    message = (
        f"sweep of {len(records)} cells: {what} (reasons in the table above; each cell's "
        f"summary.json has its error). The other cells' results stand; the same command with "
        f"hydra.sweep.dir={sweep.sweep_dir} runs only the cells not completed"
    )
    return SweepIncomplete(message, ExitCode.failed if failed else ExitCode.user_error)
