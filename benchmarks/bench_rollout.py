"""Latency of a policy acting the RLlib way, on one CPU core: forward alone vs the full path.

Runs the rollout stage's own timed loop (:func:`rlperf.rollout.rollout_job.play` with
:class:`rlperf.rollout.policy.DriverPolicy`) on real Pong frames, with the
study's model1 (or any ``--model``) at **random weights** — latency does not
depend on the weights' values, so no trained checkpoint is needed. The process
is pinned to one CPU and torch to one thread.

Prints median / p90 / p99 (ms) of:

- ``net_ms``: ``VisionNet.logits`` under ``torch.inference_mode`` — the bare network;
- ``forward_ms``: ``RLModule.forward_inference`` on the prepared batch (``steps.csv``);
- ``action_ms``: observation in → action out through RLlib's connector pipelines
  (``steps.csv``);
- ``env_step_ms``: ``env.step``;

and checks the targets: forward < 1 ms and full action < 1.5 ms median (model1).

    python benchmarks/bench_rollout.py [--model model1] [--steps 3000] [--cpu 0] [--realtime]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

TARGETS_MS = {"forward_ms": 1.0, "action_ms": 1.5}


def model_config(name: str) -> dict[str, Any]:
    """``model`` group option ``name`` (rlperf/conf/model/<name>.yaml)."""
    from omegaconf import OmegaConf

    text = (resources.files("rlperf.conf") / "model" / f"{name}.yaml").read_text()
    cfg = OmegaConf.to_container(OmegaConf.create(text), resolve=True)
    assert isinstance(cfg, dict)
    return cfg


def build_policy(model: dict[str, Any]) -> tuple[Any, Any]:
    """A random-weight DriverPolicy with the pipelines a training job's PPOConfig builds."""
    import torch
    from ray.rllib.algorithms.ppo import PPOConfig
    from ray.rllib.core.rl_module.rl_module import RLModuleSpec

    from rlperf.envs.atari import env_spaces
    from rlperf.models.rl_module import VisionNetRLModule
    from rlperf.rollout.policy import DriverPolicy

    env_cfg = {"dim": int(model["dim"]), "framestack": int(model["framestack"]), "seed": 0}
    obs_space, act_space = env_spaces(env_cfg)
    config = (
        PPOConfig()
        .api_stack(enable_rl_module_and_learner=True, enable_env_runner_and_connector_v2=True)
        .framework("torch")
        .rl_module(
            rl_module_spec=RLModuleSpec(
                module_class=VisionNetRLModule,
                model_config={"conv_filters": model["conv_filters"]},
            )
        )
    )
    policy = DriverPolicy.from_config(config, obs_space, act_space, torch.device("cpu"))
    return policy, env_cfg


def net_latency_ms(policy: Any, observations: np.ndarray, repeats: int) -> list[float]:
    """Time the bare network on real observations, one at a time."""
    import torch

    net = policy.module.net
    out = []
    with torch.inference_mode():
        for i in range(repeats):
            x = torch.from_numpy(observations[i % len(observations)][None])
            t0 = time.perf_counter_ns()
            net.logits(x).argmax(dim=1)
            out.append((time.perf_counter_ns() - t0) / 1e6)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="model1")
    parser.add_argument("--steps", type=int, default=3000)
    parser.add_argument("--warmup-steps", type=int, default=300)
    parser.add_argument("--cpu", type=int, default=None, help="CPU to pin to (default: first)")
    parser.add_argument("--max-episode-steps", type=int, default=1000)
    parser.add_argument("--json", type=Path, default=None, help="also write the figures here")
    parser.add_argument("--check", action="store_true", help="exit 1 if a target is missed")
    parser.add_argument(
        "--realtime",
        action="store_true",
        help="run under SCHED_FIFO (needs root) so other processes cannot preempt the timed "
        "loop on its CPU: the latency of the core itself on a busy machine",
    )
    args = parser.parse_args(argv)

    cpu = args.cpu if args.cpu is not None else min(os.sched_getaffinity(0))
    os.sched_setaffinity(0, {cpu})
    scheduler = "SCHED_OTHER"
    if args.realtime:
        try:
            os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(1))
            scheduler = "SCHED_FIFO"
        except OSError as exc:
            print(f"--realtime: cannot use SCHED_FIFO ({exc}); measuring without it")
    import torch

    torch.set_num_threads(1)

    from rlperf.envs.atari import make_atari_env
    from rlperf.models.policy_file import count_trainable_params
    from rlperf.results.latency import LatencyRecorder, summarize_latency
    from rlperf.rollout.rollout_job import play
    from rlperf.rollout.timing import measure_timer

    model = model_config(args.model)
    policy, env_cfg = build_policy(model)
    env = make_atari_env({**env_cfg, "max_episode_steps": args.max_episode_steps})
    timer = measure_timer()
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory() as tmp:
        with LatencyRecorder(Path(tmp), args.warmup_steps) as rec:
            play(policy, env, rec, episodes=1, steps=args.steps)
        observations = []
        obs, _ = env.reset(seed=1)
        for _ in range(64):
            observations.append(obs)
            obs, *_ = env.step(int(env.action_space.sample()))
        lat = rec.latency_summary()
    env.close()
    net = net_latency_ms(policy, np.stack(observations), args.steps)
    lat = {"net_ms": summarize_latency(net, args.warmup_steps), **lat}
    load_after = os.getloadavg()

    print(
        f"bench_rollout: {args.model} ({count_trainable_params(policy.module):,} params, "
        f"random weights), {args.steps} steps on CPU {cpu}, torch {torch.__version__} "
        f"with 1 thread ({scheduler}); first {args.warmup_steps} steps excluded"
    )
    print(
        f"machine: {os.cpu_count()} CPUs, load average {load_before[0]:.2f} before / "
        f"{load_after[0]:.2f} after; timer overhead {timer.overhead_ns:.0f} ns (median)"
    )
    print(f"{'':>12} {'p50':>8} {'p90':>8} {'p99':>8} {'mean':>8}  target (p50)")
    ok = True
    for key, s in lat.items():
        target = TARGETS_MS.get(key)
        verdict = ""
        if target is not None:
            passed = s["p50"] < target
            ok &= passed
            verdict = f"< {target:g} ms {'PASS' if passed else 'MISS'}"
        print(
            f"{key:>12} {s['p50']:8.3f} {s['p90']:8.3f} {s['p99']:8.3f} {s['mean']:8.3f}  {verdict}"
        )
    overhead = statistics.median(
        a - f for a, f in zip(rec.values("action_ms"), rec.values("forward_ms"), strict=True)
    )
    print(f"RLlib connectors + episode bookkeeping (action - forward, median): {overhead:.3f} ms")
    if args.json is not None:
        args.json.write_text(
            json.dumps(
                {
                    "model": args.model,
                    "steps": args.steps,
                    "cpu": cpu,
                    "scheduler": scheduler,
                    "loadavg": [load_before, load_after],
                    "timer_overhead_ns": timer.overhead_ns,
                    "latency": lat,
                },
                indent=2,
            )
        )
    return 0 if ok or not args.check else 1


if __name__ == "__main__":
    sys.exit(main())
