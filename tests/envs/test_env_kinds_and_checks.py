"""Env kinds, user environments and their checks before Ray starts (rlperf.envs, validate)."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest

from rlperf.envs import check
from rlperf.envs.ceiling import env_ceiling
from rlperf.envs.factory import env_spaces, make_env
from rlperf.envs.frozenlake import FrozenLake
from rlperf.errors import ConfigError, EnvCheckError
from rlperf.layout import METRICS_FILE, SUMMARY_FILE
from rlperf.validation.validate import validate_config
from tests.conftest import REPO, run_rlperf

BAD = "support.bad_envs"

#: Bad env -> (the call the message names, what it says was wrong).
BAD_ENVS = {
    "OldGymStep": ("step(action) returned", "expected (obs, reward, terminated, truncated, info)"),
    "ObsOutsideSpace": ("reset returned an observation outside observation_space", "[9.]"),
    "ResetWithoutSeed": ("reset(seed=123, options=None) raised TypeError", "def reset(self, *,"),
    "BrokenConstructor": (
        "BrokenConstructor(env.config={'size': 3}) raised ValueError",
        "size must be given",
    ),  # fmt: skip
    "TerminatedNotBool": ("step(action) returned terminated=", "expected a bool"),
    "NotAnEnv": ("returned a NotAnEnv, not a gymnasium.Env", "subclass of gymnasium.Env"),
}


@pytest.fixture(autouse=True)
def _fresh_check_cache():
    check._CACHE.clear()
    yield
    check._CACHE.clear()


def custom(compose_cfg, entry_point: str, *extra: str):
    return compose_cfg(
        "env=custom", f"env.entry_point={entry_point}", "env.config={size: 3}", "model=mlp64",
        *extra,
    )  # fmt: skip


@pytest.mark.parametrize("name", sorted(BAD_ENVS))
def test_bad_user_env_is_refused_naming_entry_point_call_and_fault(compose_cfg, name) -> None:
    call, fault = BAD_ENVS[name]
    with pytest.raises(ConfigError) as err:
        validate_config(custom(compose_cfg, f"{BAD}:{name}"))
    msg = str(err.value)
    assert isinstance(err.value, EnvCheckError)
    assert msg.startswith(f"env.entry_point={BAD}:{name}: ")
    assert call in msg and fault in msg, msg


def test_import_errors_name_the_module_and_where_it_was_looked_for(compose_cfg) -> None:
    with pytest.raises(EnvCheckError, match="import support.bad_env_import raised "
                       "ImportError: this env needs the package 'gridworld_physics'"):  # fmt: skip
        validate_config(custom(compose_cfg, "support.bad_env_import:GridWorld"))
    with pytest.raises(EnvCheckError) as err:
        validate_config(custom(compose_cfg, "no_such_envs.grid:GridWorld"))
    assert "no module named 'no_such_envs' in the working directory" in str(err.value)
    with pytest.raises(EnvCheckError, match="has no attribute 'GridWorld'"):
        validate_config(custom(compose_cfg, f"{BAD}:GridWorld"))
    with pytest.raises(EnvCheckError, match="not of the form package.module:Class"):
        validate_config(custom(compose_cfg, "support.bad_envs.Walk"))


def test_unseeded_env_runs_with_a_logged_warning(compose_cfg, caplog) -> None:
    with caplog.at_level(logging.WARNING, logger="rlperf.envs.check"):
        validate_config(custom(compose_cfg, f"{BAD}:Unseeded", "env.max_episode_steps=50"))
    assert "did not seed np_random" in caplog.text and f"{BAD}:Unseeded" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="rlperf.envs.check"):
        validate_config(custom(compose_cfg, f"{BAD}:Walk", "env.max_episode_steps=50"))
    assert caplog.text == ""
    with caplog.at_level(logging.WARNING, logger="rlperf.envs.check"):
        validate_config(custom(compose_cfg, f"{BAD}:Walk"))  # no time limit: said, runs
    assert "has no time limit" in caplog.text


def test_checks_start_no_ray(tmp_path) -> None:
    """Every bad env is refused by validation alone: Ray is not even imported."""
    script = (
        "import json, sys\n"
        "from hydra import compose, initialize_config_module\n"
        "from rlperf.config.schema import register_configs\n"
        "from rlperf.errors import ConfigError\n"
        "from rlperf.validation.validate import validate_config\n"
        "register_configs()\n"
        "out = {}\n"
        "with initialize_config_module(config_module='rlperf.conf', version_base='1.3'):\n"
        f"    for name in {sorted(BAD_ENVS)!r} + ['gym:NoSuchEnv-v0']:\n"
        "        ov = (['env=gym', 'env.id=NoSuchEnv-v0'] if name.startswith('gym') else\n"
        f"              ['env=custom', 'env.entry_point={BAD}:' + name])\n"
        "        cfg = compose(config_name='config', overrides=ov + ['model=mlp64'])\n"
        "        try:\n"
        "            validate_config(cfg)\n"
        "            out[name] = None\n"
        "        except ConfigError as exc:\n"
        "            out[name] = str(exc)\n"
        "print(json.dumps({'errors': out, 'ray': 'ray' in sys.modules}))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", script], cwd=REPO / "tests", capture_output=True, text=True,
        timeout=120,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["ray"] is False
    assert all(result["errors"].values()), result["errors"]
    assert (
        "env.id=NoSuchEnv-v0 is not a registered gymnasium id"
        in result["errors"]["gym:NoSuchEnv-v0"]
    )


def test_refused_user_env_leaves_an_invalid_summary_through_the_entry_point(tmp_path) -> None:
    (tmp_path / "my_envs.py").write_text(
        "import gymnasium as gym\n"
        "class Grid(gym.Env):\n"
        "    def __init__(self, config):\n"
        "        self.observation_space = gym.spaces.Discrete(4)\n"
        "        self.action_space = gym.spaces.Discrete(2)\n"
        "    def reset(self, seed=None):\n"
        "        return 0, {}\n"
    )
    out = tmp_path / "run"
    proc = run_rlperf(
        ["env=custom", "env.entry_point=my_envs:Grid", "model=mlp64", f"hydra.run.dir={out}"],
        cwd=tmp_path,
        timeout=120,
    )
    assert proc.returncode != 0
    summary = json.loads((out / SUMMARY_FILE).read_text())
    assert summary["status"] == "invalid" and summary["preflight"] is True
    assert summary["error"].startswith(
        "env.entry_point=my_envs:Grid: reset(seed=123, options=None)"
    )
    assert "unexpected keyword argument 'options'" in summary["error"]
    assert "Started a local Ray instance" not in proc.stderr + proc.stdout
    assert not (out / METRICS_FILE).exists()


# ------------------------------------------------------------------ env kinds


def test_env_kinds_show_only_their_own_keys(compose_cfg) -> None:
    atari_only = {"dim", "framestack", "frameskip", "skip", "noop_max", "fire_reset"}
    for option, kind in (("cartpole", "gym"), ("pendulum", "gym"), ("frozenlake", "custom")):
        env = compose_cfg(f"env={option}", "model=mlp64").env
        assert env.kind == kind and not atari_only & set(env), option
    assert atari_only <= set(compose_cfg().env)
    with pytest.raises(Exception, match="Could not override 'env.dim'"):
        compose_cfg("env=cartpole", "env.dim=84")


def test_study_replica_frameskip_range_can_be_set(compose_cfg) -> None:
    cfg = compose_cfg("env.frameskip=[2,5]", "env.skip=1", "env.repeat_action_probability=0.25",
                      "env.max_episode_steps=10000")  # fmt: skip
    validate_config(cfg)
    from rlperf.envs.from_config import env_config

    env = make_env(env_config(cfg))
    assert env.unwrapped._frameskip == (2, 5)
    env.close()
    with pytest.raises(ConfigError, match=r"env.frameskip=\[5, 2\] must be an int >= 1 or a pair"):
        validate_config(compose_cfg("env.frameskip=[5,2]"))


def test_unknown_ids_and_wrong_kinds_are_config_errors(compose_cfg) -> None:
    with pytest.raises(ConfigError, match="env.id=NoSuchEnv-v0 is not a registered gymnasium id"):
        validate_config(compose_cfg("env.id=NoSuchEnv-v0"))
    with pytest.raises(ConfigError, match="env.id=CartPole-v1 is not an ALE .* use env=gym"):
        validate_config(compose_cfg("env.id=CartPole-v1"))
    with pytest.raises(ConfigError, match=r"gymnasium.make\('CartPole-v1', \*\*env.config\) "
                       "raised TypeError"):  # fmt: skip
        validate_config(compose_cfg("env=cartpole", "model=mlp64", "env.config={gravity: 1}"))
    with pytest.raises(ConfigError, match="env.kind=custom needs env.entry_point"):
        validate_config(compose_cfg("env=custom", "model=mlp64"))


def test_model_env_compatibility_names_a_model_that_fits(compose_cfg) -> None:
    with pytest.raises(ConfigError) as err:
        validate_config(compose_cfg("model=model1", "env=cartpole"))
    assert "model=model1" in str(err.value) and "Box(4, float32)" in str(err.value)
    assert "use model=mlp64" in str(err.value)
    with pytest.raises(ConfigError) as err:
        validate_config(compose_cfg("model=mlp64", "env=pong"))
    assert "image frames" in str(err.value) and "use model=model1" in str(err.value)
    with pytest.raises(ConfigError, match=r"observations Discrete\(16\).*use model=mlp64"):
        validate_config(compose_cfg("model=tiny", "env=frozenlake"))
    validate_config(compose_cfg("model=mlp256", "env=pendulum"))


def test_gym_and_custom_envs_get_time_limits_and_default_seeds() -> None:
    env = make_env({"kind": "custom", "entry_point": "rlperf.envs.frozenlake:FrozenLake",
                    "max_episode_steps": 3, "seed": 5})  # fmt: skip
    env.reset()
    results = [env.step(0) for _ in range(3)]  # left into the wall: never ends by itself
    assert [r[3] for r in results] == [False, False, True]  # truncated by the time limit
    a = make_env({"kind": "gym", "id": "CartPole-v1", "seed": 7})
    b = make_env({"kind": "gym", "id": "CartPole-v1", "seed": 7})
    np.testing.assert_array_equal(a.reset()[0], b.reset()[0])
    assert not np.array_equal(a.reset()[0], make_env({"kind": "gym", "id": "CartPole-v1",
                                                      "seed": 8}).reset()[0])  # fmt: skip
    obs_space, act_space = env_spaces({"kind": "gym", "id": "Pendulum-v1"})
    assert obs_space.shape == (3,) and isinstance(act_space, gym.spaces.Box)


def test_frozenlake_is_deterministic_and_ends_in_holes_and_at_the_goal() -> None:
    env = FrozenLake({"map": ["SF", "HG"]})
    assert env.observation_space == gym.spaces.Discrete(4)
    assert env.reset(seed=0) == (0, {})
    assert env.step(1)[:3] == (2, 0.0, True)  # down into the hole
    env.reset()
    assert env.step(2)[:3] == (1, 0.0, False)  # right
    assert env.step(1)[:3] == (3, 1.0, True)  # down onto the goal
    env.reset()
    assert env.step(3)[0] == 0  # up into the border: stays
    with pytest.raises(ValueError, match="exactly one S"):
        FrozenLake({"map": ["FF", "FG"]})


# ------------------------------------------------------------------ ceiling


def test_env_ceiling_is_measured_once_then_cached(tmp_path) -> None:
    lake = {"kind": "custom", "entry_point": "rlperf.envs.frozenlake:FrozenLake",
            "max_episode_steps": 100}  # fmt: skip
    first = env_ceiling({**lake, "seed": 0}, 0.2, tmp_path)
    assert first["cached"] is False and first["probe_s"] >= 0.2
    assert first["steps"] / first["seconds"] == pytest.approx(first["steps_per_s"])
    again = env_ceiling({**lake, "seed": 3}, 0.2, tmp_path)  # the seed is not part of the key
    assert again["cached"] is True and again["probe_s"] == 0.0
    assert again["steps_per_s"] == first["steps_per_s"]
    other = env_ceiling({**lake, "max_episode_steps": 10}, 0.2, tmp_path)
    assert other["cached"] is False and len(list(tmp_path.glob("*.json"))) == 2


def test_sampling_efficiency_is_per_runner_over_the_ceiling() -> None:
    import math

    from rlperf.training.training_job import sampling_efficiency

    assert sampling_efficiency(1000, 2.0, 2, 1000.0) == pytest.approx(0.25)
    assert math.isnan(sampling_efficiency(1000, 2.0, 1, None))
    assert math.isnan(sampling_efficiency(1000, 0.0, 1, 1000.0))


def test_shipped_docs_name_every_env_option() -> None:
    text = (REPO / "docs" / "configuration.md").read_text()
    for option in sorted(p.stem for p in (REPO / "conf" / "env").glob("*.yaml")):
        assert f"`{option}`" in text, option
    assert Path(REPO / "docs" / "custom-env.md").is_file()
