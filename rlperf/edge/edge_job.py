"""The edge stage as a Hydra job: ``rlperf stage=edge run=<training run> backend=<backend>``.

Config keys: ``run`` / ``checkpoint`` (the trained policy, see :mod:`rlperf.runs`),
``model_path`` (an existing ``.tflite``), ``backend.name`` (its spec:
:mod:`rlperf.specs.backends`), ``seed`` (episode ``i`` is reset with ``seed + i``),
``env.*`` (only keys given on the command line override the run's env), and ``edge.*``
(:class:`rlperf.config.schema.EdgeConfig`: episodes and steps, the calibration and
fidelity sets, the tolerances, the cache, XNNPACK and isolation, the Edge TPU's library,
device and source variant, the compressed backends' fine-tuning).

Steps (:func:`run_edge`): resolve the policy, its run config and the env
(:mod:`rlperf.edge.cell`) → prepare the model file (:mod:`rlperf.edge.prepare`;
``edgetpu``: runtime and device checked first, the cell skipped if absent; then the
fidelity set and the variant, built or reused in the cache by
:func:`rlperf.tflite.artifacts.build_variant`, compiled for the Edge TPU) → measure:
benchmark in a fresh process → check fidelity and return parity → summarise (the job
wrapper writes the dict to ``summary.json``). See ``docs/edge.md``.
"""

from __future__ import annotations

import logging
import shutil
import time
from pathlib import Path
from typing import Any

import numpy as np
from gymnasium import spaces
from omegaconf import DictConfig

from rlperf.edge.benchmark import BenchmarkSpec, random_returns, reference_returns, run_isolated
from rlperf.edge.cell import EdgeCell, resolve_cell
from rlperf.edge.fidelity import (
    action_fidelity,
    flag_return_loss,
    logit_fidelity,
    reference_informativeness,
    return_loss_margin,
    return_parity,
    verdict,
)
from rlperf.edge.prepare import edgetpu_preflight, prepare_variant
from rlperf.errors import SkipCell
from rlperf.job_wrapper import JobContext
from rlperf.layout import EPISODES_FILE, EXCLUDED_COLUMN, STEPS_FILE
from rlperf.results.csvlog import read_rows
from rlperf.results.latency import episode_windows
from rlperf.results.record import EdgeRecord, as_record
from rlperf.specs.stages import Stage
from rlperf.telemetry.sampler import action_energy
from rlperf.tflite.cache import settings_hash
from rlperf.tflite.tflite_model import gzip_size, input_distortion, read_tflite, weight_sparsity

log = logging.getLogger("rlperf.edge")


def benchmark(cell: EdgeCell) -> tuple[Any, dict[str, Any], float]:
    """Play the episodes with the cell's model in a fresh process: (spec, result, seconds)."""
    cfg = cell.cfg
    common: dict[str, Any] = {
        "env_config": cell.env,
        "num_actions": cell.num_actions,
        "out_dir": str(cell.out_dir),
        "episodes": int(cfg.edge.episodes),
        "steps": int(cfg.edge.steps) if cfg.edge.steps is not None else None,
        "warmup_steps": int(cfg.edge.warmup_steps),
        "seed": int(cfg.seed),
        "threads": int(cfg.edge.threads),
        "xnnpack": bool(cfg.edge.xnnpack),
        "continuous": cell.action_span is not None,
    }
    if cell.spec.in_rllib:
        spec = BenchmarkSpec("torch", str(cell.benchmarked_file), **common)
    else:
        edgetpu = cell.edgetpu or {}
        fidelity = cell.cache.path(cell.fidelity_name) if cell.fidelity_name else None
        spec = BenchmarkSpec(
            "tflite",
            str(cell.benchmarked_file),
            fidelity_path=str(fidelity) if fidelity else None,
            **common,
            edgetpu_library=edgetpu.get("library"),
            edgetpu_device=edgetpu.get("device"),
        )
    log.info("benchmarking %s (%s)", cell.backend, cell.benchmarked_file.name)
    t0 = time.perf_counter()
    result = run_isolated(spec, bool(cfg.edge.isolate))
    bench_s = time.perf_counter() - t0
    delegate = result["delegate"] or {}
    if delegate.get("status") in ("partial", "none") or delegate.get("edgetpu_status") not in (
        None,
        "full",
    ):
        log.warning(
            "%s: delegate status %s: %s",
            cell.backend,
            delegate.get("edgetpu_status") or delegate.get("status"),
            delegate.get("note"),
        )
    return spec, result, bench_s


def _cached_returns(cell: EdgeCell, kind: str, settings: dict[str, Any], play: Any) -> list[float]:
    """Returns of ``kind`` (reference, random) on the cell's seeded episodes, played once per
    settings and kept in the policy's cache."""
    name = f"{kind}-returns-{settings_hash(settings)}.json"
    if cell.cache.has(name):
        return [float(r) for r in cell.cache.read_json(name)["returns"]]
    returns = [float(r) for r in play()]
    cell.cache.write_json(name, {"returns": returns, **settings})
    return returns


