"""The ``scaling`` figure: throughput, parallel efficiency and the USL fit's residuals
against a count (env runners, envs per runner, learners), one column per curve of
:func:`rlperf.report.compare.scaling.scaling_curves`.

Per column: measured throughput with its 95 % interval (hollow: a point shown but not
fitted, such as ``workers=0`` beside ``workers=1``), the fit solid over the measured
counts and dashed beyond them up to max(2·N_max, 1.5·N*) (a prediction, not a
measurement), its 95 % band, N* marked; below, parallel efficiency (measured and the
fit's); at the bottom, each count's residual in % (anomalies in red).

Matplotlib is imported where it draws (:mod:`rlperf.report.figures.plot` says why).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from rlperf.errors import FigureNotApplicable
from rlperf.report.compare.scaling import ScalingCurve, scaling_curves
from rlperf.report.figures.plot import FigureContext, config_palette, save, style, suptitle
from rlperf.vocabulary import Family

#: The dashed prediction never reaches further than this many times the largest count.
MAX_REACH = 8.0
_ANOMALY = "#c00000"


def scaling(ctx: FigureContext, out: Path) -> Path:
    """Throughput and efficiency against each swept count, with the USL fit."""
    curves = scaling_curves(ctx.configurations)
    if not curves:
        raise FigureNotApplicable(
            "no count (workers, env_runner.num_envs, learners) swept over 3 or more values "
            "within one workload and setting"
        )
    with style():
        fig = scaling_figure(curves)
        return save(fig, out, "scaling", ctx.mixed_note.get(Family.training, ""))


def reach(curve: ScalingCurve) -> float:
    """How far the dashed prediction goes: max(2·N_max, 1.5·N*), at most MAX_REACH·N_max."""
    n_max = float(curve.points["n"].max())
    far = 2 * n_max
    if curve.fit.fitted and math.isfinite(curve.fit.n_star):
        far = max(far, 1.5 * curve.fit.n_star)
    return min(far, MAX_REACH * n_max)


def scaling_figure(curves: Sequence[ScalingCurve]) -> Any:
    """The figure (a matplotlib ``Figure``, not saved): 3 rows, one column per curve."""
    from matplotlib.figure import Figure

    colors = config_palette([c.title for c in curves])
    ncols = len(curves)
    fig = Figure(figsize=(0.8 + 5.0 * ncols, 8.2), layout="constrained")
    axes = fig.subplots(3, ncols, squeeze=False, sharex="col",
                        gridspec_kw={"height_ratios": [3.0, 2.0, 1.3]})  # fmt: skip
    for col, curve in enumerate(curves):
        top, mid, bottom = axes[:, col]
        color = colors[curve.title]
        grid_n = _grid(curve)
        _throughput_panel(top, curve, grid_n, color)
        _efficiency_panel(mid, curve, grid_n, color)
        _residual_panel(bottom, curve, color)
        for ax in (top, mid, bottom):
            _count_ticks(ax, curve, grid_n)
        bottom.set_xlabel(f"{curve.unit_name} (N)")
    axes[0, 0].set_ylabel("env steps per second")
    axes[1, 0].set_ylabel("parallel efficiency")
    axes[2, 0].set_ylabel("residual (%)")
    suptitle(
        fig,
        "Scaling: measured (95% CI) and the Universal Scalability Law fit "
        "(solid: measured range; dashed: predicted)",
    )  # wrapped to the figure's width
    return fig


def _grid(curve: ScalingCurve) -> np.ndarray:
    # The measured counts are on the grid, so the solid fit and the dashed prediction meet.
    lo = float(curve.points["n"].min())
    return np.union1d(np.geomspace(lo, max(reach(curve), lo * 1.01), 200), curve.points["n"])


def _split_at(curve: ScalingCurve, grid_n: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Masks of the grid inside the fitted range and beyond it."""
    fitted = curve.points.loc[curve.points["fitted"], "n"]
    inside = (grid_n >= fitted.min()) & (grid_n <= fitted.max())
    return inside, grid_n >= fitted.max()


