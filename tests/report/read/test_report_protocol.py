"""The env protocol record (rlperf.results.protocol): what it says of rlperf's own envs and
of the 2021 study's, that it describes the env rlperf really builds, how the job wrapper
writes it and how the report reads it back (rlperf.report.read.load / legacy)."""

from __future__ import annotations

import json

import gymnasium as gym
import pytest
from omegaconf import OmegaConf

from rlperf.envs.atari import DEFAULT_ENV_CONFIG, make_atari_env
from rlperf.envs.from_config import env_config
from rlperf.job_wrapper import record_env_protocol
from rlperf.report.read.discover import CellRef
from rlperf.report.read.legacy import load_rollout_csv, load_tune_run
from rlperf.report.read.load import load_rlperf_cell
from rlperf.results.protocol import (
    ALE_FRAME_CAP,
    ALE_REGISTRATION,
    ATARI_DEFAULTS,
    GYM017_GAMES,
    env_protocol,
    legacy_env_protocol,
    protocol_key,
    protocol_text,
)
from rlperf.results.record import RunRecord
from tests.conftest import THESIS
from tests.support import synthetic

STUDY_RUN = THESIS / "ray_results" / "volta1_def" / "model1_gpu0_8_workers"


def _study_params() -> dict:
    return json.loads((STUDY_RUN / "params.json").read_text())


def test_the_defaults_table_is_rlperfs() -> None:
    """The results layer may not import rlperf.envs, so it writes the defaults again."""
    assert {k: v for k, v in DEFAULT_ENV_CONFIG.items() if k != "seed"} == ATARI_DEFAULTS
    assert set(DEFAULT_ENV_CONFIG) - set(ATARI_DEFAULTS) == {"seed"}


def test_the_quickstart_env_is_v5_with_a_fixed_skip_of_4(compose_cfg) -> None:
    cfg = compose_cfg()  # `rlperf` as the README's quickstart runs it: env=pong, model1
    p = env_protocol(env_config(cfg))
    assert (p["kind"], p["env_id"], p["env_version"]) == ("atari", "ALE/Pong-v5", "v5")
    assert (p["frameskip"], p["agent_skip"], p["frames_per_step"]) == (1, 4, 4.0)
    assert p["sticky_action_probability"] == 0.0 and p["action_set"] == "minimal"
    assert p["max_frames_per_episode"] == 108_000 and p["max_episode_steps"] is None
    assert (p["noop_max"], p["episodic_life"], p["fire_reset"]) == (30, True, True)
    assert p["reward_clipping"] is False and p["return_reported"] == "raw score"
    assert p["observation"] == {"dim": 84, "framestack": 4, "grayscale": True}
    assert (p["engine"], p["schema"]) == ("python", 1)
    assert protocol_text(p) == "Pong v5 · skip 4 · sticky 0 · episodic life"
    # The model sets the frame size: model3 plays 252x252 frames, another protocol.
    big = env_protocol(env_config(compose_cfg("model=model3")))
    assert big["observation"]["dim"] == 252 and protocol_key(big) != protocol_key(p)
    # A config of rlperf 0.1 has no kind and may lack keys: Atari, with the defaults.
    assert env_protocol({"id": "ALE/Pong-v5", "dim": 84, "framestack": 4}) == p


def test_the_study_params_give_pong_v0_with_sticky_actions_and_a_random_skip() -> None:
    p = legacy_env_protocol(_study_params())  # "env": null: the study's Pong-v0
    assert (p["env_id"], p["env_version"]) == ("Pong-v0", "v0")
    assert p["frameskip"] == [2, 5] and p["agent_skip"] == 1 and p["frames_per_step"] == 3.0
    assert p["sticky_action_probability"] == 0.25
    # gym 0.17's TimeLimit of 10 000 steps, at a mean of 3 frames each; no ALE frame cap.
    assert p["max_episode_steps"] == 10_000 and p["max_frames_per_episode"] == 30_000
    # RLlib 1.x clipped Atari rewards for the learner (clip_rewards null) and reported the
    # raw score from MonitorEnv.
    assert p["reward_clipping"] is True and p["return_reported"] == "raw score"
    assert p["observation"] == {"dim": 84, "framestack": 4, "grayscale": True}
    assert (p["noop_max"], p["episodic_life"], p["fire_reset"]) == (30, True, True)
    assert protocol_text(p) == (
        "Pong v0 · frameskip 2–4 · sticky 0.25 · episodic life · clipped rewards · ≤10,000 steps"
    )
    # NoFrameskip ids got RLlib's MaxAndSkip(4): 4 frames per step, the TimeLimit's 400 000
    # ALE steps are 100 000 env steps; without the deepmind wrappers nothing is clipped.
    nfs = legacy_env_protocol({"env": "BreakoutNoFrameskip-v4", "model": {"dim": 42}})
    assert (nfs["frameskip"], nfs["agent_skip"], nfs["frames_per_step"]) == (1, 4, 4.0)
    assert nfs["sticky_action_probability"] == 0.0 and nfs["max_episode_steps"] == 100_000
    assert nfs["observation"]["dim"] == 42
    raw = legacy_env_protocol({"env": "Pong-v0", "preprocessor_pref": "rllib"})
    assert raw["reward_clipping"] is False and raw["agent_skip"] == 1
    assert legacy_env_protocol({"env": "CartPole-v0"})["kind"] == "gym"


