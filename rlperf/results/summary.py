"""Aggregates of per-iteration metrics, warm-up excluded and declared."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from rlperf.layout import EXCLUDED_COLUMN, is_excluded


def describe(values: Sequence[float]) -> dict[str, float | int]:
    """count, mean, std (sample), min, p50, max of the finite values."""
    arr = np.asarray([v for v in values if v is not None and math.isfinite(v)], dtype=float)
    if arr.size == 0:
        nan = float("nan")
        return {"n": 0, "mean": nan, "std": nan, "min": nan, "p50": nan, "max": nan}
    return {
        "n": int(arr.size),
        "mean": float(arr.mean()),
        "std": float(arr.std(ddof=1)) if arr.size > 1 else 0.0,
        "min": float(arr.min()),
        "p50": float(np.median(arr)),
        "max": float(arr.max()),
    }


def summarize_rows(
    rows: Sequence[Mapping[str, Any]], columns: Sequence[str], skip: Sequence[str] = ()
) -> dict[str, dict[str, float | int]]:
    """``describe`` every numeric column over the rows not excluded (``excluded`` empty)."""
    kept = [r for r in rows if not is_excluded(r.get(EXCLUDED_COLUMN))]
    out: dict[str, dict[str, float | int]] = {}
    for col in columns:
        if col in skip or col == EXCLUDED_COLUMN:
            continue
        vals = [r.get(col) for r in kept]
        if all(v is None or isinstance(v, int | float) for v in vals):
            out[col] = describe([float(v) for v in vals if v is not None])
    return out


def excluded_counts(rows: Sequence[Mapping[str, Any]]) -> dict[str, int]:
    """``{reason: rows}`` of the excluded rows: ``summary.json["excluded"]`` of every stage."""
    out: dict[str, int] = {}
    for row in rows:
        reason = row.get(EXCLUDED_COLUMN)
        if is_excluded(reason):
            out[str(reason)] = out.get(str(reason), 0) + 1
    return out
