"""Per-step inference timing: ``steps.csv`` / ``episodes.csv`` and their latency summaries.

Shared by the inference stages (rollout, edge); see ``docs/results.md``. A stage
times each step itself (``time.perf_counter_ns``) and hands the numbers to a
:class:`LatencyRecorder`, which keeps them for the summary and writes the rows
of an episode to disk when the episode ends (one write + flush per episode, so
the file I/O never sits between two timed steps).
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from rlperf.layout import EPISODES_FILE, EXCLUDED_COLUMN, STEPS_FILE
from rlperf.results.columns import (
    ACTION_MS,
    ENV_STEP_MS,
    FORWARD_MS,
    LATENCY_COLUMNS,
    TIME_S,
    WALL_S,
)
from rlperf.results.csvlog import CsvLog
from rlperf.stats.stopping import WithinRun
from rlperf.vocabulary import Exclusion

STEP_COLUMNS = ("episode", "step", EXCLUDED_COLUMN, *LATENCY_COLUMNS, "action")
EPISODE_COLUMNS = ("episode", "return", "length", WALL_S)
#: The statistics of each latency column in an episode's window (:func:`window_row`).
WINDOW_STATS = ("mean", "p50", "p90", "p99")


def summarize_latency(
    values: Sequence[float] | np.ndarray, warmup: int | Sequence[bool] | np.ndarray = 0
) -> dict[str, float | int]:
    """``count, mean, std, p50, p90, p99, max`` of ``values`` without the warm-up.

    Args:
        values: one latency per step, in step order.
        warmup: the number of leading values to exclude, or a boolean mask (true =
            warm-up, excluded) of the same length as ``values``.

    NaN values are ignored. ``std`` is the population standard deviation
    (``ddof=0``). With nothing left, ``count`` is 0 and every statistic NaN.
    """
    arr = np.asarray(values, dtype=float)
    if isinstance(warmup, int | np.integer):
        keep = np.arange(arr.size) >= int(warmup)
    else:
        mask = np.asarray(warmup, dtype=bool)
        if mask.shape != arr.shape:
            raise ValueError(f"warm-up mask has shape {mask.shape}, values have {arr.shape}")
        keep = ~mask
    arr = arr[keep & np.isfinite(arr)]
    if arr.size == 0:
        nan = float("nan")
        return {"count": 0, "mean": nan, "std": nan, "p50": nan, "p90": nan, "p99": nan, "max": nan}
    p50, p90, p99 = np.percentile(arr, [50, 90, 99])
    return {
        "count": int(arr.size),
        "mean": float(arr.mean()),
        "std": float(arr.std()),
        "p50": float(p50),
        "p90": float(p90),
        "p99": float(p99),
        "max": float(arr.max()),
    }


def window_row(
    latency: Mapping[str, Sequence[float]],
    warm: Sequence[bool],
    episode: Mapping[str, Any],
    steps: int,
    time_s: float,
) -> dict[str, float]:
    """One episode as a row of numbers (what tracking sends per episode of a rollout or an
    edge benchmark: docs/tracking.md): its return and length, ``steps`` (every step of the
    run so far), ``time_s`` (the episodes' wall seconds so far) and, for each latency column,
    :data:`WINDOW_STATS` over the episode's steps that are not warm-up (none when all are)."""
    row = {
        "episode": float(episode["episode"]),
        "return": float(episode["return"]),
        "length": float(episode["length"]),
        "steps": float(steps),
        TIME_S: float(time_s),
    }
    for column, values in latency.items():
        stats = summarize_latency(values, np.asarray(warm, dtype=bool))
        if stats["count"]:
            row.update({f"{column}_{s}": float(stats[s]) for s in WINDOW_STATS})
    return row


def episode_windows(
    steps: Sequence[Mapping[str, Any]], episodes: Sequence[Mapping[str, Any]]
) -> list[dict[str, float]]:
    """:func:`window_row` of every finished episode, from ``steps.csv`` and ``episodes.csv``
    rows (as :class:`LatencyRecorder` wrote them)."""
    by_episode: dict[int, list[Mapping[str, Any]]] = {}
    for r in steps:
        by_episode.setdefault(int(r["episode"]), []).append(r)
    out, done, wall = [], 0, 0.0
    for ep in episodes:
        rows = by_episode.get(int(ep["episode"]), [])
        done += len(rows)
        wall += float(ep[WALL_S])
        latency = {c: [_number(r[c]) for r in rows] for c in LATENCY_COLUMNS}
        warm = [str(r[EXCLUDED_COLUMN] or "") == Exclusion.warmup for r in rows]
        out.append(window_row(latency, warm, ep, done, wall))
    return out


def _number(value: Any) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return float("nan")


def timer_overhead_ns(samples: int = 2001) -> float:
    """Median cost of one ``time.perf_counter_ns()`` call pair, in ns (a timing floor)."""
    clock = time.perf_counter_ns
    deltas = np.empty(samples, dtype=np.int64)
    for i in range(samples):
        t0 = clock()
        deltas[i] = clock() - t0
    return float(np.median(deltas))


def action_value(action: Any) -> int | float | str:
    """An env action as one CSV cell: an int, a float, or space-separated floats."""
    value = np.asarray(action)
    if value.ndim == 0:
        return int(value) if np.issubdtype(value.dtype, np.integer) else float(value)
    if value.size == 1:
        return float(value.reshape(-1)[0])
    return " ".join(f"{v:.6g}" for v in value.ravel())


class LatencyRecorder:
    """Collects per-step timings and writes ``steps.csv`` / ``episodes.csv`` in ``out_dir``.

    Call :meth:`record_step` after every step (cheap: appends to lists) and
    :meth:`end_episode` when an episode finishes (writes its rows, flushed).
    Steps of an episode still running when the recorder is closed are written
    too; only finished episodes go to ``episodes.csv``.

    Args:
        out_dir: the job folder.
        warmup_steps: the first ``warmup_steps`` steps of the run are excluded
            (``excluded`` = ``warmup``) from :meth:`latency_summary`.
    """

    def __init__(self, out_dir: Path, warmup_steps: int) -> None:
        out_dir = Path(out_dir)
        out_dir.mkdir(parents=True, exist_ok=True)
        self.warmup_steps = int(warmup_steps)
        self._steps = CsvLog(out_dir / STEPS_FILE, STEP_COLUMNS)
        self._episodes = CsvLog(out_dir / EPISODES_FILE, EPISODE_COLUMNS)
        self._values: dict[str, list[float]] = {c: [] for c in LATENCY_COLUMNS}
        self._actions: list[int | float | str] = []
        self._episode_of_step: list[int] = []
        self._written = 0
        self._episode_start = 0  # index of the first step of the episode running now
        self._episodes_wall_s = 0.0
        self.episode_rows: list[dict[str, Any]] = []

    @property
    def steps(self) -> int:
        """Steps recorded so far."""
        return len(self._actions)

    def record_step(
        self, episode: int, forward_ms: float, action_ms: float, env_step_ms: float, action: Any
    ) -> None:
        """Keep one step's timings (written to disk at the end of its episode).

        ``action``: an int (Discrete), or an array (Box; written as its one value, or its
        values separated by spaces).
        """
        self._values[FORWARD_MS].append(forward_ms)
        self._values[ACTION_MS].append(action_ms)
        self._values[ENV_STEP_MS].append(env_step_ms)
        self._actions.append(action_value(action))
        self._episode_of_step.append(int(episode))

    def _write_pending(self) -> None:
        for i in range(self._written, len(self._actions)):
            self._steps.write(
                {
                    "episode": self._episode_of_step[i],
                    "step": i,
                    EXCLUDED_COLUMN: Exclusion.warmup if i < self.warmup_steps else "",
                    FORWARD_MS: self._values[FORWARD_MS][i],
                    ACTION_MS: self._values[ACTION_MS][i],
                    ENV_STEP_MS: self._values[ENV_STEP_MS][i],
                    "action": self._actions[i],
                }
            )
        self._written = len(self._actions)

    def end_episode(
        self, episode: int, episode_return: float, length: int, wall_s: float
    ) -> dict[str, float]:
        """Write the episode's step rows and its ``episodes.csv`` row, both flushed; returns
        the episode's :func:`window_row` (its latency statistics, for tracking)."""
        self._write_pending()
        row = {"episode": int(episode), "return": float(episode_return), "length": int(length)}
        row[WALL_S] = float(wall_s)
        self._episodes.write(row)
        self.episode_rows.append(row)
        start, end = self._episode_start, self.steps
        self._episode_start = end
        self._episodes_wall_s += float(wall_s)
        latency = {c: v[start:end] for c, v in self._values.items()}
        warm = [i < self.warmup_steps for i in range(start, end)]
        return window_row(latency, warm, row, end, self._episodes_wall_s)

    def latency_summary(self) -> dict[str, dict[str, float | int]]:
        """:func:`summarize_latency` of each latency column over the non-warm-up steps."""
        return {c: summarize_latency(v, self.warmup_steps) for c, v in self._values.items()}

    def excluded(self) -> dict[str, int]:
        """``summary.json["excluded"]``: excluded steps per reason."""
        warm = min(self.warmup_steps, self.steps)
        return {Exclusion.warmup: warm} if warm else {}

    def episode_summary(self) -> dict[str, float | int]:
        """``count``, ``return_mean``, ``return_std``, ``length_mean`` of finished episodes."""
        returns = [r["return"] for r in self.episode_rows]
        lengths = [r["length"] for r in self.episode_rows]
        nan = float("nan")
        return {
            "count": len(returns),
            "return_mean": float(np.mean(returns)) if returns else nan,
            "return_std": float(np.std(returns)) if returns else nan,
            "length_mean": float(np.mean(lengths)) if lengths else nan,
        }

    def values(self, column: str) -> list[float]:
        """All recorded values of one latency column (warm-up included), in step order."""
        return list(self._values[column])

    def close(self) -> None:
        """Write the steps of an unfinished episode and close both files."""
        self._write_pending()
        self._steps.close()
        self._episodes.close()

    def __enter__(self) -> LatencyRecorder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


#: Timed steps per window of ``rollout.precision``: the median latency of each window is
#: one value of its stopping rule.
LATENCY_WINDOW = 100


class LatencyWindows:
    """``rollout.precision``: after every :data:`LATENCY_WINDOW` timed steps, the window's
    median action latency is one value of a :class:`~rlperf.stats.stopping.WithinRun`
    rule (batch means of the window medians: latency steps are autocorrelated, so raw steps
    are never taken as independent). Looks are planned on the windows ``steps`` allows."""

    def __init__(
        self, recorder: LatencyRecorder, warmup: int, precision: float, steps: int
    ) -> None:
        self.recorder, self.warmup = recorder, warmup
        self.rule = WithinRun(precision, (steps - warmup) // LATENCY_WINDOW)

    def after(self, step: int) -> bool:
        """Whether the rollout may stop after ``step`` (a window ended there, precisely)."""
        timed = step - self.warmup
        if timed <= 0 or timed % LATENCY_WINDOW:
            return False
        window = self.recorder.values(ACTION_MS)[-LATENCY_WINDOW:]
        return self.rule.add(float(np.median(window)), step)

    def summary(self, objective: str, at: str) -> dict[str, object]:
        """:meth:`WithinRun.summary` and the window's steps."""
        return {**self.rule.summary(objective, at), "window_steps": LATENCY_WINDOW}
