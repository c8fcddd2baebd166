"""Train the committed continuous-action policy with rlperf's own commands, check it behaves,
and write the committed copy (docs/compression.md#the-pendulum-policy-continuous-actions).

    python benchmarks/bench_pendulum_policy.py [--seed 0] [--episodes 20] [--out DIR]
        [--overrides ...]                       # more training overrides
        [--check-only DIR]                      # only the checks, on a trained run

Steps (each one is a command a user can type):

1. ``rlperf experiment=algo_targets algo=sac env=pendulum model=mlp256
   model.activation=relu train.stop.judge=eval train.stop.episode_return=-200 ...``:
   RLlib's tuned Pendulum SAC, stopped on the mean return of 20 greedy evaluation
   episodes (rlperf's SAC module acts greedily with the reference actor).
2. ``rlperf stage=edge backend=rllib|tflite_fp32 run=<1> edge.episodes=<N>``: the saved
   actor plays N greedy episodes (seeds 0..N-1) in torch and in TFLite fp32; the fp32
   cell's fidelity check plays a uniformly random actor on the same seeds.
3. The criteria (issue 27): mean greedy return of the reference actor at least
   :data:`MIN_RETURN` over the N episodes, above the random actor's (paired interval),
   and ``rllib`` and ``tflite_fp32`` actions within 1e-4 of the range. Also measured:
   RLlib 2.60's own greedy action (the unsquashed mean, clipped) on the same episodes,
   and how far its actions are from the reference actor's.
4. Written to ``benchmarks/policies/pendulum_sac/`` (``--dest``): the job folder's
   config, fingerprint, summary and metrics, ``checkpoint/rlperf_policy.pt`` and
   ``checkpoint/probe.npz``, and ``provenance.json`` (commands, seed, SHA-256 of each
   file, the training's wall time and env steps, the measured criteria). Written only
   when the criteria are met (``--force`` writes anyway, marked as failing).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bench_image_policy import ROOT, commit_policy, edge_checks, train_or_reuse

DEST = ROOT / "benchmarks" / "policies" / "pendulum_sac"
MIN_RETURN = -250.0
TRAIN = [
    "experiment=algo_targets", "algo=sac", "env=pendulum", "model=mlp256",
    "model.activation=relu", "train.stop.judge=eval", "train.stop.episode_return=-200",
    "train.evaluation.episodes=20", "train.evaluation.interval=5",
    "train.stop.env_steps=30000",
]  # fmt: skip


def rllib_greedy(train_dir: Path, episodes: int) -> dict[str, Any]:
    """RLlib 2.60's greedy SAC action (``to_deterministic()``: the unsquashed mean, then
    ``unsquash_action`` and the clip) on the same seeded episodes as the edge stage's,
    beside the reference actor; the mean and max action difference relative to the range
    over the states the reference actor visits."""
    import numpy as np

    from rlperf.envs.factory import make_env
    from rlperf.models.actor import action_range, box_actions
    from rlperf.models.policy_file import load_policy

    net = load_policy(train_dir / "checkpoint")
    env = make_env({"kind": "gym", "id": "Pendulum-v1", "seed": None})
    span = action_range(net.action_spec)

    def play(squash: str) -> tuple[list[float], list[np.ndarray]]:
        import torch

        returns, states = [], []
        for ep in range(episodes):
            obs, _ = env.reset(seed=ep)
            total, done = 0.0, False
            while not done:
                states.append(obs)
                with torch.inference_mode():
                    out = net.logits(torch.as_tensor(obs)[None]).numpy()
                obs, r, term, trunc, _ = env.step(box_actions(out, net.action_spec, squash)[0])
                total += float(r)
                done = term or trunc
            returns.append(total)
        return returns, states

    ref, states = play("tanh")
    rllib, _ = play("clip")
    import torch

    with torch.inference_mode():
        out = net.logits(torch.as_tensor(np.stack(states))).numpy()
    diff = np.abs(
        box_actions(out, net.action_spec, "tanh") - box_actions(out, net.action_spec, "clip")
    )
    rel = diff / span
    return {
        "reference_return_mean": float(np.mean(ref)),
        "rllib_to_deterministic_returns": rllib,
        "rllib_to_deterministic_return_mean": float(np.mean(rllib)),
        "action_diff_of_range_mean": float(rel.mean()),
        "action_diff_of_range_max": float(rel.max()),
        "states": len(states),
    }


def check(train_dir: Path, episodes: int, out: Path) -> dict[str, Any]:
    """Steps 2 and 3: the greedy return, against a random actor's; rllib against
    tflite_fp32 on the fidelity set; RLlib's own greedy action on the same episodes."""
    common = [f"run={train_dir}", f"edge.episodes={episodes}"]
    _, fp32_summary, result = edge_checks(train_dir, common, out)
    fid = fp32_summary["fidelity"]
    result.update(
        action_spread=fid["reference"]["action_spread"],
        fp32_action_err_max_of_range=fid["action_err_max"],
        rllib_greedy=rllib_greedy(train_dir, episodes),
    )
    result["criteria_met"] = bool(
        result["return_mean"] >= MIN_RETURN
        and result["above_random_interval"][0] > 0
        and fid["action_err_max"] <= 1e-4
    )
    return result


def main() -> None:
    args, train_args, train_dir, wall, out = train_or_reuse(
        __doc__, 20, "pendulum_policy", DEST, TRAIN
    )
    result = check(train_dir, args.episodes, out)
    criteria = {"min_return": MIN_RETURN, "fp32_action_err_max_of_range": 1e-4}
    commit_policy(train_args, args, train_dir, wall, criteria, result)


if __name__ == "__main__":
    main()
