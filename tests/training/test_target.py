"""Time-to-target: ``train.stop`` validation and the stop rule (no Ray), and PPO learning
CartPole to a target through the entry point (slow)."""

from __future__ import annotations

import json
import math

import pandas as pd
import pytest

from rlperf.errors import ConfigError
from rlperf.layout import METRICS_FILE, SUMMARY_FILE
from rlperf.results.columns import ITER_S, OTHER_S, PHASES, TIME_S
from rlperf.results.record import TrainRecord
from rlperf.training.target import StopCheck, evaluation_settings
from rlperf.validation.validate import validate_config
from tests.conftest import run_rlperf


def _row(it: int, env_steps: int = 100, train_ret: float = math.nan,
         eval_ret: float = math.nan, eval_s: float = 0.0) -> dict:  # fmt: skip
    return {"iteration": it, "env_steps": env_steps, "episode_return_mean": train_ret,
            "eval_return_mean": eval_ret, "eval_s": eval_s}  # fmt: skip


def test_eval_judge_ignores_the_training_return(compose_cfg) -> None:
    cfg = compose_cfg("train.stop.episode_return=450", "train.iterations=9")
    check = StopCheck(cfg)
    assert check.observe(_row(1, train_ret=480.0, eval_ret=300.0, eval_s=0.5)) is None
    assert check.observe(_row(2, train_ret=200.0, eval_ret=450.0, eval_s=0.25)) == "episode_return"
    s = check.record(TrainRecord()).data
    assert s["reached"] is True and s["stop"]["stopped_by"] == "episode_return"
    assert s["env_steps_to_target"] == 200 and s["iterations_to_target"] == 2
    assert s["return_at_target"] == 450.0 and s["stop"]["judge"] == "eval"
    # Evaluation seconds are reported apart and left out of the training clock.
    assert s["evaluation"]["eval_s"] == 0.75
    assert s["wall_s_to_target"] - s["time_to_target_s"] == pytest.approx(0.75)
    assert s["evaluation"] | {"eval_s": 0} == {
        "enabled": True, "interval": 1, "episodes": 10, "explore": False, "env_runners": 0,
        "parallel_to_training": False, "eval_s": 0, "max_episode_steps": 27_000,
        "max_episode_steps_from": "env", "capped_episodes": 0}  # fmt: skip


def test_train_judge_and_budgets(compose_cfg) -> None:
    cfg = compose_cfg(
        "train.stop.episode_return=100", "train.stop.judge=train", "train.stop.env_steps=250"
    )
    assert evaluation_settings(cfg) == {"enabled": False}
    check = StopCheck(cfg)
    assert check.observe(_row(1, train_ret=50.0, eval_ret=900.0)) is None
    assert check.observe(_row(2, train_ret=60.0)) is None
    assert check.observe(_row(3, train_ret=70.0)) == "env_steps"  # 300 >= 250 first
    s = check.record(TrainRecord()).data
    assert s["reached"] is False and s["time_to_target_s"] is None
    # The progress line's ETA follows the nearest foreseeable end: here the env steps
    # (300 of 250, capped at 1), not the cap of 20 iterations.
    assert check.budget_fraction(3, train_time_s=1.0) == 1.0
    assert s["stop"] == {"episode_return": 100.0, "env_steps": 250, "time_s": None,
                         "precision": None, "judge": "train", "iterations": 3,
                         "stopped_by": "env_steps"}  # fmt: skip
    assert "precision" not in s  # no precision target: nothing recorded


def test_no_target_records_null_reached(compose_cfg) -> None:
    check = StopCheck(compose_cfg("train.stop.time_s=0.000001"))
    assert check.observe(_row(1)) == "time_s"
    s = check.record(TrainRecord()).data
    assert (
        s["reached"] is None and s["stop"]["judge"] is None and s["stop"]["stopped_by"] == "time_s"
    )
    none = StopCheck(compose_cfg())
    assert (
        none.observe(_row(1)) is None
        and none.record(TrainRecord()).data["stop"]["stopped_by"] == "iterations"
    )
    # Without budgets the fraction is the cap's; a time budget takes over when nearer.
    cap = int(compose_cfg().train.iterations)
    assert none.budget_fraction(1, train_time_s=50.0) == pytest.approx(1 / cap)
    timed = StopCheck(compose_cfg("train.stop.time_s=100", "train.iterations=1000"))
    assert timed.budget_fraction(10, train_time_s=25.0) == pytest.approx(0.25)
    assert timed.budget_fraction(10, train_time_s=0.5) == pytest.approx(0.01)


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("train.stop.env_steps=0", "train.stop.env_steps=0 is not valid; it must be a number > 0"),
        ("train.stop.time_s=-5", "train.stop.time_s=-5.0 is not valid; it must be a number > 0"),
        ("train.stop.episode_return=nan", "train.stop.episode_return=nan is not valid"),
        ("train.evaluation.episodes=0",
         "train.evaluation.episodes=0 is not valid; it must be a number > 0"),
    ],
)  # fmt: skip
def test_bad_stop_values_are_refused_before_ray(compose_cfg, override: str, message: str) -> None:
    cfg = compose_cfg("env=cartpole", "model=mlp64", "train.stop.episode_return=450", override)
    with pytest.raises(ConfigError) as err:
        validate_config(cfg)
    assert message in str(err.value)