def reference_returns_of(cell: EdgeCell, spec: Any, returns: list[float]) -> list[float] | None:
    """Returns of the torch policy on the same seeded episodes (cached per settings)."""
    if cell.trained is None or cell.cache is None:
        return None
    trained = cell.trained
    settings = {"env": cell.env, "episodes": spec.episodes, "steps": spec.steps, "seed": spec.seed}
    if cell.spec.in_rllib:
        return _cached_returns(cell, "reference", settings, lambda: returns)

    def play() -> list[float]:
        log.info("playing the torch policy on the same episodes for return parity")
        return reference_returns(
            trained.policy_path, cell.env, spec.episodes, spec.steps, spec.seed, spec.threads
        )

    return _cached_returns(cell, "reference", settings, play)


def random_returns_of(cell: EdgeCell, spec: Any) -> list[float]:
    """Returns of a random policy on the same seeded episodes (cached per settings)."""
    settings = {"env": cell.env, "episodes": spec.episodes, "steps": spec.steps, "seed": spec.seed}
    return _cached_returns(
        cell,
        "random",
        settings,
        lambda: random_returns(cell.env, spec.episodes, spec.steps, spec.seed),
    )


def check_fidelity(
    cell: EdgeCell, spec: Any, result: dict[str, Any], ref_returns: list[float] | None
) -> dict[str, Any] | None:
    """Logit fidelity on the fidelity set, return parity against the torch policy, and how
    informative that reference is (``verdict``: passed, flagged or vacuous)."""
    if cell.spec.in_rllib or cell.fidelity is None or "fidelity_logits" not in result:
        return None
    ref_outputs = cell.fidelity.extra["logits"]  # a Box policy's: its actions
    if cell.action_span is not None:
        tolerance = float(cell.cfg.edge.action_tolerance)
        fid = action_fidelity(result["fidelity_logits"], ref_outputs, cell.action_span, tolerance)
    else:
        threshold = float(cell.cfg.edge.fidelity_threshold)
        fid = logit_fidelity(result["fidelity_logits"], ref_outputs, threshold)
    rows = result["episode_rows"]
    returns = [float(r["return"]) for r in rows]
    truncated = [bool(r.get("truncated")) for r in rows]
    fid.update(return_parity(returns, ref_returns or [], truncated))
    fid["reference"] = reference_informativeness(
        ref_outputs, ref_returns or [], random_returns_of(cell, spec), cell.action_span
    )
    flag_return_loss(fid, return_loss_margin(fid["reference"], cell.action_span is not None))
    fid["verdict"] = verdict(fid)
    fid["fidelity_set"] = cell.fidelity.metadata()
    if fid["verdict"] == "vacuous":
        log.warning(
            "%s: the fidelity check is VACUOUS: %s",
            cell.backend,
            fid["reference"]["vacuous_reason"],
        )
    elif fid["flagged"]:
        log.warning("%s is FLAGGED: %s", cell.backend, fid["flag_reason"])
    return fid


def check_cell(
    cell: EdgeCell, spec: BenchmarkSpec, result: dict[str, Any]
) -> tuple[dict[str, Any] | None, list[float] | None]:
    """The checks of ``summary.json``: ``fidelity`` and the torch policy's returns on the same
    episodes (``reference_returns``)."""
    returns = [float(r["return"]) for r in result["episode_rows"]]
    ref_returns = reference_returns_of(cell, spec, returns)
    return check_fidelity(cell, spec, result, ref_returns), ref_returns


def copy_artifacts(cell: EdgeCell) -> Path:
    """The benchmarked model file (and the Edge TPU compiler's log) into the job folder."""
    model_file = cell.benchmarked_file
    copied = cell.out_dir / model_file.name
    if model_file.resolve() != copied.resolve():
        shutil.copy2(model_file, copied)
    if cell.variant is not None and cell.variant.compiler_log is not None:
        shutil.copy2(cell.variant.compiler_log, cell.out_dir / "edgetpu_compiler.txt")
    return copied


def _heads(cell: EdgeCell) -> str | None:
    if cell.model_file is not None:
        return None  # a given file: whatever heads it has
    # The rllib cell computes the policy branch only (VisionNet.logits).
    return "policy" if cell.spec.in_rllib else str(cell.cfg.edge.heads)


