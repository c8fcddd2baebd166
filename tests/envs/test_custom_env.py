"""Real training on non-Atari envs through rlperf's entry point (slow: Ray, RLlib, TFLite).

- a user-defined env, imported by entry point from a temporary working directory,
  trains with a remote env runner (``workers=1``) that builds the env itself;
- ``env=cartpole model=mlp64`` trains 2 iterations, and its checkpoint rolls out
  (``stage=rollout``) and exports (``stage=edge backend=tflite_fp32``);
- ``env=frozenlake model=mlp64`` (one-hot Discrete states) trains 1 iteration.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from rlperf.layout import CHECKPOINT_DIR, METRICS_FILE, PROBE_FILE, STEPS_FILE, SUMMARY_FILE
from tests.conftest import REPO, run_rlperf

pytestmark = pytest.mark.slow

#: A tiny PPO: batches of 200 env steps, one epoch.
SMALL = ("algo.train_batch_size=200", "algo.minibatch_size=100", "algo.num_epochs=1",
         "telemetry.interval_s=0.5", "train.env_ceiling.duration_s=0.5")  # fmt: skip


def _ok(proc, out: Path) -> dict:
    assert proc.returncode == 0, f"{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    summary = json.loads((out / SUMMARY_FILE).read_text())
    assert summary["status"] == "completed", summary.get("error")
    return summary


def test_user_env_by_entry_point_trains_in_a_remote_env_runner(tmp_path) -> None:
    """The module lives only in the working directory; the env runner process builds it."""
    shutil.copy(REPO / "tests" / "support" / "bad_envs.py", tmp_path / "walk_envs.py")
    pids = tmp_path / "pids"
    pids.mkdir()
    out = tmp_path / "run"
    proc = run_rlperf(
        ["env=custom", "env.entry_point=walk_envs:Walk", f"+env.config.pid_dir={pids}",
         "env.max_episode_steps=20", "model=mlp64", "workers=1", "train.iterations=1",
         "train.warmup_iterations=0",  # the one iteration counts (sampling_efficiency)
         f"train.env_ceiling.cache_dir={tmp_path / 'ceiling'}", *SMALL,
         f"hydra.run.dir={out}"],
        cwd=tmp_path,
    )  # fmt: skip
    summary = _ok(proc, out)
    assert summary["scale"]["num_env_runners"] == summary["env_runners"]["started"] == 1
    assert summary["total_env_steps"] == 200
    # Built in the driver (the check, the ceiling, the probe) and in the env runner's process.
    built_in = {int(p.stem) for p in pids.glob("*.pid")}
    assert len(built_in) >= 2, built_in
    assert summary["env_ceiling_steps_per_s"] > 0 and summary["env_ceiling"]["cached"] is False
    assert 0 < summary["sampling_efficiency"] < 1
    metrics = pd.read_csv(out / METRICS_FILE)
    row = metrics.iloc[0]
    expected = row["env_steps"] / row["sample_s"] / 1 / summary["env_ceiling_steps_per_s"]
    assert row["sampling_efficiency"] == pytest.approx(expected)


@pytest.fixture(scope="module")
def cartpole_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("cartpole")
    out = root / "run"
    proc = run_rlperf(
        ["env=cartpole", "model=mlp64", "workers=1", "train.iterations=2",
         "env_runner.num_envs=2", "env_runner.torch_threads=1",
         f"train.env_ceiling.cache_dir={root / 'ceiling'}", *SMALL, f"hydra.run.dir={out}"],
        cwd=root,
    )  # fmt: skip
    _ok(proc, out)
    return out


def test_cartpole_mlp_trains_and_records_its_scale(cartpole_run) -> None:
    summary = json.loads((cartpole_run / SUMMARY_FILE).read_text())
    scale = summary["scale"]
    assert scale["num_envs_per_env_runner"] == 2 and scale["gym_env_vectorize_mode"] == "sync"
    assert [r["torch_threads"] for r in summary["env_runners"]["runners"]] == [1]
    assert scale["num_learners"] == 0 and summary["learner"]["where"] == "driver"
    assert summary["model_params"] == 2 * (4 * 64 + 64 + 64 * 64 + 64) + (64 * 2 + 2) + (64 + 1)
    metrics = pd.read_csv(cartpole_run / METRICS_FILE)
    # The batch (200) in two envs; RLlib may overshoot by up to one step per env.
    assert metrics["env_steps"].between(200, 202).all() and len(metrics) == 2
    assert metrics["sampling_efficiency"].between(0, 1, inclusive="neither").all()
    assert summary["resource_plan"]["required_cpus"] == 2.0  # driver + one env runner


def test_cartpole_checkpoint_rolls_out(cartpole_run, tmp_path) -> None:
    out = tmp_path / "rollout"
    proc = run_rlperf(
        ["stage=rollout", f"run={cartpole_run}", "workers=0", "rollout.episodes=2",
         "rollout.warmup_steps=5", f"hydra.run.dir={out}"],
        cwd=tmp_path,
    )  # fmt: skip
    summary = _ok(proc, out)
    assert summary["probe"]["max_abs_logit_err"] <= 1e-5
    assert summary["probe"]["greedy_agreement"] == 1.0
    assert summary["source"]["model"] == {
        "name": "mlp64", "kind": "mlp", "hiddens": [64, 64], "activation": "tanh"
    }  # fmt: skip
    assert summary["env"]["kind"] == "gym" and summary["env"]["id"] == "CartPole-v1"
    steps = pd.read_csv(out / STEPS_FILE)
    assert set(steps["action"]) <= {0, 1} and summary["episodes"]["count"] == 2
    assert summary["steps"] == len(steps)


def test_cartpole_checkpoint_exports_to_tflite(cartpole_run, tmp_path) -> None:
    out = tmp_path / "edge"
    proc = run_rlperf(
        ["stage=edge", f"run={cartpole_run}", "backend=tflite_fp32", "edge.episodes=2",
         "edge.warmup_steps=5", "edge.fidelity_observations=60", "edge.calibration_size=60",
         f"edge.cache_dir={tmp_path / 'cache'}", f"hydra.run.dir={out}"],
        cwd=tmp_path,
    )  # fmt: skip
    summary = _ok(proc, out)
    assert summary["export"]["passed"] and summary["export"]["max_abs_logit_err"] < 1e-4
    assert summary["input"]["shape"] == [1, 4] and summary["input"]["dtype"] == "float32"
    fidelity = summary["fidelity"]
    assert fidelity["agreement"] == 1.0 and not fidelity["flagged"]
    # The same seeded episodes played by the torch policy: the same returns.
    assert fidelity["same_return_episodes"] == fidelity["episodes_compared"] == 2
    assert summary["episodes"]["count"] == 2


def test_frozenlake_one_hot_trains(tmp_path) -> None:
    out = tmp_path / "run"
    proc = run_rlperf(
        ["env=frozenlake", "model=mlp64", "workers=0", "train.iterations=1",
         f"train.env_ceiling.cache_dir={tmp_path / 'ceiling'}", *SMALL, f"hydra.run.dir={out}"],
        cwd=tmp_path,
    )  # fmt: skip
    summary = _ok(proc, out)
    assert summary["scale"]["num_env_runners"] == summary["env_runners"]["started"] == 0
    # one-hot of 16 states into two 64-unit layers, policy (4 logits) and value heads
    assert summary["model_params"] == 2 * (16 * 64 + 64 + 64 * 64 + 64) + (64 * 4 + 4) + 65
    from rlperf.models.policy_file import load_policy

    net = load_policy(out / CHECKPOINT_DIR)
    assert net.obs_spec == {"type": "discrete", "n": 16} and net.in_features == 16
    assert os.path.isfile(out / CHECKPOINT_DIR / PROBE_FILE)


def test_float64_observations_are_cast_once_where_the_env_meets_the_model() -> None:
    """A Box env of float64 observations (as MuJoCo's) gives every consumer float32: the
    space, reset and step (a torch layer refuses float64 beside float32 weights); the
    protocol records the cast, and the workload stays the same as the float32 env's."""
    from rlperf.envs.factory import BuiltEnvFacts, built_env_facts, make_env
    from rlperf.results.protocol import env_protocol, protocol_key

    entry = {"kind": "custom", "entry_point": "support.point_mass:PointMass", "seed": 3}
    wide = {**entry, "config": {"dtype": "float64"}}
    env = make_env(wide)
    try:
        assert env.observation_space.dtype == np.float32
        obs, _ = env.reset()
        step, *_ = env.step(env.action_space.sample())
        assert obs.dtype == step.dtype == np.float32
        assert env.unwrapped.observation_space.dtype == np.float64  # the env's own
    finally:
        env.close()
    assert built_env_facts(wide) == BuiltEnvFacts("float64 -> float32")  # not MuJoCo
    assert built_env_facts(entry).observation_cast is None  # float32 already: no cast
    assert built_env_facts({**entry, "entry_point": "no_such:Env"}) == BuiltEnvFacts()
    cast = {**env_protocol(wide), "observation_cast": "float64 -> float32"}
    assert protocol_key(cast) == protocol_key(env_protocol(wide))
