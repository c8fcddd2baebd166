"""``env.engine=envpool``: EnvPool's Atari pool as rlperf's env (frames, seeds, a training
run) where EnvPool is installed (``pip install 'rlperf[envpool]'``; .ci/run installs it when
it installs within 60 s, ``nox -s envpool`` always); the one-line refusal where it is not."""

from __future__ import annotations

import importlib.util
import json

import numpy as np
import pytest

from rlperf.envs.factory import make_env
from rlperf.envs.vector import engine_refusal
from rlperf.errors import ConfigError
from rlperf.layout import SUMMARY_FILE
from rlperf.validation.validate import validate_config

SAME = {
    "kind": "atari", "id": "ALE/Pong-v5", "dim": 84, "framestack": 4, "noop_max": 0,
    "fire_reset": False, "episodic_life": False, "repeat_action_probability": 0.0,
}  # fmt: skip
HAS_ENVPOOL = importlib.util.find_spec("envpool") is not None
needs_envpool = pytest.mark.skipif(
    not HAS_ENVPOOL, reason="EnvPool is not installed (pip install 'rlperf[envpool]')"
)


def test_without_envpool_the_job_stops_in_one_line(compose_cfg, monkeypatch) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "envpool" else real(name, *a)
    )
    said = engine_refusal({**SAME, "engine": "envpool"})
    assert said == (
        "env.engine=envpool needs the envpool package, which is not installed: "
        "pip install 'rlperf[envpool]' (or use env.engine=ale_vector)"
    )
    with pytest.raises(ConfigError, match="needs the envpool package"):
        validate_config(compose_cfg("env.engine=envpool", "workers=0"))


@needs_envpool
def test_envpool_gives_rlperfs_observations() -> None:
    """EnvPool's observations are rlperf's: same spaces, channels last, a reset stack of the
    first frame repeated as rlperf's wrappers stack it (ALE's vector env stacks zeros). Its
    frames are not pixel for pixel rlperf's (a few pixels differ from the first one on, and
    with the same actions its games drift apart): test_engine_equivalence.py checks that a
    policy plays the same on it."""
    from rlperf.envs.vector import envpool_env

    python = make_env(dict(SAME))
    pool = envpool_env({**SAME, "engine": "envpool"}, 2)
    try:
        assert pool.single_observation_space == python.observation_space
        assert pool.single_action_space == python.action_space
        first, _ = python.reset(seed=5)
        other, _ = pool.reset(seed=5)
        assert other.shape == (2, 84, 84, 4) and other.dtype == np.uint8
        assert all(np.array_equal(other[0, ..., k], other[0, ..., 3]) for k in range(3))
        differ = np.count_nonzero(first[..., -1] != other[0, ..., -1])
        assert differ < 0.005 * first[..., -1].size, differ  # 4 of 7 056 pixels here
        obs, reward, terminated, truncated, _ = pool.step(np.array([2, 3]))
        assert obs.shape == (2, 84, 84, 4) and reward.shape == terminated.shape == (2,)
    finally:
        python.close()
        pool.close()


@needs_envpool
def test_a_reset_with_another_seed_builds_the_pool_with_it() -> None:
    from rlperf.envs.vector import envpool_env

    pool = envpool_env({**SAME, "engine": "envpool", "seed": 3}, 2)
    try:
        first = pool.env
        pool.reset(seed=3)
        assert pool.env is first and pool.seed == 3  # the seed it was built with: kept
        pool.reset(seed=11)  # RLlib's seed + worker_index
        assert pool.env is not first and pool.seed == 11
    finally:
        pool.close()


@needs_envpool
def test_envpool_through_rllibs_creator_and_its_threads(compose_cfg) -> None:
    pool = make_env({**SAME, "engine": "envpool", "threads": 2, "num_envs": 3})
    try:
        obs, _ = pool.reset(seed=1)
        assert obs.shape == (3, 84, 84, 4) and pool.action_space.shape == (3,)
        obs, reward, *_ = pool.step(pool.action_space.sample())
        assert obs.shape == (3, 84, 84, 4) and reward.shape == (3,)
    finally:
        pool.close()
    validate_config(compose_cfg("env.engine=envpool", "env.threads=2", "workers=1"))


@needs_envpool
@pytest.mark.slow
def test_training_on_envpool_then_the_env_stage(tmp_path) -> None:
    from conftest import run_rlperf

    run = tmp_path / "run"
    args = [
        "model=tiny",
        "workers=1",
        "env_runner.num_envs=2",
        "env.engine=envpool",
        "algo.train_batch_size=256",
        "algo.minibatch_size=128",
        "algo.num_epochs=1",
        "train.iterations=1",
        "train.env_ceiling.duration_s=0.5",
        f"hydra.run.dir={run}",
    ]
    proc = run_rlperf(args, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    s = json.loads((run / SUMMARY_FILE).read_text())
    assert s["status"] == "completed" and s["env_protocol"]["engine"] == "envpool"
    out = tmp_path / "env"
    args = ["stage=env", "env.engine=envpool", "env_runner.num_envs=4", "env.dim=42",
            "env_bench.steps=400", "env_bench.warmup_steps=40", "env_bench.windows=4",
            f"hydra.run.dir={out}"]  # fmt: skip
    proc = run_rlperf(args, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    e = json.loads((out / SUMMARY_FILE).read_text())
    assert e["engine"] == {"name": "envpool", "threads": 1, "num_envs": 4} and e["steps"] == 400
