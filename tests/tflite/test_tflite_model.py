"""Reading .tflite files: the 2021 study's exported models (and their Edge TPU twins)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from support.edge_kit import study_reference_file

from rlperf.errors import EdgeTpuModelOnCpuError
from rlperf.tflite.tflite_model import (
    TensorInfo,
    dequantize_output,
    ensure_cpu_runnable,
    input_distortion,
    is_lossless_input,
    logits_output,
    quantize_input,
    read_tflite,
)

needs_thesis = pytest.mark.skipif(
    study_reference_file("exported_models/model1_quant.tflite") is None
    or study_reference_file("datasets/dataset_model1.npy") is None,
    reason="the study's reference files are absent",
)


def study_file(relative: str) -> Path:
    path = study_reference_file(relative)
    if path is None:
        pytest.skip(f"the study's {relative} is absent")
    return path


STUDY_DIMS = {"model1": 84, "model3": 252, "model4": 168}


@pytest.fixture(scope="module")
def dataset() -> np.ndarray:
    from support.edge_kit import load_study_dataset

    return load_study_dataset(study_file("datasets/dataset_model1.npy"))


@needs_thesis
@pytest.mark.parametrize("model", sorted(STUDY_DIMS))
def test_study_quant_models_read(model: str) -> None:
    info = read_tflite(study_file(f"exported_models/{model}_quant.tflite"))
    dim = STUDY_DIMS[model]
    (inp,) = info.inputs
    assert inp.shape == (1, dim, dim, 4)
    assert inp.dtype == "uint8"
    assert inp.scale == pytest.approx(236 / 255, abs=1e-6)  # 0.92549
    assert inp.zero_point == 0
    assert not is_lossless_input(inp)
    assert [o.shape for o in info.outputs] == [(1, 1, 1, 6), (1, 1)]
    assert all(o.dtype == "uint8" for o in info.outputs)
    assert info.variant == "int8"
    assert not info.is_edgetpu_compiled
    assert info.op_counts["CONV_2D"] == 2 * (3 if model == "model1" else 4) + 2
    assert info.op_counts["QUANTIZE"] == 3
    assert logits_output(info, 6).shape == (1, 1, 1, 6)


@needs_thesis
@pytest.mark.parametrize("model", sorted(STUDY_DIMS))
def test_study_edgetpu_twins_detected_and_refused(model: str) -> None:
    path = study_file(f"exported_models/{model}_quant_edgetpu.tflite")
    info = read_tflite(path)
    assert info.is_edgetpu_compiled
    assert info.variant == "edgetpu"
    assert info.op_counts == {"edgetpu-custom-op": 1}  # the whole model in one TPU subgraph
    assert info.edgetpu_custom_ops == 1
    assert info.cpu_ops_outside_edgetpu == {}
    assert info.inputs[0].scale == pytest.approx(236 / 255, abs=1e-6)
    with pytest.raises(EdgeTpuModelOnCpuError, match="edgetpu-custom-op.*backend=edgetpu"):
        ensure_cpu_runnable(info, "tflite_int8")


@needs_thesis
def test_edgetpu_file_refused_by_cpu_benchmark_with_clear_error() -> None:
    """The CPU path raises our message, not TFLite's 'unresolved custom op'."""
    from rlperf.edge.benchmark import BenchmarkSpec, make_actor

    path = study_file("exported_models/model1_quant_edgetpu.tflite")
    spec = BenchmarkSpec("tflite", str(path), {}, 6, None)
    with pytest.raises(EdgeTpuModelOnCpuError, match="compiled for the Edge TPU"):
        make_actor(spec)


@needs_thesis
def test_study_model1_runs_on_dataset_frames(dataset: np.ndarray) -> None:
    from rlperf.tflite.runtime import TfliteActor

    assert dataset.shape == (101, 84, 84, 4)
    assert (int(dataset.min()), int(dataset.max())) == (52, 236)
    actor = TfliteActor(study_file("exported_models/model1_quant.tflite"), 6, threads=1)
    logits = actor.logits(dataset)
    assert logits.shape == (101, 6)
    # The study's README: this (untrained-looking) model picks action 0 for every frame.
    assert np.bincount(logits.argmax(axis=1), minlength=6).tolist() == [101, 0, 0, 0, 0, 0]
    assert [actor.act(f) for f in dataset[:5]] == [0] * 5
    assert actor.forward_ns > 0
    # Dequantized logits sit on the output grid (scale 0.05956, zero point 140).
    step = actor.output.scale
    assert np.allclose(np.round(logits / step) * step, logits, atol=1e-5)
    # XNNPACK takes the convs; the uint8<->int8 QUANTIZE ops stay on builtin kernels.
    assert actor.delegate.status == "partial"
    assert actor.delegate.delegated_ops["xnnpack"] == {"CONV_2D": 8, "RESHAPE": 1}
    assert actor.delegate.cpu_ops == {"QUANTIZE": 3}


@needs_thesis
def test_builtin_kernels_only_when_xnnpack_off(dataset: np.ndarray) -> None:
    from rlperf.tflite.runtime import TfliteActor

    path = study_file("exported_models/model1_quant.tflite")
    ref = TfliteActor(path, 6, xnnpack=False)
    assert ref.delegate.status == "none"
    assert sum(ref.delegate.cpu_ops.values()) == 12
    fast = TfliteActor(path, 6, xnnpack=True)
    # Same integer arithmetic with and without XNNPACK, within one quantization step.
    diff = np.abs(ref.logits(dataset[:20]) - fast.logits(dataset[:20]))
    assert diff.max() <= ref.output.scale + 1e-6


@needs_thesis
def test_study_input_scale_distorts_raw_bytes(dataset: np.ndarray) -> None:
    inp = read_tflite(study_file("exported_models/model1_quant.tflite")).inputs[0]
    d = input_distortion(inp, dataset)
    # A raw byte 236 is read as 236 * 236/255 = 218.4: off by 17.6 pixel levels.
    assert d["raw_bytes_max_err"] == pytest.approx(236 - 236 * 236 / 255, abs=1e-3)
    assert d["quantized_max_err"] <= inp.scale / 2 + 1e-6
    assert quantize_input(np.array([0, 118, 236], np.uint8), inp).tolist() == [0, 128, 255]


def test_quantize_roundtrip_and_lossless_paths() -> None:
    frame = np.arange(256, dtype=np.uint8)
    u8 = TensorInfo("x", 0, (256,), "uint8", (1.0,), (0,))
    i8 = TensorInfo("x", 0, (256,), "int8", (1.0,), (-128,))
    f32 = TensorInfo("x", 0, (256,), "float32")
    assert is_lossless_input(u8) and is_lossless_input(i8) and not is_lossless_input(f32)
    assert quantize_input(frame, u8) is frame
    q = quantize_input(frame, i8)
    assert q.dtype == np.int8
    assert (q.astype(int) == frame.astype(int) - 128).all()
    assert (dequantize_output(q, i8) == frame).all()
    assert quantize_input(frame, f32).dtype == np.float32
    coarse = TensorInfo("y", 0, (256,), "uint8", (2.0,), (10,))
    back = dequantize_output(quantize_input(frame, coarse), coarse)
    assert np.abs(back - frame).max() <= 1.0
    assert input_distortion(u8)["lossless"] and input_distortion(u8)["raw_bytes_max_err"] == 0


def test_not_a_tflite_file(tmp_path) -> None:
    bad = tmp_path / "x.tflite"
    bad.write_bytes(b"not a model at all")
    with pytest.raises(ValueError, match="not a TensorFlow Lite flatbuffer"):
        read_tflite(bad)
