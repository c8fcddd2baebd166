"""The Universal Scalability Law (Gunther) and its fit (:func:`fit_usl`,
:class:`UslFit`); the curves, section and figure that use it are in
:mod:`rlperf.report.compare.scaling`.

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

scipy is imported inside the fitting function (half a second, paid only when a curve is
fitted).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from rlperf.stats.intervals import CONFIDENCE

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


@dataclass(frozen=True)
class Param:
    """A fitted parameter with its interval (NaN where none can be given)."""

    value: float
    low: float = math.nan
    high: float = math.nan

    def text(self, digits: int = 2) -> str:
        v = number_text(self.value, digits)
        if not (math.isfinite(self.low) and math.isfinite(self.high)):
            return v
        return f"{v} [{number_text(self.low, digits)}, {number_text(self.high, digits)}]"


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
        method = (
            f"Wald intervals from the fit's covariance, t on {dof} degree"
            f"{'s' if dof != 1 else ''} of freedom"
            + (
                " (from the measured intervals, normal quantile, where the residuals "
                "scatter less than those say)"
                if weighted
                else ""
            )
        )
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
    # exp overflows past ~709: an upper end that far out is no end at all (sigma a hair
    # below 1 makes the delta method's variance enormous).
    high = math.inf if kap.low <= 0.0 or half > 700 else n_star * math.exp(half)
    return n_star, n_star * math.exp(-min(half, 700)), high


def _judge(distinct: int, dof: int, rmse_rel: float, n_anomalies: int,
           n_ci: int) -> tuple[str, str]:  # fmt: skip
    """Quality and its reason: "too few points" before anything else, then "poor" where
    the law misses the counts that are not anomalies by more than POOR_RMSE (RMS), or
    where most counts with an interval lie off the fit (``rmse_rel``: over the counts
    that are not anomalies; one anomaly is flagged as such, not held against the law)."""
    if distinct == 3:
        return "too few points", (
            "3 counts for 3 parameters: the law passes through them "
            "(nearly) exactly, so they cannot tell whether it holds"
        )
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


def efficiency(n: np.ndarray, x: np.ndarray, base: np.ndarray | None = None) -> np.ndarray:
    """Parallel efficiency E(N) = X(N) / (N · X(N_min) / N_min), 1 at the smallest count.

    ``base`` (a mask): the points N_min is taken from (e.g. the fitted ones, when a
    ``workers=0`` point is shown but not fitted); every point gets its efficiency.
    """
    n, x = np.asarray(n, dtype=float), np.asarray(x, dtype=float)
    mask = np.ones(n.shape, dtype=bool) if base is None else np.asarray(base, dtype=bool)
    if not mask.any():
        return np.full(n.shape, np.nan)
    n_min = float(n[mask].min())
    per_unit = float(np.mean(x[mask][n[mask] == n_min])) / n_min
    return x / (n * per_unit)


def number_text(v: float, digits: int = 3) -> str:
    """A fitted number as the report prints it (``∞`` for an unbounded interval end)."""
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
