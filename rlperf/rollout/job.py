"""The rollout job (``stage=rollout``): a trained policy playing Pong inside RLlib, timed per step.

Config keys used: ``run`` / ``checkpoint`` (the training job to load, see
:mod:`rlperf.rollout.loader`), ``rollout.*`` (``episodes``, ``steps``,
``warmup_steps``, ``explore``, ``torch_threads``, ``device``,
``start_algorithm``), ``seed``, ``workers``, ``env_runner``, ``gpu_layout``,
``cpu_affinity``, ``ray``; ``model``, ``env`` and ``algo`` come from the run's
own ``.hydra/config.yaml`` (``env.*`` given on the command line on top).

Per step (``steps.csv``): ``forward_ms`` (``RLModule.forward_inference`` alone),
``action_ms`` (observation in → action out through RLlib's connector pipelines,
see :mod:`rlperf.rollout.policy`) and ``env_step_ms`` (``env.step``). Actions are
always computed in the driver, one observation at a time — as the 2021 study's
``agent.compute_action`` did. With ``workers > 0`` an Algorithm with that many
env runners and the GPU layout's resources is started and restored from the
checkpoint first (the study's setting); ``summary.json`` then records whether
those env runners did anything during the rollout (env steps and CPU seconds).
"""

from __future__ import annotations

import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from omegaconf import DictConfig

from rlperf.rollout.loader import PROBE_ATOL, CheckpointError, TrainedRun

PROGRESS_EVERY_S = 30.0

#: What the rollout adds to ``summary.json`` (docs/rollout.md).
SUMMARY_KEYS = (
    "source",
    "seed",
    "explore",
    "action_selection",
    "algorithm_started",
    "warmup_steps",
    "warmup",
    "env",
    "model_params",
    "probe",
    "timer_overhead_ns",
    "timer",
    "executor",
    "learner",
    "env_runners",
    "steps",
    "episodes_finished",
    "latency",
    "episodes",
)


def cli_overrides() -> list[str]:
    """This job's command-line overrides (empty outside a Hydra run)."""
    try:
        from hydra.core.hydra_config import HydraConfig

        if not HydraConfig.initialized():
            return []
        return [str(o) for o in HydraConfig.get().overrides.task]
    except Exception:  # no Hydra app around this call
        return []


def _explicit_model_name(cfg: DictConfig, overrides: list[str]) -> str | None:
    keys = {o.split("=", 1)[0].lstrip("+~") for o in overrides}
    return str(cfg.model.name) if "model" in keys else None


def check_hardware(cfg: DictConfig, ctx: Any) -> Any:
    """The torch device of ``rollout.device``; :class:`SkipCell` where the GPUs are absent."""
    import torch

    from rlperf.results.job import SkipCell
    from rlperf.rollout.policy import resolve_device

    plan, machine = ctx.plan, ctx.machine
    missing = [i for i in plan.visible_gpus if i >= machine.gpus]
    if missing:
        raise SkipCell(
            f"gpu_layout={cfg.gpu_layout.name} needs GPU(s) {list(plan.visible_gpus)} but this "
            f"machine has {machine.gpus} NVIDIA GPU(s) ({machine.gpu_source})"
        )
    device = resolve_device(str(cfg.rollout.device), bool(plan.visible_gpus))
    if device.type == "cuda" and not torch.cuda.is_available():
        raise SkipCell(
            f"rollout.device={cfg.rollout.device} resolves to CUDA (gpu_layout="
            f"{cfg.gpu_layout.name}) but torch {torch.__version__} sees no CUDA device"
        )
    return device


# --------------------------------------------------------------------------
# Env runners: did they do anything?
# --------------------------------------------------------------------------


def _runner_state(runner: Any) -> dict[str, Any]:
    """Runs inside each env runner actor."""
    import os

    module = getattr(runner, "module", None)
    device = getattr(runner, "_device", None)
    if module is not None:
        params = list(module.parameters())
        device = params[0].device if params else device
    return {
        "pid": os.getpid(),
        "worker_index": int(runner.worker_index),
        "device": str(device),
        "env_steps": int(getattr(runner, "num_env_steps_sampled_lifetime", 0)),
    }


def _learner_state(learner: Any) -> dict[str, Any]:
    import os

    return {"pid": os.getpid(), "device": str(learner.device)}


