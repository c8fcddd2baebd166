"""The ``algo`` group beyond PPO: validation before Ray (fast) and one real short training
each of APPO, IMPALA (CartPole), DQN (CartPole), SAC and TQC (Pendulum) through the entry
point (slow), asserting which timing columns each fills and which stay empty
(docs/results.md#timing-per-algorithm)."""

from __future__ import annotations

import json
from dataclasses import fields
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from omegaconf import OmegaConf

from rlperf.algos import SPECS
from rlperf.config.schema_algo import ALGO_SCHEMAS, AlgoName
from rlperf.errors import ConfigError
from rlperf.layout import METRICS_FILE, RLLIB_METADATA, SUMMARY_FILE
from rlperf.results.columns import (
    LEARN_S,
    LEARNER_QUEUE_SIZE,
    OTHER_S,
    POLICY_LAG,
    REPLAY_RATIO,
    REPLAY_S,
    SAMPLE_S,
    SYNC_S,
)
from rlperf.results.columns import PHASES as TIMED_PHASES
from rlperf.validation.validate import validate_config
from tests.conftest import CONF, group_options, run_rlperf

PHASES = [*TIMED_PHASES, OTHER_S]
ASYNC_ONLY = [LEARNER_QUEUE_SIZE, POLICY_LAG]
REPLAY_ONLY = [REPLAY_S, REPLAY_RATIO]
QUICK = ("train.env_ceiling.duration_s=0.3", "telemetry.interval_s=0.5")


def test_every_algorithm_has_an_option_with_its_schema(compose_cfg) -> None:
    assert group_options("algo") == ["appo", "dqn", "impala", "ppo", "sac", "tqc"]
    for name, env in [("appo", "cartpole"), ("impala", "cartpole"), ("dqn", "cartpole"),
                      ("sac", "pendulum"), ("tqc", "mujoco"), ("ppo", "cartpole")]:  # fmt: skip
        cfg = compose_cfg(f"algo={name}", f"env={env}", "model=mlp64")
        assert cfg.algo.name == name
        validate_config(cfg)  # the shipped options are valid
    # A key of another algorithm is refused at composition.
    with pytest.raises(Exception, match="clip_param"):
        compose_cfg("algo=dqn", "algo.clip_param=0.2")
    # The quickstart sizes PPO only; the others keep their RLlib defaults.
    assert compose_cfg("algo=ppo").algo.train_batch_size == 1000
    assert compose_cfg("algo=impala").algo.train_batch_size == 500
    cfg = compose_cfg("algo=dqn")
    assert OmegaConf.to_container(cfg.algo.epsilon) == [[0, 1.0], [10000, 0.05]]


def test_specs_schemas_and_options_name_the_same_algorithms() -> None:
    """One spec per algorithm (rlperf.algos.SPECS); its keys' schema and its option agree,
    and the option gives every key of the schema a value (the schema carries types only)."""
    assert list(SPECS) == list(ALGO_SCHEMAS) == [m.value for m in AlgoName]
    assert sorted(SPECS) == group_options("algo")
    for name, spec in SPECS.items():
        assert spec.name == name
        option = OmegaConf.load(CONF / "algo" / f"{name}.yaml")
        keys = {f.name for f in fields(ALGO_SCHEMAS[name])}
        assert keys == set(option) - {"defaults"}, name
    assert {n: s.default_learners for n, s in SPECS.items()} == {
        "ppo": 0,
        "appo": 1,
        "impala": 1,
        "dqn": 0,
        "sac": 0,
        "tqc": 0,
    }
    assert {n: s.actions.space for n, s in SPECS.items() if s.actions} == {
        "dqn": "Discrete",
        "sac": "Box",
        "tqc": "Box",
    }


