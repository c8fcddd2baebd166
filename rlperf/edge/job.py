"""The edge stage as a Hydra job: ``rlperf stage=edge run=<training run> backend=<backend>``.

Config keys: ``run`` / ``checkpoint`` (the trained policy, see :mod:`rlperf.runs`),
``model_path`` (an existing ``.tflite``), ``backend.name``, ``seed`` (episode
``i`` is reset with ``seed + i``), ``env.*`` (only keys given on the command
line override the run's env), and ``edge.*``: ``episodes``, ``steps``,
``warmup_steps``, ``threads``, ``heads``, ``calibration_size``,
``calibration_policy``, ``calibration_seed``, ``fidelity_observations``,
``fidelity_seed``, ``fidelity_threshold``, ``export_tolerance``, ``cache_dir``;
read with defaults until the schema has them: ``fidelity_policy`` (random),
``int8_io`` (uint8), ``xnnpack`` (true), ``isolate`` (true),
``edgetpu_library`` (libedgetpu.so.1), ``edgetpu_device`` (null), ``edgetpu_source``
(tflite_int8: the int8 variant ``backend=edgetpu`` compiles), and the fine-tuning
keys of the compressed backends (``finetune_steps``, ``finetune_lr``, ``finetune_batch``).

Steps (:func:`run_edge`): resolve the policy, its run config and the env →
(``edgetpu``: check runtime and device first, skip the cell if absent) →
prepare the variant (fidelity set, then build or reuse it in the cache: export
verified against torch, calibration, conversion, compilation) → benchmark in a
fresh process → check fidelity and return parity → summary dict (the job
wrapper writes it to ``summary.json``). See ``docs/edge.md``.
"""

from __future__ import annotations

import logging
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from omegaconf import DictConfig

from rlperf.edge import EdgeInputError, SkipCell
from rlperf.envs.factory import describe_env
from rlperf.envs.from_config import play_env
from rlperf.models.spaces import describe_space
from rlperf.runs.checkpoint import TrainedRun
from rlperf.tflite.artifacts import Variant, build_variant, fidelity_set

log = logging.getLogger("rlperf.edge")

CPU_TFLITE_BACKENDS = ("tflite_fp32", "tflite_int8", "tflite_dynamic", "tflite_fp16")


@dataclass
class EdgeCell:
    """What the steps of one edge cell share."""

    cfg: DictConfig
    out_dir: Path
    backend: str
    cache_root: Path
    # The "source" entry of summary.json: policy, run, model_path (and the policy's checks).
    source: dict[str, Any] = field(
        default_factory=lambda: {"policy": None, "run": None, "model_path": None}
    )
    trained: TrainedRun | None = None  # run= / checkpoint=
    net: Any = None  # its torch policy (VisionNet)
    model: dict[str, Any] | None = None  # the "model" entry of summary.json
    cache: Any = None  # the policy's ArtifactCache
    model_file: Path | None = None  # model_path=
    file_info: Any = None  # what read_tflite says about model_path=
    env: dict[str, Any] = field(default_factory=dict)
    num_actions: int = 0
    obs_space: Any = None  # the env's observation space
    edgetpu: dict[str, Any] | None = None  # runtime and device, for backend=edgetpu
    fidelity: Any = None  # the fidelity ObservationSet with the torch logits
    fidelity_name: str | None = None
    variant: Variant | None = None

    @property
    def benchmarked_file(self) -> Path:
        """``rlperf_policy.pt`` for ``backend=rllib``, else the variant's ``.tflite``."""
        if self.backend == "rllib":
            assert self.trained is not None
            return self.trained.policy_path
        assert self.variant is not None
        return self.variant.path


# --------------------------------------------------------------------------
# Resolve: the policy, the file, the backend and the env
# --------------------------------------------------------------------------


