"""Scaling that predicts: throughput against a count (env runners, envs per runner,
learners), its parallel efficiency, and a fit of the Universal Scalability Law.

Gunther's law, X(N) = λN / (1 + σ(N−1) + κN(N−1)), has three parameters a reader can
act on: λ the throughput of one unit, σ the share of work that serialises (contention:
the curve flattens towards λ/σ) and κ the cost of keeping units coherent (crosstalk:
the curve peaks at N* = sqrt((1−σ)/κ) and falls beyond it). A sweep over 2, 4, 8, 16
env runners therefore says not only which count was fastest but where the peak lies and
what an unmeasured count would give.

The law and its fit: :mod:`rlperf.report.stats.usl`.

Curves (:func:`scaling_curves`) come from the report's configurations table; the
section (:func:`scaling_section`) and the figure (:mod:`rlperf.report.figures.scaling`)
draw from them.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from rlperf.report.compare.axes import format_value
from rlperf.report.read.cells import PRIMARY_AXES
from rlperf.report.stats.repeats import is_identity_key
from rlperf.report.stats.usl import UslFit, efficiency, fit_usl, number_text
from rlperf.vocabulary import Family, RunStatus

#: Count axes of a training comparison and how the report names one unit of each.
COUNT_AXES = {"workers": "env runners", "env_runner.num_envs": "envs per runner",
              "learners": "learners"}  # fmt: skip
#: How a ``stage=env`` curve names one unit of its count (the engine's envs, no runners).
ENV_COUNT_NAMES = {"env_runner.num_envs": "envs"}
#: Count axes whose 0 means "the driver does it" (one process all the same): N = max(v, 1).
DRIVER_AT_ZERO = {"workers": "the driver samples", "learners": "the learner runs in the driver"}
_LEGACY_SHARED = ("gpu0", "gpu1", "both")


@dataclass(frozen=True, eq=False)
class ScalingCurve:
    """Throughput against one count axis for one workload and one setting of every other
    axis: the points (one row per configuration), the USL fit and what else changes.

    ``points`` columns: ``count`` (the axis value as configured), ``n`` (the count the law
    sees), ``configuration``, ``label``, ``throughput`` with ``throughput_ci_low`` /
    ``_high``, ``fitted``, ``efficiency``, ``predicted`` with its interval, ``residual``,
    ``residual_pct`` and ``anomaly``.
    """

    workload: str
    axis: str
    setting: dict[str, Any]
    points: pd.DataFrame
    fit: UslFit
    note: list[str]
    throughput_source: str
    family: str = Family.training

    @property
    def unit_name(self) -> str:
        """What one unit of N is (``env runners``)."""
        if self.family == Family.env:
            return ENV_COUNT_NAMES.get(self.axis, COUNT_AXES[self.axis])
        return COUNT_AXES[self.axis]

    @property
    def title(self) -> str:
        """``model1 · both``: the model and the values of the other axes that vary in the
        report (the full workload is :attr:`workload`)."""
        parts = [format_value(a, v) for a, v in self.setting.items() if not _missing(v)]
        return " · ".join(parts) or self.workload

    @property
    def efficiency(self) -> np.ndarray:
        """Parallel efficiency of each point (fitted or not), in ``points`` order."""
        return self.points["efficiency"].to_numpy(dtype=float)

    def text(self) -> str:
        """One or two sentences for the report: peak, parameters, a prediction beyond the
        measured counts, deviations and the fit's quality."""
        f, unit = self.fit, self.unit_name
        measured = self.points.loc[self.points["fitted"], "n"].to_numpy(dtype=float)
        if not f.fitted:
            return (
                f"{self.title}: {unit} {_counts(measured)}; too few points for a fit ({f.reason})."
            )
        params = f"USL σ = {f.sigma.text()}, κ = {f.kappa.text(2)}, λ = {f.lambda_.text(3)}"
        star = f"N* = {n_star_text(f)}"
        if f.has_peak:
            peak_n = f.n_star_count or 1
            x, lo, hi = (float(v[0]) for v in f.predict([peak_n]))
            head = (
                f"throughput peaks at {star} {unit} ({params}); predicted "
                f"{ci_text(x, lo, hi)} env steps/s at {peak_n}{_unmeasured(peak_n, measured)}"
            )
        else:
            head = (
                f"no peak in sight up to {number_text(float(measured.max()))} {unit} ({params}; "
                f"{star}{': κ is not distinguishable from 0' if f.kappa.low == 0 else ''})"
            )
        ahead = int(2 * measured.max())
        x, lo, hi = (float(v[0]) for v in f.predict([ahead]))
        head += (
            f"; predicted {ci_text(x, lo, hi)} env steps/s at {ahead}{_unmeasured(ahead, measured)}"
        )
        p = self.points[self.points["anomaly"]]
        tail = [f"{number_text(float(c))} {unit} deviates from the fit by {pct_text(r)} "
                "(outside its "
                f"measured interval, ±{100 * (hi - lo) / (2 * x):.1f} %)"
                for c, r, x, lo, hi in zip(p["n"], p["residual_pct"], p["throughput"],
                                           p["throughput_ci_low"], p["throughput_ci_high"],
                                           strict=True)]  # fmt: skip
        quality = {"good": f"fit good: {f.reason}", "poor": f"**poor fit**: {f.reason}"}.get(
            f.quality, f"**too few points**: {f.reason}"
        )
        return f"{self.title}: {head}. " + "; ".join([*tail, quality]) + "."


