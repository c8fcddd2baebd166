"""Scaling that predicts: throughput against a count (env runners, envs per runner,
learners), its parallel efficiency, and a fit of the Universal Scalability Law.

Gunther's law, X(N) = λN / (1 + σ(N−1) + κN(N−1)), has three parameters a reader can
act on: λ the throughput of one unit, σ the share of work that serialises (contention:
the curve flattens towards λ/σ) and κ the cost of keeping units coherent (crosstalk:
the curve peaks at N* = sqrt((1−σ)/κ) and falls beyond it). A sweep over 2, 4, 8, 16
env runners therefore says not only which count was fastest but where the peak lies and
what an unmeasured count would give.

Fit (:func:`fit_usl`): least squares on log X (throughput errors are relative: a 3 %
wobble at 400 env steps/s is the same as at 40), σ ∈ [0, 1], κ ≥ 0, each residual in
units of its count's measured sd (read off its 95 % interval) where every count has one,
with a Cauchy loss so that one anomalous count does not drag the law onto its neighbours.
Intervals: Wald intervals from the fit's covariance (scipy ``curve_fit``'s, s²(JᵀJ)⁻¹),
Student's t on n − 3 degrees of freedom; where the residuals scatter less than the
measured intervals say, the measured intervals set them (normal quantile), so the law is
never surer than its measurements. N*'s and the predictions' intervals: the delta method
on their logarithms. A residual bootstrap was the alternative; with 4-6 counts it
resamples 4-6 residuals, understates the spread just as much and costs a thousand refits
per curve, where the covariance is closed-form and deterministic. On the synthetic sweep
of the tests (λ = 100, σ = 0.05, κ = 0.002, N = 1..32, 3 % noise; 300 sweeps) the
intervals held the true σ and κ 98 % of the time with measured intervals and 95 %
without. Near a bound (κ ≈ 0: a curve with no peak in sight) they are approximate and
clipped at the bound; N* then has no upper end.

Three counts leave no residual for three parameters: the law passes through them, the
quality is "too few points", and the only intervals are those the measured intervals
imply (none without them). Fixing λ at a measured N = 1 does not help: it leaves two
parameters for the two other counts, still no residual.

Curves (:func:`scaling_curves`) come from the report's configurations table; the
section (:func:`scaling_section`) and the figure (:mod:`rlperf.report.figures_scaling`)
draw from them. scipy is imported inside the fitting function (half a second, paid only
when a curve is fitted).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from rlperf.report import render
from rlperf.report.axes import format_value
from rlperf.report.cells import PRIMARY_AXES
from rlperf.report.repeats import is_identity_key
from rlperf.report.stats import CONFIDENCE

#: Count axes of a training comparison and how the report names one unit of each.
COUNT_AXES = {"workers": "env runners", "env_runner.num_envs": "envs per runner",
              "learners": "learners"}  # fmt: skip
#: Count axes whose 0 means "the driver does it" (one process all the same): N = max(v, 1).
DRIVER_AT_ZERO = {"workers": "the driver samples", "learners": "the learner runs in the driver"}
#: Relative RMSE of the fit above which the law is said not to describe the curve.
POOR_RMSE = 0.10
#: A peak further out than this many times the largest count measured is "not in sight".
FAR_PEAK = 10.0
#: Residuals (in measured sd) beyond which the fit's loss grows linearly, not squared.
ROBUST_SCALE = 2.0
#: The relative deviation one unit of residual stands for in an unweighted fit.
UNWEIGHTED_SCALE = 0.03
_Z = 1.959963984540054  # normal quantile of a 95 % interval, to read sd off a measured one
_BOUNDS = ([1e-12, 0.0, 0.0], [np.inf, 1.0, np.inf])  # λ > 0, σ in [0, 1], κ >= 0
_LEGACY_SHARED = ("gpu0", "gpu1", "both")


@dataclass(frozen=True)
class Param:
    """A fitted parameter with its interval (NaN where none can be given)."""

    value: float
    low: float = math.nan
    high: float = math.nan

    def text(self, digits: int = 2) -> str:
        v = _num(self.value, digits)
        if not (math.isfinite(self.low) and math.isfinite(self.high)):
            return v
        return f"{v} [{_num(self.low, digits)}, {_num(self.high, digits)}]"


@dataclass(frozen=True, eq=False)
class UslFit:
    """A USL fit of one curve: parameters with intervals, peak, residuals, quality.

    ``residuals`` are measured − fitted throughput, ``residuals_rel`` the same over the
    fitted value; ``anomalies`` the counts whose measured interval does not contain the
    fit's prediction. ``quality`` is ``good``, ``poor`` or ``too few points``, with the
    reason in ``reason``; ``method`` says how the intervals were made.
    """

    n: np.ndarray
    x: np.ndarray
    x_low: np.ndarray
    x_high: np.ndarray
    lambda_: Param
    sigma: Param
    kappa: Param
    n_star: float
    n_star_low: float
    n_star_high: float
    residuals: np.ndarray
    residuals_rel: np.ndarray
    r2: float
    rmse_rel: float
    quality: str
    reason: str
    anomalies: tuple[float, ...]
    method: str
    dof: int
    crit: float  # the intervals' critical value: t on ``dof``, or z without residual
    weighted: bool
    cov: np.ndarray = field(repr=False)  # of (λ, σ, κ); NaN without intervals

    @property
    def fitted(self) -> bool:
        return math.isfinite(self.lambda_.value)

    @property
    def has_peak(self) -> bool:
        """A peak the data supports: finite N*, κ's interval clear of 0, not far out."""
        if not (self.fitted and math.isfinite(self.n_star)):
            return False
        if self.n_star > FAR_PEAK * float(np.max(self.n)):
            return False
        return not (math.isfinite(self.kappa.low) and self.kappa.low <= 0.0)

    @property
    def n_star_count(self) -> int | None:
        """The integer count the law predicts fastest (floor or ceil of N*), None if none."""
        if not (self.fitted and math.isfinite(self.n_star)):
            return None
        lo, hi = max(1, math.floor(self.n_star)), max(1, math.ceil(self.n_star))
        x_lo, x_hi = (float(v) for v in self.predict([lo, hi])[0])
        return lo if x_lo >= x_hi else hi

    def predict(self, n: Sequence[float] | np.ndarray | float) -> tuple[np.ndarray, ...]:
        """Throughput the law predicts at counts ``n`` with its 95 % interval (x, low, high)."""
        counts = np.atleast_1d(np.asarray(n, dtype=float))
        if not self.fitted:
            nan = np.full(counts.shape, np.nan)
            return nan, nan.copy(), nan.copy()
        p = np.array([self.lambda_.value, self.sigma.value, self.kappa.value])
        x = usl(counts, *p)
        grad = _dlog_usl(counts, p)
        var = np.einsum("ij,jk,ik->i", grad, self.cov, grad)
        if not np.all(np.isfinite(var)):
            nan = np.full(counts.shape, np.nan)
            return x, nan, nan.copy()
        half = self.crit * np.sqrt(np.clip(var, 0.0, None))
        return x, x * np.exp(-half), x * np.exp(half)


