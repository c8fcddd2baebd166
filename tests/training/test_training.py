"""A real training job through the `rlperf` entry point (real Ray, RLlib, Atari Pong)."""

from __future__ import annotations

import json
import os

import numpy as np
import pandas as pd
import pytest
import torch
from support.live_run import LiveRun, csv_rows

from rlperf.layout import (
    CHECKPOINT_DIR,
    FINGERPRINT_FILE,
    METRICS_FILE,
    PROBE_FILE,
    SUMMARY_FILE,
    TELEMETRY_FILE,
)
from rlperf.models.policy_file import count_trainable_params, load_policy
from rlperf.results.columns import LEARN_S, PHASES, SAMPLE_S
from tests.conftest import TESTS, TINY_TRAIN, run_rlperf

pytestmark = pytest.mark.slow


def test_metrics_are_exact_per_iteration(tiny_run) -> None:
    m = pd.read_csv(tiny_run / METRICS_FILE)
    assert list(m["iteration"]) == [1, 2]
    # Every canonical column is there from the first row.
    for col in [
        *PHASES,
        "iter_s",
        "other_s",
        "env_steps",
        "env_steps_per_s",
        "trained_steps",
        "trained_steps_per_s",
        "episodes",
        "episode_return_mean",
        "cpu_util_pct",
        "ram_util_pct",
        "excluded",
        "time_s",
    ]:
        assert col in m.columns, col
    # The phases account for the iteration: what is left (bookkeeping) is small.
    phase_sum = m[list(PHASES)].sum(axis=1)
    assert (phase_sum <= m["iter_s"] + 1e-6).all()
    assert ((m["iter_s"] - phase_sum) <= 0.10 * m["iter_s"] + 0.05).all(), m[[*PHASES, "iter_s"]]
    assert np.allclose(m["other_s"], m["iter_s"] - phase_sum, atol=1e-9)
    assert (m[list(PHASES)] >= 0).all().all() and (m[SAMPLE_S] > 0).all() and (m[LEARN_S] > 0).all()
    # Exactly one train batch of env steps per iteration; SGD sees it num_epochs (1) times,
    # in whole minibatches of 128.
    assert list(m["env_steps"]) == [256, 256]
    assert ((m["trained_steps"] >= 256) & (m["trained_steps"] % 128 == 0)).all()
    assert np.allclose(m["env_steps_per_s"], m["env_steps"] / m["iter_s"])
    # PPO: one LearnerGroup.update per iteration; the replay and async columns stay empty.
    assert list(m["learner_updates"]) == [1, 1]
    cols = ["replay_s", "replay_ratio", "learner_queue_size", "policy_lag"]
    assert m[cols].isna().all().all()
    assert m["cpu_util_pct"].between(0, 100).all() and m["ram_util_pct"].between(0, 100).all()
    assert (m["cpu_util_pct"] > 0).all()
    # Monotonic job clock.
    assert m["time_s"].is_monotonic_increasing
    # Pong episodes are far longer than 512 steps: no return yet.
    assert m["episode_return_mean"].isna().all() and (m["episodes"] == 0).all()
    # train.warmup_iterations=1, episode rule off: only iteration 1 is warm-up.
    assert list(m["excluded"].fillna("")) == ["warmup", ""]


def test_summary_excludes_warmup_and_counts_params(tiny_run) -> None:
    s = json.loads((tiny_run / SUMMARY_FILE).read_text())
    m = pd.read_csv(tiny_run / METRICS_FILE)
    assert s["status"] == "completed" and s["error"] is None
    assert s["warmup"]["iterations"] == [1] and s["warmup"]["excluded_from_summary"]
    assert s["excluded"] == {"warmup": 1}
    assert s["metrics"]["iter_s"]["n"] == 1
    assert s["metrics"]["iter_s"]["mean"] == pytest.approx(m["iter_s"].iloc[1])
    assert s["total_env_steps"] == 512 and s["iterations"] == 2
    net = load_policy(tiny_run / CHECKPOINT_DIR)
    assert s["model_params"] == count_trainable_params(net) == 12_463
    assert s["wall_s"] > m["iter_s"].sum()
    # What an env step was (rlperf.results.protocol): Pong v5, 4 frames, tiny's 42 px frames.
    p = s["env_protocol"]
    assert (p["env_id"], p["frames_per_step"], p["sticky_action_probability"]) == (
        "ALE/Pong-v5",
        4.0,
        0.0,
    )
    assert p["observation"] == {"dim": 42, "framestack": 4, "grayscale": True}


