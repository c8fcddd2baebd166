"""The edge stage as a Hydra job: ``rlperf stage=edge run=<training run> backend=<backend>``.

Config keys: ``run`` / ``checkpoint`` (the trained policy), ``backend.name``,
``seed`` (episode ``i`` is reset with ``seed + i``), ``env.*`` (only keys given
on the command line override the run's env), and ``edge.*``:
``model_path``, ``episodes``, ``steps``, ``warmup_steps``, ``threads``,
``heads``, ``calibration_size``, ``calibration_policy``, ``calibration_seed``,
``fidelity_observations``, ``fidelity_seed``, ``fidelity_threshold``,
``export_tolerance``, ``cache_dir``; read with defaults until the schema has
them: ``fidelity_policy`` (random), ``int8_io`` (uint8), ``xnnpack`` (true),
``isolate`` (true), ``edgetpu_library`` (libedgetpu.so.1), ``edgetpu_device``
(null).

Flow: resolve the policy and its run config -> (``edgetpu``: check runtime and
device first, skip the cell if absent) -> fidelity set -> build or reuse the
variant in the cache (export verified against torch, calibration, conversion,
compilation) -> benchmark in a fresh process -> fidelity and return parity ->
summary dict (the job wrapper writes it to ``summary.json``). See ``docs/edge.md``.
"""

from __future__ import annotations

import logging
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from omegaconf import DictConfig, OmegaConf

from rlperf.edge import EdgeError, SkipCell

log = logging.getLogger("rlperf.edge")

CPU_TFLITE_BACKENDS = ("tflite_fp32", "tflite_int8", "tflite_dynamic", "tflite_fp16")
FIDELITY_STRIDE = 4


@dataclass
class EdgeSource:
    """Where the policy comes from."""

    policy_path: Path | None = None  # rlperf_policy.pt
    run_dir: Path | None = None
    run_cfg: DictConfig | None = None
    model_file: Path | None = None  # model_path: an existing .tflite

    def to_dict(self) -> dict[str, Any]:
        return {
            "policy": str(self.policy_path) if self.policy_path else None,
            "run": str(self.run_dir) if self.run_dir else None,
            "model_path": str(self.model_file) if self.model_file else None,
        }


@dataclass
class Variant:
    """The model file a cell benchmarks, and how it was obtained."""

    path: Path
    variant: str  # fp32 | fp16 | dynamic | int8 | edgetpu | torch ...
    export: dict[str, Any] | None = None
    calibration: dict[str, Any] | None = None
    compiler: dict[str, Any] | None = None
    compiler_log: Path | None = None
    built: list[str] = field(default_factory=list)
    reused: list[str] = field(default_factory=list)
    timings_s: dict[str, float] = field(default_factory=dict)


# --------------------------------------------------------------------------
# Configuration helpers
# --------------------------------------------------------------------------


def explicit_overrides() -> set[str]:
    """Keys set on the command line of this job (empty outside a Hydra run)."""
    try:
        from hydra.core.hydra_config import HydraConfig

        if not HydraConfig.initialized():
            return set()
        task = HydraConfig.get().overrides.task
    except Exception:
        return set()
    return {str(o).split("=", 1)[0].lstrip("+~") for o in task}


def _load_run_cfg(run_dir: Path) -> DictConfig | None:
    path = run_dir / ".hydra" / "config.yaml"
    if not path.is_file():
        return None
    cfg = OmegaConf.load(path)
    assert isinstance(cfg, DictConfig)
    return cfg


def _run_model_name(run_cfg: DictConfig | None) -> str | None:
    return OmegaConf.select(run_cfg, "model.name") if run_cfg is not None else None


