"""Prepare an edge cell's model file: the step between resolving the cell and benchmarking it.

``backend=edgetpu``: the runtime and a device are checked first (the cell is skipped
without them, before anything is built). The file is the backend's variant from the
policy's artifact cache (:func:`rlperf.tflite.artifacts.build_variant`, with the
fidelity set), or ``model_path`` as given; Edge TPU cells compile it with
``edgetpu_compiler`` (cached with the compiler's log). Config keys: ``backend.name``,
``model_path``, ``edge.edgetpu_source``, ``edge.edgetpu_library``, ``edge.edgetpu_device``
and the variant builder's ``edge.*``.
"""

from __future__ import annotations

import logging
import shutil
import time
from dataclasses import replace
from typing import Any

from omegaconf import DictConfig

from rlperf.edge.cell import EdgeCell
from rlperf.edge.edgetpu import (
    INSTALL_HINT,
    compile_model,
    find_runtime,
    parse_compiler_output,
    probe_delegate,
)
from rlperf.errors import EdgeTpuUnavailable
from rlperf.tflite.artifacts import VariantBuild, build_variant, fidelity_set
from rlperf.tflite.cache import ArtifactCache, file_sha256

log = logging.getLogger("rlperf.edge")


def edgetpu_preflight(cfg: DictConfig) -> dict[str, Any]:
    """Runtime and device present? Otherwise skip the cell (with the install hint)."""
    library = str(cfg.edge.edgetpu_library)
    device = cfg.edge.edgetpu_device
    runtime = find_runtime(library)
    if not runtime.available:
        log.warning("%s\n%s", runtime.reason, INSTALL_HINT)
        raise EdgeTpuUnavailable(f"{runtime.reason}. {INSTALL_HINT}")
    probe_delegate(library, device)
    return {"runtime": runtime.to_dict(), "library": library, "device": device}


def prepare_variant(cell: EdgeCell) -> None:
    """The model file the backend runs: built (or reused) in the policy's cache with the
    fidelity set, or ``model_path`` (compiled for the Edge TPU where needed)."""
    cfg, backend, cache, edgetpu = cell.cfg, cell.backend, cell.cache, cell.spec.on_edgetpu
    if cell.net is not None and not cell.spec.in_rllib:
        with cache.lock():
            cell.fidelity, cell.fidelity_name, new = fidelity_set(cache, cfg, cell.env, cell.net)
            if cell.model_file is None:
                int8_backend = str(cfg.edge.edgetpu_source) if edgetpu else backend
                variant = build_variant(
                    cache, cfg, int8_backend, cell.net, cell.env, cell.fidelity, cell.obs_space,
                    edgetpu=edgetpu,
                )  # fmt: skip
                (variant.built if new else variant.reused).insert(0, cell.fidelity_name)
                cell.variant = compile_variant(cache, variant) if edgetpu else variant
    if cell.model_file is not None:
        cell.variant = file_variant(cell)


def file_variant(cell: EdgeCell) -> VariantBuild:
    """``model_path`` as it is, or its Edge-TPU-compiled twin for ``backend=edgetpu``."""
    assert cell.model_file is not None and cell.file_info is not None
    variant = VariantBuild(cell.model_file, cell.file_info.variant)
    spec = cell.spec
    expected = spec.variant if not spec.compressed else None
    if expected is not None and expected != variant.variant and not spec.on_edgetpu:
        log.warning(
            "backend=%s but %s is a %s model; it is benchmarked as it is",
            cell.backend, cell.model_file.name, variant.variant,
        )  # fmt: skip
    if cell.spec.on_edgetpu and not cell.file_info.is_edgetpu_compiled:
        file_cache = ArtifactCache(cell.cache_root, "file-" + file_sha256(cell.model_file)[:16])
        with file_cache.lock():
            variant = compile_variant(file_cache, variant)
    return variant


def compile_variant(cache: ArtifactCache, int8: VariantBuild) -> VariantBuild:
    """The Edge-TPU-compiled twin of an int8 model (compiled once, cached with its log):
    the int8 build's record, with the compilation's."""
    stem = int8.path.stem
    name = f"{stem}_edgetpu.tflite"
    log_name = f"{stem}_edgetpu.compiler.txt"
    out = replace(int8, path=cache.path(name), variant="edgetpu", compiler=None,
                  compiler_log=None, built=list(int8.built), reused=list(int8.reused),
                  timings_s=dict(int8.timings_s))  # fmt: skip
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
