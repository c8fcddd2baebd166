"""How fast Pong goes on this machine with each env engine, envs and threads (``stage=env``).

Runs one sweep, ``rlperf -m stage=env`` over ``env.engine`` (python, gymnasium_sync,
gymnasium_async, ale_vector; envpool where installed) x ``env_runner.num_envs`` (1, 2, 4,
8, 16), and ale_vector (and envpool) again with ``env.threads=2``, one cell at a time with
random actions, then builds the report over it and prints, per cell: env steps/s with its
95 % interval over the windows, emulator frames/s, one step call's p50 and p99, the CPU
cores the process tree kept busy and its resident memory; then each engine's
Universal Scalability Law fit over the envs (docs/benchmarks.md#env-engines).

    python benchmarks/bench_env_stage.py              # about 8 minutes on 2 cores
    python benchmarks/bench_env_stage.py --steps 5000 --envs 1,8
"""

from __future__ import annotations

import argparse
import importlib.util
import subprocess
import sys
import tempfile
from pathlib import Path


def sweep(out: Path, engines: list[str], envs: str, threads: str, steps: int) -> None:
    args = [sys.executable, "-m", "rlperf", "-m", "stage=env", f"env.engine={','.join(engines)}",
            f"env_runner.num_envs={envs}", f"env_bench.steps={steps}",
            f"hydra.sweep.dir={out}"]  # fmt: skip
    if threads:
        args.append(f"env.threads={threads}")
    proc = subprocess.run(args, cwd=out.parent, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"rlperf failed ({proc.returncode}): {proc.stderr[-3000:]}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20000, help="env steps timed per cell")
    parser.add_argument("--envs", default="1,2,4,8,16")
    parser.add_argument("--out", help="keep the sweeps and the report in this folder")
    args = parser.parse_args()
    from rlperf.report import build_report

    threaded = ["ale_vector"] + (["envpool"] if importlib.util.find_spec("envpool") else [])
    with tempfile.TemporaryDirectory(prefix="envstage", dir="/tmp") as work:
        root = Path(args.out or work).resolve()
        root.mkdir(parents=True, exist_ok=True)
        plain = ["python", "gymnasium_sync", "gymnasium_async", *threaded]
        sweep(root / "one_thread", plain, args.envs, "", args.steps)
        sweep(root / "two_threads", threaded, args.envs, "2", args.steps)
        res = build_report([root / "one_thread", root / "two_threads"], root / "report")
        runs = res.runs.sort_values(["engine", "engine_threads", "num_envs"], na_position="first")
        print("| engine | threads | envs | env steps/s [95% CI] | frames/s | step p50 ms | "
              "step p99 ms | CPU cores | RSS MB |")  # fmt: skip
        print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
        for _, r in runs.iterrows():
            threads = "" if r["engine_threads"] != r["engine_threads"] else int(r["engine_threads"])
            print(
                f"| {r['engine']} | {threads} | {int(r['num_envs'])} | {r['throughput']:.0f} "
                f"[{r['throughput_ci_low']:.0f}, {r['throughput_ci_high']:.0f}] | "
                f"{r['frames_per_s']:.0f} | {r['step_ms_p50']:.3f} | {r['step_ms_p99']:.3f} | "
                f"{r['process_cores']:.2f} | {r['rss_mb_max']:.0f} |"
            )
        print()
        for curve in res.sections["scaling"]:
            print(f"- {curve.text()}")
        gone = "" if args.out else " (removed with the temporary folder)"
        print(f"\nreport: {res.markdown}{gone}")


if __name__ == "__main__":
    main()
