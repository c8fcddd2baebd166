"""A real rollout of a tiny trained checkpoint through the `rlperf` entry point (RLlib, Atari)."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from rlperf.envs.atari import make_atari_env
from rlperf.errors import CheckpointError
from rlperf.layout import (
    CHECKPOINT_DIR,
    EPISODES_FILE,
    FINGERPRINT_FILE,
    POLICY_FILE,
    PROBE_FILE,
    STEPS_FILE,
    SUMMARY_FILE,
    TELEMETRY_FILE,
)
from rlperf.models.policy_file import load_policy
from rlperf.resources.plan import count_nvidia_gpus
from rlperf.runs.checkpoint import load_trained_run
from tests.conftest import run_rlperf, succeeded

pytestmark = pytest.mark.slow

STEPS, WARMUP, EPISODE_CAP = 300, 50, 100
# 3 capped episodes of 100 steps; the job's own default model (model1) is NOT the run's.
ROLLOUT = (
    "stage=rollout",
    f"rollout.steps={STEPS}",
    f"rollout.warmup_steps={WARMUP}",
    f"env.max_episode_steps={EPISODE_CAP}",
    "telemetry.interval_s=0.2",
)
LATENCY = ("forward_ms", "action_ms", "env_step_ms")


def rollout(run: Path, out: Path, *extra: str) -> Path:
    proc = run_rlperf([*ROLLOUT, f"run={run}", *extra, f"hydra.run.dir={out}"], cwd=out.parent)
    succeeded(proc)
    return out


@pytest.fixture(scope="module")
def rollout_run(tiny_run: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return rollout(tiny_run, tmp_path_factory.mktemp("rollout") / "r0", "workers=0")


def test_per_step_rows_and_summary(rollout_run: Path, tiny_run: Path) -> None:
    steps = pd.read_csv(rollout_run / STEPS_FILE)
    eps = pd.read_csv(rollout_run / EPISODES_FILE)
    s = json.loads((rollout_run / SUMMARY_FILE).read_text())
    assert s["status"] == "completed" and s["stage"] == "rollout" and s["error"] is None
    # It played the run's env (tiny's 42 px) with the command line's step limit on top.
    trained = json.loads((tiny_run / SUMMARY_FILE).read_text())["env_protocol"]
    capped = {"max_episode_steps": EPISODE_CAP, "max_frames_per_episode": EPISODE_CAP * 4}
    assert s["env_protocol"] == {**trained, **capped}
    assert s["env_protocol"]["observation"]["dim"] == 42
    # One row per step played, in order; the first WARMUP flagged.
    assert len(steps) == STEPS == s["steps"] and list(steps["step"]) == list(range(STEPS))
    assert list(steps["excluded"].fillna("")) == ["warmup"] * WARMUP + [""] * (STEPS - WARMUP)
    assert steps["action"].between(0, 5).all()
    assert (steps[list(LATENCY)] > 0).all().all()
    # The forward is timed inside the action computation.
    assert (steps["forward_ms"] < steps["action_ms"]).all()
    # Three full (capped) episodes; Pong returns stay in [-21, 21].
    assert list(eps["episode"]) == [0, 1, 2] and list(eps["length"]) == [EPISODE_CAP] * 3
    assert eps["return"].between(-21, 21).all()
    assert steps.groupby("episode").size().tolist() == [EPISODE_CAP] * 3
    assert s["episodes"]["count"] == 3 and s["episodes_finished"] == 3
    assert s["episodes"]["return_mean"] == pytest.approx(eps["return"].mean())
    # The summary is over the non-warm-up steps and says so.
    assert s["warmup_steps"] == WARMUP and s["warmup"]["excluded_from_summary"] is True
    kept = steps[steps["excluded"].isna()]
    for col in LATENCY:
        lat = s["latency"][col]
        assert lat["count"] == STEPS - WARMUP
        assert lat["p50"] <= lat["p90"] <= lat["p99"] <= lat["max"]
        p50, p90, p99 = np.percentile(kept[col], [50, 90, 99])
        assert (lat["p50"], lat["p90"], lat["p99"]) == pytest.approx((p50, p90, p99))
        assert lat["max"] == pytest.approx(kept[col].max())
        assert lat["mean"] == pytest.approx(kept[col].mean())
    assert 0 < s["timer_overhead_ns"] < 10_000
    # Model and env came from the run, not from the job's defaults (model1, 84x84).
    assert s["source"]["run"] == str(tiny_run) and s["source"]["model"]["name"] == "tiny"
    assert s["model_params"] == 12_463 and s["env"]["dim"] == 42
    assert s["env"]["max_episode_steps"] == EPISODE_CAP and s["env"]["seed"] == 0
    assert s["probe"]["greedy_agreement"] == 1.0 and s["probe"]["max_abs_logit_err"] <= 1e-5
    fp = json.loads((rollout_run / FINGERPRINT_FILE).read_text())
    assert fp["config"]["stage"] == "rollout"
    assert len(pd.read_csv(rollout_run / TELEMETRY_FILE)) >= 2


def test_records_what_executed_the_policy(rollout_run: Path) -> None:
    s = json.loads((rollout_run / SUMMARY_FILE).read_text())
    ex = s["executor"]
    assert ex["process"] == "driver" and ex["pid"] != os.getpid()
    assert ex["device"] == "cpu" and ex["torch_threads"] == 1
    assert ex["policy_source"] == "RLModule.from_checkpoint"
    assert ex["env_to_module"][-1] == "NumpyToTensor" and ex["module_to_env"][0] == "GetActions"
    assert ex["action_selection"].startswith("greedy")
    assert s["algorithm_started"] is False
    assert s["env_runners"]["started"] == 0 and s["env_runners"]["used"] is False


def test_greedy_actions_are_the_policys_argmax(rollout_run: Path, tiny_run: Path) -> None:
    """Replaying the recorded env with the plain torch policy gives every recorded action."""
    steps = pd.read_csv(rollout_run / STEPS_FILE)
    s = json.loads((rollout_run / SUMMARY_FILE).read_text())
    net = load_policy(tiny_run / CHECKPOINT_DIR)
    env = make_atari_env(s["env"])
    try:
        for _, episode in steps.groupby("episode"):
            obs, _ = env.reset()
            for action in episode["action"]:
                assert net.greedy_action(obs) == action
                obs, *_ = env.step(int(action))
    finally:
        env.close()


def test_same_seed_same_greedy_actions(rollout_run: Path, tiny_run: Path, tmp_path: Path) -> None:
    again = rollout(tiny_run, tmp_path / "again", "workers=0")
    a, b = (pd.read_csv(d / STEPS_FILE) for d in (rollout_run, again))
    assert list(a["action"]) == list(b["action"])
    ea, eb = (pd.read_csv(d / EPISODES_FILE) for d in (rollout_run, again))
    assert list(ea["return"]) == list(eb["return"])


def test_sweep_over_workers_shows_env_runners_unused(
    rollout_run: Path, tiny_run: Path, tmp_path: Path
) -> None:
    """`-m workers=0,1` over one checkpoint: with workers=1 an Algorithm with one env runner
    is restored, yet actions still come from the job's process, identical to workers=0, and
    the env runner samples nothing."""
    sweep = tmp_path / "sweep"
    proc = run_rlperf(
        ["-m", *ROLLOUT, f"run={tiny_run}", "workers=0,1", f"hydra.sweep.dir={sweep}"],
        cwd=tmp_path,
    )
    assert proc.returncode == 0, f"{proc.stdout}\n{proc.stderr}"
    cells = {}
    for cell in sorted(p for p in sweep.iterdir() if (p / SUMMARY_FILE).is_file()):
        s = json.loads((cell / SUMMARY_FILE).read_text())
        assert s["status"] == "completed", s["error"]
        cells[s["env_runners"]["started"]] = (s, pd.read_csv(cell / STEPS_FILE))
    assert sorted(cells) == [0, 1]
    (s0, steps0), (s1, steps1) = cells[0], cells[1]
    assert (s0["algorithm_started"], s1["algorithm_started"]) == (False, True)
    runners = s1["env_runners"]
    assert runners["used"] is False and runners["env_steps_during_rollout"] == 0
    (runner,) = runners["runners"]
    assert runner["pid"] != s1["executor"]["pid"] and runner["device"] == "cpu"
    # The job's process did the work; the runner only idled.
    assert runner["cpu_s_during_rollout"] < 0.25 * runners["driver_cpu_s_during_rollout"]
    assert s1["executor"]["policy_source"].startswith("Algorithm.get_module()")
    assert s1["learner"]["where"] == "driver" and s1["probe"]["greedy_agreement"] == 1.0
    # Same seed, same greedy actions: across the cells and against the single run.
    reference = list(pd.read_csv(rollout_run / STEPS_FILE)["action"])
    assert list(steps0["action"]) == list(steps1["action"]) == reference
    for s in (s0, s1):
        assert s["latency"]["action_ms"]["count"] == STEPS - WARMUP


def test_gpu_cell_is_skipped_without_a_gpu(tiny_run: Path, tmp_path: Path) -> None:
    if count_nvidia_gpus()[0] > 0:
        pytest.skip("this machine has a GPU: the cell would run")
    out = tmp_path / "gpu"
    args = [
        *ROLLOUT,
        f"run={tiny_run}",
        "workers=0",
        "gpu_layout=gpu0_driver",
        f"hydra.run.dir={out}",
    ]
    proc = run_rlperf(args, cwd=tmp_path)
    # A single run this machine cannot run: exit 2, one line (as training's, docs/exit-codes.md).
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert proc.stderr.strip().splitlines()[-1].startswith("rlperf: gpu_layout=gpu0_driver needs")
    s = json.loads((out / SUMMARY_FILE).read_text())
    assert s["status"] == "skipped"
    assert "gpu_layout=gpu0_driver needs GPU(s) [0]" in s["error"]
    assert not (out / STEPS_FILE).exists()


@pytest.mark.gpu
def test_gpu_rollout_runs_the_policy_on_cuda(tiny_run: Path, tmp_path: Path) -> None:
    if count_nvidia_gpus()[0] == 0 or not torch.cuda.is_available():
        pytest.skip("needs an NVIDIA GPU and a CUDA build of torch")
    out = rollout(tiny_run, tmp_path / "cuda", "workers=0", "gpu_layout=gpu0_driver")
    s = json.loads((out / SUMMARY_FILE).read_text())
    assert s["status"] == "completed" and s["executor"]["device"] == "cuda:0"
    assert s["probe"]["greedy_agreement"] == 1.0


def test_broken_checkpoint_fails_naming_the_file(tiny_run: Path, tmp_path: Path) -> None:
    run = tmp_path / "run"
    shutil.copytree(tiny_run, run)
    policy = run / CHECKPOINT_DIR / POLICY_FILE
    policy.write_bytes(policy.read_bytes()[:100])
    out = tmp_path / "broken"
    proc = run_rlperf([*ROLLOUT, f"run={run}", f"hydra.run.dir={out}"], cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr[-2000:]  # bad input: a user error
    s = json.loads((out / SUMMARY_FILE).read_text())
    assert s["status"] == "invalid" and s["error"].startswith("CheckpointError")
    assert str(policy) in s["error"] and "truncated or not a torch file" in s["error"]


# --------------------------------------------------------------------------- in-process


def test_connector_path_acts_like_the_saved_policy(tiny_run: Path) -> None:
    from rlperf.rollout.policy import DriverPolicy

    probe = np.load(tiny_run / CHECKPOINT_DIR / PROBE_FILE)
    policy = DriverPolicy.from_checkpoint(tiny_run / "checkpoint", torch.device("cpu"))
    actions = []
    for obs in probe["obs"]:
        policy.reset()
        actions.append(policy.act(obs))
        assert 0 < policy.last_forward_ns < 1e9
    assert actions == list(probe["actions"])
    np.testing.assert_allclose(policy.logits(probe["obs"]), probe["logits"], atol=1e-6)


def test_sampling_is_seeded_and_differs_from_greedy(tiny_run: Path) -> None:
    from rlperf.rollout.policy import DriverPolicy

    probe = np.load(tiny_run / CHECKPOINT_DIR / PROBE_FILE)
    policy = DriverPolicy.from_checkpoint(tiny_run / "checkpoint", torch.device("cpu"), True)

    def sample(seed: int) -> list[int]:
        torch.manual_seed(seed)
        out = []
        for obs in np.concatenate([probe["obs"]] * 4):
            policy.reset()
            out.append(policy.act(obs))
        return out

    first = sample(0)
    assert first == sample(0)
    assert first != list(probe["actions"]) * 4  # a 2-iteration policy is far from greedy
    assert len(set(first)) > 1


def test_truncated_rllib_module_names_the_path(tiny_run: Path, tmp_path: Path) -> None:
    from rlperf.rollout.policy import DriverPolicy

    ckpt = tmp_path / CHECKPOINT_DIR
    shutil.copytree(tiny_run / "checkpoint", ckpt)
    state = ckpt / "learner_group/learner/rl_module/default_policy/module_state.pkl"
    state.write_bytes(state.read_bytes()[:200])
    with pytest.raises(CheckpointError) as err:
        DriverPolicy.from_checkpoint(ckpt, torch.device("cpu"))
    assert str(state.parent) in str(err.value) and "does not load" in str(err.value)


def test_probe_mismatch_is_detected(tiny_run: Path, tmp_path: Path) -> None:
    from rlperf.rollout.policy import DriverPolicy
    from rlperf.runs.probe import check_probe

    run = tmp_path / "run"
    shutil.copytree(tiny_run, run)
    probe = dict(np.load(run / CHECKPOINT_DIR / PROBE_FILE))
    probe["logits"] = probe["logits"] + 0.5
    np.savez(run / CHECKPOINT_DIR / PROBE_FILE, **probe)
    trained = load_trained_run(str(run), None)
    policy = DriverPolicy.from_checkpoint(trained.checkpoint_dir, torch.device("cpu"))
    with pytest.raises(CheckpointError, match="different trainings"):
        check_probe(trained.probe, policy.logits, policy.device.type)


def test_rollout_precision_stops_at_a_planned_window(tiny_run: Path, tmp_path: Path) -> None:
    """``rollout.precision=0.5`` with ``rollout.steps=1250``: 12 windows of 100 timed steps,
    looked at after 8 and 12. The rollout stops at a planned look where the windows' median
    latencies agree within ±50 % (step 850 or 1250), else runs to the cap, and says which.
    Whether they agree depends on the machine's load (CI once saw no look reach it): the
    test holds the wiring, the rule's arithmetic is tested on synthetic values
    (tests/stats/test_stopping.py)."""
    out = rollout(tiny_run, tmp_path / "precise", "workers=0", "rollout.steps=1250",
                  "rollout.precision=0.5")  # fmt: skip
    s = json.loads((out / SUMMARY_FILE).read_text())
    p = s["precision"]
    assert p["objective"] == "action_ms_p50" and p["looks"] == [8, 12]
    assert p["window_steps"] == 100 and p["values"] == (s["steps"] - WARMUP) // 100
    if p["reached"]:
        assert p["at_step"] in (850, 1250) and s["steps"] == p["at_step"]
    else:
        assert p["at_step"] is None and s["steps"] == 1250, p
    assert s["steps"] == len(pd.read_csv(out / STEPS_FILE))


def test_rollout_precision_needs_a_step_cap(compose_cfg) -> None:
    from rlperf.errors import ConfigError
    from rlperf.validation.validate import validate_config

    cfg = compose_cfg("stage=rollout", "run=x", "rollout.precision=0.05")
    with pytest.raises(ConfigError, match="rollout.precision=0.05 needs rollout.steps"):
        validate_config(cfg)
    cfg = compose_cfg("stage=rollout", "run=x", "rollout.precision=0.05", "rollout.steps=400")
    with pytest.raises(ConfigError, match="needs at least 4 windows of 100 timed steps"):
        validate_config(cfg)
