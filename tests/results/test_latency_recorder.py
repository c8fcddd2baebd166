"""What the latency recorder (rlperf.results.latency) writes and summarises, value by
value: actions as CSV cells, each step's episode, the warm-up count, the episode summary
(found by mutation testing, docs/development.md#mutation-testing)."""

from __future__ import annotations

import csv
import math
import warnings
from pathlib import Path

import numpy as np

from rlperf.layout import EPISODES_FILE, STEPS_FILE
from rlperf.results.latency import LatencyRecorder, action_value


def _rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as f:
        return list(csv.DictReader(f))


def test_action_values_as_csv_cells() -> None:
    for action, expected in [
        (3, 3),
        (np.int64(2), 2),
        (np.array(1, dtype=np.int32), 1),
        (np.float32(0.5), 0.5),
        (np.array([0.25]), 0.25),
        (np.array([[-1.5]]), -1.5),
    ]:
        value = action_value(action)
        assert value == expected and type(value) is type(expected), action
    assert action_value(np.array([1 / 3, 2.0, -1e-7])) == "0.333333 2 -1e-07"
    assert action_value(np.array([[0.5, 1.0]])) == "0.5 1"


def test_steps_and_episodes_on_disk(tmp_path: Path) -> None:
    out = tmp_path / "new" / "job"  # parents are created
    with LatencyRecorder(out, warmup_steps=2) as rec:
        rec.record_step(0, 1.0, 1.5, 0.1, action=np.array([0.5, -0.5]))
        rec.record_step(0, 2.0, 2.5, 0.2, action=1)
        rec.end_episode(0, episode_return=3.5, length=2, wall_s=0.25)
        rec.record_step(1, 3.0, 3.5, 0.3, action=np.int64(0))
        assert rec.steps == 3
        assert rec.values("action_ms") == [1.5, 2.5, 3.5]
        assert rec.excluded() == {"warmup": 2}
    steps = _rows(out / STEPS_FILE)
    assert [r["episode"] for r in steps] == ["0", "0", "1"]
    assert [r["action"] for r in steps] == ["0.5 -0.5", "1", "0"]
    assert [r["env_step_ms"] for r in steps] == ["0.1", "0.2", "0.3"]
    assert _rows(out / EPISODES_FILE) == [
        {"episode": "0", "return": "3.5", "length": "2", "wall_s": "0.25"}
    ]
    assert rec.episode_rows == [{"episode": 0, "return": 3.5, "length": 2, "wall_s": 0.25}]


def test_warmup_count_is_at_most_the_steps_taken(tmp_path: Path) -> None:
    rec = LatencyRecorder(tmp_path, warmup_steps=5)
    assert rec.excluded() == {}
    rec.record_step(0, 1.0, 1.0, 1.0, action=0)
    rec.record_step(0, 1.0, 1.0, 1.0, action=0)
    assert rec.excluded() == {"warmup": 2}
    rec.close()
    assert LatencyRecorder(tmp_path / "b", warmup_steps=0).excluded() == {}


def test_episode_summary(tmp_path: Path) -> None:
    rec = LatencyRecorder(tmp_path, warmup_steps=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no "mean of empty slice" on a run without episodes
        empty = rec.episode_summary()
    assert empty["count"] == 0
    assert all(math.isnan(empty[k]) for k in ("return_mean", "return_std", "length_mean"))
    rec.end_episode(0, episode_return=1.0, length=10, wall_s=1.0)
    rec.end_episode(1, episode_return=3.0, length=20, wall_s=1.0)
    rec.close()
    assert rec.episode_summary() == {
        "count": 2, "return_mean": 2.0, "return_std": 1.0, "length_mean": 15.0
    }  # fmt: skip


def test_latency_summary_inputs() -> None:
    from rlperf.results.latency import summarize_latency

    assert summarize_latency([1.0, 2.0])["count"] == 2  # no warm-up unless asked
    s = summarize_latency([1.0, None, 3.0])  # a value not recorded counts as NaN
    assert (s["count"], s["mean"], s["max"]) == (2, 2.0, 3.0)
    # A 0/1 mask is a mask, not indices.
    s = summarize_latency([5.0, 1.0, 3.0], warmup=[1, 0, 0])
    assert (s["count"], s["mean"], s["max"]) == (2, 2.0, 3.0)
