"""``env.engine``: ale-py's AtariVectorEnv as rlperf's env (frames, spaces, refusals), the
resource plan's count of its threads, and its record in the env protocol."""

from __future__ import annotations

import json

import numpy as np
import pytest

from rlperf.envs.ceiling import measure_ceiling
from rlperf.envs.factory import make_env
from rlperf.envs.from_config import env_config
from rlperf.envs.vector import ale_game, ale_vector_env, engine_refusal
from rlperf.errors import ConfigError
from rlperf.layout import METRICS_FILE, SUMMARY_FILE
from rlperf.results.protocol import protocol_key
from rlperf.specs.engines import ENGINES, VECTOR_ENGINES
from rlperf.validation.validate import validate_config

#: Pong as both engines honour it the same way: no no-op starts, FIRE off (ALE presses it
#: at reset only), no life loss (Pong has no lives).
SAME = {
    "kind": "atari", "id": "ALE/Pong-v5", "dim": 84, "framestack": 4, "noop_max": 0,
    "fire_reset": False, "episodic_life": False, "repeat_action_probability": 0.0,
}  # fmt: skip


def test_the_engine_table() -> None:
    assert set(ENGINES) == {"python", "gymnasium_sync", "gymnasium_async", "ale_vector",
                            "envpool"}  # fmt: skip
    assert VECTOR_ENGINES == ("ale_vector", "envpool")
    assert [n for n, s in ENGINES.items() if s.threaded] == ["ale_vector", "envpool"]
    assert ENGINES["gymnasium_async"].rllib_mode == "async"
    assert (ale_game("ALE/Pong-v5"), ale_game("SpaceInvadersNoFrameskip-v4")) == (
        "pong",
        "space_invaders",
    )


def test_ale_vector_gives_rlperfs_frames_and_spaces() -> None:
    single = make_env({**SAME, "seed": None})
    vector = ale_vector_env({**SAME, "engine": "ale_vector", "threads": 2}, 3)
    try:
        assert vector.single_observation_space == single.observation_space
        assert vector.single_action_space == single.action_space
        assert vector.num_envs == 3
        obs, _ = vector.reset(seed=7)
        assert obs.shape == (3, 84, 84, 4) and obs.dtype == np.uint8
        for _ in range(5):
            obs, reward, terminated, truncated, _ = vector.step(vector.action_space.sample())
        assert obs.shape == (3, 84, 84, 4) and reward.shape == terminated.shape == (3,)
        # Through the creator RLlib calls: the config plus num_envs, one vector env.
        via_creator = make_env({**SAME, "engine": "ale_vector", "num_envs": 2})
        assert via_creator.num_envs == 2
        via_creator.close()
    finally:
        single.close()
        vector.close()


def test_the_newest_frame_is_the_same_on_both_engines() -> None:
    """300 random steps of Pong on rlperf's wrappers and on ALE's vector env: the newest
    frame is identical at every step (largest pixel difference 0). After a reset ALE's
    stack holds zeros where rlperf repeats the first frame; 4 steps later the stacks agree."""
    python = make_env(dict(SAME))
    vector = ale_vector_env({**SAME, "engine": "ale_vector"}, 1)
    try:
        first, _ = python.reset(seed=5)
        other, _ = vector.reset(seed=5)
        assert np.array_equal(first[..., -1], other[0, ..., -1])
        assert all(first[..., k].max() > 0 for k in range(3))  # rlperf: the first frame
        assert all(other[0, ..., k].max() == 0 for k in range(3))  # ALE: zeros
        rng = np.random.default_rng(0)
        worst = 0
        for step in range(300):
            action = int(rng.integers(6))
            a, _, term_a, trunc_a, _ = python.step(action)
            b, _, term_b, trunc_b, _ = vector.step(np.array([action]))
            worst = max(worst, int(np.abs(a[..., -1].astype(int) - b[0, ..., -1]).max()))
            if step >= 3:
                assert np.array_equal(a, b[0])
            assert (term_a, trunc_a) == (bool(term_b[0]), bool(trunc_b[0]))
        assert worst == 0
    finally:
        python.close()
        vector.close()


def test_a_planted_transpose_would_show() -> None:
    """The frame test can fail: ALE's raw channels-first frames are not rlperf's."""
    vector = ale_vector_env({**SAME, "engine": "ale_vector"}, 1)
    python = make_env(dict(SAME))
    try:
        obs, _ = vector.reset(seed=5)
        raw = vector.env.reset(seed=5)[0]  # the engine's own (N, framestack, dim, dim)
        first, _ = python.reset(seed=5)
        assert raw.shape == (1, 4, 84, 84)
        assert not np.array_equal(raw[0].reshape(first.shape), first)
        assert np.array_equal(obs[0, ..., -1], first[..., -1])
    finally:
        vector.close()
        python.close()


