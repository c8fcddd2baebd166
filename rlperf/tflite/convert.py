"""Keras policy -> TensorFlow Lite: float32, float16, dynamic-range, full-integer int8, int16x8.

=========== ======================== ============================================
variant     backend                  what the converter does
=========== ======================== ============================================
fp32        ``tflite_fp32``          plain conversion, float32 in/out
fp16        ``tflite_fp16``          float16 weights (dequantized at load), float32 math on CPU
dynamic     ``tflite_dynamic``       int8 weights, activations quantized on the fly, float32 in/out
int8        ``tflite_int8``,         full-integer post-training quantization, calibrated on real
            ``edgetpu`` (compiled)   observations; uint8 input and output (the study's format)
int16x8     (no backend yet)         int16 activations, int8 weights, float32 in/out
qat         ``tflite_qat``           a quantization-aware-trained model (ranges learned in
                                     training, :mod:`~rlperf.tflite.compress`): int8 weights
                                     and activations, float32 in/out
=========== ======================== ============================================

Which variant each backend runs is its spec's (:mod:`rlperf.specs.backends`).

int8 input quantization is made exact: the exported model takes raw 0..255
pixels, and calibration always sees one pixel at 0 and one at 255 (see
:func:`with_full_pixel_range`), so the input gets scale 1 and zero point 0
(uint8; -128 with ``edge.int8_io=int8``) and a raw frame is the quantized
input, bit for bit. The study's file was
calibrated on frames whose brightest pixel was 236, got scale 236/255 and
distorted every frame fed to it as raw bytes. :func:`convert_keras` checks the
result and refuses a model whose uint8 input is not exact.

Observations that are not uint8 frames (an MLP policy's float32 vectors, a
Discrete state as a number) are quantized with the scale calibration gives
them. The calibration then always covers ``input_range`` — the env's
observation bounds where they are finite (0..n-1 for a Discrete state), the
calibration set's own extremes where not — through two extra samples at its
low and high ends (:func:`with_value_range`), so observations the trained
policy meets beyond what random play saw are not clipped to a narrower range.

That range is one scale for the whole input tensor. A full-integer model of Box
observations (``int8``) therefore takes them normalized per feature
(``edge.input_scaling=per_feature``, the default): each feature's range maps onto [-1, 1]
outside the graph, the inverse folded into the first layer
(:class:`~rlperf.tflite.tflite_model.InputNormalization`, written into the file).
"""

from __future__ import annotations

import contextlib
import io
import os
import warnings
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from rlperf.errors import TfliteError
from rlperf.tflite.tflite_model import is_lossless_input, read_tflite

VARIANTS = ("fp32", "fp16", "dynamic", "int8", "int16x8", "qat")
INT8_IO = ("uint8", "int8")


def int8_io_for(setting: str, edgetpu: bool) -> str:
    """The I/O type of an int8 model under ``edge.int8_io=setting``: ``auto`` is ``uint8``
    for a model the Edge TPU compiler takes (its format, and the study's) and ``int8`` on
    CPU, where uint8 I/O costs two QUANTIZE ops that XNNPACK does not take (the shift of
    a uint8 frame to int8 is then a bit flip outside the graph, inside the timed action:
    :func:`rlperf.tflite.tflite_model.quantize_input`)."""
    if setting == "auto":
        return "uint8" if edgetpu else "int8"
    return setting