@pytest.mark.parametrize(
    ("overrides", "fragments"),
    [
        (["algo=dqn", "env=pendulum", "model=mlp64"],
         ["algo=dqn needs Discrete actions", "Pendulum-v1", "Box(1, float32)", "env=cartpole"]),
        (["algo=sac", "env=cartpole", "model=mlp64"],
         ["algo=sac needs Box actions", "CartPole-v1", "Discrete(2)", "env=pendulum"]),
        (["algo=dqn", "env=cartpole", "model=model1"],
         ["algo=dqn with model=model1", "use model=mlp64"]),
        (["algo=sac", "model=tiny"], ["algo=sac with model=tiny", "use model=mlp64"]),
        (["algo=impala", "env=cartpole", "model=mlp64", "algo.minibatch_size=30"],
         ["algo.minibatch_size=30", "multiple of algo.rollout_fragment_length=50"]),
        (["algo=appo", "env=cartpole", "model=mlp64", "algo.tau=0"], ["algo.tau=0", "(0, 1]"]),
        (["algo=dqn", "env=cartpole", "model=mlp64", "algo.replay_buffer_capacity=10"],
         ["algo.replay_buffer_capacity=10", "algo.train_batch_size=32"]),
        (["algo=dqn", "env=cartpole", "model=mlp64", "algo.epsilon=[[0,1.0],[0,2]]"],
         ["algo.epsilon=", "epsilon in [0, 1]"]),
        (["algo=sac", "env=pendulum", "model=mlp64", "algo.target_entropy=low"],
         ["algo.target_entropy='low'", "'auto'"]),
        (["algo=impala", "env=cartpole", "model=mlp64", "algo.min_time_s_per_iteration=-1"],
         ["algo.min_time_s_per_iteration=-1"]),
        (["algo=tqc", "env=cartpole", "model=mlp64"], ["algo=tqc needs Box actions"]),
        (["algo=tqc", "env=pendulum", "model=mlp64", "algo.top_quantiles_to_drop_per_net=25"],
         ["algo.top_quantiles_to_drop_per_net=25", "algo.n_quantiles=25"]),
    ],
)  # fmt: skip
def test_bad_algorithm_settings_are_refused_naming_the_key(
    compose_cfg, overrides, fragments
) -> None:
    cfg = compose_cfg(*overrides)
    with pytest.raises(ConfigError) as err:
        validate_config(cfg)
    for fragment in fragments:
        assert fragment in str(err.value)


def test_incompatible_algorithm_is_refused_before_ray_starts(tmp_path) -> None:
    out = tmp_path / "run"
    proc = run_rlperf(
        ["algo=sac", "env=cartpole", "model=mlp64", f"hydra.run.dir={out}"], cwd=tmp_path
    )
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "algo=sac needs Box actions" in proc.stdout + proc.stderr
    assert "Started a local Ray instance" not in proc.stdout + proc.stderr
    summary = json.loads((out / SUMMARY_FILE).read_text())
    assert summary["status"] == "invalid"


def _train(tmp_path: Path, *args: str) -> tuple[pd.DataFrame, dict]:
    out = tmp_path / "run"
    proc = run_rlperf([*args, *QUICK, f"hydra.run.dir={out}"], cwd=tmp_path)
    assert proc.returncode == 0, f"{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    summary = json.loads((out / SUMMARY_FILE).read_text())
    assert summary["status"] == "completed", summary.get("error")
    return pd.read_csv(out / METRICS_FILE), summary


#: APPO/IMPALA: one remote learner (RLlib's default, asynchronous) beside one env runner
#: on 2 cores (overcommitted); iterations of 1.5 s, updates of 60 env steps.
ASYNC = ("env=cartpole", "model=mlp64", "workers=1", "ray.overcommit_cpus=true",
         "algo.min_time_s_per_iteration=1.5", "algo.train_batch_size=60",
         # and at least two train batches an iteration: on a loaded machine 1.5 s alone
         # may pass before the remote env runner and learner have done anything
         "algo.min_sample_timesteps_per_iteration=120",
         "algo.rollout_fragment_length=20", "train.iterations=3")  # fmt: skip


@pytest.mark.slow
@pytest.mark.parametrize("algo", ["appo", "impala"])
def test_async_algorithm_fills_throughput_not_phases(tmp_path, algo) -> None:
    m, s = _train(tmp_path, f"algo={algo}", *ASYNC)
    assert s["scale"]["num_learners"] == 1 and s["learner"]["where"] == "remote actors"
    # Overlapping sampling and learning: no sequential phases, empty (never 0).
    assert m[PHASES + REPLAY_ONLY].isna().all().all()
    assert np.isnan(s["sampling_efficiency"] if s["sampling_efficiency"] is not None else np.nan)
    assert m["iter_s"].min() >= 1.5  # train() loops training_step for min_time_s_per_iteration
    assert m["env_steps"].sum() > 0 and m["learner_updates"].sum() >= 1
    assert np.allclose(m["env_steps_per_s"], m["env_steps"] / m["iter_s"])
    assert np.allclose(m["trained_steps_per_s"], m["trained_steps"] / m["iter_s"])
    # The learner's queue is read every iteration (a snapshot at its end).
    assert (m["learner_queue_size"] >= 0).all()
    # rlperf_policy.pt holds the asynchronous learner's saved weights (what a restore
    # gives the env runners), not the driver's lagging copy.
    _policy_file_is_the_learners(tmp_path / "run" / s["checkpoint"])


