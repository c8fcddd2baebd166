"""Serve-stage figures: what Ray Serve adds to a policy's latency, and the max rate under a
20 ms p99 bound with and without dynamic batching (docs/serve.md#benchmark).

Usage (policies without ``--run`` are trained here: model1 with the tests' kit,
tests/support/edge_kit.py, so ``PYTHONPATH=tests``, ``nox -s bench`` sets it; the
CartPole MLP mlp64 with rlperf's own ``experiment=cartpole_target``)::

    PYTHONPATH=tests python benchmarks/bench_serve.py
    PYTHONPATH=tests python benchmarks/bench_serve.py --run model1=outputs/... --json b.json

Every configuration is one serve job (the stage itself, ``rlperf.job_wrapper.execute_stage``)
in one Ray and one Serve started here, side by side: per policy and ``--transport`` of
the load levels (http, handle), batching off and ``--batch`` (open loop at ``--rates``),
each job measuring one request at a time
in-process, over Serve's handle, over HTTP and the echo deployment over HTTP. Checks:
the policy over HTTP at p50 within 10 % of (echo over HTTP p50 + in-process p50), and
the max rate under the bound with the replica's model-time share at that rate. The job
folders are kept under ``--out`` (``rlperf-report`` reads them).
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]


def _model_cfg(name: str) -> dict[str, Any]:
    return yaml.safe_load((ROOT / "conf" / "model" / f"{name}.yaml").read_text())


def trained_run(model: str, out: Path, train_steps: int) -> Path:
    """A run folder of ``model``: an MLP learns CartPole with rlperf's own command
    (``experiment=cartpole_target``, PPO to a greedy return of 450); a vision model is
    trained by the tests' kit (imitation on real Pong frames)."""
    if "hiddens" in _model_cfg(model):  # an MLP (conf/model/mlp*.yaml)
        return trained_mlp_run(model, out)
    try:
        from support.edge_kit import make_run_folder
    except ModuleNotFoundError as exc:
        if exc.name != "support":
            raise
        raise SystemExit("without --run, run bench_serve.py with PYTHONPATH=tests") from exc
    t0 = time.perf_counter()
    run = make_run_folder(out / f"run-{model}", _model_cfg(model), train_steps=train_steps)
    print(f"trained {model} in {time.perf_counter() - t0:.0f} s (accuracy {run['accuracy']:.2f})")
    return Path(run["path"])


def trained_mlp_run(model: str, out: Path) -> Path:
    import subprocess
    import sys

    run = out / f"run-{model}"
    t0 = time.perf_counter()
    cmd = [sys.executable, "-m", "rlperf", "experiment=cartpole_target", f"model={model}",
           f"hydra.run.dir={run}", "verbosity=quiet"]  # fmt: skip
    subprocess.run(cmd, check=True, cwd=out)
    summary = json.loads((run / "summary.json").read_text())
    print(f"trained {model} on CartPole in {time.perf_counter() - t0:.0f} s "
          f"(reached {summary['reached']}, return {summary['return_at_target']})")  # fmt: skip
    return run


def compose(overrides: list[str]) -> Any:
    from hydra import compose as hydra_compose
    from hydra import initialize_config_module
    from hydra.core.global_hydra import GlobalHydra

    from rlperf.config.schema import register_configs

    register_configs()
    GlobalHydra.instance().clear()
    with initialize_config_module("rlperf.conf", version_base="1.3"):
        return hydra_compose("config", overrides=overrides)


def serve_job(
    run: Path, out: Path, args: argparse.Namespace, batch: int, transport: str
) -> dict[str, Any]:
    """One serve job in the running Ray (as a sweep trial would run it)."""
    from omegaconf import OmegaConf

    from rlperf.job_wrapper import execute_stage
    from rlperf.serve.serve_job import run_serve
    from rlperf.validation.validate import validate_config

    cfg = compose([
        "stage=serve", f"run={run}", f"serve.max_batch_size={batch}",
        f"serve.max_ongoing_requests={max(16, batch)}",
        f"serve.batch_wait_timeout_s={args.batch_wait_s if batch > 1 else 0}",
        f"serve.rates=[{','.join(str(r) for r in args.rates)}]", "serve.clients=[1]",
        f"serve.requests_per_level={args.requests}", f"serve.baseline_requests={args.baseline}",
        f"serve.slo_ms={args.slo_ms}", f"serve.cpus_per_replica={args.cpus_per_replica}",
        f"serve.transport={transport}", "telemetry.interval_s=0.5",
    ])  # fmt: skip
    validate_config(cfg)
    (out / ".hydra").mkdir(parents=True, exist_ok=True)
    OmegaConf.save(cfg, out / ".hydra" / "config.yaml")
    return execute_stage(cfg, out, run_serve, in_trial=True).data


