"""APPO, IMPALA, DQN and SAC learn to RLlib's published targets through rlperf's own command.

Each algorithm runs ``rlperf experiment=algo_targets algo=<algo> ...`` (the preset's
settings per algorithm are RLlib 2.60's tuned examples: conf/experiment_algo/algo_targets_*),
judged as RLlib's examples judge (``train.stop.judge=train``), until the target
(``train.stop.episode_return``) or the env-step budget (``train.stop.env_steps``):

    =========  ===========  ======  =========
    algo       env          target  budget
    =========  ===========  ======  =========
    appo       CartPole-v1  450     2 000 000
    impala     CartPole-v1  450     2 000 000
    dqn        CartPole-v1  450     200 000
    sac        Pendulum-v1  -250    20 000
    =========  ===========  ======  =========

Prints, per run, ``reached``, ``env_steps_to_target``, ``time_to_target_s`` (from the
run's summary.json) and the wall time of the command, as a Markdown table. Step counts
do not depend on the machine's load (APPO/IMPALA's a little: they are asynchronous);
times do. docs/results.md#rllibs-published-targets holds a measured run.

    python benchmarks/bench_algos_targets.py [--algos appo,impala,dqn,sac] [--seed 0]
        [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

#: algo -> rlperf overrides besides ``experiment=algo_targets algo=<algo> seed=...``.
RUNS = {
    "appo": ["env_runner.num_envs=8", "train.stop.env_steps=2000000"],
    "impala": ["env_runner.num_envs=8", "train.stop.env_steps=2000000"],
    "dqn": ["model=mlp256", "train.stop.env_steps=200000"],
    "sac": [
        "env=pendulum",
        "model=mlp256",
        "model.activation=relu",
        "train.stop.episode_return=-250",
        "train.stop.env_steps=20000",
    ],  # fmt: skip
}


def run(algo: str, seed: int, out: Path) -> dict[str, object]:
    """One rlperf run of ``algo``: its summary.json figures and the command's wall time."""
    args = ["experiment=algo_targets", f"algo={algo}", f"seed={seed}", *RUNS[algo],
            f"hydra.run.dir={out}"]  # fmt: skip
    print(f"$ rlperf {' '.join(args[:-1])}", flush=True)
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "rlperf", *args], capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise RuntimeError(f"rlperf {' '.join(args)} failed:\n{proc.stderr[-3000:]}")
    s = json.loads((out / "summary.json").read_text())
    return {
        "algo": algo,
        "target": s["stop"]["episode_return"],
        "budget": s["stop"]["env_steps"],
        "reached": s["reached"],
        "env_steps_to_target": s["env_steps_to_target"],
        "time_to_target_s": s["time_to_target_s"],
        "return_at_target": s["return_at_target"],
        "stopped_by": s["stop"]["stopped_by"],
        "wall_s": wall,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--algos", default=",".join(RUNS))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=None, help="run folders (default: a temp dir)")
    args = parser.parse_args()
    root = args.out or Path(tempfile.mkdtemp(prefix="bench_algos_targets_"))
    print(f"run folders under {root}; load average at start: {os.getloadavg()}")
    keys = ["algo", "target", "budget", "reached", "env_steps_to_target", "time_to_target_s",
            "return_at_target", "stopped_by", "wall_s"]  # fmt: skip
    rows = []
    for algo in args.algos.split(","):
        rows.append(run(algo, args.seed, root / algo))
        print(json.dumps(rows[-1]), flush=True)
    print(f"load average at end: {os.getloadavg()}")
    print("| " + " | ".join(keys) + " |")
    print("|" + "---|" * len(keys))
    for r in rows:
        cells = [f"{v:.1f}" if isinstance(v, float) else str(v) for v in (r[k] for k in keys)]
        print("| " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
