"""The env job (``stage=env``): how fast an env goes on this machine, with which engine and
how many envs and threads (docs/environment.md#env-stage).

Config keys used: ``env`` (with ``env.engine`` and ``env.threads``),
``env_runner.num_envs``, ``env_bench.*`` (``steps``, ``warmup_steps``, ``windows``,
``torch_threads``), ``seed``; with ``run`` / ``checkpoint`` the run's env (``env.*`` given
on the command line on top, the engine this job's) and its policy's greedy actions.

Steps (:func:`run_env_bench`): resolve the env (and the run) → build and check the env,
then the engine's ``num_envs`` envs (:func:`rlperf.envs.batch.engine_env`) → step them
window by window (:mod:`rlperf.env_bench.measure`), each window a row of ``metrics.csv``
→ summarise: env steps per second (time inside the engine's ``step`` only), emulator
frames per second, per-call latency percentiles, CPU per core and resident memory.
No Ray, no RLlib: one process (and gymnasium_async's workers).
"""

from __future__ import annotations

import math
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import numpy as np
from omegaconf import DictConfig, OmegaConf

from rlperf.env_bench.measure import CoreTimes, step_windows, windows
from rlperf.errors import ConfigError
from rlperf.job_wrapper import JobContext
from rlperf.layout import EXCLUDED_COLUMN, METRICS_FILE
from rlperf.results.columns import (
    CALLS,
    CPU_CORES,
    ENV_STEPS,
    ENV_STEPS_PER_S,
    ENV_WINDOW_COLUMNS,
    FRAMES_PER_S,
    ITER_S,
    ITERATION,
    RESETS,
    RSS_MB,
    S_PER_1K_ENV_STEPS,
    STEP_MS_P50,
    WALL_S,
)
from rlperf.results.csvlog import CsvLog
from rlperf.results.latency import summarize_latency
from rlperf.results.protocol import env_protocol
from rlperf.results.record import EnvRecord, as_record
from rlperf.specs.engines import engine_of, engine_threads, without_engine
from rlperf.stats.stopping import PER_1K, WithinRun

RANDOM_ACTIONS = "uniformly random (the engine's action_space.sample, seeded with seed)"


@dataclass
class EnvBench:
    """What the steps of one env job share."""

    cfg: DictConfig
    env: dict[str, Any]  # the effective env config
    num_envs: int
    trained: Any = None  # rlperf.runs.checkpoint.TrainedRun with run=

    @property
    def engine(self) -> dict[str, Any]:
        """``summary.json``'s ``engine``: its name, threads (null: none of its own), envs."""
        spec = engine_of(self.env)
        return {
            "name": spec.name,
            "threads": engine_threads(self.env) if spec.threaded else None,
            "num_envs": self.num_envs,
        }

    def announcement(self) -> str:
        b, e = self.cfg.env_bench, self.engine
        threads = f", {e['threads']} thread(s)" if e["threads"] is not None else ""
        actions = "random actions" if self.trained is None else "the run's greedy actions"
        return (
            f"stepping {self.env.get('id') or self.env.get('entry_point')} on {e['name']} "
            f"({self.num_envs} env(s){threads}) with {actions}: {b.warmup_steps} warm-up then "
            f"{b.steps} env steps in {b.windows} windows"
        )


def resolve_env(cfg: DictConfig, out_dir: Path) -> EnvBench:
    """The env to step: the job's own, or the run's with the job's engine and ``env.*``."""
    num_envs = int(cfg.env_runner.num_envs)
    if cfg.run is None and cfg.checkpoint is None:
        env = cast(dict[str, Any], OmegaConf.to_container(cfg.env, resolve=True))
        return EnvBench(cfg, env, num_envs)
    # rlperf.runs.merge pulls rlperf.algos, gymnasium and ale_py: deferred.
    from rlperf.runs.merge import upstream_run, write_effective_config

    trained, ecfg = upstream_run(cfg, rllib=False)
    write_effective_config(out_dir, ecfg)
    env = cast(dict[str, Any], OmegaConf.to_container(ecfg.env, resolve=True))
    return EnvBench(cfg, env, num_envs, trained)


