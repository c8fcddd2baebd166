"""The run-folder contract (rlperf.layout, rlperf.runs.*): names, finding a run, checks, merge,
probe."""

from __future__ import annotations

import ast
import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from omegaconf import OmegaConf
from support.run_folders import TINY_FILTERS, make_run

from rlperf.errors import CheckpointError, ConfigError
from rlperf.layout import (
    CHECKPOINT_DIR,
    CONFIG_FILE,
    EFFECTIVE_CONFIG_FILE,
    EPISODES_FILE,
    FINGERPRINT_FILE,
    METRICS_FILE,
    POLICY_FILE,
    PROBE_ATOL,
    PROBE_FILE,
    RL_MODULE_DIR,
    RLLIB_METADATA,
    STEPS_FILE,
    SUMMARY_FILE,
    TELEMETRY_FILE,
)
from rlperf.runs.checkpoint import load_trained_run
from rlperf.runs.jobs import JobQuery
from rlperf.runs.locate import find_run_dir, resolve_paths
from rlperf.runs.merge import merge_run_config, upstream_run, write_effective_config
from rlperf.runs.overrides import explicit_model, override_keys
from rlperf.runs.probe import Probe, check_probe, read_probe, write_probe
from tests.conftest import REPO

STAGE_PACKAGES = ("training", "rollout", "edge", "serve")


def _policy_only(root: Path) -> Path:
    """A run whose checkpoint holds rlperf's files but no RLlib part (what edge needs)."""
    run = make_run(root)
    ckpt = run / CHECKPOINT_DIR
    for part in ("learner_group", "env_runner", RLLIB_METADATA):
        target = ckpt / part
        shutil.rmtree(target) if target.is_dir() else target.unlink()
    return run


# --------------------------------------------------------------------------- finding a run


def test_checkpoint_means_the_folder_or_its_policy_file_for_every_stage(tmp_path: Path) -> None:
    run = make_run(tmp_path)
    ckpt = run / CHECKPOINT_DIR
    for given in (ckpt, ckpt / POLICY_FILE):
        assert resolve_paths(None, given) == (run, ckpt)
        for rllib in (True, False):  # rollout and edge read the same folders
            trained = load_trained_run(None, given, rllib=rllib)
            assert (trained.run_dir, trained.checkpoint_dir) == (run, ckpt)
            assert trained.policy_path == ckpt / POLICY_FILE
    # Relative to the base folder, like a path on the command line.
    assert resolve_paths(None, f"run/{CHECKPOINT_DIR}", base=tmp_path) == (run, ckpt)


def test_another_file_is_not_a_checkpoint(tmp_path: Path) -> None:
    run = make_run(tmp_path)
    write_probe(run / CHECKPOINT_DIR, np.zeros((1, 42, 42, 4), np.uint8), np.zeros((1, 6)))
    probe = run / CHECKPOINT_DIR / PROBE_FILE
    with pytest.raises(CheckpointError) as err:
        resolve_paths(None, probe)
    msg = str(err.value)
    assert f"{probe} is a file" in msg and f"its {POLICY_FILE}" in msg


def test_no_run_and_no_checkpoint(tmp_path: Path) -> None:
    with pytest.raises(CheckpointError, match=r"pass run=<training job folder> or checkpoint="):
        resolve_paths(None, None, base=tmp_path)


def _sweep(root: Path) -> Path:
    """A sweep folder with two trained jobs: 0 (model=tiny) and 1 (model=other)."""
    sweep = root / "sweep"
    sweep.mkdir()
    for job, name in (("0", "tiny"), ("1", "other")):
        run = make_run(root / job)
        cfg = OmegaConf.load(run / CONFIG_FILE)
        cfg.model.name = name
        OmegaConf.save(cfg, run / CONFIG_FILE)
        shutil.move(run, sweep / job)
    return sweep