def _missing(v: Any) -> bool:
    return v is None or v is pd.NA or (isinstance(v, float) and math.isnan(v))


def _counts(n: np.ndarray) -> str:
    return ", ".join(number_text(float(v)) for v in sorted(set(n.tolist())))


def _unmeasured(n: float, measured: np.ndarray) -> str:
    return "" if n in set(measured.tolist()) else " (not measured)"


def ci_text(x: float, lo: float, hi: float) -> str:
    if math.isfinite(lo) and math.isfinite(hi):
        return f"{number_text(x)} [{number_text(lo)}, {number_text(hi)}]"
    return number_text(x)


def n_star_text(f: UslFit) -> str:
    """N* with its interval (the upper end may be ∞: no peak the data can bound)."""
    if not math.isfinite(f.n_star_low):
        return number_text(f.n_star)
    return f"{number_text(f.n_star)} [{number_text(f.n_star_low)}, {number_text(f.n_star_high)}]"


def pct_text(r: float) -> str:
    return f"{100 * r:+.1f} %" if math.isfinite(r) else ""


def _is_axis(column: str) -> bool:
    return (column in PRIMARY_AXES or column in COUNT_AXES or "." in column) and is_identity_key(
        column
    )


def _time_like(objective: Any) -> bool:
    """Whether an objective is a time per fixed unit of work (its relative interval then
    carries over to the throughput); a time to target is not."""
    metric = str(objective).split(" ")[-1] if isinstance(objective, str) else ""
    return "target" not in metric and (
        metric.endswith(("_s", "_ms")) or metric.startswith(("s_per", "ms_per"))
    )


def throughput_columns(df: pd.DataFrame) -> tuple[pd.DataFrame, str]:
    """Each configuration's env steps per second with its interval (``x``, ``low``,
    ``high``) and where they come from: ``throughput`` and its interval where the table
    has them; else ``env_steps_per_s_mean`` with the relative interval of a time-like
    objective (throughput ∝ 1 / time for a fixed amount of work per iteration)."""
    out = pd.DataFrame(index=df.index, columns=["x", "low", "high"], dtype=float)
    if "throughput" in df and pd.to_numeric(df["throughput"], errors="coerce").notna().any():
        out["x"] = pd.to_numeric(df["throughput"], errors="coerce")
        for side in ("low", "high"):
            col = f"throughput_ci_{side}"
            if col in df:
                out[side] = pd.to_numeric(df[col], errors="coerce")
        return out, "the report's `throughput` (env steps per second over the kept iterations)"
    if "env_steps_per_s_mean" not in df:
        return out, ""
    out["x"] = pd.to_numeric(df["env_steps_per_s_mean"], errors="coerce")
    if {"objective", "objective_value", "objective_ci_low", "objective_ci_high"} <= set(df):
        time_like = df["objective"].map(_time_like).astype(bool)
        value = pd.to_numeric(df["objective_value"], errors="coerce")
        with np.errstate(divide="ignore", invalid="ignore"):
            out["low"] = (
                out["x"] * value / pd.to_numeric(df["objective_ci_high"], errors="coerce")
            ).where(time_like)
            out["high"] = (
                out["x"] * value / pd.to_numeric(df["objective_ci_low"], errors="coerce")
            ).where(time_like)
        return out, ("`env_steps_per_s_mean` (mean env steps per second over the kept "
                     "iterations), interval: the objective's relative one")  # fmt: skip
    return out, "`env_steps_per_s_mean` (mean env steps per second over the kept iterations)"


