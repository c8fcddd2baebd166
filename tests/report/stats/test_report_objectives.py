"""What configurations are ranked on (rlperf.report.stats.objectives), on cells built in memory:
the samples each objective takes, the choice rule and the refusals of --objective (found
by mutation testing, docs/development.md#mutation-testing)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from rlperf.errors import ObjectiveError
from rlperf.layout import EXCLUDED_COLUMN
from rlperf.report.read.cells import Cell
from rlperf.report.stats import objectives
from rlperf.report.stats.objectives import OBJECTIVES, choose
from rlperf.report.stats.repeats import Configuration
from rlperf.stats.intervals import Estimate


def _cell(cid: str, rows: dict[str, list[Any]] | None, summary: dict[str, Any] | None = None,
          status: str = "completed") -> Cell:  # fmt: skip
    df = None if rows is None else pd.DataFrame(rows)
    return Cell(cid, Path(cid), "rlperf", "g", status, {"stage": "train"},
                summary=summary or {}, iterations=df)  # fmt: skip


def _conf(*cells: Cell) -> Configuration:
    return Configuration(cells[0].id, cells[0].id, "training", "m", "fp", list(cells))


ROWS = {
    EXCLUDED_COLUMN: ["warmup", "", "", "fault"],
    "iter_s": [9.0, 2.0, 3.0, 7.0],
    "env_steps": [100.0, 1000.0, 1000.0, 10.0],
    "trained_steps": [100.0, 4000.0, 2000.0, 10.0],
    "train_time_s": [9.0, 11.0, 14.0, 21.0],
}


def test_the_pairs_are_the_included_iterations() -> None:
    cell = _cell("a", ROWS)
    t, trained = objectives.trained_step_pairs(cell)
    assert t.tolist() == [2.0, 3.0] and trained.tolist() == [4000.0, 2000.0]
    t, env = objectives.env_step_pairs(cell)
    assert t.tolist() == [2.0, 3.0] and env.tolist() == [1000.0, 1000.0]
    assert objectives.training_samples(cell).tolist() == [2.0, 3.0]
    est = OBJECTIVES["trained_steps"].within_run(cell)
    assert est.value == pytest.approx(1000 * 5.0 / 6000.0)
    # A column the run did not record: NaN for every included iteration.
    t, trained = objectives.trained_step_pairs(_cell("b", {EXCLUDED_COLUMN: [""], "iter_s": [1]}))
    assert t.tolist() == [1.0] and np.isnan(trained).all() and len(trained) == 1


def test_time_to_target_samples() -> None:
    reached = _cell("r", ROWS, {"reached": True, "time_to_target_s": 12.5})
    assert objectives.time_to_target_samples(reached).tolist() == [12.5]
    # Missed (or reached without a time): its training time when it stopped, a lower bound.
    missed = _cell("m", ROWS, {"reached": False, "time_to_target_s": 3.0})
    assert objectives.time_to_target_samples(missed).tolist() == [21.0]
    no_time = _cell("n", ROWS, {"reached": True, "time_to_target_s": None})
    assert objectives.time_to_target_samples(no_time).tolist() == [21.0]
    empty = _cell("e", {"train_time_s": [np.nan]}, {"reached": False})
    assert objectives.time_to_target_samples(empty).size == 0
    assert objectives.time_to_target_samples(_cell("x", None)).size == 0
    assert OBJECTIVES["time_to_target"].sample_word(missed) == "runs"
    assert OBJECTIVES["env_steps"].sample_word(missed) == "iterations"


def test_trained_steps_differ() -> None:
    same = _cell("s", {EXCLUDED_COLUMN: ["", ""], "iter_s": [1, 1], "env_steps": [5, 5],
                       "trained_steps": [5, np.nan]})  # fmt: skip
    assert not objectives.trained_steps_differ([_conf(same)])
    # An excluded iteration's steps do not count, nor do runs that did not complete.
    excluded = _cell("x", {EXCLUDED_COLUMN: ["fault"], "iter_s": [1], "env_steps": [5],
                           "trained_steps": [50]})  # fmt: skip
    failed = _cell("f", ROWS, status="failed")
    assert not objectives.trained_steps_differ([_conf(same, excluded, failed)])
    assert objectives.trained_steps_differ([_conf(same), _conf(_cell("a", ROWS))])


def _with_target(cid: str, rows: dict[str, list[Any]]) -> Cell:
    return _cell(cid, rows, {"stop": {"episode_return": 100.0}, "reached": False})


def test_choose_applies_the_rule_and_says_why() -> None:
    same = {EXCLUDED_COLUMN: [""], "iter_s": [1.0], "env_steps": [4000.0]}
    other = {EXCLUDED_COLUMN: [""], "iter_s": [1.0], "env_steps": [6400.0]}
    confs = [_conf(_cell("a", same)), _conf(_cell("b", other))]
    objective, why = choose("training", confs, None, "w")
    assert objective.key == "env_steps"
    assert why == (
        "iterations sampled 4,000 to 6,400 env steps, so time per iteration is not the same work"
    )
    objective, why = choose("training", confs[:1], None, "w")
    assert objective.key == "env_steps" and why.startswith("every iteration sampled 4,000 ")
    objective, why = choose("training", [_conf(_cell("n", None))], None, "w")
    assert objective.key == "env_steps" and why == "no iteration recorded its env steps"
    objective, why = choose("training", confs[:1], "iter_s", "w")
    assert (objective.key, why) == (
        "iter_s", "chosen with --objective; every iteration sampled 4,000 env steps"
    )  # fmt: skip
    objective, why = choose("training", confs[:1], "trained_steps", "w")
    assert (objective.key, why) == ("trained_steps", "chosen with --objective")
    targets = [_conf(_with_target("t", same)), _conf(_with_target("u", other))]
    objective, why = choose("training", targets, None, "w")
    assert (objective.key, why) == ("time_to_target", "the runs have a target return")
    # One run without a target: the default, not time to target.
    objective, _ = choose("training", [*targets, *confs[:1]], None, "w")
    assert objective.key == "env_steps"
    assert choose("inference", confs, "iter_s", "w") == (OBJECTIVES["latency"], "")
    objective, why = choose("serve", confs, None, "w")
    assert (objective.key, objective.name, why) == ("env_steps", "serve", "")


def test_check_requested_refuses_what_does_not_measure_the_same_work() -> None:
    steps = [{EXCLUDED_COLUMN: [""] * 7, "iter_s": [1.0] * 7,
              "env_steps": [float(1000 + i) for i in range(7)]}]  # fmt: skip
    confs = [_conf(_cell("a", steps[0]))]
    with pytest.raises(ObjectiveError, match="not a training objective; choose one of env_steps"):
        objectives.check_requested("latency", confs, "w")
    with pytest.raises(ObjectiveError) as err:
        objectives.check_requested("iter_s", confs, "the sweep")
    assert "of the sweep sampled different env steps (1,000, 1,001, 1,002, 1,003, 1,004, " \
        "1,005 ...)" in str(err.value)  # fmt: skip
    with pytest.raises(ObjectiveError, match="no run of the sweep had a target return"):
        objectives.check_requested("time_to_target", confs, "the sweep")
    # One run with a target is enough to ask for it.
    objectives.check_requested("time_to_target", [*confs, _conf(_with_target("t", steps[0]))], "w")
    objectives.check_requested("env_steps", confs, "w")


def test_estimate_pools_the_runs_that_measured_and_order_is_best_first() -> None:

    conf = _conf(
        _cell("a", ROWS), _cell("b", ROWS), _cell("c", ROWS), _cell("d", ROWS, status="failed")
    )
    nan = np.nan
    est_ = Estimate
    runs = {"a": est_(2.0, 1.0, 3.0, 5), "b": est_(8.0, 7.0, 9.0, 5),
            "c": est_(nan, nan, nan, 0), "d": est_(100.0, 1, 2, 5)}  # fmt: skip
    est = OBJECTIVES["env_steps"].estimate(conf, runs)
    assert est.value == pytest.approx(4.0) and est.runs == 2
    # One run that measured: its own estimate, interval and all.
    assert (
        OBJECTIVES["env_steps"].estimate(_conf(_cell("a", ROWS), _cell("c", ROWS)), runs)
        is runs["a"]
    )
    # None measured: the first completed run's.
    assert OBJECTIVES["env_steps"].estimate(_conf(_cell("c", ROWS)), runs) is runs["c"]
    assert OBJECTIVES["env_steps"].order({"x": runs["b"], "y": runs["a"]}) == ["y", "x"]
    faster_is_more = objectives.replace(OBJECTIVES["env_steps"], lower_is_better=False)
    assert faster_is_more.order({"x": runs["b"], "y": runs["a"]}) == ["x", "y"]
    assert OBJECTIVES["env_steps"].label == "time per 1 000 env steps (s)"
    assert OBJECTIVES["env_steps"].what == "time per 1 000 env steps"


def _inference(cid: str, rows: dict[str, list[Any]] | None) -> Cell:
    df = None if rows is None else pd.DataFrame(rows)
    return Cell(cid, Path(cid), "rlperf", "g", "completed", {"stage": "rollout"}, latency=df)


def test_latency_samples_and_what_one_is() -> None:
    steps = {EXCLUDED_COLUMN: ["warmup", "", ""], "action_ms": [9.0, 1.5, 2.5],
             "forward_ms": [8.0, 1.0, 2.0], "granularity": ["step"] * 3}  # fmt: skip
    cell = _inference("s", steps)
    samples = objectives.latency_samples(cell)
    assert samples.tolist() == [1.5, 2.5] and samples.dtype == np.float64
    assert objectives.latency_sample_word(cell) == "steps"
    forward_only = _inference("f", steps | {"action_ms": [np.nan] * 3})
    assert objectives.latency_samples(forward_only).tolist() == [1.0, 2.0]
    legacy = steps | {"granularity": ["episode_mean", "run_mean", "run_mean"]}
    assert objectives.latency_sample_word(_inference("e", legacy)) == "episode means"
    runs = steps | {"granularity": ["run_mean"] * 3}
    assert objectives.latency_sample_word(_inference("r", runs)) == "run means"
    other = steps | {"granularity": ["batch"] * 3}
    assert objectives.latency_sample_word(_inference("o", other)) == "samples"
    assert objectives.latency_sample_word(_inference("n", None)) == "samples"
    assert objectives.latency_sample_word(_inference("z", {"granularity": []})) == "samples"
    nothing = objectives.latency_samples(_inference("n", None))
    assert nothing.size == 0 and nothing.dtype == np.float64
    assert OBJECTIVES["latency"].within_run(cell).value == 2.0


def test_refusals_of_objective_name_the_alternatives() -> None:
    confs = [_conf(_cell("a", {EXCLUDED_COLUMN: [""] * 6, "iter_s": [1.0] * 6,
                                "env_steps": [float(1000 + i) for i in range(6)]}))]  # fmt: skip
    with pytest.raises(ObjectiveError) as err:
        objectives.check_requested("latency", confs, "w")
    assert str(err.value) == (
        "--objective 'latency' is not a training objective; choose one of env_steps, "
        "trained_steps, iter_s, time_to_target"
    )
    with pytest.raises(ObjectiveError) as err:
        objectives.check_requested("iter_s", confs, "w")
    assert str(err.value) == (
        "--objective iter_s: the iterations of w sampled different env steps (1,000, 1,001, "
        "1,002, 1,003, 1,004, 1,005), so time per iteration is not the same work; use "
        "env_steps (time per 1 000 env steps) instead"
    )
    with pytest.raises(ObjectiveError) as err:
        objectives.check_requested("time_to_target", confs, "w")
    assert str(err.value) == (
        "--objective time_to_target: no run of w had a target return (train.stop.episode_return)"
    )


def test_within_run_estimates_are_the_engines_batch_intervals() -> None:
    from rlperf.stats import intervals

    t = np.random.default_rng(8).uniform(1.0, 3.0, 40)
    cell = _cell("seeded", {EXCLUDED_COLUMN: [""] * 40, "iter_s": t, "env_steps": [1000.0] * 40})
    est = OBJECTIVES["env_steps"].within_run(cell)
    ref = intervals.within_run_ratio(t, [1000.0] * 40, 1000.0)
    assert (est.value, est.low, est.high, est.df) == (ref.value, ref.low, ref.high, ref.df)
    ints = {EXCLUDED_COLUMN: [""] * 3, "action_ms": [1, 2, 9], "granularity": ["step"] * 3}
    assert objectives.latency_samples(_inference("int", ints)).dtype == np.float64
    steps = {EXCLUDED_COLUMN: [""] * 40, "action_ms": 10 * t, "forward_ms": [1.0] * 40,
             "granularity": ["step"] * 40}  # fmt: skip
    med = OBJECTIVES["latency"].within_run(_inference("lat", steps))
    ref = intervals.within_run(steps["action_ms"], "median")
    assert med.value == float(np.median(steps["action_ms"]))
    assert (med.low, med.high) == (ref.low, ref.high)
    ints = _cell("i", {EXCLUDED_COLUMN: [""], "iter_s": [3], "env_steps": [1000]})
    assert objectives.training_samples(ints).dtype == np.float64
    conf = _conf(_cell("r1", ROWS), _cell("r2", ROWS))
    runs = {"r1": Estimate(2.0, 1, 3, 5), "r2": Estimate(4.0, 3, 5, 5)}
    pooled = OBJECTIVES["env_steps"].estimate(conf, runs)
    ref = intervals.across_runs([2.0, 4.0])
    assert (pooled.value, pooled.low, pooled.high, pooled.runs) == (ref.value, ref.low,
                                                                   ref.high, 2)  # fmt: skip


def test_a_run_that_stopped_on_its_precision_shows_the_interval_it_stopped_on() -> None:
    cell = _cell("p", ROWS)
    cell.summary["precision"] = {"objective": "s_per_1k_env_steps", "reached": True,
                                 "estimate": 2.0, "low": 1.9, "high": 2.1, "values": 12,
                                 "level": 0.99, "batches": 2}  # fmt: skip
    e = OBJECTIVES["env_steps"].within_run(cell)
    assert (e.value, e.low, e.high, e.confidence, e.df) == (2.0, 1.9, 2.1, 0.99, 1)
    cell.summary["precision"]["objective"] = "iter_s"  # another objective's stop: not this one
    assert OBJECTIVES["env_steps"].within_run(cell).confidence == 0.95


def test_a_time_to_target_not_reached_is_a_lower_bound() -> None:
    rows = {EXCLUDED_COLUMN: [""] * 3, "iter_s": [1.0] * 3, "env_steps": [1000.0] * 3,
            "train_time_s": [1.0, 2.0, 3.0]}  # fmt: skip
    missed = _cell("m", rows)
    missed.summary["reached"] = False
    e = OBJECTIVES["time_to_target"].within_run(missed)
    assert e.value == 3.0 and e.bound
    hit = _cell("h", rows)
    hit.summary.update(reached=True, time_to_target_s=2.5)
    assert not OBJECTIVES["time_to_target"].within_run(hit).bound


def test_choose_says_which_steps_differ() -> None:
    confs = [_conf(_cell(c, {EXCLUDED_COLUMN: [""], "iter_s": [1.0], "env_steps": [s]}))
             for c, s in (("a", 4000.0), ("b", 4800.0), ("c", 6400.0))]  # fmt: skip
    _, why = choose("training", confs, None, "w")
    assert why == (
        "iterations sampled 4,000 to 6,400 env steps, so time per iteration is not the same work"
    )
    _, why = choose("training", confs[:1], None, "w")
    assert (
        why == "every iteration sampled 4,000 env steps, so time per iteration would rank the same"
    )
    with pytest.raises(ObjectiveError, match="the iterations of the sweep sampled"):
        choose("training", confs, "iter_s", "the sweep")
