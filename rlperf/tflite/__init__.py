"""A trained policy as TensorFlow Lite models: the artifacts every inference stage shares.

Below the stages (the edge and serve stages both use it; neither imports the
other): :mod:`~rlperf.tflite.export` (torch → Keras, verified) →
:mod:`~rlperf.tflite.convert` (fp32 / int8 / dynamic / fp16 TFLite, calibrated on
real observations by :mod:`~rlperf.tflite.calibration`), built once per policy
into the content-addressed :mod:`~rlperf.tflite.cache` by
:mod:`~rlperf.tflite.artifacts`; :mod:`~rlperf.tflite.tflite_model` reads a
``.tflite`` file and :mod:`~rlperf.tflite.runtime` acts with it (LiteRT
interpreter, delegates) or with the torch policy. Importing this package is
cheap: TensorFlow, LiteRT and torch are imported by the functions that use them.
"""

from __future__ import annotations

from rlperf.errors import UserError


class TfliteError(RuntimeError):
    """A failure to build or run a TFLite policy, with a message that says what to do."""


class TfliteInputError(TfliteError, UserError):
    """A model file or policy the stage cannot use as given (exit 2, docs/exit-codes.md)."""


class ExportVerificationError(TfliteError):
    """The exported model does not reproduce the torch policy within the tolerance."""


class EdgeTpuModelOnCpuError(TfliteInputError):
    """An Edge-TPU-compiled ``.tflite`` was given to a CPU backend."""


__all__ = ["EdgeTpuModelOnCpuError", "ExportVerificationError", "TfliteError", "TfliteInputError"]