def resolve_source(cfg: DictConfig) -> EdgeSource:
    """The policy of ``run`` / ``checkpoint`` and the ``.tflite`` of ``model_path``."""
    from rlperf.models.vision_net import POLICY_FILE

    src = EdgeSource()
    model_file = cfg.model_path
    if model_file:
        src.model_file = Path(str(model_file))
        if not src.model_file.is_file():
            raise EdgeError(f"model_path={model_file}: no such file")
    if cfg.get("checkpoint"):
        ckpt = Path(str(cfg.checkpoint))
        src.policy_path = ckpt / POLICY_FILE if ckpt.is_dir() else ckpt
        for parent in (ckpt.parent, ckpt.parent.parent):
            if src.run_cfg is None and (run_cfg := _load_run_cfg(parent)) is not None:
                src.run_dir, src.run_cfg = parent, run_cfg
    if cfg.get("run"):
        from rlperf.rollout.loader import find_run_dir  # one rule for every downstream stage

        src.run_dir = find_run_dir(Path(str(cfg.run)), OmegaConf.select(cfg, "model.name"))
        src.run_cfg = _load_run_cfg(src.run_dir)
        if src.policy_path is None:
            src.policy_path = src.run_dir / "checkpoint" / POLICY_FILE
    if src.policy_path is not None and not src.policy_path.is_file():
        raise EdgeError(f"no trained policy at {src.policy_path} (expected {POLICY_FILE})")
    if src.policy_path is None and src.model_file is None:
        raise EdgeError("stage=edge needs run=, checkpoint= or model_path=")
    return src


def check_model_matches(cfg: DictConfig, src: EdgeSource, net_config: dict[str, Any]) -> None:
    """An explicit ``model=`` that differs from the run's model is an error (wrong run)."""
    run_model = _run_model_name(src.run_cfg)
    wanted = OmegaConf.select(cfg, "model.name")
    if "model" in explicit_overrides() and run_model is not None and run_model != wanted:
        raise EdgeError(
            f"model={wanted} was requested but run={src.run_dir} trained model={run_model}; "
            f"give the run of {wanted} (or a sweep folder containing it)"
        )
    if run_model is None and "model" in explicit_overrides():
        filters = OmegaConf.to_container(cfg.model.conv_filters)
        if filters != net_config["conv_filters"]:
            raise EdgeError(
                f"model={wanted} has conv_filters={filters}, the policy "
                f"{src.policy_path} has {net_config['conv_filters']}"
            )


def probe_check(policy_path: Path, net: Any, tolerance: float) -> dict[str, Any] | None:
    """Compare the policy with the training job's ``probe.npz`` (logits saved at checkpoint time).

    Raises:
        EdgeError: the reloaded policy's logits differ from the saved ones.
    """
    import numpy as np

    from rlperf.edge.export import compare_logits, torch_outputs

    probe = policy_path.parent / "probe.npz"
    if not probe.is_file():
        return None
    with np.load(probe) as data:
        obs, saved = data["obs"], data["logits"]
    check = compare_logits(torch_outputs(net, obs)[0], saved, tolerance)
    if not check.passed:
        raise EdgeError(
            f"{policy_path} does not reproduce the logits saved in {probe} at training time "
            f"(max abs error {check.max_abs_logit_err:.3g}): the policy file and the "
            f"checkpoint disagree"
        )
    return {"file": str(probe), **check.to_dict()}


def edge_env_config(
    cfg: DictConfig, run_cfg: DictConfig | None, obs_shape: tuple[int, ...] | None
) -> dict[str, Any]:
    """The env to play: the run's ``env`` (as trained), with command-line ``env.*`` on top.

    ``dim`` and ``framestack`` always follow the network's input.
    """
    from rlperf.envs.atari import DEFAULT_ENV_CONFIG

    source = run_cfg if run_cfg is not None and "env" in run_cfg else cfg
    env: dict[str, Any] = dict(OmegaConf.to_container(source.env, resolve=True))  # type: ignore[arg-type]
    if source is not cfg:
        given: dict[str, Any] = dict(OmegaConf.to_container(cfg.env, resolve=True))  # type: ignore[arg-type]
        for key in explicit_overrides():
            if key.startswith("env.") and key[4:] in given:
                env[key[4:]] = given[key[4:]]
    out = {k: env[k] for k in DEFAULT_ENV_CONFIG if k in env and k != "seed"}
    if obs_shape is not None:
        out["dim"], out["framestack"] = int(obs_shape[0]), int(obs_shape[2])
    return out


