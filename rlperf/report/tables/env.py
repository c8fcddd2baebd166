"""``stage=env`` cells in the report: an env's raw throughput per engine, envs and threads.

An env cell's windows are ``metrics.csv`` rows (:data:`rlperf.results.columns.ENV_WINDOW_COLUMNS`)
with the training names where the meaning is the same, so the generic machinery ranks
its configurations on time per 1 000 env steps (bootstrapped over the windows), gives
their env steps per second with intervals, and fits the Universal Scalability Law over
``env_runner.num_envs`` (:mod:`rlperf.report.compare.scaling`). This module adds what is
the env stage's own: the summary columns of a run (:func:`env_summary`); its figure
``env_throughput`` is :mod:`rlperf.report.figures.env`'s. Its ranked table is
:mod:`rlperf.report.sections.families`'s env table; its windows are the ``env_windows``
table (:func:`rlperf.report.tables.tidy.env_windows_table`).
"""

from __future__ import annotations

from typing import Any

from rlperf.report.read.cells import Cell, included
from rlperf.results.columns import ENV_STEPS, ENV_STEPS_PER_S, FRAMES_PER_S, RSS_MB


def env_summary(c: Cell) -> dict[str, Any]:
    """The runs-table columns of an env cell: its windows, engine, rates, latency, CPU, RSS."""
    s = c.summary
    engine = s.get("engine") or {}
    row: dict[str, Any] = {
        "engine": engine.get("name"),
        "engine_threads": engine.get("threads"),
        "num_envs": engine.get("num_envs"),
        "actions": s.get("actions"),
    }
    df = c.iterations
    if df is not None and len(df):
        kept = included(df)
        row.update(
            iterations=int(len(df)),
            warmup_iterations=int(len(df) - len(kept)),
            total_env_steps=float(kept[ENV_STEPS].sum()),
        )
    step = (s.get("latency") or {}).get("step_ms") or {}
    cpu = s.get("cpu") or {}
    row.update(
        env_steps_per_s=s.get(ENV_STEPS_PER_S),
        frames_per_s=s.get(FRAMES_PER_S),
        wall_steps_per_s=s.get("wall_steps_per_s"),
        step_ms_p50=step.get("p50"),
        step_ms_p99=step.get("p99"),
        process_cores=cpu.get("process_cores"),
        per_core_busy_pct=" ".join(f"{v:g}" for v in cpu.get("per_core_busy_pct") or []),
        rss_mb_max=(s.get(RSS_MB) or {}).get("max"),
        episodes=s.get("episodes_ended"),
    )
    return row