def test_the_quickstart_and_the_study_are_different_work(compose_cfg) -> None:
    quick = env_protocol(env_config(compose_cfg()))
    study = legacy_env_protocol(_study_params())
    assert protocol_key(quick) != protocol_key(study)
    # rlperf's replica of the study's env (docs/environment.md) matches its frames and
    # sticky actions, but not its reward clipping or id: still another protocol.
    replica = env_protocol(
        env_config(
            compose_cfg(
                "env.frameskip=[2,5]",
                "env.skip=1",
                "env.repeat_action_probability=0.25",
                "env.max_episode_steps=10000",
            )
        )
    )
    same = ("frameskip", "frames_per_step", "sticky_action_probability", "max_frames_per_episode")
    assert {k: replica[k] for k in same} == {k: study[k] for k in same}
    assert protocol_key(replica) not in (protocol_key(study), protocol_key(quick))


@pytest.mark.parametrize("env_id", ["Pong-v0", "Pong-v4", "PongNoFrameskip-v0",
                                    "PongNoFrameskip-v4", "ALE/Pong-v5"])  # fmt: skip
def test_ale_registration_is_as_the_docstring_says(env_id: str) -> None:
    spec = gym.spec(env_id)
    pattern = env_id.replace("Pong", "{Game}")
    frameskip, sticky = ALE_REGISTRATION[pattern]
    assert spec.kwargs["frameskip"] == frameskip
    assert spec.kwargs["repeat_action_probability"] == sticky
    assert spec.kwargs["max_num_frames_per_episode"] == ALE_FRAME_CAP
    assert spec.kwargs["full_action_space"] is False and spec.max_episode_steps is None


def test_the_old_atari_games_are_ale_pys_legacy_ids() -> None:
    registered = {
        spec.id.removesuffix("-v0")
        for spec in gym.registry.values()
        if spec.id.endswith("-v0") and "/" not in spec.id and "Frameskip" not in spec.id
        and str(spec.entry_point).startswith("ale_py")
    }  # fmt: skip
    assert registered == GYM017_GAMES


@pytest.mark.parametrize(
    "env",
    [
        {},
        {"id": "PongNoFrameskip-v4", "frameskip": [2, 5], "skip": 1, "max_episode_steps": 9000},
        {"repeat_action_probability": 0.25, "skip": 2, "frameskip": 3},
    ],
)
def test_the_record_describes_the_env_rlperf_builds(env: dict) -> None:
    """Whatever the id registers, rlperf's env has the record's frameskip, sticky actions,
    frame cap and action set (ALE's own settings, read back from the emulator)."""
    p = env_protocol(env)
    built = make_atari_env(env)
    try:
        ale_env = built.unwrapped
        frameskip = ale_env._frameskip
        assert (list(frameskip) if isinstance(frameskip, tuple) else frameskip) == p["frameskip"]
        ale = ale_env.ale
        assert ale.getFloat("repeat_action_probability") == pytest.approx(
            p["sticky_action_probability"]
        )
        assert ale.getInt("max_num_frames_per_episode") == ALE_FRAME_CAP
        assert p["max_frames_per_episode"] == min(
            ALE_FRAME_CAP, round((p["max_episode_steps"] or 1e9) * p["frames_per_step"])
        )
        assert built.action_space.n == 6 and p["action_set"] == "minimal"  # Pong's minimal set
        assert built.observation_space.shape == (
            p["observation"]["dim"],
            p["observation"]["dim"],
            p["observation"]["framestack"],
        )
    finally:
        built.close()


def test_non_atari_envs_record_their_id_and_limit(compose_cfg) -> None:
    cart = env_protocol(env_config(compose_cfg("env=cartpole", "model=mlp64")))
    assert (cart["kind"], cart["env_id"], cart["env_version"]) == ("gym", "CartPole-v1", "v1")
    assert cart["frames_per_step"] is None and cart["observation"] is None
    assert protocol_text(cart) == "CartPole-v1"
    lake = env_protocol(env_config(compose_cfg("env=frozenlake", "model=mlp64")))
    assert lake["kind"] == "custom" and lake["max_episode_steps"] == 100
    assert lake["env_config"] == {"map": ["SFFF", "FHFH", "FFFH", "HFFG"]}
    assert protocol_text(lake) == "FrozenLake (custom) · ≤100 steps"
    other_map = env_protocol({**env_config(compose_cfg("env=frozenlake")), "config": {"map": []}})
    assert protocol_key(other_map) != protocol_key(lake)