def test_sweep_folder_resolves_to_the_job_of_the_model(tmp_path: Path) -> None:
    sweep = _sweep(tmp_path)
    assert find_run_dir(sweep, JobQuery(model="other")) == sweep / "1"
    trained = load_trained_run(sweep, None, query=JobQuery(model="tiny"), rllib=False)
    assert trained.run_dir == sweep / "0"
    with pytest.raises(CheckpointError) as err:
        find_run_dir(sweep)
    assert "sweep folder with 2 trained jobs (0 (model=tiny), 1 (model=other))" in str(err.value)
    assert "run_select=fastest|best_return|latest" in str(err.value)
    with pytest.raises(
        CheckpointError,
        match=r"no trained job matches model=model9; the folder holds 0 \(model=tiny\), 1 ",
    ):
        find_run_dir(sweep, JobQuery(model="model9"))


# --------------------------------------------------------------------------- checks


def test_edge_needs_the_policy_file_only(tmp_path: Path) -> None:
    run = _policy_only(tmp_path)
    ckpt = run / CHECKPOINT_DIR
    trained = load_trained_run(run, None, rllib=False)
    assert trained.ray_version is None and trained.trained_iterations == 2
    assert trained.model_config["obs_shape"] == [42, 42, 4]
    with pytest.raises(CheckpointError) as err:
        load_trained_run(run, None, rllib=True)
    assert f"checkpoint {ckpt} is incomplete" in str(err.value)
    assert f"rllib_checkpoint.json, {RL_MODULE_DIR}" in str(err.value)
    (ckpt / POLICY_FILE).unlink()
    with pytest.raises(CheckpointError) as err:
        load_trained_run(run, None, rllib=False)
    msg = str(err.value)
    assert f"checkpoint {ckpt} is incomplete: missing {POLICY_FILE};" in msg
    assert RLLIB_METADATA not in msg  # edge is not asked for RLlib parts


def test_truncated_probe_names_the_file(tmp_path: Path) -> None:
    run = make_run(tmp_path)
    probe = run / CHECKPOINT_DIR / PROBE_FILE
    probe.write_bytes(b"PK\x03\x04 not a zip")
    with pytest.raises(CheckpointError) as err:
        load_trained_run(run, None, rllib=False)
    assert str(probe) in str(err.value) and "truncated or unreadable" in str(err.value)


def test_probe_tolerance_is_per_device(tmp_path: Path) -> None:
    obs = np.arange(16, dtype=np.uint8).reshape(2, 2, 2, 2)
    logits = np.array([[0.0, 1.0, 0.5], [2.0, -1.0, 0.0]], dtype=np.float32)
    path = write_probe(tmp_path, obs, logits)
    probe = read_probe(tmp_path)
    assert probe is not None and probe.path == path == tmp_path / PROBE_FILE
    assert list(probe.actions) == [1, 0] and np.array_equal(probe.obs, obs)
    assert read_probe(tmp_path / "elsewhere") is None
    assert check_probe(None, lambda o: logits) is None

    off = logits + 5e-5  # beyond the CPU tolerance, within the GPU one
    gpu = check_probe(probe, lambda o: off, "cuda")
    assert gpu == {
        "observations": 2,
        "max_abs_logit_err": pytest.approx(5e-5, rel=1e-2),
        "greedy_agreement": 1.0,
        "tolerance": PROBE_ATOL["cuda"],
    }
    with pytest.raises(CheckpointError) as err:
        check_probe(probe, lambda o: off, "cpu")
    msg = str(err.value)
    assert f"in {path}" in msg and f"tolerance {PROBE_ATOL['cpu']} on cpu" in msg
    assert "come from different trainings" in msg
    exact = check_probe(probe, lambda o: logits)
    assert exact is not None and exact["max_abs_logit_err"] == 0.0
    assert exact["tolerance"] == PROBE_ATOL["cpu"] == 1e-5


# --------------------------------------------------------------------------- config


def test_override_keys_and_explicit_model(compose_cfg) -> None:
    overrides = ["+env.noop_max=0", "~env.seed", "model=tiny", "env=pong", "stage=edge"]
    assert override_keys(overrides) == {"env.noop_max", "env.seed", "model", "env", "stage"}
    cfg = compose_cfg("model=model3")
    assert explicit_model(cfg, ["model=model3"]) == "model3"
    assert explicit_model(cfg, ["model.dim=84"]) is None


