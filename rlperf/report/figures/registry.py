"""The figure registry: every figure the report draws, in the order the report shows
them, and :func:`draw_all`, which draws each one on its own (one failing figure is listed
as not drawn, never loses the report).

Figures, one per question the study asked (docs/study.md), in one visual language
(:mod:`rlperf.report.figures.plot`): training figures in :mod:`rlperf.report.figures.training`,
inference figures in :mod:`rlperf.report.figures.inference`, and here those of every
family:

- ``intervals``: every configuration's objective with its interval and number of runs;
- ``gpu_power``: GPU board power over each run (``telemetry.csv``).

Serve and search figures are drawn by :mod:`rlperf.report.tables.serve` and
:mod:`rlperf.report.read.searches`. Matplotlib is imported where it draws
(:mod:`rlperf.report.figures.plot` says why).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from rlperf.errors import FigureNotApplicable
from rlperf.report.compare.axes import AxisPlan, within_set
from rlperf.report.compare.comparison import Comparison
from rlperf.report.compare.findings import FamilyAnalysis, level
from rlperf.report.figures import env
from rlperf.report.figures.inference import compression_tradeoff, fidelity_latency, latency
from rlperf.report.figures.learning import learning_curves
from rlperf.report.figures.plot import (
    FigureContext,
    completed_configurations,
    config_palette,
    grid,
    interval_errors,
    objective_label,
    save,
    style,
    suptitle,
)
from rlperf.report.figures.scaling import scaling
from rlperf.report.figures.training import (
    iter_time_vs_workers,
    phase_breakdown,
    phase_times,
    utilisation,
)
from rlperf.report.read import energy
from rlperf.report.read.collect import Progress
from rlperf.report.stats.repeats import Configuration
from rlperf.report.tables.tidy import Tables
from rlperf.results.columns import TIME_S
from rlperf.vocabulary import Family


def _runs_label(config: str, runs: Any) -> str:
    return f"{config} ({int(runs)} runs)" if pd.notna(runs) and int(runs) > 1 else config


def intervals(ctx: FigureContext, out: Path) -> Path:
    """Every configuration's objective with its interval, one facet per family and workload;
    filled markers are run-to-run intervals (n runs in the label), open ones within one run.

    A facet with one configuration compares nothing and would stretch its interval over
    the whole axis (a 0.2 % interval drawn as wide as the figure): such facets are left out.
    """
    df = completed_configurations(ctx)
    if df.empty:
        raise FigureNotApplicable("no completed configuration with an estimate")
    pairs = {(str(f), str(m)) for f, m in zip(df["family"], df["model"], strict=True)}
    size = {fm: int(((df["family"] == fm[0]) & (df["model"].astype(str) == fm[1])).sum())
            for fm in pairs}  # fmt: skip
    facets = sorted(
        (fm for fm in pairs if size[fm] > 1), key=lambda fm: (fm[0] != Family.training, fm)
    )
    if not facets:
        raise FigureNotApplicable(
            "every family and workload has a single configuration: no interval to compare"
        )
    with style():
        fig, axes = grid([len(ctx.order.get(k, [])) for k in facets], 1, col_width=6.5)
        for ax, (fam, model) in zip(axes[:, 0], facets, strict=True):
            order = ctx.order.get((fam, model), [])
            sub = df[(df["family"] == fam) & (df["model"].astype(str) == model)]
            sub = sub.set_index("config").reindex(order).dropna(subset=["objective_value"])
            y = np.arange(len(sub))
            err = interval_errors(sub)
            repeated = (sub["repeats"].fillna(1) > 1).to_numpy()
            for mask, face in ((repeated, None), (~repeated, "white")):
                ax.errorbar(sub["objective_value"].to_numpy(dtype=float)[mask], y[mask],
                            xerr=err[:, mask], fmt="o", color="#0173b2", mfc=face,
                            capsize=3, linewidth=1.2)  # fmt: skip
            ax.set_yticks(y, [_runs_label(c, n) for c, n in zip(within_set(list(sub.index)),
                                                                 sub["repeats"],
                                                                 strict=True)])  # fmt: skip
            ax.set_ylim(len(sub) - 0.5, -0.5)
            log = len(sub) and sub["objective_value"].max() > 20 * sub["objective_value"].min()
            if log:
                ax.set_xscale("log")
            ax.set_xlabel(objective_label(sub) + (", log scale" if log else ""))
            ax.set_title(f"{fam} · {model}", loc="left", fontweight="bold")
        suptitle(fig, f"Objective per configuration with {level()} intervals (●: run to run over "
                 "n runs; ○: within one run)")  # fmt: skip
        return save(fig, out, "intervals")


#: Beyond this many runs in a panel, ``gpu_power`` names the runs in no legend.
MAX_LEGEND_RUNS = 12


def gpu_power(ctx: FigureContext, out: Path) -> Path:
    """GPU board power over each run (``telemetry.csv``, monitored GPUs summed)."""
    df = ctx.power
    if df.empty:
        raise FigureNotApplicable(ctx.power_note or "no GPU power in any telemetry.csv")
    facets = sorted({(str(f), str(m)) for f, m in zip(df["family"], df["model"], strict=True)})
    from matplotlib.figure import Figure

    with style():
        fig = Figure(figsize=(9.0, 2.6 * len(facets) + 1.0), layout="constrained")
        axes = fig.subplots(len(facets), 1, squeeze=False)
        for ax, (fam, model) in zip(axes[:, 0], facets, strict=True):
            sub = df[(df["family"] == fam) & (df["model"].astype(str) == model)]
            for label, run in sub.groupby("label", observed=True, sort=True):
                color = ctx.config_colors.get(str(run["config"].iloc[0]), "#0173b2")
                ax.plot(run[TIME_S], run["gpu_power_w"], color=color, linewidth=1.0,
                        label=str(label))  # fmt: skip
            ax.set_xlabel("time since the job started (s)")
            ax.set_ylabel("GPU power (W)")
            ax.set_ylim(bottom=0)
            ax.set_title(f"{fam} · {model}", loc="left", fontweight="bold")
            runs = sub["label"].nunique()
            if runs <= MAX_LEGEND_RUNS:
                ax.legend(fontsize=7, frameon=False, loc="upper right")
            else:  # a legend of every run would squeeze the axes to nothing
                ax.text(0.99, 0.97, f"{runs} runs; colour: configuration", ha="right",
                        va="top", fontsize=7, transform=ax.transAxes)  # fmt: skip
        fig.suptitle("GPU board power over each run (NVML, monitored GPUs summed)", fontsize=10)
        return save(fig, out, "gpu_power")


FIGURES: dict[str, tuple[Callable[[FigureContext, Path], Path], str]] = {
    "phase_times": (phase_times, "Phase times per configuration (stacked, share of each phase)"),
    "phase_breakdown": (phase_breakdown, "Sample / load / learn / sync time per configuration"),
    "utilisation": (utilisation, "CPU, RAM, GPU and GPU-memory utilisation"),
    "iter_time_vs_workers": (iter_time_vs_workers, "The objective against the env runners"),
    "scaling": (
        scaling,
        "Throughput and parallel efficiency against each swept count, with "
        "the Universal Scalability Law fitted (dashed: predicted, not measured)",
    ),
    "intervals": (intervals, "Objective per configuration with its interval and number of runs"),
    env.FIGURE: (env.env_throughput, env.TITLE),
    "learning_curves": (
        learning_curves,
        "Learning curves: return against env steps and "
        "wall-clock time per configuration (bands: 95 % over seeds)",
    ),
    "gpu_power": (gpu_power, "GPU power over each run"),
    "latency": (latency, "Inference latency per backend / configuration (p50, p99 marked)"),
    "fidelity_latency": (fidelity_latency, "Fidelity vs latency of exported variants"),
    "compression_tradeoff": (
        compression_tradeoff,
        "Compression trade-off: return vs latency per variant (marker area: model size)",
    ),
}


def draw_all(ctx: FigureContext, out: Path) -> tuple[dict[str, Path], dict[str, str]]:
    """Draw every figure that applies; returns (name → PNG path, name → reason not drawn)."""
    out.mkdir(parents=True, exist_ok=True)
    drawn: dict[str, Path] = {}
    skipped: dict[str, str] = {}
    for name, (func, _title) in FIGURES.items():
        try:
            drawn[name] = func(ctx, out)
        except FigureNotApplicable as exc:
            skipped[name] = str(exc)
        except Exception as exc:  # noqa: BLE001 - one broken figure must not lose the report
            skipped[name] = f"failed: {exc.__class__.__name__}: {exc}"
    return drawn, skipped


def draw_figures(
    comparison: Comparison,
    analyses: dict[str, FamilyAnalysis],
    data: Tables,
    out_dir: Path,
    progress: Progress | None = None,
) -> tuple[dict[str, Path], dict[str, str]]:
    """Draw every figure that applies into ``out_dir/figures`` (see :mod:`.figures`).

    Returns (name -> PNG path, name -> why it was not drawn).
    """
    if progress is not None:
        progress("drawing figures")
    facet = partial(_by_workload, comparison)
    ctx = FigureContext(
        iterations=facet(_without_workers(comparison, data.iterations, "cell"), "cell"),
        latency=facet(data.latency, "cell"),
        runs=facet(data.runs, "cell"),
        order={
            (fam, m): o
            for fam, cs in comparison.configurations.items()
            for m, o in _order(analyses.get(fam), cs, comparison.plans[fam]).items()
        },
        config_colors=config_palette(
            [comparison.plans[c.family].configs[c.id] for c in comparison.cells]
        ),
        mixed_note=_mixed_notes(comparison.mixed),
        configurations=facet(
            _without_workers(comparison, data.configurations, "configuration"), "configuration"
        ),
        targets=(
            dict(zip(data.targets["configuration"], data.targets["target"], strict=True))
            if not data.targets.empty
            else {}
        ),
    )
    ctx.power, ctx.power_note = _power(comparison)
    return draw_all(ctx, out_dir / "figures")


def _by_workload(comparison: Comparison, df: pd.DataFrame, id_col: str) -> pd.DataFrame:
    """``df`` with its ``model`` column holding each row's workload (its comparison set,
    whose short name starts with the model): figures facet by it, as the tables are
    grouped, so a panel never mixes configurations that do different work."""
    if df.empty or id_col not in df or "model" not in df:
        return df
    workload = df[id_col].map(comparison.workload_of)
    return df.assign(model=workload.where(workload.notna(), df["model"]).astype(str))


def _without_workers(comparison: Comparison, df: pd.DataFrame, id_col: str) -> pd.DataFrame:
    """``df`` plus each row's training configuration label without workers and seed
    (``config_wo_workers``; ``id_col`` holds a cell id)."""
    if df.empty or Family.training not in comparison.plans:
        return df
    plan = comparison.plans[Family.training]
    by_id = {c.id: c for c in comparison.cells}
    wo = {
        cid: plan.config_without({**by_id[cid].leaves, **by_id[cid].axes}, ["workers", "seed"])
        for cid in plan.labels
    }
    return df.assign(config_wo_workers=df[id_col].map(wo))


def _power(comparison: Comparison) -> tuple[pd.DataFrame, str]:
    """Every completed run's GPU power over time (telemetry.csv), and, when no run has
    any, why (the runs' reasons, e.g. the fingerprint's nvml_unavailable_reason)."""
    frames: list[pd.DataFrame] = []
    reasons: dict[str, int] = {}
    for c in comparison.cells:
        if not c.completed:
            continue
        timeline = energy.power_timeline(c.telemetry)
        if timeline.empty:
            why = energy.unavailable_reason(c) or "no GPU power in telemetry.csv"
            reasons[why] = reasons.get(why, 0) + 1
            continue
        plan = comparison.plans[c.family]
        frames.append(
            timeline.assign(
                cell=c.id,
                label=plan.labels[c.id],
                family=c.family,
                config=plan.configs[c.id],
                model=comparison.workload_of.get(c.id, str(c.axes.get("model"))),
            )
        )
    note = "no GPU power recorded: " + "; ".join(f"{why} ({n} runs)" for why, n in reasons.items())
    return (pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()), note


def _mixed_notes(mixed: dict[tuple[str, str], list[str]]) -> dict[str, str]:
    """family -> the warning printed under its figures when it mixes fingerprints."""
    return {
        fam: "Warning: mixed hardware/software fingerprints "
        + ", ".join(sorted({n for (f, _), ns in mixed.items() if f == fam for n in ns}))
        for fam in {f for f, _ in mixed}
    }


def _order(
    analysis: FamilyAnalysis | None, confs: Sequence[Configuration], plan: AxisPlan
) -> dict[str, list[str]]:
    """Configuration labels per workload (the figures' facets), fastest first (those without
    an estimate last)."""
    out: dict[str, list[str]] = {}
    for conf in confs:
        if conf.completed:
            out.setdefault(conf.workload, []).append(conf.id)
    est = analysis.estimates if analysis else {}

    def key(cid: str) -> tuple[float, str]:
        e = est.get(cid)
        v = e.value if e is not None and np.isfinite(e.value) else np.inf
        return v, plan.configs[cid]

    return {m: [plan.configs[i] for i in sorted(ids, key=key)] for m, ids in out.items()}
