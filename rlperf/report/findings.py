"""Automatic findings: fastest configuration per model, speedups against a baseline,
rankings whose ties are decided by bootstrap intervals (:mod:`rlperf.report.stats`).

Training cells are compared on the time per iteration (``iter_s``, mean over
the non-warm-up iterations); inference cells (rollout, edge) on the time per
action (``action_ms``, or ``forward_ms`` where a cell only has that), median
over the non-warm-up steps, since latency distributions have long tails.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from rlperf.report import stats
from rlperf.report.axes import AxisPlan
from rlperf.report.cells import Cell
from rlperf.report.load import included

#: family → (metric column, statistic, unit, what it measures)
OBJECTIVES = {
    "training": ("iter_s", "mean", "s", "time per training iteration"),
    "inference": ("action_ms", "median", "ms", "latency per action"),
}


@dataclass
class Finding:
    """One sentence of the findings section; ``cells`` are the cell ids it names."""

    kind: str
    family: str
    model: str
    cells: list[str]
    text: str


@dataclass
class FamilyAnalysis:
    """Estimates, ranks and speedups of one comparison family."""

    family: str
    metric: str
    statistic: str
    unit: str
    estimates: dict[str, stats.Estimate] = field(default_factory=dict)
    ranks: dict[str, int] = field(default_factory=dict)
    baselines: dict[str, str] = field(default_factory=dict)
    baseline_chosen: bool = False
    speedups: dict[str, stats.Estimate] = field(default_factory=dict)
    findings: list[Finding] = field(default_factory=list)


def samples(cell: Cell, family: str) -> np.ndarray:
    """The non-warm-up samples a family's objective is computed on."""
    if family == "training":
        df = cell.iterations
        if df is None:
            return np.array([])
        return included(df)["iter_s"].to_numpy(dtype=float)
    df = cell.latency
    if df is None:
        return np.array([])
    kept = included(df)
    col = "action_ms" if kept["action_ms"].notna().any() else "forward_ms"
    return kept[col].to_numpy(dtype=float)


def _fmt(v: float, unit: str) -> str:
    if not np.isfinite(v):
        return "n/a"
    digits = 3 if abs(v) < 10 else 1
    return f"{v:.{digits}f} {unit}"


def _ci(e: stats.Estimate, unit: str) -> str:
    if not e.has_ci:
        return f"{_fmt(e.value, unit)} (no interval: n={e.n})"
    d = 3 if abs(e.value) < 10 else 1
    return f"{e.value:.{d}f} {unit} [{e.low:.{d}f}, {e.high:.{d}f}]"


def _ratio(e: stats.Estimate) -> str:
    if not e.has_ci:
        return f"{e.value:.2f}× (no interval)"
    return f"{e.value:.2f}× [{e.low:.2f}, {e.high:.2f}]"


def _samples_word(cell: Cell, family: str) -> str:
    if family == "training":
        return "iterations"
    if cell.latency is not None and len(cell.latency):
        return {"step": "steps", "episode_mean": "episode means", "run_mean": "run means"}.get(
            str(cell.latency["granularity"].iloc[0]), "samples"
        )
    return "samples"


