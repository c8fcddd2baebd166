"""Foundation benchmarks (prints figures; not a test).

(a) Greedy single-observation inference latency of model1 in the RLModule and
    in the bare torch network: median and p99 with 1 and 2 torch threads.
    Target: median below 1 ms on one core.
(b) Overhead of rlperf's training job against a bare RLlib ``algo.train()`` loop
    with the same config, measured side by side in one process and one Ray
    session, rounds interleaved (A B A B ...): per-iteration wall time between
    consecutive iterations (everything the loop does), first iteration of each
    run dropped. Target: overhead below 3%.

    python benchmarks/bench_training.py [--iterations 4] [--rounds 2] [--skip-overhead]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

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


def bench_overhead(iterations: int, rounds: int) -> None:
    import pandas as pd
    import ray
    from hydra import compose, initialize_config_module
    from ray.rllib.algorithms.ppo.torch.ppo_torch_learner import PPOTorchLearner

    from rlperf.algos import build_algo_config
    from rlperf.config.schema import register_configs
    from rlperf.resources.plan import detect_machine, plan_resources, ray_cpu_count
    from rlperf.resources.ray_session import init_ray
    from rlperf.stages import run_stage

    register_configs()
    overrides = ["model=model1", "workers=1", f"train.iterations={iterations}"]
    with initialize_config_module(config_module="rlperf.conf", version_base="1.3"):
        cfg = compose(config_name="config", overrides=overrides)
    plan = plan_resources(cfg)
    init_ray(cfg.ray, ray_cpu_count(plan, detect_machine(), False), plan.num_gpus)
    bare: list[float] = []
    rlperf: list[float] = []
    try:
        for r in range(rounds):
            algo = build_algo_config(cfg, plan).learners(learner_class=PPOTorchLearner).build_algo()
            stamps = []
            for _ in range(iterations):
                algo.train()
                stamps.append(time.perf_counter())
            algo.stop()
            bare += list(np.diff(stamps))
            with tempfile.TemporaryDirectory() as tmp:
                run_stage(cfg, Path(tmp))
                rlperf += list(pd.read_csv(Path(tmp) / "metrics.csv")["time_s"].diff().dropna())
            print(
                f"  round {r + 1}/{rounds}: bare {statistics.median(bare):.3f} s/it, "
                f"rlperf {statistics.median(rlperf):.3f} s/it"
            )
    finally:
        ray.shutdown()
    b, p = statistics.median(bare), statistics.median(rlperf)
    print(
        "(b) rlperf training job vs bare RLlib algo.train() loop "
        f"({' '.join(overrides)}, quickstart sizes)"
    )
    print(f"  bare   median {b:.3f} s/iteration (n={len(bare)})")
    print(f"  rlperf median {p:.3f} s/iteration (n={len(rlperf)})")
    print(f"  overhead ratio rlperf/bare = {p / b:.3f} ({(p / b - 1) * 100:+.1f}%)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--iterations", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--skip-overhead", action="store_true")
    args = ap.parse_args()
    bench_inference()
    if not args.skip_overhead:
        bench_overhead(args.iterations, args.rounds)


if __name__ == "__main__":
    main()