def test_fingerprint_and_telemetry(tiny_run) -> None:
    fp = json.loads((tiny_run / FINGERPRINT_FILE).read_text())
    assert fp["affinity"] == sorted(os.sched_getaffinity(0))
    assert fp["config"]["model"]["name"] == "tiny" and fp["config"]["workers"] == 1
    assert fp["libraries"]["ray"].startswith("2.60")
    # tiny_run starts in a temporary folder without conf/: the shipped groups only.
    paths = [s["path"] for s in fp["config_search_path"]]
    assert "pkg://rlperf.conf" in paths and not any(p.startswith("file://") for p in paths)
    t = pd.read_csv(tiny_run / TELEMETRY_FILE)
    assert len(t) >= 3 and t["time_s"].is_monotonic_increasing
    assert t["cpu_util_pct"].between(0, 100).all() and (t["ram_used_mb"] > 0).all()
    assert not any(c.startswith("gpu") for c in t.columns)  # no GPU layout, no GPU columns


def test_checkpoint_reloads_without_ray_and_acts_the_same(tiny_run) -> None:
    probe = np.load(tiny_run / CHECKPOINT_DIR / PROBE_FILE)
    assert probe["obs"].shape == (32, 42, 42, 4) and probe["obs"].dtype == np.uint8
    net = load_policy(tiny_run / CHECKPOINT_DIR)
    with torch.inference_mode():
        logits = net.logits(torch.from_numpy(probe["obs"])).numpy()
    np.testing.assert_allclose(logits, probe["logits"], atol=1e-6)
    assert (logits.argmax(axis=1) == probe["actions"]).all()
    assert [net.greedy_action(o) for o in probe["obs"]] == list(probe["actions"])


def test_rllib_checkpoint_restores_the_same_module(tiny_run) -> None:
    from ray.rllib.core.rl_module.rl_module import RLModule

    path = tiny_run / CHECKPOINT_DIR / "learner_group" / "learner" / "rl_module" / "default_policy"
    module = RLModule.from_checkpoint(str(path))
    probe = np.load(tiny_run / CHECKPOINT_DIR / PROBE_FILE)
    with torch.inference_mode():
        logits = module.net.logits(torch.from_numpy(probe["obs"])).numpy()
    np.testing.assert_allclose(logits, probe["logits"], atol=1e-6)


def test_missing_gpu_fails_before_ray_starts(tmp_path) -> None:
    out = tmp_path / "gpu"
    proc = run_rlperf(
        [*TINY_TRAIN, "gpu_layout=gpu0", f"hydra.run.dir={out}"], cwd=tmp_path, timeout=120
    )
    # A single run this machine cannot run: a user error, one line (docs/exit-codes.md).
    assert proc.returncode == 2 and "Traceback" not in proc.stderr + proc.stdout
    assert proc.stderr.strip().splitlines()[-1].startswith("rlperf: gpu_layout asks for GPU(s) [0]")
    assert "Started a local Ray instance" not in proc.stderr
    assert not (out / METRICS_FILE).exists()
    # The folder explains itself: refused before start, not crashed.
    s = json.loads((out / SUMMARY_FILE).read_text())
    assert s["status"] == "skipped" and s["preflight"] is True and s["iterations"] == 0
    assert "asks for GPU(s) [0]" in s["error"] and s["stage"] == "train"


