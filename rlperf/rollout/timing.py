"""Nanosecond step timers and their own measured cost.

Every per-step time in ``steps.csv`` is the difference of two
``time.perf_counter_ns()`` readings taken around the timed call. The readings
themselves cost time: :func:`measure_timer` measures that floor on this machine
(the median of back-to-back reading pairs, the same measure the edge stage
reports) so a reader can judge how much of a sub-millisecond value is the clock.
Recorded values are *not* corrected for it.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

#: The clock of every per-step timer (monotonic, nanosecond integer).
clock_ns = time.perf_counter_ns

NS_PER_MS = 1_000_000.0


def ns_to_ms(ns: int | float) -> float:
    """Nanoseconds to milliseconds."""
    return float(ns) / NS_PER_MS


@dataclass(frozen=True)
class TimerInfo:
    """What the step timers cost and resolve on this machine."""

    clock: str  # the Python function every step timer calls
    implementation: str  # what the OS provides behind it
    resolution_ns: float  # as reported by time.get_clock_info
    overhead_ns: float  # median cost of one back-to-back reading pair
    overhead_p99_ns: float
    samples: int

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def measure_timer(samples: int = 20_001) -> TimerInfo:
    """Measure the cost of a ``perf_counter_ns()`` pair (what one timed region adds).

    The median is :func:`rlperf.results.latency.timer_overhead_ns`'s measure over
    more samples; the p99 shows the occasional preempted reading.
    """
    clock = clock_ns
    deltas = np.empty(samples, dtype=np.int64)
    for i in range(samples):
        t0 = clock()
        deltas[i] = clock() - t0
    info = time.get_clock_info("perf_counter")
    return TimerInfo(
        clock="time.perf_counter_ns",
        implementation=info.implementation,
        resolution_ns=float(info.resolution) * 1e9,
        overhead_ns=float(np.median(deltas)),
        overhead_p99_ns=float(np.percentile(deltas, 99)),
        samples=int(samples),
    )
