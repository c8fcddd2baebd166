"""Edge-stage figures: int8 vs fp32 latency, policy-only vs both heads, pipeline time, fidelity.

Usage (the supervised-trained policy comes from the tests' kit, tests/support/edge_kit.py,
so ``PYTHONPATH=tests``; ``nox -s bench`` sets it)::

    PYTHONPATH=tests python benchmarks/bench_edge.py                   # model1
    PYTHONPATH=tests python benchmarks/bench_edge.py --run outputs/...  # a training run's policy
    PYTHONPATH=tests python benchmarks/bench_edge.py --json bench.json

Targets (the edge issue): model1 int8 median invoke latency <= 0.5 x fp32 on one
thread (XNNPACK int8 kernels); the policy-only export >= 1.7x faster than both
heads; export + fp32 + calibration + int8 under 60 s. Latencies are medians of
per-round medians of ``interpreter.invoke()`` alone, variants interleaved
round by round so background load hits all of them alike.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import yaml

ROOT = Path(__file__).resolve().parents[1]


def _model_cfg(name: str) -> dict[str, Any]:
    return yaml.safe_load((ROOT / "conf" / "model" / f"{name}.yaml").read_text())


def median_invoke_us(actors: dict[str, Any], obs: np.ndarray, invokes: int, rounds: int) -> dict:
    from rlperf.tflite.tflite_model import quantize_input

    per_round: dict[str, list[float]] = {k: [] for k in actors}
    for a in actors.values():
        a.interp.set_tensor(a.input.index, quantize_input(obs[None], a.input))
        for _ in range(200):
            a.interp.invoke()
    clock = time.perf_counter_ns
    for _ in range(rounds):
        for name, a in actors.items():
            t = np.empty(invokes)
            invoke = a.interp.invoke
            for i in range(invokes):
                t0 = clock()
                invoke()
                t[i] = clock() - t0
            per_round[name].append(float(np.median(t)) / 1e3)
    return {k: {"median_us": float(np.median(v)), "rounds_us": v} for k, v in per_round.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="model1")
    ap.add_argument("--run", type=Path, help="a training run folder (default: train one here)")
    ap.add_argument("--train-steps", type=int, default=200)
    ap.add_argument("--invokes", type=int, default=1500)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--calibration", type=int, default=300)
    ap.add_argument("--fidelity", type=int, default=300)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()

    from rlperf.models.policy_file import load_policy

    tmp = Path(tempfile.mkdtemp(prefix="rlperf-bench-edge-"))
    if args.run is None:
        try:
            from support.edge_kit import make_run_folder
        except ModuleNotFoundError as exc:
            if exc.name != "support":
                raise
            raise SystemExit(
                "without --run, bench_edge.py trains a policy with the tests' kit: run it "
                "with PYTHONPATH=tests (docs/development.md, Benchmarks)"
            ) from exc
        t0 = time.perf_counter()
        run = make_run_folder(tmp / "run", _model_cfg(args.model), train_steps=args.train_steps)
        print(
            f"trained {args.model} for {args.train_steps} steps in "
            f"{time.perf_counter() - t0:.0f} s (imitation accuracy {run['accuracy']:.2f})"
        )
        policy_path = run["policy"]
    else:
        policy_path = args.run / "checkpoint" / "rlperf_policy.pt"
    net = load_policy(policy_path)
    env = {"dim": net.obs_shape[0], "framestack": net.obs_shape[2]}

    from rlperf.tflite.calibration import collect_observations

    fidelity, _ = collect_observations(env, args.fidelity, seed=1)

    # ---- pipeline: export + fp32 + calibration + int8 ----------------------
    timings: dict[str, float] = {}
    t_all = time.perf_counter()
    t0 = time.perf_counter()
    from rlperf.tflite.convert import convert_keras, import_tensorflow, int8_io_for

    import_tensorflow()
    timings["import_tensorflow_s"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    calib, _ = collect_observations(env, args.calibration, seed=0, exclude=fidelity)
    timings["calibration_s"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    from rlperf.tflite.export import export_policy, torch_outputs

    model, check = export_policy(net, fidelity, "policy", 1e-4)
    timings["export_verify_s"] = time.perf_counter() - t0
    files: dict[str, bytes] = {}
    cpu_io = int8_io_for("auto", edgetpu=False)  # edge.int8_io's default on CPU: int8
    for variant in ("fp32", "int8"):
        t0 = time.perf_counter()
        files[variant] = convert_keras(model, variant, calib, int8_io=cpu_io)
        timings[f"convert_{variant}_s"] = time.perf_counter() - t0
    timings["pipeline_total_s"] = time.perf_counter() - t_all

    # The Edge TPU's format (and the study's): uint8 input and output, two QUANTIZE ops.
    files["int8_uint8io"] = convert_keras(model, "int8", calib, int8_io="uint8")
    files["dynamic"] = convert_keras(model, "dynamic")
    files["fp16"] = convert_keras(model, "fp16")
    both, _ = export_policy(net, fidelity[:32], "both", 1e-4)
    files["fp32_both"] = convert_keras(both, "fp32")

    # ---- latency ------------------------------------------------------------
    from rlperf.tflite.runtime import TfliteActor

    actors = {}
    for name, data in files.items():
        path = tmp / f"{name}.tflite"
        path.write_bytes(data)
        actors[name] = TfliteActor(path, net.num_actions, threads=1)
    latency = median_invoke_us(actors, fidelity[0], args.invokes, args.rounds)

    # ---- fidelity -----------------------------------------------------------
    from rlperf.edge.fidelity import logit_fidelity

    ref = torch_outputs(net, fidelity)[0]
    fid = {}
    for name in ("fp32", "fp16", "dynamic", "int8", "int8_uint8io"):
        r = logit_fidelity(actors[name].logits(fidelity), ref, 0.9)
        fid[name] = {k: r[k] for k in ("agreement", "max_abs_logit_err", "mean_abs_logit_err")}
    fid["reference_logit_range"] = float(np.abs(ref).max())
    fid["reference_actions"] = np.bincount(ref.argmax(1), minlength=net.num_actions).tolist()

    lat = {k: v["median_us"] for k, v in latency.items()}
    targets = {
        "int8_over_fp32, the CPU's default int8 I/O (<= 0.5)": lat["int8"] / lat["fp32"],
        "int8_uint8io_over_fp32, the Edge TPU's uint8 I/O": lat["int8_uint8io"] / lat["fp32"],
        "both_over_policy (>= 1.7)": lat["fp32_both"] / lat["fp32"],
        "pipeline_total_s (< 60)": timings["pipeline_total_s"],
    }
    print(f"\nmedian invoke latency, 1 thread, {args.model} ({args.rounds} x {args.invokes}):")
    for k, v in latency.items():
        delegate = actors[k].delegate
        print(
            f"  {k:12s} {v['median_us']:8.1f} us   rounds {np.round(v['rounds_us'], 1)}"
            f"   [{delegate.status}: cpu ops {delegate.cpu_ops or '-'}]"
        )
    print("\npipeline (s):", {k: round(v, 2) for k, v in timings.items()})
    print(f"export check: agreement {check.agreement}, max err {check.max_abs_logit_err:.2e}")
    print("\nfidelity vs torch on", len(fidelity), "real observations:")
    for k, v in fid.items():
        print(f"  {k}: {v}")
    print("\ntargets:")
    for k, v in targets.items():
        print(f"  {k}: {v:.3f}")
    import shutil

    shutil.rmtree(tmp, ignore_errors=True)
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "latency": latency,
                    "timings": timings,
                    "fidelity": fid,
                    "targets": targets,
                    "export_check": check.to_dict(),
                },
                indent=2,
            )
        )


if __name__ == "__main__":
    main()
