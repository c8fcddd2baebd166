"""``python -m rlperf.gpu_check``: see :mod:`rlperf.gpu_check.cli`."""

from rlperf.gpu_check.cli import main

raise SystemExit(main())
