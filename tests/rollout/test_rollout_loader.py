"""Rollout stage without Ray: checking a run, its effective config, presets, the timed loop."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
import torch
from omegaconf import OmegaConf
from support.run_folders import TINY_FILTERS, make_run

from rlperf.algos import plan_resources
from rlperf.errors import CheckpointError, ConfigError, SkipCell
from rlperf.layout import (
    CHECKPOINT_DIR,
    EPISODES_FILE,
    POLICY_FILE,
    RLLIB_METADATA,
    STEPS_FILE,
    SUMMARY_FILE,
)
from rlperf.models.policy_file import save_policy
from rlperf.models.vision_net import VisionNet
from rlperf.resources.plan import Machine
from rlperf.results.latency import LatencyRecorder
from rlperf.rollout.rollout_job import check_hardware, play
from rlperf.rollout.timing import measure_timer
from rlperf.runs.checkpoint import load_trained_run
from rlperf.runs.jobs import JobQuery
from rlperf.runs.locate import resolve_paths
from rlperf.runs.merge import merge_run_config
from rlperf.validation.validate import validate_config
from tests.conftest import CONF, group_options


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    return make_run(tmp_path)


# --------------------------------------------------------------------------- paths


def test_run_and_checkpoint_resolve_to_the_same_folders(run_dir: Path) -> None:
    ckpt = run_dir / CHECKPOINT_DIR
    assert resolve_paths(str(run_dir), None) == (run_dir, ckpt)
    assert resolve_paths(None, str(ckpt)) == (run_dir, ckpt)
    assert resolve_paths(None, str(ckpt / POLICY_FILE)) == (run_dir, ckpt)
    # Relative paths are taken from the base folder (the working directory by default).
    assert resolve_paths("run", None, base=run_dir.parent) == (run_dir, ckpt)
    trained = load_trained_run(str(run_dir), None)
    assert trained.trained_iterations == 2 and trained.rlperf_version == "0.1.0"
    assert trained.config.env.dim == 42  # interpolations resolved against the run's model
    assert trained.describe()["model"]["conv_filters"] == TINY_FILTERS


def test_sweep_folder_picks_the_job_of_the_model(tmp_path: Path) -> None:
    a = make_run(tmp_path / "sweep" / "0")
    b = make_run(tmp_path / "sweep" / "1", dim=84, filters=[[4, [8, 8], 4], [8, [21, 21], 1]])
    OmegaConf.save(
        OmegaConf.merge(OmegaConf.load(b / ".hydra/config.yaml"), {"model": {"name": "m84"}}),
        b / ".hydra/config.yaml",
    )
    sweep = tmp_path / "sweep"
    for job, run in (("0", a), ("1", b)):
        shutil.move(run, sweep / f"job{job}")
    assert load_trained_run(str(sweep), None, query=JobQuery(model="m84")).run_dir == sweep / "job1"
    with pytest.raises(CheckpointError, match="sweep folder with 2 trained jobs"):
        load_trained_run(str(sweep), None)


# --------------------------------------------------------------------------- error paths


def test_missing_run_names_the_path(tmp_path: Path) -> None:
    with pytest.raises(CheckpointError) as err:
        load_trained_run(str(tmp_path / "nope"), None)
    assert str(tmp_path / "nope") in str(err.value) and "no such folder" in str(err.value)
    assert ".hydra/config.yaml and checkpoint/" in str(err.value)


def test_run_without_checkpoint_says_what_training_left(run_dir: Path) -> None:
    shutil.rmtree(run_dir / CHECKPOINT_DIR)
    (run_dir / SUMMARY_FILE).write_text(json.dumps({"status": "interrupted"}))
    with pytest.raises(CheckpointError) as err:
        load_trained_run(str(run_dir), None)
    msg = str(err.value)
    assert str(run_dir / CHECKPOINT_DIR) in msg and "status=interrupted" in msg


def test_checkpoint_moved_out_of_its_run_needs_the_run(run_dir: Path, tmp_path: Path) -> None:
    moved = tmp_path / "elsewhere" / "ckpt"
    shutil.copytree(run_dir / "checkpoint", moved)
    with pytest.raises(CheckpointError, match=r"no \.hydra/config\.yaml in .*elsewhere.*run="):
        load_trained_run(None, str(moved))
    # With the run given, the moved checkpoint is used.
    trained = load_trained_run(str(run_dir), str(moved))
    assert trained.checkpoint_dir == moved and trained.run_dir == run_dir


def test_incomplete_checkpoint_lists_what_is_missing(run_dir: Path) -> None:
    shutil.rmtree(run_dir / CHECKPOINT_DIR / "env_runner")
    with pytest.raises(CheckpointError) as err:
        load_trained_run(str(run_dir), None)
    msg = str(err.value)
    assert f"checkpoint {run_dir / 'checkpoint'} is incomplete" in msg
    assert "env_runner/env_to_module_connector, env_runner/module_to_env_connector" in msg


def test_truncated_policy_file(run_dir: Path) -> None:
    path = run_dir / CHECKPOINT_DIR / POLICY_FILE
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(CheckpointError) as err:
        load_trained_run(str(run_dir), None)
    assert str(path) in str(err.value) and "truncated or not a torch file" in str(err.value)


def test_truncated_rllib_metadata(run_dir: Path) -> None:
    path = run_dir / CHECKPOINT_DIR / RLLIB_METADATA
    path.write_text(path.read_text()[:10])
    with pytest.raises(CheckpointError, match="rllib_checkpoint.json is truncated or not JSON"):
        load_trained_run(str(run_dir), None)


def test_truncated_run_config(run_dir: Path) -> None:
    path = run_dir / ".hydra" / "config.yaml"
    path.write_text("stage: train\nmodel:\n  name: tiny\n")
    with pytest.raises(CheckpointError) as err:
        load_trained_run(str(run_dir), None)
    assert str(path) in str(err.value) and "model.dim" in str(err.value)


def test_checkpoint_of_another_model(run_dir: Path) -> None:
    other = [[4, [8, 8], 4], [8, [4, 4], 2], [32, [6, 6], 1]]
    save_policy(VisionNet((42, 42, 4), 6, other), run_dir / CHECKPOINT_DIR / POLICY_FILE)
    with pytest.raises(CheckpointError) as err:
        load_trained_run(str(run_dir), None)
    msg = str(err.value)
    assert "holds another model than its run's config" in msg
    assert "[32, [6, 6], 1]" in msg and "model=tiny" in msg


@pytest.mark.parametrize(
    ("change", "fragment"),
    [
        ({"rlperf_version": "0.0.3"}, "written by rlperf 0.0.3 (policy format 2)"),
        ({"format_version": 7}, "(policy format 7)"),
    ],
)
def test_checkpoint_of_an_incompatible_rlperf(run_dir: Path, change: dict, fragment: str) -> None:
    path = run_dir / CHECKPOINT_DIR / POLICY_FILE
    payload = torch.load(path, weights_only=True)
    payload.update(change)
    torch.save(payload, path)
    with pytest.raises(CheckpointError) as err:
        load_trained_run(str(run_dir), None)
    msg = str(err.value)
    assert str(path) in msg and fragment in msg
    assert "reads checkpoints of rlperf 0.1.x with policy format 1" in msg


def test_checkpoint_of_an_incompatible_ray(run_dir: Path) -> None:
    path = run_dir / CHECKPOINT_DIR / RLLIB_METADATA
    path.write_text(json.dumps({"ray_version": "2.9.3"}))
    with pytest.raises(CheckpointError, match=r"written by Ray 2\.9\.3; .* Ray 2\.60\.x"):
        load_trained_run(str(run_dir), None)


def test_a_rollout_folder_is_not_a_training_run(tmp_path: Path) -> None:
    run = make_run(tmp_path, stage="rollout")
    with pytest.raises(CheckpointError, match="is a stage=rollout job, not a training job"):
        load_trained_run(str(run), None)


# --------------------------------------------------------------------------- config


def test_model_and_env_come_from_the_run(compose_cfg, run_dir: Path) -> None:
    cfg = compose_cfg("stage=rollout", f"run={run_dir}", "seed=3", "workers=0")
    assert cfg.model.name == "model1"  # the job's default, not what the run trained
    trained = load_trained_run(cfg.run, cfg.checkpoint)
    eff = merge_run_config(cfg, trained, overrides=["stage=rollout", f"run={run_dir}"])
    assert eff.model.name == "tiny" and list(eff.model.conv_filters) == TINY_FILTERS
    assert eff.env.dim == 42 and eff.env.max_episode_steps is None
    assert eff.algo.train_batch_size == 256  # the run's algo
    assert (eff.seed, eff.workers, eff.stage) == (3, 0, "rollout")  # the job's own
    validate_config(eff)


def test_command_line_env_keys_apply_on_top(compose_cfg, run_dir: Path) -> None:
    cfg = compose_cfg("stage=rollout", f"run={run_dir}", "env.max_episode_steps=100")
    eff = merge_run_config(cfg, load_trained_run(cfg.run, None), ["env.max_episode_steps=100"])
    assert eff.env.max_episode_steps == 100 and eff.env.noop_max == 30 and eff.env.dim == 42


def test_explicit_other_model_is_an_error(compose_cfg, run_dir: Path) -> None:
    cfg = compose_cfg("stage=rollout", f"run={run_dir}", "model=model3")
    with pytest.raises(ConfigError) as err:
        merge_run_config(cfg, load_trained_run(cfg.run, None), ["model=model3"])
    assert "model=model3 was given" in str(err.value) and "trained model=tiny" in str(err.value)
    same = compose_cfg("stage=rollout", f"run={run_dir}", "model=tiny")
    assert merge_run_config(same, load_trained_run(cfg.run, None), ["model=tiny"]).model.dim == 42


@pytest.mark.parametrize(
    ("overrides", "fragment"),
    [
        (["backend=tflite_fp32"], "backend=tflite_fp32 with stage=rollout"),
        (["rollout.steps=50"], "rollout.warmup_steps=100 >= rollout.steps=50"),
        (["rollout.device=cuda"], "rollout.device=cuda with gpu_layout=none"),
        (["rollout.start_algorithm=false", "workers=2"], "rollout.start_algorithm=false"),
        (["rollout.torch_threads=0"], "rollout.torch_threads=0"),
        (["rollout.episodes=0"], "rollout.episodes=0"),
    ],
)
def test_bad_rollout_values(compose_cfg, overrides: list[str], fragment: str) -> None:
    cfg = compose_cfg("stage=rollout", "run=/some/run", *overrides)
    with pytest.raises(ConfigError) as err:
        validate_config(cfg)
    assert fragment in str(err.value)


# The study's rollout matrix (docs/study.md): workers, gpu_layout, driver GPUs, GPUs per worker.
ROLLOUT_MATRIX = {
    "r1": (8, "gpu0", 0.0001, 0.1249875),
    "r2": (8, "gpu1", 0.0001, 0.1249875),
    "r3": (8, "both", 0.001, 0.249875),
    "r4": (16, "both", 0.0001, 0.12499375),
    "r5": (0, "gpu0_driver", 1.0, 0.0),
    "r6": (0, "gpu1_driver", 1.0, 0.0),
    "r7": (0, "both_driver", 2.0, 0.0),
    "r8": (0, "none", 0.0, 0.0),
}


@pytest.mark.parametrize("row", group_options("study/rollout_row"))
def test_study_rollout_rows(compose_cfg, row: str) -> None:
    cfg = compose_cfg("experiment=study_rollout", f"study/rollout_row={row}", "run=/some/run")
    validate_config(cfg)
    plan = plan_resources(cfg)
    workers, layout, driver, per_worker = ROLLOUT_MATRIX[row]
    assert (cfg.stage, cfg.workers, cfg.gpu_layout.name) == ("rollout", workers, layout)
    assert plan.driver_gpus == pytest.approx(driver)
    assert plan.gpus_per_worker == pytest.approx(per_worker)
    assert cfg.rollout.episodes == 10 and cfg.rollout.start_algorithm is True
    # The row's Algorithm passes RLlib's validation (the sweep plans resources with it):
    # one bundle for the driver, one per env runner, one per remote learner.
    from rlperf.algos import build_algo_config

    algo_config = build_algo_config(cfg, plan)
    bundles = algo_config.algo_class.default_resource_request(algo_config).bundles
    assert len(bundles) == 1 + workers + plan.num_learners


def test_study_rollout_sweeps_all_eight_rows() -> None:
    preset = OmegaConf.load(CONF / "experiment" / "study_rollout.yaml")
    rows = str(preset.hydra.sweeper.params["study/rollout_row"]).split(",")
    assert rows == list(ROLLOUT_MATRIX) == group_options("study/rollout_row")


# --------------------------------------------------------------------------- hardware


def test_gpu_cells_are_skipped_without_gpus(compose_cfg) -> None:
    cfg = compose_cfg("stage=rollout", "run=/r", "gpu_layout=gpu0_driver", "workers=0")
    ctx = SimpleNamespace(
        plan=plan_resources(cfg), machine=Machine(cpus=(0, 1), gpus=0, gpu_source="test")
    )
    with pytest.raises(SkipCell, match=r"gpu_layout=gpu0_driver needs GPU\(s\) \[0\]"):
        check_hardware(cfg, ctx)
    cpu = compose_cfg("stage=rollout", "run=/r", "workers=0")
    ctx.plan = plan_resources(cpu)
    assert str(check_hardware(cpu, ctx)) == "cpu"


# --------------------------------------------------------------------------- the loop


class CountingEnv:
    """An env whose episodes last ``length`` steps with reward +1 on the last step."""

    def __init__(self, length: int) -> None:
        self.length, self.t, self.resets = length, 0, 0

    def reset(self) -> tuple[np.ndarray, dict]:
        self.t, self.resets = 0, self.resets + 1
        return np.zeros(3), {}

    def step(self, action: int) -> tuple[np.ndarray, float, bool, bool, dict]:
        self.t += 1
        done = self.t == self.length
        return np.full(3, self.t), float(done), done, False, {}


class EchoPolicy:
    """Acts with the step count modulo 6; pretends its forward took 1 µs."""

    last_forward_ns = 1000

    def __init__(self) -> None:
        self.n = 0

    def reset(self) -> None:
        pass

    def act(self, obs: np.ndarray, reward: float = 0.0) -> int:
        self.n += 1
        return self.n % 6


def test_play_records_every_step_and_finished_episodes(tmp_path: Path) -> None:
    env, lines = CountingEnv(7), []
    with LatencyRecorder(tmp_path, warmup_steps=5) as rec:
        counts = play(EchoPolicy(), env, rec, episodes=3, progress=lines.append)
    assert counts == (21, 3) and env.resets == 3
    steps = pd.read_csv(tmp_path / STEPS_FILE)
    assert (
        list(steps["step"]) == list(range(21))
        and list(steps["episode"]) == [0] * 7 + [1] * 7 + [2] * 7
    )
    warm = steps["excluded"].eq("warmup")
    assert warm.sum() == 5 and warm[:5].all()
    assert (steps["forward_ms"] == 0.001).all() and (steps["action_ms"] > 0).all()
    eps = pd.read_csv(tmp_path / EPISODES_FILE)
    assert list(eps["return"]) == [1.0] * 3 and list(eps["length"]) == [7] * 3
    assert len(lines) == 3 and lines[0].startswith("episode 1/3: return +1, 7 steps")


def test_play_stops_after_steps_and_keeps_the_unfinished_episode(tmp_path: Path) -> None:
    with LatencyRecorder(tmp_path, warmup_steps=2) as rec:
        counts = play(EchoPolicy(), CountingEnv(4), rec, episodes=1, steps=10)
        assert rec.latency_summary()["action_ms"]["count"] == 8
    assert (counts.steps, counts.episodes_finished) == (10, 2)
    assert len(pd.read_csv(tmp_path / STEPS_FILE)) == 10  # the partial third episode too
    assert len(pd.read_csv(tmp_path / EPISODES_FILE)) == 2


def test_timer_overhead_is_measured() -> None:
    info = measure_timer(samples=2001)
    assert 0 < info.overhead_ns < 100_000 and info.overhead_ns <= info.overhead_p99_ns
    assert info.resolution_ns > 0 and info.clock == "time.perf_counter_ns"