def analyse_family(
    family: str,
    cells: Sequence[Cell],
    plan: AxisPlan,
    baselines: dict[str, str] | None,
) -> FamilyAnalysis:
    """Estimate, rank and compare the completed cells of one family, model by model."""
    metric, statistic, unit, what = OBJECTIVES.get(family, ("iter_s", "mean", "s", family))
    out = FamilyAnalysis(family, metric, statistic, unit)
    out.baseline_chosen = bool(baselines)
    data = {c.id: samples(c, family) for c in cells if c.completed}
    out.estimates = {cid: stats.bootstrap_ci(v, statistic, cid) for cid, v in data.items()}
    by_model: dict[str, list[Cell]] = {}
    for c in cells:
        if c.id in data and np.isfinite(out.estimates[c.id].value):
            by_model.setdefault(str(c.axes.get("model")), []).append(c)
    label = plan.configs
    by_id = {c.id: c for c in cells}
    family_name = family.capitalize()
    for model, group in sorted(by_model.items()):
        unit_of = {c.id: _samples_word(c, family) for c in group}
        est = {c.id: out.estimates[c.id] for c in group}
        out.ranks.update(stats.rank_with_ties(est))
        order = sorted(est, key=lambda k: est[k].value)
        best = order[0]
        if len(order) == 1:
            out.findings.append(
                Finding(
                    "fastest",
                    family,
                    model,
                    [best],
                    f"{family_name}, {model}: only one configuration (`{label[best]}`, cell "
                    f"`{best}`): {what} {_ci(est[best], unit)}.",
                )
            )
        else:
            ties = [k for k in order[1:] if stats.tied(est[best], est[k])]
            text = (
                f"{family_name}, {model}: fastest configuration is `{label[best]}` (cell "
                f"`{best}`), {what} {_ci(est[best], unit)} (95% CI over "
                f"{est[best].n} {unit_of[best]})."
            )
            if ties:
                names = ", ".join(f"`{label[k]}` ({_fmt(est[k].value, unit)})" for k in ties[:5])
                more = f" and {len(ties) - 5} more" if len(ties) > 5 else ""
                text += f" Tied within the noise (overlapping intervals) with {names}{more}."
            else:
                nxt = order[1]
                sp = stats.speedup(est[nxt], est[best])
                text += f" It beats the next best, `{label[nxt]}`, by {_ratio(sp)}."
            text += _phase_shares(by_id[best]) if family == "training" else ""
            out.findings.append(Finding("fastest", family, model, [best, *ties], text))
        if family == "inference":
            out.findings += _fidelity_findings(family, model, group, label)
        base = (baselines or {}).get(model)
        if base is None and not baselines:
            base = order[-1]
        if base is None or base not in data:
            continue
        out.baselines[model] = base
        for k in order:
            out.speedups[k] = stats.speedup(out.estimates[base], out.estimates[k])
        if len(order) > 1:
            out.findings.append(_speedup_finding(family, model, base, order, out, label))
    return out


def _fidelity_findings(
    family: str, model: str, group: Sequence[Cell], label: dict[str, str]
) -> list[Finding]:
    """Exported variants whose greedy actions disagree with the source policy too often."""
    out = []
    checked = [c for c in group if isinstance(c.summary.get("fidelity"), dict)]
    flagged = [c for c in checked if c.summary["fidelity"].get("flagged")]
    for c in flagged:
        fid = c.summary["fidelity"]
        out.append(Finding("fidelity", family, model, [c.id],
            f"{family.capitalize()}, {model}: `{label[c.id]}` (cell `{c.id}`) is flagged: "
            f"greedy-action agreement {fid.get('agreement', float('nan')):.3f} with the source "
            f"policy is below the threshold {fid.get('threshold', float('nan')):g}; its "
            "latency is not a like-for-like comparison."))  # fmt: skip
    if checked and not flagged:
        worst = min(checked, key=lambda c: c.summary["fidelity"].get("agreement", 1.0))
        out.append(Finding("fidelity", family, model, [worst.id],
            f"{family.capitalize()}, {model}: all {len(checked)} exported variant(s) pass the "
            f"fidelity check; the lowest agreement is `{label[worst.id]}` (cell `{worst.id}`), "
            f"{worst.summary['fidelity'].get('agreement', float('nan')):.3f}."))  # fmt: skip
    return out


def _phase_shares(cell: Cell) -> str:
    """Where the fastest configuration's iteration goes (shares of the mean iteration)."""
    df = cell.iterations
    if df is None:
        return ""
    kept = included(df)
    total = float(kept["iter_s"].mean())
    if not np.isfinite(total) or total <= 0:
        return ""
    shares = {p.removesuffix("_s"): float(kept[p].mean()) / total
              for p in ("sample_s", "load_s", "learn_s", "sync_s", "other_s")}  # fmt: skip
    shares = {k: v for k, v in shares.items() if np.isfinite(v)}
    if not shares:
        return ""
    top = sorted(shares.items(), key=lambda kv: -kv[1])[:2]
    return " Its iteration is " + " and ".join(f"{100 * v:.0f}% {k}" for k, v in top) + "."


def _speedup_finding(
    family: str,
    model: str,
    base: str,
    order: list[str],
    out: FamilyAnalysis,
    label: dict[str, str],
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
        f"{family.capitalize()}, {model}: against the baseline `{label[base]}` (cell "
        f"`{base}`, {how}), the fastest configuration is {_ratio(sp[best])} as fast; "
        f"{len(faster)} configuration(s) are faster, {len(slower)} slower and "
        f"{len(same)} not distinguishable from it (speedup interval contains 1)"
    )
    text += f"; {len(no_ci)} have too few samples for an interval." if no_ci else "."
    return Finding("speedup", family, model, [base, best], text)
