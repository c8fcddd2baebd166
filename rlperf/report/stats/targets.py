"""Time-to-target across cells: success rate and censored medians per configuration.

A training cell has a target when its ``summary.json`` ``stop.episode_return`` is
set (``train.stop``, :mod:`rlperf.training.target`). Repeats of one configuration
(``runs.csv`` ``configuration``) are pooled: the success rate is reached / runs,
and the medians of ``time_to_target_s`` and ``env_steps_to_target`` count a run
that missed as censored at its budget (its training time and env steps when it
stopped), never as absent: a median that lands on a censored run is a lower
bound (``*_censored`` true). Configurations are ranked by median time-to-target,
lower bounds last; the runs that missed are listed, never dropped.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from rlperf.report.read.cells import Cell
from rlperf.results.columns import ENV_STEPS, TIME_S, TRAIN_TIME_S
from rlperf.vocabulary import Family

#: targets.csv columns, in order.
TARGET_COLUMNS = (
    "rank", "configuration", "label", "target", "judge", "runs", "reached", "success_rate",
    "median_time_to_target_s", "time_censored", "median_env_steps_to_target", "steps_censored",
    "missed",
)  # fmt: skip


def _run_record(c: Cell) -> dict[str, Any] | None:
    """A cell's target, outcome and (censored) time and steps; None without a target."""
    s = c.summary or {}
    stop = s.get("stop") or {}
    if c.family != Family.training or stop.get("episode_return") is None or not c.completed:
        return None
    df = c.iterations
    it_time = df[TRAIN_TIME_S] if df is not None and TRAIN_TIME_S in df else pd.Series()
    budget_s = float(it_time.max()) if it_time.notna().any() else float("nan")
    steps = float(df[ENV_STEPS].sum()) if df is not None and ENV_STEPS in df else np.nan
    reached = bool(s.get("reached"))
    return {
        "cell": c.id,
        "target": float(stop["episode_return"]),
        "judge": stop.get("judge"),
        "reached": reached,
        TIME_S: float(s["time_to_target_s"]) if reached else budget_s,
        ENV_STEPS: float(s["env_steps_to_target"]) if reached else steps,
    }


def censored_median(values: Sequence[float], reached: Sequence[bool]) -> tuple[float, bool]:
    """Median with missed runs at their budget; True when it is only a lower bound (a
    censored run is among the middle values)."""
    n = len(values)
    if n == 0:
        return float("nan"), False
    order = np.argsort(np.asarray(values, dtype=float), kind="stable")
    middle = {int(order[(n - 1) // 2]), int(order[n // 2])}
    return float(np.median(values)), any(not reached[i] for i in middle)


def targets_table(cells: Sequence[Cell], runs: pd.DataFrame) -> pd.DataFrame:
    """One row per configuration with a target (``TARGET_COLUMNS``), ranked; empty if none."""
    records = [r for r in (_run_record(c) for c in cells) if r is not None]
    if not records:
        return pd.DataFrame(columns=list(TARGET_COLUMNS))
    df = pd.DataFrame(records)
    ids = runs.set_index("cell") if "cell" in runs else pd.DataFrame()
    df["configuration"] = [_lookup(ids, c, "configuration", c) for c in df["cell"]]
    df["label"] = [_lookup(ids, conf, "label", conf) for conf in df["configuration"]]
    rows = []
    for (conf, target), g in df.groupby(["configuration", "target"], sort=False):
        reached = g["reached"].tolist()
        t, t_cens = censored_median(g[TIME_S].tolist(), reached)
        st, st_cens = censored_median(g[ENV_STEPS].tolist(), reached)
        rows.append({
            "configuration": conf, "label": g["label"].iloc[0], "target": target,
            "judge": g["judge"].iloc[0], "runs": len(g), "reached": int(sum(reached)),
            "success_rate": sum(reached) / len(g), "median_time_to_target_s": t,
            "time_censored": t_cens, "median_env_steps_to_target": st, "steps_censored": st_cens,
            "missed": " ".join(g.loc[~g["reached"], "cell"]),
        })  # fmt: skip
    out = pd.DataFrame(rows).sort_values(
        ["time_censored", "median_time_to_target_s", "success_rate"], ascending=[True, True, False]
    )
    out.insert(0, "rank", np.arange(1, len(out) + 1))
    return out[list(TARGET_COLUMNS)].reset_index(drop=True)


def _lookup(ids: pd.DataFrame, cell: str, column: str, default: Any) -> Any:
    if column in ids and cell in ids.index:
        value = ids.loc[cell, column]
        return value if isinstance(value, str) and value else default
    return default
