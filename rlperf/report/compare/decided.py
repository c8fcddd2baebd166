"""How sure each comparison is, and what it cost: the lines the Answers section opens with.

Per comparison set (one family, one workload): **decided** when the best configuration is
separated from every other (Welch's interval of the difference of their runs' mean
logarithms excludes 0, or the sweep's race eliminated it; configurations measured once:
their intervals do not overlap), else **not decided**, with about how many more runs would
separate the best from the configurations it overlaps (from their measured run-to-run
spread, :func:`rlperf.results.precision.runs_to_separate`; a configuration measured once has
no spread to go by). The configurations a sweep's race eliminated, or that stopped once
precise enough, say so (``cell.json`` ``closed``, docs/sweeps.md#repeats).

The cost line counts what the cells ran (cell-seconds, env steps, runs) and, for a sweep
with repeats, what a fixed design of ``repeats.max`` runs of ``train.iterations`` each
would have spent.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from rlperf.report.compare.axes import AxisPlan, within_set
from rlperf.report.compare.findings import FamilyAnalysis, precision_text
from rlperf.report.read.cells import Cell
from rlperf.report.stats import estimates
from rlperf.report.stats.repeats import Configuration, configuration_key
from rlperf.results.precision import design_confidence, runs_to_separate, welch_difference
from rlperf.results.record import TrainRecord
from rlperf.vocabulary import Family


@dataclass
class Verdict:
    """One comparison set: decided or not, in one sentence; what closed early."""

    family: str
    workload: str
    decided: bool
    text: str
    closed: list[str] = field(default_factory=list)


def verdicts(
    analyses: Mapping[str, FamilyAnalysis], plans: Mapping[str, AxisPlan]
) -> list[Verdict]:
    """A :class:`Verdict` per comparison set with two or more measured configurations."""
    out: list[Verdict] = []
    for family, a in analyses.items():
        labels = plans[family].configuration_labels if family in plans else {}
        sets: dict[str, list[Configuration]] = {}
        for conf in a.configurations.values():
            e = a.estimates.get(conf.id)
            if e is not None and np.isfinite(e.value):
                sets.setdefault(conf.workload, []).append(conf)
        for workload, confs in sets.items():
            if len(confs) >= 2:
                out.append(_verdict(a, family, workload, confs, labels))
    return out


def _verdict(
    a: FamilyAnalysis,
    family: str,
    workload: str,
    confs: Sequence[Configuration],
    labels: Mapping[str, str],
) -> Verdict:
    est = a.estimates
    sign = 1.0 if a.objective_for(confs[0].id).lower_is_better else -1.0
    ordered = sorted(confs, key=lambda c: sign * est[c.id].value)
    best, rest = ordered[0], ordered[1:]
    # Named by what varies in the set: the line already names the workload (the model).
    shown = within_set([labels.get(c.id, c.id) for c in confs])
    name = {c.id: f"`{text}`" for c, text in zip(confs, shown, strict=True)}
    e_best = est[best.id]
    where = f"{family} · {workload}"
    runs = {c.id: _run_values(a, c) for c in confs}
    overlap = [c for c in rest if not _separated(a, best, c, runs)]
    early = ("eliminated", "precision")
    closed = [f"{name[c.id]}: {why['text']}" for c in confs
              if (why := c.cells[0].closed) and why.get("why") in early]  # fmt: skip
    if not overlap:
        once = " on one run each: run-to-run spread not measured" if e_best.one_run else ""
        text = (f"{where}: decided{once}. {name[best.id]} is best ({precision_text(e_best)}), "
                f"separated from the other {len(rest)}")  # fmt: skip
        return Verdict(family, workload, True, text, closed)
    values = {c.id: runs[c.id] for c in [best, *overlap]}
    names = " and ".join([name[best.id], *(name[c.id] for c in overlap[:3])])
    needs = [runs_to_separate(values[best.id], values[c.id]) for c in overlap]
    text = f"{where}: not decided: {names} overlap ({name[best.id]}: {precision_text(e_best)})"
    if any(len(v) < 2 for v in values.values()):
        text += ("; measured once, they have no run-to-run spread to go by: repeats "
                 "(hydra.sweeper.repeats) measure it")  # fmt: skip
    elif any(n is None for n in needs):
        text += "; their runs agree to the last digit: no number of runs separates them"
    else:
        have = min(len(v) for v in values.values())
        more = max(0, max(n for n in needs if n is not None) - have)
        text += f"; about {more:,} more run(s) of each would separate them (from their spread)"
        if more > 100 * have:
            text += ": the difference measured is far inside that spread, as good as none"
    return Verdict(family, workload, False, text, closed)


def _run_values(a: FamilyAnalysis, conf: Configuration) -> list[float]:
    """Each completed run's own value of ``conf`` (finite, positive)."""
    values = [a.run_estimates[x.id].value for x in conf.completed if x.id in a.run_estimates]
    return [v for v in values if np.isfinite(v) and v > 0]


