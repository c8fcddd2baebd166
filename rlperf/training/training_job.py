"""The training job: the config's algorithm (:mod:`rlperf.algos`), one metrics row per iteration.

Config subtrees used: ``model``, ``env``, ``algo``, ``train``, ``workers``,
``learners``, ``env_runner``, ``gpu_layout``, ``cpu_affinity``, ``ray``, ``seed``.

Steps: measure the env's ceiling (:mod:`rlperf.envs.ceiling`, before Ray, or
from its cache) → start Ray and build the algorithm, record where its learner(s)
and env runners run (:mod:`rlperf.resources.placement`) and the scale RLlib runs
with → train ``train.iterations`` timed iterations (``metrics.csv``) → save the
checkpoint (RLlib checkpoint, ``rlperf_policy.pt``, ``probe.npz``:
:mod:`rlperf.runs`) → summarise.
"""

from __future__ import annotations

import logging
import math
import time
from pathlib import Path
from typing import Any

from omegaconf import DictConfig

from rlperf.algos import build_algo_config
from rlperf.console import quiet_logger
from rlperf.envs.ceiling import env_ceiling
from rlperf.envs.from_config import env_config, probe_observations
from rlperf.job_wrapper import JobContext
from rlperf.layout import CHECKPOINT_DIR, EXCLUDED_COLUMN, METRICS_FILE, POLICY_FILE
from rlperf.resources.placement import env_runner_placement, learner_placement, plan_record
from rlperf.resources.ray_session import ray_session
from rlperf.results.columns import (
    CPU_UTIL_PCT,
    ENV_STEPS,
    ENV_STEPS_PER_S,
    EPISODE_RETURN_MEAN,
    EPISODES,
    EVAL_CAPPED_EPISODES,
    EVAL_EPISODES,
    EVAL_RETURN_MEAN,
    EVAL_S,
    FAULT_COLUMNS,
    ITER_S,
    ITERATION,
    LEARN_S,
    LEARNER_UPDATES,
    RAM_UTIL_PCT,
    SAMPLE_S,
    SAMPLING_EFFICIENCY,
    TIME_S,
    TRAIN_COLUMNS,
    TRAIN_TIME_S,
    TRAINED_STEPS,
)
from rlperf.results.csvlog import CsvLog
from rlperf.results.record import TrainRecord, as_record
from rlperf.results.summary import excluded_counts, summarize_rows
from rlperf.runs.probe import write_probe
from rlperf.telemetry.cpu import CpuWindow
from rlperf.telemetry.sampler import CPU_ENERGY_J, gpu_columns
from rlperf.training import faults
from rlperf.training.target import (
    StopCheck,
    evaluates,
    evaluation_cap,
    evaluation_row,
    with_evaluation,
)
from rlperf.vocabulary import Exclusion

log = logging.getLogger(__name__)


def _nested(d: dict[str, Any], *keys: str, default: Any = None) -> Any:
    for k in keys:
        if not isinstance(d, dict) or k not in d:
            return default
        d = d[k]
    return d


class IterationCounters:
    """Per-iteration deltas from RLlib's lifetime counters."""

    def __init__(self) -> None:
        self.env_steps = 0
        self.trained = 0
        self.episodes = 0

    def update(self, result: dict[str, Any]) -> dict[str, int]:
        # RLlib: deferred, the job wrapper validates the config before Ray loads.
        from ray.rllib.utils.metrics import (
            ALL_MODULES,
            ENV_RUNNER_RESULTS,
            LEARNER_RESULTS,
            NUM_ENV_STEPS_SAMPLED_LIFETIME,
            NUM_EPISODES_LIFETIME,
            NUM_MODULE_STEPS_TRAINED_LIFETIME,
        )

        env_steps = int(
            _nested(result, ENV_RUNNER_RESULTS, NUM_ENV_STEPS_SAMPLED_LIFETIME, default=0)
        )
        episodes = int(_nested(result, ENV_RUNNER_RESULTS, NUM_EPISODES_LIFETIME, default=0))
        trained = int(
            _nested(
                result, LEARNER_RESULTS, ALL_MODULES, NUM_MODULE_STEPS_TRAINED_LIFETIME, default=0
            )
        )
        out = {
            ENV_STEPS: env_steps - self.env_steps,
            TRAINED_STEPS: trained - self.trained,
            EPISODES: episodes - self.episodes,
        }
        self.env_steps, self.trained, self.episodes = env_steps, trained, episodes
        return out


