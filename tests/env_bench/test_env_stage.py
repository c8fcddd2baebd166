"""``stage=env``: every engine steps for real, a job writes its windows and summary, the
pre-flight refuses what cannot run, a run's policy can choose the actions, and a sweep over
engines and envs is reported as curves (docs/environment.md#the-env-stage)."""

from __future__ import annotations

import csv
import json
import os
from pathlib import Path

import numpy as np
import pytest
from omegaconf import OmegaConf

from rlperf.algos import plan_resources
from rlperf.env_bench.measure import windows
from rlperf.envs.batch import EnvLoop, engine_env
from rlperf.errors import ConfigError, InfeasibleError
from rlperf.job_wrapper import execute_stage
from rlperf.layout import EFFECTIVE_CONFIG_FILE, METRICS_FILE, SUMMARY_FILE
from rlperf.resources.plan import Machine, check_feasibility
from rlperf.specs.stages import stage_spec
from rlperf.stages import stage_function
from rlperf.validation.validate import validate_config

#: Pong at 42 px: cheap frames, the same game and protocol as the study's but the size.
PONG = {
    "kind": "atari", "id": "ALE/Pong-v5", "dim": 42, "framestack": 4, "frameskip": 1,
    "skip": 4, "noop_max": 0, "repeat_action_probability": 0.0, "episodic_life": False,
    "fire_reset": False, "max_episode_steps": None, "seed": 0,
}  # fmt: skip
TINY = ("env.dim=42", "env_bench.steps=400", "env_bench.warmup_steps=40",
        "env_bench.windows=4", "telemetry.enabled=false")  # fmt: skip


def _rows(path: Path) -> list[dict[str, str]]:
    with path.open() as f:
        return list(csv.DictReader(f))


@pytest.mark.parametrize("engine", ["python", "gymnasium_sync", "gymnasium_async", "ale_vector"])
def test_each_engine_steps_its_envs_for_real(engine: str) -> None:
    env = engine_env({**PONG, "engine": engine}, 3)
    try:
        assert env.num_envs == 3
        obs, _ = env.reset(seed=3)
        env.action_space.seed(3)
        resets = 0
        for _ in range(60):
            obs, reward, terminated, truncated, _ = env.step(env.action_space.sample())
            resets += int(np.count_nonzero(np.logical_or(terminated, truncated)))
        frames = np.stack(list(obs))
        assert frames.shape == (3, 42, 42, 4) and frames.dtype == np.uint8
        assert np.asarray(reward).shape == (3,) and resets == 0  # a Pong game is longer
        assert frames.max() > 0 and not np.array_equal(frames[0], frames[1])  # own seeds
        assert isinstance(env, EnvLoop) == (engine == "python")
    finally:
        env.close()


def test_the_windows_share_the_steps() -> None:
    plan = windows(100, 1000, 4, 8)
    assert [(w.number, w.calls, w.warmup) for w in plan] == [
        (1, 13, True), (2, 32, False), (3, 31, False), (4, 31, False), (5, 31, False),
    ]  # fmt: skip
    assert [w.warmup for w in windows(0, 10, 2, 1)] == [False, False]


def test_an_env_job_writes_its_windows_and_summary(compose_cfg, tmp_path: Path) -> None:
    # env.dim=42 beside model1's 84: stage=env without run= builds no network.
    cfg = compose_cfg("stage=env", "env.engine=ale_vector", "env_runner.num_envs=4", *TINY)
    summary = execute_stage(cfg, tmp_path, stage_function("env"), in_trial=False).data
    assert summary["status"] == "completed"
    rows = _rows(tmp_path / METRICS_FILE)
    assert [r["excluded"] for r in rows] == ["warmup", "", "", "", ""]
    timed = rows[1:]
    steps = [int(r["env_steps"]) for r in timed]
    assert steps == [100, 100, 100, 100] and int(rows[0]["env_steps"]) == 40
    for r in timed:
        rate = int(r["env_steps"]) / float(r["iter_s"])
        assert float(r["env_steps_per_s"]) == pytest.approx(rate)
        assert float(r["frames_per_s"]) == pytest.approx(4 * rate)  # 4 frames per env step
        assert float(r["wall_s"]) >= float(r["iter_s"]) > 0
        assert float(r["step_ms_p99"]) >= float(r["step_ms_p50"]) > 0
        assert 0 < float(r["cpu_cores"]) <= os.cpu_count() + 0.5  # type: ignore[operator]
    s = json.loads((tmp_path / SUMMARY_FILE).read_text())
    assert (s["steps"], s["calls"]) == (400, 100)
    assert s["env_steps_per_s"] == pytest.approx(400 / sum(float(r["iter_s"]) for r in timed))
    assert s["latency"]["step_ms"]["count"] == 100
    assert s["engine"] == {"name": "ale_vector", "threads": 1, "num_envs": 4}
    # The protocol records the config (env.threads=null: 1); the summary what ran.
    assert (s["env_protocol"]["engine"], s["env_protocol"]["threads"]) == ("ale_vector", None)
    assert len(s["cpu"]["per_core_busy_pct"]) == os.cpu_count()
    assert s["rss_mb"]["max"] > 10 and s["actions"].startswith("uniformly random")


