"""Write cell folders in rlperf's result format (docs/results.md) from given numbers.

A test kit (``tests/support``), not part of the package. For tests and
benchmarks of the report, which must not wait for Ray: the
folders look exactly like a Hydra multirun of rlperf (``multirun.yaml``,
numbered cells with ``.hydra/config.yaml`` + ``overrides.yaml``,
``fingerprint.json``, ``metrics.csv`` or ``steps.csv`` / ``episodes.csv``,
``summary.json``). The numbers come from the caller; the tests derive them
from the 2021 study's data (:func:`train_metrics_from` resamples a legacy
cell's per-iteration rows), so the timings are real ones, not invented.

Nothing of the format is declared here: column names, summaries, config group
options and models come from rlperf's own definitions (``rlperf.results``,
``rlperf.telemetry.sampler``, the shipped ``conf/`` groups), so a change of the
result format reaches the report's tests (tests/report/test_report_kit.py checks it).
"""

from __future__ import annotations

import copy
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from rlperf.config.models import study_models
from rlperf.config.search_path import shipped_conf_dir
from rlperf.layout import (
    CELL_FILE,
    CHECKPOINT_DIR,
    CONFIG_FILE,
    EPISODES_FILE,
    FINGERPRINT_FILE,
    METRICS_FILE,
    MULTIRUN_FILE,
    STEPS_FILE,
    SUMMARY_FILE,
    TELEMETRY_FILE,
)
from rlperf.results.columns import (
    ALGO_COLUMNS,
    FAULT_COLUMNS,
    LATENCY_COLUMNS,
    PHASES,
    TRAIN_COLUMNS,
)
from rlperf.results.latency import EPISODE_COLUMNS, STEP_COLUMNS, summarize_latency
from rlperf.results.summary import excluded_counts, summarize_rows
from rlperf.sweep.index import CellRecord
from rlperf.telemetry.sampler import gpu_columns, telemetry_columns

#: The study's models: name -> (input dim, conv_filters), from the shipped ``conf/model``.
STUDY_MODELS = study_models()

#: Trainable parameters of the study's models, as the study states them
#: (docs/study.md, Models), for ``summary.json["model_params"]``.
MODEL_PARAMS = {"model1": 2_009_447, "model3": 1_108_359, "model4": 2_042_279}

#: ``metrics.csv`` columns before the per-GPU ones (the canonical list).
METRIC_COLUMNS = TRAIN_COLUMNS


@cache
def shipped_options(group: str) -> dict[str, dict[str, Any]]:
    """Every option of a shipped config group: name -> its YAML node (``conf/<group>/*.yaml``).

    Cached: use :func:`shipped_option` for a node to put into a config.
    """
    import yaml

    return {
        path.stem: _as_composed(yaml.safe_load(path.read_text()))
        for path in sorted((shipped_conf_dir() / group).glob("*.yaml"))
    }


def _as_composed(node: dict[str, Any]) -> dict[str, Any]:
    """An option's YAML node as Hydra composes it: its ``defaults`` list replaced by the
    ``kind`` of the schema it extends (``- /schema/env/atari@_here_`` -> ``kind: atari``;
    an ``algo`` option's schema is its ``name``, which the option states)."""
    defaults = node.pop("defaults", None) or []
    kinds = [
        d.split("@")[0].split("/")[-1]
        for d in defaults
        if str(d).startswith("/schema/") and not str(d).startswith("/schema/algo/")
    ]
    return {"kind": kinds[0], **node} if kinds else node


def env_schema_defaults() -> dict[str, Any]:
    """The keys every env option gets from the env schema's base (rlperf.config.schema_env.
    EnvConfig) without naming them: ``engine``, ``threads``, ``max_episode_steps``."""
    import dataclasses

    from rlperf.config.schema_env import EnvConfig

    return {
        f.name: str(f.default) if isinstance(f.default, str) else f.default
        for f in dataclasses.fields(EnvConfig)
        if f.name != "kind"
    }


def shipped_option(group: str, name: str) -> dict[str, Any]:
    """A copy of one shipped option's node, e.g. ``shipped_option("gpu_layout", "gpu0")``."""
    return copy.deepcopy(shipped_options(group)[name])