def summarise(
    cell: EdgeCell,
    result: dict[str, Any],
    bench_s: float,
    checks: tuple[dict[str, Any] | None, list[float] | None],
    record: EdgeRecord,
) -> EdgeRecord:
    """The edge cell's ``summary.json`` entries, into ``record`` (``checks``: fidelity and
    the reference returns)."""
    threads, variant = int(cell.cfg.edge.threads), cell.variant
    copied = copy_artifacts(cell)
    info = read_tflite(cell.benchmarked_file) if not cell.spec.in_rllib else None
    record.stage, record.source = str(Stage.edge), cell.source
    if cell.model is not None:
        record.model = cell.model
    record.backend, record.env = cell.backend, cell.env
    record.variant = variant.variant if variant is not None else "torch"
    record.heads, record.threads, record.seed = _heads(cell), threads, int(cell.cfg.seed)
    record.latency = result["latency"]
    record.excluded = result.get(EXCLUDED_COLUMN, {})
    record.warmup_steps = int(cell.cfg.edge.warmup_steps)
    record.steps, record.episodes = result["steps"], result["episodes"]
    record.timer_overhead_ns = result["timer_overhead_ns"]
    record.fidelity, record.reference_returns = checks
    record.model_file = copied.name
    record.model_size_bytes = cell.benchmarked_file.stat().st_size
    record.model_gzip_bytes = gzip_size(cell.benchmarked_file)
    record.weights = weight_sparsity(cell.benchmarked_file) if info is not None else None
    record.model_info = info.to_dict() if info is not None else None
    record.input = (
        {**info.inputs[0].to_dict(), **_distortion(cell, info.inputs[0])}
        if info is not None
        else _torch_input(cell)
    )
    record.delegate = result["delegate"] or {
        "delegates": ["torch"],
        "status": "n/a",
        "threads": threads,
    }
    record.memory = result["memory"]
    record.export = variant.export if variant is not None else None
    record.calibration = variant.calibration_entry if variant is not None else None
    record.edgetpu = (
        {
            **cell.edgetpu,
            "source": None if cell.model_file else str(cell.cfg.edge.edgetpu_source),
            "compiler": variant.compiler if variant is not None else None,
        }
        if cell.edgetpu is not None
        else None
    )
    record.cache = {
        "dir": str(cell.cache.dir) if cell.cache is not None else None,
        "built": variant.built if variant is not None else [],
        "reused": variant.reused if variant is not None else [],
    }
    record.timings_s = {
        **(variant.timings_s if variant is not None else {}),
        "benchmark_s": bench_s,
    }
    return record


def _distortion(cell: EdgeCell, tensor: Any) -> dict[str, Any]:
    """How feeding raw frame bytes distorts the input (uint8 frames only: other observations
    are always quantized with the tensor's scale)."""
    space = cell.obs_space
    if isinstance(space, spaces.Box) and space.dtype == np.uint8:
        return input_distortion(tensor)
    return {"lossless": not tensor.quantized, "note": "observations quantized with its scale"}


def _torch_input(cell: EdgeCell) -> dict[str, Any]:
    """The ``input`` entry of an ``rllib`` (torch) cell."""
    if getattr(cell.net, "kind", "vision") != "mlp":
        return {"dtype": "uint8", "note": "torch scales by 1/255 inside"}
    discrete = cell.net.obs_spec["type"] == "discrete"
    return {
        "dtype": "int64" if discrete else str(getattr(cell.obs_space, "dtype", "float32")),
        "note": "the MLP one-hot encodes the state inside"
        if discrete
        else "the MLP takes the observation as float32",
    }


def run_edge(cfg: DictConfig, out_dir: Path, ctx: JobContext) -> EdgeRecord:
    """Build (or reuse), benchmark and check one variant of a trained policy.

    Writes ``steps.csv``, ``episodes.csv`` and a copy of the benchmarked model
    file into ``out_dir``; returns the job's record, filled (see ``docs/results.md`` and
    ``docs/edge.md``). ``ctx`` is the job context (:class:`rlperf.job_wrapper.JobContext`).

    Raises:
        SkipCell: ``backend=edgetpu`` without runtime, device or compiler.
        TfliteError: bad inputs, an export that fails verification, an Edge-TPU
            file given to a CPU backend.
        rlperf.errors.CheckpointError: a run or checkpoint that cannot be used.
    """
    out_dir.mkdir(parents=True, exist_ok=True)
    cell = resolve_cell(cfg, out_dir)
    if cell.spec.on_edgetpu:
        cell.edgetpu = edgetpu_preflight(cfg)
    prepare_variant(cell)
    t0 = ctx.telemetry_now()  # the energy counters, read around the benchmark
    spec, result, bench_s = benchmark(cell)
    window = ctx.telemetry_window(t0, ctx.telemetry_now())
    track_episodes(out_dir, ctx)
    checks = check_cell(cell, spec, result)
    record = summarise(cell, result, bench_s, checks, as_record(ctx.record, EdgeRecord))
    # Over the whole benchmark (its process's start and the model's load included).
    record.energy = action_energy(window, int(record.steps or 0))
    return record


def track_episodes(out_dir: Path, ctx: JobContext) -> None:
    """Each episode's latency window to the job's tracking, read from the files the
    benchmark wrote (it may have run in a process of its own; docs/tracking.md)."""
    if ctx.tracking is None:
        return
    steps, episodes = read_rows(out_dir / STEPS_FILE), read_rows(out_dir / EPISODES_FILE)
    for window in episode_windows(steps, episodes):
        ctx.track(window)


__all__ = ["SkipCell", "run_edge"]
