"""The edge stage: benchmark a trained policy's TFLite variants on CPU and Edge TPU,
with a fidelity check.

Pipeline (``docs/edge.md``): the variants come from :mod:`rlperf.tflite` (export,
conversion, calibration and the artifact cache, shared with the serve stage) →
:mod:`~rlperf.edge.edgetpu` (compiler and runtime) → :mod:`~rlperf.edge.benchmark`
and :mod:`~rlperf.edge.fidelity`. :func:`rlperf.edge.edge_job.run_edge` is the Hydra
job. Importing this package is cheap: TensorFlow, LiteRT and torch are imported
by the functions that use them.
"""
