"""Per-step latency recording shared by the inference stages (rlperf.results.latency)."""

from __future__ import annotations

import csv
import math
import time

import numpy as np
import pytest

from rlperf.layout import EPISODES_FILE, STEPS_FILE
from rlperf.results.latency import (
    EPISODE_COLUMNS,
    STEP_COLUMNS,
    LatencyRecorder,
    summarize_latency,
    timer_overhead_ns,
)


def test_summarize_latency_excludes_leading_warmup() -> None:
    values = [100.0, 100.0] + list(range(1, 101))  # warm-up outliers first
    s = summarize_latency(values, warmup=2)
    assert s["count"] == 100
    assert s["mean"] == pytest.approx(50.5)
    assert s["p50"] == pytest.approx(50.5)
    assert s["p90"] == pytest.approx(90.1)
    assert s["p99"] == pytest.approx(99.01)
    assert s["max"] == 100.0
    assert s["std"] == pytest.approx(np.std(np.arange(1, 101)))


def test_summarize_latency_mask_and_nan() -> None:
    s = summarize_latency([5.0, 1.0, float("nan"), 3.0], warmup=[True, False, False, False])
    assert s["count"] == 2
    assert s["mean"] == pytest.approx(2.0)
    assert s["max"] == 3.0
    with pytest.raises(ValueError, match="mask"):
        summarize_latency([1.0, 2.0], warmup=[True])


def test_summarize_latency_empty_is_nan() -> None:
    s = summarize_latency([1.0, 2.0], warmup=5)
    assert s["count"] == 0
    assert all(math.isnan(s[k]) for k in ("mean", "std", "p50", "p90", "p99", "max"))


def test_timer_overhead_is_small_and_positive(monkeypatch: pytest.MonkeyPatch) -> None:
    overhead = timer_overhead_ns(201)
    assert 0 < overhead < 100_000  # two clock reads cost some ns, never nothing
    # It is the median of the call pairs' differences, not their mean nor the first one:
    # a clock whose pairs differ by 30, 10, 5000 and 40 ns gives 35.
    reads = iter([0, 30, 100, 110, 200, 5200, 6000, 6040])
    with monkeypatch.context() as patched:  # the real clock back at once
        patched.setattr(time, "perf_counter_ns", lambda: next(reads))
        faked = timer_overhead_ns(4)
    assert faked == 35.0


def _rows(path):
    with path.open() as f:
        return list(csv.DictReader(f))


def test_recorder_flushes_each_episode_and_flags_warmup(tmp_path) -> None:
    rec = LatencyRecorder(tmp_path, warmup_steps=3)
    for i in range(4):
        rec.record_step(0, 0.1 * (i + 1), 0.2 * (i + 1), 1.0, action=i % 2)
    # Nothing of episode 0 on disk before it ends (no I/O between timed steps).
    assert _rows(tmp_path / STEPS_FILE) == []
    rec.end_episode(0, episode_return=-1.0, length=4, wall_s=0.5)
    steps = _rows(tmp_path / STEPS_FILE)
    assert list(steps[0]) == list(STEP_COLUMNS)
    assert [r["excluded"] for r in steps] == ["warmup", "warmup", "warmup", ""]
    assert [int(r["step"]) for r in steps] == [0, 1, 2, 3]
    assert float(steps[3]["action_ms"]) == pytest.approx(0.8)
    episodes = _rows(tmp_path / EPISODES_FILE)
    assert list(episodes[0]) == list(EPISODE_COLUMNS)
    assert episodes[0]["return"] == "-1.0" and episodes[0]["length"] == "4"
    # An unfinished second episode: its steps are written at close, no episode row.
    rec.record_step(1, 0.5, 0.6, 2.0, action=3)
    rec.record_step(1, 0.7, 0.8, 2.0, action=3)
    rec.close()
    assert len(_rows(tmp_path / STEPS_FILE)) == 6
    assert len(_rows(tmp_path / EPISODES_FILE)) == 1
    summary = rec.latency_summary()
    assert summary["forward_ms"]["count"] == 3  # 6 steps - 3 warm-up
    assert summary["forward_ms"]["mean"] == pytest.approx((0.4 + 0.5 + 0.7) / 3)
    assert summary["env_step_ms"]["max"] == 2.0
    ep = rec.episode_summary()
    assert ep == {"count": 1, "return_mean": -1.0, "return_std": 0.0, "length_mean": 4.0}