#: The shipped ``gpu_layout`` options (none, gpu0, gpu1, both and their ``_driver`` forms).
GPU_LAYOUTS = shipped_options("gpu_layout")
#: The shipped ``cpu_affinity`` options (unrestricted, ray_cpus, pinned).
CPU_AFFINITIES = shipped_options("cpu_affinity")


def resolved_config(
    *,
    stage: str = "train",
    model: str = "model1",
    gpu_layout: str = "gpu0",
    workers: int = 8,
    cpu_affinity: str = "unrestricted",
    backend: str = "rllib",
    iterations: int = 20,
    seed: int = 0,
    **extra: Any,
) -> dict[str, Any]:
    """A job config with the top-level keys of rlperf's ``.hydra/config.yaml``
    (``conf/config.yaml``; as Hydra writes it, interpolations unresolved).

    Every group node (``model``, ``gpu_layout``, ``cpu_affinity``, ``backend``,
    ``env``, ``algo``) is the shipped option; ``cpu_affinity.num_cpus`` is
    ``workers + 1`` where the mode limits Ray's CPUs. ``extra`` sets dotted keys
    written with ``__`` (``algo__lr=1e-4``).
    """
    affinity = shipped_option("cpu_affinity", cpu_affinity)
    if affinity["mode"] in ("ray_cpus", "pinned"):
        affinity["num_cpus"] = workers + 1
    cfg: dict[str, Any] = {
        "stage": stage,
        "seed": seed,
        "model": shipped_option("model", model),
        "gpu_layout": shipped_option("gpu_layout", gpu_layout),
        "workers": workers,
        "learners": None,
        "env_runner": {
            "num_envs": 1,
            "num_cpus": 1.0,
            "torch_threads": None,
        },
        "cpu_affinity": affinity,
        "backend": shipped_option("backend", backend),
        "env": {**env_schema_defaults(), **shipped_option("env", "pong")},
        "algo": shipped_option("algo", "ppo"),
        "train": {
            "iterations": iterations,
            "warmup_iterations": 0,
            "warmup_until_first_episode": True,
            "checkpoint_every": 0,
        },
        "telemetry": {"enabled": True, "interval_s": 1.0},
        "run": None,
        "checkpoint": None,
    }
    for dotted, value in extra.items():
        node = cfg
        *parents, leaf = dotted.split("__")
        for p in parents:
            node = node.setdefault(p, {})
        node[leaf] = value
    return cfg


def fingerprint(
    *,
    host: str = "bench-host",
    cpu_model: str = "Intel Xeon Gold 6138",
    cpu_count: int = 40,
    gpus: Sequence[str] = ("NVIDIA GeForce RTX 3090", "Tesla V100-PCIE-32GB"),
    ray: str = "2.60.0",
    start_time: str = "2026-12-01T10:00:00+00:00",
    affinity: Sequence[int] | None = None,
    cuda_visible_devices: str | None = None,
) -> dict[str, Any]:
    """A fingerprint.json body with the keys of ``rlperf.telemetry.collect_fingerprint``."""
    mask = list(affinity if affinity is not None else range(cpu_count))
    return {
        "start_time": start_time,
        "hostname": host,
        "platform": "Linux-6.8.0-x86_64-with-glibc2.39",
        "python": "3.11.9",
        "cpu_model": cpu_model,
        "cpu_count_logical": cpu_count,
        "cpu_count_physical": cpu_count // 2,
        "affinity": mask,
        "affinity_str": f"0-{mask[-1]}" if mask else "",
        "cgroup_cpu_limit": None,
        "ram_total_mb": 191_000.0,
        "gpus": [{"index": i, "name": n, "memory_total_mb": 24_576.0,
                  "uuid": f"GPU-{host}-{i:04d}"} for i, n in enumerate(gpus)],
        "gpu_driver": "550.54" if gpus else None,
        "nvml_unavailable_reason": None if gpus else "NVML is available but reports no GPU",
        "cuda_visible_devices": cuda_visible_devices,
        "edgetpu": {"present": False, "reason": "no Coral device found"},
        "libraries": {"ray": ray, "torch": "2.13.0", "tensorflow": "2.21.0",
                      "gymnasium": "1.2.0", "ale-py": "0.12.0", "hydra-core": "1.3.2",
                      "omegaconf": "2.3.0", "numpy": "2.2.0", "rlperf": "0.1.0"},
        "rlperf_git_commit": "0123456789abcdef0123456789abcdef01234567",
        "rlperf_git_dirty": False,
        "config_search_path": [{"provider": "hydra", "path": "pkg://hydra.conf"},
                               {"provider": "main", "path": "pkg://rlperf.conf"}],
        "config": None,
    }  # fmt: skip