def _cpu_s(pid: int) -> float | None:
    import psutil

    try:
        times = psutil.Process(pid).cpu_times()
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return None
    return float(times.user + times.system)


class EnvRunnerWatch:
    """Env steps sampled and CPU seconds used by each remote env runner over a window."""

    def __init__(self, algo: Any) -> None:
        self.group = algo.env_runner_group
        self.before = self._states()
        self.cpu_before = {s["pid"]: _cpu_s(s["pid"]) for s in self.before}

    def _states(self) -> list[dict[str, Any]]:
        return list(self.group.foreach_env_runner(_runner_state, local_env_runner=False))

    def finish(self, driver_cpu_s: float) -> dict[str, Any]:
        after = {s["worker_index"]: s for s in self._states()}
        runners = []
        for s in self.before:
            a = after.get(s["worker_index"], s)
            cpu0, cpu1 = self.cpu_before.get(s["pid"]), _cpu_s(s["pid"])
            runners.append(
                {
                    "worker_index": s["worker_index"],
                    "pid": s["pid"],
                    "device": s["device"],
                    "env_steps_during_rollout": a["env_steps"] - s["env_steps"],
                    "cpu_s_during_rollout": (
                        cpu1 - cpu0 if cpu0 is not None and cpu1 is not None else None
                    ),
                }
            )
        steps = sum(r["env_steps_during_rollout"] for r in runners)
        return {
            "started": len(runners),
            "used": steps > 0,
            "env_steps_during_rollout": steps,
            "cpu_s_during_rollout": sum(r["cpu_s_during_rollout"] or 0.0 for r in runners),
            "driver_cpu_s_during_rollout": driver_cpu_s,
            "runners": runners,
        }


def _process_role() -> dict[str, Any]:
    """Whether this job process is a plain driver or runs inside a Ray actor (a Tune trial)."""
    import sys

    if "ray" not in sys.modules:
        return {}
    import ray

    if not ray.is_initialized():
        return {}
    actor = ray.get_runtime_context().get_actor_id()
    if actor is None:
        return {}
    return {
        "process": "driver (the job's process is a Ray actor: a sweep trial)",
        "actor_id": actor,
    }


def _learner_info(algo: Any, plan: Any) -> dict[str, Any]:
    results = algo.learner_group.foreach_learner(_learner_state)
    states = [r.get() if hasattr(r, "get") else r for r in results]
    return {
        "num_learners": int(plan.num_learners),
        "where": "driver" if algo.learner_group.is_local else "remote actors",
        "gpus_per_learner": float(plan.gpus_per_learner),
        "learners": states,
    }


# --------------------------------------------------------------------------
# The timed loop
# --------------------------------------------------------------------------


def play(
    policy: Any,
    env: Any,
    recorder: Any,
    episodes: int,
    steps: int | None = None,
    progress: Any = None,
) -> dict[str, int]:
    """Play ``episodes`` full episodes (or ``steps`` steps) and record every step.

    Per step: ``action_ms`` around :meth:`DriverPolicy.act` (observation in →
    action out), ``forward_ms`` the module forward inside it, ``env_step_ms``
    around ``env.step``. Nothing but the timer readings sits between the two
    timed calls; rows are written per episode by ``recorder``
    (:class:`rlperf.results.latency.LatencyRecorder`).
    """
    clock = time.perf_counter_ns
    step = episode = finished = 0
    next_report = time.monotonic() + PROGRESS_EVERY_S
    while (episode < episodes) if steps is None else (step < steps):
        started = time.perf_counter()
        obs, _ = env.reset()
        policy.reset()
        reward, ret, length, done = 0.0, 0.0, 0, False
        while not done and (steps is None or step < steps):
            t0 = clock()
            action = policy.act(obs, reward)
            t1 = clock()
            obs, reward, terminated, truncated, _ = env.step(action)
            t2 = clock()
            recorder.record_step(
                episode, policy.last_forward_ns / 1e6, (t1 - t0) / 1e6, (t2 - t1) / 1e6, action
            )
            reward = float(reward)
            ret += reward
            length += 1
            step += 1
            done = bool(terminated or truncated)
            if progress is not None and time.monotonic() >= next_report:
                next_report = time.monotonic() + PROGRESS_EVERY_S
                progress(f"episode {episode + 1}: {length} steps so far, return {ret:+.0f}")
        if done:
            recorder.end_episode(episode, ret, length, time.perf_counter() - started)
            finished += 1
            if progress is not None:
                target = f"/{episodes}" if steps is None else ""
                lat = recorder.values("action_ms")[-length:]
                progress(
                    f"episode {episode + 1}{target}: return {ret:+.0f}, {length} steps, "
                    f"action median {sorted(lat)[len(lat) // 2]:.3f} ms ({step} steps in all)"
                )
        episode += 1
    return {"steps": step, "episodes_finished": finished}


