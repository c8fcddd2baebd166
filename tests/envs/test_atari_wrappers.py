"""Tests of rlperf.envs.atari against real ale-py games (Pong, Breakout)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import cv2
import gymnasium as gym
import numpy as np
import pytest
from omegaconf import OmegaConf

from rlperf.envs import atari
from rlperf.envs.atari import (
    DEFAULT_ENV_CONFIG,
    EpisodicLife,
    FireReset,
    MaxAndSkip,
    derive_seed,
    env_spaces,
    make_atari_env,
    register_rllib_env,
)
from tests.conftest import DATA

# The study's calibration set (101 preprocessed Pong observations), if the
# reference data has been copied into tests/data/thesis.
STUDY_DATASETS = sorted(DATA.glob("thesis/**/dataset_model1.npy"))

# gym 0.18's Pong-v0 as the 2021 study ran it through RLlib 1.1 (no max-and-skip:
# RLlib only added it for *NoFrameskip* ids).
STUDY_PONG_V0 = {
    "id": "ALE/Pong-v5",  # ale-py's Pong-v0 is the same game but warns it is deprecated
    "frameskip": [2, 5],
    "skip": 1,
    "repeat_action_probability": 0.25,
    "max_episode_steps": 10000,
}

# Frames FireReset spends on reset: FIRE and action 2, each repeated `skip` (4).
FIRE_RESET_FRAMES = 8


class FakeEnvContext(dict):
    """Duck-typed stand-in for RLlib's EnvContext (importing RLlib takes ~6 s)."""

    def __init__(self, config: dict[str, Any], worker_index: int, vector_index: int = 0):
        super().__init__(config)
        self.worker_index = worker_index
        self.vector_index = vector_index


@pytest.fixture(autouse=True)
def _fresh_env_ordinals() -> Iterator[None]:
    atari._ENV_ORDINALS.clear()
    yield
    atari._ENV_ORDINALS.clear()


def _frame_number(env: gym.Env) -> int:
    return int(env.unwrapped.ale.getEpisodeFrameNumber())


def _lives(env: gym.Env) -> int:
    return int(env.unwrapped.ale.lives())


def _run_episode(env: gym.Env, action: int | None = None) -> tuple[int, bool, bool]:
    """Step until the episode ends; return (length, terminated, truncated)."""
    steps = 0
    while True:
        a = env.action_space.sample() if action is None else action
        _, _, terminated, truncated, _ = env.step(a)
        steps += 1
        if terminated or truncated:
            return steps, terminated, truncated


# --------------------------------------------------------------------------
# Observations
# --------------------------------------------------------------------------


@pytest.mark.parametrize("dim", [84, 42])
def test_observation_shape_dtype_and_range(dim: int) -> None:
    env = make_atari_env({"dim": dim, "seed": 0})
    expected = gym.spaces.Box(0, 255, (dim, dim, 4), np.uint8)
    assert env.observation_space == expected
    assert env_spaces({"dim": dim}) == (expected, gym.spaces.Discrete(6))
    obs, _ = env.reset()
    for _ in range(20):
        obs, *_ = env.step(env.action_space.sample())
    assert obs.shape == (dim, dim, 4)
    assert obs.dtype == np.uint8
    assert env.observation_space.contains(obs)
    # A real Pong frame: grey field (87 in ALE grayscale) plus brighter walls/paddles.
    values = np.unique(obs)
    assert len(values) > 2
    assert 87 in values
    assert obs.max() > 87
    env.close()