def usl(n: np.ndarray, lambda_: float, sigma: float, kappa: float) -> np.ndarray:
    """X(N) = λN / (1 + σ(N−1) + κN(N−1))."""
    n = np.asarray(n, dtype=float)
    return lambda_ * n / (1.0 + sigma * (n - 1.0) + kappa * n * (n - 1.0))


def _dlog_usl(n: np.ndarray, p: np.ndarray) -> np.ndarray:
    """d log X / d(λ, σ, κ) at each count (rows)."""
    d = 1.0 + p[1] * (n - 1.0) + p[2] * n * (n - 1.0)
    return np.column_stack([np.full(n.shape, 1.0 / p[0]), -(n - 1.0) / d, -n * (n - 1.0) / d])


def _t(dof: int) -> float:
    if dof < 1:
        return math.nan
    from scipy import stats

    return float(stats.t.ppf(1 - (1 - CONFIDENCE) / 2, dof))


def _log_sd(x: np.ndarray, low: np.ndarray, high: np.ndarray) -> np.ndarray:
    """sd of log X read off each measured 95 % interval (NaN where none)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        sd = (np.log(high) - np.log(low)) / (2 * _Z)
    ok = np.isfinite(sd) & (sd > 0) & (low <= x) & (x <= high)
    return np.where(ok, sd, np.nan)


def _as_array(v: Sequence[float] | np.ndarray | None, like: np.ndarray) -> np.ndarray:
    if v is None:
        return np.full(like.shape, np.nan)
    return np.asarray(v, dtype=float).reshape(like.shape)


def fit_usl(
    n: Sequence[float] | np.ndarray,
    x: Sequence[float] | np.ndarray,
    x_low: Sequence[float] | np.ndarray | None = None,
    x_high: Sequence[float] | np.ndarray | None = None,
) -> UslFit:
    """Fit the USL to throughputs ``x`` measured at counts ``n`` (N ≥ 1, repeats allowed).

    ``x_low`` / ``x_high``: each count's 95 % interval; used as weights when every count
    has one, and to flag anomalies. Fewer than 3 distinct counts: no fit, quality "too
    few points". Exactly 3: see the module docstring.
    """
    n_arr = np.asarray(n, dtype=float).ravel()
    x_arr = np.asarray(x, dtype=float).ravel()
    low, high = _as_array(x_low, x_arr), _as_array(x_high, x_arr)
    ok = np.isfinite(n_arr) & np.isfinite(x_arr) & (n_arr >= 1) & (x_arr > 0)
    n_arr, x_arr, low, high = n_arr[ok], x_arr[ok], low[ok], high[ok]
    distinct = np.unique(n_arr).size
    if distinct < 3:
        return _no_fit(n_arr, x_arr, low, high,
                       f"{distinct} distinct count{'s' if distinct != 1 else ''}: the law has "
                       "3 parameters, at least 3 counts are needed")  # fmt: skip
    sd = _log_sd(x_arr, low, high)
    weighted = bool(np.all(np.isfinite(sd)))
    p, cov, dof, crit = _least_squares(n_arr, x_arr, sd if weighted else None)
    pred = usl(n_arr, *p)
    lam, sig, kap = _params(p, cov, crit)
    n_star, ns_low, ns_high = _peak(p, cov, crit, kap, sig)
    resid = x_arr - pred
    resid_rel = resid / pred
    ss_tot = float(np.sum((x_arr - x_arr.mean()) ** 2))
    r2 = 1.0 - float(np.sum(resid**2)) / ss_tot if ss_tot > 0 else math.nan
    rmse_rel = float(np.sqrt(np.mean(resid_rel**2)))
    has_ci = np.isfinite(low) & np.isfinite(high)
    anomalies = tuple(sorted({float(c) for c, lo, hi, f, m in
                              zip(n_arr, low, high, pred, has_ci, strict=True)
                              if m and not lo <= f <= hi}))  # fmt: skip
    typical = ~np.isin(n_arr, anomalies)
    rmse_typical = float(np.sqrt(np.mean(resid_rel[typical] ** 2))) if typical.any() else rmse_rel
    quality, reason = _judge(distinct, dof, rmse_typical, len(anomalies), int(has_ci.sum()))
    if dof >= 1:
        method = (f"Wald intervals from the fit's covariance, t on {dof} degree"
                  f"{'s' if dof != 1 else ''} of freedom"
                  + (" (from the measured intervals, normal quantile, where the residuals "
                     "scatter less than those say)" if weighted else ""))
    elif weighted:
        method = ("no residual left (3 counts, 3 parameters): intervals from the measured "
                  "intervals alone, the law taken as exact")  # fmt: skip
    else:
        method = "no residual left (3 counts, 3 parameters) and no measured interval: none"
    return UslFit(n_arr, x_arr, low, high, lam, sig, kap, n_star, ns_low, ns_high, resid,
                  resid_rel, r2, rmse_rel, quality, reason, anomalies, method, dof, crit,
                  weighted, cov)  # fmt: skip


def _least_squares(
    n: np.ndarray, x: np.ndarray, sd: np.ndarray | None
) -> tuple[np.ndarray, np.ndarray, int, float]:
    """Robust least squares on log X from a few starting points: (λ, σ, κ), their
    covariance (NaN where nothing bounds it), the residual degrees of freedom and the
    critical value of the intervals.

    Residuals are in units of each count's measured sd (``sd``) or, unweighted, of
    :data:`UNWEIGHTED_SCALE`. The Cauchy loss lets a residual beyond
    :data:`ROBUST_SCALE` of those units pull less the further out it is, so one anomalous
    count does not drag the fit onto its neighbours (which a squared loss does: with 6
    counts and a 25 % dip at one, plain least squares flagged two or three neighbours as
    well, the Cauchy loss the dipped count alone). The covariance is scipy's
    ``curve_fit`` one for a robust loss (Jacobian scaled by the loss, s² = 2·cost / dof).
    Weighted, where the residuals scatter less than the measured intervals say (s² ≤ 1),
    the intervals come from the measured ones (s² = 1, normal quantile): the parameters
    are never surer than the measurements allow.
    """
    from scipy.optimize import least_squares

    y = np.log(x)
    w = 1.0 / sd if sd is not None else np.full(n.shape, 1.0 / UNWEIGHTED_SCALE)
    n0 = float(n.min())
    lam0 = float(np.exp(np.mean(y[n == n0]))) / n0

    def residual(p: np.ndarray) -> np.ndarray:
        return w * (y - np.log(usl(n, *p)))

    def jacobian(p: np.ndarray) -> np.ndarray:
        return -w[:, None] * _dlog_usl(n, p)

    best = None
    for sigma0, kappa0 in ((0.05, 1e-3), (0.0, 0.0), (0.3, 1e-2)):
        start = [lam0 * (1 + sigma0 * (n0 - 1) + kappa0 * n0 * (n0 - 1)), sigma0, kappa0]
        r = least_squares(residual, start, jac=jacobian, bounds=_BOUNDS, loss="cauchy",
                          f_scale=ROBUST_SCALE, x_scale="jac")  # fmt: skip
        if best is None or r.cost < best.cost:
            best = r
    assert best is not None
    p, dof = best.x, n.size - 3
    cov = np.full((3, 3), np.nan)
    s2 = 2 * float(best.cost) / dof if dof >= 1 else math.nan
    if dof >= 1 and (sd is None or s2 > 1.0):
        crit = _t(dof)
    elif sd is not None:
        s2, crit = 1.0, _Z
    else:
        return p, cov, dof, math.nan
    cov = np.linalg.pinv(best.jac.T @ best.jac) * s2
    return p, cov, dof, crit


def _params(p: np.ndarray, cov: np.ndarray, crit: float) -> tuple[Param, Param, Param]:
    sd = np.sqrt(np.clip(np.diag(cov), 0.0, None))
    rel = crit * sd[0] / p[0]
    lam = Param(float(p[0]), float(p[0] * math.exp(-rel)), float(p[0] * math.exp(rel)))
    sig = Param(float(p[1]), max(0.0, float(p[1] - crit * sd[1])),
                min(1.0, float(p[1] + crit * sd[1])))  # fmt: skip
    kap = Param(float(p[2]), max(0.0, float(p[2] - crit * sd[2])), float(p[2] + crit * sd[2]))
    return lam, sig, kap


def _peak(p: np.ndarray, cov: np.ndarray, crit: float, kap: Param,
          sig: Param) -> tuple[float, float, float]:  # fmt: skip
    """N* = sqrt((1−σ)/κ) with its interval: the delta method on log N*; no upper end when
    κ's interval reaches 0; N* = 1 when σ = 1 (throughput never grows)."""
    sigma, kappa = float(p[1]), float(p[2])
    if sigma >= 1.0:
        return 1.0, math.nan, math.nan
    if kappa <= 1e-12:
        bounded = math.isfinite(crit) and kap.high > 0 and sig.high < 1
        return math.inf, math.sqrt((1 - sig.high) / kap.high) if bounded else math.nan, math.inf
    n_star = math.sqrt((1.0 - sigma) / kappa)
    g = np.array([0.0, -0.5 / (1.0 - sigma), -0.5 / kappa])
    var = float(g @ cov @ g)
    if not (math.isfinite(var) and math.isfinite(crit)):
        return n_star, math.nan, math.nan
    half = crit * math.sqrt(max(var, 0.0))
    high = math.inf if kap.low <= 0.0 else n_star * math.exp(half)
    return n_star, n_star * math.exp(-half), high


