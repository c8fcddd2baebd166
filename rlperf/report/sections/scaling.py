"""Section *Scaling*: the measured points and the Universal Scalability Law fit of every
scaling curve (:mod:`rlperf.report.compare.scaling`)."""

from __future__ import annotations

import math
from collections.abc import Sequence

import pandas as pd

from rlperf.report.compare.scaling import (
    ScalingCurve,
    ci_text,
    n_star_text,
    pct_text,
    scaling_curves,
)
from rlperf.report.export import render
from rlperf.report.sections.base import Inputs, Section
from rlperf.report.stats.usl import UslFit, number_text
from rlperf.vocabulary import Family


def scaling_section(curves: Sequence[ScalingCurve]) -> list[render.Block]:
    """The report's "Scaling" section: per curve its sentence, a table of the points
    (N, measured throughput, efficiency, the fit's prediction, residual) and the fitted
    parameters with their intervals. Nothing when there is no curve."""
    if not curves:
        return []
    blocks: list[render.Block] = [
        render.Heading("Scaling", 2),
        render.Para(
            "Throughput (env steps per second) against each count swept over at least 3 "
            "values, with a fit of the Universal Scalability Law X(N) = λN / (1 + σ(N−1) + "
            "κN(N−1)): σ the share of work that serialises, κ the cost of coherence (it "
            "bends the curve down beyond N* = sqrt((1−σ)/κ)). Parallel efficiency is X(N) / "
            "(N · X(N_min) / N_min). Intervals are 95 %; an anomaly is a count whose "
            "measured interval does not contain the fit's prediction. N counts processes "
            "that do the work: `workers=0` (the driver samples) and `learners=0` (the "
            "driver learns) are N=1."
        ),
    ]
    for c in curves:
        blocks += [render.Heading(f"{c.title}: {c.unit_name}", 3), render.Para(c.text())]
        caption = f"throughput from {c.throughput_source}"
        blocks.append(render.Table(_points_table(c), caption=caption))
        blocks.append(render.Table(_params_table(c.fit), caption=c.fit.method))
        if c.note:
            blocks.append(render.Bullets(list(c.note)))
    return blocks


def _points_table(c: ScalingCurve) -> pd.DataFrame:
    p = c.points
    return pd.DataFrame({
        "N": [number_text(float(v)) + ("" if f else " (not fitted)")
              for v, f in zip(p["n"], p["fitted"], strict=True)],
        c.axis: [number_text(float(v)) for v in p["count"]],
        "throughput [env steps/s, 95% CI]": [ci_text(x, lo, hi) for x, lo, hi in zip(
            p["throughput"], p["throughput_ci_low"], p["throughput_ci_high"], strict=True)],
        f"efficiency (vs N={number_text(float(p.loc[p['fitted'], 'n'].min()))})": [
            f"{v:.2f}" if math.isfinite(v) else "" for v in p["efficiency"]],
        "fit [95% CI]": [ci_text(x, lo, hi) for x, lo, hi in zip(
            p["predicted"], p["predicted_low"], p["predicted_high"], strict=True)],
        "residual": [pct_text(r) for r in p["residual_pct"]],
        "anomaly": ["yes" if a else "" for a in p["anomaly"]],
    })  # fmt: skip


def _params_table(f: UslFit) -> pd.DataFrame:
    rows = [("λ (env steps/s of one unit)", f.lambda_.text(3)), ("σ (contention)", f.sigma.text()),
            ("κ (coherence)", f.kappa.text(2)),
            ("N* (peak)", n_star_text(f)),
            ("R²", f"{f.r2:.3f}" if math.isfinite(f.r2) else ""),
            ("RMS residual", f"{100 * f.rmse_rel:.1f} %" if math.isfinite(f.rmse_rel) else ""),
            ("quality", f"{f.quality}: {f.reason}")]  # fmt: skip
    return pd.DataFrame(rows, columns=["parameter", "value [95% CI]"])


def collect(inputs: Inputs) -> list[ScalingCurve]:
    """The scaling curves of the configurations table, with the training plan's constants."""
    plan = inputs.plans.get(Family.training)
    constants = dict(plan.constants) if plan is not None else {}
    return scaling_curves(inputs.result.configurations, constants)


SECTION = Section(
    name="scaling",
    title="Scaling",
    order=60,
    needs=("configurations", "plans"),
    render=lambda inputs: scaling_section(inputs.data("scaling")),
    collect=collect,
)
