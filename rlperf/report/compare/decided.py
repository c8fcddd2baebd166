"""How sure each comparison is, and what it cost: the lines the Answers section opens with.

Per comparison set (one family, one workload), one verdict in one sentence (``headline``,
at most about 30 words), its details under it (``text``):

- **decided**: the best configuration is separated from every other, run to run: the
  interval of their ratio (:func:`rlperf.stats.intervals.speedup`, Welch on the runs'
  logarithms at the level the design used) excludes 1, or the sweep's race eliminated it.
  The ratio the headline gives is that interval, so the two never disagree.
- **ranked on one run each, not decided**: the configurations were measured once each. A
  run's own interval describes that run; runs of one configuration land 5-25 % apart
  (SPEC §5), so a within-run interval never decides.
- **not decided**: the best overlaps some other, with about how many more runs of each
  would separate them (:func:`rlperf.stats.intervals.runs_to_separate`: 80 % power at the
  test's level, from their measured spread and the difference measured), or why no number
  would (runs that agree to the last digit, a time that is a lower bound).

The rule that decided a sweep's set (Welch, or moderated by a history prior: ``sweep.json``
``rounds.rules``) is said in the details. The configurations a sweep's race eliminated, or
that stopped once precise enough, say so (``cell.json`` ``closed``, docs/sweeps.md#repeats).

The cost line counts what the cells ran (cell-seconds, env steps, runs) and, for a sweep
with repeats, what a fixed design of ``repeats.max`` runs of ``train.iterations`` each
would have spent.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from rlperf.report.compare.axes import AxisPlan, within_set
from rlperf.report.compare.findings import FamilyAnalysis, level, precision_text, ratio_text
from rlperf.report.read.cells import Cell
from rlperf.report.stats.objectives import configuration_rule
from rlperf.report.stats.repeats import Configuration, configuration_key
from rlperf.results.record import TrainRecord
from rlperf.stats import intervals
from rlperf.vocabulary import EARLY_CLOSINGS, ClosedBy, Family

#: The power "about N more runs" is computed for.
POWER = 0.8


@dataclass
class Verdict:
    """One comparison set: decided or not, in one sentence (``headline``) with its details
    (``text``); what closed early."""

    family: str
    workload: str
    decided: bool
    headline: str
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
    closed = [f"{name[c.id]}: {why['text']}" for c in confs
              if (why := c.cells[0].closed) and why.get("why") in EARLY_CLOSINGS]  # fmt: skip
    rule = configuration_rule(best)
    said = f" Decided by {rule.why}." if rule is not None else ""
    missing = sum(1 for c in confs for cell in c.completed
                  if not _usable(a.run_estimates.get(cell.id)))  # fmt: skip
    if missing:
        said += (f" {missing} completed run(s) without a usable value (none measured, zero, "
                 "negative or not finite) are left out.")  # fmt: skip
    if not any(est[c.id].across_runs for c in confs):
        headline = (f"{where}: ranked on one run each, not decided: {name[best.id]} is "
                    "fastest here, but one run says nothing of the next.")  # fmt: skip
        text = (
            f"{name[best.id]}: {precision_text(e_best)}, an interval of that run alone; "
            "runs of one configuration differ by more. 2 or more runs of each "
            "(hydra.sweeper.repeats.min=2) measure the run-to-run spread that decides."
        )
        return Verdict(family, workload, False, headline, text, closed)
    overlap = [c for c in rest if not _separated(best, c, est)]
    if not overlap:
        nxt = rest[0]
        margin = intervals.speedup(est[nxt.id], e_best)
        headline = (
            f"{where}: decided: {name[best.id]} is fastest, {ratio_text(margin)} "
            f"ahead of {name[nxt.id]}, separated from all {len(rest)} other(s)."
        )
        text = (f"{name[best.id]}: {precision_text(e_best)}; each ratio's {level(margin)} "
                f"interval (run to run) excludes 1.{said}")  # fmt: skip
        return Verdict(family, workload, True, headline, text, closed)
    reason, details = _why_not(best, overlap, est, name)
    # One sentence: two names fit it; more are counted (the details name them).
    who = (f"{name[best.id]} and {name[overlap[0].id]} overlap" if len(overlap) == 1
           else f"{name[best.id]} leads, not separated from {len(overlap)} others")  # fmt: skip
    headline = f"{where}: not decided: {who}; {reason}."
    text = f"{name[best.id]}: {precision_text(e_best)}. {details}{said}"
    return Verdict(family, workload, False, headline, text, closed)


def _why_not(
    best: Configuration,
    overlap: Sequence[Configuration],
    est: Mapping[str, intervals.Estimate],
    name: Mapping[str, str],
) -> tuple[str, str]:
    """Why ``best`` is not separated from ``overlap`` (a clause for the headline) and the
    details: how many more runs would separate them, or why none would."""
    e_best = est[best.id]
    ratios = [intervals.speedup(est[c.id], e_best) for c in overlap]
    listed = "; over ".join(f"{name[c.id]} {ratio_text(r)} at {level(r)}"
                            for c, r in zip(overlap[:3], ratios, strict=False))  # fmt: skip
    unlisted = f"; and {len(overlap) - 3} more not separated" if len(overlap) > 3 else ""
    shown = f"Its lead over {listed}{unlisted}"
    if e_best.bound:
        return ("its time is a lower bound (its target was not reached in every run)",
                f"A lower bound separates nothing slower than it. {shown}.")  # fmt: skip
    once = [c for c in overlap if not est[c.id].across_runs]
    if once or not e_best.across_runs:
        return ("some were measured once, with no run-to-run spread",
                f"{shown}. 2 or more runs of each measure the spread that decides.")  # fmt: skip
    needs = [intervals.runs_to_separate(e_best, est[c.id], POWER) for c in overlap]
    if any(n is None for n in needs):
        return ("their runs agree to the last digit: no spread to separate by",
                f"{shown}. Runs that agree exactly measure no spread; nothing is decided "
                "on them.")  # fmt: skip
    have = min(est[c.id].runs for c in [best, *overlap])
    need = max(n for n in needs if n is not None)
    more = max(1, need - have)
    diff = abs(ratios[int(np.argmax([n or 0 for n in needs]))].value - 1.0)
    text = (f"{shown}. About {need:,} runs of each separate them with {POWER:.0%} power at "
            f"that level, from their measured spread and the difference measured "
            f"({diff:.1%}).")  # fmt: skip
    if need > 100 * have:
        text += " The difference is far inside the spread: as good as none."
    return f"about {more:,} more run(s) of each would separate them", text


def _usable(e: intervals.Estimate | None) -> bool:
    return e is not None and intervals.usable([e.value]).size == 1


def _separated(
    best: Configuration, other: Configuration, est: Mapping[str, intervals.Estimate]
) -> bool:
    """Whether ``other`` is separated from ``best``: a sweep's race eliminated it, or the
    interval of their ratio, run to run, excludes 1 (:func:`rlperf.stats.intervals.
    separated`). Within-run intervals never separate."""
    closed = other.cells[0].closed
    if closed and closed.get("why") == ClosedBy.eliminated:
        return True
    return intervals.separated(est[best.id], est[other.id])


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