# --------------------------------------------------------------------------
# Artifacts
# --------------------------------------------------------------------------


def fidelity_set(cache: Any, cfg: DictConfig, env_cfg: dict[str, Any], net: Any) -> Any:
    """The fidelity set of this policy (built once, cached) with the torch logits in ``extra``."""
    from rlperf.edge.cache import settings_hash
    from rlperf.edge.calibration import ObservationSet, build_observation_set
    from rlperf.edge.export import torch_outputs

    settings: dict[str, Any] = {
        "env": env_cfg,
        "count": int(cfg.edge.fidelity_observations),
        "seed": int(cfg.edge.fidelity_seed),
        "policy": str(cfg.edge.fidelity_policy),
        "stride": FIDELITY_STRIDE,
    }
    name = f"fidelity-{settings_hash(settings)}.npz"
    if cache.has(name):
        return ObservationSet.load(cache.path(name)), name, False
    log.info("collecting the fidelity set (%d observations)", settings["count"])
    obs_set = build_observation_set(
        env_cfg,
        settings["count"],
        settings["seed"],
        "fidelity",
        settings["policy"],
        net.greedy_action,
        stride=FIDELITY_STRIDE,
    )
    logits, values = torch_outputs(net, obs_set.observations, "both")
    obs_set.extra = {"logits": logits, "values": values}
    obs_set.save(cache.path(name))
    cache.record_artifact(name, {"kind": "fidelity set", **obs_set.metadata()})
    return obs_set, name, True


def calibration_set(
    cache: Any, cfg: DictConfig, env_cfg: dict[str, Any], net: Any, fidelity: Any
) -> tuple[Any, str, bool]:
    """The calibration set (no frame of the fidelity set in it), built once and cached."""
    from rlperf.edge.cache import settings_hash
    from rlperf.edge.calibration import DEFAULT_STRIDE, ObservationSet, build_observation_set

    settings: dict[str, Any] = {
        "env": env_cfg,
        "count": int(cfg.edge.calibration_size),
        "seed": int(cfg.edge.calibration_seed),
        "policy": str(cfg.edge.calibration_policy),
        "stride": DEFAULT_STRIDE,
        "excluding": fidelity.digest(),
    }
    name = f"calibration-{settings_hash(settings)}.npz"
    if cache.has(name):
        return ObservationSet.load(cache.path(name)), name, False
    log.info("collecting the calibration set (%d observations)", settings["count"])
    obs_set = build_observation_set(
        env_cfg,
        settings["count"],
        settings["seed"],
        "calibration",
        settings["policy"],
        net.greedy_action,
        exclude=fidelity.observations,
    )
    obs_set.save(cache.path(name))
    cache.record_artifact(name, {"kind": "calibration set", **obs_set.metadata()})
    return obs_set, name, True


#: The CPU variants built together the first time a policy is exported (one
#: TensorFlow import, one Keras export, one verification for all the cells).
CACHED_VARIANTS = ("fp32", "fp16", "dynamic", "int8")


def variant_file_name(heads: str, variant: str, int8_io: str, calibration_key: str) -> str:
    """Cache name of a TFLite variant (int8 names carry the I/O type and calibration set)."""
    if variant == "int8":
        return f"{heads}-int8-{int8_io}-{calibration_key}.tflite"
    return f"{heads}-{variant}.tflite"


