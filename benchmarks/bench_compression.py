"""The compression study on one policy: every backend of ``experiment=compression``, one
table (docs/compression.md).

Usage (without ``--run`` the CartPole MLP policy comes from the tests' kit,
tests/support/edge_kit.py, so ``PYTHONPATH=tests``)::

    PYTHONPATH=tests nice -n 10 python benchmarks/bench_compression.py
    PYTHONPATH=tests python benchmarks/bench_compression.py --run outputs/...  --episodes 20
    PYTHONPATH=tests python benchmarks/bench_compression.py --json compression.json
    python benchmarks/bench_compression.py --run benchmarks/policies/breakout_model1 \
        --episodes 10 --overrides "env.episodic_life=false" --backends rllib,tflite_int8,...

Each backend runs through the edge stage's own entry (``run_edge``, as
``rlperf -m experiment=compression run=<folder>`` does per cell), one after
the other in this process, all cells sharing one artifact cache. Printed per
backend: the return difference against the torch policy on the same seeded
episodes with its paired 95 % interval (``tie`` when it contains 0,
``saturates`` when every episode of both ends at the env's time limit with the
same return), size, gzip size, weight sparsity of the ``.tflite``, median
action latency, peak RSS of the benchmark process, agreement (all frames and
decisive frames; a Box policy: its p99 and max action error, % of the range), the
fidelity verdict and, for a fine-tuned variant, its
distillation's held-out error before the fit and of the weights kept, and the
learning rate (of ``edge.finetune_lr``) whose fit was kept.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

BACKENDS = (
    "rllib", "tflite_fp32", "tflite_fp16", "tflite_dynamic", "tflite_int8", "tflite_qat",
    "tflite_prune50", "tflite_prune75", "tflite_prune90", "tflite_prune75_int8",
    "tflite_struct50",
)  # fmt: skip


def run_cell(run: Path, backend: str, out: Path, cache: Path, args: argparse.Namespace) -> dict:
    from hydra import compose, initialize_config_module
    from hydra.core.global_hydra import GlobalHydra
    from hydra.core.hydra_config import HydraConfig
    from omegaconf import open_dict

    from rlperf.config.schema import register_configs
    from rlperf.edge.edge_job import run_edge
    from rlperf.job_wrapper import JobContext
    from rlperf.validation.edge import validate_edge

    register_configs()
    GlobalHydra.instance().clear()
    overrides = [
        "stage=edge", f"run={run}", f"backend={backend}", f"edge.cache_dir={cache}",
        f"edge.episodes={args.episodes}", f"edge.fidelity_observations={args.fidelity}",
        f"edge.calibration_size={args.calibration}", f"edge.finetune_steps={args.finetune_steps}",
        "edge.threads=1", *args.overrides.split(),
    ]  # fmt: skip
    with initialize_config_module("rlperf.conf", version_base="1.3"):
        cfg = compose("config", overrides=overrides, return_hydra_config=True)
    GlobalHydra.instance().clear()
    # The edge job reads its command-line overrides from HydraConfig (an ``env.<key>=``
    # among them applies on top of the run's env): without it ``--overrides`` would be
    # composed and then dropped for the run's env.
    HydraConfig.instance().set_config(cfg)
    with open_dict(cfg):
        del cfg["hydra"]
    validate_edge(cfg)
    return run_edge(cfg, out, JobContext.for_job(cfg, out)).data


def row_of(backend: str, s: dict[str, Any]) -> dict[str, Any]:
    fid = s.get("fidelity") or {}
    weights = s.get("weights") or {}
    built = (s.get("calibration") or {}).get("compression") or {}
    return {
        "backend": backend,
        "return_mean": float(np.mean(fid.get("returns") or s["reference_returns"] or [np.nan])),
        "return_diff": fid.get("return_diff", 0.0),
        "diff_low": fid.get("return_diff_low"),
        "diff_high": fid.get("return_diff_high"),
        "tie": fid.get("return_tie", True),
        "saturates": fid.get("saturates"),
        "size_bytes": s["model_size_bytes"],
        "gzip_bytes": s["model_gzip_bytes"],
        "sparsity": weights.get("sparsity"),
        "action_ms_p50": s["latency"]["action_ms"]["p50"],
        "forward_ms_p50": s["latency"]["forward_ms"]["p50"],
        "peak_rss_mb": s["memory"]["peak_rss_mb"],
        "agreement": fid.get("agreement"),
        "decisive_agreement": fid.get("decisive_agreement"),
        "max_abs_logit_err": fid.get("max_abs_logit_err"),
        # A Box policy: the action error relative to each dimension's range.
        "action_err_p99": fid.get("action_err_p99"),
        "action_err_max": fid.get("action_err_max"),
        "verdict": fid.get("verdict", "reference"),
        "delegate": (s.get("delegate") or {}).get("status"),
        "finetune": {k: built[k] for k in FINETUNE_KEYS if k in built} or None,
    }


#: What the guarded distillation of a compressed variant measured (rlperf.tflite.compress).
FINETUNE_KEYS = ("holdout_loss_start", "holdout_loss_kept", "lr_chosen", "kept_step",
                 "lr_halvings")  # fmt: skip


def _finetune(ft: dict[str, Any] | None) -> str:
    if not ft:
        return "-"
    start, kept = ft["holdout_loss_start"], ft["holdout_loss_kept"]
    where = f"step {ft['kept_step']}, {ft['lr_halvings']} halvings"
    return f"{start:.3g} -> {kept:.3g} at lr {ft['lr_chosen']:g} ({where})"


def _f(v: Any, d: int = 3) -> str:
    if v is None:
        return "-"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, float):
        return f"{v:.{d}f}" if v == v else "-"
    return str(v)


def print_table(rows: list[dict[str, Any]]) -> None:
    """One row per backend; a Box policy's table has the action error (% of the range)
    where a discrete one has the agreement."""
    box = any(r["action_err_p99"] is not None for r in rows)
    fid_head = "action err p99 % | max % |" if box else "agreement | decisive |"
    head = (
        "| backend | return | diff [95 % CI] | tie | size B | gzip B | sparsity | "
        f"action ms p50 | peak RSS MB | {fid_head} verdict | fine-tune held-out MSE |"
    )
    print(head)
    print("|---" * 13 + "|")
    for r in rows:
        ci = f"{_f(r['return_diff'], 1)} [{_f(r['diff_low'], 1)}, {_f(r['diff_high'], 1)}]"
        if box:
            fid = [_pct(r["action_err_p99"]), _pct(r["action_err_max"])]
        else:
            fid = [_f(r["agreement"], 3), _f(r["decisive_agreement"], 3)]
        cells = [r["backend"], _f(r["return_mean"], 1), ci, _f(r["tie"]), r["size_bytes"],
                 r["gzip_bytes"], _f(r["sparsity"], 2), _f(r["action_ms_p50"], 4),
                 _f(r["peak_rss_mb"], 0), *fid, r["verdict"], _finetune(r["finetune"])]  # fmt: skip
        print("| " + " | ".join(str(c) for c in cells) + " |")


def _pct(v: float | None) -> str:
    return "-" if v is None else f"{100 * v:.3g}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--run", type=Path, help="a training run (default: the kit's CartPole MLP)")
    ap.add_argument("--backends", default=",".join(BACKENDS))
    ap.add_argument("--episodes", type=int, default=10)
    ap.add_argument("--fidelity", type=int, default=300)
    ap.add_argument("--calibration", type=int, default=300)
    ap.add_argument("--finetune-steps", type=int, default=600)
    ap.add_argument("--json", type=Path)
    ap.add_argument("--overrides", default="", help="more edge-stage overrides (env.*, edge.*)")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="rlperf-bench-compression-"))
    run = args.run
    if run is None:
        try:
            from support.edge_kit import make_cartpole_run
        except ModuleNotFoundError as exc:
            if exc.name != "support":
                raise
            raise SystemExit(
                "without --run, run it with PYTHONPATH=tests (the tests' kit)"
            ) from exc
        run = make_cartpole_run(tmp / "cartpole")["path"]
    rows, summaries = [], {}
    for backend in args.backends.split(","):
        s = run_cell(Path(run), backend, tmp / backend, tmp / "cache", args)
        summaries[backend] = s
        rows.append(row_of(backend, s))
        print(f"{backend}: done ({s['timings_s'].get('compress_s', 0):.1f} s to build)", flush=True)
    ref = (summaries.get("tflite_fp32") or {}).get("fidelity") or {}
    if ref.get("saturates") and all((r["saturates"] or r["backend"] == "rllib") for r in rows):
        print("\nEvery variant reaches the env's cap on every episode: the comparison saturates.")
    print(f"\nrun: {run}; {args.episodes} episodes (seeds 0..{args.episodes - 1})\n")
    print_table(rows)
    if args.json:
        args.json.write_text(
            json.dumps({"rows": rows, "summaries": summaries}, indent=1, default=str)
        )


if __name__ == "__main__":
    main()
