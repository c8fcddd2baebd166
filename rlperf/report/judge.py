"""What a sweep's rounds are judged on: each completed run's objective value, read the way
the report reads it, so that a sweep stops on the same numbers its report then shows.

The sweep engine (:mod:`rlperf.sweep.rounds`) sits below the report and cannot import it;
the launcher plugin hands it :func:`judge_runs`. One of the report's two entry points, beside
its command (:mod:`rlperf.report.cli`): the report reads, the sweep asks.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

from rlperf.report.compare.comparison import compare_cells, configuration_labels
from rlperf.report.read.collect import load_cells
from rlperf.report.read.discover import discover
from rlperf.report.read.fingerprints import key_of
from rlperf.report.stats.objectives import choose
from rlperf.report.stats.repeats import Configuration
from rlperf.stats.race import RunValue
from rlperf.vocabulary import Family


def judge_runs(paths: Sequence[Path]) -> list[RunValue]:
    """The objective value of every completed run among the cell folders ``paths``.

    Runs are pooled into configurations and ranked within comparison sets (one family, one
    workload) as the report does; each comparison's objective is the report's default
    (:func:`rlperf.report.stats.objectives.choose`), one value per run (its within-run
    estimate; a time to target that was not reached is a lower bound). A configuration is
    named by its key and a digest of its fingerprint, the same whichever runs are judged
    together (a sweep judges each run once). Serve cells, judged by their rate under a
    latency bound, have none.
    """
    if not paths:
        return []
    cells, _ = load_cells(discover(list(paths)).refs)
    if not cells:
        return []
    comparison = compare_cells(cells, strict=False)
    labels = configuration_labels(comparison)
    out: list[RunValue] = []
    for family, confs in comparison.configurations.items():
        if family == Family.serve:
            continue
        sets: dict[str, list[Configuration]] = {}
        for conf in confs:
            sets.setdefault(conf.workload, []).append(conf)
        for workload, members in sets.items():
            name = f"{family}: {workload}"
            objective, _ = choose(family, members, None, name)
            for conf in members:
                for cell in conf.completed:
                    run = objective.within_run(cell)
                    if not math.isfinite(run.value) or run.value <= 0:
                        continue
                    out.append(
                        RunValue(
                            path=Path(cell.path).resolve(),
                            configuration=f"{family}:{conf.key}:{key_of(cell.fingerprint)}",
                            comparison=name,
                            objective=objective.key,
                            value=float(run.value),
                            label=labels.get(conf.id, conf.id),
                            bound=run.bound,
                            machine=key_of(cell.fingerprint, hardware=True),
                            machine_name=cell.machine,
                        )
                    )
    return out
