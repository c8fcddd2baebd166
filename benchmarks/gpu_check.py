"""Prove rlperf's GPU paths on this machine: one table, exit 1 if a check fails.

    python benchmarks/gpu_check.py [--out DIR] [--gpus N] [--dry-run] [--check-only]

The same as ``python -m rlperf.gpu_check`` (it ships in the wheel, for GPU
machines without a checkout); see docs/development.md#gpu-check.
"""

from rlperf.gpu_check.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