def figures(summary: dict[str, Any], levels: list[dict[str, Any]]) -> dict[str, Any]:
    """The benchmark's numbers of one job."""
    base = summary["baseline"]
    expected = base["echo_http_p50_ms"] + base["inprocess_p50_ms"]
    slo = summary["max_rate_under_slo"]
    at_max = next((r for r in levels if r["loop"] == "open"
                   and r["offered_rps"] == slo["max_rate_rps"]), None)  # fmt: skip
    return {
        **{
            k: base[k]
            for k in (
                "inprocess_p50_ms",
                "handle_p50_ms",
                "http_p50_ms",
                "echo_http_p50_ms",
                "echo_handle_p50_ms",
            )
        },  # fmt: skip
        "http_over_echo_plus_inprocess": base["http_p50_ms"] / expected,
        "within_10pct": abs(base["http_p50_ms"] / expected - 1) <= 0.10,
        "echo_http_capacity_rps": summary["generator"]["echo_http_capacity_rps"],
        "max_rate_rps": slo["max_rate_rps"],
        "bounded": slo["bounded"],
        "model_busy_share_at_max": at_max["model_busy_share"] if at_max else None,
        "batch_mean_at_max": at_max["batch_mean"] if at_max else None,
        "levels": [
            {
                k: r[k]
                for k in (
                    "offered_rps",
                    "achieved_rps",
                    "p50_ms",
                    "p99_ms",
                    "p99_hi_ms",
                    "on_schedule",
                    "batch_mean",
                    "model_busy_share",
                    "rejections",
                    "timeouts",
                )
            }
            for r in levels
            if r["loop"] == "open"
        ],  # fmt: skip
    }


def _levels(out: Path) -> list[dict[str, Any]]:
    import pandas as pd

    return pd.read_csv(out / "levels.csv").to_dict("records")  # type: ignore[no-any-return]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--run", action="append", default=[], help="name=folder (repeatable)")
    ap.add_argument("--models", default="model1,mlp64", help="policies to train here (comma list)")
    ap.add_argument(
        "--transport",
        nargs="+",
        default=["http"],
        choices=["http", "handle"],
        help="transport(s) of the load levels, each a job of its own",
    )
    ap.add_argument("--train-steps", type=int, default=200)
    ap.add_argument("--rates", type=float, nargs="+", default=[20, 40, 80, 120, 160])
    ap.add_argument("--requests", type=int, default=400)
    ap.add_argument("--baseline", type=int, default=300)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--batch-wait-s", type=float, default=0.002)
    ap.add_argument("--cpus-per-replica", type=float, default=1.0)
    ap.add_argument("--slo-ms", type=float, default=20.0)
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()

    out = args.out or Path(tempfile.mkdtemp(prefix="rlperf-bench-serve-"))
    runs = {n: Path(p) for n, p in (r.split("=", 1) for r in args.run)}
    for model in [m for m in args.models.split(",") if m and m not in runs]:
        runs[model] = trained_run(model, out, args.train_steps)

    import ray
    from omegaconf import OmegaConf

    from rlperf.config.schema import RayConfig
    from rlperf.resources.ray_session import init_ray

    init_ray(OmegaConf.structured(RayConfig), len(os.sched_getaffinity(0)))
    results: dict[str, Any] = {"load_average_before": os.getloadavg(), "out": str(out)}
    try:
        for name, run in runs.items():
            for transport, batch in itertools.product(args.transport, (1, args.batch)):
                job = out / f"{name}-{transport}-batch{batch}"
                t0 = time.perf_counter()
                summary = serve_job(run, job, args, batch, transport)
                results[f"{name}/{transport}/batch{batch}"] = {
                    **figures(summary, _levels(job)),
                    "wall_s": time.perf_counter() - t0,
                }
    finally:
        from ray import serve

        serve.shutdown()
        ray.shutdown()
    results["load_average_after"] = os.getloadavg()
    report(results, args)
    if args.json:
        args.json.write_text(json.dumps(results, indent=2, default=str))


def report(results: dict[str, Any], args: argparse.Namespace) -> None:
    print(f"\nload average before {results['load_average_before']}, "
          f"after {results['load_average_after']}; job folders in {results['out']}")  # fmt: skip
    head = ("config", "in-proc", "handle", "HTTP", "echo", "HTTP/(echo+in)", "<=10%",
            f"max rps @p99<={args.slo_ms:g}ms", "busy share", "batch", "echo cap rps")  # fmt: skip
    print(" | ".join(head))
    for key, r in results.items():
        if not isinstance(r, dict) or "http_p50_ms" not in r:
            continue
        rate = "none" if r["max_rate_rps"] is None else f"{r['max_rate_rps']:g}"
        rate += "" if r["bounded"] else "+"
        share, batch = r["model_busy_share_at_max"], r["batch_mean_at_max"]
        print(" | ".join([
            key, f"{r['inprocess_p50_ms']:.2f}", f"{r['handle_p50_ms']:.2f}",
            f"{r['http_p50_ms']:.2f}", f"{r['echo_http_p50_ms']:.2f}",
            f"{r['http_over_echo_plus_inprocess']:.3f}", "yes" if r["within_10pct"] else "NO",
            rate, "n/a" if share is None else f"{share:.2f}",
            "n/a" if batch is None else f"{batch:.1f}", f"{r['echo_http_capacity_rps']:.0f}",
        ]))  # fmt: skip

    print("\nopen-loop levels: config | offered | achieved | p50 | p99 (upper bound) | on schedule"
          " | batch | model busy share | timeouts+rejections")  # fmt: skip
    for key, r in results.items():
        if not isinstance(r, dict) or "levels" not in r:
            continue
        for lv in r["levels"]:
            print(" | ".join([
                key, f"{lv['offered_rps']:g}", f"{lv['achieved_rps']:.1f}", f"{lv['p50_ms']:.1f}",
                f"{lv['p99_ms']:.1f} ({lv['p99_hi_ms']:.1f})", str(bool(lv["on_schedule"])),
                f"{lv['batch_mean']:.2f}", f"{lv['model_busy_share']:.2f}",
                str(int(lv["rejections"]) + int(lv.get("timeouts", 0))),
            ]))  # fmt: skip


if __name__ == "__main__":
    main()
