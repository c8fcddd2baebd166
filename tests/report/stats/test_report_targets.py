"""Time-to-target across cells (rlperf.report.stats.targets) on cells built in memory: the
censored median, the success rate and the ranking, which the fast suite otherwise never
reached (only the slow training test writes a run with a target; found by mutation
testing, docs/development.md#mutation-testing)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pandas as pd

from rlperf.report.read.cells import Cell
from rlperf.report.stats.targets import TARGET_COLUMNS, censored_median, targets_table


def _cell(
    cid: str,
    *,
    reached: bool,
    time_s: float,
    steps: float,
    train_time: list[float] | None = None,
    stage: str = "train",
    status: str = "completed",
    target: float | None = 150.0,
) -> Cell:
    summary: dict[str, Any] = {"stop": {"episode_return": target, "judge": "eval"}}
    if reached:
        summary |= {"reached": True, "time_to_target_s": time_s, "env_steps_to_target": steps}
    iterations = None
    if train_time is not None:
        iterations = pd.DataFrame(
            {"train_time_s": train_time, "env_steps": [steps / len(train_time)] * len(train_time)}
        )
    return Cell(cid, Path(cid), "rlperf", "g", status, {"stage": stage}, summary=summary,
                iterations=iterations)  # fmt: skip


def test_censored_median_is_a_lower_bound_when_a_missed_run_is_in_the_middle() -> None:
    assert censored_median([5.0, 1.0, 3.0], [True, True, False]) == (3.0, True)
    assert censored_median([5.0, 1.0, 3.0], [False, True, True]) == (3.0, False)
    # Only the middle counts, not its neighbours below.
    assert censored_median([1.0, 3.0, 5.0, 7.0, 9.0], [False, False, True, True, True]) == (
        5.0,
        False,
    )
    assert censored_median([1.0, 3.0, 5.0], [False, True, True]) == (3.0, False)
    assert censored_median([4.0], [False]) == (4.0, True)
    # Even count: both middle values count.
    assert censored_median([1.0, 2.0, 3.0, 4.0], [True, True, False, True]) == (2.5, True)
    assert censored_median([1.0, 2.0, 3.0, 4.0], [True, False, True, True]) == (2.5, True)
    assert censored_median([1.0, 2.0, 3.0, 4.0], [False, True, True, False]) == (2.5, False)
    value, censored = censored_median([], [])
    assert math.isnan(value) and censored is False


def test_targets_table_pools_repeats_censors_misses_and_ranks() -> None:
    cells = [
        # a: reached in 10 s, missed at its budget (50 s, 4 000 steps): censored median 30 s.
        _cell("a1", reached=True, time_s=10.0, steps=1000.0),
        _cell("a2", reached=False, time_s=0.0, steps=4000.0, train_time=[20.0, 50.0]),
        # b: reached twice; 2 of 3 runs reach, the middle value (6 s) is a reached run's.
        _cell("b1", reached=True, time_s=6.0, steps=600.0),
        _cell("b2", reached=True, time_s=4.0, steps=400.0),
        _cell("b3", reached=False, time_s=0.0, steps=9000.0, train_time=[90.0]),
        # c: the same median as b, every run reached: ranks before b.
        _cell("c1", reached=True, time_s=6.0, steps=700.0),
        # Not counted: no target, not training, not completed.
        _cell("x1", reached=True, time_s=1.0, steps=1.0, target=None),
        _cell("x2", reached=True, time_s=1.0, steps=1.0, stage="rollout"),
        _cell("x3", reached=True, time_s=1.0, steps=1.0, status="failed"),
    ]
    runs = pd.DataFrame(
        {
            "cell": ["a1", "a2", "b1", "b2", "b3", "c1"],
            "configuration": ["a1", "a1", "b1", "b1", "b1", "c1"],
            "label": ["model A", "model A", "model B", "model B", "model B", ""],
        }
    )
    table = targets_table(cells, runs)
    assert list(table.columns) == list(TARGET_COLUMNS)
    rows = table.set_index("configuration")
    assert list(table["configuration"]) == ["c1", "b1", "a1"]
    assert list(table["rank"]) == [1, 2, 3]
    assert rows.loc["a1", "median_time_to_target_s"] == 30.0
    assert bool(rows.loc["a1", "time_censored"]) is True
    assert rows.loc["a1", "median_env_steps_to_target"] == 2500.0
    assert bool(rows.loc["a1", "steps_censored"]) is True
    assert rows.loc["a1", "missed"] == "a2"
    assert rows.loc["a1", "success_rate"] == 0.5
    assert (rows.loc["a1", "runs"], rows.loc["a1", "reached"]) == (2, 1)
    assert rows.loc["b1", "median_time_to_target_s"] == 6.0
    assert bool(rows.loc["b1", "time_censored"]) is False
    assert rows.loc["b1", "median_env_steps_to_target"] == 600.0
    assert rows.loc["b1", "success_rate"] == 2 / 3
    assert rows.loc["b1", "missed"] == "b3"
    assert rows.loc["c1", "missed"] == ""
    # An empty label falls back to the configuration's id.
    assert dict(rows["label"]) == {"a1": "model A", "b1": "model B", "c1": "c1"}
    assert set(rows["target"]) == {150.0} and set(rows["judge"]) == {"eval"}


def test_a_cell_missing_from_the_runs_table_is_its_own_configuration() -> None:
    cells = [
        _cell("a1", reached=True, time_s=3.0, steps=30.0),
        _cell("a2", reached=False, time_s=0.0, steps=50.0),  # no iterations: budget unknown
    ]
    table = targets_table(cells, pd.DataFrame({"cell": ["zz"], "configuration": ["zz"]}))
    rows = table.set_index("configuration")
    assert list(rows.index) == ["a1", "a2"] and list(rows["label"]) == ["a1", "a2"]
    assert math.isnan(rows.loc["a2", "median_time_to_target_s"])
    assert math.isnan(rows.loc["a2", "median_env_steps_to_target"])
    assert rows.loc["a1", "median_env_steps_to_target"] == 30.0


def test_no_cell_with_a_target_gives_an_empty_table() -> None:
    table = targets_table([_cell("x", reached=True, time_s=1, steps=1, target=None)],
                          pd.DataFrame())  # fmt: skip
    assert table.empty and list(table.columns) == list(TARGET_COLUMNS)


def test_ties_keep_the_order_of_the_cells_and_every_miss_is_listed() -> None:
    cells = [
        _cell("z1", reached=True, time_s=5.0, steps=10.0),
        _cell("a1", reached=True, time_s=5.0, steps=10.0),
        _cell("m1", reached=True, time_s=2.0, steps=10.0),
        _cell("m2", reached=True, time_s=3.0, steps=10.0),
        _cell("m3", reached=False, time_s=0.0, steps=10.0, train_time=[9.0]),
        _cell("m4", reached=False, time_s=0.0, steps=10.0, train_time=[9.5]),
        _cell("q1", reached=True, time_s=4.0, steps=10.0),
    ]
    runs = pd.DataFrame({"cell": ["m1", "m2", "m3", "m4"], "configuration": ["m1"] * 4})
    table = targets_table(cells, runs)
    # Uncensored first, fastest first; z1 and a1 tie on everything: the cells' order.
    assert list(table["configuration"]) == ["q1", "z1", "a1", "m1"]
    assert table.set_index("configuration").loc["m1", "missed"] == "m3 m4"
    # No runs table at all: every cell is its own configuration.
    alone = targets_table(cells[:2], pd.DataFrame())
    assert list(alone["configuration"]) == ["z1", "a1"] and list(alone["label"]) == ["z1", "a1"]