def resolve_cell(cfg: DictConfig, out_dir: Path) -> EdgeCell:
    """The cell's policy (``run`` / ``checkpoint``), file (``model_path``), backend and env."""
    from gymnasium import spaces

    from rlperf.envs.factory import env_spaces
    from rlperf.tflite.cache import resolve_cache_root

    cell = EdgeCell(cfg, out_dir, str(cfg.backend.name), resolve_cache_root(cfg.edge.cache_dir))
    if cfg.model_path:
        cell.model_file = Path(str(cfg.model_path))
        if not cell.model_file.is_file():
            raise EdgeInputError(f"model_path={cfg.model_path}: no such file")
    cell.source["model_path"] = str(cell.model_file) if cell.model_file else None
    ecfg = load_trained_policy(cell) if cfg.run or cfg.checkpoint else cfg
    if cell.model_file is not None:
        inspect_model_file(cell)
    if cell.file_info is not None:
        obs_shape = cell.file_info.inputs[0].shape[1:]
    else:
        obs_shape = cell.net.obs_shape
    cell.env = play_env(ecfg, tuple(obs_shape))
    obs_space, action_space = env_spaces(cell.env)
    if not isinstance(action_space, spaces.Discrete):
        raise EdgeInputError(
            f"the edge stage benchmarks policies with Discrete actions (the greedy action is the "
            f"argmax of the logits); {describe_space(action_space)} actions of "
            f"{describe_env(cell.env)} are not supported"
        )
    cell.num_actions = int(action_space.n)
    cell.obs_space = obs_space
    return cell


def load_trained_policy(cell: EdgeCell) -> DictConfig:
    """Load and check the run's policy (``probe.npz`` too); write ``effective_config.yaml``.

    Returns the effective config: the run's model, env and algo, with ``env.*``
    of the command line on top.
    """
    from rlperf.models.policy_file import count_trainable_params, load_policy
    from rlperf.runs.merge import upstream_run, write_effective_config
    from rlperf.runs.probe import check_probe
    from rlperf.tflite.cache import ArtifactCache
    from rlperf.tflite.export import torch_outputs

    trained, ecfg = upstream_run(cell.cfg, rllib=False)
    net = load_policy(trained.policy_path)
    probe = check_probe(trained.probe, lambda obs: torch_outputs(net, obs)[0])
    cell.trained, cell.net = trained, net
    cell.cache = ArtifactCache.for_policy(cell.cache_root, trained.policy_path)
    name = str(trained.config.model.name)
    cell.model = {"name": name, **net.model_config(), "params": count_trainable_params(net)}
    cell.source.update(
        policy=str(trained.policy_path),
        run=str(trained.run_dir),
        model=name,
        policy_sha256_16=cell.cache.key,
        probe=probe,
        **trained.job_identity(),
    )
    write_effective_config(cell.out_dir, ecfg)
    return ecfg


def inspect_model_file(cell: EdgeCell) -> None:
    """``model_path``: the backend for it, runnable there, the policy's input shape."""
    from rlperf.tflite.tflite_model import ensure_cpu_runnable, read_tflite

    assert cell.model_file is not None
    from rlperf.tflite.export import policy_input_shape

    cell.file_info = info = read_tflite(cell.model_file)
    cell.backend = _backend_for_file(cell.backend, info)
    if cell.backend != "edgetpu":
        ensure_cpu_runnable(info, cell.backend)
    in_shape = info.inputs[0].shape[1:]
    if cell.net is not None and policy_input_shape(cell.net) != tuple(in_shape):
        raise EdgeInputError(
            f"model_path input {list(in_shape)} does not match the policy's "
            f"observation shape {list(policy_input_shape(cell.net))}"
        )


# --------------------------------------------------------------------------
# Edge TPU artifacts
# --------------------------------------------------------------------------