@pytest.mark.parametrize("stage", ["rollout", "edge"])
def test_merge_takes_the_runs_env_model_and_algo(compose_cfg, tmp_path: Path, stage) -> None:
    run = make_run(tmp_path)
    trained = load_trained_run(run, None, rllib=stage == "rollout")
    cfg = compose_cfg(f"stage={stage}", f"run={run}", "env.max_episode_steps=100", "seed=7")
    merged = merge_run_config(cfg, trained, ["env.max_episode_steps=100", "seed=7"])
    assert (merged.model.name, list(merged.model.conv_filters)) == ("tiny", TINY_FILTERS)
    # The run's env (dim 42, noop_max 30), the command line's env.* on top.
    assert (merged.env.dim, merged.env.noop_max, merged.env.max_episode_steps) == (42, 30, 100)
    assert merged.env.id == "ALE/Pong-v5"
    # The run's algo values over the job's; keys the run lacks keep the job's.
    assert merged.algo.train_batch_size == 256 and merged.algo.num_epochs == cfg.algo.num_epochs
    assert (merged.seed, merged.stage) == (7, stage)  # the job's own
    # Without the command-line key, the run's value stands.
    assert merge_run_config(cfg, trained, []).env.max_episode_steps is None


@pytest.mark.parametrize("stage", ["rollout", "edge"])
def test_explicit_other_model_is_an_error_for_every_stage(
    compose_cfg, tmp_path: Path, stage
) -> None:
    run = make_run(tmp_path)
    trained = load_trained_run(run, None, rllib=False)
    cfg = compose_cfg(f"stage={stage}", f"run={run}", "model=model3")
    with pytest.raises(ConfigError) as err:
        merge_run_config(cfg, trained, ["model=model3"])
    msg = str(err.value)
    assert f"model=model3 was given, but the run {run} trained model=tiny" in msg
    assert f"the {stage} takes the model from the run" in msg
    same = compose_cfg(f"stage={stage}", f"run={run}", "model=tiny")
    assert merge_run_config(same, trained, ["model=tiny"]).model.dim == 42
    wider = compose_cfg(f"stage={stage}", f"run={run}", "model=tiny", "model.dim=84")
    with pytest.raises(ConfigError, match=r"model\.dim=84 was given"):
        merge_run_config(wider, trained, ["model.dim=84"])


def test_upstream_run_reads_the_command_line(compose_cfg, tmp_path: Path, monkeypatch) -> None:
    """A downstream job's run: model= picks the sweep's job, env.* apply on top."""
    sweep = _sweep(tmp_path)
    given = [f"run={sweep}", "model=tiny", "env.max_episode_steps=100"]
    cfg = compose_cfg("stage=edge", *given)
    monkeypatch.setattr("rlperf.runs.merge.command_line_overrides", lambda: ["stage=edge", *given])
    trained, ecfg = upstream_run(cfg, rllib=False)
    assert trained.run_dir == sweep / "0" and trained.config.model.name == "tiny"
    assert (ecfg.env.max_episode_steps, ecfg.env.dim, ecfg.model.dim) == (100, 42, 42)
    monkeypatch.setattr("rlperf.runs.merge.command_line_overrides", lambda: [f"run={sweep}"])
    with pytest.raises(CheckpointError, match="sweep folder with 2 trained jobs"):
        upstream_run(cfg, rllib=False)  # the composed model1 is no choice


def test_effective_config_file(compose_cfg, tmp_path: Path) -> None:
    run = make_run(tmp_path)
    cfg = compose_cfg("stage=rollout", f"run={run}")
    merged = merge_run_config(cfg, load_trained_run(run, None), [])
    path = write_effective_config(tmp_path, merged)
    assert path == tmp_path / EFFECTIVE_CONFIG_FILE
    saved = OmegaConf.load(path)
    assert saved.model.name == "tiny" and saved.env.dim == 42 and saved.stage == "rollout"


def test_edge_resolves_a_checkpoint_like_the_rollout(compose_cfg, tmp_path: Path) -> None:
    """``checkpoint=<policy file>`` in the edge stage: same run, merged env, effective config."""
    from rlperf.edge.cell import resolve_cell

    run = make_run(tmp_path / "runs")
    policy = run / CHECKPOINT_DIR / POLICY_FILE
    cfg = compose_cfg("stage=edge", f"checkpoint={policy}", f"edge.cache_dir={tmp_path / 'c'}")
    out = tmp_path / "out"
    out.mkdir()
    cell = resolve_cell(cfg, out)
    assert cell.trained is not None and cell.trained.run_dir == run
    assert cell.source["run"] == str(run) and cell.source["policy"] == str(policy)
    assert cell.source["model"] == "tiny" and cell.source["probe"] is None  # no probe.npz
    assert cell.env["dim"] == 42 and cell.env["noop_max"] == 30 and cell.num_actions == 6
    assert OmegaConf.load(out / EFFECTIVE_CONFIG_FILE).model.name == "tiny"