def _separated(
    a: FamilyAnalysis, best: Configuration, other: Configuration, runs: Mapping[str, list[float]]
) -> bool:
    """Whether ``other`` is separated from ``best``: a sweep's race eliminated it, or Welch's
    interval of the difference of their runs' mean logarithms (at the level the runs'
    intervals have, :func:`rlperf.results.precision.design_confidence`) excludes 0; measured
    once, their (within-run) intervals do not overlap."""
    closed = other.cells[0].closed
    if closed and closed.get("why") == "eliminated":
        return True
    x, y = runs[other.id], runs[best.id]
    if len(x) < 2 or len(y) < 2:
        return not estimates.tied(a.estimates[best.id], a.estimates[other.id])
    level = design_confidence(best.cells[0].design)
    low, high = welch_difference(np.log(x), np.log(y), 1 - level)
    return bool(low > 0 or high < 0)


def cost_line(cells: Sequence[Cell]) -> str | None:
    """``Cost: 12 runs, 820 cell-seconds, 48,000 env steps; a fixed design ...`` over the
    training runs (None without any)."""
    runs = [c for c in cells if c.family == Family.training and c.record.wall_s is not None]
    if not runs:
        return None
    spent = sum(float(c.record.wall_s or 0.0) for c in runs)
    steps = sum(float(c.record_of(TrainRecord).total_env_steps or 0) for c in runs)
    text = f"Cost: {len(runs)} training run(s), {spent:,.0f} cell-seconds, {steps:,.0f} env steps"
    fixed = _fixed_design_s(runs)
    if fixed is not None:
        design_max, fixed_s = fixed
        share = spent / fixed_s
        text += (f"; a fixed design of {design_max} run(s) of train.iterations each would "
                 f"have spent about {fixed_s:,.0f} cell-seconds (this: {share:.0%})")  # fmt: skip
    return text + "."


def _fixed_design_s(runs: Sequence[Cell]) -> tuple[int, float] | None:
    """(``repeats.max``, cell-seconds) of the fixed design the sweep's repeats stand in for:
    per configuration, ``max`` runs of its mean run's wall time scaled to the full
    ``train.iterations``. None without a sweep design that could stop early."""
    designs = [c.design for c in runs if c.design]
    if not designs:
        return None
    design = designs[0]
    adaptive = design.get("precision") is not None or design.get("race")
    stopped = any((c.record_of(TrainRecord).precision or {}).get("reached") for c in runs)
    if not adaptive and not stopped:
        return None
    design_max = int(design.get("max") or 1)
    by_conf: dict[str, list[float]] = {}
    for c in runs:
        done = int(c.record.iterations or 0)
        cap = int(c.leaves.get("train.iterations") or done or 1)
        full = float(c.record.wall_s or 0.0) * (cap / done if done else 1.0)
        by_conf.setdefault(f"{c.family}:{configuration_key(c)}", []).append(full)
    return design_max, sum(design_max * float(np.mean(v)) for v in by_conf.values())
