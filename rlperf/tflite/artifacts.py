"""Build a policy's TFLite variants once, into its artifact cache, and find them there.

The fidelity set (real observations the variants are checked on), the
calibration set (disjoint from it), the verified Keras export and every CPU
variant of :data:`CACHED_VARIANTS` live in the policy's
:class:`~rlperf.tflite.cache.ArtifactCache` under names that encode every
setting that changes their bytes (``docs/edge.md#cache``). The edge and serve
stages call :func:`fidelity_set` then :func:`build_variant` while holding the
cache lock: what the cache has is reused, what is missing is built once.

Config keys (``edge.*``): ``fidelity_observations``, ``fidelity_seed``,
``fidelity_policy``, ``calibration_size``, ``calibration_seed``,
``calibration_policy``, ``heads``, ``int8_io``, ``export_tolerance``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from omegaconf import DictConfig

log = logging.getLogger("rlperf.tflite")

#: Every 4th frame of play goes into the fidelity set (decorrelated observations).
FIDELITY_STRIDE = 4


@dataclass
class Variant:
    """The model file a cell runs, and how it was obtained (built or reused)."""

    path: Path
    variant: str  # fp32 | fp16 | dynamic | int8 | edgetpu | torch ...
    export: dict[str, Any] | None = None
    calibration: dict[str, Any] | None = None
    compiler: dict[str, Any] | None = None
    compiler_log: Path | None = None
    built: list[str] = field(default_factory=list)
    reused: list[str] = field(default_factory=list)
    timings_s: dict[str, float] = field(default_factory=dict)


def fidelity_set(cache: Any, cfg: DictConfig, env_cfg: dict[str, Any], net: Any) -> Any:
    """The fidelity set of this policy (built once, cached) with the torch logits in ``extra``."""
    from rlperf.tflite.export import torch_outputs

    def add_outputs(obs_set: Any) -> None:
        logits, values = torch_outputs(net, obs_set.observations, "both")
        obs_set.extra = {"logits": logits, "values": values}

    settings: dict[str, Any] = {
        "env": env_cfg,
        "count": int(cfg.edge.fidelity_observations),
        "seed": int(cfg.edge.fidelity_seed),
        "policy": str(cfg.edge.fidelity_policy),
        "stride": FIDELITY_STRIDE,
    }
    return _observation_set(cache, "fidelity", settings, net, finish=add_outputs)


def calibration_set(
    cache: Any, cfg: DictConfig, env_cfg: dict[str, Any], net: Any, fidelity: Any
) -> tuple[Any, str, bool]:
    """The calibration set, built once and cached: no frame of the fidelity set in it,
    except for Discrete states (a few states in all: both sets hold every one of them)."""
    from rlperf.tflite.calibration import DEFAULT_STRIDE

    discrete_states = fidelity.observations.ndim == 1
    settings: dict[str, Any] = {
        "env": env_cfg,
        "count": int(cfg.edge.calibration_size),
        "seed": int(cfg.edge.calibration_seed),
        "policy": str(cfg.edge.calibration_policy),
        "stride": DEFAULT_STRIDE,
        "excluding": None if discrete_states else fidelity.digest(),
    }
    exclude = None if discrete_states else fidelity.observations
    return _observation_set(cache, "calibration", settings, net, exclude=exclude)


def _observation_set(
    cache: Any,
    kind: str,
    settings: dict[str, Any],
    net: Any,
    *,
    exclude: np.ndarray | None = None,
    finish: Callable[[Any], None] | None = None,
) -> tuple[Any, str, bool]:
    """The ``kind`` set named by the hash of ``settings``: loaded, or collected and cached."""
    from rlperf.tflite.cache import settings_hash
    from rlperf.tflite.calibration import ObservationSet, build_observation_set

    name = f"{kind}-{settings_hash(settings)}.npz"
    if cache.has(name):
        return ObservationSet.load(cache.path(name)), name, False
    log.info("collecting the %s set (%d observations)", kind, settings["count"])
    obs_set = build_observation_set(
        settings["env"],
        settings["count"],
        settings["seed"],
        kind,
        settings["policy"],
        net.greedy_action,
        stride=settings["stride"],
        exclude=exclude,
    )
    if finish is not None:
        finish(obs_set)
    obs_set.save(cache.path(name))
    cache.record_artifact(name, {"kind": f"{kind} set", **obs_set.metadata()})
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
    cache: Any,
    cfg: DictConfig,
    backend: str,
    net: Any,
    env_cfg: dict[str, Any],
    fidelity: Any,
    obs_space: Any = None,
) -> Variant:
    """The ``.tflite`` that ``backend`` runs, from the cache or built now. Holds the cache lock.

    A missing variant triggers one Keras export (verified against torch on the
    fidelity set) and the conversion of every variant in :data:`CACHED_VARIANTS`
    that is missing, so the other cells of a sweep find theirs ready.
    """
    from rlperf.tflite.calibration import observation_range
    from rlperf.tflite.compress import RECIPES
    from rlperf.tflite.convert import BACKEND_VARIANTS, convert_keras
    from rlperf.tflite.export import export_policy

    heads, int8_io = str(cfg.edge.heads), str(cfg.edge.int8_io)
    timings: dict[str, float] = {}
    built: list[str] = []
    reused: list[str] = []
    t0 = time.perf_counter()
    calib, calib_name, new = calibration_set(cache, cfg, env_cfg, net, fidelity)
    (built if new else reused).append(calib_name)
    timings["calibration_s"] = time.perf_counter() - t0
    calib_meta = {**calib.metadata(), "file": str(cache.path(calib_name))}
    input_range = observation_range(obs_space)
    if input_range is not None:
        calib_meta["input_range"] = [np.asarray(v).tolist() for v in input_range]
    calib_key = calib_name.removeprefix("calibration-").removesuffix(".npz")
    if backend in RECIPES:  # compressed: fine-tuned from the policy, one file per backend
        args = (calib, calib_meta, input_range, calib_key, timings, built, reused)
        return compressed_variant(cache, cfg, backend, net, *args)
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
            data = convert_keras(
                model, v, calib.observations if v == "int8" else None, int8_io, input_range
            )
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


def compressed_variant(
    cache: Any,
    cfg: DictConfig,
    backend: str,
    net: Any,
    calib: Any,
    calib_meta: dict[str, Any],
    input_range: Any,
    calib_key: str,
    timings: dict[str, float],
    built: list[str],
    reused: list[str],
) -> Variant:
    """A compression backend's ``.tflite`` (:mod:`rlperf.tflite.compress`), from the cache or
    fine-tuned by distillation on the calibration set now. Holds the cache lock."""
    from rlperf.tflite.cache import settings_hash
    from rlperf.tflite.compress import build_compressed, finetune_settings
    from rlperf.tflite.convert import convert_keras

    heads, int8_io = str(cfg.edge.heads), str(cfg.edge.int8_io)
    settings = finetune_settings(cfg)
    key = settings_hash({"finetune": settings, "calibration": calib_key, "int8_io": int8_io})
    name = f"{heads}-{backend.removeprefix('tflite_')}-{key}.tflite"
    info_name = name.removesuffix(".tflite") + ".json"
    if cache.has(name) and cache.has(info_name):
        reused.append(name)
    else:
        t0 = time.perf_counter()

        def convert(model: Any, variant: str) -> bytes:
            return convert_keras(model, variant, calib.observations, int8_io, input_range)

        data, info = build_compressed(backend, net, heads, calib, settings, convert)
        timings["compress_s"] = time.perf_counter() - t0
        cache.write_bytes(name, data)
        cache.write_json(info_name, info)
        cache.record_artifact(name, {"kind": f"tflite {backend}", "heads": heads, **_tf_version()})
        built.append(name)
    info = cache.read_json(info_name)
    return Variant(
        cache.path(name),
        backend.removeprefix("tflite_"),
        info.get("export"),
        {**calib_meta, "compression": info},
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