def train_metrics_from(
    source: pd.DataFrame, iterations: int, seed: int = 0, gpus: Sequence[int] = (0, 1)
) -> pd.DataFrame:
    """``metrics.csv`` rows resampled from a canonical per-iteration table (e.g. a legacy cell).

    The source's warm-up rows stay first (same count, scaled to ``iterations``
    only if the source is longer); the rest are drawn with replacement from
    the source's steady-state rows with ±3% multiplicative noise, so means and
    spreads follow the source.
    """
    rng = np.random.default_rng(seed)
    warm = source[source["excluded"].eq("warmup")]
    steady = source[source["excluded"].eq("")]
    n_warm = min(len(warm), max(iterations - 1, 0))
    rows = pd.concat(
        [warm.iloc[:n_warm], steady.sample(iterations - n_warm, replace=True, random_state=seed)],
        ignore_index=True,
    )
    noise = rng.normal(1.0, 0.03, size=(len(rows), 4)).clip(0.8, 1.2)
    out = pd.DataFrame({"iteration": np.arange(1, len(rows) + 1)})
    for j, col in enumerate(PHASES):
        out[col] = rows[col].to_numpy(dtype=float) * noise[:, j]
    other = rows["other_s"].fillna(0.2).to_numpy(dtype=float).clip(min=0.0)
    out["iter_s"] = out[list(PHASES)].sum(axis=1) + other
    out["other_s"] = other
    out["time_s"] = out["iter_s"].cumsum()
    out["train_time_s"] = out["time_s"]  # no evaluation: training time is all of it
    out["eval_s"] = 0.0
    out["eval_return_mean"] = np.nan
    out["eval_episodes"] = 0
    out["eval_capped_episodes"] = 0
    warmup = np.arange(len(rows)) < n_warm
    out["excluded"] = np.where(warmup, "warmup", "")
    out["env_steps"] = rows["env_steps"].fillna(4000).to_numpy()
    out["env_steps_per_s"] = out["env_steps"] / out["iter_s"]
    # One env runner per worker of a study cell sampling against a ~2600 steps/s Pong.
    out["sampling_efficiency"] = out["env_steps"] / out["sample_s"] / 8 / 2600.0
    out["trained_steps"] = rows["trained_steps"].fillna(120_000).to_numpy()
    out["trained_steps_per_s"] = out["trained_steps"] / out["learn_s"]
    out["episodes"] = rows["episodes"].fillna(0).to_numpy()
    # PPO: one learner update per iteration; the replay and async columns stay empty.
    out["learner_updates"] = 1
    for col in ALGO_COLUMNS[1:]:
        out[col] = np.nan
    out["episode_return_mean"] = np.where(
        warmup, np.nan, rows["episode_return_mean"].to_numpy(dtype=float)
    )
    out["cpu_util_pct"] = rows["cpu_util_pct"].to_numpy(dtype=float)
    out["ram_util_pct"] = rows["ram_util_pct"].to_numpy(dtype=float)
    # A healthy run: every env runner up, nothing restarted or lost.
    out["env_runners_healthy"] = 1
    for col in FAULT_COLUMNS[1:]:
        out[col] = 0
    for i in gpus:
        util = rows.get(f"gpu{i}_util_pct", pd.Series(0.0, index=rows.index)).fillna(0.0)
        util = util.to_numpy(dtype=float)
        used = rows.get(f"gpu{i}_mem_used_pct", pd.Series(0.0, index=rows.index)).fillna(0.0)
        out[f"gpu{i}_util_pct"] = util
        out[f"gpu{i}_mem_util_pct"] = 0.4 * util
        out[f"gpu{i}_mem_used_mb"] = used.to_numpy(dtype=float) / 100 * 24_576
        out[f"gpu{i}_power_w"] = 30 + 3.2 * util
        out[f"gpu{i}_energy_j"] = out[f"gpu{i}_power_w"] * out["iter_s"]
    # The canonical order; a column added to the format and not filled here is a KeyError.
    return out[[*TRAIN_COLUMNS, *gpu_columns(gpus)]]