def test_invalid_config_leaves_a_summary_saying_so(tmp_path) -> None:
    out = tmp_path / "bad"
    proc = run_rlperf(["workers=-1", f"hydra.run.dir={out}"], cwd=tmp_path, timeout=120)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr + proc.stdout
    assert proc.stderr.strip().splitlines()[-1] == "rlperf: workers=-1 must be an integer >= 0"
    assert "Error executing job" not in proc.stderr  # Hydra's wrapper is gone
    s = json.loads((out / SUMMARY_FILE).read_text())
    assert (s["status"], s["preflight"]) == ("invalid", True)
    assert "workers=-1" in s["error"] and s["traceback"] is None


def test_failure_keeps_summary_with_error(tmp_path) -> None:
    out = tmp_path / "bad_env"
    # An env that passes rlperf's checks and raises in RLlib (tests/support/failing_env.py).
    failing_env = [
        "env=custom",
        "env.entry_point=support.failing_env:FailsMidRun",
        "env.config={shape: [42, 42, 4]}",
        "train.env_ceiling.enabled=false",
    ]
    proc = run_rlperf(
        [*TINY_TRAIN, *failing_env, "workers=0", f"hydra.run.dir={out}"],
        cwd=tmp_path,
        timeout=300,
        env={"PYTHONPATH": str(TESTS)},
    )
    assert proc.returncode == 1, proc.stderr[-3000:]  # a failure, not a user error
    s = json.loads((out / SUMMARY_FILE).read_text())
    assert s["status"] == "failed"
    assert "breaks on purpose" in s["error"] and "FailsMidRun" in s["traceback"]


@pytest.mark.timing
@pytest.mark.parametrize(
    ("name", "to_group", "code"),
    [("SIGINT", False, 130), ("SIGTERM", True, 143)],
    ids=["ctrl-c-to-pid", "sigterm-to-group"],
)
def test_stop_signal_keeps_completed_iterations(tmp_path, ray_tmp, name, to_group, code) -> None:
    """A stop signal mid-run: exit 128 + signal, summary says interrupted and why, finished
    rows stay, Ray is gone, the terminal has one line and no stack dump. SIGTERM goes to the
    process group, as a terminal or ``kill -TERM -PGID`` signals: Ray's processes are in
    groups of their own, so it reaches rlperf alone (reaching the raylet too, Ray's core
    worker ended rlperf with exit 1 before it said anything, 2 runs in 12 beside a CPU hog:
    docs/exit-codes.md); Ctrl-C to the PID only."""
    import signal

    from support.private_ray import processes_with

    out = tmp_path / "interrupted"
    # ray_tmp: a private Ray temp dir that names this run's Ray processes (support.private_ray).
    args = [a for a in TINY_TRAIN if not a.startswith("train.iterations")]
    args += ["workers=0", "train.iterations=50", f"hydra.run.dir={out}"]
    metrics = out / METRICS_FILE
    env = dict(os.environ, RAY_TMPDIR=ray_tmp)
    with LiveRun(args, tmp_path, env, new_session=True) as run:
        assert run.wait_until(lambda: csv_rows(metrics) >= 2, 240), run.output[-3000:]
        groups = run.groups()  # rlperf leads its group; Ray's processes are not in it
        assert len(groups) > 1 and [p for p, g in groups.items() if g == run.proc.pid] == [
            run.proc.pid
        ]
        run.send(getattr(signal, name), to="group" if to_group else "pid")
        rc = run.finish(timeout=60)  # a hang guard; the time to exit: docs/exit-codes.md
    stderr = run.output
    assert rc == code, stderr[-2000:]
    reason = "interrupted (Ctrl-C)" if name == "SIGINT" else f"interrupted ({name})"
    assert stderr.strip().splitlines()[-1] == f"rlperf: {reason}; completed rows and cells are kept"
    assert "Traceback" not in stderr and "received" not in stderr, stderr[-3000:]
    s = json.loads((out / SUMMARY_FILE).read_text())
    assert (s["status"], s["error"]) == ("interrupted", reason)
    m = pd.read_csv(metrics)
    assert len(m) >= 2 and list(m["iteration"]) == list(range(1, len(m) + 1))
    assert s["iterations"] == len(m) < 50
    # Every Ray process of this run's session is gone.
    assert not processes_with(ray_tmp)