# --------------------------------------------------------------------------- structure


def _imported_modules(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
        elif isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
    return names


def _modules_after_import(module: str) -> list[str]:
    code = f"import sys, json, {module}\nprint(json.dumps(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


def test_run_folder_modules_import_no_heavy_library() -> None:
    """Ray, torch and TensorFlow (numpy too, below the validation layer) are imported by
    the functions that need them: a stage reads run folders before it starts any."""
    names = sorted(p.stem for p in (REPO / "rlperf" / "runs").glob("*.py") if p.stem != "__init__")
    loaded = _modules_after_import(
        ", ".join([*(f"rlperf.runs.{n}" for n in names), "rlperf.algos"])
    )
    assert [m for m in ("ray", "torch", "tensorflow") if m in loaded] == []
    below_validation = [f"rlperf.runs.{n}" for n in names if n != "merge"]
    assert "numpy" not in _modules_after_import(", ".join(below_validation))


def test_layout_imports_only_the_standard_library() -> None:
    """File names and statuses are read by every layer: reading one pulls none of them."""
    imported = _imported_modules(REPO / "rlperf" / "layout.py")
    assert {m.split(".")[0] for m in imported} <= set(sys.stdlib_module_names) | {"__future__"}
    loaded = _modules_after_import("rlperf.layout")
    ours = {m for m in loaded if m.startswith("rlperf")}
    assert ours == {"rlperf", "rlperf.layout"}
    assert "omegaconf" not in loaded


def test_the_policy_file_takes_only_names_from_the_run_folder_contract() -> None:
    """rlperf.models sits below rlperf.runs: the policy file reads rlperf.layout only."""
    imported = _imported_modules(REPO / "rlperf" / "models" / "policy_file.py")
    assert "rlperf.layout" in imported
    assert not [m for m in imported if m.startswith("rlperf.runs")]


# --------------------------------------------------------------------------- a real run


@pytest.mark.slow
def test_a_training_job_writes_the_layout(tiny_run: Path) -> None:
    ckpt = tiny_run / CHECKPOINT_DIR
    for name in (SUMMARY_FILE, FINGERPRINT_FILE, METRICS_FILE, TELEMETRY_FILE, CONFIG_FILE):
        assert (tiny_run / name).is_file(), name
    assert not (tiny_run / STEPS_FILE).exists() and not (tiny_run / EPISODES_FILE).exists()
    summary = json.loads((tiny_run / SUMMARY_FILE).read_text())
    assert summary["checkpoint"] == CHECKPOINT_DIR and summary["iterations"] == 2
    rollout = load_trained_run(tiny_run, None)  # RLlib parts and Ray version checked
    edge = load_trained_run(None, ckpt / POLICY_FILE, rllib=False)
    assert (rollout.run_dir, rollout.checkpoint_dir) == (edge.run_dir, edge.checkpoint_dir)
    assert rollout.ray_version is not None and edge.ray_version is None
    assert rollout.trained_iterations == edge.trained_iterations == 2
    assert isinstance(edge.probe, Probe) and edge.probe.obs.shape == (32, 42, 42, 4)


@pytest.mark.slow
def test_the_saved_policy_passes_its_probe_at_cpu_tolerance(tiny_run: Path) -> None:
    import torch

    from rlperf.models.policy_file import load_policy

    trained = load_trained_run(tiny_run, None, rllib=False)
    net = load_policy(trained.policy_path)

    def logits_of(obs: np.ndarray) -> np.ndarray:
        with torch.inference_mode():
            return net.logits(torch.from_numpy(obs)).numpy()

    check = check_probe(trained.probe, logits_of, "cpu")
    assert check is not None and check["observations"] == 32
    assert check["max_abs_logit_err"] <= 1e-5 and check["greedy_agreement"] == 1.0