def scaling_curves(
    configurations: pd.DataFrame, constants: Mapping[str, Any] | None = None
) -> list[ScalingCurve]:
    """Every curve of the report's configurations table (one row per configuration,
    :func:`rlperf.report.tables.tidy.configurations_table`): for each count axis
    (:data:`COUNT_AXES`), one curve per workload (``workload``, else ``model``), machine
    and setting of the other axes, with at least 3 counts.

    A config leaf that varies only with the count (``gpu_layout.gpus_per_worker``) does
    not split a curve: it is what else changes with N, and the curve's note says so.
    ``constants``: axis values shared by every cell (the axis plan's), which the table
    leaves out, to say e.g. that a constant shared GPU layout splits the GPU among N.
    """
    df = configurations
    if df.empty or "family" not in df or "status" not in df:
        return []
    df = df[
        df["family"].isin([Family.training, Family.env]) & (df["status"] == RunStatus.completed)
    ]
    values, source = throughput_columns(df)
    df = df.assign(_x=values["x"], _low=values["low"], _high=values["high"])
    df = df[df["_x"].notna() & (df["_x"] > 0)]
    if df.empty:
        return []
    workload = "workload" if "workload" in df and df["workload"].notna().any() else "model"
    varying = [c for c in df.columns if _is_axis(c) and c not in (workload, "model")
               and df[c].nunique(dropna=False) > 1]  # fmt: skip
    curves = []
    for axis in (a for a in COUNT_AXES if a in df):
        sweep = df[pd.to_numeric(df[axis], errors="coerce").notna()]
        key = [c for c in ("family", workload, "model", "machine") if c in sweep]
        primary = [a for a in varying if a != axis and (a in PRIMARY_AXES or a in COUNT_AXES)]
        leaves = [a for a in varying if a != axis and a not in primary]
        for _, group in sweep.groupby(key + primary, dropna=False, sort=True):
            for sub, cut in _split(group, axis, leaves):
                if pd.to_numeric(sub[axis]).nunique() < 3:
                    continue
                setting = {c: sub[c].iloc[0] for c in [*primary, *cut]}
                context = {**(constants or {}), **{c: sub[c].iloc[0] for c in sub.columns
                           if _is_axis(c) and sub[c].nunique(dropna=False) == 1}}  # fmt: skip
                curves.append(_curve(sub, axis, workload, setting, leaves, context, source))
    return curves


def _split(
    group: pd.DataFrame, axis: str, leaves: list[str]
) -> list[tuple[pd.DataFrame, list[str]]]:
    """The group cut by every leaf that varies and is not determined by the count, with
    the leaves it was cut by (they tell its curves apart)."""
    per_count = group.groupby(axis, dropna=False, sort=False)
    cut = [c for c in leaves if group[c].nunique(dropna=False) > 1
           and per_count[c].nunique(dropna=False).max() > 1]  # fmt: skip
    if not cut:
        return [(group, [])]
    return [(sub, cut) for _, sub in group.groupby(cut, dropna=False, sort=True)]