# --------------------------------------------------------------------------
# The job
# --------------------------------------------------------------------------


def _check_probe(policy: Any, trained: TrainedRun) -> dict[str, Any] | None:
    """The restored policy gives the logits saved with the checkpoint (``probe.npz``)."""
    import numpy as np

    if trained.probe is None:
        return None
    logits = policy.logits(trained.probe["obs"])
    err = float(np.abs(logits - trained.probe["logits"]).max())
    agreement = float((logits.argmax(axis=1) == trained.probe["actions"]).mean())
    atol = PROBE_ATOL[policy.device.type]
    if not err <= atol:
        raise CheckpointError(
            f"the RLModule restored from {trained.checkpoint_dir} gives logits up to {err:.3g} "
            f"away from the ones saved with it in probe.npz (tolerance {atol}); the RLlib "
            f"checkpoint and rlperf_policy.pt / probe.npz come from different trainings"
        )
    return {
        "observations": int(len(logits)),
        "max_abs_logit_err": err,
        "greedy_agreement": agreement,
        "tolerance": atol,
    }


def run_rollout(cfg: DictConfig, out_dir: Path, ctx: Any) -> dict[str, Any]:
    """Roll out the policy of ``run`` / ``checkpoint``; write steps.csv and episodes.csv.

    ``ctx`` is the job context (:class:`rlperf.results.job.JobContext`): resource
    plan, machine, progress lines, and ``ctx.summary``, which receives the
    partial results even if the rollout fails or is interrupted.

    Returns the stage's part of ``summary.json`` (see ``docs/rollout.md``).
    """
    import torch

    from rlperf.envs.atari import make_atari_env
    from rlperf.models.vision_net import count_trainable_params
    from rlperf.results.job import write_effective_config
    from rlperf.results.latency import LatencyRecorder
    from rlperf.rollout.loader import effective_config, load_trained_run
    from rlperf.rollout.policy import ACTION_SELECTION, DriverPolicy
    from rlperf.rollout.timing import measure_timer
    from rlperf.training.job import env_config

    overrides = cli_overrides()
    trained = load_trained_run(
        cfg.run, cfg.checkpoint, model_name=_explicit_model_name(cfg, overrides)
    )
    ecfg = effective_config(cfg, trained, overrides)
    write_effective_config(out_dir, ecfg)
    device = check_hardware(cfg, ctx)
    plan = ctx.plan
    start_algorithm = (
        bool(cfg.rollout.start_algorithm)
        if cfg.rollout.start_algorithm is not None
        else int(cfg.workers) > 0
    )
    r = cfg.rollout
    summary = ctx.summary
    summary.update(
        source=trained.describe(),
        seed=int(cfg.seed),
        explore=bool(r.explore),
        action_selection=ACTION_SELECTION[bool(r.explore)],
        algorithm_started=start_algorithm,
        warmup_steps=int(r.warmup_steps),
        warmup={
            "rule": f"the first {int(r.warmup_steps)} steps of the run",
            "steps": int(r.warmup_steps),
            "excluded_from_summary": True,
        },
        env=env_config(ecfg),
    )
    ctx.progress(
        f"rollout of {trained.checkpoint_dir} (model={ecfg.model.name}) on {device}, "
        + (f"{r.steps} steps" if r.steps is not None else f"{r.episodes} episodes")
        + (f", Algorithm with {cfg.workers} env runner(s)" if start_algorithm else "")
    )
    prev_threads = torch.get_num_threads()
    recorder: LatencyRecorder | None = None
    try:
        with ExitStack() as stack:
            algo = None
            if start_algorithm:
                algo = _start_algorithm(cfg, ecfg, trained, ctx, stack)
                policy = DriverPolicy.from_checkpoint(
                    trained.checkpoint_dir,
                    device,
                    bool(r.explore),
                    module=algo.get_module(),
                    source="Algorithm.get_module() (the driver's EnvRunner module) after "
                    "Algorithm.restore_from_path",
                )
                summary["learner"] = _learner_info(algo, plan)
            else:
                policy = DriverPolicy.from_checkpoint(
                    trained.checkpoint_dir, device, bool(r.explore)
                )
            summary["model_params"] = count_trainable_params(policy.module)
            summary["probe"] = _check_probe(policy, trained)
            torch.set_num_threads(int(r.torch_threads))
            torch.manual_seed(int(cfg.seed))  # explore=true samples with torch's RNG
            env = make_atari_env(env_config(ecfg))
            stack.callback(env.close)
            timer = measure_timer()
            summary["timer_overhead_ns"] = timer.overhead_ns
            summary["timer"] = timer.to_dict()
            summary["executor"] = {**policy.describe(), **_process_role()}
            watch = EnvRunnerWatch(algo) if algo is not None else None
            driver_cpu0 = time.process_time()
            recorder = stack.enter_context(LatencyRecorder(out_dir, int(r.warmup_steps)))
            counts = play(
                policy,
                env,
                recorder,
                int(r.episodes),
                int(r.steps) if r.steps is not None else None,
                ctx.progress,
            )
            driver_cpu_s = time.process_time() - driver_cpu0
            summary.update(counts)
            summary["env_runners"] = (
                watch.finish(driver_cpu_s)
                if watch is not None
                else {
                    "started": 0,
                    "used": False,
                    "env_steps_during_rollout": 0,
                    "cpu_s_during_rollout": 0.0,
                    "driver_cpu_s_during_rollout": driver_cpu_s,
                    "runners": [],
                }
            )
    finally:
        torch.set_num_threads(prev_threads)
        if recorder is not None:
            # Partial results too (failure, Ctrl-C): the job wrapper writes ctx.summary.
            summary["steps"] = recorder.steps
            summary["latency"] = recorder.latency_summary()
            summary["episodes"] = recorder.episode_summary()
    ctx.progress(
        f"done: {summary['steps']} steps, {summary['episodes']['count']} episodes, action "
        f"p50 {summary['latency']['action_ms']['p50']:.3f} ms, forward p50 "
        f"{summary['latency']['forward_ms']['p50']:.3f} ms (first {r.warmup_steps} steps "
        f"excluded)"
    )
    return {k: summary[k] for k in SUMMARY_KEYS if k in summary}


