"""Foundation benchmarks (prints figures; not a test).

(a) Greedy single-observation inference latency of model1 in the RLModule and
    in the bare torch network: median and p99 with 1 and 2 torch threads.
    Target: median below 1 ms on one core.
(b) rlperf's training job against a bare RLlib ``algo.train()`` loop with the same
    config (rlperf's ``build_algo_config``, RLlib's plain PPO learner), side by side in
    one process and one Ray session, rounds interleaved with alternating order
    (A B, B A, ...). Default config: ``experiment=cartpole_target
    train.stop.judge=train`` (env=cartpole model=mlp64 PPO, one env runner x 4 envs,
    seed 0), both stopping as rlperf's ``train.stop`` does (rlperf.training.target):
    after the first iteration whose RLlib smoothed training return
    (``env_runners/episode_return_mean``) reaches ``train.stop.episode_return``, or
    when the sampled env steps reach ``train.stop.env_steps``. Per round: the median
    per-iteration wall time (between consecutive iterations, so the first is
    dropped) of each, their ratio rlperf/bare (target: median ratio <= 1.03), and
    the env steps to target of each (rlperf's from summary.json: the same seed
    must give the same count).

    python benchmarks/bench_training.py [--rounds 5] [--skip-inference] [--skip-overhead]
        [--overrides "experiment=cartpole_target train.stop.judge=train"]

    On a loaded 2-core machine a pair to the target takes many minutes: the ratio alone
    needs only a few iterations per run (``--overrides "... train.iterations=10"``: the cap,
    which both honour), the steps to target one pair (``--rounds 1``).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("RLLIB_TEST_NO_TF_IMPORT", "1")

import numpy as np
import torch


def bench_inference(samples: int = 2000) -> None:
    import gymnasium as gym
    from ray.rllib.core.columns import Columns

    from rlperf.models.rl_module import VisionNetRLModule

    filters = [[16, [8, 8], 4], [32, [4, 4], 2], [256, [11, 11], 1]]
    module = VisionNetRLModule(
        observation_space=gym.spaces.Box(0, 255, (84, 84, 4), np.uint8),
        action_space=gym.spaces.Discrete(6),
        model_config={"conv_filters": filters},
    )
    module.eval()
    rng = np.random.default_rng(0)
    frames = rng.integers(0, 256, (64, 84, 84, 4), dtype=np.uint8)

    def rl_module_action(obs: np.ndarray) -> int:
        out = module.forward_inference({Columns.OBS: torch.from_numpy(obs)[None]})
        return int(out[Columns.ACTION_DIST_INPUTS].argmax(dim=1))

    print("(a) model1 greedy single-observation inference (random weights)")
    for threads in (1, 2):
        torch.set_num_threads(threads)
        for name, fn in (
            ("RLModule.forward_inference", rl_module_action),
            ("VisionNet.greedy_action", module.net.greedy_action),
        ):
            with torch.inference_mode():
                for i in range(100):
                    fn(frames[i % 64])
                ts = []
                for i in range(samples):
                    t0 = time.perf_counter_ns()
                    fn(frames[i % 64])
                    ts.append(time.perf_counter_ns() - t0)
            ms = np.asarray(ts) / 1e6
            print(
                f"  threads={threads} {name:28s} median {np.median(ms):.3f} ms  "
                f"p99 {np.percentile(ms, 99):.3f} ms  (n={samples})"
            )


def bare_run(cfg: Any, plan: Any) -> tuple[list[float], int | None]:
    """A bare ``algo.train()`` loop: per-iteration seconds and the env steps at which the
    smoothed training return reached ``train.stop.episode_return`` (None: not reached),
    stopping as rlperf's ``train.stop`` does (judge=train)."""
    from ray.rllib.algorithms.ppo.torch.ppo_torch_learner import PPOTorchLearner
    from ray.rllib.utils.metrics import (
        ENV_RUNNER_RESULTS,
        EPISODE_RETURN_MEAN,
        NUM_ENV_STEPS_SAMPLED_LIFETIME,
    )

    from rlperf.algos import build_algo_config

    stop = cfg.train.stop
    algo = build_algo_config(cfg, plan).learners(learner_class=PPOTorchLearner).build_algo()
    stamps, reached = [], None
    try:
        for _ in range(int(cfg.train.iterations)):
            runners = algo.train()[ENV_RUNNER_RESULTS]
            stamps.append(time.perf_counter())
            steps, ret = (
                int(runners[NUM_ENV_STEPS_SAMPLED_LIFETIME]),
                runners.get(EPISODE_RETURN_MEAN),
            )
            if stop.episode_return is not None and ret is not None and ret >= stop.episode_return:
                reached = steps
                break
            if stop.env_steps is not None and steps >= stop.env_steps:
                break
    finally:
        algo.stop()
    return list(np.diff(stamps)), reached