def test_cartpole_target_preset_composes_valid(compose_cfg) -> None:
    cfg = compose_cfg("experiment=cartpole_target")
    validate_config(cfg)
    assert cfg.env.id == "CartPole-v1" and cfg.model.name == "mlp64"
    assert cfg.train.stop.episode_return == 450 and cfg.train.stop.env_steps == 300_000
    # The cap is the env-step budget: iterations x batch.
    assert cfg.train.iterations * cfg.algo.train_batch_size == cfg.train.stop.env_steps


# benchmarks/bench_algos_targets.py's runs: algo -> (overrides, RLlib config values that
# RLlib's tuned examples set and rlperf's defaults do not).
ALGO_TARGETS = {
    "appo": ((), {"vf_loss_coeff": 0.05, "entropy_coeff": 0.0,
                  "circular_buffer_iterations_per_batch": 2}),
    "impala": ((), {"vf_loss_coeff": 0.05, "entropy_coeff": 0.0}),
    "dqn": (("model=mlp256",), {"n_step": 3, "epsilon": [(0, 1.0), (10000, 0.02)]}),
    "sac": (("env=pendulum", "model=mlp256", "model.activation=relu",
             "train.stop.episode_return=-250", "train.stop.env_steps=20000"),
            {"actor_lr": 2e-4, "critic_lr": 8e-4, "alpha_lr": 9e-4, "n_step": 3,
             "num_steps_sampled_before_learning_starts": 256,
             "target_network_update_freq": 1}),
}  # fmt: skip


@pytest.mark.parametrize("algo", sorted(ALGO_TARGETS))
def test_algo_targets_preset_gives_rllib_the_tuned_settings(compose_cfg, algo: str) -> None:
    from rlperf.algos import build_algo_config, plan_resources

    overrides, expected = ALGO_TARGETS[algo]
    cfg = compose_cfg("experiment=algo_targets", f"algo={algo}", *overrides)
    validate_config(cfg)
    assert str(cfg.train.stop.judge) == "train" and cfg.train.torch_threads == 1
    rllib = build_algo_config(cfg, plan_resources(cfg))  # an AlgorithmConfig: no Ray
    assert {k: getattr(rllib, k) for k in expected} == expected
    assert rllib.num_env_runners == 0


def test_warmup_default_does_not_wait_for_learning(compose_cfg) -> None:
    for overrides in [(), ("env_runner.num_envs=8",), ("experiment=scaling_small",)]:
        t = compose_cfg(*overrides).train
        assert (t.warmup_iterations, t.warmup_until_first_episode) == (1, False), overrides
    for preset in ("study_training", "study_sizes", "study_cpu"):
        t = compose_cfg(f"experiment={preset}").train
        assert (t.warmup_iterations, t.warmup_until_first_episode) == (0, True), preset


#: The real run's target: a greedy return PPO reaches within a few iterations of the
#: preset. That PPO goes on to 450 within 300 000 env steps (the preset's own target) is a
#: learning run, measured by ``benchmarks/bench_training.py`` (docs/benchmarks.md).
QUICK_TARGET = 150


