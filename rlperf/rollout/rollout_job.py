"""The rollout job (``stage=rollout``): a trained policy acting in its env in RLlib, timed per step.

Config keys used: ``run`` / ``checkpoint`` (the training job to load, see
:mod:`rlperf.runs`), ``rollout.*`` (``episodes``, ``steps``,
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

Steps (:func:`run_rollout`): resolve the run and the effective config → restore
the policy (in an Algorithm or alone) and check it against ``probe.npz`` → play
and time → summarise.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

from omegaconf import DictConfig

from rlperf.errors import CheckpointError, SkipCell
from rlperf.job_wrapper import JobContext
from rlperf.resources.placement import env_runner_state, learner_placement
from rlperf.resources.plan import check_feasible
from rlperf.resources.ray_session import ray_session
from rlperf.results.columns import ACTION_MS, ACTION_MS_P50, ENV_STEPS, FORWARD_MS
from rlperf.results.latency import LatencyRecorder, LatencyWindows
from rlperf.results.record import RolloutRecord, as_record
from rlperf.rollout.timing import measure_timer
from rlperf.runs.checkpoint import TrainedRun
from rlperf.runs.probe import check_probe
from rlperf.telemetry.sampler import action_energy

PROGRESS_EVERY_S = 30.0


def check_hardware(cfg: DictConfig, ctx: JobContext) -> Any:
    """The torch device of ``rollout.device``; :class:`SkipCell` where the GPUs are absent."""
    # torch (rlperf.rollout.policy too): deferred, the job wrapper validates the config first.
    import torch

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
    """Runs inside each env runner actor: where it runs and what it sampled so far."""

    return {
        **env_runner_state(runner),
        ENV_STEPS: int(getattr(runner, "num_env_steps_sampled_lifetime", 0)),
    }


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
                    "gpus": s["gpus"],
                    "env_steps_during_rollout": a[ENV_STEPS] - s[ENV_STEPS],
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
    import ray  # already loaded (checked above): never imported for this

    if not ray.is_initialized():
        return {}
    actor = ray.get_runtime_context().get_actor_id()
    if actor is None:
        return {}
    return {
        "process": "driver (the job's process is a Ray actor: a sweep trial)",
        "actor_id": actor,
    }


# --------------------------------------------------------------------------
# The timed loop
# --------------------------------------------------------------------------


class Played(NamedTuple):
    """What :func:`play` played: steps in all, and the episodes that ended."""

    steps: int
    episodes_finished: int


def play(
    policy: Any,
    env: Any,
    recorder: Any,
    episodes: int,
    steps: int | None = None,
    progress: Any = None,
    on_episode: Any = None,
    stop: Callable[[int], bool] | None = None,
) -> Played:
    """Play ``episodes`` full episodes (or ``steps`` steps) and record every step.

    Per step: ``action_ms`` around :meth:`DriverPolicy.act` (observation in →
    action out), ``forward_ms`` the module forward inside it, ``env_step_ms``
    around ``env.step``. Nothing but the timer readings sits between the two
    timed calls; rows are written per episode by ``recorder``
    (:class:`rlperf.results.latency.LatencyRecorder`), whose window of each finished
    episode goes to ``on_episode`` (the job's tracking) after the episode. ``stop(step)``,
    asked after every step, ends the rollout there (``rollout.precision``).
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
            if stop is not None and stop(step):
                steps = step
            if progress is not None and time.monotonic() >= next_report:
                next_report = time.monotonic() + PROGRESS_EVERY_S
                progress(f"episode {episode + 1}: {length} steps so far, return {ret:+.0f}")
        if done:
            window = recorder.end_episode(episode, ret, length, time.perf_counter() - started)
            if on_episode is not None:
                on_episode(window)
            finished += 1
            if progress is not None:
                target = f"/{episodes}" if steps is None else ""
                lat = recorder.values(ACTION_MS)[-length:]
                progress(
                    f"episode {episode + 1}{target}: return {ret:+.0f}, {length} steps, "
                    f"action median {sorted(lat)[len(lat) // 2]:.3f} ms ({step} steps in all)"
                )
        episode += 1
    return Played(step, finished)


# --------------------------------------------------------------------------
# The job
# --------------------------------------------------------------------------


@dataclass
class Rollout:
    """What the steps of one rollout share."""

    cfg: DictConfig  # the job's own config
    out_dir: Path
    trained: TrainedRun
    ecfg: DictConfig  # the effective config: the run's model, env and algo
    device: Any  # torch.device of rollout.device
    start_algorithm: bool
    algo: Any = None  # the Algorithm, when one was started
    precision: LatencyWindows | None = None  # rollout.precision's stopping rule
    recorder: Any = None  # the LatencyRecorder, once playing started

    def announcement(self) -> str:
        r = self.cfg.rollout
        return (
            f"rollout of {self.trained.checkpoint_dir} (model={self.ecfg.model.name}) on "
            f"{self.device}, "
            + (f"{r.steps} steps" if r.steps is not None else f"{r.episodes} episodes")
            + (f", Algorithm with {self.cfg.workers} env runner(s)" if self.start_algorithm else "")
        )


def resolve_rollout(cfg: DictConfig, out_dir: Path, ctx: JobContext) -> Rollout:
    """Find and check the run, write ``effective_config.yaml``, check the hardware."""
    # rlperf.runs.merge pulls rlperf.algos, gymnasium and ale_py: deferred, the module's top
    # imports numpy only.
    from rlperf.runs.merge import upstream_run, write_effective_config

    trained, ecfg = upstream_run(cfg)
    write_effective_config(out_dir, ecfg)
    device = check_hardware(cfg, ctx)
    start_algorithm = (
        bool(cfg.rollout.start_algorithm)
        if cfg.rollout.start_algorithm is not None
        else int(cfg.workers) > 0
    )
    return Rollout(cfg, out_dir, trained, ecfg, device, start_algorithm)


def record_settings(rollout: Rollout, record: RolloutRecord) -> None:
    """What is rolled out, and how: the settings part of ``summary.json``."""
    # gymnasium and ale_py (rlperf.envs), torch (rlperf.rollout.policy): deferred, the
    # module's top imports numpy only.
    from rlperf.envs.from_config import env_config
    from rlperf.rollout.policy import ACTION_SELECTION

    r = rollout.cfg.rollout
    record.source = rollout.trained.describe()
    record.seed = int(rollout.cfg.seed)
    record.explore = bool(r.explore)
    record.action_selection = ACTION_SELECTION[bool(r.explore)]
    record.algorithm_started = rollout.start_algorithm
    record.warmup_steps = int(r.warmup_steps)
    record.warmup = {
        "rule": f"the first {int(r.warmup_steps)} steps of the run",
        "steps": int(r.warmup_steps),
        "excluded_from_summary": True,
    }
    record.env = env_config(rollout.ecfg)


def restore_policy(rollout: Rollout, ctx: JobContext, stack: ExitStack) -> Any:
    """The :class:`~rlperf.rollout.policy.DriverPolicy`, checked against ``probe.npz``.

    With ``rollout.start_algorithm`` an Algorithm is started and restored first
    and the policy acts with its driver module; otherwise the module is restored
    from the checkpoint alone.
    """
    # torch: deferred, the job wrapper validates the config before it loads.
    from rlperf.models.policy_file import count_trainable_params
    from rlperf.rollout.policy import DriverPolicy

    ckpt, explore = rollout.trained.checkpoint_dir, bool(rollout.cfg.rollout.explore)
    record = as_record(ctx.record, RolloutRecord)
    if rollout.start_algorithm:
        rollout.algo = _start_algorithm(rollout, ctx, stack)
        policy = DriverPolicy.from_checkpoint(
            ckpt,
            rollout.device,
            explore,
            module=rollout.algo.get_module(),
            source="Algorithm.get_module() (the driver's EnvRunner module) after "
            "Algorithm.restore_from_path",
        )
        record.learner = learner_placement(rollout.algo, ctx.plan)
    else:
        policy = DriverPolicy.from_checkpoint(ckpt, rollout.device, explore)
    record.model_params = count_trainable_params(policy.module)
    probe = rollout.trained.probe
    actions_of = policy.greedy_actions if probe is not None and probe.continuous else None
    record.probe = check_probe(probe, policy.logits, policy.device.type, actions_of)
    return policy


def play_timed(rollout: Rollout, policy: Any, ctx: JobContext, stack: ExitStack) -> None:
    """Play with the policy, every step timed into ``steps.csv`` / ``episodes.csv``.

    Records the timer, the executor, the step counts and what the env runners
    did meanwhile in the job's record.
    """
    # torch, gymnasium and ale_py: deferred, the job wrapper validates the config first.
    import torch

    from rlperf.envs.factory import make_env
    from rlperf.envs.from_config import env_config

    cfg, r, record = rollout.cfg, rollout.cfg.rollout, as_record(ctx.record, RolloutRecord)
    torch.set_num_threads(int(r.torch_threads))
    torch.manual_seed(int(cfg.seed))  # explore=true samples with torch's RNG
    env = make_env(env_config(rollout.ecfg))
    stack.callback(env.close)
    timer = measure_timer()
    record.timer_overhead_ns = timer.overhead_ns
    record.timer = timer.to_dict()
    record.executor = {**policy.describe(), **_process_role()}
    watch = EnvRunnerWatch(rollout.algo) if rollout.algo is not None else None
    driver_cpu0 = time.process_time()
    rollout.recorder = stack.enter_context(LatencyRecorder(rollout.out_dir, int(r.warmup_steps)))
    steps = int(r.steps) if r.steps is not None else None
    stop = None
    if r.precision is not None:
        rollout.precision = LatencyWindows(rollout.recorder, int(r.warmup_steps),
                                           float(r.precision), int(r.steps))  # fmt: skip
        stop = rollout.precision.after
    t0 = ctx.telemetry_now()  # the energy counters, read at the loop's edges
    played = play(policy, env, rollout.recorder, int(r.episodes), steps, ctx.progress, ctx.track,
                  stop)  # fmt: skip
    record.steps, record.episodes_finished = played.steps, played.episodes_finished
    record.energy = action_energy(ctx.telemetry_window(t0, ctx.telemetry_now()), played.steps)
    if rollout.precision is not None:
        record.precision = rollout.precision.summary(ACTION_MS_P50, "at_step")
        if rollout.precision.rule.at is not None:
            ctx.progress(f"rollout.precision reached after step {played.steps}: stopping")
    driver_cpu_s = time.process_time() - driver_cpu0
    record.env_runners = (
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


def record_latency(recorder: Any, record: RolloutRecord) -> None:
    """Steps, latency and episode aggregates of what was played (also after a failure)."""
    record.steps = recorder.steps
    record.latency = recorder.latency_summary()
    record.excluded = recorder.excluded()
    record.episodes = recorder.episode_summary()


def run_rollout(cfg: DictConfig, out_dir: Path, ctx: JobContext) -> RolloutRecord:
    """Roll out the policy of ``run`` / ``checkpoint``; write steps.csv and episodes.csv.

    ``ctx`` is the job context (:class:`rlperf.job_wrapper.JobContext`): resource plan,
    machine, progress lines, and ``ctx.record``, which receives the partial
    results even if the rollout fails or is interrupted.

    Returns the job's record, filled (see ``docs/rollout.md``).
    """
    # torch: deferred, the job wrapper validates the config before it loads.
    import torch

    rollout = resolve_rollout(cfg, out_dir, ctx)
    record = as_record(ctx.record, RolloutRecord)
    record_settings(rollout, record)
    ctx.progress(rollout.announcement())
    prev_threads = torch.get_num_threads()
    try:
        with ExitStack() as stack:
            policy = restore_policy(rollout, ctx, stack)
            play_timed(rollout, policy, ctx, stack)
    finally:
        torch.set_num_threads(prev_threads)
        if rollout.recorder is not None:
            # Partial results too (failure, Ctrl-C): the job wrapper writes ctx.record.
            record_latency(rollout.recorder, record)
    episodes, latency = record.episodes or {}, record.latency
    ctx.progress(
        f"done: {record.steps} steps, {episodes['count']} episodes, action "
        f"p50 {latency[ACTION_MS]['p50']:.3f} ms, forward p50 "
        f"{latency[FORWARD_MS]['p50']:.3f} ms (first {cfg.rollout.warmup_steps} "
        f"steps excluded)"
    )
    return record


def _start_algorithm(rollout: Rollout, ctx: JobContext, stack: ExitStack) -> Any:
    """Start Ray and the run's Algorithm with the plan's env runners and GPUs; restore the ckpt."""
    # Ray, and rlperf.algos with gymnasium and ale_py: deferred, only with start_algorithm.
    import ray

    from rlperf.algos import build_algo_config

    if not ray.is_initialized():
        # A Ray we start ourselves; in a sweep trial the launcher checked its Ray.
        check_feasible(ctx.plan, ctx.machine, bool(rollout.cfg.ray.overcommit_cpus))
    stack.enter_context(ray_session(ctx.plan, ctx.machine, rollout.cfg.ray))
    ctx.progress(f"starting an Algorithm with {ctx.plan.num_env_runners} env runner(s)")
    # Nothing is sampled or trained: 'auto' keeps RLlib's check of the run's batch size
    # against rollout_fragment_length x env runners from failing for other worker counts.
    ecfg = rollout.ecfg.copy()
    ecfg.algo.rollout_fragment_length = "auto"
    algo = build_algo_config(ecfg, ctx.plan).build_algo()
    stack.callback(algo.stop)
    ckpt = rollout.trained.checkpoint_dir
    try:
        algo.restore_from_path(str(ckpt.resolve()))
    except Exception as exc:
        raise CheckpointError(
            f"Algorithm.restore_from_path({ckpt}) failed ({type(exc).__name__}: {exc}); "
            f"expected an RLlib {str(ecfg.algo.name).upper()} checkpoint of this model"
        ) from exc
    return algo


__all__ = ["EnvRunnerWatch", "Rollout", "check_hardware", "play", "run_rollout"]
