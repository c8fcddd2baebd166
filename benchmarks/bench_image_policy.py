"""Train the compression study's image policy with rlperf's own commands, check it
behaves, and write the committed copy (docs/compression.md#the-image-policy).

    python benchmarks/bench_image_policy.py [--seed 0] [--episodes 10] [--out DIR]
        [--overrides "train.stop.time_s=600"]   # e.g. a shorter budget
        [--check-only DIR]                      # only the checks, on a trained run

Steps (each one is a command a user can type):

1. ``rlperf experiment=image_policy seed=<seed>``: the study's model1 trained with PPO
   on Atari Breakout, ended by the preset's budgets (55 minutes or 3 M env steps).
2. ``rlperf stage=edge backend=rllib|tflite_fp32 run=<1> edge.episodes=<N>
   env.episodic_life=false``: the torch policy plays N greedy games (all lives; seeds
   0..N-1); the fp32 cell's fidelity check plays a uniformly random policy on the same
   seeds and takes the torch policy's action histogram on the edge stage's fidelity set.
3. The criteria (issue 11): mean return at least 5 above the random policy's, and no
   action chosen on more than 60 % of frames, both on the fidelity set and in play
   (the greedy episodes' steps.csv).
4. Written to ``benchmarks/policies/breakout_model1/`` (``--dest``): the job folder's
   config, fingerprint, summary and metrics, ``checkpoint/rlperf_policy.pt`` (torch
   weights) and ``checkpoint/probe.npz`` — what ``rlperf stage=edge run=<folder>``
   needs — and ``provenance.json``: the commands, seed, SHA-256 of each file, the
   training's wall time and env steps, and the measured criteria. Written only when
   the criteria are met (``--force`` writes anyway, marked as failing).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DEST = ROOT / "benchmarks" / "policies" / "breakout_model1"
MIN_ABOVE_RANDOM = 5.0
MAX_ACTION_SHARE = 0.60
#: What a downstream stage needs of a training job folder (rlperf.runs).
KEEP = (
    ".hydra/config.yaml", ".hydra/overrides.yaml", "fingerprint.json", "summary.json",
    "metrics.csv", "checkpoint/rlperf_policy.pt", "checkpoint/probe.npz",
)  # fmt: skip


def rlperf(args: list[str]) -> float:
    """Run one rlperf command (the installed entry point) and return its wall seconds."""
    cmd = [sys.executable, "-m", "rlperf", *args]
    print("$ rlperf " + " ".join(args), flush=True)
    start = time.perf_counter()
    subprocess.run(cmd, check=True, cwd=ROOT)
    return time.perf_counter() - start


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def edge_checks(
    train_dir: Path, common: list[str], out: Path
) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """Two edge cells on the same seeded episodes (``common``: ``run=``, ``edge.episodes=``
    and env overrides): ``backend=rllib`` (the torch policy) and ``backend=tflite_fp32``,
    whose fidelity check measures the reference (the torch policy) on the fidelity set
    and plays a random policy on the same seeds (``fidelity.reference``). Returns both
    summaries and the checks every committed policy records: the greedy returns against
    the random policy's, with the paired interval."""
    cells = {}
    for backend in ("rllib", "tflite_fp32"):
        cells[backend] = out / f"check-{backend}"
        rlperf(["stage=edge", f"backend={backend}", *common, f"hydra.run.dir={cells[backend]}"])
    torch_summary = json.loads((cells["rllib"] / "summary.json").read_text())
    fp32_summary = json.loads((cells["tflite_fp32"] / "summary.json").read_text())
    ref = fp32_summary["fidelity"]["reference"]
    returns = torch_summary["reference_returns"]
    random = ref["random_returns"]
    result = {
        "edge_commands": [
            f"rlperf stage=edge backend={b} {' '.join(common)}" for b in ("rllib", "tflite_fp32")
        ],
        "episodes": len(returns),
        "returns": returns,
        "return_mean": sum(returns) / len(returns),
        "random_returns": random,
        "random_return_mean": sum(random) / len(random),
        "above_random": ref["vs_random_diff"],
        "above_random_interval": [ref["vs_random_low"], ref["vs_random_high"]],
        "vacuous": ref["vacuous"],
    }
    return torch_summary, fp32_summary, result


