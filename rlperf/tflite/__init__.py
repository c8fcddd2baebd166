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
