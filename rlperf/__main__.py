"""``python -m rlperf`` is the ``rlperf`` command."""

from rlperf.cli import main

main()