def check(train_dir: Path, episodes: int, out: Path) -> dict[str, Any]:
    """Steps 2 and 3: the greedy policy against random, and its action shares (the torch
    policy's actions in play from the rllib cell's steps.csv)."""
    import pandas as pd

    common = [f"run={train_dir}", f"edge.episodes={episodes}", "env.episodic_life=false"]
    _, fp32_summary, result = edge_checks(train_dir, common, out)
    ref = fp32_summary["fidelity"]["reference"]
    steps = pd.read_csv(out / "check-rllib" / "steps.csv")
    play = Counter(steps["action"].astype(int))
    play_share = max(play.values()) / sum(play.values())
    result.update(
        top_action_share_fidelity_set=ref["top_action_share"],
        top_action_share_in_play=play_share,
        actions_in_play={str(k): v for k, v in sorted(play.items())},
    )
    result["criteria_met"] = bool(
        result["above_random"] >= MIN_ABOVE_RANDOM
        and result["top_action_share_fidelity_set"] <= MAX_ACTION_SHARE
        and play_share <= MAX_ACTION_SHARE
    )
    return result


def write_policy(train_dir: Path, dest: Path, provenance: dict[str, Any]) -> None:
    """Step 4: the committed copy of the job folder, with its provenance."""
    if dest.exists():
        shutil.rmtree(dest)
    files = {}
    for rel in KEEP:
        src = train_dir / rel
        if not src.exists():
            continue
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, dest / rel)
        files[rel] = sha256(dest / rel)
    provenance["sha256"] = files
    (dest / "provenance.json").write_text(json.dumps(provenance, indent=1) + "\n")


def train_or_reuse(
    doc: str, episodes: int, name: str, dest: Path, train: list[str]
) -> tuple[argparse.Namespace, list[str], Path, float | None, Path]:
    """The command line of a committed-policy script, and step 1 (``train``: the training's
    overrides, to which ``seed=`` and ``--overrides`` are added) unless ``--check-only``:
    (args, the training's overrides, its job folder, its wall seconds, the work folder)."""
    ap = argparse.ArgumentParser(description=doc.splitlines()[0])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--episodes", type=int, default=episodes, help="greedy episodes to check")
    ap.add_argument("--out", type=Path, help=f"work folder (default: outputs/{name})")
    ap.add_argument("--overrides", default="", help="extra overrides for the training")
    ap.add_argument("--check-only", type=Path, help="a trained job folder: skip step 1")
    ap.add_argument("--dest", type=Path, default=dest)
    ap.add_argument("--force", action="store_true", help="write even if a criterion fails")
    args = ap.parse_args()
    out = (args.out or ROOT / "outputs" / name).resolve()
    out.mkdir(parents=True, exist_ok=True)
    train_args = [*train, f"seed={args.seed}", *args.overrides.split()]
    if args.check_only:
        return args, train_args, args.check_only.resolve(), None, out
    train_dir = out / "train"
    wall = rlperf([*train_args, f"hydra.run.dir={train_dir}"])
    return args, train_args, train_dir, wall, out


def main() -> None:
    args, train_args, train_dir, wall, out = train_or_reuse(
        __doc__, 10, "image_policy", DEST, ["experiment=image_policy"]
    )
    result = check(train_dir, args.episodes, out)
    criteria = {"min_above_random": MIN_ABOVE_RANDOM, "max_action_share": MAX_ACTION_SHARE}
    commit_policy(train_args, args, train_dir, wall, criteria, result)


def commit_policy(
    train_args: list[str],
    args: argparse.Namespace,
    train_dir: Path,
    wall: float | None,
    criteria: dict[str, Any],
    result: dict[str, Any],
) -> None:
    """Step 4 with its provenance (the training's command, seed, time, steps and commit,
    the criteria and what the checks measured), when ``result["criteria_met"]`` (or
    ``--force``); else exit saying so."""
    summary = json.loads((train_dir / "summary.json").read_text())
    provenance = {
        "train_command": "rlperf " + " ".join(train_args),
        "seed": args.seed,
        "train_wall_s": wall if wall is not None else summary.get("wall_s"),
        "train_env_steps": summary.get("total_env_steps"),
        "train_iterations": summary.get("iterations"),
        "stopped_by": (summary.get("stop") or {}).get("stopped_by"),
        "git_commit": subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True
        ).stdout.strip(),
        "criteria": criteria,
        "checks": result,
    }
    print(json.dumps(provenance, indent=1))
    if result["criteria_met"] or args.force:
        write_policy(train_dir, args.dest, provenance)
        print(f"written: {args.dest}")
    else:
        raise SystemExit("criteria not met: nothing written (--force writes anyway)")


if __name__ == "__main__":
    main()