def telemetry_from(
    metrics: pd.DataFrame, interval_s: float = 1.0, gpus: Sequence[int] = (0, 1)
) -> pd.DataFrame:
    """``telemetry.csv`` rows of a training job whose iterations are ``metrics``: a sample
    every ``interval_s`` from the first iteration's start, each GPU drawing the power of
    the iteration it falls in, energy counted from the first sample (cumulative, as the
    sampler writes it; columns from :func:`rlperf.telemetry.sampler.telemetry_columns`)."""
    ends = metrics["time_s"].to_numpy(dtype=float)
    starts = ends - metrics["iter_s"].to_numpy(dtype=float)
    times = np.arange(starts[0], ends[-1] + 1e-9, interval_s)
    row_of = np.clip(np.searchsorted(ends, times), 0, len(ends) - 1)
    out = pd.DataFrame({"time_s": times,
                        "cpu_util_pct": metrics["cpu_util_pct"].to_numpy()[row_of],
                        "ram_util_pct": metrics["ram_util_pct"].to_numpy()[row_of],
                        "ram_used_mb": 48_000.0, "proc_rss_mb": 9_000.0})  # fmt: skip
    for i in gpus:
        for metric in ("util_pct", "mem_util_pct", "mem_used_mb", "power_w"):
            out[f"gpu{i}_{metric}"] = metrics[f"gpu{i}_{metric}"].to_numpy()[row_of]
        step_j = out[f"gpu{i}_power_w"].to_numpy() * np.diff(times, prepend=times[0])
        out[f"gpu{i}_energy_j"] = np.cumsum(step_j)
    return out[telemetry_columns(gpus)]


def train_summary(metrics: pd.DataFrame, model: str, status: str = "completed") -> dict[str, Any]:
    """summary.json of a training job (aggregates over the non-warm-up iterations, as the
    training job writes them: :func:`rlperf.results.summary.summarize_rows`)."""
    rows = metrics.to_dict("records")
    agg = summarize_rows(rows, list(metrics.columns), skip=("iteration", "time_s"))
    warm = metrics["excluded"].eq("warmup")
    return {
        "status": status,
        "stage": "train",
        "error": None if status == "completed" else "RuntimeError: worker died",
        "traceback": None,
        "model_params": MODEL_PARAMS.get(model),
        "iterations": int(len(metrics)),
        "warmup": {"rule": "first_episode",
                   "iterations": [int(i) for i in metrics.loc[warm, "iteration"]],
                   "excluded_from_summary": True},
        "excluded": excluded_counts(rows),
        "metrics": agg,
        "total_env_steps": float(metrics["env_steps"].sum()),
        "wall_s": float(metrics["time_s"].max()),
        "checkpoint": CHECKPOINT_DIR,
    }  # fmt: skip