def test_framestack_newest_frame_last() -> None:
    # skip=1 and no max: the newest channel must be exactly the resized screen.
    env = make_atari_env({"skip": 1, "noop_max": 0, "seed": 0})
    ale = env.unwrapped.ale
    obs, _ = env.reset()
    for c in range(1, 4):
        np.testing.assert_array_equal(obs[:, :, c], obs[:, :, 0])
    changed = 0
    for _ in range(60):
        new, *_ = env.step(2)  # RIGHT moves Pong's paddle: the screen changes
        screen = cv2.resize(ale.getScreenGrayscale(), (84, 84), interpolation=cv2.INTER_AREA)
        np.testing.assert_array_equal(new[:, :, -1], screen)
        np.testing.assert_array_equal(new[:, :, :-1], obs[:, :, 1:])
        changed += int(not np.array_equal(new[:, :, -1], obs[:, :, -1]))
        obs = new
    assert changed > 10
    env.close()


def test_framestack_one_and_returned_arrays_are_not_reused() -> None:
    env = make_atari_env({"framestack": 1, "dim": 42, "seed": 0})
    obs0, _ = env.reset()
    snapshot = obs0.copy()
    for _ in range(30):
        obs, *_ = env.step(2)
    assert obs.shape == (42, 42, 1)
    np.testing.assert_array_equal(obs0, snapshot)  # later steps did not write into it
    env.close()


def test_max_and_skip_advances_skip_frames_and_maxes_last_two() -> None:
    env = make_atari_env({"noop_max": 0, "fire_reset": False, "seed": 0})
    env.reset()
    assert _frame_number(env) == 0
    for step in range(1, 6):
        env.step(0)
        assert _frame_number(env) == 4 * step
    env.close()
    # frameskip 2 at ALE level x skip 2 also makes 4 frames per agent step.
    env = make_atari_env({"noop_max": 0, "fire_reset": False, "frameskip": 2, "skip": 2})
    env.reset(seed=0)
    env.step(0)
    assert _frame_number(env) == 4
    env.close()

    # The wrapper's frame is the pixel-wise max of the last two raw frames.
    raw = gym.make("ALE/Pong-v5", obs_type="grayscale", frameskip=1, repeat_action_probability=0.0)
    reference = gym.make(
        "ALE/Pong-v5", obs_type="grayscale", frameskip=1, repeat_action_probability=0.0
    )
    skipped = MaxAndSkip(raw, 4)
    skipped.reset(seed=1)
    reference.reset(seed=1)
    for _ in range(40):
        obs, reward, *_ = skipped.step(2)
        frames, total = [], 0.0
        for _ in range(4):
            f, r, *_ = reference.step(2)
            frames.append(f)
            total += float(r)
        np.testing.assert_array_equal(obs, np.maximum(frames[-2], frames[-1]))
        assert reward == total
    skipped.close()
    reference.close()


def test_random_frameskip_pair_as_in_the_study() -> None:
    env = make_atari_env({**STUDY_PONG_V0, "noop_max": 0, "seed": 0})
    env.reset()
    deltas = []
    for _ in range(60):
        before = _frame_number(env)
        env.step(env.action_space.sample())
        deltas.append(_frame_number(env) - before)
    assert set(deltas) == {2, 3, 4}  # ALE draws from [2, 5) each step
    env.close()


@pytest.mark.skipif(not STUDY_DATASETS, reason="tests/data/thesis/**/dataset_model1.npy absent")
@pytest.mark.parametrize("extra", [{}, STUDY_PONG_V0], ids=["default", "study_pong_v0"])
def test_observations_look_like_the_study_dataset(extra: dict[str, Any]) -> None:
    frames = []
    with STUDY_DATASETS[0].open("rb") as f:
        while True:
            try:
                frames.append(np.load(f))
            except (EOFError, ValueError):
                break
    study = np.stack(frames)
    assert study.shape == (101, 84, 84, 4)
    env = make_atari_env({**extra, "seed": 0})
    obs, _ = env.reset()
    ours = [obs]
    for _ in range(100):
        obs, *_ = env.step(env.action_space.sample())
        ours.append(obs)
    env.close()
    mine = np.stack(ours)
    # Same palette and resize: same extremes and nearly the same pixel histogram.
    assert (mine.min(), mine.max()) == (study.min(), study.max()) == (52, 236)
    hist_study = np.bincount(study.ravel(), minlength=256) / study.size
    hist_mine = np.bincount(mine.ravel(), minlength=256) / mine.size
    assert np.abs(hist_study - hist_mine).sum() < 0.03


