"""One command that proves rlperf's GPU paths on real hardware (``benchmarks/gpu_check.py``).

- :mod:`rlperf.gpu_check.sequence` -- the fixed, short sequence of rlperf jobs
  a machine with one or two GPUs runs, each through ``python -m rlperf``;
- :mod:`rlperf.gpu_check.checks` -- pure functions from the result folders to
  check rows (learner on CUDA, env runners' GPU shares as planned, ``gpu{i}_*``
  columns plausible, GPU learners faster than the CPU one);
- :mod:`rlperf.gpu_check.cli` -- ``python -m rlperf.gpu_check``: run, check,
  print one table.

It ships in the wheel, so a GPU machine with the wheelhouse
(``scripts/wheelhouse.py``) needs no checkout. Importing it is cheap: no Ray,
torch or TensorFlow.
"""