def test_the_key_is_stable_and_counts_what_the_work_is() -> None:
    p = env_protocol({})
    read_back = json.loads(json.dumps(p))
    assert protocol_key(read_back) == protocol_key(p)
    assert protocol_key({**p, "frames_per_step": 4}) == protocol_key(p)  # 4 == 4.0
    # How the env is stepped is not what a step is: the engine, its threads and the
    # record's schema leave the key; a new field that does not apply (None) does too.
    same = {**p, "engine": "ale_vector", "threads": 2, "schema": 2, "seeds": None}
    assert protocol_key(same) == protocol_key(p)
    for field, value in [("sticky_action_probability", 0.25), ("frameskip", [2, 5]),
                         ("noop_max", 0), ("reward_clipping", True), ("env_id", "ALE/Pong-v4"),
                         ("action_set", "full"), ("max_episode_steps", 1000)]:  # fmt: skip
        assert protocol_key({**p, field: value}) != protocol_key(p), field
    assert len(protocol_key(p)) == 12


def test_the_job_wrapper_records_the_env_the_job_played(compose_cfg) -> None:
    cfg = compose_cfg()
    resolved = OmegaConf.to_container(cfg, resolve=True)
    train = {"stage": "train"}
    record_env_protocol(RunRecord(train), resolved)
    assert train["env_protocol"] == env_protocol(resolved["env"])
    # A rollout plays the upstream run's env (recorded as summary["env"]), not its own cfg.env.
    played = {**env_config(cfg), "repeat_action_probability": 0.25}
    rollout = {"stage": "rollout", "env": played}
    record_env_protocol(RunRecord(rollout), resolved)
    assert rollout["env_protocol"]["sticky_action_probability"] == 0.25
    # An edge job records the Atari keys without kind; one that failed before resolving its
    # run has no env yet, and a serve job plays none.
    edge = {"stage": "edge", "env": {k: v for k, v in played.items() if k != "kind"}}
    record_env_protocol(RunRecord(edge), resolved)
    assert edge["env_protocol"] == rollout["env_protocol"]
    for summary in ({"stage": "edge"}, {"stage": "serve", "env": played}):
        record_env_protocol(RunRecord(summary), resolved)
        assert "env_protocol" not in summary


def test_the_report_reads_the_record_or_derives_it_from_the_config(tmp_path) -> None:
    cfg = synthetic.resolved_config(model="model3")  # as Hydra writes it: ${model.dim}
    assert str(cfg["env"]["dim"]).startswith("${")
    recorded = {**env_protocol({}), "noop_max": 7}
    summary = {"status": "completed", "stage": "train", "env_protocol": recorded}
    metrics = synthetic.pd.DataFrame({"iteration": [1], "iter_s": [1.0], "excluded": [""]})
    synthetic.write_cell(tmp_path / "a", synthetic.CellSpec(cfg, [], None, summary, metrics))
    cell = load_rlperf_cell(CellRef(tmp_path / "a", "rlperf", "a", "g"))
    assert cell.env_protocol == recorded
    assert not any("protocol" in n for n in cell.notes)
    # Written before the record existed: derived from the env subtree, said in the notes.
    old = {"status": "completed", "stage": "train"}
    synthetic.write_cell(tmp_path / "b", synthetic.CellSpec(cfg, [], None, old, metrics))
    cell = load_rlperf_cell(CellRef(tmp_path / "b", "rlperf", "b", "g"))
    assert cell.env_protocol["observation"] == {"dim": 252, "framestack": 4, "grayscale": True}
    assert cell.env_protocol["frames_per_step"] == 4.0
    assert any("derived from the config" in n for n in cell.notes)
    # A rollout killed before it resolved its run: its composed env is not the run's.
    rollout_cfg = synthetic.resolved_config(stage="rollout")
    synthetic.write_cell(tmp_path / "c", synthetic.CellSpec(rollout_cfg, [], None, None))
    cell = load_rlperf_cell(CellRef(tmp_path / "c", "rlperf", "c", "g"))
    assert cell.env_protocol == {} and any("protocol unknown" in n for n in cell.notes)


def test_legacy_cells_carry_the_studys_protocol() -> None:
    cell = load_tune_run(CellRef(STUDY_RUN, "tune", STUDY_RUN.name, "volta1_def"))
    assert cell.env_protocol == legacy_env_protocol(_study_params())
    assert cell.env_protocol["sticky_action_probability"] == 0.25
    assert any("Pong-v0" in n and "assumed" in n for n in cell.notes)
    path = THESIS / "rollout_results" / "artecslab001" / "model1_tflite.csv"
    rollout = load_rollout_csv(CellRef(path, "rollout_csv", path.stem, "artecslab001",
                                       "episode_means"))  # fmt: skip
    assert protocol_key(rollout.env_protocol) == protocol_key(cell.env_protocol)
    assert any("rollout file names no env" in n for n in rollout.notes)