# --------------------------------------------------------------------------
# Seeds
# --------------------------------------------------------------------------


def _trajectory(env_config: dict[str, Any], steps: int = 150) -> tuple[np.ndarray, list[float]]:
    env = make_atari_env(env_config)
    obs, _ = env.reset()
    frames, rewards = [obs], []
    for _ in range(steps):
        obs, reward, terminated, truncated, _ = env.step(env.action_space.sample())
        frames.append(obs)
        rewards.append(float(reward))
        if terminated or truncated:
            obs, _ = env.reset()
    env.close()
    return np.stack(frames), rewards


def test_seed_makes_runs_reproducible() -> None:
    config = {"seed": 7, "repeat_action_probability": 0.25}
    frames_a, rewards_a = _trajectory(config)
    frames_b, rewards_b = _trajectory(config)
    np.testing.assert_array_equal(frames_a, frames_b)
    assert rewards_a == rewards_b
    frames_c, _ = _trajectory({**config, "seed": 8})
    assert not np.array_equal(frames_a, frames_c)


def test_worker_seeds_differ_and_are_reproducible() -> None:
    assert derive_seed(5) == 5
    seeds = {derive_seed(5, w, v, o) for w in range(4) for v in range(3) for o in range(2)}
    assert len(seeds) == 4 * 3 * 2
    assert derive_seed(5, 2, 1) == derive_seed(5, 2, 1)

    plain = make_atari_env({"seed": 5})
    assert plain.default_seed == 5
    first = [make_atari_env(FakeEnvContext({"seed": 5}, w)).default_seed for w in (1, 2)]
    # A second sub-env of runner 1 (RLlib builds them all with vector_index 0).
    sub_env = make_atari_env(FakeEnvContext({"seed": 5}, 1)).default_seed
    assert first == [derive_seed(5, 1), derive_seed(5, 2)]
    assert sub_env == derive_seed(5, 1, 0, 1)
    assert len({5, *first, sub_env}) == 4
    atari._ENV_ORDINALS.clear()  # a new process: the same seeds again
    again = [make_atari_env(FakeEnvContext({"seed": 5}, w)).default_seed for w in (1, 2)]
    assert again == first


def test_explicit_reset_seed_wins_over_config_seed() -> None:
    env_a = make_atari_env({"seed": 1, "repeat_action_probability": 0.25})
    env_b = make_atari_env({"seed": 2, "repeat_action_probability": 0.25})
    obs_a, _ = env_a.reset(seed=3)
    obs_b, _ = env_b.reset(seed=3)
    np.testing.assert_array_equal(obs_a, obs_b)
    assert _frame_number(env_a) == _frame_number(env_b)


# --------------------------------------------------------------------------
# Episode boundaries: truncation, lives, FIRE
# --------------------------------------------------------------------------


def test_time_limit_truncation_starts_a_fresh_game() -> None:
    limit = 25
    env = make_atari_env({"max_episode_steps": limit, "noop_max": 0, "seed": 0})
    first_obs, _ = env.reset()
    assert _frame_number(env) == FIRE_RESET_FRAMES
    for _ in range(4):
        length, terminated, truncated = _run_episode(env)
        assert (length, terminated, truncated) == (limit, False, True)
        assert _frame_number(env) == FIRE_RESET_FRAMES + 4 * limit
        obs, _ = env.reset()
        assert _frame_number(env) == FIRE_RESET_FRAMES  # the emulator restarted
        np.testing.assert_array_equal(obs, first_obs)  # no-op-free start is deterministic
    env.close()


