"""The timed loop of ``stage=env``: an engine's envs stepped window by window.

Each window is a number of the engine's ``step`` calls (every call steps all
``num_envs`` envs); per call the time inside ``step`` alone is kept (``step_ms``), and
per window the time choosing actions, the wall time, the CPU seconds and resident
memory of this process and its children (gymnasium's async workers), and the machine's
CPU and RAM use. :class:`ProcessTree` and :class:`CoreTimes` read them from psutil.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import psutil

from rlperf.layout import EXCLUDED_COLUMN
from rlperf.results.columns import (
    ACTION_S,
    CALLS,
    CPU_CORES,
    CPU_UTIL_PCT,
    ENV_STEPS,
    ENV_STEPS_PER_S,
    ITER_S,
    ITERATION,
    RAM_UTIL_PCT,
    RESETS,
    RSS_MB,
    STEP_MS_P50,
    STEP_MS_P99,
    TIME_S,
    WALL_S,
)
from rlperf.vocabulary import Exclusion


class ProcessTree:
    """CPU seconds and resident memory of this process and every process it started."""

    def __init__(self) -> None:
        self.root = psutil.Process()

    def _members(self) -> list[psutil.Process]:
        try:
            return [self.root, *self.root.children(recursive=True)]
        except psutil.Error:
            return [self.root]

    def cpu_s(self) -> float:
        total = 0.0
        for p in self._members():
            try:
                t = p.cpu_times()
            except psutil.Error:
                continue  # a worker that ended: its time is gone with it
            total += t.user + t.system
        return total

    def rss_mb(self) -> float:
        total = 0
        for p in self._members():
            try:
                total += p.memory_info().rss
            except psutil.Error:
                continue
        return total / 2**20


class CoreTimes:
    """Each CPU's busy share between :meth:`start` and :meth:`busy_pct` (psutil's per-CPU
    times: busy = total - idle - iowait)."""

    def __init__(self) -> None:
        self.before = psutil.cpu_times(percpu=True)

    def busy_pct(self) -> list[float]:
        out = []
        for a, b in zip(self.before, psutil.cpu_times(percpu=True), strict=False):
            total = sum(b) - sum(a)
            idle = (b.idle - a.idle) + (getattr(b, "iowait", 0.0) - getattr(a, "iowait", 0.0))
            out.append(round(100.0 * (total - idle) / total, 1) if total > 0 else math.nan)
        return out


@dataclass(frozen=True)
class Window:
    """One window to step: its number (1, 2, ...), its step calls, whether it is warm-up."""

    number: int
    calls: int
    warmup: bool


def windows(warmup_steps: int, steps: int, count: int, num_envs: int) -> list[Window]:
    """The warm-up window (none for 0 warm-up steps) and ``count`` timed windows that share
    ``ceil(steps / num_envs)`` step calls as evenly as they can."""
    out = []
    warm_calls = math.ceil(warmup_steps / num_envs)
    if warm_calls:
        out.append(Window(1, warm_calls, True))
    calls = max(math.ceil(steps / num_envs), count)
    base, extra = divmod(calls, count)
    for i in range(count):
        out.append(Window(len(out) + 1, base + (1 if i < extra else 0), False))
    return out


def step_windows(
    env: Any,
    act: Callable[[Any], Any],
    plan: list[Window],
    started: float,
    seed: int,
) -> Iterator[tuple[dict[str, Any], np.ndarray]]:
    """Step ``env`` through ``plan``; after each window yield its ``metrics.csv`` row
    (:data:`rlperf.results.columns.ENV_WINDOW_COLUMNS` but ``frames_per_s``) and the times of
    its step calls (ms). ``act(obs)`` gives the actions of all envs; ``started``: the job's
    ``time.monotonic()`` start, for ``time_s``."""
    clock = time.perf_counter_ns
    tree = ProcessTree()
    num_envs = int(env.num_envs)
    obs, _ = env.reset(seed=seed)
    psutil.cpu_percent()  # the next call reports the window since this one
    for w in plan:
        step_ms = np.empty(w.calls)
        act_ns = resets = 0
        cpu0, wall0 = tree.cpu_s(), clock()
        for i in range(w.calls):
            a0 = clock()
            actions = act(obs)
            t0 = clock()
            obs, _, terminated, truncated, _ = env.step(actions)
            t1 = clock()
            step_ms[i] = (t1 - t0) / 1e6
            act_ns += t0 - a0
            resets += int(np.count_nonzero(np.logical_or(terminated, truncated)))
        wall_s = (clock() - wall0) / 1e9
        env_s = float(step_ms.sum()) / 1e3
        p50, p99 = np.percentile(step_ms, [50, 99])
        row = {
            ITERATION: w.number,
            TIME_S: time.monotonic() - started,
            EXCLUDED_COLUMN: Exclusion.warmup if w.warmup else "",
            ITER_S: env_s,
            ENV_STEPS: w.calls * num_envs,
            ENV_STEPS_PER_S: w.calls * num_envs / env_s if env_s > 0 else math.nan,
            CALLS: w.calls,
            RESETS: resets,
            STEP_MS_P50: float(p50),
            STEP_MS_P99: float(p99),
            ACTION_S: act_ns / 1e9,
            WALL_S: wall_s,
            CPU_CORES: (tree.cpu_s() - cpu0) / wall_s if wall_s > 0 else math.nan,
            RSS_MB: tree.rss_mb(),
            CPU_UTIL_PCT: psutil.cpu_percent(),
            RAM_UTIL_PCT: psutil.virtual_memory().percent,
        }
        yield row, step_ms
