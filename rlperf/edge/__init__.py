"""The edge stage: export a trained policy to TensorFlow Lite, quantize it, compile it
for the Coral Edge TPU, and benchmark every variant with a fidelity check.

Pipeline (``docs/edge.md``): :mod:`~rlperf.edge.export` (torch → Keras, verified)
→ :mod:`~rlperf.edge.convert` (fp32 / int8 / dynamic / fp16 TFLite, calibrated by
:mod:`~rlperf.edge.calibration`) → :mod:`~rlperf.edge.edgetpu` (compiler and
runtime) → :mod:`~rlperf.edge.benchmark` and :mod:`~rlperf.edge.fidelity`, with
artifacts in :mod:`~rlperf.edge.cache`. :func:`rlperf.edge.job.run_edge` is the
Hydra job. Importing this package is cheap: TensorFlow, LiteRT and torch are
imported by the functions that use them.
"""

from __future__ import annotations

from rlperf.errors import UserError

# One skip signal for every stage: the job wrapper records it as status "skipped".
from rlperf.job import SkipCell


class EdgeError(RuntimeError):
    """An edge-stage failure with a message that says what to do."""


class ExportVerificationError(EdgeError):
    """The exported model does not reproduce the torch policy within the tolerance."""


class EdgeInputError(EdgeError, UserError):
    """A model file the edge stage cannot use as given (exit 2, docs/exit-codes.md)."""


class EdgeTpuModelOnCpuError(EdgeInputError):
    """An Edge-TPU-compiled ``.tflite`` was given to a CPU backend."""


__all__ = [
    "EdgeError",
    "EdgeInputError",
    "EdgeTpuModelOnCpuError",
    "ExportVerificationError",
    "SkipCell",
]
