"""Automatic findings: fastest configuration per workload (comparison set), speedups
against a baseline, rankings whose ties are decided by intervals
(:mod:`rlperf.report.stats.estimates`).

Configurations (:mod:`rlperf.report.stats.repeats`) are what is compared: a
configuration run once is estimated on its run's samples, one run several
times on its runs' values (run to run). What they are compared on is the
family's :class:`~rlperf.report.stats.objectives.Objective`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from rlperf.report.compare.axes import AxisPlan, within_set
from rlperf.report.compare.memory import memory_finding_texts
from rlperf.report.compare.study import LEGACY_METHOD, legacy_learn_range, legacy_text
from rlperf.report.read.cells import PHASES, Cell, included
from rlperf.report.stats import estimates
from rlperf.report.stats.objectives import OBJECTIVES, PER, Objective, choose, objective_of
from rlperf.report.stats.repeats import Configuration
from rlperf.results.columns import ENV_STEPS, ITER_S
from rlperf.results.record import EdgeRecord
from rlperf.stats import intervals
from rlperf.stats.intervals import Estimate
from rlperf.vocabulary import Family


@dataclass
class Finding:
    """One finding; ``cells`` are the cell ids it names.

    ``headline`` is what a person scans: one sentence of at most about 25 words that leads
    with the number; ``text`` the whole of it (cells, method, caveats), shown under the
    headline on demand and kept whole in report.md."""

    kind: str
    family: str
    model: str  # the comparison (workload) it is about
    cells: list[str]
    text: str
    headline: str = ""
    #: The headline's numbers, for a folded headline over several findings.
    values: tuple[float, ...] = ()
    #: Findings with the same ``fold`` text say the same thing of other cells: the report
    #: prints them as one line naming the cells (:func:`fold`).
    fold: str = ""
    #: How a folded line names this finding (default: its cells).
    brief: str = ""


@dataclass
class FamilyAnalysis:
    """Estimates, ranks and speedups of one comparison family, keyed by configuration id
    (its first run's cell id); ``run_estimates`` holds every completed run's own.

    Configurations are ranked within their workload (``Configuration.workload``,
    :mod:`rlperf.report.compare.workloads`), each workload on its own objective
    (``objectives``, chosen by :func:`rlperf.report.stats.objectives.choose`; ``objective_why``
    says why). ``throughput`` holds every training configuration's env steps per second
    with its interval, whatever it is ranked on (the cross-workload tables use it).
    """

    family: str
    objective: Objective  # the family's default (a workload may be ranked on another)
    configurations: dict[str, Configuration] = field(default_factory=dict)
    estimates: dict[str, Estimate] = field(default_factory=dict)
    run_estimates: dict[str, Estimate] = field(default_factory=dict)
    ranks: dict[str, int] = field(default_factory=dict)
    baselines: dict[str, str] = field(default_factory=dict)  # workload -> configuration id
    baseline_chosen: bool = False
    speedups: dict[str, Estimate] = field(default_factory=dict)
    findings: list[Finding] = field(default_factory=list)
    objectives: dict[str, Objective] = field(default_factory=dict)  # workload -> objective
    objective_why: dict[str, str] = field(default_factory=dict)  # workload -> why
    throughput: dict[str, Estimate] = field(default_factory=dict)
    run_throughput: dict[str, Estimate] = field(default_factory=dict)

    def objective_for(self, conf_id: str) -> Objective:
        """The objective the configuration ``conf_id`` is ranked on."""
        conf = self.configurations.get(conf_id)
        return self.objectives.get(conf.workload, self.objective) if conf else self.objective

    @property
    def metric(self) -> str:
        """The default objective's column."""
        return self.objective.metric

    @property
    def statistic(self) -> str:
        """mean, median or ratio."""
        return self.objective.statistic

    @property
    def unit(self) -> str:
        """The objective's unit."""
        return self.objective.unit


def _fmt(v: float, unit: str) -> str:
    if not np.isfinite(v):
        return "n/a"
    digits = 3 if abs(v) < 10 else 1
    return f"{v:.{digits}f} {unit}"


def _ci(e: Estimate, unit: str) -> str:
    if not e.has_ci:
        return f"{_fmt(e.value, unit)} (no interval: n={e.n})"
    d = 3 if abs(e.value) < 10 else 1
    return f"{e.value:.{d}f} {unit} [{e.low:.{d}f}, {e.high:.{d}f}]" + one_run_note(e)


def one_run_note(e: Estimate) -> str:
    """`` (one run: run-to-run spread not measured)`` after an interval within one run."""
    return f" ({estimates.ONE_RUN})" if e.one_run else ""


def precision_text(e: Estimate) -> str:
    """``±3.1% over 4 runs`` or ``±0.8% over one run``: the interval's half-width over the
    estimate, and what it rests on."""
    what = f"{e.runs} runs" if e.across_runs else "one run"
    if not e.has_ci or not e.value:
        return f"no interval, {what}"
    return f"±{(e.high - e.low) / 2 / abs(e.value):.1%} over {what}"


def ratio_text(e: Estimate) -> str:
    """A speedup as the report writes it: ``1.23× [1.20, 1.26]`` (and, resting on one run's
    interval, ``(one run: run-to-run spread not measured)``)."""
    if not e.has_ci:
        return f"{e.value:.2f}× (no interval)"
    return f"{e.value:.2f}× [{e.low:.2f}, {e.high:.2f}]" + one_run_note(e)


def level(e: Estimate | None = None) -> str:
    """An interval's level as written in the report (``95%``; a sweep's per-look level:
    ``98.75%``); without an estimate, the report's default."""
    return f"{100 * (intervals.CONFIDENCE if e is None else e.confidence):.4g}%"


def where(conf: Configuration) -> str:
    """``cell `a``` or ``2 runs: cells `a`, `b```."""
    runs = conf.completed or conf.cells
    if len(runs) == 1:
        return f"cell `{runs[0].id}`"
    ids = ", ".join(f"`{c.id}`" for c in runs[:4])
    more = f" and {len(runs) - 4} more" if len(runs) > 4 else ""
    return f"{len(runs)} runs: cells {ids}{more}"


def over(e: Estimate, conf: Configuration, objective: Objective) -> str:
    """What an interval is over: ``2 runs, run to run`` or ``24 iterations of one run``."""
    if e.across_runs:
        return f"{e.runs} runs, run to run"
    return f"{e.n} {objective.sample_word(conf.completed[0])} of one run"


#: Families whose configurations get env steps per second (``throughput``) with intervals.
THROUGHPUT_FAMILIES = (Family.training, Family.env)


def analyse_family(
    family: str,
    configurations: Sequence[Configuration],
    plan: AxisPlan,
    baselines: dict[str, str] | None,
    objective: str | None = None,
) -> FamilyAnalysis:
    """Estimate, rank and compare the configurations of one family, workload by workload,
    each on its objective (:func:`~rlperf.report.stats.objectives.choose`; ``objective`` is
    ``--objective``, which raises :class:`~rlperf.errors.ObjectiveError` where it does not
    fit). ``baselines``: workload -> configuration id (``--baseline``)."""
    out = FamilyAnalysis(family, objective_of(family), {c.id: c for c in configurations})
    out.baseline_chosen = bool(baselines)
    by_workload: dict[str, list[Configuration]] = {}
    for conf in configurations:
        by_workload.setdefault(conf.workload, []).append(conf)
    for workload, confs in by_workload.items():
        obj, why = choose(family, confs, objective, f"{family} {workload!r}")
        out.objectives[workload], out.objective_why[workload] = obj, why
        for conf in confs:
            for cell in conf.completed:
                out.run_estimates[cell.id] = obj.within_run(cell)
            if conf.completed:
                out.estimates[conf.id] = obj.estimate(conf, out.run_estimates)
        if family in THROUGHPUT_FAMILIES:
            _throughput(out, confs, obj)
    for workload, confs in sorted(by_workload.items()):
        ids = [c.id for c in confs if c.id in out.estimates
               and np.isfinite(out.estimates[c.id].value)]  # fmt: skip
        if not ids:
            continue
        obj = out.objectives[workload]
        est = {k: out.estimates[k] for k in ids}
        out.ranks.update(estimates.rank_with_ties(est, obj.lower_is_better))
        order = obj.order(est)
        out.findings.append(_fastest_finding(out, workload, order, plan.configs))
        if family == Family.inference:
            ranked = [out.configurations[k] for k in order]
            out.findings += _fidelity_findings(family, workload, ranked, plan.configs)
            memory = memory_finding_texts(family, workload, ranked, plan.configs)
            if memory is not None:
                cells, text, headline, values = memory
                out.findings.append(Finding("memory", family, workload, cells, text,
                                            headline=headline, values=values))  # fmt: skip
        repeated = _repeats_finding(out, workload, order, plan.configs)
        out.findings += [repeated] if repeated is not None else []
        out.findings += _legacy_finding(out, workload, order, plan.configs)
        _compare_with_baseline(out, workload, order, baselines, plan.configs)
    return out


def _throughput(out: FamilyAnalysis, confs: Sequence[Configuration], obj: Objective) -> None:
    """Every configuration's env steps per second (1 000 / its time per 1 000 env steps),
    reusing the objective's estimates where it is that time."""
    per_env_step = OBJECTIVES[ENV_STEPS]
    for conf in confs:
        runs = {}
        for cell in conf.completed:
            e = out.run_estimates[cell.id] if obj is per_env_step else per_env_step.within_run(cell)
            runs[cell.id] = e
            out.run_throughput[cell.id] = intervals.reciprocal(e, PER)
        if conf.completed:
            out.throughput[conf.id] = intervals.reciprocal(per_env_step.estimate(conf, runs), PER)


def _compare_with_baseline(
    out: FamilyAnalysis,
    model: str,
    order: list[str],
    baselines: dict[str, str] | None,
    label: dict[str, str],
) -> None:
    """Speedups of one model's configurations against its baseline (default: the slowest)."""
    base = (baselines or {}).get(model)
    if base is None and not baselines:
        base = order[-1]
    if base is None or base not in out.estimates:
        return
    out.baselines[model] = base
    for k in order:
        out.speedups[k] = intervals.speedup(out.estimates[base], out.estimates[k])
    if len(order) > 1:
        out.findings.append(_speedup_finding(out, model, base, order, label))


def _fastest_finding(
    out: FamilyAnalysis, model: str, order: list[str], label: dict[str, str]
) -> Finding:
    objective = out.objectives.get(model, out.objective)
    est, confs = out.estimates, out.configurations
    family_name = out.family.capitalize()
    best = order[0]
    conf = confs[best]
    if len(order) == 1:
        return Finding("fastest", out.family, model, [best],
                       f"{family_name}, {model}: only one configuration (`{label[best]}`, "
                       f"{where(conf)}): {objective.what} {_ci(est[best], objective.unit)} "
                       f"({level(est[best])} CI over {over(est[best], conf, objective)}).",
                       fold=f"{out.family}: one configuration in its comparison, nothing to "
                            f"rank ({objective.what})",
                       brief=f"{model} `{label[best]}` {_ci(est[best], objective.unit)}",
                       headline=f"{_short(est[best], objective.unit)}: {model}, its one "
                                f"configuration `{label[best]}`.",
                       )  # fmt: skip
    ties = [k for k in order[1:] if estimates.tied(est[best], est[k])]
    text = (
        f"{family_name}, {model}: fastest configuration is `{label[best]}` ({where(conf)}), "
        f"{objective.what} {_ci(est[best], objective.unit)} ({level(est[best])} CI over "
        f"{over(est[best], conf, objective)})."
    )
    if ties:
        names = ", ".join(f"`{label[k]}` ({_fmt(est[k].value, objective.unit)})" for k in ties[:5])
        more = f" and {len(ties) - 5} more" if len(ties) > 5 else ""
        text += f" Tied within the noise (their speedup interval holds 1) with {names}{more}."
    else:
        nxt = order[1]
        margin = intervals.speedup(est[nxt], est[best])
        text += f" It beats the next best, `{label[nxt]}`, by {ratio_text(margin)}."
    text += _phase_shares(conf.completed) if out.family == Family.training else ""
    shown = dict(zip(order, within_set([label[k] for k in order]), strict=True))
    headline = f"{_short(est[best], objective.unit)}: `{shown[best]}` is fastest in {model}"
    if ties:
        headline += f", tied with {len(ties)} other(s)."
    else:
        headline += f", {margin.value:.2f}× ahead of `{shown[order[1]]}`."
    return Finding("fastest", out.family, model, [best, *ties], text, headline)


def _repeats_finding(
    out: FamilyAnalysis, model: str, order: list[str], label: dict[str, str]
) -> Finding | None:
    """How far apart the runs of repeated configurations are, against each run's own interval.

    Names the configuration whose runs are furthest apart (relative to their mean).
    """
    repeated = [k for k in order if out.estimates[k].across_runs]
    if not repeated:
        return None

    def measured(k: str) -> list[Estimate]:
        runs = [out.run_estimates[c.id] for c in out.configurations[k].completed]
        return [e for e in runs if np.isfinite(e.value)]

    def spread(k: str) -> float:
        values = [e.value for e in measured(k)]
        return (max(values) - min(values)) / abs(out.estimates[k].value)

    worst = max(repeated, key=spread)
    runs = measured(worst)
    own = max(((e.high - e.low) / 2 / abs(e.value) for e in runs if e.has_ci), default=np.nan)
    counts = sorted({out.estimates[k].runs for k in repeated})
    n_runs = f"{counts[0]}" if len(counts) == 1 else f"{counts[0]}-{counts[-1]}"
    unit = out.objectives.get(model, out.objective).unit
    own_text = f"±{100 * own:.1f}%" if np.isfinite(own) else "none (too few samples)"
    text = (
        f"{out.family.capitalize()}, {model}: {len(repeated)} configuration(s) ran {n_runs} "
        f"times (repeats differ only in seed; their intervals are run to run). The runs of "
        f"`{label[worst]}` ({where(out.configurations[worst])}) range "
        f"{_fmt(min(e.value for e in runs), unit)} to {_fmt(max(e.value for e in runs), unit)} "
        f"({100 * spread(worst):.1f}% apart); each run's own interval spans at most {own_text}."
    )
    headline = (
        f"{100 * spread(worst):.0f}% apart: the runs of `{label[worst]}` in {model}, "
        f"each run's own interval ±{100 * own:.1f}% at most."
        if np.isfinite(own)
        else f"{100 * spread(worst):.0f}% apart: the runs of `{label[worst]}` in {model}."
    )
    return Finding("repeats", out.family, model, [worst], text, headline)  # fmt: skip


def _legacy_finding(
    out: FamilyAnalysis, model: str, order: list[str], label: dict[str, str]
) -> list[Finding]:
    """Legacy RLlib 1.x runs: the phase times the study's way and rlperf's, side by side."""
    ranked = [(k, label[k], out.configurations[k].completed) for k in order]
    best, text = legacy_text(out.family, model, ranked)
    learn = legacy_learn_range(ranked)
    if not text or learn is None:
        return []
    return [Finding("legacy", out.family, model, [best], f"{text} {LEGACY_METHOD}",
                    headline=f"{learn[0]:+.1f}% to {learn[1]:+.1f}%: rlperf's learn time per "
                             f"iteration vs the study's way in {model} (legacy RLlib 1.x "
                             "data).",
                    fold=LEGACY_FOLD, brief=model, values=learn)]  # fmt: skip


def _fidelity_findings(
    family: str, model: str, group: Sequence[Configuration], label: dict[str, str]
) -> list[Finding]:
    """Exported variants whose greedy actions disagree with the source policy too often."""
    out = []
    checked = [(k.id, c) for k in group for c in k.completed
               if isinstance(c.record_of(EdgeRecord).fidelity, dict)]  # fmt: skip
    vacuous = [(k, c) for k, c in checked if _fidelity(c).get("verdict") == "vacuous"]
    for k, c in vacuous:
        reason = (_fidelity(c).get("reference") or {}).get("vacuous_reason")
        out.append(Finding("fidelity", family, model, [c.id],
            f"{family.capitalize()}, {model}: the fidelity check of `{label[k]}` (cell `{c.id}`) "
            f"is vacuous: {reason}. Its agreement (or action error) shows nothing; a "
            "constant policy would pass it too.",
            fold=f"fidelity vacuous, {reason}: their agreement (or action error) shows "
                 "nothing (a constant policy would pass too)",
            headline=f"Vacuous: the fidelity check of `{label[k]}` in {model} shows nothing "
                     "(a constant policy would pass it)."))  # fmt: skip
    checked = [(k, c) for k, c in checked if (k, c) not in vacuous]
    flagged = [(k, c) for k, c in checked if _fidelity(c).get("flagged")]
    for k, c in flagged:
        fid = _fidelity(c)
        out.append(Finding("fidelity", family, model, [c.id],
            f"{family.capitalize()}, {model}: `{label[k]}` (cell `{c.id}`) is flagged: "
            f"{fid.get('flag_reason') or 'it does not act like the source policy'}; its "
            "latency is not a like-for-like comparison.",
            headline=f"Flagged: `{label[k]}` in {model} does not act like its source policy; "
                     "its latency is not like for like."))  # fmt: skip
    if checked and not flagged:
        out.append(_worst_passing(family, model, checked, label))
    return out


def _worst_passing(family: str, model: str, checked: Sequence[tuple[str, Cell]],
                   label: dict[str, str]) -> Finding:  # fmt: skip
    """Every variant passes: the one closest to failing (lowest agreement, or for a Box
    policy the largest p99 action error relative to the range)."""

    def badness(kc: tuple[str, Cell]) -> float:
        fid = _fidelity(kc[1])
        if "action_err_p99" in fid:
            return float(fid["action_err_p99"])
        return 1.0 - float(fid.get("agreement", 1.0))

    k, worst = max(checked, key=badness)
    fid = _fidelity(worst)
    number = (f"{100 * fid['action_err_p99']:.3g} % of the action range (p99 error)"
              if "action_err_p99" in fid else f"{fid.get('agreement', float('nan')):.3f} "
              "agreement")  # fmt: skip
    what = (
        f"the largest p99 action error is `{label[k]}` (cell `{worst.id}`), "
        f"{100 * fid['action_err_p99']:.3g} % of the action range"
        if "action_err_p99" in fid
        else f"the lowest agreement is `{label[k]}` (cell `{worst.id}`), "
        f"{fid.get('agreement', float('nan')):.3f}"
    )
    return Finding("fidelity", family, model, [worst.id],
        f"{family.capitalize()}, {model}: all {len(checked)} exported variant(s) pass the "
        f"fidelity check; {what}.",
        headline=f"{number} at worst: all {len(checked)} exported variant(s) of {model} pass "
                 f"the fidelity check (`{label[k]}` closest to failing).")  # fmt: skip


def _phase_shares(runs: Sequence[Cell]) -> str:
    """Where a configuration's iteration goes (shares of the mean iteration, runs pooled)."""
    frames = [included(c.iterations) for c in runs if c.iterations is not None]
    if not frames:
        return ""
    kept = pd.concat(frames)
    total = float(kept[ITER_S].mean())
    if not np.isfinite(total) or total <= 0:
        return ""
    shares = {p.removesuffix("_s"): float(kept[p].mean()) / total
              for p in PHASES}  # fmt: skip
    shares = {k: v for k, v in shares.items() if np.isfinite(v)}
    if not shares:
        return ""
    top = sorted(shares.items(), key=lambda kv: -kv[1])[:2]
    return " Its iteration is " + " and ".join(f"{100 * v:.0f}% {k}" for k, v in top) + "."


def _speedup_finding(
    out: FamilyAnalysis, model: str, base: str, order: list[str], label: dict[str, str]
) -> Finding:
    how = "chosen with --baseline" if out.baseline_chosen else "default: the slowest"
    sp = out.speedups
    others = [k for k in order if k != base]
    faster = [k for k in others if sp[k].has_ci and sp[k].low > 1]
    slower = [k for k in others if sp[k].has_ci and sp[k].high < 1]
    no_ci = [k for k in others if not sp[k].has_ci]
    same = [k for k in others if k not in faster and k not in slower and k not in no_ci]
    best = order[0]
    text = (
        f"{out.family.capitalize()}, {model}: against the baseline `{label[base]}` "
        f"({where(out.configurations[base])}, {how}), the fastest configuration is "
        f"{ratio_text(sp[best])} as fast; {len(faster)} configuration(s) are faster, "
        f"{len(slower)} slower and {len(same)} not distinguishable from it (speedup interval "
        "contains 1)"
    )
    text += f"; {len(no_ci)} have too few samples for an interval." if no_ci else "."
    shown = dict(zip(order, within_set([label[k] for k in order]), strict=True))
    headline = (
        f"{sp[best].value:.2f}×{_mark(sp[best])}: the fastest against the baseline "
        f"`{shown.get(base, label[base])}` in {model}; {len(faster)} faster, "
        f"{len(slower)} slower, {len(same)} tied."
    )
    return Finding("speedup", out.family, model, [base, best], text, headline)


def fold(findings: Sequence[Finding]) -> list[tuple[str, str]]:
    """The findings as (headline, the whole text), those with the same ``fold`` text as one
    finding naming where it applies ("3 comparisons: ..."), at the place of the first."""
    groups: dict[str, list[Finding]] = {}
    for f in findings:
        if f.fold:
            groups.setdefault(f.fold, []).append(f)
    out: list[tuple[str, str]] = []
    for f in findings:
        if not f.fold or len(groups[f.fold]) == 1:
            out.append((f.headline or f.text, f.text))
        elif groups[f.fold][0] is f:
            out.append(_folded(groups[f.fold]))
    return out


def _folded(same: Sequence[Finding]) -> tuple[str, str]:
    """One finding for several that say the same of other comparisons or cells."""
    first = same[0]
    if first.fold == LEGACY_FOLD:
        numbers = [v for f in same for v in f.values]
        headline = (f"{min(numbers):+.1f}% to {max(numbers):+.1f}%: rlperf's learn time per "
                    f"iteration vs the study's way, in {len(same)} comparisons: "
                    + ", ".join(f.brief for f in same) + ".")  # fmt: skip
        texts = [f.text.removesuffix(f" {LEGACY_METHOD}") for f in same]
        return headline, " ".join([*texts, LEGACY_METHOD])
    if all(g.brief for g in same):
        text = f"{len(same)} comparisons: {first.fold}: " + "; ".join(g.brief for g in same) + "."
        return f"{len(same)} comparisons: {first.fold}.", text
    cells = [c for g in same for c in g.cells]
    text = f"{len(cells)} cells: {first.fold}: " + ", ".join(f"`{c}`" for c in cells) + "."
    return f"{len(cells)} cells: {first.fold}.", text


#: The fold of the legacy findings: one line for every comparison of legacy runs.
LEGACY_FOLD = "legacy RLlib 1.x data both ways"


def _short(e: Estimate, unit: str) -> str:
    """A headline's number: ``2.51 s`` with its interval's half-width, ``†`` for one run."""
    if not np.isfinite(e.value):
        return "n/a"
    value = _fmt(e.value, unit)
    if not e.has_ci or not e.value:
        return value
    return f"{value} ±{(e.high - e.low) / 2 / abs(e.value):.1%}{_mark(e)}"


def _mark(e: Estimate) -> str:
    """`` †`` after a number resting on one run (:data:`ONE_RUN_LINE` says what it means)."""
    return " †" if e.one_run else ""


#: What ``†`` means, said once under the findings.
ONE_RUN_LINE = f"† {estimates.ONE_RUN}: the interval is over that run's own samples."


def _fidelity(cell: Cell) -> dict[str, Any]:
    """An edge cell's fidelity record (empty where it has none)."""
    return cell.record_of(EdgeRecord).fidelity or {}
