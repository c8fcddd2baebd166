"""Train the committed MuJoCo policies with rlperf's own commands, check that each clearly
beats a random actor, and write the committed copies (docs/compression.md#the-mujoco-policies).

    python benchmarks/bench_mujoco_policies.py --policy halfcheetah_sac [--seed 0]
        [--episodes 10] [--out DIR] [--overrides ...] [--check-only DIR] [--force]
    python benchmarks/bench_mujoco_policies.py --policy hopper_ppo ...

Steps (each one is a command a user can type), as ``bench_pendulum_policy.py``'s:

1. the training command of :data:`POLICIES` (``rlperf env=mujoco ...``), a fixed budget of
   env steps;
2. ``rlperf stage=edge backend=rllib|tflite_fp32 run=<1> edge.episodes=<N>``: the saved
   actor plays N greedy episodes (seeds 0..N-1) in torch and in TFLite fp32; the fp32
   cell's fidelity check plays a uniformly random actor on the same seeds;
3. the criteria: the greedy return at least ``min_above_random`` above the random actor's
   (and the paired interval's low end above 0), and ``rllib`` and ``tflite_fp32`` actions
   within 1e-4 of the range;
4. written to ``benchmarks/policies/<policy>/`` with ``provenance.json`` only when the
   criteria are met (``--force`` writes anyway, marked as failing).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from bench_image_policy import ROOT, commit_policy, edge_checks, train_or_reuse

#: policy -> (training overrides, the margin over a random actor it must clear).
POLICIES: dict[str, tuple[list[str], float]] = {
    # SAC with the common MuJoCo settings (learning rates 3e-4, batch 256, soft target
    # updates; CleanRL's and Stable-Baselines3's), learning from 2 000 steps on, one update
    # per 4 env steps (training_intensity 64 = 256 / 4: an update took about 0.1 s here).
    "halfcheetah_sac": ([
        "algo=sac", "env=mujoco", "env.id=HalfCheetah-v5", "model=mlp256",
        "model.activation=relu", "workers=0", "train.torch_threads=1",
        "algo.actor_lr=3e-4", "algo.critic_lr=3e-4", "algo.alpha_lr=3e-4",
        "algo.num_steps_sampled_before_learning_starts=2000", "algo.min_time_s_per_iteration=null",
        "algo.min_sample_timesteps_per_iteration=1000", "algo.training_intensity=64",
        "train.iterations=30",
        "train.warmup_iterations=0",
    ], 200.0),
    # PPO with the common MuJoCo settings (lr 3e-4, GAE 0.95, clip 0.2, 10 epochs of
    # minibatches of 64 over 2 048 steps; no KL penalty).
    "hopper_ppo": ([
        "algo=ppo", "env=mujoco", "env.id=Hopper-v5", "model=mlp64", "workers=0",
        "train.torch_threads=1", "algo.lr=3e-4", "algo.lambda_=0.95", "algo.clip_param=0.2",
        "algo.num_epochs=10", "algo.minibatch_size=64", "algo.train_batch_size=2048",
        "algo.kl_coeff=0.0", "algo.vf_clip_param=100.0", "algo.entropy_coeff=0.0",
        "train.iterations=60", "train.warmup_iterations=0",
    ], 100.0),
}  # fmt: skip


def check(train_dir: Path, episodes: int, out: Path, margin: float) -> dict[str, Any]:
    """Steps 2 and 3."""
    common = [f"run={train_dir}", f"edge.episodes={episodes}"]
    _, fp32_summary, result = edge_checks(train_dir, common, out)
    fid = fp32_summary["fidelity"]
    result.update(
        action_spread=fid["reference"]["action_spread"],
        fp32_action_err_max_of_range=fid["action_err_max"],
    )
    result["criteria_met"] = bool(
        result["above_random"] >= margin
        and result["above_random_interval"][0] > 0
        and fid["action_err_max"] <= 1e-4
    )
    return result


def main() -> None:
    argv = sys.argv[1:]
    if "--policy" not in argv or argv.index("--policy") + 1 >= len(argv):
        sys.exit(f"--policy is required: one of {', '.join(POLICIES)}")
    i = argv.index("--policy")
    name = argv[i + 1]
    if name not in POLICIES:
        sys.exit(f"--policy {name}: choose one of {', '.join(POLICIES)}")
    sys.argv = [sys.argv[0], *argv[:i], *argv[i + 2 :]]
    train, margin = POLICIES[name]
    dest = ROOT / "benchmarks" / "policies" / name
    args, train_args, train_dir, wall, out = train_or_reuse(__doc__, 10, name, dest, train)
    result = check(train_dir, args.episodes, out, margin)
    criteria = {"min_above_random": margin, "fp32_action_err_max_of_range": 1e-4}
    commit_policy(train_args, args, train_dir, wall, criteria, result)


if __name__ == "__main__":
    main()