def _throughput_panel(ax: Any, curve: ScalingCurve, grid_n: np.ndarray, color: Any) -> None:
    p, fit = curve.points, curve.fit
    for fitted, face in ((True, color), (False, "white")):
        sub = p[p["fitted"] == fitted]
        if sub.empty:
            continue
        err = np.nan_to_num(np.vstack([sub["throughput"] - sub["throughput_ci_low"],
                                       sub["throughput_ci_high"] - sub["throughput"]]))  # fmt: skip
        ax.errorbar(sub["n"], sub["throughput"], yerr=err, fmt="o", color=color, mfc=face,
                    capsize=3, zorder=3,
                    label="measured" if fitted else "measured, not fitted")  # fmt: skip
    if fit.fitted:
        x, lo, hi = fit.predict(grid_n)
        inside, beyond = _split_at(curve, grid_n)
        ax.plot(grid_n[inside], x[inside], "-", color=color, label="USL fit")
        ax.plot(grid_n[beyond], x[beyond], "--", color=color, label="USL prediction")
        if np.isfinite(lo).any():
            ax.fill_between(grid_n, lo, hi, color=color, alpha=0.12, linewidth=0,
                            label="fit 95% CI")  # fmt: skip
        if math.isfinite(fit.n_star) and fit.n_star <= grid_n.max():
            ax.axvline(fit.n_star, color="#555555", linestyle=":", linewidth=1)
            label = f"N* = {fit.n_star:.1f}" + ("" if fit.has_peak else " (not established)")
            # Right of the line in the left half of the axes, left of it in the right half,
            # so the label stays inside the canvas.
            right = fit.n_star > math.sqrt(grid_n.min() * grid_n.max())
            ax.annotate(label, (fit.n_star, 0.03), fontsize=8,
                        xycoords=("data", "axes fraction"), color="#555555",
                        ha="right" if right else "left", xytext=(-3 if right else 3, 0),
                        textcoords="offset points")  # fmt: skip
        anomalies = p[p["anomaly"]]
        if not anomalies.empty:
            ax.scatter(anomalies["n"], anomalies["throughput"], s=110, facecolors="none",
                       edgecolors=_ANOMALY, linewidths=1.5, zorder=4, label="anomaly")  # fmt: skip
    ax.set_title(f"{curve.title}: {curve.unit_name}\n{_fit_words(curve)}", loc="left",
                 fontsize=8.5)  # fmt: skip
    ax.set_ylim(bottom=0)
    ax.legend(loc="best", fontsize=7, frameon=True, framealpha=0.85)


def _fit_words(curve: ScalingCurve) -> str:
    f = curve.fit
    if not f.fitted:
        return "too few points for a fit"
    peak = "no peak in sight" if not f.has_peak else f"N* = {f.n_star:.1f}"
    return f"σ = {f.sigma.text()}, κ = {f.kappa.text(2)}; {peak}; fit {f.quality}"


def _efficiency_panel(ax: Any, curve: ScalingCurve, grid_n: np.ndarray, color: Any) -> None:
    p, fit = curve.points, curve.fit
    ax.plot(p.loc[p["fitted"], "n"], p.loc[p["fitted"], "efficiency"], "o", color=color,
            label="measured")  # fmt: skip
    if (~p["fitted"]).any():
        ax.plot(p.loc[~p["fitted"], "n"], p.loc[~p["fitted"], "efficiency"], "o", color=color,
                mfc="white", label="measured, not fitted")  # fmt: skip
    if fit.fitted:
        n_min = float(p.loc[p["fitted"], "n"].min())
        x = fit.predict(grid_n)[0]
        per_unit = float(fit.predict([n_min])[0][0]) / n_min
        eff = x / (grid_n * per_unit)
        inside, beyond = _split_at(curve, grid_n)
        ax.plot(grid_n[inside], eff[inside], "-", color=color, label="USL fit")
        ax.plot(grid_n[beyond], eff[beyond], "--", color=color, label="USL prediction")
    ax.axhline(1.0, color="#999999", linewidth=0.8)
    ax.set_ylim(0, max(1.1, float(np.nanmax(p["efficiency"])) * 1.1))
    ax.legend(loc="upper right", fontsize=7, frameon=True, framealpha=0.85)


def _residual_panel(ax: Any, curve: ScalingCurve, color: Any) -> None:
    p = curve.points[curve.points["fitted"]]
    if not curve.fit.fitted:
        ax.text(0.5, 0.5, "no fit", transform=ax.transAxes, ha="center", va="center", fontsize=8)
        return
    colors = [_ANOMALY if a else color for a in p["anomaly"]]
    ax.vlines(p["n"], 0, 100 * p["residual_pct"], colors=colors, linewidth=3)
    ax.plot(p["n"], 100 * p["residual_pct"], "o", color="#333333", markersize=3)
    ax.axhline(0.0, color="#999999", linewidth=0.8)
    top = max(1.0, float(np.nanmax(np.abs(100 * p["residual_pct"]))) * 1.3)
    ax.set_ylim(-top, top)


def _count_ticks(ax: Any, curve: ScalingCurve, grid_n: np.ndarray) -> None:
    """Integer ticks at the measured counts (and the end of the prediction), log scale
    where the counts span a factor of 8 or more."""
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator

    n = sorted({int(v) for v in curve.points["n"]})
    far = int(round(grid_n.max()))
    ticks = sorted({*n, far} if far > n[-1] else set(n))
    if n[-1] / max(n[0], 1) >= 8:
        ax.set_xscale("log", base=2)
    ax.xaxis.set_major_locator(FixedLocator(ticks))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{int(round(v))}"))
    ax.set_xlim(n[0] / 1.15 if n[-1] / max(n[0], 1) >= 8 else n[0] - 0.5, far * 1.08)
