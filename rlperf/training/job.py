"""The training job: PPO on the composed config, one metrics row per iteration.

Config subtrees used: ``model``, ``env``, ``algo``, ``train``, ``workers``,
``env_runner``, ``gpu_layout``, ``cpu_affinity``, ``ray``, ``seed``.
"""

from __future__ import annotations

import logging
import math
import time
from pathlib import Path
from typing import Any, cast

from omegaconf import DictConfig, OmegaConf

from rlperf.resources.plan import ResourcePlan
from rlperf.results.columns import TRAIN_COLUMNS
from rlperf.results.csvlog import CsvLog
from rlperf.results.summary import summarize_rows

log = logging.getLogger(__name__)


def env_config(cfg: DictConfig) -> dict[str, Any]:
    """The env subtree as a plain dict for the env creator, with the run's seed."""
    env = cast(dict[str, Any], OmegaConf.to_container(cfg.env, resolve=True))
    env["seed"] = int(cfg.seed)
    return env


def build_ppo_config(cfg: DictConfig, plan: ResourcePlan) -> Any:
    """A ``PPOConfig`` for the composed config and resource plan (nothing started yet)."""
    from ray.rllib.algorithms.ppo import PPOConfig
    from ray.rllib.core.rl_module.rl_module import RLModuleSpec

    from rlperf.envs.atari import register_rllib_env
    from rlperf.models.rl_module import VisionNetRLModule
    from rlperf.training.timed_learner import TimedPPOTorchLearner

    a = cfg.algo
    return (
        PPOConfig()
        .api_stack(enable_rl_module_and_learner=True, enable_env_runner_and_connector_v2=True)
        .framework("torch")
        .environment(register_rllib_env(), env_config=env_config(cfg))
        .env_runners(
            num_env_runners=plan.num_env_runners,
            num_envs_per_env_runner=plan.envs_per_env_runner,
            num_cpus_per_env_runner=plan.cpus_per_env_runner,  # type: ignore[arg-type]
            num_gpus_per_env_runner=plan.gpus_per_worker_scheduled,
            rollout_fragment_length=a.rollout_fragment_length,
        )
        .learners(
            num_learners=plan.num_learners,
            num_gpus_per_learner=plan.gpus_per_learner,
            learner_class=TimedPPOTorchLearner,
        )
        .training(
            train_batch_size_per_learner=int(a.train_batch_size) // max(plan.num_learners, 1),
            minibatch_size=int(a.minibatch_size),
            num_epochs=int(a.num_epochs),
            lr=float(a.lr),
            gamma=float(a.gamma),
            lambda_=float(a.lambda_),
            clip_param=float(a.clip_param),
            vf_clip_param=float(a.vf_clip_param),
            kl_coeff=float(a.kl_coeff),
            kl_target=float(a.kl_target),
            entropy_coeff=float(a.entropy_coeff),
            vf_loss_coeff=float(a.vf_loss_coeff),
            grad_clip=a.grad_clip,
        )
        .rl_module(
            rl_module_spec=RLModuleSpec(
                module_class=VisionNetRLModule,
                model_config={"conv_filters": OmegaConf.to_container(cfg.model.conv_filters)},
            )
        )
        .debugging(seed=int(cfg.seed), log_level="WARN")
    )


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
            "env_steps": env_steps - self.env_steps,
            "trained_steps": trained - self.trained,
            "episodes": episodes - self.episodes,
        }
        self.env_steps, self.trained, self.episodes = env_steps, trained, episodes
        return out


PROBE_FILE = "probe.npz"
PROBE_SIZE = 32


def probe_observations(cfg: DictConfig, n: int = PROBE_SIZE) -> Any:
    """``n`` real observations of the run's env (random actions, fixed seed)."""
    import numpy as np

    from rlperf.envs.atari import make_atari_env

    env = make_atari_env(env_config(cfg))
    rng = np.random.default_rng(int(cfg.seed))
    try:
        obs, _ = env.reset(seed=int(cfg.seed))
        frames: list[np.ndarray] = []
        n_actions = int(cast(Any, env.action_space).n)
        while len(frames) < n:
            frames.append(obs)
            obs, _, term, trunc, _ = env.step(int(rng.integers(n_actions)))
            if term or trunc:
                obs, _ = env.reset()
        return np.stack(frames)
    finally:
        env.close()


def save_checkpoint(algo: Any, cfg: DictConfig, out_dir: Path, iteration: int) -> Path:
    """RLlib checkpoint, ``rlperf_policy.pt`` (reloadable without Ray) and a probe.

    The probe (``probe.npz``: observations, logits and greedy actions of the
    policy as it was when saved) lets any reload check that it acts the same.
    """
    import numpy as np
    import torch
    from ray.rllib.core import DEFAULT_MODULE_ID

    from rlperf.models.vision_net import POLICY_FILE, save_policy

    ckpt = out_dir / "checkpoint"
    algo.save_to_path(str(ckpt.resolve()))
    net = algo.get_module(DEFAULT_MODULE_ID).net
    save_policy(net, ckpt / POLICY_FILE, extra={"iteration": iteration})
    obs = probe_observations(cfg)
    with torch.inference_mode():
        logits = net.logits(torch.from_numpy(obs)).cpu().numpy()
    np.savez(ckpt / PROBE_FILE, obs=obs, logits=logits, actions=logits.argmax(axis=1))
    return ckpt