def save_checkpoint(algo: Any, cfg: DictConfig, out_dir: Path, iteration: int) -> Path:
    """RLlib checkpoint, ``rlperf_policy.pt`` (reloadable without Ray) and a probe: rlperf's
    network, SAC's actor or DQN's Q-network (``actor_net`` of rlperf's RLlib modules).

    The probe (``probe.npz``: observations, logits and greedy actions of the
    policy as it was when saved) lets any reload check that it acts the same.
    """
    # RLlib: deferred, the job wrapper validates the config before it loads.
    from ray.rllib.core import DEFAULT_MODULE_ID

    from rlperf.models.policy_file import save_policy

    ckpt = out_dir / CHECKPOINT_DIR
    algo.save_to_path(str(ckpt.resolve()))
    module = algo.get_module(DEFAULT_MODULE_ID)
    # The learner's weights as saved, which a restore gives the env runners: with an
    # asynchronous learner (APPO, IMPALA) the driver's copy lags them.
    saved = ckpt / "learner_group" / "learner" / "rl_module" / DEFAULT_MODULE_ID
    if saved.is_dir():
        # RLlib: deferred, the job wrapper validates the config before Ray loads.
        from ray.rllib.core.rl_module.rl_module import RLModule

        module = RLModule.from_checkpoint(str(saved.resolve()))
    net = policy_net(module, cfg)
    if net is None:  # a module rlperf does not know: RLlib's checkpoint only
        return ckpt
    save_policy(net, ckpt / POLICY_FILE, extra={ITERATION: iteration})
    write_module_probe(ckpt, module, net, probe_observations(cfg))
    return ckpt


def policy_net(module: Any, cfg: DictConfig) -> Any:
    """The network ``rlperf_policy.pt`` holds: rlperf's own (``module.net``), or SAC's actor
    and DQN's Q-network (``actor_net`` of :mod:`rlperf.models.rl_module`'s RLlib modules;
    None for a module with neither)."""
    if getattr(module, "net", None) is not None:
        return module.net
    if hasattr(module, "actor_net"):
        return module.actor_net(list(cfg.model.hiddens), str(cfg.model.activation))
    return None


def write_module_probe(ckpt: Path, module: Any, net: Any, obs: Any) -> None:
    """``probe.npz`` of the trained module's distribution inputs on ``obs`` (and, for a
    Box policy, the reference actor's actions of them), checked on the saved network
    at once: a policy file that does not act as the module fails here, not downstream."""
    # torch and RLlib: deferred, the job wrapper validates the config before they load.
    import torch
    from ray.rllib.core.columns import Columns

    from rlperf.models.actor import action_range
    from rlperf.runs.probe import check_probe, read_probe, torch_policy_fns

    with torch.inference_mode():
        out = module.forward_inference({Columns.OBS: torch.from_numpy(obs)})
    logits = out[Columns.ACTION_DIST_INPUTS].float().cpu().numpy()
    if net.kind == "mlp" and not net.discrete_actions:
        write_probe(ckpt, obs, logits, net.actions_of(logits), action_range(net.action_spec))
    else:
        write_probe(ckpt, obs, logits)
    check_probe(read_probe(ckpt), *torch_policy_fns(net))