def import_tensorflow() -> Any:
    """Import TensorFlow quietly (its C++ info logs would drown the job log)."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    # TensorFlow: deferred to this one function (the edge and serve stages import this module).
    import tensorflow as tf

    return tf


def with_full_pixel_range(observations: np.ndarray) -> np.ndarray:
    """A copy of ``observations`` whose first frame has one pixel at 0 and one at 255.

    Two pixels in one frame barely move the calibrated activation ranges, but
    they fix the input range to exactly [0, 255]: uint8 scale 1, zero point 0.
    """
    obs = np.array(observations, dtype=np.uint8, copy=True)
    flat = obs[0].reshape(-1)
    flat[0], flat[1] = 0, 255
    return obs


def value_range(
    observations: np.ndarray, input_range: tuple[np.ndarray, np.ndarray] | None
) -> tuple[np.ndarray, np.ndarray]:
    """Per value, the range a calibration covers: the observations' extremes, widened to
    ``input_range`` where it is finite."""
    obs = np.asarray(observations, dtype=np.float32)
    low, high = obs.min(axis=0), obs.max(axis=0)
    if input_range is not None:
        lo = np.broadcast_to(np.asarray(input_range[0], np.float32), low.shape)
        hi = np.broadcast_to(np.asarray(input_range[1], np.float32), high.shape)
        low = np.where(np.isfinite(lo), np.minimum(lo, low), low)
        high = np.where(np.isfinite(hi), np.maximum(hi, high), high)
    return low, high


def with_value_range(
    observations: np.ndarray, input_range: tuple[np.ndarray, np.ndarray] | None
) -> np.ndarray:
    """float32 ``observations`` plus two samples at the low and high end of
    :func:`value_range` (per value; the observations' own extremes where the range is not
    finite or not given)."""
    low, high = value_range(observations, input_range)
    return np.concatenate([np.asarray(observations, dtype=np.float32), low[None], high[None]])


def representative_dataset(
    observations: np.ndarray, input_range: tuple[np.ndarray, np.ndarray] | None = None
) -> Callable[[], Iterator[list[np.ndarray]]]:
    """The converter's calibration generator: one float32 observation per sample (uint8
    frames as raw pixels with the full 0..255 range, other observations with
    :func:`with_value_range`)."""
    if np.asarray(observations).dtype == np.uint8:
        frames = with_full_pixel_range(observations).astype(np.float32)
    else:
        frames = with_value_range(observations, input_range)

    def gen() -> Iterator[list[np.ndarray]]:
        for frame in frames:
            yield [frame.reshape(1, -1) if frame.ndim == 0 else frame[None]]

    return gen


def convert_keras(
    model: Any,
    variant: str,
    calibration: np.ndarray | None = None,
    int8_io: str = "uint8",
    input_range: tuple[np.ndarray, np.ndarray] | None = None,
) -> bytes:
    """Convert a Keras policy (:func:`rlperf.tflite.export.build_keras_policy`) to TFLite bytes.

    Args:
        model: the batch-1 Keras model.
        variant: one of :data:`VARIANTS`.
        calibration: observations, required for int8 and int16x8: uint8 frames
            ``(N, dim, dim, C)``, or the float / integer observations of an MLP policy.
        int8_io: type of the int8 model's input and output (``edge.int8_io``):
            ``"uint8"`` (the study's and the Edge TPU's usual format) or ``"int8"``.
            With uint8, TFLite adds uint8<->int8 QUANTIZE ops that XNNPACK does not
            take (about 20 us for an 84x84x4 frame on x86); int8 has none.
        input_range: (low, high) the calibration of non-frame observations must cover.

    Raises:
        TfliteError: int8 calibration missing, or the int8 input is not exactly scale 1 /
            zero point 0.
    """
    tf = import_tensorflow()
    if variant not in VARIANTS:
        raise ValueError(f"unknown TFLite variant {variant!r}; choose one of {VARIANTS}")
    converter = tf.lite.TFLiteConverter.from_keras_model(model)
    if variant != "fp32":
        converter.optimizations = [tf.lite.Optimize.DEFAULT]
    if variant == "fp16":
        converter.target_spec.supported_types = [tf.float16]
    if variant in ("int8", "int16x8"):
        if calibration is None or len(calibration) == 0:
            raise TfliteError(
                f"the {variant} conversion needs a calibration set (edge.calibration_size > 0)"
            )
        converter.representative_dataset = representative_dataset(calibration, input_range)
    if variant == "int8":
        converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
        if int8_io not in INT8_IO:
            raise ValueError(f"edge.int8_io={int8_io!r} must be one of {INT8_IO}")
        io_type = tf.uint8 if int8_io == "uint8" else tf.int8
        converter.inference_input_type = io_type
        converter.inference_output_type = io_type
    if variant == "int16x8":
        converter.target_spec.supported_ops = [
            tf.lite.OpsSet.EXPERIMENTAL_TFLITE_BUILTINS_ACTIVATIONS_INT16_WEIGHTS_INT8
        ]
    # Keras 3 prints the temporary SavedModel's signature to stdout on export.
    with contextlib.redirect_stdout(io.StringIO()), warnings.catch_warnings():
        # Emitted for every uint8/int8 interface; the input range comes from calibration.
        warnings.filterwarnings("ignore", message="Statistics for quantized inputs")
        data = bytes(converter.convert())
    if variant == "int8" and np.asarray(calibration).dtype == np.uint8:
        _check_exact_input(data)
    return data


def _check_exact_input(data: bytes) -> None:

    info = read_tflite(data)
    bad = [t for t in info.inputs if not is_lossless_input(t)]
    if bad:
        t = bad[0]
        raise TfliteError(
            f"int8 conversion produced input {t.name!r} as {t.dtype} with scale {t.scale} and "
            f"zero point {t.zero_point}; expected scale 1 and zero point 0 (uint8) or -128 "
            f"(int8), so raw frames are fed losslessly. Is the Keras model's input raw 0..255 "
            f"pixels?"
        )