def rlperf_run(cfg: Any) -> tuple[list[float], int | None]:
    """rlperf's training job: per-iteration seconds (metrics.csv) and summary.json's
    ``env_steps_to_target``."""
    import pandas as pd

    from rlperf.stages import run_stage

    with tempfile.TemporaryDirectory() as tmp:
        run_stage(cfg, Path(tmp))
        its = list(pd.read_csv(Path(tmp) / "metrics.csv")["time_s"].diff().dropna())
        summary = json.loads((Path(tmp) / "summary.json").read_text())
    return its, summary.get("env_steps_to_target")


def bench_overhead(overrides: list[str], rounds: int) -> None:
    import ray
    from hydra import compose, initialize_config_module

    from rlperf.algos import plan_resources
    from rlperf.config.schema import register_configs
    from rlperf.resources.plan import detect_machine, ray_cpu_count
    from rlperf.resources.ray_session import init_ray

    register_configs()
    with initialize_config_module(config_module="rlperf.conf", version_base="1.3"):
        cfg = compose(config_name="config", overrides=overrides)
    plan = plan_resources(cfg)
    init_ray(cfg.ray, ray_cpu_count(plan, detect_machine(), False), plan.num_gpus)
    print(f"(b) rlperf training job vs bare RLlib algo.train() loop ({' '.join(overrides)})")
    print(f"  load average at start: {os.getloadavg()}")
    print("| round | order | bare s/it | rlperf s/it | ratio | bare steps to target | "
          "rlperf steps to target |")  # fmt: skip
    print("|---|---|---|---|---|---|---|")
    ratios, same = [], []
    try:
        for r in range(rounds):
            first_bare = r % 2 == 0
            runs = {}
            for name in ("bare", "rlperf") if first_bare else ("rlperf", "bare"):
                runs[name] = bare_run(cfg, plan) if name == "bare" else rlperf_run(cfg)
            (b_its, b_steps), (p_its, p_steps) = runs["bare"], runs["rlperf"]
            b, p = statistics.median(b_its), statistics.median(p_its)
            ratios.append(p / b)
            if b_steps is not None or p_steps is not None:  # capped runs: nothing to compare
                same.append(b_steps == p_steps)
            order = "bare, rlperf" if first_bare else "rlperf, bare"
            print(f"| {r + 1} | {order} | {b:.3f} | {p:.3f} | {p / b:.3f} | {b_steps} | "
                  f"{p_steps} |", flush=True)  # fmt: skip
    finally:
        ray.shutdown()
    print(f"  load average at end: {os.getloadavg()}")
    med = statistics.median(ratios)
    print(f"  median ratio rlperf/bare over {rounds} pairs = {med:.3f} ({(med - 1) * 100:+.1f}%)")
    if same:
        print(f"  same env steps to target in {sum(same)}/{len(same)} pairs that reached it")
    else:
        print("  no run reached the target: env steps to target not compared")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--overrides", default="experiment=cartpole_target train.stop.judge=train")
    ap.add_argument("--skip-inference", action="store_true")
    ap.add_argument("--skip-overhead", action="store_true")
    args = ap.parse_args()
    if not args.skip_inference:
        bench_inference()
    if not args.skip_overhead:
        bench_overhead(args.overrides.split(), args.rounds)


if __name__ == "__main__":
    main()