def compile_variant(cache: Any, int8: Variant) -> Variant:
    """The Edge-TPU-compiled twin of an int8 model (compiled once, cached with its log)."""
    from rlperf.edge.edgetpu import compile_model, parse_compiler_output

    stem = int8.path.stem
    name = f"{stem}_edgetpu.tflite"
    log_name = f"{stem}_edgetpu.compiler.txt"
    out = Variant(
        cache.path(name),
        "edgetpu",
        int8.export,
        int8.calibration,
        None,
        None,
        list(int8.built),
        list(int8.reused),
        dict(int8.timings_s),
    )
    if cache.has(name) and cache.has(log_name):
        out.reused.append(name)
        text = cache.path(log_name).read_text()
        report = parse_compiler_output(text)
        report.compiled = True
    else:
        t0 = time.perf_counter()
        log.info("compiling %s with edgetpu_compiler", int8.path.name)
        compiled, report, text = compile_model(int8.path, cache.dir)
        if compiled != cache.path(name):
            shutil.move(str(compiled), cache.path(name))
        cache.write_bytes(log_name, text.encode())
        out.timings_s["compile_s"] = time.perf_counter() - t0
        cache.record_artifact(name, {"kind": "edgetpu compiled", "source": int8.path.name})
        out.built.append(name)
    out.compiler = report.to_dict()
    out.compiler_log = cache.path(log_name)
    return out


# --------------------------------------------------------------------------
# Backend checks
# --------------------------------------------------------------------------


def _backend_for_file(backend: str, info: Any) -> str:
    """``backend=rllib`` (the default) with ``model_path``: pick the backend from the file."""
    if backend != "rllib":
        return backend
    if info.is_edgetpu_compiled:
        return "edgetpu"
    return (
        f"tflite_{info.variant}"
        if f"tflite_{info.variant}" in CPU_TFLITE_BACKENDS
        else "tflite_fp32"
    )


def _edgetpu_preflight(cfg: DictConfig) -> dict[str, Any]:
    """Runtime and device present? Otherwise skip the cell (with the install hint)."""
    from rlperf.edge.edgetpu import INSTALL_HINT, EdgeTpuUnavailable, find_runtime, probe_delegate

    library = str(cfg.edge.edgetpu_library)
    device = cfg.edge.edgetpu_device
    runtime = find_runtime(library)
    if not runtime.available:
        log.warning("%s\n%s", runtime.reason, INSTALL_HINT)
        raise EdgeTpuUnavailable(f"{runtime.reason}. {INSTALL_HINT}")
    probe_delegate(library, device)
    return {"runtime": runtime.to_dict(), "library": library, "device": device}


# --------------------------------------------------------------------------
# Prepare, measure, check, summarise
# --------------------------------------------------------------------------


def prepare_variant(cell: EdgeCell) -> None:
    """The model file the backend runs: built (or reused) in the policy's cache with the
    fidelity set, or ``model_path`` (compiled for the Edge TPU where needed)."""
    cfg, backend, cache = cell.cfg, cell.backend, cell.cache
    if cell.net is not None and backend != "rllib":
        with cache.lock():
            cell.fidelity, cell.fidelity_name, new = fidelity_set(cache, cfg, cell.env, cell.net)
            if cell.model_file is None:
                int8_backend = str(cfg.edge.edgetpu_source) if backend == "edgetpu" else backend
                variant = build_variant(
                    cache, cfg, int8_backend, cell.net, cell.env, cell.fidelity, cell.obs_space
                )
                (variant.built if new else variant.reused).insert(0, cell.fidelity_name)
                cell.variant = compile_variant(cache, variant) if backend == "edgetpu" else variant
    if cell.model_file is not None:
        cell.variant = file_variant(cell)


def file_variant(cell: EdgeCell) -> Variant:
    """``model_path`` as it is, or its Edge-TPU-compiled twin for ``backend=edgetpu``."""
    from rlperf.tflite.cache import ArtifactCache, file_sha256
    from rlperf.tflite.convert import BACKEND_VARIANTS

    assert cell.model_file is not None and cell.file_info is not None
    variant = Variant(cell.model_file, cell.file_info.variant)
    expected = BACKEND_VARIANTS.get(cell.backend)
    if expected is not None and expected != variant.variant and cell.backend != "edgetpu":
        log.warning(
            "backend=%s but %s is a %s model; it is benchmarked as it is",
            cell.backend, cell.model_file.name, variant.variant,
        )  # fmt: skip
    if cell.backend == "edgetpu" and not cell.file_info.is_edgetpu_compiled:
        file_cache = ArtifactCache(cell.cache_root, "file-" + file_sha256(cell.model_file)[:16])
        with file_cache.lock():
            variant = compile_variant(file_cache, variant)
    return variant