def sampling_efficiency(
    env_steps: float, sample_s: float, runners: int, ceiling: float | None
) -> float:
    """Env steps per second while sampling, per env runner, over the env's ceiling (NaN
    without a ceiling or sampling time)."""
    if not ceiling or not sample_s > 0:  # also NaN: sampling not timed apart (async)
        return math.nan
    return env_steps / sample_s / runners / ceiling


class IterationTimer:
    """Runs ``algo.train()`` once per call and measures it into a ``metrics.csv`` row."""

    def __init__(self, algo: Any, cfg: DictConfig, ctx: JobContext) -> None:
        # RLlib's learner and metrics (Ray, torch): deferred, as in save_checkpoint.
        from rlperf.algos.timed_learner import PhaseClock
        from rlperf.algos.timing import instrument_timing

        self.algo, self.train_cfg, self.ctx = algo, cfg.train, ctx
        self.timing = instrument_timing(algo, str(cfg.algo.name))
        # RLlib's evaluation runs inside train() after the training step: timed apart
        # (eval_s) and left out of iter_s, so throughput does not depend on it.
        self.eval_clock = PhaseClock()
        if evaluates(cfg):
            algo.evaluate = self.eval_clock.wrap("evaluate", algo.evaluate)
        self.counters = IterationCounters()
        self.faults = faults.FaultWatch(algo, ctx.plan)
        self.ceiling = as_record(ctx.record, TrainRecord).env_ceiling_steps_per_s
        self.runners = max(int(ctx.plan.num_env_runners), 1)  # workers=0: the driver samples

    def iteration(self, it: int) -> dict[str, Any]:
        """Iteration ``it`` (1-based): phases, counters, CPU and telemetry of its window."""
        # RLlib: deferred, the job wrapper validates the config before Ray loads.
        from ray.exceptions import RayActorError
        from ray.rllib.utils.metrics import ENV_RUNNER_RESULTS, EPISODE_RETURN_MEAN

        cpu = CpuWindow()
        cpu.start()
        t0 = self.ctx.telemetry_now()
        start = time.perf_counter()
        try:
            result = self.algo.train()
        except RayActorError as exc:  # env runners are restarted by RLlib; learners are not
            if self.faults.learners:
                raise faults.learner_lost(it, it - 1, exc) from exc
            raise
        eval_s = self.eval_clock.pop().get("evaluate", 0.0)
        evaluated = self.eval_clock.pop_calls().get("evaluate", 0) > 0
        iter_s = time.perf_counter() - start - eval_s
        t1 = self.ctx.telemetry_now()
        cpu_pct, ram_pct = cpu.stop(), cpu.ram_util_pct
        counts = self.counters.update(result)
        timing = self.timing.columns(result, counts, iter_s)  # NaN: not measured (async)
        episodes_so_far = self.counters.episodes
        ret = _nested(result, ENV_RUNNER_RESULTS, EPISODE_RETURN_MEAN)
        warmup = it <= self.train_cfg.warmup_iterations or (
            self.train_cfg.warmup_until_first_episode and episodes_so_far == 0
        )
        row: dict[str, Any] = {
            ITERATION: it,
            TIME_S: self.ctx.elapsed_s(),
            **timing,
            ITER_S: iter_s,
            EVAL_S: eval_s,
            **counts,
            ENV_STEPS_PER_S: counts[ENV_STEPS] / iter_s,
            SAMPLING_EFFICIENCY: sampling_efficiency(
                counts[ENV_STEPS], timing.get(SAMPLE_S, math.nan), self.runners, self.ceiling
            ),
            EPISODE_RETURN_MEAN: (float(ret) if ret is not None and episodes_so_far else math.nan),
            **evaluation_row(result, evaluated),
            CPU_UTIL_PCT: cpu_pct,
            RAM_UTIL_PCT: ram_pct,
            **self.faults.read(result),
            **self.ctx.telemetry_window(t0, t1),
        }
        row[EXCLUDED_COLUMN] = faults.exclusion(row, warmup)
        return row