def _judge(distinct: int, dof: int, rmse_rel: float, n_anomalies: int,
           n_ci: int) -> tuple[str, str]:  # fmt: skip
    """Quality and its reason: "too few points" before anything else, then "poor" where
    the law misses the counts that are not anomalies by more than POOR_RMSE (RMS), or
    where most counts with an interval lie off the fit (``rmse_rel``: over the counts
    that are not anomalies; one anomaly is flagged as such, not held against the law)."""
    if distinct == 3:
        return "too few points", ("3 counts for 3 parameters: the law passes through them "
                                  "(nearly) exactly, so they cannot tell whether it holds")
    if rmse_rel > POOR_RMSE:
        return "poor", (f"the law misses the measurements by {100 * rmse_rel:.0f} % (RMS"
                        f"{' of the counts that are not anomalies' if n_anomalies else ''}), "
                        f"over the {100 * POOR_RMSE:.0f} % it is held to")  # fmt: skip
    if n_ci >= 4 and n_anomalies > n_ci / 2:
        return "poor", (f"{n_anomalies} of {n_ci} counts lie outside their interval of the "
                        "fit: the law's shape does not describe the curve")  # fmt: skip
    others = " other" if n_anomalies else ""
    reason = f"the law follows the{others} measurements within {100 * rmse_rel:.1f} % (RMS)"
    if dof <= 2:
        reason += f", on {dof} residual degree{'s' if dof != 1 else ''} of freedom (a weak test)"
    return "good", reason