def build_engine(bench: EnvBench, stack: ExitStack) -> Any:
    """The env checked alone (:func:`rlperf.envs.check.check_env`: a user's class, its
    spaces, reset and step), then the engine's ``num_envs`` envs (closed with ``stack``)."""
    # gymnasium and ale_py (and a user's module): deferred, the config is validated first.
    from rlperf.envs.batch import engine_env
    from rlperf.envs.check import check_env

    check_env(without_engine(bench.env))
    env = engine_env({**bench.env, "seed": int(bench.cfg.seed)}, bench.num_envs)
    stack.callback(env.close)
    return env


def action_source(bench: EnvBench, env: Any, stack: ExitStack) -> tuple[Any, str]:
    """``act(obs)`` for all envs, and what it is: random actions, or with ``run=`` the
    run's policy network's greedy (argmax) actions, batched over the envs (torch's threads
    set for it, and set back with ``stack``)."""
    seed = int(bench.cfg.seed)
    if bench.trained is None:
        env.action_space.seed(seed)
        return lambda _obs: env.action_space.sample(), RANDOM_ACTIONS
    from gymnasium import spaces

    if not isinstance(env.single_action_space, spaces.Discrete):
        raise ConfigError(
            f"run={bench.cfg.run} with stage=env: its env's actions are "
            f"{env.single_action_space}, and stage=env acts with a policy's greedy Discrete "
            "actions only; drop run= (random actions) to time this env"
        )
    # torch: deferred, only with run=.
    import torch

    from rlperf.models.policy_file import load_policy

    stack.callback(torch.set_num_threads, torch.get_num_threads())
    torch.set_num_threads(int(bench.cfg.env_bench.torch_threads))
    net = load_policy(bench.trained.checkpoint_dir)

    def act(obs: Any) -> np.ndarray:
        with torch.inference_mode():
            batch = torch.from_numpy(np.ascontiguousarray(np.stack(list(obs))))
            return cast(np.ndarray, net.logits(batch).argmax(dim=1).numpy())

    return act, f"greedy (argmax) actions of {bench.trained.policy_path}, batched over the envs"


@dataclass
class Measured:
    """What the timed windows left besides their rows: every step call's time (ms), each
    CPU's busy share over them, and the protocol's frames per env step (None: not Atari)."""

    step_ms: list[np.ndarray]
    cores: CoreTimes | None
    frames_per_step: float | None
    precision: WithinRun | None = None  # env_bench.precision's stopping rule


def measure(bench: EnvBench, env: Any, act: Any, ctx: JobContext) -> Measured:
    """Step window by window into ``metrics.csv`` (``ctx.rows`` too); each window a progress
    step and a tracked row."""
    b = bench.cfg.env_bench
    plan = windows(int(b.warmup_steps), int(b.steps), int(b.windows), bench.num_envs)
    timed = sum(not w.warmup for w in plan)
    out = Measured([], None, env_protocol(bench.env).get("frames_per_step"))
    if b.precision is not None:
        out.precision = WithinRun(float(b.precision), timed)
    log = CsvLog(ctx.out_dir / METRICS_FILE, ENV_WINDOW_COLUMNS)
    try:
        for row, ms in step_windows(env, act, plan, ctx.started, int(bench.cfg.seed)):
            frames = out.frames_per_step
            row[FRAMES_PER_S] = row[ENV_STEPS_PER_S] * frames if frames else math.nan
            log.write(row)
            ctx.rows.append(row)
            if row[EXCLUDED_COLUMN]:
                out.cores = CoreTimes()  # each CPU's busy share over the timed windows only
            else:
                out.step_ms.append(ms)
            done = row[ITERATION] - (len(plan) - timed)
            info = f"{row[ENV_STEPS_PER_S]:.0f} env steps/s, step p50 {row[STEP_MS_P50]:.3f} ms"
            ctx.step(max(done, 0), timed, info, unit="window", row=row)
            if _precise(out.precision, row):
                ctx.progress(f"env_bench.precision reached after window {done}: stopping")
                break
    finally:
        log.close()
    return out