def iteration_text(row: dict[str, Any]) -> str:
    """What one iteration measured, for the progress display."""
    phases = (
        f" (sample {row[SAMPLE_S]:.2f}, learn {row[LEARN_S]:.2f})"
        if math.isfinite(row.get(SAMPLE_S, math.nan))
        else f" ({row[LEARNER_UPDATES]} learner updates, overlapping)"
    )
    text = (
        f"{row[ITER_S]:.2f} s{phases} | "
        f"{row[ENV_STEPS_PER_S]:.0f} env steps/s | return {row[EPISODE_RETURN_MEAN]:.1f}"
    )
    if row[EVAL_EPISODES]:
        capped = f"{row[EVAL_CAPPED_EPISODES]} capped, " if row[EVAL_CAPPED_EPISODES] else ""
        text += f" | eval {row[EVAL_RETURN_MEAN]:.1f} ({capped}{row[EVAL_S]:.1f} s)"
    return text + (f" | excluded: {row[EXCLUDED_COLUMN]}" if row[EXCLUDED_COLUMN] else "")


def train(
    algo: Any, cfg: DictConfig, out_dir: Path, ctx: JobContext, columns: list[str], stop: StopCheck
) -> None:
    """Timed iterations into ``metrics.csv`` and ``ctx.rows`` until ``stop`` says a
    ``train.stop`` criterion was reached, at most ``train.iterations``.

    A checkpoint is saved every ``train.checkpoint_every`` iterations (the last
    one is saved by the caller, also after an interruption).
    """
    iterations, every = int(cfg.train.iterations), int(cfg.train.checkpoint_every)
    timer = IterationTimer(algo, cfg, ctx)
    ctx.open_display(iterations)
    with CsvLog(out_dir / METRICS_FILE, columns) as metrics:
        for it in range(1, iterations + 1):
            row = timer.iteration(it)
            hit = stop.observe(row)
            metrics.write(row)
            ctx.rows.append(row)
            brief = f"{row[ITER_S]:.1f} s/it, {row[ENV_STEPS_PER_S]:.0f} env steps/s"
            fraction = stop.budget_fraction(it, row[TRAIN_TIME_S])
            ctx.step(it, iterations, iteration_text(row), brief, row=row, fraction=fraction)
            if row[EVAL_CAPPED_EPISODES] and stop.capped == row[EVAL_CAPPED_EPISODES]:
                report_capped(cfg, ctx, row)  # the first round with a capped episode
            faults.handle(row, str(cfg.train.on_fault))
            faults.check_trainable(timer.faults, row)
            if hit is not None:
                ctx.progress(f"train.stop.{hit} reached after iteration {it}: stopping")
                return
            if every and it % every == 0 and it < iterations:
                save_checkpoint(algo, cfg, out_dir, it)


def report_capped(cfg: DictConfig, ctx: JobContext, row: dict[str, Any]) -> None:
    """The first evaluation round that rlperf's cap cut short: one line and an incident."""
    cap, source = evaluation_cap(cfg)
    where = {
        "default": "the default for an env without a time limit",
        "train.evaluation.max_episode_steps": "train.evaluation.max_episode_steps",
    }.get(source, source)
    ctx.incident(
        "evaluation_capped",
        f"iteration {row[ITERATION]}: {row[EVAL_CAPPED_EPISODES]} of {row[EVAL_EPISODES]} "
        f"greedy evaluation episode(s) ran {cap} agent steps without ending ({where}) and were "
        f"stopped; a round with a stopped episode does not count toward "
        f"train.stop.episode_return (set env.max_episode_steps, or "
        f"train.evaluation.max_episode_steps)",
        "train.evaluation.max_episode_steps",
    )