def _no_fit(n: np.ndarray, x: np.ndarray, low: np.ndarray, high: np.ndarray,
            reason: str) -> UslFit:  # fmt: skip
    nan = Param(math.nan)
    blank = np.full(x.shape, np.nan)
    return UslFit(n, x, low, high, nan, nan, nan, math.nan, math.nan, math.nan, blank,
                  blank.copy(), math.nan, math.nan, "too few points", reason, (),
                  "no fit", 0, math.nan, False, np.full((3, 3), np.nan))  # fmt: skip


def efficiency(n: np.ndarray, x: np.ndarray) -> np.ndarray:
    """Parallel efficiency E(N) = X(N) / (N · X(N_min) / N_min), 1 at the smallest count."""
    n, x = np.asarray(n, dtype=float), np.asarray(x, dtype=float)
    if n.size == 0:
        return np.array([])
    n_min = float(n.min())
    per_unit = float(np.mean(x[n == n_min])) / n_min
    return x / (n * per_unit)


def _num(v: float, digits: int = 3) -> str:
    if not math.isfinite(v):
        return "∞" if v == math.inf else ""
    if v == 0:
        return "0"
    size = abs(v)
    if size >= 1000:
        return f"{v:,.0f}"
    if size >= 10:
        return f"{v:.0f}"
    return f"{v:.{digits}g}"


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

    @property
    def unit_name(self) -> str:
        """What one unit of N is (``env runners``)."""
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
            return (f"{self.title}: {unit} {_counts(measured)}; too few points for a fit "
                    f"({f.reason}).")
        params = f"USL σ = {f.sigma.text()}, κ = {f.kappa.text(2)}, λ = {f.lambda_.text(3)}"
        star = f"N* = {_star(f)}"
        if f.has_peak:
            peak_n = f.n_star_count or 1
            x, lo, hi = (float(v[0]) for v in f.predict([peak_n]))
            head = (f"throughput peaks at {star} {unit} ({params}); predicted "
                    f"{_ci(x, lo, hi)} env steps/s at {peak_n}{_unmeasured(peak_n, measured)}")
        else:
            head = (f"no peak in sight up to {_num(float(measured.max()))} {unit} ({params}; "
                    f"{star}{': κ is not distinguishable from 0' if f.kappa.low == 0 else ''})")
        ahead = int(2 * measured.max())
        x, lo, hi = (float(v[0]) for v in f.predict([ahead]))
        head += f"; predicted {_ci(x, lo, hi)} env steps/s at {ahead}{_unmeasured(ahead, measured)}"
        p = self.points[self.points["anomaly"]]
        tail = [f"{_num(float(c))} {unit} deviates from the fit by {_pct(r)} (outside its "
                f"measured interval, ±{100 * (hi - lo) / (2 * x):.1f} %)"
                for c, r, x, lo, hi in zip(p["n"], p["residual_pct"], p["throughput"],
                                           p["throughput_ci_low"], p["throughput_ci_high"],
                                           strict=True)]  # fmt: skip
        quality = {"good": f"fit good: {f.reason}", "poor": f"**poor fit**: {f.reason}"}.get(
            f.quality, f"**too few points**: {f.reason}")
        return f"{self.title}: {head}. " + "; ".join([*tail, quality]) + "."


