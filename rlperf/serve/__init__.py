"""The serve stage: a trained policy behind Ray Serve, its latency under load.

``rlperf stage=serve run=<training folder>`` deploys the policy (torch, or a
TFLite variant from :mod:`rlperf.tflite`'s artifact cache) with Ray Serve on
127.0.0.1, drives it with rlperf's own load generator (closed loop and Poisson
open loop, latency from the *scheduled* send time), and writes per-request and
per-level results (``docs/serve.md``). Modules: :mod:`~rlperf.serve.payload`
(the binary wire format and its checks), :mod:`~rlperf.serve.model` (the
policy as a batch function, in-process and in a replica),
:mod:`~rlperf.serve.deployment` (the Serve deployments: policy and echo),
:mod:`~rlperf.serve.session` (Ray and Serve up and down, replica faults),
:mod:`~rlperf.serve.loadgen` (the generator), :mod:`~rlperf.serve.levels`
(statistics per load level, the max rate under the SLO) and
:mod:`~rlperf.serve.serve_job` (the stage's steps). Importing this package is cheap.
"""

from __future__ import annotations

from rlperf.errors import ServeError

__all__ = ["ServeError"]