def summarise_training(
    cfg: DictConfig,
    rows: list[dict[str, Any]],
    columns: list[str],
    checkpoint: Path,
    record: TrainRecord,
    env_runners: int = 1,
) -> TrainRecord:
    """The training's part of ``summary.json``, into ``record``: aggregates over the
    iterations not excluded.

    ``sampling_efficiency`` there is over those iterations together: their env steps
    over their sampling seconds, per env runner (``env_runners``, at least 1: the driver
    samples with ``workers=0``), over the env's ceiling (``record.env_ceiling_steps_per_s``).
    """
    warm = [r[ITERATION] for r in rows if r[EXCLUDED_COLUMN] == Exclusion.warmup]
    counted = [r for r in rows if not r[EXCLUDED_COLUMN]]
    record.iterations = len(rows)
    record.warmup = {"rule": _warmup_rule(cfg), "iterations": warm, "excluded_from_summary": True}
    record.excluded = excluded_counts(rows)
    record.faults = faults.fault_list(rows)
    record.metrics = summarize_rows(
        rows, columns, skip=(ITERATION, TIME_S, TRAIN_TIME_S, *FAULT_COLUMNS)
    )
    record.total_env_steps = int(sum(r[ENV_STEPS] for r in rows))
    record.sampling_efficiency = sampling_efficiency(
        sum(r[ENV_STEPS] for r in counted),
        sum(r[SAMPLE_S] for r in counted),
        max(env_runners, 1),
        record.env_ceiling_steps_per_s,
    )
    record.checkpoint = str(checkpoint)
    return record


def measure_env_ceiling(cfg: DictConfig, ctx: JobContext) -> None:
    """``train.env_ceiling``: the env's raw speed into the job's record (before Ray starts)."""
    c, record = cfg.train.env_ceiling, as_record(ctx.record, TrainRecord)
    if not c.enabled:
        record.env_ceiling_steps_per_s, record.env_ceiling = None, {"enabled": False}
        return
    result = env_ceiling(
        env_config(cfg), float(c.duration_s), c.cache_dir, int(cfg.seed),
        int(cfg.env_runner.num_envs),
    )  # fmt: skip
    record.env_ceiling_steps_per_s = result["steps_per_s"]
    record.env_ceiling = {"enabled": True, **result}
    ctx.progress(
        f"env ceiling: {result['steps_per_s']:.0f} env steps/s with random actions in one "
        + ("process (cached)" if result["cached"] else f"process ({result['probe_s']:.1f} s probe)")
    )


def record_scale(algo: Any) -> dict[str, Any]:
    """The scale settings as RLlib runs them (``summary.json`` ``scale``), read back from
    the built Algorithm's config: the effective values, defaults included.

    The plan they came from is ``resource_plan``; where the learners run and each
    env runner's torch threads are in ``learner`` and ``env_runners``
    (:mod:`rlperf.resources.placement`).
    """
    # torch: deferred, the job wrapper validates the config before it loads.
    import torch

    c = algo.config
    mode = c.gym_env_vectorize_mode
    return {
        "num_env_runners": int(c.num_env_runners),
        "num_envs_per_env_runner": int(c.num_envs_per_env_runner),
        "gym_env_vectorize_mode": str(getattr(mode, "value", mode)).lower(),
        "num_cpus_per_env_runner": float(c.num_cpus_per_env_runner),
        "num_learners": int(c.num_learners),
        "num_gpus_per_learner": float(c.num_gpus_per_learner),
        "num_cpus_per_learner": c.num_cpus_per_learner,
        "driver_torch_threads": int(torch.get_num_threads()),
        "sub_env_seeds": sub_env_seeds(
            c.seed, int(c.num_env_runners), int(c.num_envs_per_env_runner)
        ),
    }


def sub_env_seeds(seed: int | None, runners: int, envs: int) -> dict[str, Any] | None:
    """Each env runner's sub-env seeds on every engine: RLlib resets runner w's vector env once
    with ``seed + w`` (w = 0: the driver samples), and gymnasium's vector envs, ale-py's and
    EnvPool (:class:`rlperf.envs.vector.EnvPoolSeeded`) seed sub-env i with that plus i."""
    if seed is None:
        return None
    indices = range(1, runners + 1) if runners else [0]
    return {
        "rule": "sub-env i of env runner w: seed + w + i (RLlib's reset seed seed + w)",
        "by_env_runner": {str(w): [int(seed) + w + i for i in range(envs)] for w in indices},
    }