def test_time_limit_with_noop_starts() -> None:
    limit = 20
    env = make_atari_env({"max_episode_steps": limit, "seed": 3})
    starts = []
    for _ in range(5):
        env.reset()
        starts.append(_frame_number(env))
        assert _run_episode(env) == (limit, False, True)
    # 1..30 raw no-ops, then the FIRE-reset frames, every episode.
    assert all(FIRE_RESET_FRAMES + 1 <= s <= FIRE_RESET_FRAMES + 30 for s in starts)
    assert len(set(starts)) > 1
    env.close()


@pytest.mark.parametrize("game", ["ALE/Pong-v5", "ALE/Breakout-v5"])
def test_ale_frame_cap_truncation_resets_for_real(game: str) -> None:
    # The RLlib atari_wrappers bug: after ALE truncates at its frame cap, its
    # EpisodicLifeEnv keeps stepping the finished game (episodes of length 1).
    base = gym.make(
        game,
        obs_type="grayscale",
        frameskip=1,
        repeat_action_probability=0.0,
        max_num_frames_per_episode=80,
    )
    env = FireReset(EpisodicLife(MaxAndSkip(base, 4)))
    env.reset(seed=0)
    for _ in range(4):
        # NOOP: Breakout's ball was launched by FIRE but is not lost in 80 frames.
        length, terminated, truncated = _run_episode(env, action=0)
        assert (length, terminated, truncated) == ((80 - FIRE_RESET_FRAMES) // 4, False, True)
        env.reset()
        assert _frame_number(env) == FIRE_RESET_FRAMES
    env.close()


def test_life_loss_ends_episode_but_game_continues() -> None:
    env = make_atari_env({"id": "ALE/Breakout-v5", "noop_max": 0, "seed": 0})
    assert env_spaces({"id": "ALE/Breakout-v5"})[1] == env.action_space
    for game in range(2):
        env.reset()
        assert (_lives(env), _frame_number(env)) == (5, FIRE_RESET_FRAMES)
        for lives_left in (4, 3, 2, 1, 0):
            _, terminated, truncated = _run_episode(env, action=0)  # NOOP misses the ball
            assert (terminated, truncated) == (True, False)
            assert _lives(env) == lives_left
            end_frame = _frame_number(env)
            if lives_left == 0:
                break
            env.reset()
            # Continued, not reset: a NOOP plus the FIRE-reset steps later.
            assert _lives(env) == lives_left
            assert _frame_number(env) == end_frame + 4 + FIRE_RESET_FRAMES
        assert env.unwrapped.ale.game_over(), f"game {game} did not end"
    env.reset()
    assert (_lives(env), _frame_number(env)) == (5, FIRE_RESET_FRAMES)  # real reset
    env.close()


def test_truncation_in_mid_life_resets_for_real() -> None:
    env = make_atari_env(
        {"id": "ALE/Breakout-v5", "noop_max": 0, "max_episode_steps": 10, "seed": 0}
    )
    for _ in range(3):
        env.reset()
        assert (_lives(env), _frame_number(env)) == (5, FIRE_RESET_FRAMES)
        assert _run_episode(env, action=0) == (10, False, True)
    env.close()


@pytest.mark.parametrize("action", [1, 0], ids=["FIRE", "NOOP"])
def test_episodic_life_off_plays_whole_game(action: int) -> None:
    # The paddle never moves. With NOOP only, FireReset relaunches the ball after
    # each lost life: a policy trained with episodic_life=true never pressed FIRE
    # itself, and played for whole games it must not wait until the frame cap.
    env = make_atari_env(
        {"id": "ALE/Breakout-v5", "noop_max": 0, "episodic_life": False, "seed": 0}
    )
    env.reset()
    lives_seen = []
    while True:
        _, _, terminated, truncated, info = env.step(action)
        lives_seen.append(info["lives"])
        if terminated or truncated:
            break
    assert (terminated, truncated) == (True, False)
    assert sorted(set(lives_seen), reverse=True) == [5, 4, 3, 2, 1, 0]
    assert len(lives_seen) < 2000, len(lives_seen)
    assert env.unwrapped.ale.game_over()
    env.close()


def test_fire_reset_only_when_enabled() -> None:
    env = make_atari_env({"noop_max": 0, "fire_reset": False, "seed": 0})
    env.reset()
    assert _frame_number(env) == 0
    env.close()
    env = make_atari_env({"noop_max": 0, "seed": 0})
    env.reset()
    assert _frame_number(env) == FIRE_RESET_FRAMES
    env.close()


# --------------------------------------------------------------------------
# Config, spaces, registration, import cost
# --------------------------------------------------------------------------


def test_unknown_key_names_key_and_valid_keys() -> None:
    with pytest.raises(ValueError, match="frame_stack") as err:
        make_atari_env({"frame_stack": 4})
    message = str(err.value)
    for key in DEFAULT_ENV_CONFIG:
        assert repr(key) in message
    with pytest.raises(ValueError, match="env_config.dim"):
        make_atari_env({"dim": 0})
    with pytest.raises(ValueError, match="max_episode_steps"):
        make_atari_env({"max_episode_steps": 0})
    with pytest.raises(ValueError, match="env_config.frameskip"):
        make_atari_env({"frameskip": [4, 2]})


def test_accepts_omegaconf_and_rllib_num_envs_key() -> None:
    cfg = OmegaConf.create({"dim": 42, "framestack": 2, "seed": 0})
    obs_space, action_space = env_spaces(cfg)
    assert obs_space.shape == (42, 42, 2)
    env = make_atari_env(FakeEnvContext({**cfg, "num_envs": 2}, worker_index=1))
    obs, _ = env.reset()
    assert obs.shape == (42, 42, 2)
    assert action_space.n == 6
    env.close()


@pytest.mark.parametrize("game", ["ALE/Pong-v5", "PongNoFrameskip-v4", "ALE/Breakout-v5"])
def test_env_spaces_table_matches_the_emulator(game: str) -> None:
    env = make_atari_env({"id": game, "seed": 0})
    assert env_spaces({"id": game}) == (env.observation_space, env.action_space)
    env.close()


def test_env_spaces_unknown_game_builds_env() -> None:
    assert "freeway" not in atari._KNOWN_ACTION_COUNTS
    obs_space, action_space = env_spaces({"id": "ALE/Freeway-v5", "dim": 42})
    assert obs_space.shape == (42, 42, 4)
    assert action_space == gym.spaces.Discrete(3)  # NOOP, UP, DOWN


def test_register_rllib_env() -> None:
    from ray.tune.registry import ENV_CREATOR, _global_registry

    name = register_rllib_env()
    assert name == "rlperf_atari" == atari.RLLIB_ENV_NAME
    assert _global_registry.contains(ENV_CREATOR, name)
    creator = _global_registry.get(ENV_CREATOR, name)
    env = creator(FakeEnvContext({"dim": 42, "seed": 0}, worker_index=1))
    obs, _ = env.reset()
    assert obs.shape == (42, 42, 4)
    assert env.action_space == gym.spaces.Discrete(6)
    env.close()


def test_import_is_cheap() -> None:
    code = (
        "import sys, rlperf.envs; "
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'ray', 'tensorflow', 'torch'}))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


@pytest.mark.slow
def test_real_rllib_env_context_gives_per_worker_seeds() -> None:
    from ray.rllib.env.env_context import EnvContext  # ~6 s: imports RLlib

    seeds = [
        make_atari_env(EnvContext({"seed": 11}, worker_index=w, vector_index=v)).default_seed
        for w, v in ((0, 0), (1, 0), (1, 1), (2, 0))
    ]
    assert seeds == [11, derive_seed(11, 1), derive_seed(11, 1, 1), derive_seed(11, 2)]
    assert len(set(seeds)) == 4