def inference_steps(
    episode_means_ms: Sequence[float],
    steps_per_episode: int,
    warmup_steps: int = 20,
    seed: int = 0,
    returns: Sequence[float] | None = None,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``steps.csv`` and ``episodes.csv`` whose per-episode mean latency is as given.

    Per-step latencies are lognormal (sigma 0.08) around the episode mean with
    a slow first few steps (warm-up), as real interpreters show.
    """
    rng = np.random.default_rng(seed)
    frames, eps = [], []
    step0 = 0
    for e, mean in enumerate(episode_means_ms):
        n = steps_per_episode
        action = rng.lognormal(np.log(mean), 0.08, n)
        if e == 0:
            action[:warmup_steps] *= np.linspace(6.0, 1.0, min(warmup_steps, n))
        forward = action * 0.85
        env = rng.lognormal(np.log(0.35), 0.1, n)
        frames.append(pd.DataFrame({
            "episode": e, "step": np.arange(step0, step0 + n),
            "excluded": np.where(np.arange(step0, step0 + n) < warmup_steps, "warmup", ""),
            "forward_ms": forward, "action_ms": action, "env_step_ms": env,
            "action": rng.integers(0, 6, n),
        }))  # fmt: skip
        ret = float(returns[e]) if returns is not None else -21.0
        wall_s = float((action.sum() + env.sum()) / 1000)
        eps.append({"episode": e, "return": ret, "length": n, "wall_s": wall_s})
        step0 += n
    # The canonical order; a column added to the format and not filled here is a KeyError.
    steps = pd.concat(frames, ignore_index=True)[list(STEP_COLUMNS)]
    return steps, pd.DataFrame(eps)[list(EPISODE_COLUMNS)]


def inference_summary(
    steps: pd.DataFrame,
    episodes: pd.DataFrame,
    stage: str,
    backend: str,
    fidelity: dict[str, Any] | None = None,
    model_size_bytes: int | None = None,
    delegate: str | None = None,
) -> dict[str, Any]:
    """summary.json of a rollout / edge job (latency as the stages summarise it:
    :func:`rlperf.results.latency.summarize_latency` over the non-warm-up steps)."""
    warmup = steps["excluded"].eq("warmup").to_numpy(dtype=bool)
    lat = {c: summarize_latency(steps[c].to_numpy(dtype=float), warmup) for c in LATENCY_COLUMNS}
    out: dict[str, Any] = {
        "status": "completed", "stage": stage, "backend": backend, "latency": lat,
        "warmup_steps": int(warmup.sum()),
        "excluded": {"warmup": int(warmup.sum())} if warmup.any() else {},
        "episodes": {"count": int(len(episodes)), "return_mean": float(episodes["return"].mean()),
                     "return_std": float(episodes["return"].std(ddof=0)),
                     "length_mean": float(episodes["length"].mean())},
        "timer_overhead_ns": 60,
    }  # fmt: skip
    if fidelity is not None:
        out["fidelity"] = fidelity
    if model_size_bytes is not None:
        out["model_size_bytes"] = model_size_bytes
    if delegate is not None:
        out["delegate"] = delegate
    return out


@dataclass
class CellSpec:
    """One cell to write: its config, overrides and the result files' contents."""

    config: dict[str, Any]
    overrides: list[str]
    fingerprint: dict[str, Any] | None = None
    summary: dict[str, Any] | None = None
    metrics: pd.DataFrame | None = None
    steps: pd.DataFrame | None = None
    episodes: pd.DataFrame | None = None
    telemetry: pd.DataFrame | None = None
    extra_files: dict[str, str] = field(default_factory=dict)
    record: dict[str, Any] | None = None  # the launcher's cell.json (docs/sweeps.md)


def _yaml(data: Any) -> str:
    import yaml

    return yaml.safe_dump(data, sort_keys=False, default_flow_style=None)


def write_cell(path: Path, spec: CellSpec) -> Path:
    """Write one job folder (file names: :mod:`rlperf.layout`)."""
    hydra = (path / CONFIG_FILE).parent
    hydra.mkdir(parents=True, exist_ok=True)
    (path / CONFIG_FILE).write_text(_yaml(spec.config))
    (hydra / "overrides.yaml").write_text(_yaml(spec.overrides))
    (hydra / "hydra.yaml").write_text(_yaml({"hydra": {"job": {"name": "rlperf"}}}))
    if spec.fingerprint is not None:
        (path / FINGERPRINT_FILE).write_text(json.dumps(spec.fingerprint, indent=1))
    if spec.metrics is not None:
        spec.metrics.to_csv(path / METRICS_FILE, index=False)
    if spec.steps is not None:
        spec.steps.to_csv(path / STEPS_FILE, index=False)
    if spec.episodes is not None:
        spec.episodes.to_csv(path / EPISODES_FILE, index=False)
    if spec.telemetry is not None:
        spec.telemetry.to_csv(path / TELEMETRY_FILE, index=False)
    if spec.summary is not None:
        (path / SUMMARY_FILE).write_text(json.dumps(spec.summary, indent=1))
    if spec.record is not None:
        (path / CELL_FILE).write_text(json.dumps(spec.record, indent=1))
    for name, text in spec.extra_files.items():
        (path / name).write_text(text)
    return path


def write_sweep(
    root: Path, cells: Sequence[CellSpec], launcher: dict[str, Any] | None = None
) -> list[Path]:
    """Write a Hydra multirun folder: ``multirun.yaml`` and cells ``0``, ``1``, ..."""
    root.mkdir(parents=True, exist_ok=True)
    launcher = launcher or {
        "_target_": "hydra_plugins.rlperf_ray_tune_launcher.RayTuneLauncher",
        "max_concurrent_trials": 1,
    }
    (root / MULTIRUN_FILE).write_text(_yaml({"hydra": {"mode": "MULTIRUN", "launcher": launcher}}))
    return [write_cell(root / str(i), spec) for i, spec in enumerate(cells)]


def overrides_for(config: dict[str, Any]) -> list[str]:
    """Hydra overrides that would have produced ``config`` (group choices + train length)."""
    return [
        f"model={config['model']['name']}",
        f"gpu_layout={config['gpu_layout']['name']}",
        f"workers={config['workers']}",
        f"cpu_affinity={config['cpu_affinity']['name']}",
        f"backend={config['backend']['name']}",
        f"stage={config['stage']}",
        f"train.iterations={config['train']['iterations']}",
    ]


def _legacy_cells(thesis: Path) -> list[Any]:
    from rlperf.errors import CellError
    from rlperf.report.read.discover import discover
    from rlperf.report.read.legacy import load_legacy

    cells = []
    for ref in discover([thesis]).refs:
        try:
            cells.append(load_legacy(ref))
        except CellError:
            continue
    return cells


def _record(i: int, cfg: dict[str, Any], start: float, wall_s: float) -> dict[str, Any]:
    """A completed cell's ``cell.json``, as the sweep launcher writes it."""
    record = CellRecord(
        hash=f"{i:016x}",
        overrides=overrides_for(cfg),
        subdir=str(i),
        job_num=i,
        status="completed",
        group=0,
        runs=1,
        started_at=_timestamp(start - 2.0, 0.0),
        finished_at=_timestamp(start + wall_s + 1.0, 0.0),
        wall_s=wall_s + 3.0,
        concurrent_cells=1,
    )
    return record.to_json()


def _timestamp(base: float, offset_s: float) -> str:
    from datetime import UTC, datetime

    return datetime.fromtimestamp(base + offset_s, UTC).isoformat()


def study_training_sweep(
    thesis: Path,
    root: Path,
    *,
    iterations: int = 30,
    n_cells: int | None = None,
    seed: int = 0,
    fp: dict[str, Any] | None = None,
) -> list[Path]:
    """A training sweep whose cells replay the study's Tune runs found under ``thesis``.

    One cell per distinct (model, gpu_layout, workers, cpu_affinity) legacy run,
    or ``n_cells`` cells cycling through them (later rounds differ in ``seed``).
    Runs on CPU-pinned-to-one-core or without a GPU layout name of rlperf's are
    skipped. Cells run one after the other (start times do not overlap).
    """
    legacy = [c for c in _legacy_cells(thesis)
              if c.stage == "train" and c.axes["gpu_layout"] in GPU_LAYOUTS
              and c.axes["cpu_affinity"] in CPU_AFFINITIES
              and c.leaves.get("workers.num_cpus_per_worker", 1) != 0
              and c.axes["model"] in STUDY_MODELS]  # fmt: skip
    seen: dict[tuple[Any, ...], Any] = {}
    for c in legacy:
        key = tuple(c.axes[a] for a in ("model", "gpu_layout", "workers", "cpu_affinity"))
        seen.setdefault(key, c)
    sources = list(seen.values())
    n = n_cells if n_cells is not None else len(sources)
    specs = []
    clock = 0.0
    for i in range(n):
        src = sources[i % len(sources)]
        cfg = resolved_config(
            model=src.axes["model"],
            gpu_layout=src.axes["gpu_layout"],
            workers=src.axes["workers"],
            cpu_affinity=src.axes["cpu_affinity"],
            iterations=iterations,
            seed=seed + i // len(sources),
        )
        metrics = train_metrics_from(src.iterations, iterations, seed=seed + i)
        body = dict(fp or fingerprint())
        body["start_time"] = _timestamp(1_796_000_000.0, clock)
        wall = float(metrics["time_s"].max())
        record = _record(i, cfg, 1_796_000_000.0 + clock, wall)
        visible = cfg["gpu_layout"]["visible_gpus"]
        body["cuda_visible_devices"] = ",".join(map(str, visible)) if visible else ""
        body["config"] = cfg
        clock += wall + 5.0
        specs.append(
            CellSpec(
                cfg,
                [*overrides_for(cfg), f"seed={cfg['seed']}"],
                body,
                train_summary(metrics, src.axes["model"]),
                metrics,
                telemetry=telemetry_from(metrics, interval_s=5.0),
                record=record,
            )
        )
    return write_sweep(root, specs)


#: Fidelity of the exported variants in the synthetic inference sweep (made up: the study
#: never measured fidelity; rlperf does, see docs/edge.md).
SYNTHETIC_FIDELITY = {
    "tflite_fp32": {"agreement": 1.0, "max_abs_logit_err": 2e-6, "mean_abs_logit_err": 3e-7,
                    "return_diff": 0.0},
    "tflite_int8": {"agreement": 0.962, "max_abs_logit_err": 0.31, "mean_abs_logit_err": 0.04,
                    "return_diff": -1.5},
    "edgetpu": {"agreement": 0.955, "max_abs_logit_err": 0.34, "mean_abs_logit_err": 0.05,
                "return_diff": -2.0},
}  # fmt: skip


def study_inference_sweep(
    thesis: Path,
    root: Path,
    *,
    steps_per_episode: int = 300,
    seed: int = 0,
    fp: dict[str, Any] | None = None,
) -> list[Path]:
    """An inference sweep (rollout + edge cells) replaying the study's per-episode latencies.

    Uses ``rollout_results/artecslab001/modelN_<backend>.csv``: every episode's
    mean time per action becomes ``steps_per_episode`` per-step samples around it.
    """
    legacy = [c for c in _legacy_cells(thesis)
              if c.stage in ("rollout", "edge") and c.latency is not None
              and (c.latency["granularity"] == "episode_mean").all()]  # fmt: skip
    specs = []
    clock = 0.0
    for i, src in enumerate(legacy):
        backend = src.axes["backend"]
        stage = "rollout" if backend == "rllib" else "edge"
        cfg = resolved_config(
            stage=stage, model=src.axes["model"], gpu_layout="none", workers=0, backend=backend
        )
        means = src.latency["action_ms"].to_numpy(dtype=float)[:5]
        returns = src.episodes["return"].to_numpy(dtype=float)[:5]
        steps, episodes = inference_steps(means, steps_per_episode, seed=seed + i, returns=returns)
        fid = SYNTHETIC_FIDELITY.get(backend)
        if fid is not None:
            fid = {**fid, "threshold": 0.95, "flagged": fid["agreement"] < 0.95}
        summary = inference_summary(
            steps,
            episodes,
            stage,
            backend,
            fid,
            model_size_bytes=2_100_000 if backend != "rllib" else None,
            delegate={"edgetpu": "libedgetpu.so.1", "tflite_int8": "XNNPACK"}.get(backend),
        )
        body = dict(fp or fingerprint(cpu_model="Intel Core i9-9900K", cpu_count=16, gpus=()))
        body["start_time"] = _timestamp(1_796_500_000.0, clock)
        body["config"] = cfg
        clock += float(episodes["wall_s"].sum()) + 5.0
        specs.append(
            CellSpec(cfg, overrides_for(cfg), body, summary, steps=steps, episodes=episodes)
        )
    return write_sweep(root, specs)