def _policy_file_is_the_learners(ckpt: Path) -> None:
    import torch
    from ray.rllib.core.rl_module.rl_module import RLModule

    from rlperf.models.policy_file import load_policy
    from rlperf.runs.probe import read_probe

    learner = RLModule.from_checkpoint(
        str(ckpt / "learner_group" / "learner" / "rl_module" / "default_policy")
    )
    probe = read_probe(ckpt)
    assert probe is not None
    obs = torch.from_numpy(probe.obs)
    with torch.inference_mode():
        saved = load_policy(ckpt).logits(obs).numpy()
        expected = learner.net.logits(obs).numpy()
    assert np.allclose(saved, expected, atol=1e-6) and np.allclose(
        probe.logits, expected, atol=1e-6
    )


@pytest.mark.slow
@pytest.mark.parametrize(
    ("algo", "env"), [("dqn", "cartpole"), ("sac", "pendulum"), ("tqc", "pendulum")]
)
def test_replay_algorithm_fills_phases_and_replay(tmp_path, algo, env) -> None:
    m, s = _train(
        tmp_path, f"algo={algo}", f"env={env}", "model=mlp64", "workers=0",
        "algo.rollout_fragment_length=50", "algo.train_batch_size=64",
        "algo.min_sample_timesteps_per_iteration=100",
        "algo.num_steps_sampled_before_learning_starts=100", "train.iterations=2",
        # SAC's RLlib default loops training_step for at least 1 s: its step count would
        # then depend on the machine's speed. Without it, exactly 100 steps an iteration.
        "algo.min_time_s_per_iteration=null",
    )  # fmt: skip
    assert s["scale"]["num_learners"] == 0 and s["learner"]["where"] == "driver"
    assert list(m["env_steps"]) == [100, 100]
    # learning starts after 100 sampled steps: one update per 50-step fragment from then on
    assert list(m["learner_updates"]) == [1, 2]
    assert list(m["trained_steps"]) == [64, 128]
    assert np.allclose(m["replay_ratio"], m["trained_steps"] / m["env_steps"])
    filled = [SAMPLE_S, LEARN_S, SYNC_S, REPLAY_S, OTHER_S]
    assert (m[filled] >= 0).all().all() and (m[[SAMPLE_S, LEARN_S, REPLAY_S]] > 0).all().all()
    parts = m[filled].sum(axis=1)
    assert np.allclose(parts, m["iter_s"], rtol=1e-6)  # the phases account for iter_s
    # load_s is inside learn_s (RLlib's learner builds the batch); the async columns stay empty.
    assert m[["load_s", *ASYNC_ONLY]].isna().all().all()
    ckpt = Path(s["checkpoint"])
    run = tmp_path / "run"
    assert (run / ckpt / RLLIB_METADATA).exists()
    # SAC's actor and DQN's Q-network as rlperf's policy file, checked against the
    # module's probe when saved (and here, reloaded without Ray).
    from rlperf.models.policy_file import load_policy
    from rlperf.runs.probe import check_probe, read_probe, torch_policy_fns

    net = load_policy(run / ckpt)
    probe = read_probe(run / ckpt)
    assert probe is not None and not net.has_value
    checked = check_probe(probe, *torch_policy_fns(net))
    assert checked is not None
    if algo == "dqn":  # Q-values of CartPole's two actions; greedy = their argmax
        assert net.discrete_actions and net.num_outputs == 2 and not probe.continuous
        assert checked["greedy_agreement"] == 1.0
        return
    assert (net.squash, net.num_outputs) == ("tanh", 2)
    assert probe.continuous and probe.actions.shape == (32, 1)
    assert checked["max_action_err_of_range"] <= 1e-5