def test_env_bench_precision_stops_at_a_planned_look(compose_cfg, tmp_path: Path) -> None:
    """``env_bench.precision=0.5``: the windows of CartPole's steps agree well within ±50 %,
    so the job stops at a planned look (after 8, 12, 18, 27 or 40 counted windows) and says
    why. Which look depends on the machine's noise (CI reached it at 18 once, at 40 once)."""
    cfg = compose_cfg("stage=env", "env=cartpole", "env_bench.steps=8000",
                      "env_bench.windows=40", "env_bench.warmup_steps=200",
                      "env_bench.precision=0.5")  # fmt: skip
    summary = execute_stage(cfg, tmp_path, stage_function("env"), in_trial=False).data
    assert summary["status"] == "completed"
    s = json.loads((tmp_path / SUMMARY_FILE).read_text())
    p = s["precision"]
    # At a planned look: before the cap on a quiet machine (8 or 12 windows here), at the
    # cap's own look (40) on a loaded one (CI once); either way it says so.
    assert p["reached"] is True and p["values"] in p["looks"]
    assert p["at_window"] == p["values"] + 1  # window 1 is the warm-up
    assert p["looks"][:3] == [8, 12, 18] and p["objective"] == "s_per_1k_env_steps"
    assert len(_rows(tmp_path / METRICS_FILE)) == p["at_window"]
    assert s["steps"] == 200 * p["values"]


@pytest.mark.parametrize(
    ("overrides", "error", "said"),
    [
        (("env_bench.windows=3", "env_bench.precision=0.05"), ConfigError,
         "env_bench.precision=0.05 needs at least 4 windows"),
        (("env.engine=ale_vector", f"env.threads={(os.cpu_count() or 1) + 1}"), InfeasibleError,
         f"env.threads={(os.cpu_count() or 1) + 1} (env.engine=ale_vector) needs"),
        (("env_runner.num_envs=8", "env_bench.steps=100", "env_bench.windows=20"), ConfigError,
         "env_bench.steps=100 is fewer than env_bench.windows=20 x env_runner.num_envs=8"),
        (("backend=tflite_fp32",), ConfigError, "backend=tflite_fp32 with stage=env"),
        (("env_bench.windows=0",), ConfigError, "env_bench.windows=0 must be an integer >= 1"),
    ],
)  # fmt: skip
def test_the_preflight_refuses_in_one_line(
    compose_cfg, tmp_path: Path, overrides: tuple[str, ...], error: type, said: str
) -> None:
    cfg = compose_cfg("stage=env", *overrides)
    with pytest.raises(error) as info:
        execute_stage(cfg, tmp_path, stage_function("env"), in_trial=False)
    assert str(info.value).startswith(said) and "\n" not in str(info.value), str(info.value)
    assert json.loads((tmp_path / SUMMARY_FILE).read_text())["preflight"] is True


def test_what_fits_passes_the_preflight(compose_cfg) -> None:
    """Both halves of the pre-flight on a config that fits: validation, and the engine's
    threads on machines given as values (two CPUs fit, one is refused); the same config
    with env.threads=0 is refused, naming the key."""
    fits = ("stage=env", "env.engine=ale_vector", "env.threads=2", "env=pong", "env.dim=42")
    cfg = compose_cfg(*fits)
    validate_config(cfg)
    plan = plan_resources(cfg)
    assert (plan.engine, plan.env_threads, plan.cpus_per_env_runner) == ("ale_vector", 2, 2.0)
    check = stage_spec("env").feasibility
    two_cpus = Machine(cpus=(0, 1), gpus=0, gpu_source="given")
    check_feasibility(check, cfg, plan, two_cpus, False)  # fits: nothing raised
    one_cpu = Machine(cpus=(0,), gpus=0, gpu_source="given")
    with pytest.raises(
        InfeasibleError, match=r"^env\.threads=2 \(env\.engine=ale_vector\) needs 2 "
    ):
        check_feasibility(check, cfg, plan, one_cpu, False)
    with pytest.raises(ConfigError, match=r"^env\.threads=0 must be >= 1"):
        validate_config(compose_cfg(*fits, "env.threads=0"))


def test_a_runs_policy_chooses_the_actions(
    compose_cfg, tmp_path: Path, small_policy_run: dict[str, object]
) -> None:
    """With run= the run's env (its 60-step cap, its frame size) and its greedy actions."""
    run = small_policy_run["path"]
    cfg = compose_cfg("stage=env", f"run={run}", "env_runner.num_envs=2",
                      "env_bench.steps=120", "env_bench.warmup_steps=0", "env_bench.windows=2",
                      "telemetry.enabled=false")  # fmt: skip
    summary = execute_stage(cfg, tmp_path, stage_function("env"), in_trial=False).data
    assert summary["status"] == "completed" and summary["steps"] == 120
    assert summary["actions"].startswith("greedy (argmax) actions of ")
    assert summary["source"]["run"] == str(run)
    assert summary["env"]["max_episode_steps"] == 60
    assert summary["episodes_ended"] >= 2  # two envs, 60 calls each: each ended once
    rows = _rows(tmp_path / METRICS_FILE)
    assert all(float(r["action_s"]) > 0 for r in rows)
    assert (tmp_path / EFFECTIVE_CONFIG_FILE).is_file()