def build_variant(
    cache: Any, cfg: DictConfig, backend: str, net: Any, env_cfg: dict[str, Any], fidelity: Any
) -> Variant:
    """The ``.tflite`` that ``backend`` runs, from the cache or built now. Holds the cache lock.

    A missing variant triggers one Keras export (verified against torch on the
    fidelity set) and the conversion of every variant in :data:`CACHED_VARIANTS`
    that is missing, so the other cells of a sweep find theirs ready.
    """
    from rlperf.edge.convert import BACKEND_VARIANTS, convert_keras
    from rlperf.edge.export import export_policy

    heads = str(cfg.edge.heads)
    int8_io = str(cfg.edge.int8_io)
    timings: dict[str, float] = {}
    built: list[str] = []
    reused: list[str] = []
    t0 = time.perf_counter()
    calib, calib_name, new = calibration_set(cache, cfg, env_cfg, net, fidelity)
    (built if new else reused).append(calib_name)
    timings["calibration_s"] = time.perf_counter() - t0
    calib_meta = {**calib.metadata(), "file": str(cache.path(calib_name))}
    calib_key = calib_name.removeprefix("calibration-").removesuffix(".npz")
    names = {v: variant_file_name(heads, v, int8_io, calib_key) for v in CACHED_VARIANTS}
    export_name = f"export-{heads}.json"
    missing = [v for v, n in names.items() if not cache.has(n)]
    if missing or not cache.has(export_name):
        t0 = time.perf_counter()
        log.info("exporting the policy to Keras (heads=%s) and verifying it", heads)
        model, check = export_policy(
            net, fidelity.observations, heads, float(cfg.edge.export_tolerance)
        )
        timings["export_s"] = time.perf_counter() - t0
        cache.write_json(export_name, check.to_dict())
        built.append(export_name)
        for v in missing:
            t0 = time.perf_counter()
            log.info("converting to TFLite %s", v)
            data = convert_keras(model, v, calib.observations if v == "int8" else None, int8_io)
            cache.write_bytes(names[v], data)
            timings[f"convert_{v}_s"] = time.perf_counter() - t0
            cache.record_artifact(
                names[v],
                {
                    "kind": f"tflite {v}",
                    "heads": heads,
                    "int8_io": int8_io if v == "int8" else None,
                    "calibration": calib_meta["file"] if v == "int8" else None,
                    **_tf_version(),
                },
            )
            built.append(names[v])
    else:
        reused.append(export_name)
    reused.extend(n for v, n in names.items() if v not in missing)
    variant = BACKEND_VARIANTS[backend]
    return Variant(
        cache.path(names[variant]),
        variant,
        cache.read_json(export_name),
        calib_meta if variant == "int8" else None,
        built=built,
        reused=reused,
        timings_s=timings,
    )


def _tf_version() -> dict[str, str]:
    from importlib import metadata

    try:
        return {"tensorflow": metadata.version("tensorflow")}
    except metadata.PackageNotFoundError:
        return {}


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
# The job
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