@pytest.mark.slow
def test_ppo_learns_cartpole_to_a_target_and_stops_there(tmp_path) -> None:
    """``rlperf experiment=cartpole_target train.stop.episode_return=150``: greedy
    evaluation after every iteration, and the run ends with the iteration that reached
    the target, its times and steps accounted."""
    out = tmp_path / "run"
    proc = run_rlperf(
        ["experiment=cartpole_target", f"train.stop.episode_return={QUICK_TARGET}",
         "telemetry.interval_s=0.5", f"hydra.run.dir={out}"],
        cwd=tmp_path,
        timeout=1800,  # well under a minute on an idle 2-core machine; far longer under load
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    s = json.loads((out / SUMMARY_FILE).read_text())
    m = pd.read_csv(out / METRICS_FILE)
    assert s["status"] == "completed" and s["reached"] is True, s["stop"]
    assert s["stop"]["stopped_by"] == "episode_return" and s["evaluation"]["enabled"] is True
    assert s["env_steps_to_target"] <= 300_000 and s["env_steps_to_target"] == m["env_steps"].sum()
    assert 0 < s["time_to_target_s"] < s["wall_s_to_target"] < s["wall_s"]
    assert s["startup_s"] > 0 and s["startup_s"] + s["wall_s_to_target"] < s["wall_s"]
    # The run ended with the iteration that reached the target, judged on evaluation.
    assert s["iterations_to_target"] == len(m) == s["iterations"]
    last, before = m["eval_return_mean"].iloc[-1], m["eval_return_mean"].iloc[:-1]
    assert last >= QUICK_TARGET and (before < QUICK_TARGET).all()
    assert s["return_at_target"] == pytest.approx(last)
    assert (m["eval_episodes"] >= 10).all() and (m["eval_s"] > 0).all()
    assert s["time_to_target_s"] == pytest.approx(m["train_time_s"].iloc[-1])
    assert s["evaluation"]["eval_s"] == pytest.approx(m["eval_s"].sum())
    # Both return curves are there; the training one is RLlib's smoothed exploring return.
    assert m["episode_return_mean"].notna().all()


def _target_cell(seed: int, lr: float, reached: bool, time_s: float, budget_s: float):
    from support import synthetic

    n = 4
    m = pd.DataFrame({"iteration": range(1, n + 1), "excluded": ["warmup", "", "", ""]})
    for col in (*PHASES, ITER_S, OTHER_S, TIME_S):
        m[col] = 1.0
    m["train_time_s"] = [budget_s * (i + 1) / n for i in range(n)]
    m["env_steps"], m["env_steps_per_s"] = 1000, 1000.0
    config = synthetic.resolved_config(model="mlp64", gpu_layout="none", workers=1, seed=seed)
    config["algo"]["lr"] = lr
    summary = {"status": "completed", "stop": {"episode_return": 450.0, "judge": "eval"},
               "reached": reached, "time_to_target_s": time_s if reached else None,
               "env_steps_to_target": 2000 if reached else None}  # fmt: skip
    return synthetic.CellSpec(config, [f"seed={seed}", f"algo.lr={lr}"], summary=summary,
                              metrics=m)  # fmt: skip


def test_report_ranks_time_to_target_with_misses_censored(tmp_path) -> None:
    from support import synthetic

    from rlperf.report.build import build_report

    specs = [
        _target_cell(0, 0.001, True, 10.0, 12.0),
        _target_cell(1, 0.001, True, 20.0, 24.0),
        _target_cell(2, 0.001, False, 0.0, 100.0),  # missed: counts at its budget, 100 s
        _target_cell(0, 0.01, True, 5.0, 6.0),
        _target_cell(0, 0.1, False, 0.0, 50.0),
    ]
    synthetic.write_sweep(tmp_path / "sweep", specs)
    result = build_report([tmp_path / "sweep"], out=tmp_path / "report", figures=False)
    t = pd.read_csv(tmp_path / "report" / "targets.csv").set_index("rank")
    assert list(t["runs"]) == [1, 3, 1] and list(t["reached"]) == [1, 2, 0]
    assert list(t["median_time_to_target_s"]) == [5.0, 20.0, 50.0]  # never mean of successes
    assert list(t["time_censored"]) == [False, False, True]
    assert t.loc[2, "success_rate"] == pytest.approx(2 / 3)
    assert t.loc[3, "median_env_steps_to_target"] == 4000  # the budget it used
    assert t.loc[2, "missed"].endswith("/2") and t.loc[3, "missed"].endswith("/4")
    md = result.markdown.read_text() if result.markdown else ""
    assert "Time to target" in md and "≥ 50.0" in md and "Runs that missed" in md


def test_unknown_stop_key_names_the_valid_keys(compose_cfg) -> None:
    from hydra.errors import HydraException

    from rlperf.errors import message_of

    with pytest.raises(HydraException) as err:
        compose_cfg("train.stop.episode_reward=450")
    text = message_of(err.value)
    assert "train.stop.episode_reward" in text
    assert text.endswith(
        "valid keys of train.stop: episode_return, env_steps, time_s, precision, judge"
    )


def test_progress_line_shows_the_evaluation() -> None:
    from rlperf.training.training_job import iteration_text

    row = {"iter_s": 2.0, "sample_s": 0.5, "learn_s": 1.0, "env_steps_per_s": 2000.0,
           "episode_return_mean": 120.0, "eval_episodes": 10, "eval_return_mean": 455.5,
           "eval_s": 1.25, "eval_capped_episodes": 0, "excluded": ""}  # fmt: skip
    assert iteration_text(row).endswith("| return 120.0 | eval 455.5 (1.2 s)")
    capped = iteration_text(row | {"eval_capped_episodes": 3})
    assert capped.endswith("| eval 455.5 (3 capped, 1.2 s)")
    assert "eval" not in iteration_text(row | {"eval_episodes": 0})


def test_an_iteration_without_evaluation_has_no_evaluation_return() -> None:
    """train.evaluation.interval > 1: RLlib 2.60 keeps the last evaluation's return in the
    results of the iterations between (episodes stale or NaN); those rows get none."""
    from rlperf.training.target import evaluation_row

    runners = {"episode_return_mean": -1262.4, "num_episodes": math.nan}
    stale = {"evaluation": {"env_runners": runners}}
    row = evaluation_row(stale)
    assert math.isnan(row["eval_return_mean"]) and row["eval_episodes"] == 0
    fresh = {"evaluation": {"env_runners": {"episode_return_mean": -180.0, "num_episodes": 20}}}
    assert evaluation_row(fresh) == {
        "eval_return_mean": -180.0,
        "eval_episodes": 20,
        "eval_capped_episodes": 0,
    }
    assert evaluation_row({})["eval_episodes"] == 0
    # A stale count in an iteration whose evaluate() did not run is not this row's either.
    assert evaluation_row(fresh, evaluated=False)["eval_episodes"] == 0