def benchmark(cell: EdgeCell) -> tuple[Any, dict[str, Any], float]:
    """Play the episodes with the cell's model in a fresh process: (spec, result, seconds)."""
    from rlperf.edge.benchmark import BenchmarkSpec, run_isolated

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
    }
    if cell.backend == "rllib":
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
    from rlperf.tflite.cache import settings_hash

    name = f"{kind}-returns-{settings_hash(settings)}.json"
    if cell.cache.has(name):
        return [float(r) for r in cell.cache.read_json(name)["returns"]]
    returns = [float(r) for r in play()]
    cell.cache.write_json(name, {"returns": returns, **settings})
    return returns


def reference_returns_of(cell: EdgeCell, spec: Any, returns: list[float]) -> list[float] | None:
    """Returns of the torch policy on the same seeded episodes (cached per settings)."""
    from rlperf.edge.benchmark import reference_returns

    if cell.trained is None or cell.cache is None:
        return None
    trained = cell.trained
    settings = {"env": cell.env, "episodes": spec.episodes, "steps": spec.steps, "seed": spec.seed}
    if cell.backend == "rllib":
        return _cached_returns(cell, "reference", settings, lambda: returns)

    def play() -> list[float]:
        log.info("playing the torch policy on the same episodes for return parity")
        return reference_returns(
            trained.policy_path, cell.env, spec.episodes, spec.steps, spec.seed, spec.threads
        )

    return _cached_returns(cell, "reference", settings, play)


def random_returns_of(cell: EdgeCell, spec: Any) -> list[float]:
    """Returns of a random policy on the same seeded episodes (cached per settings)."""
    from rlperf.edge.benchmark import random_returns

    settings = {"env": cell.env, "episodes": spec.episodes, "steps": spec.steps, "seed": spec.seed}
    return _cached_returns(
        cell,
        "random",
        settings,
        lambda: random_returns(cell.env, cell.num_actions, spec.episodes, spec.steps, spec.seed),
    )


def check_fidelity(
    cell: EdgeCell, spec: Any, result: dict[str, Any], ref_returns: list[float] | None
) -> dict[str, Any] | None:
    """Logit fidelity on the fidelity set, return parity against the torch policy, and how
    informative that reference is (``verdict``: passed, flagged or vacuous)."""
    from rlperf.edge.fidelity import (
        flag_return_loss,
        logit_fidelity,
        reference_informativeness,
        return_parity,
        verdict,
    )

    if cell.backend == "rllib" or cell.fidelity is None or "fidelity_logits" not in result:
        return None
    threshold = float(cell.cfg.edge.fidelity_threshold)
    ref_logits = cell.fidelity.extra["logits"]
    fid = logit_fidelity(result["fidelity_logits"], ref_logits, threshold)
    rows = result["episode_rows"]
    returns = [float(r["return"]) for r in rows]
    truncated = [bool(r.get("truncated")) for r in rows]
    fid.update(return_parity(returns, ref_returns or [], truncated))
    flag_return_loss(fid)
    fid["reference"] = reference_informativeness(
        ref_logits, ref_returns or [], random_returns_of(cell, spec)
    )
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
    return "policy" if cell.backend == "rllib" else str(cell.cfg.edge.heads)