def _precise(rule: WithinRun | None, row: dict[str, Any]) -> bool:
    """Whether ``env_bench.precision`` is reached after this window (a timed one)."""
    if rule is None or row[EXCLUDED_COLUMN] or not row[ENV_STEPS]:
        return False
    return rule.add(PER_1K * float(row[ITER_S]) / float(row[ENV_STEPS]), int(row[ITERATION]))


def summarise(
    bench: EnvBench, measured: Measured, rows: list[dict[str, Any]], record: EnvRecord
) -> EnvRecord:
    """The env stage's part of ``summary.json`` from its timed windows, into ``record``."""
    kept = [r for r in rows if not r[EXCLUDED_COLUMN]]
    steps = sum(int(r[ENV_STEPS]) for r in kept)
    env_s = sum(float(r[ITER_S]) for r in kept)
    wall_s = sum(float(r[WALL_S]) for r in kept)
    rate = steps / env_s if env_s > 0 else math.nan
    frames = measured.frames_per_step
    rule = measured.precision
    all_ms = np.concatenate(measured.step_ms) if measured.step_ms else np.array([])
    warm = bench.cfg.env_bench.warmup_steps
    busy = sum(float(r[CPU_CORES]) * float(r[WALL_S]) for r in kept)
    record.engine = bench.engine
    record.seed = int(bench.cfg.seed)
    record.warmup = {
        "rule": f"the first {warm} env steps (one window)",
        "steps": int(warm),
        "excluded_from_summary": True,
    }
    record.steps = steps
    record.calls = sum(int(r[CALLS]) for r in kept)
    record.seconds = env_s
    record.env_steps_per_s = rate
    record.frames_per_step = frames
    record.frames_per_s = rate * frames if frames else None
    record.wall_steps_per_s = steps / wall_s if wall_s > 0 else math.nan
    record.episodes_ended = sum(int(r[RESETS]) for r in kept)
    record.latency = {"step_ms": summarize_latency(all_ms)}
    record.cpu = {
        "process_cores": busy / wall_s if wall_s > 0 else math.nan,
        "per_core_busy_pct": measured.cores.busy_pct() if measured.cores else [],
    }
    record.rss_mb = {"max": max((float(r[RSS_MB]) for r in kept), default=math.nan)}
    if rule is not None:
        record.precision = rule.summary(S_PER_1K_ENV_STEPS, "at_window")
    return record


def run_env_bench(cfg: DictConfig, out_dir: Path, ctx: JobContext) -> EnvRecord:
    """Step ``cfg.env``'s engine for ``env_bench.steps`` env steps; write ``metrics.csv``.

    ``ctx`` is the job context (:class:`rlperf.job_wrapper.JobContext`). Returns the job's
    record, filled (docs/environment.md#env-stage).
    """
    bench = resolve_env(cfg, out_dir)
    record = as_record(ctx.record, EnvRecord)
    record.env = bench.env
    if bench.trained is not None:
        record.source = bench.trained.describe()
    ctx.progress(bench.announcement())
    with ExitStack() as stack:
        env = build_engine(bench, stack)
        act, record.actions = action_source(bench, env, stack)
        measured = measure(bench, env, act, ctx)
    summarise(bench, measured, ctx.rows, record)
    ctx.progress(
        f"done: {record.steps} env steps, {record.env_steps_per_s:.0f} env steps/s"
        + (f" ({record.frames_per_s:.0f} frames/s)" if record.frames_per_s else "")
        + f", step p50 {record.latency['step_ms']['p50']:.3f} ms over {bench.num_envs} env(s)"
    )
    return record


__all__ = ["EnvBench", "Measured", "run_env_bench"]