def record_placement(algo: Any, ctx: JobContext) -> None:
    """Where the learner(s) and env runners of the built ``algo`` run (``summary.json``).

    ``learner``: the learners' processes and torch devices; ``env_runners``: each
    env runner's device and the GPU share Ray gave it, to compare with
    ``resource_plan`` (:mod:`rlperf.resources.placement`).
    """

    record = as_record(ctx.record, TrainRecord)
    record.learner = learner = learner_placement(algo, ctx.plan)
    runners = env_runner_placement(algo)
    record.env_runners = {"started": len(runners), "runners": runners}
    devices = sorted({s["device"] for s in learner["learners"]})
    ctx.progress(
        f"learner on {', '.join(devices)} ({learner['where']}); "
        f"{len(runners)} env runner(s), GPU share each: "
        f"{sorted({r['gpus'] for r in runners}) if runners else '-'}"
    )


def run_training(cfg: DictConfig, out_dir: Path, ctx: JobContext) -> TrainRecord:
    """Train ``train.iterations`` iterations; write metrics.csv and the checkpoint.

    ``ctx`` is the job context (:class:`rlperf.job_wrapper.JobContext`): it gives the
    resource plan, the telemetry sampler and a place for partial results.
    """
    # torch and RLlib: deferred, the job wrapper validates the config before they load.
    import torch
    from ray.rllib.core import DEFAULT_MODULE_ID

    from rlperf.models.policy_file import count_trainable_params

    if cfg.train.torch_threads is not None:
        torch.set_num_threads(int(cfg.train.torch_threads))
    cpu_energy = ctx.sampler is not None and ctx.sampler.rapl is not None  # RAPL read here
    columns = [
        *TRAIN_COLUMNS,
        *gpu_columns(ctx.gpu_indices),
        *([CPU_ENERGY_J] if cpu_energy else []),
    ]
    # Recorded before Ray starts, so that a layout Ray cannot place still shows its plan.
    record = as_record(ctx.record, TrainRecord)
    record.resource_plan = plan_record(ctx.plan, str(cfg.gpu_layout.name))
    measure_env_ceiling(cfg, ctx)
    ctx.progress(f"starting Ray; {cfg.algo.name} with {ctx.plan.num_env_runners} env runner(s)")
    with ray_session(ctx.plan, ctx.machine, cfg.ray):
        algo = with_evaluation(build_algo_config(cfg, ctx.plan), cfg).build_algo()
        stop = StopCheck(cfg)  # the clock starts when the algorithm is built
        # Before it: pre-flight, the env ceiling probe, Ray's start, building the actors.
        record.startup_s = ctx.elapsed_s()
        try:
            record.model_params = count_trainable_params(algo.get_module(DEFAULT_MODULE_ID))
            record_placement(algo, ctx)
            record.scale = record_scale(algo)
            train(algo, cfg, out_dir, ctx, columns, stop)
            ckpt = save_checkpoint(algo, cfg, out_dir, len(ctx.rows))
        except BaseException:
            # Stopping actors that died with the run: RLlib logs each as an error with the
            # run's own exception attached, which the one line rlperf prints already says.
            with quiet_logger("ray.rllib"):
                algo.stop()
            raise
        algo.stop()
    summarise_training(
        cfg, ctx.rows, columns, ckpt.relative_to(out_dir), record, ctx.plan.num_env_runners
    )
    return stop.record(record)


def _warmup_rule(cfg: DictConfig) -> str:
    parts = []
    if cfg.train.warmup_iterations:
        parts.append(f"first {cfg.train.warmup_iterations} iteration(s)")
    if cfg.train.warmup_until_first_episode:
        parts.append("iterations before the first finished episode")
    return " and ".join(parts) if parts else "none"
