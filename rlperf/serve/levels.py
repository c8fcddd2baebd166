"""Statistics of one load level, and the highest rate that meets the latency bound.

Percentile confidence intervals are distribution-free (order statistics): for
quantile ``q`` of ``n`` latencies the interval runs from the ``l``-th to the
``u``-th smallest value, with ``l``, ``u`` the binomial(n, q) quantiles at
``(1 - confidence) / 2`` and ``(1 + confidence) / 2``. With too few requests the
upper rank passes ``n`` and the upper bound is infinite (a p99 bound cannot be
claimed from 100 requests). A request that did not answer ``ok`` (rejected,
timed out, failed) has an infinite latency in these statistics: it never met
any bound. ``max_rate_under_slo`` follows MLPerf's Server scenario: the highest
offered Poisson rate whose p99 upper bound is within ``serve.slo_ms``, searched
over the open-loop levels that count (generator on schedule, no fault).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from rlperf.layout import EXCLUDED_COLUMN

#: Latency statistics of a level: (name, quantile); ``max`` has no interval.
QUANTILES = (("p50", 0.50), ("p90", 0.90), ("p99", 0.99))


def quantile_ci(values: np.ndarray, q: float, confidence: float) -> tuple[float, float, float]:
    """(estimate, lower, upper) of quantile ``q`` of ``values`` (inf allowed): order statistics."""
    from scipy.stats import binom

    x = np.sort(np.asarray(values, dtype=float))
    n = x.size
    if n == 0:
        return math.nan, math.nan, math.nan
    est = float(np.quantile(x, q, method="inverted_cdf"))
    alpha = 1.0 - confidence
    lo_rank = int(binom.ppf(alpha / 2, n, q))  # 1-based rank of the lower bound
    hi_rank = int(binom.ppf(1 - alpha / 2, n, q)) + 1
    lower = float(x[lo_rank - 1]) if lo_rank >= 1 else -math.inf
    upper = float(x[hi_rank - 1]) if hi_rank <= n else math.inf
    return est, lower, upper


def latency_stats(latency_ms: np.ndarray, ok: np.ndarray, confidence: float) -> dict[str, float]:
    """p50/p90/p99 with ``_lo``/``_hi`` bounds and max; non-ok requests count as infinite."""
    values = np.where(ok, latency_ms, np.inf)
    out: dict[str, float] = {}
    for name, q in QUANTILES:
        est, lo, hi = quantile_ci(values, q, confidence)
        out.update({f"{name}_ms": est, f"{name}_lo_ms": lo, f"{name}_hi_ms": hi})
    out["max_ms"] = float(values.max()) if values.size else math.nan
    return out


def level_row(
    requests: Sequence[Mapping[str, Any]],
    level: Mapping[str, Any],
    *,
    confidence: float,
    max_send_lag_ms: float,
    replicas: int,
) -> dict[str, Any]:
    """One ``levels.csv`` row from the level's measured (not warm-up) request rows."""
    status = np.array([r["status"] for r in requests], dtype=object)
    ok = status == "ok"
    latency = np.array([r["latency_ms"] for r in requests], dtype=float)
    lag = np.array([r["send_lag_ms"] for r in requests], dtype=float)
    scheduled = np.array([r["scheduled_s"] for r in requests], dtype=float)
    done = np.array([r["done_s"] for r in requests], dtype=float)
    span_s = float(done.max() - scheduled.min()) if len(requests) else math.nan
    lag_p99 = float(np.percentile(lag, 99)) if lag.size else math.nan
    on_schedule = bool(lag_p99 <= max_send_lag_ms) if level["loop"] == "open" else True
    # Failed requests (a killed replica, a rejection) have no model time: None in memory, "" in CSV.
    model = [
        float(r["model_ms"]) / max(int(r["batch"] or 1), 1)
        for r in requests
        if r["model_ms"] not in ("", None)
    ]
    batches = [int(r["batch"]) for r in requests if r["batch"] not in ("", None)]
    return {
        **level,
        "requests": len(requests),
        "ok": int(ok.sum()),
        "rejections": int((status == "rejected").sum()),
        "timeouts": int((status == "timeout").sum()),
        "errors": int(np.isin(status, ["error", "bad_request"]).sum()),
        "achieved_rps": float(ok.sum() / span_s) if span_s > 0 else math.nan,
        **latency_stats(latency, ok, confidence),
        "send_lag_p50_ms": float(np.percentile(lag, 50)) if lag.size else math.nan,
        "send_lag_p99_ms": lag_p99,
        "on_schedule": on_schedule,
        "batch_mean": float(np.mean(batches)) if batches else math.nan,
        "model_ms_mean": float(np.mean(model)) if model else math.nan,
        # Share of the replicas' time spent in the model during the level.
        "model_busy_share": (
            float(np.sum(model) / 1e3 / (span_s * max(replicas, 1)))
            if model and span_s > 0
            else math.nan
        ),
    }


def counts_for_slo(row: Mapping[str, Any]) -> bool:
    """An open-loop level that may decide the max rate: on schedule, not excluded."""
    return row["loop"] == "open" and bool(row["on_schedule"]) and not row.get(EXCLUDED_COLUMN)


def max_rate_under_slo(rows: Sequence[Mapping[str, Any]], slo_ms: float) -> dict[str, Any]:
    """The highest offered rate whose p99 upper bound is within ``slo_ms`` (MLPerf Server).

    ``bounded`` says whether a higher counted level failed (else the true maximum
    may be higher than the levels tried); levels that do not count are listed.
    """
    counted = sorted((r for r in rows if counts_for_slo(r)), key=lambda r: r["offered_rps"])
    passing = [r for r in counted if r["p99_hi_ms"] <= slo_ms]
    best = max((r["offered_rps"] for r in passing), default=None)
    failing_above = [r for r in counted if best is None or r["offered_rps"] > best]
    return {
        "slo_ms": float(slo_ms),
        "max_rate_rps": best,
        "bounded": bool(failing_above) if best is not None else bool(counted),
        "levels_searched": [r["offered_rps"] for r in counted],
        "levels_not_counted": [
            {"offered_rps": r["offered_rps"], "why": _why_not_counted(r)}
            for r in rows
            if r["loop"] == "open" and not counts_for_slo(r)
        ],
    }


def _why_not_counted(row: Mapping[str, Any]) -> str:
    if row.get(EXCLUDED_COLUMN):
        return f"excluded ({row[EXCLUDED_COLUMN]})"
    return f"generator off schedule (send lag p99 {row['send_lag_p99_ms']:.1f} ms)"