def _curve(sub: pd.DataFrame, axis: str, workload: str, setting: dict[str, Any],
           leaves: list[str], context: Mapping[str, Any], source: str) -> ScalingCurve:  # fmt: skip
    sub = sub.assign(_count=pd.to_numeric(sub[axis]).astype(float)).sort_values("_count")
    count = sub["_count"].to_numpy()
    n, fitted, note = _counts_as_n(axis, count)
    x, low, high = (sub[c].to_numpy(dtype=float) for c in ("_x", "_low", "_high"))
    fit = fit_usl(n[fitted], x[fitted], low[fitted], high[fitted])
    pred, pred_low, pred_high = fit.predict(n)
    e_all = efficiency(n, x, fitted)
    points = pd.DataFrame({
        "count": count, "n": n,
        "configuration": sub["configuration"].to_numpy() if "configuration" in sub else sub.index,
        "label": sub["label"].to_numpy() if "label" in sub else "",
        "throughput": x, "throughput_ci_low": low, "throughput_ci_high": high,
        "fitted": fitted, "efficiency": e_all, "predicted": pred, "predicted_low": pred_low,
        "predicted_high": pred_high, "residual": x - pred, "residual_pct": (x - pred) / pred,
        "anomaly": [bool(f and c in fit.anomalies) for f, c in zip(fitted, n, strict=True)],
    })  # fmt: skip
    setting = {c: v for c, v in setting.items() if not _missing(v)}
    if "model" in sub and not _missing(sub["model"].iloc[0]):
        setting = {"model": sub["model"].iloc[0], **setting}
    note += _what_else_changes(sub, axis, n, leaves, context)
    if "fingerprint" in sub and sub["fingerprint"].nunique() > 1:
        note.append(
            f"the counts ran under {sub['fingerprint'].nunique()} fingerprints "
            "(same machine, different software or settings)"
        )
    if fit.fitted and not fit.weighted:
        note.append("unweighted fit: not every count has an interval")
    if fit.fitted and not np.any(np.isfinite(low[fitted])):
        note.append("no count has an interval: anomalies are not judged")
    if fit.quality != "good":
        note.append(f"{fit.quality}: {fit.reason}")
    family = str(sub["family"].iloc[0])
    return ScalingCurve(
        str(sub[workload].iloc[0]), axis, setting, points, fit, note, source, family
    )


def _counts_as_n(axis: str, count: np.ndarray) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """N for each configured count, which points are fitted, and what the note says: a 0
    of workers / learners is one process (the driver); beside a measured 1 it is a
    different setup of that process and is shown unfitted."""
    n, fitted = count.copy(), np.ones(count.shape, dtype=bool)
    if axis not in DRIVER_AT_ZERO or not np.any(count == 0):
        return n, fitted, []
    n = np.maximum(count, 1.0)
    if np.any(count == 1):
        return n, count >= 1, [f"{axis}=0 ({DRIVER_AT_ZERO[axis]}) is shown but not fitted: "
                               f"{axis}=1 is measured too, and both are N=1"]  # fmt: skip
    return n, fitted, [f"{axis}=0 ({DRIVER_AT_ZERO[axis]}) is counted as N=1"]


def _what_else_changes(sub: pd.DataFrame, axis: str, n: np.ndarray, leaves: list[str],
                       context: Mapping[str, Any]) -> list[str]:  # fmt: skip
    """What changes with N besides N: leaves that follow the count, and in a shared GPU
    layout each env runner's share of the GPU(s)."""
    out = []
    share = "gpu_layout.gpus_per_worker"
    follows = [c for c in leaves if sub[c].nunique(dropna=False) > 1]
    if share in follows and axis == "workers":
        v = sub[share].to_numpy()
        out.append(f"each env runner's GPU share ({share}) shrinks with N: "
                   + ", ".join(f"{number_text(float(s), 4)} at N={number_text(float(c))}"
                               for s, c in zip(v, n, strict=True)))  # fmt: skip
    elif axis == "workers" and _shared_layout(context, sub):
        layout = context.get("gpu_layout", "")
        out.append(f"in the shared GPU layout `{layout}` each env runner's GPU share, "
                   "(visible − driver) / N, shrinks as N grows")  # fmt: skip
    for c in follows:
        if c == share:
            continue
        pairs = ", ".join(
            f"{v} at N={number_text(float(k))}" for v, k in zip(sub[c], n, strict=True)
        )
        out.append(f"`{c}` also changes with N: {pairs}")
    return out


def _shared_layout(context: Mapping[str, Any], sub: pd.DataFrame) -> bool:
    layout = str(context.get("gpu_layout", ""))
    if layout.startswith("shared_"):
        return True
    driver = context.get("gpu_layout.driver_gpus")
    tiny = driver is None or _missing(driver) or float(driver) < 0.01
    return layout in _LEGACY_SHARED and tiny and bool((pd.to_numeric(sub["workers"]) > 0).any())