def run_training(cfg: DictConfig, out_dir: Path, ctx: Any) -> dict[str, Any]:
    """Train ``train.iterations`` iterations; write metrics.csv and the checkpoint.

    ``ctx`` is the job context (:class:`rlperf.results.job.JobContext`): it gives
    the resource plan, the telemetry sampler and a place for partial results.
    """
    import torch
    from ray.rllib.core import DEFAULT_MODULE_ID
    from ray.rllib.utils.metrics import ENV_RUNNER_RESULTS, EPISODE_RETURN_MEAN

    from rlperf.models.vision_net import count_trainable_params
    from rlperf.resources.ray_session import ray_session
    from rlperf.telemetry.sampler import CpuWindow, gpu_columns
    from rlperf.training.timed_learner import instrument, iteration_phases

    if cfg.train.torch_threads is not None:
        torch.set_num_threads(int(cfg.train.torch_threads))
    plan: ResourcePlan = ctx.plan
    gpu_cols = gpu_columns(ctx.gpu_indices)
    columns = [*TRAIN_COLUMNS, *gpu_cols]
    rows: list[dict[str, Any]] = ctx.rows
    with ray_session(plan, ctx.machine, cfg.ray):
        algo = build_ppo_config(cfg, plan).build_algo()
        try:
            ctx.summary["model_params"] = count_trainable_params(algo.get_module(DEFAULT_MODULE_ID))
            clock = instrument(algo)
            counters = IterationCounters()
            episodes_so_far = 0
            with CsvLog(out_dir / "metrics.csv", columns) as metrics:
                for it in range(1, int(cfg.train.iterations) + 1):
                    cpu = CpuWindow()
                    cpu.start()
                    t0 = ctx.telemetry_now()
                    start = time.perf_counter()
                    result = algo.train()
                    iter_s = time.perf_counter() - start
                    t1 = ctx.telemetry_now()
                    cpu_pct, ram_pct = cpu.stop(), cpu.ram_util_pct
                    phases = iteration_phases(algo, clock)
                    counts = counters.update(result)
                    episodes_so_far += counts["episodes"]
                    ret = _nested(result, ENV_RUNNER_RESULTS, EPISODE_RETURN_MEAN)
                    warmup = it <= cfg.train.warmup_iterations or (
                        cfg.train.warmup_until_first_episode and episodes_so_far == 0
                    )
                    row: dict[str, Any] = {
                        "iteration": it,
                        "time_s": ctx.elapsed_s(),
                        "warmup": bool(warmup),
                        **phases,
                        "iter_s": iter_s,
                        "other_s": iter_s - sum(phases.values()),
                        **counts,
                        "env_steps_per_s": counts["env_steps"] / iter_s,
                        "trained_steps_per_s": (
                            counts["trained_steps"] / phases["learn_s"]
                            if phases["learn_s"] > 0
                            else math.nan
                        ),
                        "episode_return_mean": (
                            float(ret) if ret is not None and episodes_so_far else math.nan
                        ),
                        "cpu_util_pct": cpu_pct,
                        "ram_util_pct": ram_pct,
                        **ctx.telemetry_window(t0, t1),
                    }
                    metrics.write(row)
                    rows.append(row)
                    ctx.progress(
                        f"iteration {it}/{cfg.train.iterations}: {iter_s:.2f} s "
                        f"(sample {phases['sample_s']:.2f}, load {phases['load_s']:.2f}, "
                        f"learn {phases['learn_s']:.2f}, sync {phases['sync_s']:.3f}), "
                        f"{counts['env_steps']} env steps, return {row['episode_return_mean']:.2f}"
                    )
                    every = int(cfg.train.checkpoint_every)
                    if every and it % every == 0 and it < cfg.train.iterations:
                        save_checkpoint(algo, cfg, out_dir, it)
            ckpt = save_checkpoint(algo, cfg, out_dir, len(rows))
        finally:
            algo.stop()
    warm = [r["iteration"] for r in rows if r["warmup"]]
    return {
        "iterations": len(rows),
        "warmup": {
            "rule": _warmup_rule(cfg),
            "iterations": warm,
            "excluded_from_summary": True,
        },
        "metrics": summarize_rows(rows, columns, skip=("iteration", "time_s", "warmup")),
        "total_env_steps": int(sum(r["env_steps"] for r in rows)),
        "checkpoint": str(ckpt.relative_to(out_dir)),
    }


def _warmup_rule(cfg: DictConfig) -> str:
    parts = []
    if cfg.train.warmup_iterations:
        parts.append(f"first {cfg.train.warmup_iterations} iteration(s)")
    if cfg.train.warmup_until_first_episode:
        parts.append("iterations before the first finished episode")
    return " and ".join(parts) if parts else "none"