@pytest.mark.parametrize(
    ("overrides", "said"),
    [
        (("env=pong", "env.engine=ale_vector", "env.frameskip=[2,5]"),
         "env.frameskip=[2, 5] cannot be honoured by env.engine=ale_vector"),
        (("env=pong", "env.engine=ale_vector", "env.id=ALE/Breakout-v5"),
         "env.episodic_life=true and env.fire_reset=true cannot be honoured by "
         "env.engine=ale_vector for ALE/Breakout-v5, a game with lives"),
        (("env=cartpole", "model=mlp64", "env.engine=ale_vector"),
         "env.engine=ale_vector steps atari envs only, not env.kind=gym"),
        (("env=pong", "env.threads=2"),
         "env.threads=2 does nothing with env.engine=python"),
        (("env=pong", "env.engine=ale_vector", "env.threads=0"), "env.threads=0 must be >= 1"),
    ],
)  # fmt: skip
def test_a_key_the_engine_cannot_honour_is_refused_in_one_line(
    compose_cfg, overrides: tuple[str, ...], said: str
) -> None:
    cfg = compose_cfg(*overrides, "workers=0")
    with pytest.raises(ConfigError) as info:
        validate_config(cfg)
    assert str(info.value).startswith(said), str(info.value)
    assert "\n" not in str(info.value)


def test_what_ale_vector_can_honour_passes(compose_cfg) -> None:
    validate_config(compose_cfg("env.engine=ale_vector", "env.threads=2", "workers=1"))
    breakout = ("env.id=ALE/Breakout-v5", "env.episodic_life=false", "env.fire_reset=false")
    validate_config(compose_cfg("env.engine=ale_vector", *breakout, "workers=0"))
    assert engine_refusal({"kind": "atari", "id": "ALE/Pong-v5", "engine": "python"}) is None


def test_the_protocol_records_the_engine_without_making_it_another_workload(compose_cfg) -> None:
    from rlperf.results.protocol import env_protocol

    python = env_protocol(env_config(compose_cfg("model=tiny")))
    vector = env_protocol(env_config(compose_cfg("model=tiny", "env.engine=ale_vector",
                                                 "env.threads=2")))  # fmt: skip
    assert (python["engine"], python["threads"]) == ("python", None)
    assert (vector["engine"], vector["threads"]) == ("ale_vector", 2)
    assert protocol_key(python) == protocol_key(vector)
    json.dumps(vector)


def test_the_sub_env_seeds_of_each_env_runner() -> None:
    from rlperf.training.training_job import sub_env_seeds

    assert sub_env_seeds(None, 2, 8) is None
    record = sub_env_seeds(10, 2, 3)
    assert record is not None
    assert record["by_env_runner"] == {"1": [11, 12, 13], "2": [12, 13, 14]}
    assert sub_env_seeds(10, 0, 2)["by_env_runner"] == {"0": [10, 11]}  # type: ignore[index]


def test_the_ceiling_of_a_vector_engine_counts_every_sub_env() -> None:
    result = measure_ceiling({**SAME, "dim": 42, "engine": "ale_vector"}, 0.5, num_envs=4)
    assert result["num_envs"] == 4 and result["steps"] % 4 == 0
    assert result["steps_per_s"] == pytest.approx(result["steps"] / result["seconds"])
    assert result["steps"] > 40


@pytest.mark.slow
def test_training_on_ale_vector_with_a_remote_env_runner_then_a_rollout(tmp_path) -> None:
    """Train on ALE's vector env in a remote env runner, then play the policy with rlperf's
    wrappers: the same observations, so the downstream stage takes the run as it is."""
    from conftest import run_rlperf

    run = tmp_path / "run"
    args = [
        "model=tiny", "workers=1", "env_runner.num_envs=2", "env.engine=ale_vector",
        "algo.train_batch_size=256", "algo.minibatch_size=128", "algo.num_epochs=1",
        "train.iterations=2", "train.env_ceiling.duration_s=0.5", f"hydra.run.dir={run}",
    ]  # fmt: skip
    proc = run_rlperf(args, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    s = json.loads((run / SUMMARY_FILE).read_text())
    assert s["status"] == "completed"
    assert s["scale"]["gym_env_vectorize_mode"] == "vector_entry_point"
    assert s["scale"]["num_envs_per_env_runner"] == 2
    assert s["scale"]["sub_env_seeds"]["by_env_runner"] == {"1": [1, 2]}  # seed 0 + w 1 + i
    assert (s["resource_plan"]["engine"], s["resource_plan"]["env_threads"]) == ("ale_vector", 1)
    assert (s["env_protocol"]["engine"], s["env_protocol"]["observation"]["dim"]) == (
        "ale_vector",
        42,
    )
    assert s["env_ceiling"]["num_envs"] == 2 and s["sampling_efficiency"] > 0
    rows = [line.split(",") for line in (run / METRICS_FILE).read_text().splitlines()]
    env_steps = [int(r[rows[0].index("env_steps")]) for r in rows[1:]]
    assert len(env_steps) == 2 and all(n >= 256 for n in env_steps)
    out = tmp_path / "rollout"
    args = ["stage=rollout", f"run={run}", "rollout.steps=60", "rollout.warmup_steps=10",
            "workers=0", f"hydra.run.dir={out}"]  # fmt: skip
    proc = run_rlperf(args, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    r = json.loads((out / SUMMARY_FILE).read_text())
    assert r["status"] == "completed" and r["steps"] == 60
    assert r["env_protocol"]["engine"] == "python"  # the same game, stepped the rollout's way
    assert protocol_key(r["env_protocol"]) == protocol_key(
        {**s["env_protocol"], "max_episode_steps": r["env_protocol"]["max_episode_steps"],
         "max_frames_per_episode": r["env_protocol"]["max_frames_per_episode"]}
    )  # fmt: skip