def run_edge(cfg: DictConfig, out_dir: Path) -> dict[str, Any]:
    """Build (or reuse), benchmark and check one variant of a trained policy.

    Writes ``steps.csv``, ``episodes.csv`` and a copy of the benchmarked model
    file into ``out_dir``; returns the summary dict (see ``docs/results.md`` and
    ``docs/edge.md``).

    Raises:
        SkipCell: ``backend=edgetpu`` without runtime, device or compiler.
        EdgeError: bad inputs, an export that fails verification, an Edge-TPU
            file given to a CPU backend.
    """
    from rlperf.edge.benchmark import BenchmarkSpec, reference_returns, run_isolated
    from rlperf.edge.cache import ArtifactCache, resolve_cache_root, settings_hash
    from rlperf.edge.convert import BACKEND_VARIANTS
    from rlperf.edge.fidelity import logit_fidelity, return_parity
    from rlperf.edge.tflite_model import ensure_cpu_runnable, input_distortion, read_tflite

    out_dir.mkdir(parents=True, exist_ok=True)
    backend = str(cfg.backend.name)
    src = resolve_source(cfg)
    root = resolve_cache_root(cfg.edge.cache_dir)
    threads = int(cfg.edge.threads)
    summary: dict[str, Any] = {"stage": "edge", "source": src.to_dict()}

    net = None
    cache = None
    if src.policy_path is not None:
        from rlperf.models.vision_net import count_trainable_params, load_policy

        net = load_policy(src.policy_path)
        check_model_matches(cfg, src, net.model_config())
        probe = probe_check(src.policy_path, net, float(cfg.edge.export_tolerance))
        cache = ArtifactCache.for_policy(root, src.policy_path)
        model_name = _run_model_name(src.run_cfg)
        summary["model"] = {
            "name": model_name,
            **net.model_config(),
            "params": count_trainable_params(net),
        }
        summary["source"].update(model=model_name, policy_sha256_16=cache.key, probe=probe)
        if src.run_cfg is not None:
            from rlperf.results.job import write_effective_config

            run = cast(dict[str, Any], OmegaConf.to_container(src.run_cfg, resolve=True))
            effective = cast(
                DictConfig, OmegaConf.create(OmegaConf.to_container(cfg, resolve=True))
            )
            effective.model, effective.env = run["model"], run["env"]
            write_effective_config(out_dir, effective)

    file_info = read_tflite(src.model_file) if src.model_file is not None else None
    if file_info is not None:
        backend = _backend_for_file(backend, file_info)
        if backend != "edgetpu":
            ensure_cpu_runnable(file_info, backend)
        in_shape = file_info.inputs[0].shape[1:]
        if net is not None and tuple(net.obs_shape) != tuple(in_shape):
            raise EdgeError(
                f"model_path input {list(in_shape)} does not match the policy's "
                f"observation shape {list(net.obs_shape)}"
            )
        obs_shape: tuple[int, ...] = tuple(in_shape)
    else:
        assert net is not None
        obs_shape = tuple(net.obs_shape)
    summary["backend"] = backend
    env_cfg = edge_env_config(cfg, src.run_cfg, obs_shape)
    summary["env"] = env_cfg

    edgetpu: dict[str, Any] | None = None
    if backend == "edgetpu":
        edgetpu = _edgetpu_preflight(cfg)

    from rlperf.envs.atari import env_spaces

    num_actions = int(env_spaces(env_cfg)[1].n)

    fidelity = None
    fidelity_name = None
    variant: Variant | None = None
    if net is not None and cache is not None and backend != "rllib":
        with cache.lock():
            fidelity, fidelity_name, fidelity_new = fidelity_set(cache, cfg, env_cfg, net)
            if src.model_file is None:
                int8_backend = "tflite_int8" if backend == "edgetpu" else backend
                variant = build_variant(cache, cfg, int8_backend, net, env_cfg, fidelity)
                (variant.built if fidelity_new else variant.reused).insert(0, fidelity_name)
                if backend == "edgetpu":
                    variant = compile_variant(cache, variant)
    if src.model_file is not None:
        assert file_info is not None
        variant = Variant(src.model_file, file_info.variant)
        expected = BACKEND_VARIANTS.get(backend)
        if expected is not None and expected != file_info.variant and backend != "edgetpu":
            log.warning(
                "backend=%s but %s is a %s model; it is benchmarked as it is",
                backend, src.model_file.name, file_info.variant,
            )  # fmt: skip
        if backend == "edgetpu" and not file_info.is_edgetpu_compiled:
            from rlperf.edge.cache import file_sha256

            file_cache = ArtifactCache(root, "file-" + file_sha256(src.model_file)[:16])
            with file_cache.lock():
                variant = compile_variant(file_cache, variant)

    # ---- benchmark ---------------------------------------------------------
    isolate = bool(cfg.edge.isolate)
    common: dict[str, Any] = {
        "env_config": env_cfg,
        "num_actions": num_actions,
        "out_dir": str(out_dir),
        "episodes": int(cfg.edge.episodes),
        "steps": int(cfg.edge.steps) if cfg.edge.steps is not None else None,
        "warmup_steps": int(cfg.edge.warmup_steps),
        "seed": int(cfg.seed),
        "threads": threads,
        "xnnpack": bool(cfg.edge.xnnpack),
    }
    fidelity_path = str(cache.path(fidelity_name)) if cache and fidelity_name else None
    if backend == "rllib":
        assert src.policy_path is not None
        spec = BenchmarkSpec("torch", str(src.policy_path), **common)
        model_file = src.policy_path
    else:
        assert variant is not None
        spec = BenchmarkSpec(
            "tflite",
            str(variant.path),
            fidelity_path=fidelity_path,
            **common,
            edgetpu_library=edgetpu["library"] if edgetpu else None,
            edgetpu_device=edgetpu["device"] if edgetpu else None,
        )
        model_file = variant.path
    log.info("benchmarking %s (%s)", backend, model_file.name)
    t0 = time.perf_counter()
    result = run_isolated(spec, isolate)
    bench_s = time.perf_counter() - t0

    delegate = result["delegate"] or {}
    if delegate.get("status") in ("partial", "none") or delegate.get("edgetpu_status") not in (
        None,
        "full",
    ):
        log.warning(
            "%s: delegate status %s: %s",
            backend,
            delegate.get("edgetpu_status") or delegate.get("status"),
            delegate.get("note"),
        )

    # ---- fidelity and return parity ----------------------------------------
    returns = [float(r["return"]) for r in result["episode_rows"]]
    ref_returns: list[float] | None = None
    if src.policy_path is not None and cache is not None:
        ref_settings = {
            "env": env_cfg,
            "episodes": spec.episodes,
            "steps": spec.steps,
            "seed": spec.seed,
        }
        ref_name = f"reference-returns-{settings_hash(ref_settings)}.json"
        if backend == "rllib":
            ref_returns = returns
            if not cache.has(ref_name):
                cache.write_json(ref_name, {"returns": returns, **ref_settings})
        elif cache.has(ref_name):
            ref_returns = [float(r) for r in cache.read_json(ref_name)["returns"]]
        else:
            log.info("playing the torch policy on the same episodes for return parity")
            ref_returns = reference_returns(
                src.policy_path, env_cfg, spec.episodes, spec.steps, spec.seed, threads
            )
            cache.write_json(ref_name, {"returns": ref_returns, **ref_settings})
    fid: dict[str, Any] | None = None
    threshold = float(cfg.edge.fidelity_threshold)
    if backend != "rllib" and fidelity is not None and "fidelity_logits" in result:
        fid = logit_fidelity(result["fidelity_logits"], fidelity.extra["logits"], threshold)
        fid.update(return_parity(returns, ref_returns or []))
        fid["fidelity_set"] = fidelity.metadata()
        if fid["flagged"]:
            log.warning("%s is FLAGGED: %s", backend, fid["flag_reason"])

    # ---- artifacts in the job folder ---------------------------------------
    copied = out_dir / model_file.name
    if model_file.resolve() != copied.resolve():
        shutil.copy2(model_file, copied)
    if variant is not None and variant.compiler_log is not None:
        shutil.copy2(variant.compiler_log, out_dir / "edgetpu_compiler.txt")

    info = read_tflite(model_file) if backend != "rllib" else None
    summary.update(
        {
            "variant": variant.variant if variant is not None else "torch",
            # The rllib cell computes the policy branch only (VisionNet.logits).
            "heads": (
                None
                if src.model_file is not None
                else "policy"
                if backend == "rllib"
                else str(cfg.edge.heads)
            ),
            "threads": threads,
            "seed": int(cfg.seed),
            "latency": result["latency"],
            "warmup_steps": spec.warmup_steps,
            "steps": result["steps"],
            "episodes": result["episodes"],
            "timer_overhead_ns": result["timer_overhead_ns"],
            "fidelity": fid,
            "reference_returns": ref_returns,
            "model_file": copied.name,
            "model_size_bytes": model_file.stat().st_size,
            "model_info": info.to_dict() if info is not None else None,
            "input": (
                {**info.inputs[0].to_dict(), **input_distortion(info.inputs[0])}
                if info is not None
                else {"dtype": "uint8", "note": "torch scales by 1/255 inside"}
            ),
            "delegate": result["delegate"]
            or {"delegates": ["torch"], "status": "n/a", "threads": threads},
            "memory": result["memory"],
            "export": variant.export if variant is not None else None,
            "calibration": variant.calibration if variant is not None else None,
            "edgetpu": (
                {**edgetpu, "compiler": variant.compiler if variant is not None else None}
                if edgetpu is not None
                else None
            ),
            "cache": {
                "dir": str(cache.dir) if cache is not None else None,
                "built": variant.built if variant is not None else [],
                "reused": variant.reused if variant is not None else [],
            },
            "timings_s": {
                **(variant.timings_s if variant is not None else {}),
                "benchmark_s": bench_s,
            },
        }
    )
    return summary


__all__ = ["SkipCell", "run_edge"]