def summarise(
    cell: EdgeCell, result: dict[str, Any], bench_s: float, checks: dict[str, Any]
) -> dict[str, Any]:
    """The edge cell's ``summary.json`` entries (``checks``: fidelity, reference returns)."""
    from rlperf.tflite.tflite_model import gzip_size, read_tflite, weight_sparsity

    threads, variant = int(cell.cfg.edge.threads), cell.variant
    copied = copy_artifacts(cell)
    info = read_tflite(cell.benchmarked_file) if cell.backend != "rllib" else None
    model = {"model": cell.model} if cell.model is not None else {}
    return {
        "stage": "edge",
        "source": cell.source,
        **model,
        "backend": cell.backend,
        "env": cell.env,
        "variant": variant.variant if variant is not None else "torch",
        "heads": _heads(cell),
        "threads": threads,
        "seed": int(cell.cfg.seed),
        "latency": result["latency"],
        "excluded": result.get("excluded", {}),
        "warmup_steps": int(cell.cfg.edge.warmup_steps),
        "steps": result["steps"],
        "episodes": result["episodes"],
        "timer_overhead_ns": result["timer_overhead_ns"],
        **checks,
        "model_file": copied.name,
        "model_size_bytes": cell.benchmarked_file.stat().st_size,
        "model_gzip_bytes": gzip_size(cell.benchmarked_file),
        "weights": weight_sparsity(cell.benchmarked_file) if info is not None else None,
        "model_info": info.to_dict() if info is not None else None,
        "input": (
            {**info.inputs[0].to_dict(), **_distortion(cell, info.inputs[0])}
            if info is not None
            else _torch_input(cell)
        ),
        "delegate": result["delegate"]
        or {"delegates": ["torch"], "status": "n/a", "threads": threads},
        "memory": result["memory"],
        "export": variant.export if variant is not None else None,
        "calibration": variant.calibration if variant is not None else None,
        "edgetpu": (
            {
                **cell.edgetpu,
                "source": None if cell.model_file else str(cell.cfg.edge.edgetpu_source),
                "compiler": variant.compiler if variant is not None else None,
            }
            if cell.edgetpu is not None
            else None
        ),
        "cache": {
            "dir": str(cell.cache.dir) if cell.cache is not None else None,
            "built": variant.built if variant is not None else [],
            "reused": variant.reused if variant is not None else [],
        },
        "timings_s": {**(variant.timings_s if variant is not None else {}), "benchmark_s": bench_s},
    }


def _distortion(cell: EdgeCell, tensor: Any) -> dict[str, Any]:
    """How feeding raw frame bytes distorts the input (uint8 frames only: other observations
    are always quantized with the tensor's scale)."""
    from gymnasium import spaces

    from rlperf.tflite.tflite_model import input_distortion

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


def run_edge(cfg: DictConfig, out_dir: Path, ctx: Any) -> dict[str, Any]:
    """Build (or reuse), benchmark and check one variant of a trained policy.

    Writes ``steps.csv``, ``episodes.csv`` and a copy of the benchmarked model
    file into ``out_dir``; returns the summary dict (see ``docs/results.md`` and
    ``docs/edge.md``). ``ctx`` is the job context (:class:`rlperf.job.JobContext`).

    Raises:
        SkipCell: ``backend=edgetpu`` without runtime, device or compiler.
        EdgeError: bad inputs, an export that fails verification, an Edge-TPU
            file given to a CPU backend.
        rlperf.errors.CheckpointError: a run or checkpoint that cannot be used.
    """
    out_dir.mkdir(parents=True, exist_ok=True)
    cell = resolve_cell(cfg, out_dir)
    if cell.backend == "edgetpu":
        cell.edgetpu = _edgetpu_preflight(cfg)
    prepare_variant(cell)
    spec, result, bench_s = benchmark(cell)
    returns = [float(r["return"]) for r in result["episode_rows"]]
    ref_returns = reference_returns_of(cell, spec, returns)
    checks = {
        "fidelity": check_fidelity(cell, spec, result, ref_returns),
        "reference_returns": ref_returns,
    }
    return summarise(cell, result, bench_s, checks)


__all__ = ["SkipCell", "run_edge"]
