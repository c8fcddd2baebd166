"""The env stage (``stage=env``): an env's raw throughput on one of its engines, no RLlib.

:mod:`~rlperf.env_bench.measure` is the timed loop (windows of the engine's step calls,
CPU and memory of the process tree); :func:`rlperf.env_bench.env_job.run_env_bench` is the
Hydra job. See ``docs/environment.md#env-stage``. Importing this package is cheap.
"""

from __future__ import annotations