@pytest.mark.slow
def test_a_sweep_over_engines_and_envs_is_reported_as_curves(tmp_path: Path) -> None:
    """One cell per combination through the sweep launcher; the report ranks them on time
    per 1 000 env steps, draws env_throughput and fits the law per engine over num_envs."""
    from conftest import run_rlperf

    from rlperf.report import build_report

    sweep = tmp_path / "sweep"
    args = ["-m", "stage=env", "env.engine=python,ale_vector", "env_runner.num_envs=1,2,4",
            "env.dim=42", "env_bench.steps=480", "env_bench.warmup_steps=40",
            "env_bench.windows=6", f"hydra.sweep.dir={sweep}"]  # fmt: skip
    proc = run_rlperf(args, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    cells = sorted(p for p in sweep.iterdir() if (p / SUMMARY_FILE).is_file())
    summaries = [json.loads((p / SUMMARY_FILE).read_text()) for p in cells]
    assert sorted((s["engine"]["name"], s["engine"]["num_envs"]) for s in summaries) == [
        ("ale_vector", 1), ("ale_vector", 2), ("ale_vector", 4),
        ("python", 1), ("python", 2), ("python", 4),
    ]  # fmt: skip
    assert all(s["status"] == "completed" and s["steps"] == 480 for s in summaries)
    res = build_report([sweep], tmp_path / "report")
    runs = res.runs.set_index("cell")
    assert set(runs["family"]) == {"env"} and set(runs["model"]) == {"random actions"}
    assert runs["throughput"].notna().all()
    for cell, s in zip(cells, summaries, strict=True):
        row = runs.loc[f"sweep/{cell.name}"]
        # The report's rate is the run's: its windows' env steps over their step time.
        assert row["throughput"] == pytest.approx(s["env_steps_per_s"], rel=1e-6)
        assert row["throughput_ci_low"] <= row["throughput"] <= row["throughput_ci_high"]
    assert "env_throughput" in res.figures
    curves = [c for c in res.sections["scaling"] if c.family == "env"]
    assert sorted(c.setting.get("env.engine") for c in curves) == ["ale_vector", "python"]
    assert all(c.unit_name == "envs" and list(c.points["n"]) == [1, 2, 4] for c in curves)
    text = res.markdown.read_text()
    assert "## Env throughput (stage=env)" in text and "busy % per core" in text
    assert len(res.env_windows) == 6 * 7  # every window of every cell, warm-up included


def test_a_mujoco_env_is_measured_and_reported(
    compose_cfg, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    """``stage=env env=mujoco``: HalfCheetah's simulator steps like any env (steps/s, busy
    per core); its protocol records the settings its id hides and the float64 cast, and
    the report names it. MuJoCo's compiler warning about gymnasium's model file reaches
    neither the terminal nor a MUJOCO_LOG.TXT in the working directory."""
    from rlperf.report import build_report

    monkeypatch.chdir(tmp_path)
    run = tmp_path / "cheetah"
    cfg = compose_cfg("stage=env", "env=mujoco", "model=mlp64", "env_runner.num_envs=2",
                      "env_bench.steps=600", "env_bench.warmup_steps=60",
                      "env_bench.windows=4", "telemetry.enabled=false")  # fmt: skip
    summary = execute_stage(cfg, run, stage_function("env"), in_trial=False).data
    assert summary["status"] == "completed" and summary["steps"] == 600
    assert summary["env_steps_per_s"] > 100  # thousands here; random torques
    assert len(summary["cpu"]["per_core_busy_pct"]) == os.cpu_count()
    protocol = summary["env_protocol"]
    (run / ".hydra").mkdir()
    OmegaConf.save(cfg, run / ".hydra" / "config.yaml")  # a job folder, as Hydra leaves it
    assert (protocol["env_id"], protocol["observation_cast"]) == (
        "HalfCheetah-v5", "float64 -> float32",
    )  # fmt: skip
    assert protocol["simulator"] == {
        "engine": "mujoco", "frame_skip": 5, "timestep": 0.01, "dt": 0.05,
        "reset_noise_scale": 0.1, "exclude_current_positions_from_observation": True,
        "max_episode_steps": 1000,
    }  # fmt: skip
    assert protocol["simulator_version"].startswith("mujoco 4.")
    assert "settotalmass" not in "".join(capfd.readouterr())
    assert not (tmp_path / "MUJOCO_LOG.TXT").exists()
    res = build_report([run], tmp_path / "report")
    (row,) = res.runs.to_dict("records")
    assert row["family"] == "env" and row["throughput"] == pytest.approx(
        summary["env_steps_per_s"], rel=1e-6
    )
    text = res.markdown.read_text()
    assert "## Env throughput (stage=env)" in text and "HalfCheetah-v5" in text