def _start_algorithm(
    cfg: DictConfig, ecfg: DictConfig, trained: TrainedRun, ctx: Any, stack: ExitStack
) -> Any:
    """Start Ray and a PPO Algorithm with the plan's env runners and GPUs; restore the ckpt."""
    import ray

    from rlperf.resources.plan import check_feasible
    from rlperf.resources.ray_session import ray_session
    from rlperf.training.job import build_ppo_config

    if not ray.is_initialized():
        # A Ray we start ourselves; in a sweep trial the launcher checked its Ray.
        check_feasible(ctx.plan, ctx.machine, bool(cfg.ray.overcommit_cpus))
    stack.enter_context(ray_session(ctx.plan, ctx.machine, cfg.ray))
    ctx.progress(f"starting an Algorithm with {ctx.plan.num_env_runners} env runner(s)")
    # Nothing is sampled or trained: 'auto' keeps RLlib's check of the run's batch size
    # against rollout_fragment_length x env runners from failing for other worker counts.
    ecfg = ecfg.copy()
    ecfg.algo.rollout_fragment_length = "auto"
    algo = build_ppo_config(ecfg, ctx.plan).build_algo()
    stack.callback(algo.stop)
    try:
        algo.restore_from_path(str(trained.checkpoint_dir.resolve()))
    except Exception as exc:
        raise CheckpointError(
            f"Algorithm.restore_from_path({trained.checkpoint_dir}) failed "
            f"({type(exc).__name__}: {exc}); expected an RLlib PPO checkpoint of this model"
        ) from exc
    return algo


__all__ = ["EnvRunnerWatch", "check_hardware", "cli_overrides", "play", "run_rollout"]