def _missing(v: Any) -> bool:
    return v is None or v is pd.NA or (isinstance(v, float) and math.isnan(v))


def _counts(n: np.ndarray) -> str:
    return ", ".join(_num(float(v)) for v in sorted(set(n.tolist())))


def _unmeasured(n: float, measured: np.ndarray) -> str:
    return "" if n in set(measured.tolist()) else " (not measured)"


def _ci(x: float, lo: float, hi: float) -> str:
    if math.isfinite(lo) and math.isfinite(hi):
        return f"{_num(x)} [{_num(lo)}, {_num(hi)}]"
    return _num(x)


def _star(f: UslFit) -> str:
    """N* with its interval (the upper end may be ∞: no peak the data can bound)."""
    if not math.isfinite(f.n_star_low):
        return _num(f.n_star)
    return f"{_num(f.n_star)} [{_num(f.n_star_low)}, {_num(f.n_star_high)}]"


def _pct(r: float) -> str:
    return f"{100 * r:+.1f} %" if math.isfinite(r) else ""


def _is_axis(column: str) -> bool:
    return (column in PRIMARY_AXES or column in COUNT_AXES or "." in column) and is_identity_key(
        column
    )


def _time_like(objective: Any) -> bool:
    """Whether an objective is a time per fixed unit of work (its relative interval then
    carries over to the throughput); a time to target is not."""
    metric = str(objective).split(" ")[-1] if isinstance(objective, str) else ""
    return (
        "target" not in metric
        and (metric.endswith(("_s", "_ms")) or metric.startswith(("s_per", "ms_per")))
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
            out["low"] = (out["x"] * value / pd.to_numeric(df["objective_ci_high"],
                                                            errors="coerce")).where(time_like)
            out["high"] = (out["x"] * value / pd.to_numeric(df["objective_ci_low"],
                                                             errors="coerce")).where(time_like)
        return out, ("`env_steps_per_s_mean` (mean env steps per second over the kept "
                     "iterations), interval: the objective's relative one")  # fmt: skip
    return out, "`env_steps_per_s_mean` (mean env steps per second over the kept iterations)"


def scaling_curves(
    configurations: pd.DataFrame, constants: Mapping[str, Any] | None = None
) -> list[ScalingCurve]:
    """Every curve of the report's configurations table (one row per configuration,
    :func:`rlperf.report.tables.configurations_table`): for each count axis
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
    df = df[(df["family"] == "training") & (df["status"] == "completed")]
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
        key = [c for c in (workload, "model", "machine") if c in sweep]
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
    e_all = np.full(n.shape, np.nan)
    if fitted.any():
        n_min = float(n[fitted].min())
        e_all = x / (n * float(np.mean(x[fitted][n[fitted] == n_min])) / n_min)
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
        note.append(f"the counts ran under {sub['fingerprint'].nunique()} fingerprints "
                    "(same machine, different software or settings)")
    if fit.fitted and not fit.weighted:
        note.append("unweighted fit: not every count has an interval")
    if fit.fitted and not np.any(np.isfinite(low[fitted])):
        note.append("no count has an interval: anomalies are not judged")
    if fit.quality != "good":
        note.append(f"{fit.quality}: {fit.reason}")
    return ScalingCurve(str(sub[workload].iloc[0]), axis, setting, points, fit, note, source)


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
                   + ", ".join(f"{_num(float(s), 4)} at N={_num(float(c))}"
                               for s, c in zip(v, n, strict=True)))  # fmt: skip
    elif axis == "workers" and _shared_layout(context, sub):
        layout = context.get("gpu_layout", "")
        out.append(f"in the shared GPU layout `{layout}` each env runner's GPU share, "
                   "(visible − driver) / N, shrinks as N grows")  # fmt: skip
    for c in follows:
        if c == share:
            continue
        pairs = ", ".join(f"{v} at N={_num(float(k))}" for v, k in zip(sub[c], n, strict=True))
        out.append(f"`{c}` also changes with N: {pairs}")
    return out


def _shared_layout(context: Mapping[str, Any], sub: pd.DataFrame) -> bool:
    layout = str(context.get("gpu_layout", ""))
    if layout.startswith("shared_"):
        return True
    driver = context.get("gpu_layout.driver_gpus")
    tiny = driver is None or _missing(driver) or float(driver) < 0.01
    return layout in _LEGACY_SHARED and tiny and bool((pd.to_numeric(sub["workers"]) > 0).any())


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
        "N": [_num(float(v)) + ("" if f else " (not fitted)") for v, f in zip(p["n"], p["fitted"],
                                                                             strict=True)],
        c.axis: [_num(float(v)) for v in p["count"]],
        "throughput [env steps/s, 95% CI]": [_ci(x, lo, hi) for x, lo, hi in zip(
            p["throughput"], p["throughput_ci_low"], p["throughput_ci_high"], strict=True)],
        f"efficiency (vs N={_num(float(p.loc[p['fitted'], 'n'].min()))})": [
            f"{v:.2f}" if math.isfinite(v) else "" for v in p["efficiency"]],
        "fit [95% CI]": [_ci(x, lo, hi) for x, lo, hi in zip(
            p["predicted"], p["predicted_low"], p["predicted_high"], strict=True)],
        "residual": [_pct(r) for r in p["residual_pct"]],
        "anomaly": ["yes" if a else "" for a in p["anomaly"]],
    })  # fmt: skip


def _params_table(f: UslFit) -> pd.DataFrame:
    rows = [("λ (env steps/s of one unit)", f.lambda_.text(3)), ("σ (contention)", f.sigma.text()),
            ("κ (coherence)", f.kappa.text(2)),
            ("N* (peak)", _star(f)),
            ("R²", f"{f.r2:.3f}" if math.isfinite(f.r2) else ""),
            ("RMS residual", f"{100 * f.rmse_rel:.1f} %" if math.isfinite(f.rmse_rel) else ""),
            ("quality", f"{f.quality}: {f.reason}")]  # fmt: skip
    return pd.DataFrame(rows, columns=["parameter", "value [95% CI]"])
