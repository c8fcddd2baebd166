"""Build a policy's TFLite variants once, into its artifact cache, and find them there.

The fidelity set (real observations the variants are checked on), the
calibration set (disjoint from it), the verified Keras export and every CPU
variant of :data:`CACHED_VARIANTS` live in the policy's
:class:`~rlperf.tflite.cache.ArtifactCache` under names that encode every
setting that changes their bytes (``docs/edge.md#cache``). The edge and serve
stages call :func:`fidelity_set` then :func:`build_variant` while holding the
cache lock: what the cache has is reused, what is missing is built once.

:func:`build_variant` is the one place a variant's build reads as its steps
(calibration set, then a compressed backend's fine-tune or the verified export,
conversion, cache); each step is a function of the module that owns it
(:mod:`~rlperf.tflite.calibration`, :mod:`~rlperf.tflite.compress`,
:mod:`~rlperf.tflite.export`, :mod:`~rlperf.tflite.convert`,
:mod:`~rlperf.tflite.cache`), and the backend's spec
(:mod:`~rlperf.specs.backends`) says which.

Config keys (``edge.*``): ``fidelity_observations``, ``fidelity_seed``,
``fidelity_policy``, ``calibration_size``, ``calibration_seed``,
``calibration_policy``, ``heads``, ``int8_io``, ``input_scaling``, ``export_tolerance``, and the
compressed backends' ``finetune_steps``, ``finetune_lr``, ``finetune_batch``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np
from omegaconf import DictConfig

from rlperf.specs.backends import BACKENDS
from rlperf.tflite.cache import ArtifactCache, settings_hash
from rlperf.tflite.calibration import (
    DEFAULT_STRIDE,
    ObservationSet,
    build_observation_set,
    observation_range,
)
from rlperf.tflite.compress import compress_policy
from rlperf.tflite.convert import convert_keras, int8_io_for, value_range
from rlperf.tflite.export import build_keras_policy, export_policy, torch_outputs
from rlperf.tflite.finetune import finetune_settings
from rlperf.tflite.tflite_model import InputNormalization, with_input_normalization

log = logging.getLogger("rlperf.tflite")

#: Every 4th frame of play goes into the fidelity set (decorrelated observations).
FIDELITY_STRIDE = 4


@dataclass
class VariantBuild:
    """The model file a cell runs and the record of how it was obtained (built or reused):
    what :func:`build_variant` returns; the edge stage adds the Edge TPU compilation."""

    path: Path
    variant: str  # fp32 | fp16 | dynamic | int8 | qat | prune50 ... | edgetpu | torch
    export: dict[str, Any] | None = None  # the Keras-vs-torch verification
    calibration: dict[str, Any] | None = None  # the calibration set the file depends on
    compression: dict[str, Any] | None = None  # recipe, fine-tune settings, every fit
    compiler: dict[str, Any] | None = None
    compiler_log: Path | None = None
    built: list[str] = field(default_factory=list)  # cache names made by this build
    reused: list[str] = field(default_factory=list)  # cache names found there
    timings_s: dict[str, float] = field(default_factory=dict)

    @property
    def calibration_entry(self) -> dict[str, Any] | None:
        """``summary.json``'s ``calibration``: the set's record, with a compressed file's
        build record under ``compression``."""
        if self.compression is None:
            return self.calibration
        return {**(self.calibration or {}), "compression": self.compression}


def fidelity_set(cache: Any, cfg: DictConfig, env_cfg: dict[str, Any], net: Any) -> Any:
    """The fidelity set of this policy (built once, cached) with the torch logits (a Box
    policy's reference actions) and values in ``extra``."""

    def add_outputs(obs_set: Any) -> None:
        # "logits": what the policy head outputs (a Box policy's actions); no values of
        # an actor saved without a value network (SAC's)
        heads = "both" if getattr(net, "has_value", True) else "policy"
        logits, values = torch_outputs(net, obs_set.observations, heads)
        obs_set.extra = (
            {"logits": logits} if values is None else {"logits": logits, "values": values}
        )

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


def variant_file_name(
    heads: str, variant: str, int8_io: str, calibration_key: str, per_feature: bool = False
) -> str:
    """Cache name of a TFLite variant (int8 names carry the I/O type, the calibration set and
    ``-perfeature`` for a per-feature normalized input)."""
    if variant == "int8":
        scaled = "-perfeature" if per_feature else ""
        return f"{heads}-int8-{int8_io}-{calibration_key}{scaled}.tflite"
    return f"{heads}-{variant}.tflite"


#: ``edge.input_scaling``: how a full-integer model of Box observations quantizes its input.
INPUT_SCALINGS = ("per_feature", "per_tensor")
#: Per-feature scaling: how many times its calibrated half-width a feature without finite
#: bounds may reach before the int8 input clips it (docs/edge.md#per-feature-input-scaling).
INPUT_HEADROOM = 3.0


def input_normalization(
    setting: str,
    net: Any,
    calibration: np.ndarray,
    input_range: tuple[np.ndarray, np.ndarray] | None,
) -> InputNormalization | None:
    """The per-feature normalization of an int8 model of ``net`` (``edge.input_scaling``
    ``per_feature``), over the range its calibration covers
    (:func:`~rlperf.tflite.convert.value_range`); None for ``per_tensor``, and for what it
    does not apply to: uint8 frames (exact already), Discrete states (one number)."""
    if setting not in INPUT_SCALINGS:
        raise ValueError(f"edge.input_scaling={setting!r} must be one of {INPUT_SCALINGS}")
    box = getattr(net, "kind", "vision") == "mlp" and net.obs_spec["type"] != "discrete"
    if setting != "per_feature" or not box or np.asarray(calibration).dtype == np.uint8:
        return None
    low, high = value_range(calibration, input_range)
    bounded = np.zeros(low.shape, bool)
    if input_range is not None:
        lo = np.broadcast_to(np.asarray(input_range[0], np.float32), low.shape)
        hi = np.broadcast_to(np.asarray(input_range[1], np.float32), high.shape)
        bounded = np.isfinite(lo) & np.isfinite(hi)
    # A feature whose range only the calibration set gives gets headroom beyond it: other
    # episodes reach further (HalfCheetah's torso angle, random play: 28 % of another seed's
    # observations beyond 200 calibration ones, up to 2.9 half-widths), and the int8 input
    # clips whatever lies outside its range.
    center, half = (low + high) / 2, (high - low) / 2
    headroom = np.where(bounded, 1.0, INPUT_HEADROOM)
    return InputNormalization.of_range(center - headroom * half, center + headroom * half)


#: Bumped when a compressed backend's build changes (2: QAT's input range covers the
#: observation space's bounds), so that a cache never hands out a file of the old build.
COMPRESSION_RECIPE = 2


def compressed_file_name(
    heads: str,
    backend: str,
    int8_io: str,
    calibration_key: str,
    settings: dict[str, Any],
    per_feature: bool = False,
) -> str:
    """Cache name of a compressed backend's file: the hash of its fine-tune ``settings``
    (:func:`~rlperf.tflite.finetune.finetune_settings`), calibration set, int8 I/O and
    per-feature input scaling."""
    keyed = {"finetune": settings, "calibration": calibration_key, "int8_io": int8_io,
             "recipe": COMPRESSION_RECIPE}  # fmt: skip
    if per_feature:  # (only then: the names of files without it stay as they were)
        keyed["per_feature"] = True
    key = settings_hash(keyed)
    return f"{heads}-{backend.removeprefix('tflite_')}-{key}.tflite"


def calibration_record(
    calib: ObservationSet, path: Path, input_range: tuple[np.ndarray, np.ndarray] | None
) -> dict[str, Any]:
    """``summary.json``'s ``calibration`` of a file made with ``calib`` (its metadata, its
    file, the observation range the conversion covers)."""
    record = {**calib.metadata(), "file": str(path)}
    if input_range is not None:
        record["input_range"] = [np.asarray(v).tolist() for v in input_range]
    return record


def build_variant(
    cache: ArtifactCache,
    cfg: DictConfig,
    backend: str,
    net: Any,
    env_cfg: dict[str, Any],
    fidelity: ObservationSet,
    obs_space: Any = None,
    edgetpu: bool = False,
) -> VariantBuild:
    """The ``.tflite`` that ``backend`` runs, from the cache or built now. Holds the cache lock.

    ``edgetpu``: the int8 model is the Edge TPU compiler's input (``edge.int8_io=auto``
    then gives it uint8 I/O: :func:`rlperf.tflite.convert.int8_io_for`).

    A compressed backend (:data:`~rlperf.specs.backends.COMPRESSION_BACKENDS`) is one
    file per settings, fine-tuned from the policy on the calibration set. Any other
    missing variant triggers one Keras export (verified against torch on the fidelity
    set) and the conversion of every variant of :data:`CACHED_VARIANTS` that is
    missing, so the other cells of a sweep find theirs ready.
    """
    spec, heads = BACKENDS[backend], str(cfg.edge.heads)
    int8_io = int8_io_for(str(cfg.edge.int8_io), edgetpu)
    t0 = time.perf_counter()
    calib, calib_name, new = calibration_set(cache, cfg, env_cfg, net, fidelity)
    timings = {"calibration_s": time.perf_counter() - t0}
    built, reused = ([calib_name], []) if new else ([], [calib_name])
    input_range = observation_range(obs_space)
    calib_meta = calibration_record(calib, cache.path(calib_name), input_range)
    calib_key = calib_name.removeprefix("calibration-").removesuffix(".npz")

    norm = input_normalization(str(cfg.edge.input_scaling), net, calib.observations, input_range)
    cal = _Calibrated(calib, calib_key, calib_meta, int8_io, input_range, norm)
    if spec.compressed:  # fine-tuned from the policy: one file per backend and settings
        return _compressed_variant(cache, cfg, backend, net, cal, built, reused, timings)
    names = {
        v: variant_file_name(heads, v, int8_io, calib_key, norm is not None)
        for v in CACHED_VARIANTS
    }
    export_name = f"export-{heads}.json"
    missing = [v for v, n in names.items() if not cache.has(n)]
    if missing or not cache.has(export_name):
        t0 = time.perf_counter()
        log.info("exporting the policy to Keras (heads=%s) and verifying it", heads)
        tolerance = float(cfg.edge.export_tolerance)
        model, check = export_policy(net, fidelity.observations, heads, tolerance)
        timings["export_s"] = time.perf_counter() - t0
        cache.write_json(export_name, check.to_dict())
        built.append(export_name)
        for v in missing:
            t0 = time.perf_counter()
            log.info("converting to TFLite %s", v)
            int8 = v == "int8"
            if int8 and norm is not None:  # rebuilt to take the normalized input
                normalized = build_keras_policy(net, heads, 1, input_normalization=norm)
                data = cal.convert(normalized, v, normalized=True)
            else:
                data = cal.convert(model, v)
            scaling = ("per_feature" if norm else "per_tensor") if int8 else None
            _store(cache, names[v], data, {"kind": f"tflite {v}", "heads": heads,
                   "int8_io": int8_io if int8 else None,
                   "calibration": calib_meta["file"] if int8 else None,
                   "input_scaling": scaling})  # fmt: skip
            timings[f"convert_{v}_s"] = time.perf_counter() - t0
            built.append(names[v])
    else:
        reused.append(export_name)
    reused.extend(n for v, n in names.items() if v not in missing)
    variant = str(spec.variant)
    return VariantBuild(cache.path(names[variant]), variant, cache.read_json(export_name),
                        calib_meta if variant == "int8" else None, built=built, reused=reused,
                        timings_s=timings)  # fmt: skip


@dataclass(frozen=True)
class _Calibrated:
    """What a build converts with: the calibration set (its cache key and record), the int8
    I/O, the observation range its conversion covers and the per-feature normalization."""

    calib: ObservationSet
    key: str
    meta: dict[str, Any]
    int8_io: str
    input_range: tuple[np.ndarray, np.ndarray] | None
    norm: InputNormalization | None

    def convert(self, model: Any, variant: str, normalized: bool = False) -> bytes:
        """``model`` converted to ``variant`` (:func:`~rlperf.tflite.convert.convert_keras`).
        ``normalized``: a model that takes the per-feature normalized input (``norm``):
        calibrated on normalized observations over [-1, 1] (headroom included), the
        normalization written into the file."""
        obs = self.calib.observations
        if not normalized or self.norm is None:
            return convert_keras(model, variant, obs, self.int8_io, self.input_range)
        unit = np.ones(self.norm.shape, np.float32)
        data = convert_keras(model, variant, self.norm.apply(obs), self.int8_io, (-unit, unit))
        return with_input_normalization(data, self.norm)


def _compressed_variant(
    cache: ArtifactCache,
    cfg: DictConfig,
    backend: str,
    net: Any,
    cal: _Calibrated,
    built: list[str],
    reused: list[str],
    timings: dict[str, float],
) -> VariantBuild:
    """:func:`build_variant` of a compressed backend: one file per backend and fine-tune
    settings, from the cache or fine-tuned from the policy on the calibration set now."""
    spec, heads = BACKENDS[backend], str(cfg.edge.heads)
    settings = finetune_settings(cfg)
    # QAT's file takes the normalized input too (HalfCheetah: p99 7.6 % -> 4.2 %). A
    # pruned-then-int8 file does not: magnitude pruning in the normalized space drops
    # other weights (the first layer's scaled by each feature's range), and lost more
    # return there (-178 against -87 on HalfCheetah).
    qat = spec.recipe is not None and spec.recipe.method == "qat"
    cnorm = cal.norm if qat else None
    name = compressed_file_name(heads, backend, cal.int8_io, cal.key, settings, cnorm is not None)
    info_name = name.removesuffix(".tflite") + ".json"
    if cache.has(name) and cache.has(info_name):
        reused.append(name)
    else:
        t0 = time.perf_counter()
        model, info = compress_policy(spec, net, heads, cal.calib, settings, cal.input_range,
                                      cnorm)  # fmt: skip
        data = cal.convert(model, str(spec.variant), normalized=cnorm is not None)
        info["input_scaling"] = "per_feature" if cnorm else "per_tensor"
        timings["compress_s"] = time.perf_counter() - t0
        _store(cache, name, data, {"kind": f"tflite {backend}", "heads": heads})
        cache.write_json(info_name, info)
        built.append(name)
    info = cache.read_json(info_name)
    label = backend.removeprefix("tflite_")
    return VariantBuild(cache.path(name), label, info.get("export"), cal.meta, info,
                        built=built, reused=reused, timings_s=timings)  # fmt: skip


def _store(cache: ArtifactCache, name: str, data: bytes, description: dict[str, Any]) -> None:
    """Write a ``.tflite`` into the cache and describe it (with the TensorFlow version)."""
    cache.write_bytes(name, data)
    cache.record_artifact(name, {**description, **_tf_version()})


def _tf_version() -> dict[str, str]:
    try:
        return {"tensorflow": metadata.version("tensorflow")}
    except metadata.PackageNotFoundError:
        return {}
